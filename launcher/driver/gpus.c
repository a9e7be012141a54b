/* gpus: see gpus.h. */
#include "driver/gpus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topo/fitness.h"
#include "topo/nvml.h"

#include "spec/spec.h"

void ddp_gpus_held_free(char **held, size_t n)
{
    for (size_t i = 0; held && i < n; i++)
        free(held[i]);
    free(held);
}

/* The busy check's word on topology GPU g (busid) of the attempt, from the judge's verdict v: a HELD GPU is
 * warned of (busy = warn or skip) or refused (busy = fail); a GPU that is lost, faulty or leased is refused
 * before anything started (whatever busy says), and once the workers started (started) warned of with unfit
 * set. 0 or -EBUSY with err. */
static int act_on(const struct ddp_fitness_verdict *v, const struct ddp_nvml_gpu *ng, int g, const char *busid,
                  const struct ddp_spec *spec, FILE *f, bool started, struct ddp_err *err)
{
    if (v->fit != DDP_FIT_HELD) {
        if (!started)
            return ddp_errf(err, -EBUSY, "GPU %d (%s) is unfit: %s; nothing was started", g, busid, v->why);
        if (f)
            fprintf(f, "ddplaunch: warning: GPU %d (%s) is unfit: %s; a restart leaves it out\n", g, busid, v->why);
        return 0;
    }
    char who[160];
    ddp_nvml_proc_describe(v->holder, who, sizeof who);
    double used = (double)ng->mem_used / 1073741824.0, total = (double)ng->mem_total / 1073741824.0;
    if (ddp_fitness_refuses(v, spec->gpus_busy))
        return ddp_errf(err, -EBUSY,
                        "GPU %d (%s) is held by %s: %.1f of %.1f GiB in use; [gpus] busy = fail, so nothing was "
                        "started (busy = skip chooses other GPUs)",
                        g, busid, who, used, total);
    if (f)
        fprintf(f,
                "ddplaunch: warning: GPU %d (%s) is held by %s: %.1f of %.1f GiB in use, the job may run out of "
                "memory ([gpus] busy = skip chooses other GPUs, fail refuses)\n",
                g, busid, who, used, total);
    return 0;
}

int ddp_gpus_check_with(const struct ddp_topo *topo, const struct ddp_nvml *nv, const struct ddp_spec *spec,
                        const struct ddp_attempt *a, FILE *f, bool started, struct ddp_gpus_found *found,
                        struct ddp_err *err)
{
    size_t ngpus = ddp_topo_ngpus(topo);
    char **h = ddp_xcalloc(ngpus + 1, sizeof *h), **u = ddp_xcalloc(ngpus + 1, sizeof *u);
    int rc = 0;
    bool gpus = false;

    if (found)
        *found = (struct ddp_gpus_found){0};
    for (size_t i = 0; topo && i < a->nworkers; i++)
        gpus |= a->workers[i].gpu >= 0;
    if (gpus && nv->late) {
        if (spec->gpus_busy == DDP_BUSY_FAIL)
            rc = ddp_errf(err, -EBUSY,
                          "%s, so the GPUs could not be checked for other processes; [gpus] busy = fail, so nothing "
                          "was started",
                          nv->status);
        else if (f)
            fprintf(f, "ddplaunch: warning: %s: the job's GPUs were not checked for other processes\n", nv->status);
    }
    for (size_t i = 0; topo && i < a->nworkers && rc == 0; i++) {
        int g = a->workers[i].gpu;
        const char *busid = g >= 0 ? ddp_topo_gpu_busid(topo, (size_t)g) : NULL;
        const struct ddp_nvml_gpu *ng = busid ? ddp_nvml_find(nv, busid) : NULL;
        if (!ng || h[g] || u[g])
            continue;
        struct ddp_fitness_verdict v; /* the judge's verdict, acted on whatever it is */
        ddp_fitness_judge(&(struct ddp_fitness_in){.busid = busid, .gpu = ng}, &v);
        if (ddp_fitness_usable(&v))
            continue;
        rc = act_on(&v, ng, g, busid, spec, f, started, err);
        char who[160];
        if (v.fit == DDP_FIT_HELD)
            h[g] = ddp_xstrdup(ddp_nvml_proc_describe(v.holder, who, sizeof who));
        else
            u[g] = ddp_xstrdup(v.why);
    }
    if (found && rc == 0) {
        found->held = h;
        found->unfit = u;
    } else {
        ddp_gpus_held_free(h, ngpus);
        ddp_gpus_held_free(u, ngpus);
    }
    return rc;
}

bool ddp_gpus_check_beside(const struct ddp_spec *spec, bool run)
{
    const struct ddp_mem_limit *lim = &spec->gpus_max_memory_used;
    return run && spec->gpus_busy == DDP_BUSY_WARN && !lim->bytes && !lim->percent;
}

int ddp_gpus_launch_check(const struct ddp_topo *topo, const struct ddp_spec *spec, bool run,
                          const struct ddp_attempt *a, FILE *f, char ***held, struct ddp_err *err)
{
    static const struct ddp_nvml none;
    struct ddp_gpus_found found;
    if (held)
        *held = NULL;
    if (!topo || ddp_gpus_check_beside(spec, run)) /* supervise.c checks beside the spawn */
        return 0;
    int rc = ddp_gpus_check_with(topo, topo ? ddp_topo_nvml(topo) : &none, spec, a, f, false, &found, err);
    ddp_gpus_held_free(found.unfit, ddp_topo_ngpus(topo)); /* none: a launch refuses an unfit GPU */
    if (held)
        *held = found.held;
    else
        ddp_gpus_held_free(found.held, ddp_topo_ngpus(topo));
    return rc;
}

/* ---- NVML read off the loop ---- */

struct ddp_gpus_read {
    uv_async_t async;
    uv_timer_t deadline;
    int open; /* handles not yet closed */
    bool answered;
    struct ddp_nvml_reader *r;
    int ms;
    ddp_gpus_read_fn *fn;
    void *arg;
    /* the busy check (ddp_gpus_check_start) */
    const struct ddp_topo *topo;
    const struct ddp_spec *spec;
    struct ddp_attempt a; /* only nworkers and each worker's gpu */
    ddp_gpus_check_fn *check_fn;
    void *check_arg;
};

static void read_closed(uv_handle_t *h)
{
    struct ddp_gpus_read *rd = h->data;
    if (--rd->open == 0) {
        free(rd->a.workers);
        free(rd);
    }
}

void ddp_gpus_read_close(struct ddp_gpus_read *rd)
{
    if (!rd || rd->answered)
        return;
    rd->answered = true;
    ddp_nvml_reader_drop(rd->r);
    rd->r = NULL;
    uv_close((uv_handle_t *)&rd->async, read_closed);
    uv_close((uv_handle_t *)&rd->deadline, read_closed);
}

/* the answer (or the deadline): to fn once, then close */
static void answer(struct ddp_gpus_read *rd, int wait_ms)
{
    struct ddp_nvml nv;
    if (rd->answered || !ddp_nvml_reader_wait(rd->r, wait_ms, &nv, NULL)) {
        if (rd->answered || wait_ms >= 0)
            return;
        memset(&nv, 0, sizeof nv);
        nv.late = true;
        snprintf(nv.status, sizeof nv.status, "NVML: did not answer in %g s", rd->ms / 1000.0);
    }
    ddp_gpus_read_fn *fn = rd->fn;
    void *arg = rd->arg;
    ddp_gpus_read_close(rd);
    fn(arg, &nv);
    ddp_nvml_free(&nv);
}

static void on_read_async(uv_async_t *a)
{
    answer(a->data, 0);
}

static void on_read_deadline(uv_timer_t *t)
{
    answer(t->data, -1);
}

static void read_done(void *arg) /* the reader's thread */
{
    uv_async_send(arg);
}

struct ddp_gpus_read *ddp_gpus_read_start(uv_loop_t *loop, unsigned what, const struct ddp_nvml *base,
                                          const char *const *busids, size_t nbusids, ddp_gpus_read_fn *fn, void *arg)
{
    struct ddp_gpus_read *rd = ddp_xcalloc(1, sizeof *rd);
    rd->fn = fn;
    rd->arg = arg;
    rd->ms = ddp_nvml_deadline_ms();
    uv_async_init(loop, &rd->async, on_read_async);
    uv_timer_init(loop, &rd->deadline);
    rd->async.data = rd->deadline.data = rd;
    rd->open = 2;
    rd->r = ddp_nvml_reader_start(what, base, busids, nbusids, read_done, &rd->async);
    if (!rd->r) {
        rd->fn = NULL;
        ddp_gpus_read_close(rd);
        return NULL;
    }
    uv_timer_start(&rd->deadline, on_read_deadline, (uint64_t)rd->ms, 0);
    return rd;
}

void ddp_gpus_read_settle(struct ddp_gpus_read *rd, int ms)
{
    if (rd && !rd->answered)
        answer(rd, ms > 0 ? ms : 0);
}

static void check_answered(void *arg, const struct ddp_nvml *nv)
{
    struct ddp_gpus_read *rd = arg;
    struct ddp_gpus_found found;
    struct ddp_err err = {0};
    size_t nheld = 0;
    ddp_gpus_check_with(rd->topo, nv, rd->spec, &rd->a, stderr, true, &found, &err);
    for (size_t g = 0; found.held && g < ddp_topo_ngpus(rd->topo); g++)
        nheld += found.held[g] != NULL;
    if (nv->late)
        ddp_debug("the GPU busy check beside the spawn gave up: %s", nv->status);
    else
        ddp_debug("the GPU busy check beside the spawn answered: %zu of the job's GPUs held by another process", nheld);
    rd->check_fn(rd->check_arg, &found);
}

struct ddp_gpus_read *ddp_gpus_check_start(uv_loop_t *loop, const struct ddp_topo *topo, const struct ddp_spec *spec,
                                           const struct ddp_attempt *a, ddp_gpus_check_fn *fn, void *arg)
{
    const struct ddp_nvml *nv = topo ? ddp_topo_nvml(topo) : NULL;
    if (nv && nv->late) { /* the topology's read of NVML did not answer: say so now */
        struct ddp_err err = {0};
        ddp_gpus_check_with(topo, nv, spec, a, stderr, true, NULL, &err);
        return NULL;
    }
    const char **busids = ddp_xcalloc(a->nworkers + 1, sizeof *busids);
    size_t n = 0;
    for (size_t i = 0; nv && nv->found && i < a->nworkers; i++) {
        const char *b = a->workers[i].gpu >= 0 ? ddp_topo_gpu_busid(topo, (size_t)a->workers[i].gpu) : NULL;
        if (b && ddp_nvml_find(nv, b))
            busids[n++] = b;
    }
    struct ddp_gpus_read *rd = n ? ddp_gpus_read_start(loop, 0, nv, busids, n, check_answered, NULL) : NULL;
    free(busids);
    if (!rd)
        return NULL;
    rd->arg = rd;
    rd->topo = topo;
    rd->spec = spec;
    rd->check_fn = fn;
    rd->check_arg = arg;
    rd->a.nworkers = a->nworkers;
    rd->a.workers = ddp_xcalloc(a->nworkers + 1, sizeof *rd->a.workers);
    for (size_t i = 0; i < a->nworkers; i++)
        rd->a.workers[i].gpu = a->workers[i].gpu;
    return rd;
}
