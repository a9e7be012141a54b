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
#include "watch/timeout.h"

struct ddp_live;

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

/* Worker i's flight recorder (fr.h) as the watch last saw it when it stopped (kept until the next stop),
 * *still_ms how long it had not moved then; NULL when none. For the capture's verdict (ddp_capture_recorder). */
const struct ddp_fr_state *ddp_live_fr(const struct ddp_live *l, size_t i, long long *still_ms);

/* Worker i's flight recorder as the running watch sees it at now (for node 0, driver/frshare.h), *still_ms how
 * long it has not moved; NULL when none or not watching. Borrowed until the next sample. */
const struct ddp_fr_state *ddp_live_fr_now(const struct ddp_live *l, size_t i, long long now, long long *still_ms);

/* A rank failed with a collective error: ask the watched attempt's ranks for their flight recorders now
 * (ddp_progress_ask; returns how many were asked, 0 when not watching), and whether all have answered. */
int ddp_live_ask(struct ddp_live *l, long long now);
bool ddp_live_answered(struct ddp_live *l, long long now);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_live_source;
/* The live watch inside its source state (self of ddp_live_source), or NULL. */
struct ddp_live *ddp_live_of(void *self);

#endif
