/* policy: the supervisor's decisions as one table of state x event -> action (s6-supervise's shape): when to
 * stop the workers, escalate to SIGKILL, restart, downsize or exit, and with which status. Pure: no loop, no
 * processes, no clock; the supervisor feeds events in and carries the actions out. */
#ifndef DDP_POLICY_H
#define DDP_POLICY_H

#include <stdbool.h>

#include "spec/spec.h"
#include "watch/suspect.h"

/* States of one launch (all attempts on this node).
 *   RUNNING   workers of the current attempt run; nothing went wrong yet
 *   STOPPING  something went wrong (failure, timeout, signal): workers are being stopped (SIGTERM sent)
 *   BACKOFF   all workers of the attempt finished; waiting for backoff before the next attempt
 *   DONE      the launcher exits with exit_status */
enum ddp_policy_state { DDP_PS_RUNNING, DDP_PS_STOPPING, DDP_PS_BACKOFF, DDP_PS_DONE, DDP_PS__COUNT };

/* Events.
 *   WORKER_OK      a worker exited 0
 *   WORKER_FAILED  a worker exited non-zero or by a signal (status = exit code or 128+N; fatal = cannot start,
 *                  retrying is pointless: exec failure or strict binding failure; recorders = it failed with a
 *                  collective error and the others' flight recorders can be asked first: atfail.h)
 *   TIMEOUT        hang detected (heartbeat/output stall, init, wall, collective timeout in the output, a
 *                  suspected hang whose culprit is stuck); capture = the ranks' stacks can be captured first
 *                  (capture.h); final = the job ends after this attempt whatever restarts are left (a rank
 *                  worked alone past [timeout] busy_limit: restarting would repeat it)
 *   SIGNAL         the launcher got signal `signo` (SIGINT/TERM/HUP/QUIT stop the job; others are forwarded)
 *   ALL_FINISHED   every worker of the attempt exited and its pipes reached EOF
 *   GRACE_EXPIRED  shutdown_timeout passed since the workers were told to stop (or, in RUNNING, since every
 *                  worker exited while processes they left behind still hold their output pipes)
 *   BACKOFF_DONE   the backoff delay passed
 *   REMOTE_STOP    several nodes, on a node other than node 0: node 0 stops this attempt (a failure, timeout or
 *                  lost node elsewhere, its EXIT, or node 0 itself lost); the workers stop, and what follows is
 *                  node 0's decision, not this table's (only node 0 feeds ALL_FINISHED on several nodes:
 *                  agent.c, roles.c)
 *   NODE_FAILED    several nodes, on node 0: another node's part of the attempt failed (status, its REPORT) or
 *                  the node was lost (status 1); the attempt stops on every node as after a failure here, or
 *                  as after a timeout when status is 124 (agent.h decides when it is fed; capture as for TIMEOUT)
 *   CAPTURE_DONE   the hang capture that CAPTURE began, or the recorders RECORDERS asked for, made their verdict:
 *                  the workers may be stopped now
 *   GPUS_UNCHECKED before a restart (BACKOFF), NVML did not answer the check of the job's GPUs in time (why):
 *                  [gpus] busy = fail exits 75 (it cannot tell; the GPUs may answer later), else the restart
 *                  (pending) goes on
 *   GPUS_LEFT      GPUs were left out for their own faults (gpuset.h): gpus_left GPUs are left for the restart
 *                  pending (ARM_BACKOFF in BACKOFF, or START in RUNNING after a fault during the backoff): none
 *                  left ends the job with the root cause's status (else 1) and why; fewer than its workers
 *                  downsizes it, as for a hung rank's GPU
 * GPUS_UNCHECKED and GPUS_LEFT answer with the pending action as it now is (unchanged where their row says
 * nothing). */
enum ddp_policy_event {
    DDP_PE_WORKER_OK,
    DDP_PE_WORKER_FAILED,
    DDP_PE_TIMEOUT,
    DDP_PE_SIGNAL,
    DDP_PE_ALL_FINISHED,
    DDP_PE_GRACE_EXPIRED,
    DDP_PE_BACKOFF_DONE,
    DDP_PE_REMOTE_STOP,
    DDP_PE_NODE_FAILED,
    DDP_PE_CAPTURE_DONE,
    DDP_PE_GPUS_UNCHECKED,
    DDP_PE_GPUS_LEFT,
    DDP_PE__COUNT
};

/* Why the current attempt is being stopped. */
enum ddp_policy_stop { DDP_STOP_NONE, DDP_STOP_FAILURE, DDP_STOP_TIMEOUT, DDP_STOP_SIGNAL, DDP_STOP_REMOTE };

struct ddp_policy_event_data {
    enum ddp_policy_event kind;
    int status;      /* WORKER_FAILED: exit code, or 128+N for death by signal N; NODE_FAILED: the node's status */
    bool fatal;      /* WORKER_FAILED: the worker never ran its program (exec/binding failure) */
    bool launcher;   /* WORKER_FAILED: the launcher could not start it (status 1, fatal; status is not read) */
    int signo;       /* SIGNAL */
    bool capture;    /* TIMEOUT, NODE_FAILED with status 124: a stack capture is possible (capture.h) */
    bool recorders;  /* WORKER_FAILED: the flight recorders can be asked before the others stop (atfail.h) */
    int gpus_left;   /* GPUS_LEFT: the GPUs the restart may use */
    const char *why; /* GPUS_UNCHECKED, GPUS_LEFT with none left: one line */
    const struct ddp_policy_action *pending; /* GPUS_UNCHECKED, GPUS_LEFT: the restart's action waiting for it */
    bool final;                              /* TIMEOUT: no restart after it (busy_limit) */
};

/* Actions, a bit set: what the supervisor must do now, in this order. */
enum {
    DDP_ACT_TERM_ALL = 1 << 0,    /* SIGTERM to every worker group still alive */
    DDP_ACT_FORWARD = 1 << 1,     /* send act.signo to every worker group still alive */
    DDP_ACT_KILL_ALL = 1 << 2,    /* SIGKILL to every worker group still alive */
    DDP_ACT_ARM_GRACE = 1 << 3,   /* start the shutdown_timeout timer (GRACE_EXPIRED) */
    DDP_ACT_ARM_BACKOFF = 1 << 4, /* start the backoff timer (act.delay_ms, BACKOFF_DONE) */
    DDP_ACT_START = 1 << 5,       /* start attempt act.attempt with act.nproc workers */
    DDP_ACT_EXIT = 1 << 6,        /* exit with act.exit_status */
    DDP_ACT_CAPTURE = 1 << 7,     /* begin the hang capture (capture.h), whose end is CAPTURE_DONE (instead of
                                     TERM_ALL: the workers are stopped once their stacks are in) */
    DDP_ACT_RECORDERS = 1 << 8,   /* ask the running ranks' flight recorders (atfail.h), whose end is CAPTURE_DONE
                                     (instead of TERM_ALL: at most DDP_ATFAIL_MS) */
};

struct ddp_policy_action {
    unsigned flags;
    int signo;
    long long delay_ms;
    int attempt;
    int nproc;
    bool downsized; /* START: nproc is smaller than the previous attempt's */
    int exit_status;
    char why[256]; /* one line for the user when the decision matters ("restarting (1/3 restarts)") */
};

/* The policy's whole state. Initialise with ddp_policy_init. */
struct ddp_policy {
    enum ddp_policy_state state;
    enum ddp_policy_stop stop;
    int attempt; /* current attempt number */
    int nproc;   /* workers of the current attempt */
    int min_nproc;
    int restarts_used;    /* restarts that count against max_restarts */
    int timeouts_at_size; /* timeouts seen at the current size (for downsize_after) */
    int stop_status;      /* root cause's status when stop == FAILURE */
    bool stop_fatal;
    int stop_signo;              /* signal that stopped the job */
    bool no_restart;             /* a signal came: never start another attempt */
    bool final_timeout;          /* the timeout that stops the attempt ends the job (TIMEOUT's final) */
    const struct ddp_spec *spec; /* [restart]: max_restarts, backoff, on_failure, on_timeout, downsize_*;
                                    not owned, outlives the policy */
};

/* The smallest size the job may shrink to from nproc workers: [job] min_nproc_per_node, else 1 when a timeout
 * may downsize, else nproc itself; never above nproc. Pure. */
int ddp_policy_min_nproc(const struct ddp_spec *spec, int nproc);

/* Start in RUNNING for attempt 0 with nproc workers (the supervisor has just started them). spec must outlive p. */
void ddp_policy_init(struct ddp_policy *p, const struct ddp_spec *spec, int nproc);

/* Feed one event; returns what to do (flags 0 = nothing). Updates p. Never fails. */
struct ddp_policy_action ddp_policy_step(struct ddp_policy *p, const struct ddp_policy_event_data *ev);

/* The worker count after a timeout at nproc: per downsize_to (half, or a fixed size), never below min_nproc;
 * returns nproc itself when no smaller size is possible. */
int ddp_policy_next_size(const struct ddp_downsize *to, int nproc, int min_nproc);

/* True for the signals that stop the job (SIGINT, SIGTERM, SIGHUP, SIGQUIT); others are only forwarded. */
bool ddp_policy_signal_stops(int signo);

/* Several nodes: how this node's part of the attempt ended, as a status for node 0 (REPORT): 0 while it runs or
 * when every worker succeeded, exit_status once DONE, else by why it stops: 128+N (signal N), 124 (timeout), the
 * root cause's status (failure; 1 when unknown), 1 (node 0 stopped it). Pure. */
int ddp_policy_local_status(const struct ddp_policy *p, int exit_status);

/* The launcher's exit status: 1 when the launcher itself failed (said where it happened), else status. Pure. */
int ddp_policy_exit_status(bool launcher_failed, int status);
/* Whether a node's status says its part of the attempt timed out (124: NODE_FAILED is then fed as a timeout). */
bool ddp_policy_status_is_timeout(int status);
/* What a suspected hang does (the live watch asks each time it judges one; suspect.h): one row per [timeout]
 * on_suspect, one column per state (weak, stuck, busy).
 *   warn:             say it; a rank working alone gets its line, and ends the job at busy_limit
 *   restart/downsize: say it, stop once it lasted on_suspect_after; busy as for warn
 *   auto:             weak: say it; stuck: stop once the culprits stayed stuck confirm_ms; busy as for warn
 * A stop restarts as [restart] max_restarts allows (TIMEOUT); an end stops with TIMEOUT's final. Pure. */
enum ddp_suspect_action ddp_policy_suspect(const struct ddp_suspect_facts *f);

const char *ddp_pstate_name(enum ddp_policy_state s);
const char *ddp_pevent_name(enum ddp_policy_event e);

#endif
