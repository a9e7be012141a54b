/* timeout: the one way every timeout source reports: stall.c (no sign of life within [timeout] init, no
 * progress for [timeout] stall by heartbeat file or output, silence of the whole job), wall.c ([timeout] wall),
 * ft_expiry.c (torch's FileTimer expiries, served by ft_server.c), coll_timeout.c (a collective timeout a rank
 * printed) and live.c (a hang the live watch suspects). A source only says what it saw; whether that stops the
 * attempt is the driver's (supervise.c) and the policy's (policy.h) decision, the verdict about stalls is
 * hang.c's. A new timeout source is a module beside these that calls its struct ddp_timeout_sink's fn, and one
 * row of watch.c's source table (watch.h), which hands it the sink. */
#ifndef DDP_TIMEOUT_H
#define DDP_TIMEOUT_H

#include <stddef.h>

#include "records/class.h"
#include "run/runner.h"
#include "watch/suspect.h"

struct ddp_timeout {
    enum ddp_class cls;          /* DDP_CLASS_HANG, INIT_TIMEOUT, WALL_TIMEOUT, or the class of a collective timeout */
    struct ddp_runner_worker *k; /* the rank to blame first, or NULL (the whole attempt) */
    char *why;                   /* one line ("rank 2 made no progress for 10s (heartbeat)"); the sink takes it */
    const int *gpus;             /* GPUs to leave out of the next attempt (the blamed ranks'), borrowed */
    size_t ngpus;
    bool final; /* the job ends after this attempt, whatever restarts are left (busy_limit: policy.h) */
};

/* Where reports go: fn(arg, t) from the loop. */
struct ddp_timeout_sink {
    void (*fn)(void *arg, struct ddp_timeout *t);
    void *arg;
    ddp_suspect_decide_fn *suspect; /* what a suspected hang does (the driver's policy table), or NULL */
};

/* "10s" or "1500ms". Caller frees. */
char *ddp_timeout_duration(long long ms);

#endif
