/* coll_timeout: see coll_timeout.h. */
#include "watch/coll_timeout.h"

#include <stdlib.h>

#include "records/recognise.h"
#include "watch/source.h"

/* What a worker of the current attempt reported. */
struct reported {
    bool timeout;                /* it printed a collective timeout */
    struct ddp_hang_timeout tmo; /* what those lines said */
};

struct ddp_coll_timeout {
    struct ddp_timeout_sink sink;
    struct reported *of; /* per worker of the current attempt, n of them */
    size_t n;
};

struct ddp_coll_timeout *ddp_coll_timeout_new(struct ddp_timeout_sink sink)
{
    struct ddp_coll_timeout *ct = ddp_xcalloc(1, sizeof(*ct));
    ct->sink = sink;
    return ct;
}

void ddp_coll_timeout_free(struct ddp_coll_timeout *ct)
{
    if (ct)
        free(ct->of);
    free(ct);
}

void ddp_coll_timeout_prepare(struct ddp_coll_timeout *ct, const struct ddp_attempt *plan)
{
    free(ct->of);
    ct->n = plan->nworkers;
    ct->of = ddp_xcalloc(ct->n ? ct->n : 1, sizeof(*ct->of));
}

void ddp_coll_timeout_line(struct ddp_coll_timeout *ct, struct ddp_runner_worker *k, enum ddp_class c, const char *line,
                           size_t len)
{
    if (!ddp_class_is_timeout(c))
        return;
    struct reported none = {0};
    struct reported *o =
        ddp_runner_is_current(k) && ddp_runner_worker_index(k) < ct->n ? &ct->of[ddp_runner_worker_index(k)] : &none;
    struct ddp_hang_timeout t = o->tmo;
    if (!t.waiting)
        t.seq = -1;
    if (ddp_hang_parse_timeout(line, len, &t))
        o->tmo = t;
    o->timeout = true;
    const char *backend = ddp_recognise_backend(line, len);
    struct ddp_timeout to = {.cls = c,
                             .k = k,
                             .why = ddp_xasprintf("rank %d reported a %s%scollective timeout (%s)",
                                                  ddp_runner_worker_rank(k), backend ? backend : "", backend ? " " : "",
                                                  ddp_class_name(c))};
    ct->sink.fn(ct->sink.arg, &to);
}

bool ddp_coll_timeout_of(const struct ddp_coll_timeout *ct, size_t i, struct ddp_hang_timeout *tmo)
{
    if (i >= ct->n) {
        *tmo = (struct ddp_hang_timeout){0};
        return false;
    }
    *tmo = ct->of[i].tmo;
    return ct->of[i].timeout;
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    *self = ddp_coll_timeout_new(env->cfg.sink);
    return 0;
}

static void source_prepare(void *self, const struct ddp_attempt *plan)
{
    ddp_coll_timeout_prepare(self, plan);
}

static void source_classified(void *self, struct ddp_runner_worker *k, enum ddp_class c, const char *line, size_t len)
{
    ddp_coll_timeout_line(self, k, c, line, len);
}

static void source_free(void *self)
{
    ddp_coll_timeout_free(self);
}

const struct ddp_watch_source ddp_coll_timeout_source = {.name = "coll_timeout",
                                                         .open = source_open,
                                                         .prepare = source_prepare,
                                                         .classified = source_classified,
                                                         .free = source_free};

const struct ddp_coll_timeout *ddp_coll_timeout_in_watch(const struct ddp_watch_env *env)
{
    return ddp_watch_state(env, &ddp_coll_timeout_source);
}
