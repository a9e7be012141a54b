/* hang: the pure decisions about hangs. (1) From timestamps: has a rank shown no life within [timeout] init,
 * made no progress for [timeout] stall, or has the whole job been silent (ddp_hang_check). (2) From the stacks
 * captured before a hung attempt is stopped: which rank(s) caused it (ddp_hang_parse_stack, ddp_hang_decide).
 * It reads no files, sends no signals and keeps no state: supervise.c gathers the facts and acts. */
#ifndef DDP_HANG_H
#define DDP_HANG_H

#include <stdbool.h>
#include <stddef.h>

#include "spec.h"

/* ---- (1) stalls, from timestamps (monotonic milliseconds) */

struct ddp_hang_rank {
    int rank;
    bool running;              /* spawned and not exited */
    bool alive;                /* showed life (heartbeat touched or a line of output) */
    bool has_heartbeat;        /* its heartbeat file is watched */
    long long start_ms, last_progress_ms;
};

struct ddp_hang_limits {
    long long init_ms, stall_ms; /* 0 = off */
    enum ddp_heartbeat heartbeat;
};

enum ddp_hang_kind { DDP_HANG_NONE, DDP_HANG_INIT, DDP_HANG_STALL, DDP_HANG_SILENT };

struct ddp_hang_check {
    enum ddp_hang_kind kind;
    size_t first;     /* index of the first rank to blame (INIT, STALL) */
    size_t nstalled;  /* ranks to blame */
    bool blame_gpus;  /* leave out the blamed ranks' GPUs (not when every rank stalled: nobody is to blame) */
};

/* Is the attempt hung at now? init first (a running rank not alive for init_ms), then stall: with heartbeat
 * file, a running rank with a heartbeat file and no progress for stall_ms (ranks not yet alive are left to init
 * when init is set); with heartbeat output, no output from any rank for stall_ms (once any output came, when init
 * is set; never while the console is paused). stalled[i] (n entries, caller's) is set for the blamed ranks. */
void ddp_hang_check(const struct ddp_hang_limits *lim, const struct ddp_hang_rank *r, size_t n, long long now,
                    bool any_output, long long last_output_ms, bool paused, bool *stalled,
                    struct ddp_hang_check *out);

/* ---- (2) culprits, from stacks */

#define DDP_HANG_OP 64
#define DDP_HANG_FRAME 256

/* What one rank's stack says. */
struct ddp_hang_view {
    int nframes;                /* Python frames found (0: nothing usable) */
    char op[DDP_HANG_OP];       /* the collective it is inside ("all_reduce", "ddp:forward", "backward"), "" none */
    char frame[DDP_HANG_FRAME]; /* where it is: innermost frame of the program ("train.py:42 in load_batch") */
};

/* Parse len bytes of text holding a faulthandler dump ("Current thread 0x... (most recent call first):",
 * "  File \"x.py\", line 3 in f") or a Python traceback ("Traceback (most recent call last):",
 * "  File \"x.py\", line 3, in f"); other lines are ignored. The thread inside a collective is preferred, else
 * the current (or last listed, the main) thread. Never fails: nframes = 0 when nothing was found. */
void ddp_hang_parse_stack(const char *text, size_t len, struct ddp_hang_view *out);

struct ddp_hang_input {
    int rank;
    const struct ddp_hang_view *view; /* NULL: no stack */
    bool reported_timeout;            /* it printed a collective timeout (it was waiting: a victim) */
    bool running;                     /* still running at the capture */
    long long last_progress_ms;
};

enum ddp_hang_confidence { DDP_HANG_UNKNOWN, DDP_HANG_LOW, DDP_HANG_MEDIUM, DDP_HANG_HIGH };

struct ddp_hang_verdict {
    enum ddp_hang_confidence confidence; /* UNKNOWN: no culprit named */
    size_t nculprits;
    char op[DDP_HANG_OP]; /* the collective the others wait in, "" when none was seen */
    char why[1024];       /* one line: how the culprits were found */
};

/* Decide the culprits (culprit[i], n entries, caller's). Rules, first that applies:
 * - some ranks are inside a collective: the collective most of them are in (ties: the one a timeout reporter is
 *   in) is the one the others wait in; ranks with a stack that are not in it (in no collective, or another one)
 *   are the culprits: high confidence when every rank gave a stack, else medium; when every rank with a stack is
 *   in it, the ranks without a stack are the suspects (low);
 * - no collective seen: the running rank without progress longest, when it lags the next by at least 1 s (low).
 * A culprit set that would be every rank is no verdict (UNKNOWN). Pure. */
void ddp_hang_decide(const struct ddp_hang_input *in, size_t n, bool *culprit, struct ddp_hang_verdict *v);

const char *ddp_hang_confidence_name(enum ddp_hang_confidence c); /* "high", "medium", "low", "unknown" */

#endif
