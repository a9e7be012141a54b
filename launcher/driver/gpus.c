/* gpus: see gpus.h. */
#include "driver/gpus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

void ddp_gpus_held_free(char **held, size_t n)
{
    for (size_t i = 0; held && i < n; i++)
        free(held[i]);
    free(held);
}

int ddp_gpus_launch_check(const struct ddp_topo *topo, const struct ddp_spec *spec, const struct ddp_attempt *a,
                          FILE *f, char ***held, struct ddp_err *err)
{
    size_t ngpus = ddp_topo_ngpus(topo);
    char **h = ddp_xcalloc(ngpus + 1, sizeof *h);
    int rc = 0;

    if (held)
        *held = NULL;
    for (size_t i = 0; topo && i < a->nworkers && rc == 0; i++) {
        int g = a->workers[i].gpu;
        struct ddp_topo_gpu_facts facts;
        if (g < 0 || (size_t)g >= ngpus || h[g] || ddp_topo_gpu_facts(topo, (size_t)g, &facts) < 0 || !facts.nvml)
            continue;
        const struct ddp_nvml_proc *p = ddp_nvml_foreign(facts.nvml, DDP_GPU_BUSY_THRESHOLD, NULL, 0);
        if (!p)
            continue;
        char who[160];
        ddp_nvml_proc_describe(p, who, sizeof who);
        h[g] = ddp_xstrdup(who);
        double used = (double)facts.nvml->mem_used / 1073741824.0, total = (double)facts.nvml->mem_total / 1073741824.0;
        if (spec->gpus_busy == DDP_BUSY_FAIL)
            rc = ddp_errf(err, -EBUSY,
                          "GPU %d (%s) is held by %s: %.1f of %.1f GiB in use; [gpus] busy = fail, so nothing was "
                          "started (busy = skip chooses other GPUs)",
                          g, facts.busid, who, used, total);
        else if (f)
            fprintf(f,
                    "ddplaunch: warning: GPU %d (%s) is held by %s: %.1f of %.1f GiB in use, the job may run out of "
                    "memory ([gpus] busy = skip chooses other GPUs, fail refuses)\n",
                    g, facts.busid, who, used, total);
    }
    if (held && rc == 0)
        *held = h;
    else
        ddp_gpus_held_free(h, ngpus);
    return rc;
}

bool ddp_gpus_unfit(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch, char *buf, size_t size)
{
    const struct ddp_nvml_gpu *g = nv ? ddp_nvml_find(nv, busid) : NULL;
    if (!g && nv && nv->found) { /* it was there at launch: a GPU that fell off the bus is no longer listed */
        snprintf(buf, size, "NVML no longer lists it (lost: fallen off the bus or reset)");
        return true;
    }
    if (!g)
        return false;
    if (g->lost) {
        snprintf(buf, size, "NVML says the GPU is lost (GPU_IS_LOST: fallen off the bus)");
        return true;
    }
    char fault[256];
    if (*ddp_nvml_health_fault(&g->health, fault, sizeof fault)) {
        snprintf(buf, size, "%s", fault);
        return true;
    }
    const struct ddp_nvml_proc *p = ddp_nvml_foreign(g, DDP_GPU_BUSY_THRESHOLD, NULL, 0);
    if (p && !held_at_launch) {
        char who[160];
        snprintf(buf, size, "now held by %s, which was not there at launch",
                 ddp_nvml_proc_describe(p, who, sizeof who));
        return true;
    }
    return false;
}
