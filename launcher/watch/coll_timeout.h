/* coll_timeout: collective timeouts that a rank prints (NCCL's watchdog, gloo, the TCP store), a timeout source
 * (timeout.h): a line that recognise.c recognises as one is kept as the rank's (where it waited: hang.c parses
 * it) and reported to the sink. It keeps that per worker of the current attempt; it decides nothing about what
 * follows. */
#ifndef DDP_COLL_TIMEOUT_H
#define DDP_COLL_TIMEOUT_H

#include <stddef.h>

#include "records/class.h"
#include "run/plan.h"
#include "run/runner.h"
#include "watch/hang.h"
#include "watch/timeout.h"

struct ddp_coll_timeout;

/* Caller owns; free with ddp_coll_timeout_free(). */
struct ddp_coll_timeout *ddp_coll_timeout_new(struct ddp_timeout_sink sink);
void ddp_coll_timeout_free(struct ddp_coll_timeout *ct);
/* The workers of plan are about to start: forget what the last attempt's reported. */
void ddp_coll_timeout_prepare(struct ddp_coll_timeout *ct, const struct ddp_attempt *plan);

/* k printed line (len bytes), recognised as class c: when c is a collective timeout, note it (k of the current
 * attempt) and report it. */
void ddp_coll_timeout_line(struct ddp_coll_timeout *ct, struct ddp_runner_worker *k, enum ddp_class c, const char *line,
                           size_t len);

/* Worker i of the current attempt: true when it printed a collective timeout, with *tmo what those lines said
 * (tmo->waiting: it waited inside a collective); false with *tmo zeroed otherwise. */
bool ddp_coll_timeout_of(const struct ddp_coll_timeout *ct, size_t i, struct ddp_hang_timeout *tmo);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_coll_timeout_source;
/* The collective timeouts of the watch env belongs to (source.h), or NULL when not open: the capture's evidence. */
struct ddp_watch_env;
const struct ddp_coll_timeout *ddp_coll_timeout_in_watch(const struct ddp_watch_env *env);

#endif
