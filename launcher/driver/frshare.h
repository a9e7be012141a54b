/* frshare: the flight recorders of a job on several nodes, shared with node 0 (issue 31). On every other node,
 * each of this node's ranks' recorder summary (watch/live_ask.h: as the live watch samples it) goes to node 0 when it
 * changed, at most once per [timeout] sample_interval per rank (driver/roster.h's FR message); on node 0 what
 * arrives from a node that runs that rank in that attempt goes to watch/fr_remote.h's store, where the live
 * verdict and the post-mortem read it, and into summary.json's flight_recorder. */
#ifndef DDP_FRSHARE_H
#define DDP_FRSHARE_H

#include <stdbool.h>
#include <uv.h>

#include "driver/roster.h"
#include "nodes/coord.h"
#include "records/records.h"
#include "run/runner.h"
#include "spec/spec.h"
#include "watch/watch.h"

struct ddp_frshare;

/* leader: this is node 0 (it receives); else it sends, from a timer on loop. Everything passed is borrowed and
 * must outlive it. NULL when [timeout] sample is off (nothing to share). */
struct ddp_frshare *ddp_frshare_new(uv_loop_t *loop, const struct ddp_spec *spec, bool leader, struct ddp_runner *rn,
                                    struct ddp_watch *watch, struct ddp_roster *nodes, struct ddp_records *rec);
/* Node 0: an FR event of the channel (DDP_COORD_FR). NULL f: ignored. */
void ddp_frshare_received(struct ddp_frshare *f, const struct ddp_coord_event *ev);
/* Stop the timer (the memory goes once libuv closed it); NULL is a no-op. */
void ddp_frshare_close(struct ddp_frshare *f);

#endif
