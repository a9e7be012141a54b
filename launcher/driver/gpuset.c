/* gpuset: see gpuset.h. */
#include "driver/gpuset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "host/lease.h"
#include "spec/spec.h"
#include "topo/fitness.h"
#include "topo/place.h"

struct ddp_gpuset {
    const struct ddp_plan_job *job;   /* its spec (the name on a lease) and topology */
    const struct ddp_plan_gpus *gpus; /* the other jobs' leases, the holders at launch, the lease directory */
    const struct ddp_topo *topo;
    size_t ngpus;
    int *exclude; /* out of the next attempt: stalled ranks' GPUs (may return) and faulty ones */
    size_t nexclude;
    int *faulted;       /* left out for their own faults: never given back */
    char **faulted_why; /* [nfaulted] "GPU N (BUSID): why" */
    size_t nfaulted;
    bool left_out;             /* a GPU was left out since the last fit */
    bool *ran;                 /* per topology GPU: an attempt of this job ran on it */
    const char **holders;      /* gpus->holders, ours: a GPU leased for a restart becomes this job's (NULL) */
    char **held;               /* the busy check's holders per topology GPU, or NULL */
    char **not_spare;          /* per topology GPU the job does not hold: why the judge found it unfit at the
                                  last check before a restart (no spare), or NULL */
    struct ddp_lease **leases; /* [nleases] GPUs leased for restarts, in place of failed ones */
    size_t nleases;
};

struct ddp_gpuset *ddp_gpuset_new(const struct ddp_plan_job *job, const struct ddp_plan_gpus *gpus)
{
    struct ddp_gpuset *g = ddp_xcalloc(1, sizeof *g);
    g->job = job;
    g->gpus = gpus;
    g->topo = job->topo;
    g->ngpus = ddp_topo_ngpus(job->topo);
    g->ran = ddp_xcalloc(g->ngpus + 1, sizeof *g->ran);
    g->not_spare = ddp_xcalloc(g->ngpus + 1, sizeof *g->not_spare);
    if (gpus->holders) { /* ours to change: a GPU leased for a restart */
        g->holders = ddp_xcalloc(g->ngpus + 1, sizeof *g->holders);
        memcpy(g->holders, gpus->holders, g->ngpus * sizeof *g->holders);
    }
    return g;
}

void ddp_gpuset_free(struct ddp_gpuset *g)
{
    if (!g)
        return;
    free(g->exclude);
    free(g->faulted);
    for (size_t i = 0; i < g->nfaulted; i++)
        free(g->faulted_why[i]);
    free(g->faulted_why);
    free(g->ran);
    free(g->holders);
    for (size_t i = 0; i < g->nleases; i++)
        ddp_lease_release(g->leases[i]);
    free(g->leases);
    for (size_t i = 0; g->held && i < g->ngpus; i++)
        free(g->held[i]);
    free(g->held);
    for (size_t i = 0; i < g->ngpus; i++)
        free(g->not_spare[i]);
    free(g->not_spare);
    free(g);
}

const char *const *ddp_gpuset_holders(const struct ddp_gpuset *g)
{
    return (const char *const *)g->holders;
}

static bool excluded(const struct ddp_gpuset *g, int gpu)
{
    for (size_t i = 0; i < g->nexclude; i++)
        if (g->exclude[i] == gpu)
            return true;
    return false;
}

static bool faulted(const struct ddp_gpuset *g, int gpu)
{
    for (size_t i = 0; i < g->nfaulted; i++)
        if (g->faulted[i] == gpu)
            return true;
    return false;
}

void ddp_gpuset_exclude(struct ddp_gpuset *g, int gpu)
{
    if (gpu < 0 || excluded(g, gpu))
        return;
    g->exclude = ddp_xrealloc(g->exclude, (g->nexclude + 1) * sizeof *g->exclude);
    g->exclude[g->nexclude++] = gpu;
}

const int *ddp_gpuset_excluded(const struct ddp_gpuset *g, bool faulted_only, size_t *n)
{
    *n = faulted_only ? g->nfaulted : g->nexclude;
    return faulted_only ? g->faulted : g->exclude;
}

void ddp_gpuset_ran(struct ddp_gpuset *g, const struct ddp_attempt *a)
{
    for (size_t i = 0; i < a->nworkers; i++)
        if (a->workers[i].gpu >= 0 && (size_t)a->workers[i].gpu < g->ngpus)
            g->ran[a->workers[i].gpu] = true;
}

bool ddp_gpuset_holds(const struct ddp_gpuset *g, int gpu)
{
    return gpu >= 0 && (size_t)gpu < g->ngpus && g->ran[gpu];
}

void ddp_gpuset_set_held(struct ddp_gpuset *g, char **held)
{
    for (size_t i = 0; g->held && i < g->ngpus; i++)
        free(g->held[i]);
    free(g->held);
    g->held = held;
}

char *ddp_gpuset_left_out(struct ddp_gpuset *g, int gpu, const char *busid, const char *why)
{
    if (faulted(g, gpu)) /* a stalled rank's GPU that turns out faulty is left out for its fault all the same */
        return NULL;
    ddp_gpuset_exclude(g, gpu);
    g->faulted = ddp_xrealloc(g->faulted, (g->nfaulted + 1) * sizeof *g->faulted);
    g->faulted_why = ddp_xrealloc(g->faulted_why, (g->nfaulted + 1) * sizeof *g->faulted_why);
    g->faulted[g->nfaulted] = gpu;
    g->faulted_why[g->nfaulted++] = ddp_xasprintf("GPU %d (%s): %s", gpu, busid ? busid : "?", why);
    g->left_out = true;
    return ddp_xasprintf("GPU %d (%s) is left out of a restart: %s", gpu, busid ? busid : "?", why);
}

/* A GPU the job does not hold, as a spare: the judge's verdict now (not a restart's: any holder counts). */
static void judge_spare(struct ddp_gpuset *g, size_t i, const struct ddp_nvml *nv, const char *busid)
{
    struct ddp_fitness_verdict v;
    ddp_fitness_judge(&(struct ddp_fitness_in){.busid = busid, .nv = nv}, &v);
    free(g->not_spare[i]);
    g->not_spare[i] = ddp_fitness_usable(&v) ? NULL : ddp_xstrdup(v.why);
}

void ddp_gpuset_recheck(struct ddp_gpuset *g, const struct ddp_nvml *nv, ddp_gpuset_held_fn *held,
                        ddp_gpuset_unfit_fn *unfit, void *arg)
{
    for (size_t i = 0; nv && nv->found && i < g->ngpus; i++) {
        const char *busid = ddp_topo_gpu_busid(g->topo, i);
        if (!busid)
            continue;
        if (!ddp_gpuset_holds(g, (int)i)) {
            judge_spare(g, i, nv, busid);
            continue;
        }
        const char *at_launch = g->held ? g->held[i] : g->gpus->held ? g->gpus->held[i] : NULL;
        struct ddp_fitness_verdict v;
        ddp_fitness_judge_restart(nv, busid, at_launch, &v);
        if (!ddp_fitness_usable(&v))
            unfit(arg, (int)i, busid, v.why);
        if (v.holder) {
            char who[160];
            held(arg, (int)i, ddp_nvml_proc_describe(v.holder, who, sizeof who));
        }
    }
}

/* Lease one more GPU for the job: a free one (no other job's lease) that the placement req would take (usable
 * GPUs now), not left out, with no process holding memory there at launch, and fit by the judge's verdict at the
 * check before the restart (not lost, faulty or held now). true when one was leased (its holder entry becomes
 * this job's), false when none. */
static bool lease_spare(struct ddp_gpuset *g, const struct ddp_place_req *req, int usable)
{
    if (!g->gpus->lease_dir || !g->holders)
        return false;
    for (size_t i = 0; i < g->ngpus; i++) {
        if (!g->holders[i] || excluded(g, (int)i) || (g->gpus->held && g->gpus->held[i]))
            continue;
        const char *busid = ddp_topo_gpu_busid(g->topo, i), *was = g->holders[i];
        if (g->not_spare[i]) {
            ddp_debug("GPU %zu (%s): not leased for the restart: %s", i, busid, g->not_spare[i]);
            continue;
        }
        struct ddp_lease *l = NULL;
        struct ddp_err e = {0};
        g->holders[i] = NULL; /* would the job's placement take it ([gpus] select, exclude)? */
        bool takes = ddp_place_count_usable(g->topo, req) > usable;
        if (!takes || ddp_lease_take(g->gpus->lease_dir, &busid, 1, g->job->spec->name, &l, &e) < 0) {
            if (takes)
                ddp_debug("GPU %zu (%s): not leased for the restart: %s", i, busid, e.msg);
            g->holders[i] = was;
            continue;
        }
        g->leases = ddp_xrealloc(g->leases, (g->nleases + 1) * sizeof *g->leases);
        g->leases[g->nleases++] = l;
        ddp_warn("GPU %zu (%s) is leased for the restart, in place of the GPUs left out", i, busid);
        return true;
    }
    return false;
}

int ddp_gpuset_fit(struct ddp_gpuset *g, const struct ddp_plan_gpus *agpus, int nproc, char *why, size_t size)
{
    if (!g->left_out)
        return nproc;
    g->left_out = false;
    struct ddp_place_req req;
    ddp_plan_place_req(g->job, agpus, nproc, &req);
    req.exclude_idx = g->exclude;
    req.nexclude_idx = g->nexclude;
    int usable = req.want_gpus ? ddp_place_count_usable(g->topo, &req) : nproc;
    while (req.want_gpus && usable < nproc && lease_spare(g, &req, usable)) /* a free GPU for a failed one */
        usable = ddp_place_count_usable(g->topo, &req);
    if (usable < 1 && g->nfaulted > 0) { /* why names each faulty GPU */
        struct ddp_buf b = {0};
        ddp_buf_printf(&b, "no usable GPU left%s: ", agpus->holders ? " among the GPUs this job may use" : "");
        for (size_t i = 0; i < g->nfaulted; i++)
            ddp_buf_printf(&b, "%s%s", i ? "; " : "", g->faulted_why[i]);
        snprintf(why, size, "%s", b.data);
        ddp_buf_free(&b);
        return 0;
    }
    return usable >= 1 && usable < nproc ? usable : nproc;
}
