/* libFuzzer harness for launcher/nccl: input lines "NAME=VALUE" become [nccl] keys (odd lines) and inherited
 * environment entries (even lines); validation and presets must not crash or leak, an error has a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/nccl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *text = ddp_xstrndup((const char *)data, size);
    struct ddp_kvlist nccl = {0};
    struct ddp_strv env = {0};
    int i = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
        char *eq = strchr(line, '=');
        if (!eq || eq == line)
            continue;
        if (i % 2 == 0) {
            *eq = '\0';
            ddp_kvlist_set(&nccl, line, eq + 1, DDP_ORIGIN_SPEC, "fuzz.ini", i + 1);
        } else {
            ddp_strv_push(&env, line);
        }
    }
    struct ddp_strv warnings = {0};
    struct ddp_err err = {0};
    if (ddp_nccl_preset_apply(nccl.n % 2 ? "debug" : "robust", nccl.n % 3 ? "/logs" : NULL, &nccl, &err) != 0)
        abort();
    int rc = ddp_nccl_validate(&nccl, env.v, &warnings, &err);
    if (rc < 0 && err.msg[0] == '\0')
        abort();
    ddp_strv_clear(&warnings);
    ddp_strv_clear(&env);
    ddp_kvlist_free(&nccl);
    free(text);
    return 0;
}
