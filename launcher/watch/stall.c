/* stall: see stall.h. */
#include "watch/stall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/plan.h"
#include "watch/hang.h"
#include "watch/source.h"

/* What the watch knows of a worker of the current attempt, by its index in it: its heartbeat file, its
 * progress. */
struct heartbeat {
    char *path; /* NULL: none */
    struct timespec mtime;
    long long last_progress_ms; /* monotonic time of the last sign of progress */
    bool alive;                 /* showed life (heartbeat touched or a line of output) */
    bool touched;               /* touched its heartbeat file in this attempt */
};

struct ddp_stall {
    struct heartbeat *hb; /* the current attempt's, nhb of them (from ddp_stall_prepare) */
    size_t nhb;
    const struct ddp_spec *spec;
    struct ddp_runner *rn;
    struct ddp_timeout_sink sink;
    uv_timer_t timer;
    long long last_output_ms; /* any rank, for heartbeat = output */
    bool any_output;
    long long last_tick_ms; /* when on_watch last ran (0: not yet) */
    long long lost_ms;      /* time this attempt's launcher did not run (stopped, suspended): not silence */
    bool told_on_output;    /* said that this attempt's stall is measured on output (no heartbeat touched) */
};

struct ddp_stall *ddp_stall_new(uv_loop_t *loop, const struct ddp_spec *spec, struct ddp_runner *rn,
                                struct ddp_timeout_sink sink)
{
    struct ddp_stall *w = ddp_xcalloc(1, sizeof(*w));
    w->spec = spec;
    w->rn = rn;
    w->sink = sink;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    return w;
}

void ddp_stall_close(struct ddp_stall *w)
{
    if (!uv_is_closing((uv_handle_t *)&w->timer))
        uv_close((uv_handle_t *)&w->timer, NULL);
}

static void heartbeats_free(struct ddp_stall *w)
{
    for (size_t i = 0; i < w->nhb; i++)
        free(w->hb[i].path);
    free(w->hb);
    w->hb = NULL;
    w->nhb = 0;
}

void ddp_stall_free(struct ddp_stall *w)
{
    if (w)
        heartbeats_free(w);
    free(w);
}

/* Create (or reset) the heartbeat file with mtime = now. */
static void heartbeat_reset(struct heartbeat *h, int rank)
{
    struct stat st;
    char *dir = ddp_xstrdup(h->path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        ddp_mkdir_p(dir, 0700);
    }
    free(dir);
    int fd = open(h->path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        futimens(fd, NULL);
        if (fstat(fd, &st) == 0)
            h->mtime = st.st_mtim;
        close(fd);
    } else {
        ddp_warn("rank %d: heartbeat file %s: %s", rank, h->path, strerror(errno));
    }
}

void ddp_stall_prepare(struct ddp_stall *w, const struct ddp_attempt *plan)
{
    heartbeats_free(w);
    w->nhb = plan->nworkers;
    w->hb = ddp_xcalloc(w->nhb ? w->nhb : 1, sizeof(*w->hb));
    for (size_t i = 0; i < w->nhb && w->spec->heartbeat == DDP_HEARTBEAT_FILE; i++) {
        const struct ddp_worker *wk = &plan->workers[i];
        int e = ddp_strv_env_find(&wk->envp, "DDPLAUNCH_HEARTBEAT_FILE");
        if (e < 0)
            continue;
        w->hb[i].path = ddp_xstrdup(wk->envp.v[e] + strlen("DDPLAUNCH_HEARTBEAT_FILE="));
        heartbeat_reset(&w->hb[i], wk->rank);
    }
}

const char *ddp_stall_heartbeat(const struct ddp_stall *w, size_t i)
{
    return i < w->nhb ? w->hb[i].path : NULL;
}

static long long period(const struct ddp_spec *sp)
{
    long long p = 1000;
    if (sp->timeout_stall_ms > 0 && sp->timeout_stall_ms / 4 < p)
        p = sp->timeout_stall_ms / 4;
    if (sp->timeout_init_ms > 0 && sp->timeout_init_ms / 4 < p)
        p = sp->timeout_init_ms / 4;
    return p < 20 ? 20 : p;
}

static char *hang_why(const struct ddp_spec *sp, const struct ddp_hang_check *hc, const struct ddp_runner_worker *first)
{
    char *d = ddp_timeout_duration(hc->kind == DDP_HANG_INIT ? sp->timeout_init_ms : sp->timeout_stall_ms);
    char *why;
    if (hc->on_output && hc->kind == DDP_HANG_SILENT && !hc->stuck)
        why = ddp_xasprintf("no rank wrote any output for %s (output: no rank ever touched the heartbeat file; set "
                            "heartbeat = output)",
                            d);
    else if (hc->stuck)
        why = ddp_xasprintf("rank %d%s %s %s: no progress for %s (%s)", ddp_runner_worker_rank(first),
                            hc->nstalled > 1 ? " and others" : "",
                            hc->nstalled > 1 ? "are stopped or zombies" : "is stopped or a zombie",
                            hc->alone ? "and the others ended" : "while the others wait", d,
                            sp->heartbeat == DDP_HEARTBEAT_FILE && !hc->on_output ? "heartbeat" : "output");
    else if (hc->kind == DDP_HANG_INIT)
        why = ddp_xasprintf("rank %d%s showed no sign of life within %s (init)", ddp_runner_worker_rank(first),
                            hc->nstalled > 1 ? " and others" : "", d);
    else if (hc->kind == DDP_HANG_SILENT)
        why = ddp_xasprintf("no rank wrote any output for %s (output)", d);
    else if (hc->nstalled > 1)
        why = ddp_xasprintf("rank %d and %zu other%s made no progress for %s (heartbeat)",
                            ddp_runner_worker_rank(first), hc->nstalled - 1, hc->nstalled > 2 ? "s" : "", d);
    else
        why = ddp_xasprintf("rank %d made no progress for %s (heartbeat)", ddp_runner_worker_rank(first), d);
    free(d);
    return why;
}

/* The timer fired much later than due: the launcher itself did not run (SIGSTOP and SIGCONT, a debugger, a VM
 * pause). Output written meanwhile waits unread in the pipes (timers run before I/O is polled), so that time is
 * no silence of the workers: move every silence clock forward by it; the next check sees what the pipes held. */
static void rebase_after_pause(struct ddp_stall *w, struct ddp_runner_attempt *r, long long now)
{
    long long p = period(w->spec), late = w->last_tick_ms ? now - w->last_tick_ms - p : 0;
    w->last_tick_ms = now;
    if (late <= (p > 250 ? p : 250))
        return;
    w->lost_ms += late;
    w->last_output_ms += late;
    for (size_t i = 0; i < w->nhb; i++)
        w->hb[i].last_progress_ms += late;
    char *d = ddp_timeout_duration(late);
    ddp_info("attempt %d: the launcher did not run for %s (stopped or suspended): not counted as silence of the "
             "workers",
             ddp_runner_attempt_number(r), d);
    free(d);
}

static void on_watch(uv_timer_t *t)
{
    struct ddp_stall *w = t->data;
    struct ddp_runner_attempt *r = ddp_runner_current(w->rn);
    const struct ddp_spec *sp = w->spec;
    long long now = ddp_now_ms();
    struct ddp_hang_limits lim = {sp->timeout_init_ms, sp->timeout_stall_ms, sp->heartbeat};
    struct ddp_hang_check hc;
    if (!r)
        return;
    rebase_after_pause(w, r, now);
    size_t nw = ddp_runner_attempt_nworkers(r), n = nw ? nw : 1;
    struct ddp_hang_rank *hr = ddp_xcalloc(n, sizeof(*hr));
    bool *stalled = ddp_xcalloc(n, sizeof(*stalled));
    int *gpus = ddp_xcalloc(n, sizeof(*gpus));
    size_t ngpus = 0;
    for (size_t i = 0; i < nw; i++) {
        struct ddp_runner_worker *k = ddp_runner_attempt_worker(r, i);
        struct heartbeat none = {0}, *h = i < w->nhb ? &w->hb[i] : &none;
        struct stat st;
        bool running = ddp_runner_worker_running(k);
        if (running && h->path && stat(h->path, &st) == 0 &&
            (st.st_mtim.tv_sec != h->mtime.tv_sec || st.st_mtim.tv_nsec != h->mtime.tv_nsec)) {
            h->mtime = st.st_mtim;
            h->last_progress_ms = now;
            h->alive = true;
            h->touched = true;
        }
        hr[i] = (struct ddp_hang_rank){ddp_runner_worker_rank(k),
                                       running,
                                       h->alive,
                                       h->path != NULL,
                                       ddp_runner_worker_start_ms(k),
                                       h->last_progress_ms,
                                       running ? ddp_proc_state(ddp_runner_worker_pid(k)) : 0,
                                       h->path != NULL && !h->touched};
    }
    ddp_hang_check(&lim, hr, nw, now, w->any_output, w->last_output_ms, ddp_runner_paused(w->rn), stalled, &hc);
    if (hc.on_output && !w->told_on_output &&
        now - ddp_runner_attempt_start_ms(r) - w->lost_ms >= sp->timeout_stall_ms) {
        char *d = ddp_timeout_duration(sp->timeout_stall_ms);
        ddp_info("attempt %d: no rank touched its heartbeat file (DDPLAUNCH_HEARTBEAT_FILE) in %s: stall is measured "
                 "on output until one does (set [timeout] heartbeat = output to say so)",
                 ddp_runner_attempt_number(r), d);
        free(d);
        w->told_on_output = true;
    }
    if (hc.kind != DDP_HANG_NONE) {
        struct ddp_runner_worker *first =
            hc.kind == DDP_HANG_SILENT && !hc.stuck ? NULL : ddp_runner_attempt_worker(r, hc.first);
        for (size_t i = 0; i < nw && hc.blame_gpus; i++)
            if (stalled[i] && ddp_runner_worker_plan(ddp_runner_attempt_worker(r, i))->gpu >= 0)
                gpus[ngpus++] = ddp_runner_worker_plan(ddp_runner_attempt_worker(r, i))->gpu;
        struct ddp_timeout to = {.cls = hc.kind == DDP_HANG_INIT ? DDP_CLASS_INIT_TIMEOUT : DDP_CLASS_HANG,
                                 .k = first,
                                 .why = hang_why(sp, &hc, first),
                                 .gpus = gpus,
                                 .ngpus = ngpus};
        w->sink.fn(w->sink.arg, &to);
    }
    free(hr);
    free(stalled);
    free(gpus);
}

void ddp_stall_start(struct ddp_stall *w, struct ddp_runner_attempt *r)
{
    const struct ddp_spec *sp = w->spec;
    w->any_output = false;
    w->last_output_ms = ddp_runner_attempt_start_ms(r);
    w->last_tick_ms = ddp_now_ms();
    w->lost_ms = 0;
    w->told_on_output = false;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(r) && i < w->nhb; i++)
        if (w->hb[i].last_progress_ms == 0)
            w->hb[i].last_progress_ms = ddp_runner_worker_start_ms(ddp_runner_attempt_worker(r, i));
    if (sp->timeout_init_ms > 0 || (sp->timeout_stall_ms > 0 && sp->heartbeat != DDP_HEARTBEAT_NONE)) {
        long long p = period(sp);
        uv_timer_start(&w->timer, on_watch, (uint64_t)p, (uint64_t)p);
    }
}

void ddp_stall_stop(struct ddp_stall *w)
{
    uv_timer_stop(&w->timer);
}

/* k's entry, when k is of the current attempt. */
static struct heartbeat *of(const struct ddp_stall *w, const struct ddp_runner_worker *k)
{
    return ddp_runner_is_current(k) && ddp_runner_worker_index(k) < w->nhb ? &w->hb[ddp_runner_worker_index(k)] : NULL;
}

void ddp_stall_output(struct ddp_stall *w, struct ddp_runner_worker *k, long long now)
{
    struct heartbeat *h = of(w, k);
    w->last_output_ms = now;
    w->any_output = true;
    if (!h)
        return;
    h->alive = true;
    if (w->spec->heartbeat == DDP_HEARTBEAT_OUTPUT)
        h->last_progress_ms = now;
}

long long ddp_stall_progress_ms(const struct ddp_stall *w, size_t i)
{
    return i < w->nhb ? w->hb[i].last_progress_ms : 0;
}

void ddp_stall_resumed(struct ddp_stall *w, long long now)
{
    struct ddp_runner_attempt *r = ddp_runner_current(w->rn);
    w->last_output_ms = now;
    if (r && w->spec->heartbeat == DDP_HEARTBEAT_OUTPUT)
        for (size_t i = 0; i < ddp_runner_attempt_nworkers(r) && i < w->nhb; i++)
            w->hb[i].last_progress_ms = now;
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    *self = ddp_stall_new(env->cfg.loop, env->cfg.job->spec, env->cfg.rn, env->cfg.sink);
    return 0;
}

static void source_prepare(void *self, const struct ddp_attempt *plan)
{
    ddp_stall_prepare(self, plan);
}

static void source_start(void *self, struct ddp_runner_attempt *r)
{
    ddp_stall_start(self, r);
}

static void source_stop(void *self)
{
    ddp_stall_stop(self);
}

static void source_output(void *self, struct ddp_runner_worker *k, long long now)
{
    ddp_stall_output(self, k, now);
}

static void source_resumed(void *self, long long now)
{
    ddp_stall_resumed(self, now);
}

static void source_close(void *self)
{
    ddp_stall_close(self);
}

static void source_free(void *self)
{
    ddp_stall_free(self);
}

const struct ddp_watch_source ddp_stall_source = {.name = "stall",
                                                  .open = source_open,
                                                  .prepare = source_prepare,
                                                  .start = source_start,
                                                  .stop = source_stop,
                                                  .output = source_output,
                                                  .resumed = source_resumed,
                                                  .close = source_close,
                                                  .free = source_free};

const struct ddp_stall *ddp_stall_in_watch(const struct ddp_watch_env *env)
{
    return ddp_watch_state(env, &ddp_stall_source);
}
