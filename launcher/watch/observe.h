/* observe: what the launcher learned about one worker beyond its process: its progress (stall.c), the first
 * line of its output that a failure class recognised, the collective timeout it reported (coll_timeout.c), its part
 * in a hang capture (capture.c). Plain data kept in the runner's per-worker slot (ddp_runner_worker.ext); no logic. */
#ifndef DDP_OBSERVE_H
#define DDP_OBSERVE_H

#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "base/util.h"
#include "records/class.h"
#include "run/runner.h"
#include "watch/hang.h"

/* A worker's part in a hang capture (capture.c).
 *   OUT      not in it
 *   IN       in it: SIGABRT sent or to be sent, or (it reported a collective timeout) waited for
 *   DUMPED   its fault handler printed its last line: its stack is whole */
enum ddp_capture_part { DDP_CAP_OUT, DDP_CAP_IN, DDP_CAP_DUMPED };

struct ddp_observed {
    /* progress (stall.c) */
    long long last_progress_ms; /* monotonic time of the last sign of progress */
    bool alive;                 /* showed life (heartbeat touched or a line of output) */
    /* what its output said (the recognised class itself is kept by records.h) */
    bool reported_timeout;       /* it printed a collective timeout (coll_timeout.c) */
    struct ddp_hang_timeout tmo; /* what those lines said (tmo.waiting: it waited inside a collective) */
    /* hang capture (capture.c) */
    enum ddp_capture_part cap;
    struct ddp_buf dump; /* stderr lines after the SIGABRT: the stack dump */
};

/* The worker's observations (the runner's ext slot, sized by the driver). */
static inline struct ddp_observed *ddp_observed(const struct ddp_runner_worker *k)
{
    return (struct ddp_observed *)k->ext;
}

/* Free what o holds (not o). */
static inline void ddp_observed_clear(struct ddp_observed *o)
{
    ddp_buf_free(&o->dump);
}

#endif
