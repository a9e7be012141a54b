/* fitness: see fitness.h. */
#include "topo/fitness.h"

#include <stdio.h>
#include <string.h>

/* One reason a GPU is unfit: true with out->why written when it holds. g is NVML's answer for the GPU (NULL:
 * not listed or not read). */
typedef bool reason_fn(const struct ddp_fitness_in *in, const struct ddp_nvml_gpu *g, struct ddp_fitness_verdict *out);

static bool is_lost(const struct ddp_fitness_in *in, const struct ddp_nvml_gpu *g, struct ddp_fitness_verdict *out)
{
    if (!g && in->restart && in->nv && in->nv->found) { /* it was there at launch: a lost GPU is no longer listed */
        snprintf(out->why, sizeof out->why, "NVML no longer lists it (lost: fallen off the bus or reset)");
        return true;
    }
    if (g && g->lost) {
        snprintf(out->why, sizeof out->why, "NVML says the GPU is lost (GPU_IS_LOST: fallen off the bus)");
        return true;
    }
    return false;
}

static bool is_faulty(const struct ddp_fitness_in *in, const struct ddp_nvml_gpu *g, struct ddp_fitness_verdict *out)
{
    (void)in;
    return g && *ddp_nvml_health_fault(&g->health, out->why, sizeof out->why);
}

static bool is_leased(const struct ddp_fitness_in *in, const struct ddp_nvml_gpu *g, struct ddp_fitness_verdict *out)
{
    (void)g;
    if (in->leased_by)
        snprintf(out->why, sizeof out->why, "leased by %s", in->leased_by);
    return in->leased_by != NULL;
}

static bool is_held(const struct ddp_fitness_in *in, const struct ddp_nvml_gpu *g, struct ddp_fitness_verdict *out)
{
    char who[160];
    (void)g;
    if (!out->holder || (in->restart && in->held_at_launch))
        return false;
    ddp_nvml_proc_describe(out->holder, who, sizeof who);
    if (in->restart)
        snprintf(out->why, sizeof out->why, "now held by %s, which was not there at launch", who);
    else
        snprintf(out->why, sizeof out->why, "held by %s", who);
    return true;
}

/* The reasons, asked in this order: a new reason is one row here (and its verdict in fitness.h). */
static const struct {
    enum ddp_fitness fit;
    reason_fn *holds;
} reasons[] = {
    {DDP_FIT_LOST, is_lost},
    {DDP_FIT_FAULT, is_faulty},
    {DDP_FIT_LEASED, is_leased},
    {DDP_FIT_HELD, is_held},
};

void ddp_fitness_judge(const struct ddp_fitness_in *in, struct ddp_fitness_verdict *out)
{
    const struct ddp_nvml_gpu *g = in->gpu ? in->gpu : in->nv && in->busid ? ddp_nvml_find(in->nv, in->busid) : NULL;
    long long threshold = in->threshold > 0 ? in->threshold : DDP_GPU_BUSY_THRESHOLD;

    memset(out, 0, sizeof *out);
    out->held_bytes = -1;
    if (g && g->mem_used >= 0) { /* NVML read its memory and processes */
        const struct ddp_nvml_proc *largest = ddp_nvml_foreign(g, 0, NULL, 0);
        out->held_bytes = largest ? largest->mem_used : 0;
        out->holder = ddp_nvml_foreign(g, threshold, NULL, 0);
    } else if (in->unheld) {
        out->held_bytes = 0;
    }
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].holds(in, g, out)) {
            out->fit = reasons[i].fit;
            return;
        }
    out->why[0] = '\0';
    out->fit = out->held_bytes < 0 ? DDP_FIT_UNKNOWN : DDP_FIT_OK;
}

void ddp_fitness_judge_restart(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch,
                               struct ddp_fitness_verdict *out)
{
    struct ddp_fitness_in in = {.busid = busid, .nv = nv, .restart = true, .held_at_launch = held_at_launch};
    ddp_fitness_judge(&in, out);
}

void ddp_fitness_judge_event(unsigned long long type, unsigned long long data, const char *text,
                             struct ddp_fitness_verdict *out)
{
    bool fault = type == DDP_NVML_EV_ECC_DBE;
    if (type == DDP_NVML_EV_XID)
        ddp_nvml_xid_meaning(data, &fault);
    memset(out, 0, sizeof *out);
    out->held_bytes = -1;
    out->fit = fault ? DDP_FIT_FAULT : DDP_FIT_OK;
    if (fault)
        snprintf(out->why, sizeof out->why, "%s", text ? text : "an NVML fault event");
}

bool ddp_fitness_usable(const struct ddp_fitness_verdict *v)
{
    return v->fit == DDP_FIT_OK || v->fit == DDP_FIT_UNKNOWN;
}

bool ddp_fitness_leaves_out(const struct ddp_fitness_verdict *v, enum ddp_gpu_busy busy)
{
    return !ddp_fitness_usable(v) && (v->fit != DDP_FIT_HELD || busy == DDP_BUSY_SKIP);
}

bool ddp_fitness_refuses(const struct ddp_fitness_verdict *v, enum ddp_gpu_busy busy)
{
    return !ddp_fitness_usable(v) && (v->fit != DDP_FIT_HELD || busy == DDP_BUSY_FAIL);
}

enum ddp_fitness_load ddp_fitness_load(long long mem_used, long long mem_total, int util)
{
    double pct = mem_total > 0 && mem_used >= 0 ? 100.0 * (double)mem_used / (double)mem_total : 0;
    if (pct >= 80.0)
        return DDP_FIT_LOAD_FULL;
    if ((mem_used >= 0 && (mem_used >= DDP_GPU_BUSY_THRESHOLD || pct >= 10.0)) || util >= 10)
        return DDP_FIT_LOAD_SHARED;
    return DDP_FIT_LOAD_IDLE;
}
