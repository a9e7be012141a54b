/* source: what a source of the hang watch is to watch.c: one `const struct ddp_watch_source` that its module
 * exports (its operations, each NULL when it has nothing to do at that step, and the sources it must precede), and
 * the environment a source is opened in (the watch's configuration, the other nodes' flight recorders). watch.c
 * keeps the table of sources and calls them in order; it keeps no state of theirs and no adapter. A source that
 * others read exports a typed accessor, ddp_<module>_in_watch(env), that finds its state by its own struct
 * ddp_watch_source (ddp_watch_state): no lookup by name, and no cast outside the module that owns the type.
 * It says nothing about what any source does: that is each module's header. */
#ifndef DDP_SOURCE_H
#define DDP_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "base/util.h"
#include "records/class.h"
#include "records/records.h"
#include "run/plan.h"
#include "run/runner.h"
#include "watch/fr_remote.h"
#include "watch/timeout.h"

struct ddp_gpuwatch_event;

struct ddp_watch_config {
    uv_loop_t *loop;
    const struct ddp_plan_job *job; /* its spec, hostname, topology, log dir; outlives the watch */
    const char *timer_file;         /* the timer FIFO (TORCHELASTIC_TIMER_FILE), or NULL */
    struct ddp_runner *rn;          /* outlives the watch */
    struct ddp_records *rec;        /* outlives the watch */
    struct ddp_timeout_sink sink;   /* every timeout source reports here */
    void (*decided)(void *arg);     /* the hang capture's verdict is out (or there was none to make) */
    /* an NVML event of the job's GPUs (gpuwatch.h's ddp_gpuwatch_fn) */
    void (*gpu_event)(void *arg, const struct ddp_gpuwatch_event *ev);
    void *arg; /* for decided and gpu_event */
};

/* What a source is opened with; it lives as long as the watch, so a source may keep a pointer to it. */
struct ddp_watch_env {
    struct ddp_watch_config cfg;
    struct ddp_fr_remote *remote; /* the other nodes' ranks' flight recorders (node 0: driver/frshare.c) */
    /* watch.c's table and each row's state, for ddp_watch_state: a source reads another's through that
     * source's typed accessor, never these */
    const struct ddp_watch_source *const *sources;
    void *const *self;
    size_t nsources;
};

/* One source. self is what its open made (*self); a source that does not run for this job may leave it NULL,
 * and is then called with NULL. */
struct ddp_watch_source {
    const char *name; /* for messages (ddp_watch_order_check's), never a lookup */
    /* The sources whose operations must run after this one's at every step (NULL-terminated; NULL: none): a
     * source that reads another's state says so, and watch.c's table keeps those on later rows
     * (ddp_watch_order_check, at ddp_watch_open and in test_watch). */
    const struct ddp_watch_source *const *before;
    /* 0, or a negative errno with err (a source the spec asks for that could not start); *self either way. */
    int (*open)(const struct ddp_watch_env *env, void **self, struct ddp_err *err);
    void (*prepare)(void *self, const struct ddp_attempt *plan);
    void (*start)(void *self, struct ddp_runner_attempt *r);
    void (*stop)(void *self);     /* the attempt no longer runs */
    void (*stopping)(void *self); /* its workers are being stopped */
    void (*started)(void *self, const struct ddp_runner_worker *k);
    /* a line: true when it was this source's alone (nothing else sees it) */
    bool (*line)(void *self, struct ddp_runner_worker *k, int which, const char *line, size_t len);
    /* a line recognise.c classified as c (not DDP_CLASS_NONE) */
    void (*classified)(void *self, struct ddp_runner_worker *k, enum ddp_class c, const char *line, size_t len);
    void (*output)(void *self, struct ddp_runner_worker *k, long long now);
    void (*resumed)(void *self, long long now);
    void (*exited)(void *self, const struct ddp_runner_worker *k);
    void (*changed)(void *self);
    void (*all_gone)(void *self);
    void (*close)(void *self);
    void (*free)(void *self);
};

/* source.c. The state src's open made in the watch of env, or NULL when src is no row of its table or is not
 * open yet. Only src's own module calls it, in its typed accessor (ddp_live_in_watch...): the others call that. */
void *ddp_watch_state(const struct ddp_watch_env *env, const struct ddp_watch_source *src);

/* Whether the n rows of tab keep every row before the sources its `before` names (each of them a row): 0, or
 * -EINVAL with err naming both sources. Pure. */
int ddp_watch_order_check(const struct ddp_watch_source *const *tab, size_t n, struct ddp_err *err);

#endif
