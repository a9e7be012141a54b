/* live: see live.h. */
#include "watch/live.h"

#include <stdlib.h>

#include "watch/progress.h"
#include "watch/rasq.h"
#include "watch/source.h"
#include "watch/stall.h"

struct ddp_live {
    uv_loop_t *loop;
    const struct ddp_spec *spec;
    const char *host;
    struct ddp_jsonlog *rec;
    json_t *stragglers;
    json_t *recorder;                   /* summary.json's flight_recorder, or NULL */
    const struct ddp_fr_remote *remote; /* the other nodes' ranks' recorders (node 0), or NULL */
    struct ddp_recovery *recovery;      /* summary.json's recovery (records.h), or NULL */
    struct ddp_timeout_sink sink;
    struct ddp_progress *progress;        /* the watched attempt's, or NULL */
    const struct ddp_runner_attempt *run; /* the watched attempt */
    struct ddp_progress_rank *watched;    /* what it watches, per worker (kept until the next attempt) */
    struct ddp_fr_state *fr;              /* each worker's flight recorder when the watch stopped, or NULL */
    bool *has_fr;
    long long *fr_still_ms;
    size_t nfr;
};

struct ddp_live *ddp_live_new(uv_loop_t *loop, const struct ddp_spec *spec, const char *host, struct ddp_jsonlog *rec,
                              json_t *stragglers, struct ddp_timeout_sink sink)
{
    struct ddp_live *l = ddp_xcalloc(1, sizeof(*l));
    l->loop = loop;
    l->spec = spec;
    l->host = host;
    l->rec = rec;
    l->stragglers = stragglers;
    l->sink = sink;
    return l;
}

void ddp_live_recorder(struct ddp_live *l, json_t *recorder, const struct ddp_fr_remote *remote)
{
    l->recorder = recorder;
    l->remote = remote;
}

void ddp_live_free(struct ddp_live *l)
{
    if (l) {
        free(l->watched);
        free(l->fr);
        free(l->has_fr);
        free(l->fr_still_ms);
    }
    free(l);
}

void ddp_live_prepare(struct ddp_live *l, const struct ddp_attempt *plan)
{
    if (l->spec->timeout_sample && plan->dir)
        ddp_mkdir_p(plan->dir, 0700);
}

/* A suspected hang lasted [timeout] on_suspect_after (progress.h): a hang of the culprits, as a stall would be. */
static void on_act(void *arg, const bool *culprit, const char *why, bool final)
{
    struct ddp_live *l = arg;
    const struct ddp_runner_attempt *r = l->run;
    struct ddp_runner_worker *first = NULL;
    size_t named = 0, ngpus = 0;
    if (!r)
        return;
    size_t nw = ddp_runner_attempt_nworkers(r);
    int *gpus = ddp_xcalloc(nw ? nw : 1, sizeof(*gpus));
    for (size_t i = 0; i < nw; i++)
        if (culprit[i]) {
            named++;
            first = first ? first : ddp_runner_attempt_worker(r, i);
        }
    for (size_t i = 0; i < nw && named < nw; i++) /* every rank named: nobody's GPU is to blame */
        if (culprit[i])
            gpus[ngpus++] = ddp_runner_worker_plan(ddp_runner_attempt_worker(r, i))->gpu;
    struct ddp_timeout to = {
        .cls = DDP_CLASS_HANG, .k = first, .why = ddp_xstrdup(why), .gpus = gpus, .ngpus = ngpus, .final = final};
    l->sink.fn(l->sink.arg, &to);
    free(gpus);
}

void ddp_live_start(struct ddp_live *l, struct ddp_runner_attempt *r, const char *(*hb)(void *arg, size_t i), void *arg)
{
    struct ddp_progress_hooks hooks = {l, on_act, l->sink.suspect};
    ddp_live_stop(l);
    if (!l->spec->timeout_sample)
        return;
    size_t nw = ddp_runner_attempt_nworkers(r);
    free(l->watched);
    l->watched = ddp_xcalloc(nw ? nw : 1, sizeof(*l->watched));
    for (size_t i = 0; i < nw; i++) {
        const struct ddp_worker *w = ddp_runner_worker_plan(ddp_runner_attempt_worker(r, i));
        l->watched[i] = (struct ddp_progress_rank){
            w->rank,
            w->local_rank,
            w->gpu,
            w->gpu_busid,
            w->stacks_file,
            w->fr_pipe,
            ddp_rasq_port(ddp_runner_worker_env(ddp_runner_attempt_worker(r, i), "NCCL_RAS_ADDR"))};
    }
    l->run = r;
    l->progress = ddp_progress_start(l->loop, l->spec, l->host, ddp_runner_attempt_number(r), l->watched, nw, l->rec,
                                     l->stragglers, &hooks);
    ddp_progress_recorder(l->progress, l->recorder, l->remote);
    ddp_progress_recovery(l->progress, l->recovery, ddp_now_ms());
    for (size_t i = 0; i < nw; i++)
        if (ddp_runner_worker_pgid(ddp_runner_attempt_worker(r, i)) > 0)
            ddp_progress_spawned(l->progress, i, ddp_runner_worker_pgid(ddp_runner_attempt_worker(r, i)), hb(arg, i));
}

void ddp_live_program(struct ddp_live *l, const struct ddp_runner_worker *k)
{
    if (l->progress && ddp_runner_worker_attempt(k) == l->run)
        ddp_progress_program(l->progress, ddp_runner_worker_index(k), ddp_runner_worker_pid(k));
}

void ddp_live_output(struct ddp_live *l, const struct ddp_runner_worker *k, long long now)
{
    if (l->progress && ddp_runner_worker_attempt(k) == l->run)
        ddp_progress_output(l->progress, ddp_runner_worker_index(k), now);
}

void ddp_live_exited(struct ddp_live *l, const struct ddp_runner_worker *k)
{
    if (l->progress && ddp_runner_worker_attempt(k) == l->run)
        ddp_progress_exited(l->progress, ddp_runner_worker_index(k));
}

const struct ddp_fr_state *ddp_live_fr(const struct ddp_live *l, size_t i, long long *still_ms)
{
    if (!l || i >= l->nfr || !l->has_fr[i])
        return NULL;
    *still_ms = l->fr_still_ms[i];
    return &l->fr[i];
}

const struct ddp_fr_state *ddp_live_fr_now(const struct ddp_live *l, size_t i, long long now, long long *still_ms)
{
    return l && l->progress ? ddp_progress_fr(l->progress, i, now, still_ms) : NULL;
}

int ddp_live_ask(struct ddp_live *l, long long now)
{
    return l && l->progress ? ddp_progress_ask(l->progress, now) : 0;
}

bool ddp_live_answered(struct ddp_live *l, long long now)
{
    return !l || !l->progress || ddp_progress_answered(l->progress, now);
}

void ddp_live_stop(struct ddp_live *l)
{
    if (l->progress) { /* what the recorders said last, for the verdict of a capture that follows (capture.h) */
        long long now = ddp_now_ms();
        free(l->fr);
        free(l->has_fr);
        free(l->fr_still_ms);
        l->nfr = l->run ? ddp_runner_attempt_nworkers(l->run) : 0;
        l->fr = ddp_xcalloc(l->nfr ? l->nfr : 1, sizeof(*l->fr));
        l->has_fr = ddp_xcalloc(l->nfr ? l->nfr : 1, sizeof(*l->has_fr));
        l->fr_still_ms = ddp_xcalloc(l->nfr ? l->nfr : 1, sizeof(*l->fr_still_ms));
        for (size_t i = 0; i < l->nfr; i++) {
            const struct ddp_fr_state *f = ddp_progress_fr(l->progress, i, now, &l->fr_still_ms[i]);
            if (f) {
                l->fr[i] = *f;
                l->has_fr[i] = true;
            }
        }
    }
    ddp_progress_stop(l->progress);
    l->progress = NULL;
    l->run = NULL;
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

/* What the live watch keeps besides itself: the environment, for the progress watch's heartbeat files. */
struct live_source {
    struct ddp_live *live;
    const struct ddp_watch_env *env;
};

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    const struct ddp_watch_config *cfg = &env->cfg;
    struct live_source *s = ddp_xcalloc(1, sizeof *s);
    s->env = env;
    s->live = ddp_live_new(cfg->loop, cfg->job->spec, cfg->job->hostname, ddp_records_record(cfg->rec),
                           ddp_records_stragglers(cfg->rec), cfg->sink);
    ddp_live_recorder(s->live, ddp_records_recorder(cfg->rec), env->remote);
    s->live->recovery = ddp_records_recovery(cfg->rec);
    *self = s;
    return 0;
}

static void source_prepare(void *self, const struct ddp_attempt *plan)
{
    ddp_live_prepare(((struct live_source *)self)->live, plan);
}

/* worker i's heartbeat file, which the live watch reads as a sign of progress (the progress watch made it) */
static const char *heartbeat_of(void *arg, size_t i)
{
    const struct ddp_stall *stall = ddp_stall_in_watch(arg);
    return stall ? ddp_stall_heartbeat(stall, i) : NULL;
}

static void source_start(void *self, struct ddp_runner_attempt *r)
{
    struct live_source *s = self;
    ddp_live_start(s->live, r, heartbeat_of, (void *)s->env);
}

static void source_stopping(void *self)
{
    ddp_live_stop(((struct live_source *)self)->live);
}

static void source_started(void *self, const struct ddp_runner_worker *k)
{
    ddp_live_program(((struct live_source *)self)->live, k);
}

static void source_output(void *self, struct ddp_runner_worker *k, long long now)
{
    ddp_live_output(((struct live_source *)self)->live, k, now);
}

static void source_exited(void *self, const struct ddp_runner_worker *k)
{
    ddp_live_exited(((struct live_source *)self)->live, k);
}

static void source_free(void *self)
{
    struct live_source *s = self;
    ddp_live_free(s->live);
    free(s);
}

const struct ddp_watch_source ddp_live_source = {.name = "live",
                                                 .open = source_open,
                                                 .prepare = source_prepare,
                                                 .start = source_start,
                                                 .stopping = source_stopping,
                                                 .started = source_started,
                                                 .output = source_output,
                                                 .exited = source_exited,
                                                 .free = source_free};

struct ddp_live *ddp_live_in_watch(const struct ddp_watch_env *env)
{
    const struct live_source *s = ddp_watch_state(env, &ddp_live_source);
    return s ? s->live : NULL;
}
