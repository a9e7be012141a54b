/* gpuwatch: see gpuwatch.h. The thread and the loop share one struct, freed by whichever lets go last (a
 * reference count), so that closing never waits for a blocked nvmlEventSetWait_v2. */
#include "watch/gpuwatch.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "records/jsonlog.h"
#include "run/plan.h"
#include "topo/fitness.h"
#include "watch/source.h"

#define WAIT_MS 250
#define QUEUE 64
#define PACE_WINDOW_MS 100 /* the thread takes at most PACE_EVENTS events a window, then sleeps out the window */
#define PACE_EVENTS 20

struct shared {
    pthread_mutex_t mu;
    int refs;  /* the thread and the loop side */
    bool stop; /* the loop side let go: no more uv_async_send */
    uv_async_t *async;
    struct ddp_gpuwatch_event q[QUEUE];
    size_t nq;
    size_t dropped;
    char status[256]; /* the event set's state, for the debug line */
    bool status_new;
    char **busid; /* [n] owned copies */
    int *gpu;     /* [n] topology indices */
    size_t n;
};

struct ddp_gpuwatch {
    uv_async_t async;
    struct shared *sh;
    ddp_gpuwatch_fn *fn;
    void *arg;
    pthread_t thread;
    const struct ddp_topo *topo;
};

const char *ddp_gpuwatch_describe(unsigned long long type, unsigned long long data, bool *fault, char *buf, size_t size)
{
    if (type == DDP_NVML_EV_XID) {
        const char *m = ddp_nvml_xid_meaning(data, NULL);
        snprintf(buf, size, "Xid %llu: %s", data, m ? m : "not in ddplaunch's table; see NVIDIA's Xid catalog");
    } else if (type == DDP_NVML_EV_ECC_DBE) {
        snprintf(buf, size, "double-bit (uncorrectable) ECC error");
    } else if (type == DDP_NVML_EV_CLOCK) {
        char why[160];
        snprintf(buf, size, "clocks slowed down: %s", ddp_nvml_clocks_describe((long long)data, why, sizeof why));
    } else {
        snprintf(buf, size, "NVML event 0x%llx (data %llu)", type, data);
    }
    if (fault) { /* the judge's word on the GPU after it (fitness.h) */
        struct ddp_fitness_verdict v;
        ddp_fitness_judge_event(type, data, buf, &v);
        *fault = !ddp_fitness_usable(&v);
    }
    return buf;
}

bool ddp_gpuwatch_limit_event(struct ddp_gpuwatch_limit *l, int gpu, unsigned long long type, unsigned long long data,
                              long long now_ms, unsigned long long *repeats)
{
    *repeats = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->k[i].gpu != gpu || l->k[i].type != type || l->k[i].data != data)
            continue;
        if (now_ms - l->k[i].last_ms < DDP_GPUWATCH_REPEAT_MS) {
            l->k[i].folded++;
            return false;
        }
        *repeats = l->k[i].folded;
        l->k[i].folded = 0;
        l->k[i].last_ms = now_ms;
        return true;
    }
    if (l->n == DDP_GPUWATCH_KEYS) {
        l->overflow++;
        return false;
    }
    l->k[l->n].gpu = gpu;
    l->k[l->n].type = type;
    l->k[l->n].data = data;
    l->k[l->n].folded = 0;
    l->k[l->n++].last_ms = now_ms;
    return true;
}

bool ddp_gpuwatch_limit_due(struct ddp_gpuwatch_limit *l, long long now_ms, int *gpu, unsigned long long *type,
                            unsigned long long *data, unsigned long long *repeats)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->k[i].folded && now_ms - l->k[i].last_ms >= DDP_GPUWATCH_REPEAT_MS) {
            *gpu = l->k[i].gpu, *type = l->k[i].type, *data = l->k[i].data, *repeats = l->k[i].folded;
            l->k[i].folded = 0;
            l->k[i].last_ms = now_ms;
            return true;
        }
    return false;
}

static void let_go(struct shared *sh)
{
    pthread_mutex_lock(&sh->mu);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->mu);
    if (!last)
        return;
    for (size_t i = 0; i < sh->n; i++)
        free(sh->busid[i]);
    free(sh->busid);
    free(sh->gpu);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

/* thread side: hand ev (or a status) to the loop */
static bool post(struct shared *sh, const struct ddp_gpuwatch_event *ev, const char *status)
{
    pthread_mutex_lock(&sh->mu);
    bool stop = sh->stop;
    if (!stop) {
        if (ev && sh->nq < QUEUE)
            sh->q[sh->nq++] = *ev;
        else if (ev)
            sh->dropped++;
        if (status) {
            snprintf(sh->status, sizeof sh->status, "%s", status);
            sh->status_new = true;
        }
        uv_async_send(sh->async);
    }
    pthread_mutex_unlock(&sh->mu);
    return !stop;
}

static bool stopped(struct shared *sh)
{
    pthread_mutex_lock(&sh->mu);
    bool stop = sh->stop;
    pthread_mutex_unlock(&sh->mu);
    return stop;
}

static void *watch_thread(void *p)
{
    struct shared *sh = p;
    struct ddp_nvml_events *e = NULL;
    char why[256], status[320];
    long long t = ddp_now_ns();
    int rc = ddp_nvml_events_open((const char *const *)sh->busid, sh->n, &e, why, sizeof why);
    double ms = (double)(ddp_now_ns() - t) / 1e6;
    if (rc < 0)
        snprintf(status, sizeof status, "GPU events off: %s", why);
    else
        snprintf(status, sizeof status, "GPU events: watching %zu GPU%s (NVML event set opened in %.1f ms)", sh->n,
                 sh->n == 1 ? "" : "s", ms);
    post(sh, NULL, status);
    struct ddp_gpuwatch_limit *lim = ddp_xcalloc(1, sizeof *lim);
    long long window = 0;
    int taken = 0;
    while (e && !stopped(sh)) {
        struct ddp_nvml_event ev;
        long long now = ddp_now_ms();
        if (now - window >= PACE_WINDOW_MS) {
            window = now;
            taken = 0;
        } else if (taken >= PACE_EVENTS) { /* a storm: paced, not a CPU spent on it */
            long long rest = PACE_WINDOW_MS - (now - window);
            nanosleep(&(struct timespec){rest / 1000, (rest % 1000) * 1000000L}, NULL);
            continue;
        }
        struct ddp_gpuwatch_event out = {.gpu = -1};
        int g;
        if (ddp_gpuwatch_limit_due(lim, now, &g, &out.type, &out.data, &out.repeats)) {
            out.gpu = g;
        } else {
            rc = ddp_nvml_events_wait(e, WAIT_MS, &ev);
            if (rc < 0) {
                post(sh, NULL, "GPU events off: nvmlEventSetWait_v2 failed");
                break;
            }
            if (rc == 0 || ev.gpu < 0 || (size_t)ev.gpu >= sh->n)
                continue;
            taken++;
            if (!ddp_gpuwatch_limit_event(lim, sh->gpu[ev.gpu], ev.type, ev.data, ddp_now_ms(), &out.repeats))
                continue;
            out.gpu = sh->gpu[ev.gpu], out.type = ev.type, out.data = ev.data;
        }
        ddp_gpuwatch_describe(out.type, out.data, &out.fault, out.text, sizeof out.text);
        if (!post(sh, &out, NULL))
            break;
    }
    free(lim);
    ddp_nvml_events_close(e);
    let_go(sh);
    return NULL;
}

static void on_async(uv_async_t *a)
{
    struct ddp_gpuwatch *w = a->data;
    struct shared *sh = w->sh;
    struct ddp_gpuwatch_event q[QUEUE];
    char status[256] = "";
    pthread_mutex_lock(&sh->mu);
    size_t n = sh->nq, dropped = sh->dropped;
    memcpy(q, sh->q, n * sizeof q[0]);
    sh->nq = sh->dropped = 0;
    if (sh->status_new)
        snprintf(status, sizeof status, "%s", sh->status);
    sh->status_new = false;
    pthread_mutex_unlock(&sh->mu);
    if (status[0])
        ddp_debug("%s", status);
    if (dropped) /* distinct events beyond the queue: the job's own ones are said when they come again */
        ddp_debug("GPU events: %zu dropped (more than %d at once)", dropped, QUEUE);
    for (size_t i = 0; i < n; i++) {
        q[i].busid = ddp_topo_gpu_busid(w->topo, (size_t)q[i].gpu);
        w->fn(w->arg, &q[i]);
    }
}

struct ddp_gpuwatch *ddp_gpuwatch_start(uv_loop_t *loop, const struct ddp_topo *topo, ddp_gpuwatch_fn *fn, void *arg)
{
    const struct ddp_nvml *nv = topo ? ddp_topo_nvml(topo) : NULL;
    size_t ngpus = ddp_topo_ngpus(topo);
    if (!nv || !nv->found || ngpus == 0)
        return NULL;
    struct ddp_gpuwatch *w = ddp_xcalloc(1, sizeof *w);
    struct shared *sh = ddp_xcalloc(1, sizeof *sh);
    sh->busid = ddp_xcalloc(ngpus, sizeof *sh->busid);
    sh->gpu = ddp_xcalloc(ngpus, sizeof *sh->gpu);
    for (size_t i = 0; i < ngpus; i++)
        if (ddp_nvml_find(nv, ddp_topo_gpu_busid(topo, i))) {
            sh->busid[sh->n] = ddp_xstrdup(ddp_topo_gpu_busid(topo, i));
            sh->gpu[sh->n++] = (int)i;
        }
    pthread_mutex_init(&sh->mu, NULL);
    sh->refs = 2;
    sh->async = &w->async;
    w->sh = sh;
    w->fn = fn;
    w->arg = arg;
    w->topo = topo;
    uv_async_init(loop, &w->async, on_async);
    w->async.data = w;
    pthread_attr_t attr;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits it: signals stay the loop's */
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (sh->n == 0 || pthread_create(&w->thread, &attr, watch_thread, sh) != 0)
        sh->refs = 1; /* no thread: the loop side alone */
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return w;
}

void ddp_gpuwatch_close(struct ddp_gpuwatch *w)
{
    if (!w || !w->sh)
        return;
    pthread_mutex_lock(&w->sh->mu);
    w->sh->stop = true;
    pthread_mutex_unlock(&w->sh->mu);
    let_go(w->sh);
    w->sh = NULL;
    uv_close((uv_handle_t *)&w->async, NULL);
}

void ddp_gpuwatch_free(struct ddp_gpuwatch *w)
{
    free(w);
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

/* The event set is opened once the first attempt with a GPU worker has its workers spawned (it costs loading NVML
 * and an nvmlInit: never before the workers, never for a job without GPUs). */
struct source {
    const struct ddp_watch_env *env;
    struct ddp_gpuwatch *w;
};

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    struct source *src = ddp_xcalloc(1, sizeof *src);
    src->env = env;
    *self = src;
    return 0;
}

static void source_start(void *self, struct ddp_runner_attempt *r)
{
    struct source *src = self;
    bool gpus = false;
    for (size_t i = 0; i < ddp_runner_attempt_plan(r)->nworkers; i++)
        gpus |= ddp_runner_attempt_plan(r)->workers[i].gpu >= 0;
    if (gpus && !src->w)
        src->w =
            ddp_gpuwatch_start(src->env->cfg.loop, src->env->cfg.job->topo, src->env->cfg.gpu_event, src->env->cfg.arg);
}

static void source_close(void *self)
{
    struct source *src = self;
    ddp_gpuwatch_close(src->w);
}

static void source_free(void *self)
{
    struct source *src = self;
    if (src)
        ddp_gpuwatch_free(src->w);
    free(src);
}

const struct ddp_watch_source ddp_gpuwatch_source = {
    .name = "gpuwatch", .open = source_open, .start = source_start, .close = source_close, .free = source_free};

char *ddp_gpuwatch_event_text(const struct ddp_gpuwatch_event *ev, int rank, bool running)
{
    char again[96] = "";
    if (ev->repeats)
        snprintf(again, sizeof again, " (%llu more time%s in the last minute)", ev->repeats,
                 ev->repeats == 1 ? "" : "s");
    char of[40] = "of this job, between attempts";
    if (rank < 0 && running) /* left out, or beyond a downsized attempt */
        snprintf(of, sizeof of, "of this job, no rank on it now");
    else if (rank >= 0)
        snprintf(of, sizeof of, "of rank %d", rank);
    return ddp_xasprintf("GPU %d (%s) %s: %s%s", ev->gpu, ev->busid ? ev->busid : "?", of, ev->text, again);
}

json_t *ddp_gpuwatch_event_json(const struct ddp_gpuwatch_event *ev, int attempt, int rank, const char *text)
{
    const char *kind = ev->type == DDP_NVML_EV_XID       ? "xid"
                       : ev->type == DDP_NVML_EV_ECC_DBE ? "ecc-dbe"
                       : ev->type == DDP_NVML_EV_CLOCK   ? "clocks"
                                                         : "other";
    return ddp_jsonlog_pack("{s:i, s:i, s:s?, s:i, s:s, s:I, s:b, s:I, s:s}", "attempt", attempt, "gpu", ev->gpu,
                            "busid", ev->busid, "rank", rank, "kind", kind, "data", (json_int_t)ev->data, "fault",
                            ev->fault, "repeats", (json_int_t)ev->repeats, "text", text);
}
