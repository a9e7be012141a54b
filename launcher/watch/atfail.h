/* atfail: the flight recorders at a collective failure. When a rank fails with a collective error (gloo's size or
 * mismatch enforcement, an NCCL error, a collective timeout), the driver asks, before the others are stopped, for
 * the running ranks' recorders with their entries (the live watch's sampler, progress.h), waits for them at most
 * DDP_ATFAIL_MS on a loop timer, and has mismatch.h compare op, shapes and dtypes; the rank whose values differ
 * becomes the root cause (records.h), both sides named, the failed rank listed after it. It stops nothing: the
 * driver's policy does, once `decided` is called (the same callback as the hang capture's). */
#ifndef DDP_ATFAIL_H
#define DDP_ATFAIL_H

#include <stdbool.h>

#include "run/runner.h"

#define DDP_ATFAIL_MS 1000 /* the longest wait for the recorders */
#define DDP_ATFAIL_POLL_MS 50

struct ddp_atfail;
struct ddp_watch_env;

/* The one of the watch env belongs to (watch.h's ddp_watch_env), or NULL when it is not open. */
struct ddp_atfail *ddp_atfail_in_watch(const struct ddp_watch_env *env);

/* k (of the current attempt) failed: true when its output showed a collective error and its attempt's ranks are
 * sampled, so that the recorders may be asked (remembers k for ddp_atfail_begin). */
bool ddp_atfail_possible(struct ddp_atfail *a, const struct ddp_runner_worker *k);
/* Ask the recorders of the ranks still running; `decided` is called from the loop once they answered or the wait
 * passed, after the verdict (if any) went to the records. When every rank is gone or the workers are being
 * stopped anyway (a second Ctrl-C kills them) the verdict is made with what came, and decided is not called. */
void ddp_atfail_begin(struct ddp_atfail *a);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_atfail_source;

#endif
