/* watch: see watch.h. The sources are rows of one table (sources[] below); the interface walks it in order.
 * To add a source: its module beside the others, a field in struct ddp_watch, its adapters and one row. */
#include "watch/watch.h"

#include <stdlib.h>

#include "records/recognise.h"
#include "watch/capture.h"
#include "watch/coll_timeout.h"
#include "watch/ft_expiry.h"
#include "watch/live.h"
#include "watch/sample.h"
#include "watch/stall.h"
#include "watch/wall.h"

struct ddp_watch {
    struct ddp_watch_config cfg;
    struct ddp_ft_expiry *timer;   /* torch's FileTimer, when [timeout] timer_file */
    struct ddp_capture *cap;       /* the hang capture */
    struct ddp_coll_timeout *coll; /* the collective timeouts ranks print */
    struct ddp_stall *stall;       /* no life within [timeout] init, no progress for [timeout] stall */
    struct ddp_wall *wall;         /* [timeout] wall */
    struct ddp_live *live;         /* the live hang watch: stack samples, flight recorder, suspicion */
    struct ddp_gpuwatch *gpuwatch; /* NVML's event set for the GPUs, or NULL */
    struct ddp_fr_remote *remote;  /* the other nodes' ranks' flight recorders (node 0: driver/frshare.c) */
};

/* One source: what it does at each step (NULL: nothing). open returns 0 or a negative errno with err. */
struct source {
    const char *name;
    int (*open)(struct ddp_watch *w, struct ddp_err *err);
    void (*prepare)(struct ddp_watch *w, const struct ddp_attempt *plan);
    void (*start)(struct ddp_watch *w, struct ddp_runner_attempt *r);
    void (*stop)(struct ddp_watch *w);     /* the attempt no longer runs */
    void (*stopping)(struct ddp_watch *w); /* its workers are being stopped */
    void (*started)(struct ddp_watch *w, const struct ddp_runner_worker *k);
    /* a line: true when it was this source's alone (nothing else sees it) */
    bool (*line)(struct ddp_watch *w, struct ddp_runner_worker *k, int which, const char *line, size_t len);
    /* a line recognise.c classified as c (not DDP_CLASS_NONE) */
    void (*classified)(struct ddp_watch *w, struct ddp_runner_worker *k, enum ddp_class c, const char *line,
                       size_t len);
    void (*output)(struct ddp_watch *w, struct ddp_runner_worker *k, long long now);
    void (*resumed)(struct ddp_watch *w, long long now);
    void (*exited)(struct ddp_watch *w, const struct ddp_runner_worker *k);
    void (*changed)(struct ddp_watch *w);
    void (*all_gone)(struct ddp_watch *w);
    void (*close)(struct ddp_watch *w);
    void (*free)(struct ddp_watch *w);
};

/* ---------------------------------------------------------------- torch's FileTimer (ft_expiry.h) */

static int timer_open(struct ddp_watch *w, struct ddp_err *err)
{
    const struct ddp_plan_ctx *ctx = w->cfg.ctx;
    if (!ctx->timer_file || !ctx->spec->timer_file)
        return 0;
    return ddp_ft_expiry_start(w->cfg.loop, ctx->timer_file, w->cfg.rn, w->cfg.sink, &w->timer, err);
}

static void timer_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    (void)plan;
    ddp_ft_expiry_clear(w->timer);
}

static void timer_close(struct ddp_watch *w)
{
    ddp_ft_expiry_close(w->timer);
}

static void timer_free(struct ddp_watch *w)
{
    ddp_ft_expiry_free(w->timer);
}

/* ---------------------------------------------------------------- the hang capture (capture.h) */

/* the capture's verdict reads the flight recorders the live watch saw last */
static const struct ddp_fr_state *live_fr(void *arg, size_t i, long long *still_ms)
{
    struct ddp_watch *w = arg;
    return ddp_live_fr(w->live, i, still_ms);
}

/* what the other sources know of worker i, for the capture's verdict */
static void capture_evidence(void *arg, size_t i, struct ddp_capture_evidence *ev)
{
    struct ddp_watch *w = arg;
    ev->last_progress_ms = ddp_stall_progress_ms(w->stall, i);
    ev->reported_timeout = ddp_coll_timeout_of(w->coll, i, &ev->tmo);
}

static int capture_open(struct ddp_watch *w, struct ddp_err *err)
{
    (void)err;
    w->cap = ddp_capture_new(w->cfg.loop, w->cfg.ctx, w->cfg.rn, w->cfg.rec, w->cfg.decided, w->cfg.arg);
    ddp_capture_recorder(w->cap, live_fr, w, w->remote);
    ddp_capture_evidence(w->cap, capture_evidence, w);
    return 0;
}

static void capture_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    ddp_capture_prepare(w->cap, plan);
}

static bool capture_line(struct ddp_watch *w, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    return ddp_capture_line(w->cap, k, which, line, len);
}

static void capture_changed(struct ddp_watch *w)
{
    ddp_capture_changed(w->cap);
}

static void capture_all_gone(struct ddp_watch *w)
{
    ddp_capture_all_gone(w->cap); /* every rank is gone: decide before the policy ends the attempt */
}

static void capture_close(struct ddp_watch *w)
{
    ddp_capture_close(w->cap);
}

static void capture_free(struct ddp_watch *w)
{
    ddp_capture_free(w->cap);
}

/* ---------------------------------------------------------------- the progress watch (stall.h) */

static int stall_open(struct ddp_watch *w, struct ddp_err *err)
{
    (void)err;
    w->stall = ddp_stall_new(w->cfg.loop, w->cfg.ctx->spec, w->cfg.rn, w->cfg.sink);
    return 0;
}

static void stall_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    ddp_stall_prepare(w->stall, plan);
}

static void stall_start(struct ddp_watch *w, struct ddp_runner_attempt *r)
{
    ddp_stall_start(w->stall, r);
}

static void stall_stop(struct ddp_watch *w)
{
    ddp_stall_stop(w->stall);
}

static void stall_output(struct ddp_watch *w, struct ddp_runner_worker *k, long long now)
{
    ddp_stall_output(w->stall, k, now);
}

static void stall_resumed(struct ddp_watch *w, long long now)
{
    ddp_stall_resumed(w->stall, now);
}

static void stall_close(struct ddp_watch *w)
{
    ddp_stall_close(w->stall);
}

static void stall_free(struct ddp_watch *w)
{
    ddp_stall_free(w->stall);
}

/* ---------------------------------------------------------------- [timeout] wall (wall.h) */

static int wall_open(struct ddp_watch *w, struct ddp_err *err)
{
    (void)err;
    w->wall = ddp_wall_new(w->cfg.loop, w->cfg.ctx->spec->timeout_wall_ms, w->cfg.sink);
    return 0;
}

static void wall_start(struct ddp_watch *w, struct ddp_runner_attempt *r)
{
    (void)r;
    ddp_wall_start(w->wall);
}

static void wall_stop(struct ddp_watch *w)
{
    ddp_wall_stop(w->wall);
}

static void wall_close(struct ddp_watch *w)
{
    ddp_wall_close(w->wall);
}

static void wall_free(struct ddp_watch *w)
{
    ddp_wall_free(w->wall);
}

/* ---------------------------------------------------------------- collective timeouts ranks print (coll_timeout.h) */

static int coll_open(struct ddp_watch *w, struct ddp_err *err)
{
    (void)err;
    w->coll = ddp_coll_timeout_new(w->cfg.sink);
    return 0;
}

static void coll_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    ddp_coll_timeout_prepare(w->coll, plan);
}

static void coll_classified(struct ddp_watch *w, struct ddp_runner_worker *k, enum ddp_class c, const char *line,
                            size_t len)
{
    ddp_coll_timeout_line(w->coll, k, c, line, len);
}

static void coll_free(struct ddp_watch *w)
{
    ddp_coll_timeout_free(w->coll);
}

/* ---------------------------------------------------------------- the live watch (live.h: sample, recorder, progress)
 */

static int live_open(struct ddp_watch *w, struct ddp_err *err)
{
    (void)err;
    w->live = ddp_live_new(w->cfg.loop, w->cfg.ctx->spec, w->cfg.ctx->hostname, ddp_records_record(w->cfg.rec),
                           ddp_records_stragglers(w->cfg.rec), w->cfg.sink);
    ddp_live_recorder(w->live, ddp_records_recorder(w->cfg.rec), w->remote);
    return 0;
}

static void live_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    ddp_live_prepare(w->live, plan);
}

/* worker i's heartbeat file, which the live watch reads as a sign of progress */
static const char *heartbeat_of(void *arg, size_t i)
{
    struct ddp_watch *w = arg;
    return ddp_stall_heartbeat(w->stall, i);
}

static void live_start(struct ddp_watch *w, struct ddp_runner_attempt *r)
{
    ddp_live_start(w->live, r, heartbeat_of, w);
}

static void live_stopping(struct ddp_watch *w)
{
    ddp_live_stop(w->live);
}

static void live_started(struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    ddp_live_program(w->live, k);
}

static void live_output(struct ddp_watch *w, struct ddp_runner_worker *k, long long now)
{
    ddp_live_output(w->live, k, now);
}

static void live_exited(struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    ddp_live_exited(w->live, k);
}

static void live_free(struct ddp_watch *w)
{
    ddp_live_free(w->live);
}

/* ---------------------------------------------------------------- NVML's GPU events (gpuwatch.h) */

/* Started once the first attempt with a GPU worker has its workers spawned (NVML's event set costs an nvmlInit:
 * never before the workers, never for a job without GPUs). */
static void gpu_start(struct ddp_watch *w, struct ddp_runner_attempt *r)
{
    bool gpus = false;
    for (size_t i = 0; i < r->plan.nworkers; i++)
        gpus |= r->plan.workers[i].gpu >= 0;
    if (gpus && !w->gpuwatch)
        w->gpuwatch = ddp_gpuwatch_start(w->cfg.loop, w->cfg.ctx->topo, w->cfg.gpu_event, w->cfg.arg);
}

static void gpu_close(struct ddp_watch *w)
{
    ddp_gpuwatch_close(w->gpuwatch);
}

static void gpu_free(struct ddp_watch *w)
{
    ddp_gpuwatch_free(w->gpuwatch);
}

/* ---------------------------------------------------------------- the table */

/* In this order at every step (the capture sees a line before the others; the progress watch sees output before
 * the live watch; the heartbeat files exist before the live watch starts). */
static const struct source sources[] = {
    {.name = "filetimer", .open = timer_open, .prepare = timer_prepare, .close = timer_close, .free = timer_free},
    {.name = "capture",
     .open = capture_open,
     .prepare = capture_prepare,
     .line = capture_line,
     .changed = capture_changed,
     .all_gone = capture_all_gone,
     .close = capture_close,
     .free = capture_free},
    {.name = "stall",
     .open = stall_open,
     .prepare = stall_prepare,
     .start = stall_start,
     .stop = stall_stop,
     .output = stall_output,
     .resumed = stall_resumed,
     .close = stall_close,
     .free = stall_free},
    {.name = "wall", .open = wall_open, .start = wall_start, .stop = wall_stop, .close = wall_close, .free = wall_free},
    {.name = "coll_timeout",
     .open = coll_open,
     .prepare = coll_prepare,
     .classified = coll_classified,
     .free = coll_free},
    {.name = "live",
     .open = live_open,
     .prepare = live_prepare,
     .start = live_start,
     .stopping = live_stopping,
     .started = live_started,
     .output = live_output,
     .exited = live_exited,
     .free = live_free},
    {.name = "gpuwatch", .start = gpu_start, .close = gpu_close, .free = gpu_free},
};
#define NSOURCES (sizeof(sources) / sizeof(sources[0]))

/* ---------------------------------------------------------------- the interface */

int ddp_watch_install(const char *run_dir, char **pydir_out, int *signo_out, struct ddp_err *err)
{
    *signo_out = ddp_sample_signal();
    return ddp_sample_install(run_dir, pydir_out, err);
}

int ddp_watch_open(const struct ddp_watch_config *cfg, struct ddp_watch **out, struct ddp_err *err)
{
    struct ddp_watch *w = ddp_xcalloc(1, sizeof(*w));
    int rc = 0;
    w->cfg = *cfg;
    w->remote = ddp_fr_remote_new();
    for (size_t i = 0; i < NSOURCES; i++) {
        int r = sources[i].open ? sources[i].open(w, err) : 0;
        if (r < 0 && rc == 0)
            rc = r; /* the first failure's message stays in err */
    }
    *out = w;
    return rc;
}

void ddp_watch_close(struct ddp_watch *w)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].close)
            sources[i].close(w);
}

void ddp_watch_free(struct ddp_watch *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].free)
            sources[i].free(w);
    ddp_fr_remote_free(w->remote);
    free(w);
}

void ddp_watch_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].prepare)
            sources[i].prepare(w, plan);
}

void ddp_watch_attempt_start(struct ddp_watch *w, struct ddp_runner_attempt *r)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].start)
            sources[i].start(w, r);
}

void ddp_watch_attempt_stop(struct ddp_watch *w)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].stop)
            sources[i].stop(w);
}

void ddp_watch_stopping(struct ddp_watch *w)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].stopping)
            sources[i].stopping(w);
}

void ddp_watch_started(struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].started)
            sources[i].started(w, k);
}

void ddp_watch_line(struct ddp_watch *w, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].line && sources[i].line(w, k, which, line, len))
            return;
    enum ddp_class c = ddp_recognise_line(line, len);
    if (c == DDP_CLASS_NONE)
        return;
    ddp_records_recognised(w->cfg.rec, k, c, line, len); /* before a source reports it: the root cause's line */
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].classified)
            sources[i].classified(w, k, c, line, len);
}

void ddp_watch_output(struct ddp_watch *w, struct ddp_runner_worker *k, long long now)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].output)
            sources[i].output(w, k, now);
}

void ddp_watch_resumed(struct ddp_watch *w, long long now)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].resumed)
            sources[i].resumed(w, now);
}

void ddp_watch_exited(struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].exited)
            sources[i].exited(w, k);
}

void ddp_watch_changed(struct ddp_watch *w)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].changed)
            sources[i].changed(w);
}

void ddp_watch_all_gone(struct ddp_watch *w)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i].all_gone)
            sources[i].all_gone(w);
    ddp_watch_attempt_stop(w);
}

int ddp_watch_capture_possible(const struct ddp_watch *w)
{
    return ddp_capture_possible(w->cap);
}

void ddp_watch_capture_begin(struct ddp_watch *w, enum ddp_class tcls)
{
    ddp_capture_begin(w->cap, tcls);
}

bool ddp_watch_captured(const struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    return ddp_capture_in(w->cap, k);
}

const struct ddp_fr_state *ddp_watch_fr_now(const struct ddp_watch *w, size_t i, long long now, long long *still_ms)
{
    return ddp_live_fr_now(w->live, i, now, still_ms);
}

struct ddp_fr_remote *ddp_watch_remote(struct ddp_watch *w)
{
    return w->remote;
}
