/* watch: see watch.h. The sources are rows of one table (sources[] below), each a `const struct ddp_watch_source`
 * its module exports (source.h); the interface walks the table in order and keeps only each one's state.
 * To add a source: its module beside the others, exporting its operations, and one row here (README's "Where new
 * code goes" names every file it touches, the unit test and README's Layout included). */
#include "watch/watch.h"

#include <stdlib.h>

#include "records/recognise.h"
#include "watch/atfail.h"
#include "watch/capture.h"
#include "watch/coll_timeout.h"
#include "watch/ft_expiry.h"
#include "watch/gpuwatch.h"
#include "watch/live.h"
#include "watch/sample.h"
#include "watch/stall.h"
#include "watch/wall.h"

/* In this order at every step. An order that matters is declared by the source that needs it (its `before`:
 * the recorders at a failure are read before the live watch stops) and checked at open (ddp_watch_order_check);
 * the rest holds by the steps themselves: every prepare (the progress watch's heartbeat files) runs before any
 * start, and every source's line op (the capture's stack dumps) before a line is classified. Each row is its
 * module's own. */
static const struct ddp_watch_source *const sources[] = {
    &ddp_ft_expiry_source,    &ddp_capture_source, &ddp_stall_source, &ddp_wall_source,
    &ddp_coll_timeout_source, &ddp_atfail_source,  &ddp_live_source,  &ddp_gpuwatch_source,
};
#define NSOURCES (sizeof(sources) / sizeof(sources[0]))

struct ddp_watch {
    struct ddp_watch_env env;
    void *self[NSOURCES]; /* each source's state, as its open made it */
};

const struct ddp_watch_source *const *ddp_watch_sources(size_t *n)
{
    *n = NSOURCES;
    return sources;
}

/* Every source with an operation op, in the table's order: EACH(op) sources[i]->op(w->self[i], ...); */
#define EACH(op)                                                                                                       \
    for (size_t i = 0; i < NSOURCES; i++)                                                                              \
        if (sources[i]->op)

/* ---------------------------------------------------------------- the interface */

int ddp_watch_install(const char *run_dir, char **pydir_out, int *signo_out, struct ddp_err *err)
{
    *signo_out = ddp_sample_signal();
    return ddp_sample_install(run_dir, pydir_out, err);
}

void ddp_watch_where(const char *run_dir, char **pydir_out, int *signo_out)
{
    *signo_out = ddp_sample_signal();
    *pydir_out = ddp_xasprintf("%s/" DDP_SAMPLE_PYDIR, run_dir);
}

int ddp_watch_open(const struct ddp_watch_config *cfg, struct ddp_watch **out, struct ddp_err *err)
{
    struct ddp_watch *w = ddp_xcalloc(1, sizeof(*w));
    w->env.cfg = *cfg;
    w->env.remote = ddp_fr_remote_new();
    w->env.sources = sources;
    w->env.self = w->self;
    w->env.nsources = NSOURCES;
    int rc = ddp_watch_order_check(sources, NSOURCES, err); /* a table reordered against a source's `before` */
    for (size_t i = 0; i < NSOURCES; i++) {
        int r = sources[i]->open ? sources[i]->open(&w->env, &w->self[i], err) : 0;
        if (r < 0 && rc == 0)
            rc = r; /* the first failure's message stays in err */
    }
    *out = w;
    return rc;
}

void ddp_watch_close(struct ddp_watch *w)
{
    EACH(close)
    sources[i]->close(w->self[i]);
}

void ddp_watch_free(struct ddp_watch *w)
{
    if (!w)
        return;
    EACH(free)
    sources[i]->free(w->self[i]);
    ddp_fr_remote_free(w->env.remote);
    free(w);
}

void ddp_watch_prepare(struct ddp_watch *w, const struct ddp_attempt *plan)
{
    EACH(prepare)
    sources[i]->prepare(w->self[i], plan);
}

void ddp_watch_attempt_start(struct ddp_watch *w, struct ddp_runner_attempt *r)
{
    EACH(start)
    sources[i]->start(w->self[i], r);
}

void ddp_watch_attempt_stop(struct ddp_watch *w)
{
    EACH(stop)
    sources[i]->stop(w->self[i]);
}

void ddp_watch_stopping(struct ddp_watch *w)
{
    EACH(stopping)
    sources[i]->stopping(w->self[i]);
}

void ddp_watch_started(struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    EACH(started)
    sources[i]->started(w->self[i], k);
}

void ddp_watch_line(struct ddp_watch *w, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    for (size_t i = 0; i < NSOURCES; i++)
        if (sources[i]->line && sources[i]->line(w->self[i], k, which, line, len))
            return;
    enum ddp_class c = ddp_recognise_line(line, len);
    if (c == DDP_CLASS_NONE)
        return;
    ddp_records_recognised(w->env.cfg.rec, k, c, line, len); /* before a source reports it: the root cause's line */
    EACH(classified)
    sources[i]->classified(w->self[i], k, c, line, len);
}

void ddp_watch_output(struct ddp_watch *w, struct ddp_runner_worker *k, long long now)
{
    EACH(output)
    sources[i]->output(w->self[i], k, now);
}

void ddp_watch_resumed(struct ddp_watch *w, long long now)
{
    EACH(resumed)
    sources[i]->resumed(w->self[i], now);
}

void ddp_watch_exited(struct ddp_watch *w, const struct ddp_runner_worker *k)
{
    EACH(exited)
    sources[i]->exited(w->self[i], k);
}

void ddp_watch_changed(struct ddp_watch *w)
{
    EACH(changed)
    sources[i]->changed(w->self[i]);
}

void ddp_watch_all_gone(struct ddp_watch *w)
{
    EACH(all_gone)
    sources[i]->all_gone(w->self[i]);
    ddp_watch_attempt_stop(w);
}

const struct ddp_watch_env *ddp_watch_env(const struct ddp_watch *w)
{
    return &w->env;
}

struct ddp_fr_remote *ddp_watch_remote(struct ddp_watch *w)
{
    return w->env.remote;
}
