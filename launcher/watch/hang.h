/* hang: the pure decisions about hangs. (1) From timestamps: has a rank shown no life within [timeout] init,
 * made no progress for [timeout] stall, or has the whole job been silent (ddp_hang_check). (2) From the stacks
 * captured before a hung attempt is stopped: which rank(s) caused it (ddp_hang_parse_stack, ddp_hang_decide).
 * It reads no files, sends no signals and keeps no state: supervise.c gathers the facts and acts. */
#ifndef DDP_HANG_H
#define DDP_HANG_H

#include <stdbool.h>
#include <stddef.h>

#include "spec/spec.h"

/* ---- (1) stalls, from timestamps (monotonic milliseconds) */

struct ddp_hang_rank {
    int rank;
    bool running;       /* spawned and not exited */
    bool alive;         /* showed life (heartbeat touched or a line of output) */
    bool has_heartbeat; /* its heartbeat file is watched */
    long long start_ms, last_progress_ms;
    char state;     /* its /proc state: 'T'/'t' stopped, 'Z' zombie, 0 unknown (ddp_proc_state) */
    bool untouched; /* it has a heartbeat file and never touched it */
};

/* A /proc state that cannot make progress whatever the others do: stopped (SIGSTOP, a debugger) or zombie. */
bool ddp_hang_state_stuck(char state);

struct ddp_hang_limits {
    long long init_ms, stall_ms; /* 0 = off */
    enum ddp_heartbeat heartbeat;
};

enum ddp_hang_kind { DDP_HANG_NONE, DDP_HANG_INIT, DDP_HANG_STALL, DDP_HANG_SILENT };

struct ddp_hang_check {
    enum ddp_hang_kind kind;
    size_t first;    /* index of the first rank to blame (INIT, STALL) */
    size_t nstalled; /* ranks to blame */
    bool blame_gpus; /* leave out the blamed ranks' GPUs (not when every rank stalled: nobody is to blame) */
    bool stuck;      /* the blamed ranks are stopped or zombies while the others run (first suspects) */
    bool alone;      /* stuck, and the others ended: the blamed ranks are all that still run */
    bool on_output;  /* heartbeat = file, but no rank ever touched its heartbeat file: measured on output */
};

/* Is the attempt hung at now? init first (a running rank not alive for init_ms), then stall: with heartbeat
 * file, a running rank with a heartbeat file and no progress for stall_ms (ranks not yet alive are left to init
 * when init is set); with heartbeat output, no output from any rank for stall_ms (once any output came, when init
 * is set; never while the console is paused). With heartbeat file and no rank that ever touched its file, the
 * stall is measured on output (on_output is set): a job that never heartbeats is not hung while it prints. stalled[i]
 * (n entries, caller's) is set for the blamed ranks. When a stall is found and some but not all running ranks are
 * stopped or zombies, or every running rank is and some rank ended (alone), those are the ones blamed (stuck is set,
 * kind STALL): the others wait for them, or they are all that is left. */
void ddp_hang_check(const struct ddp_hang_limits *lim, const struct ddp_hang_rank *r, size_t n, long long now,
                    bool any_output, long long last_output_ms, bool paused, bool *stalled, struct ddp_hang_check *out);

/* ---- (2) culprits, from stacks */

#define DDP_HANG_OP 64
#define DDP_HANG_FRAME 256
#define DDP_HANG_TOP 3 /* frames in a view's top */
/* The function of ddplaunch's own sampler thread (sitecustomize's, sample.c): a stack in it is never the answer. */
#define DDP_HANG_SAMPLER_FUNC "_ddplaunch_wait"

/* What one rank's stack says. */
struct ddp_hang_view {
    int nframes;                /* Python frames found (0: nothing usable) */
    char op[DDP_HANG_OP];       /* the collective it is inside ("all_reduce", "ddp:forward", "backward"), "" none */
    char frame[DDP_HANG_FRAME]; /* where it is: innermost frame of the program ("train.py:42 in load_batch") */
    char top[DDP_HANG_TOP * DDP_HANG_FRAME]; /* its innermost DDP_HANG_TOP frames, innermost first, library ones
                                                too: "distributed_c10d.py:1541 in all_reduce < train.py:42 in
                                                <module>" */
    unsigned long long where; /* a hash of the chosen thread's frames (files, lines, functions): two samples
                                 with the same value stood at the same place */
};

/* Parse len bytes of text holding a faulthandler dump ("Current thread 0x... (most recent call first):",
 * "  File \"x.py\", line 3 in f") or a Python traceback ("Traceback (most recent call last):",
 * "  File \"x.py\", line 3, in f"); other lines are ignored. The thread inside a collective is preferred, else
 * the current (or last listed, the main) thread. Never fails: nframes = 0 when nothing was found. */
void ddp_hang_parse_stack(const char *text, size_t len, struct ddp_hang_view *out);

/* What a rank's own collective timeout lines say: it waited inside a collective, and which. */
struct ddp_hang_timeout {
    bool waiting;         /* it reported that it timed out waiting in a collective */
    char op[DDP_HANG_OP]; /* the collective, in torch's Python name ("all_reduce"); "" unknown (gloo) */
    long long seq;        /* its sequence number in the process group; -1 unknown */
};

/* Fold one output line into t (start from {false, "", -1}): NCCL's watchdog line "Watchdog caught collective
 * operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, ...)" gives the collective and its sequence number,
 * "failure detected by watchdog at work sequence id: 3" and "Timeout at NCCL work: 3" the sequence number, gloo's
 * "Timed out waiting 6000ms for recv operation to complete" only that the rank waited (its traceback names the
 * collective), gloo's monitored_barrier failure that it waited in monitored_barrier. A flight-recorder "dump
 * signal" line is NOT waiting: the hung rank itself prints it. Fields already known are kept. True when the
 * line was one of these. Pure; never reads past len. */
bool ddp_hang_parse_timeout(const char *line, size_t len, struct ddp_hang_timeout *t);

/* NCCL's OpType ("ALLREDUCE", "_ALLGATHER_BASE") as torch's Python name ("all_reduce", "all_gather"). */
void ddp_hang_op_name(const char *optype, size_t len, char out[DDP_HANG_OP]);

struct ddp_hang_input {
    int rank;
    const struct ddp_hang_view *view; /* NULL: no stack */
    bool reported_timeout;            /* it printed a collective timeout */
    bool running;                     /* still running at the capture */
    long long last_progress_ms;
    const struct ddp_hang_timeout *timeout; /* what its timeout lines said, NULL: nothing */
    char state;                             /* its /proc state at the capture (ddp_hang_rank.state) */
};

/* The collective a rank is known to be in: its timeout line's, else its stack's; "" none known. */
const char *ddp_hang_input_op(const struct ddp_hang_input *x);

enum ddp_hang_confidence { DDP_HANG_UNKNOWN, DDP_HANG_LOW, DDP_HANG_MEDIUM, DDP_HANG_HIGH };

struct ddp_hang_verdict {
    enum ddp_hang_confidence confidence; /* UNKNOWN: no culprit named (and no mismatch found) */
    size_t nculprits;
    bool mismatch;        /* ranks wait in different collectives and no majority says which is wrong (LOW) */
    char op[DDP_HANG_OP]; /* the collective the others wait in, "" when none was seen */
    char why[1600];       /* one line: how the culprits were found */
};

/* Decide the culprits (culprit[i], n entries, caller's). Each rank is "in a collective" (its timeout line says
 * so, or its stack is inside one), "outside" (a stack in no collective) or unknown (neither). Rules, first that
 * applies:
 * - some but not all running ranks are stopped or zombies (ddp_hang_state_stuck), or all that run are and some
 *   rank ended: they are the culprits (HIGH);
 * - some rank is in a collective and some are outside: the outside ranks are the culprits;
 * - the ranks in collectives are at different sequence numbers: the ranks at the lowest one (they lag);
 * - they are in different collectives: with a strict majority collective, the ranks in the others; with none
 *   (2 ranks, one each) no culprit is named: mismatch is set, confidence LOW, and why names every rank and its
 *   collective (only the program's intent says which branch is wrong);
 * - all in the same collective: the ranks with nothing known are the suspects (LOW);
 * - no collective seen: the running rank without progress longest, when it lags the next by at least 1 s (LOW).
 * The first three are HIGH when every rank's place is known, else MEDIUM. A culprit set that would be every
 * rank is no verdict (UNKNOWN). Pure. */
void ddp_hang_decide(const struct ddp_hang_input *in, size_t n, bool *culprit, struct ddp_hang_verdict *v);

const char *ddp_hang_confidence_name(enum ddp_hang_confidence c); /* "high", "medium", "low", "unknown" */

#endif
