/* replaced: see replaced.h. */
#include "run/replaced.h"

#include <string.h>

/* NAME's value in an envp-shaped vector, or NULL. */
static const char *strv_env_get(const struct ddp_strv *env, const char *name)
{
    int i = ddp_strv_env_find(env, name);
    return i < 0 ? NULL : strchr(env->v[i], '=') + 1;
}

void ddp_replaced_notes(char *const *base_env, const struct ddp_spec *spec, const struct ddp_attempt *a,
                        struct ddp_strv *out)
{
    if (!a->nworkers)
        return;
    const struct ddp_strv *env = &a->workers[0].envp;
    const char *had = ddp_env_get(base_env, "MASTER_PORT"), *got = strv_env_get(env, "MASTER_PORT");
    if (had && *had && got && strcmp(had, got) != 0) {
        static const char *const from[] = {"default", "the site config", "the job spec",
                                           "a PET_ or DDPLAUNCH_ "
                                           "variable",
                                           "the command line"};
        int k = ddp_spec_key_find("job", "master_port");
        if (spec->master_port.is_auto)
            ddp_strv_pushf(out,
                           "note: MASTER_PORT=%s from the environment is replaced by %s (master_port = auto, as "
                           "torchrun ignores it too); to keep it, pass --master-port %s",
                           had, got, had);
        else
            ddp_strv_pushf(out, "note: MASTER_PORT=%s from the environment is replaced by %s (master_port, from %s)",
                           had, got, k >= 0 ? from[spec->origin[k]] : "the job");
    }
    had = ddp_env_get(base_env, "CUDA_VISIBLE_DEVICES");
    got = strv_env_get(env, "CUDA_VISIBLE_DEVICES");
    if (had && *had && got && !*got && a->workers[0].gpu < 0)
        ddp_strv_pushf(out,
                       "note: CUDA_VISIBLE_DEVICES=%s from the environment is blanked for the workers: they run on "
                       "the CPU (no usable GPU here, or [gpus] select = none)",
                       had);
}
