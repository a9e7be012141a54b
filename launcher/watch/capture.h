/* capture: the hang capture. Before a timed-out attempt is stopped, every running Python rank gets SIGABRT:
 * Python's fault handler (PYTHONFAULTHANDLER, set by plan.c) prints every thread's stack to its stderr and the
 * process ends. Once they are gone (or the window passed), hang.c decides which ranks caused the hang from those
 * stacks (and the tracebacks of ranks that ended before); the verdict goes to records.h (console, events.jsonl,
 * summary.json), the stacks to attempt_N/stacks.txt, the culprit becomes the root cause. Its steps are the pure
 * table ddp_capture_step (state x event -> actions); the rest carries the actions out. It does not stop the
 * workers: the policy does, on DDP_PE_CAPTURE_DONE, which the driver feeds when `decided` is called. */
#ifndef DDP_CAPTURE_H
#define DDP_CAPTURE_H

#include <stdbool.h>
#include <uv.h>

#include "records/class.h"
#include "records/records.h"
#include "run/plan.h"
#include "run/runner.h"
#include "watch/capture_ask.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/hang.h"

#define DDP_CAPTURE_MS 3000 /* the longest wait for the stacks (at most half of shutdown_timeout) */
#define DDP_CAPTURE_SETTLE_MS 300

/* States.
 *   IDLE      no capture
 *   SETTLING  a rank reported a collective timeout: the others report theirs within milliseconds (their
 *             timeouts were armed together); wait SETTLE_MS so that none is interrupted while it prints its own
 *   WAITING   SIGABRT sent to the ranks in the capture that did not report waiting in a collective; waiting for
 *             their stacks until the window ends */
enum ddp_capture_state { DDP_CS_IDLE, DDP_CS_SETTLING, DDP_CS_WAITING, DDP_CS__COUNT };

/* Events.
 *   BEGIN        a timeout stops the attempt and ranks can be captured (settle: after a collective timeout)
 *   SETTLED      the settle time passed
 *   PROGRESS     a rank in the capture changed (exited, stream closed, last dump line); complete: every rank in
 *                it is done (exited with stderr read, dumped, or named its collective in its timeout line)
 *   WINDOW       the window passed
 *   ALL_GONE     every worker of the attempt is done */
enum ddp_capture_event { DDP_CE_BEGIN, DDP_CE_SETTLED, DDP_CE_PROGRESS, DDP_CE_WINDOW, DDP_CE_ALL_GONE, DDP_CE__COUNT };

struct ddp_capture_event_data {
    enum ddp_capture_event kind;
    bool settle;   /* BEGIN */
    bool complete; /* PROGRESS */
};

/* Actions, in this order. */
enum {
    DDP_CA_ARM_SETTLE = 1 << 0, /* start the timer: SETTLED after SETTLE_MS */
    DDP_CA_ABORT = 1 << 1,      /* SIGABRT to the ranks in the capture that did not report waiting */
    DDP_CA_ARM_WINDOW = 1 << 2, /* start the timer: WINDOW after the window */
    DDP_CA_CHECK = 1 << 3,      /* see now whether the capture is complete (feed PROGRESS) */
    DDP_CA_DECIDE = 1 << 4,     /* stop the timer, make the verdict, tell the driver (decided) */
};

/* Feed one event; returns the actions (0 = nothing) and moves *state. Pure. */
unsigned ddp_capture_step(enum ddp_capture_state *state, const struct ddp_capture_event_data *ev);
const char *ddp_cstate_name(enum ddp_capture_state s);
const char *ddp_cevent_name(enum ddp_capture_event e);

struct ddp_capture; /* what the driver asks of it: capture_ask.h */

/* decided: the verdict is out (or there was nothing to decide); the driver feeds DDP_PE_CAPTURE_DONE. */
struct ddp_capture *ddp_capture_new(uv_loop_t *loop, const struct ddp_plan_job *job, struct ddp_runner *rn,
                                    struct ddp_records *rec, void (*decided)(void *arg), void *arg);
/* Where the verdict finds each worker's flight recorder as last sampled (fr.h; the live watch's, stopped
 * before the capture): fr(arg, i, &still_ms) for worker i, NULL when none. The recorder's finding wins over the
 * stacks, which still say where each culprit is; remote (borrowed, may be NULL): the other nodes' ranks'
 * recorders (node 0, fr_remote.h), judged with them. Unset: stacks only. */
void ddp_capture_recorder(struct ddp_capture *c,
                          const struct ddp_fr_state *(*fr)(void *arg, size_t i, long long *still_ms), void *arg,
                          const struct ddp_fr_remote *remote);
/* What the other sources know of a worker, for the verdict (each keeps its own: stall.h, coll_timeout.h). */
struct ddp_capture_evidence {
    long long last_progress_ms;  /* its last sign of progress (monotonic), 0 unknown */
    bool reported_timeout;       /* it printed a collective timeout */
    struct ddp_hang_timeout tmo; /* what those lines said (tmo.waiting: it waited inside a collective) */
};
/* Where the capture asks for them: fn(arg, i, ev) fills ev (zeroed) for worker i of the current attempt. Unset:
 * nothing known. */
void ddp_capture_evidence(struct ddp_capture *c, void (*fn)(void *arg, size_t i, struct ddp_capture_evidence *ev),
                          void *arg);
/* The workers of plan are about to start: forget the last attempt's parts and dumps. */
void ddp_capture_prepare(struct ddp_capture *c, const struct ddp_attempt *plan);
void ddp_capture_close(struct ddp_capture *c); /* closes its timer; free with ddp_capture_free after the loop */
void ddp_capture_free(struct ddp_capture *c);

/* k wrote a line: keeps its stack dump. True when the line was its fault handler's last (nothing else to do
 * with it). */
bool ddp_capture_line(struct ddp_capture *c, struct ddp_runner_worker *k, int which, const char *line, size_t len);
/* A worker changed (exited, a stream closed). */
void ddp_capture_changed(struct ddp_capture *c);
/* Every worker of the attempt is done. */
void ddp_capture_all_gone(struct ddp_capture *c);
bool ddp_capture_active(const struct ddp_capture *c);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_capture_source;

#endif
