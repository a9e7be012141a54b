/* live: the live hang watch (progress.h: stack samples, signs of progress, suspicion, stragglers) of the current
 * attempt, as a timeout source (timeout.h): a suspected hang that lasted [timeout] on_suspect_after is reported
 * to the sink as a hang of the ranks progress.c named. It decides nothing about what follows. */
#ifndef DDP_LIVE_H
#define DDP_LIVE_H

#include <jansson.h>
#include <uv.h>

#include "records/jsonlog.h"
#include "run/plan.h"
#include "run/runner.h"
#include "watch/fr_remote.h"
#include "watch/live_ask.h"
#include "watch/timeout.h"

struct ddp_live; /* what the others ask of it: live_ask.h */

/* [timeout] sample and on_suspect from spec; rec (may be NULL) gets its events, stragglers (borrowed JSON array)
 * the stragglers it names. Caller owns; ddp_live_stop, then ddp_live_free after the loop. */
struct ddp_live *ddp_live_new(uv_loop_t *loop, const struct ddp_spec *spec, const char *host, struct ddp_jsonlog *rec,
                              json_t *stragglers, struct ddp_timeout_sink sink);
void ddp_live_free(struct ddp_live *l);
/* summary.json's flight_recorder object and the other nodes' ranks' recorders (both borrowed, may be NULL;
 * ddp_progress_recorder) for the attempts started after. */
void ddp_live_recorder(struct ddp_live *l, json_t *recorder, const struct ddp_fr_remote *remote);

/* The workers of plan are about to start: the directory of their stack samples exists. */
void ddp_live_prepare(struct ddp_live *l, const struct ddp_attempt *plan);
/* Watch attempt r (its started workers; hb(i): worker i's heartbeat file or NULL, borrowed). */
void ddp_live_start(struct ddp_live *l, struct ddp_runner_attempt *r, const char *(*hb)(void *arg, size_t i),
                    void *arg);
/* k's program runs (its pid is known now). */
void ddp_live_program(struct ddp_live *l, const struct ddp_runner_worker *k);
/* k (of the watched attempt) wrote output at now / exited. Others are ignored. */
void ddp_live_output(struct ddp_live *l, const struct ddp_runner_worker *k, long long now);
void ddp_live_exited(struct ddp_live *l, const struct ddp_runner_worker *k);
/* Stop watching (the attempt is being stopped or is over). */
void ddp_live_stop(struct ddp_live *l);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_live_source;

#endif
