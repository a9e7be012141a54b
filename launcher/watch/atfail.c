/* atfail: see atfail.h. */
#include "watch/atfail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/util.h"
#include "records/recognise.h"
#include "records/records.h"
#include "records/report.h"
#include "watch/live.h"
#include "watch/mismatch.h"
#include "watch/source.h"

struct ddp_atfail {
    const struct ddp_watch_env *env;
    uv_timer_t timer;
    struct ddp_runner_attempt *run; /* the current attempt */
    bool *coll;                     /* per worker: a line of its was a collective error */
    size_t n;
    const struct ddp_runner_worker *failed; /* the failure examined */
    bool active;                            /* asked, not decided yet */
    long long began_ms;
};

static bool collective(enum ddp_class c)
{
    return c == DDP_CLASS_NCCL_ERROR || c == DDP_CLASS_NCCL_TIMEOUT;
}

static struct ddp_live *live(const struct ddp_atfail *a)
{
    return ddp_live_in_watch(a->env);
}

static void tail_line(void *arg, const char *line)
{
    bool *seen = arg;
    *seen |= collective(ddp_recognise_line(line, strlen(line)));
}

bool ddp_atfail_possible(struct ddp_atfail *a, const struct ddp_runner_worker *k)
{
    bool seen;
    if (!a || a->active || !a->env->cfg.job->spec->timeout_sample || !ddp_runner_is_current(k) ||
        ddp_runner_worker_index(k) >= a->n)
        return false;
    seen = a->coll[ddp_runner_worker_index(k)];
    if (!seen) /* its last lines may have come with its exit, before they were classified */
        ddp_runner_worker_tail(k, 1, tail_line, &seen);
    if (seen)
        a->failed = k;
    return seen;
}

/* Compare what the recorders hold now; the verdict goes to the records. */
static void decide(struct ddp_atfail *a)
{
    const struct ddp_runner_attempt *r = a->run;
    long long now = ddp_now_ms(), still;
    if (!r || !a->failed)
        return;
    size_t nw = ddp_runner_attempt_nworkers(r);
    struct ddp_mismatch_input *in = ddp_xcalloc(nw ? nw : 1, sizeof(*in));
    bool *culprit = ddp_xcalloc(nw ? nw : 1, sizeof(*culprit));
    struct ddp_mismatch m;
    for (size_t i = 0; i < nw; i++)
        in[i] = (struct ddp_mismatch_input){ddp_runner_worker_rank(ddp_runner_attempt_worker(r, i)),
                                            ddp_live_fr_now(live(a), i, now, &still),
                                            ddp_runner_attempt_worker(r, i) == a->failed};
    ddp_mismatch_decide(in, nw, culprit, &m);
    const struct ddp_runner_worker *first = NULL;
    for (size_t i = 0; i < nw && !first; i++)
        if (culprit[i])
            first = ddp_runner_attempt_worker(r, i);
    const struct ddp_runner_worker *k = a->failed;
    const char *how = ddp_runner_worker_signo(k) ? ddp_report_signame(ddp_runner_worker_signo(k)) : NULL;
    char ended[64];
    if (how)
        snprintf(ended, sizeof(ended), "died by %s", how);
    else
        snprintf(ended, sizeof(ended), "exited with code %d", ddp_runner_worker_status(k));
    if (m.found) {
        char *why = ddp_xasprintf("flight recorder at the failure: %s; rank %d %s there with a collective error", m.why,
                                  ddp_runner_worker_rank(k), ended);
        ddp_error("attempt %d: %s (recorders read %lld ms after it)", ddp_runner_attempt_number(r), why,
                  now - a->began_ms);
        json_t *j = ddp_mismatch_json(&m);
        json_object_set_new(j, "attempt", json_integer(ddp_runner_attempt_number(r)));
        json_object_set_new(j, "failed_rank", json_integer(ddp_runner_worker_rank(k)));
        json_object_set_new(j, "read_ms", json_integer(now - a->began_ms));
        /* with no majority nobody is blamed, yet the failure is still a mismatch: the failed rank carries it */
        ddp_records_mismatch(a->env->cfg.rec, first ? first : k, why, j,
                             ddp_xasprintf("Collective mismatch at the failure: %s\n  rank %d %s there\n", m.why,
                                           ddp_runner_worker_rank(k), ended));
        free(why);
    }
    free(in);
    free(culprit);
}

/* The verdict; tell: the driver waits for it (decided), else the workers are being stopped or gone anyway and
 * decided would feed the policy from inside its own step. */
static void finish(struct ddp_atfail *a, bool tell)
{
    if (!a->active)
        return;
    a->active = false;
    uv_timer_stop(&a->timer);
    decide(a);
    a->failed = NULL;
    if (tell)
        a->env->cfg.decided(a->env->cfg.arg);
}

static void on_timer(uv_timer_t *t)
{
    struct ddp_atfail *a = t->data;
    long long now = ddp_now_ms();
    if (ddp_live_answered(live(a), now) || now - a->began_ms >= DDP_ATFAIL_MS)
        finish(a, true);
}

void ddp_atfail_begin(struct ddp_atfail *a)
{
    if (!a || a->active || !a->failed)
        return;
    a->active = true;
    a->began_ms = ddp_now_ms();
    int asked = ddp_live_ask(live(a), a->began_ms);
    /* decided from the loop, never inside the driver's feed; at once when nobody was asked */
    uv_timer_start(&a->timer, on_timer, asked > 0 ? DDP_ATFAIL_POLL_MS : 0, DDP_ATFAIL_POLL_MS);
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    struct ddp_atfail *a = ddp_xcalloc(1, sizeof(*a));
    a->env = env;
    uv_timer_init(env->cfg.loop, &a->timer);
    a->timer.data = a;
    *self = a;
    return 0;
}

static void source_prepare(void *self, const struct ddp_attempt *plan)
{
    struct ddp_atfail *a = self;
    free(a->coll);
    a->n = plan->nworkers;
    a->coll = ddp_xcalloc(a->n ? a->n : 1, sizeof(*a->coll));
    a->failed = NULL;
    a->run = NULL;
}

static void source_start(void *self, struct ddp_runner_attempt *r)
{
    ((struct ddp_atfail *)self)->run = r;
}

static void source_classified(void *self, struct ddp_runner_worker *k, enum ddp_class c, const char *line, size_t len)
{
    struct ddp_atfail *a = self;
    (void)line;
    (void)len;
    if (collective(c) && ddp_runner_is_current(k) && ddp_runner_worker_index(k) < a->n)
        a->coll[ddp_runner_worker_index(k)] = true;
}

/* the workers are being stopped anyway (a second Ctrl-C), or all are gone: decide with what came */
static void source_now(void *self)
{
    finish(self, false);
}

static void source_close(void *self)
{
    struct ddp_atfail *a = self;
    a->active = false;
    uv_close((uv_handle_t *)&a->timer, NULL);
}

static void source_free(void *self)
{
    struct ddp_atfail *a = self;
    if (a)
        free(a->coll);
    free(a);
}

/* the recorders at a failure are read (on `stopping`, `all_gone`) before the live watch stops */
static const struct ddp_watch_source *const atfail_before[] = {&ddp_live_source, NULL};

const struct ddp_watch_source ddp_atfail_source = {.name = "atfail",
                                                   .before = atfail_before,
                                                   .open = source_open,
                                                   .prepare = source_prepare,
                                                   .start = source_start,
                                                   .stopping = source_now,
                                                   .classified = source_classified,
                                                   .all_gone = source_now,
                                                   .close = source_close,
                                                   .free = source_free};

struct ddp_atfail *ddp_atfail_in_watch(const struct ddp_watch_env *env)
{
    return ddp_watch_state(env, &ddp_atfail_source);
}
