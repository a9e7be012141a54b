/* live_ask: what the others may ask of the live watch (live.h) in a watch, and how they find it there: each
 * worker's flight recorder as last sampled (the capture's verdict, node 0's share) and asking the ranks for theirs
 * at a collective failure (atfail). Nothing of how it watches. */
#ifndef DDP_LIVE_ASK_H
#define DDP_LIVE_ASK_H

#include <stdbool.h>
#include <stddef.h>

#include "watch/fr.h"

struct ddp_live;
struct ddp_watch_env;

/* The live watch of the watch env belongs to (watch.h's ddp_watch_env), or NULL when it is not open. */
struct ddp_live *ddp_live_in_watch(const struct ddp_watch_env *env);

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

#endif
