/* source: what a source of the hang watch is to watch.c: one `const struct ddp_watch_source` that its module
 * exports (its operations, each NULL when it has nothing to do at that step), and the environment a source is
 * opened in (the watch's configuration, the other nodes' flight recorders, the other sources by name). watch.c
 * keeps the table of sources and calls them in order; it keeps no state of theirs and no adapter.
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
    /* Another source's state, by the name in its struct ddp_watch_source; NULL when it is not open (yet). For
     * the few sources that read another's facts (the capture's evidence, the live watch's heartbeat files). */
    void *(*peer)(const struct ddp_watch_env *env, const char *name);
};

/* One source. self is what its open made (*self); a source that does not run for this job may leave it NULL,
 * and is then called with NULL. */
struct ddp_watch_source {
    const char *name;
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

#endif
