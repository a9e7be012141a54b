/* fitness: see fitness.h. */
#include "topo/fitness.h"

#include <stdio.h>
#include <string.h>

#include "spec/spec.h"

void ddp_fitness_judge(const struct ddp_fitness_in *in, struct ddp_fitness_verdict *out)
{
    const struct ddp_nvml_gpu *g = in->nv && in->busid ? ddp_nvml_find(in->nv, in->busid) : NULL;
    char text[256], who[160];

    memset(out, 0, sizeof *out);
    out->held_bytes = -1;
    if (g && g->mem_used >= 0) { /* NVML read its memory and processes */
        const struct ddp_nvml_proc *largest = ddp_nvml_foreign(g, 0, NULL, 0);
        out->held_bytes = largest ? largest->mem_used : 0;
        out->holder = ddp_nvml_foreign(g, in->threshold, NULL, 0);
    } else if (in->unheld) {
        out->held_bytes = 0;
    }
    if (!g && in->restart && in->nv && in->nv->found) { /* it was there at launch: a lost GPU is no longer listed */
        out->fit = DDP_FIT_LOST;
        snprintf(out->why, sizeof out->why, "NVML no longer lists it (lost: fallen off the bus or reset)");
        return;
    }
    if (g && g->lost) {
        out->fit = DDP_FIT_LOST;
        snprintf(out->why, sizeof out->why, "NVML says the GPU is lost (GPU_IS_LOST: fallen off the bus)");
        return;
    }
    if (g && *ddp_nvml_health_fault(&g->health, text, sizeof text)) {
        out->fit = DDP_FIT_FAULT;
        snprintf(out->why, sizeof out->why, "%s", text);
        return;
    }
    if (in->leased_by) {
        out->fit = DDP_FIT_LEASED;
        snprintf(out->why, sizeof out->why, "leased by %s", in->leased_by);
        return;
    }
    if (out->holder && !(in->restart && in->held_at_launch)) {
        out->fit = DDP_FIT_HELD;
        ddp_nvml_proc_describe(out->holder, who, sizeof who);
        if (in->restart)
            snprintf(out->why, sizeof out->why, "now held by %s, which was not there at launch", who);
        else
            snprintf(out->why, sizeof out->why, "held by %s", who);
        return;
    }
    out->fit = out->held_bytes < 0 ? DDP_FIT_UNKNOWN : DDP_FIT_OK;
}

void ddp_fitness_judge_restart(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch,
                               struct ddp_fitness_verdict *out)
{
    struct ddp_fitness_in in = {.busid = busid,
                                .nv = nv,
                                .threshold = DDP_GPU_BUSY_THRESHOLD,
                                .restart = true,
                                .held_at_launch = held_at_launch};
    ddp_fitness_judge(&in, out);
}

bool ddp_fitness_usable(const struct ddp_fitness_verdict *v)
{
    return v->fit == DDP_FIT_OK || v->fit == DDP_FIT_UNKNOWN;
}
