/* supervise_internal: the supervisor's state, shared by the files of the supervisor only: the loop
 * (supervise.c) and the node agent of several nodes (nodes.c). Every other module uses supervise.h. */
#ifndef DDP_SUPERVISE_INTERNAL_H
#define DDP_SUPERVISE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>
#include <uv.h>

#include "agent.h"
#include "classify.h"
#include "coord.h"
#include "hang.h"
#include "jobs.h"
#include "layout.h"
#include "output.h"
#include "plan.h"
#include "policy.h"
#include "progress.h"
#include "record.h"
#include "shim.h"
#include "timer.h"
#include "util.h"

struct sup;
struct run;

/* One worker of one attempt, while it runs. */
struct wrk {
    struct run *run;
    const struct ddp_worker *w;
    uv_process_t proc;
    uv_pipe_t out, err, rep;
    struct ddp_stream s_out, s_err;
    char rep_buf[sizeof(struct ddp_shim_record)];
    size_t rep_len;
    bool spawned, exited, out_eof, err_eof, rep_eof, finished;
    bool failure_fed; /* its program's failure reached the policy before the shim exited (DDP_SHIM_EXITED) */
    int status;       /* exit code, or 128+N */
    int signo;        /* death by signal, or 0 */
    int pid;          /* the program's pid (from the shim), else the shim's */
    int pgid;         /* the group to signal (the shim's pid), 0 = none */
    long long start_ms, end_ms;
    time_t end_wall;
    bool exec_failed, bind_failed;
    int exec_err;
    char *bind_msg;
    /* hang detection */
    char *hb_path;
    struct timespec hb_mtime;
    long long last_progress_ms; /* monotonic time of the last sign of progress */
    bool alive;                 /* showed life (heartbeat touched or a line of output) */
    enum ddp_class cls;         /* first recognised line's class */
    char *cls_line;
    int time_fd; /* attempt_N/RANK/timed.log (both streams write to it), or -1 */
    /* hang forensics */
    bool abort_sent;             /* in the stack capture (SIGABRT sent, or a timeout reporter waited for): its end is
                                    not a failure of its own */
    bool reported_timeout;       /* it printed a collective timeout */
    struct ddp_hang_timeout tmo; /* what those lines said (tmo.waiting: it waited inside a collective) */
    struct ddp_buf dump;         /* stderr lines after the SIGABRT: the stack dump */
    bool dump_done;              /* its fault handler printed its last line ("Extension modules: ...") */
};

/* One attempt: the plan and its running workers. Freed once every handle of it is closed. */
struct run {
    struct sup *sup;
    struct ddp_attempt plan;
    struct wrk *w;
    size_t nw;
    size_t nexited, nfinished;
    int open_handles;
    bool retired;
    long long start_ms;
    char *cgroup;                      /* the attempt's cgroup v2 directory (cgroup.h), or NULL */
    struct ddp_progress *progress;     /* live stack sampling and hang suspicion (progress.h), or NULL */
    struct ddp_progress_rank *watched; /* what it watches, per worker */
};

/* What the summary needs from a failed worker, kept after its attempt is freed. */
struct ended {
    int rank, local_rank, pid, status, signo, attempt;
    time_t when;
    char *error_file, *class_name, *class_line, *hint, *reason;
    struct ddp_strv tail;
    bool set;
    bool exited; /* false: recorded while it still ran (a timeout); updated when it exits */
};

struct sup {
    uv_loop_t loop;
    const struct ddp_plan_ctx *ctx;
    const struct ddp_spec *spec;
    const char *self_exe;
    struct ddp_policy pol;
    char *cgroup_base; /* where attempt cgroups go (cgroup.h), or NULL */
    struct run *cur;
    struct ddp_output out;
    char readbuf[64 * 1024];
    uv_signal_t sigs[16];
    int nsigs;
    uv_timer_t grace, backoff, watch, wall, force, unblock;
    bool grace_armed;
    bool paused;                /* the console is full: worker pipes are not read until it drains (back-pressure) */
    struct ddp_paction pending; /* START waiting for the backoff timer */
    int exit_status;
    bool done;
    int *exclude;
    size_t nexclude;
    long long last_output_ms; /* any rank, for heartbeat = output */
    bool any_output;
    char *timeout_reason; /* why the current attempt is being stopped for a timeout */
    enum ddp_class timeout_class;
    struct ended root; /* root cause of the attempt being stopped / last failed attempt */
    struct ended *others;
    size_t nothers;
    struct ddp_err *err;
    bool launcher_failed;
    struct ddp_timer_server *timer; /* torch FileTimerServer, when [timeout] timer_file */
    /* several nodes (ctx->nnodes > 1): nodes.c, the node agent (agent.h: its states) */
    struct ddp_plan_ctx actx; /* ctx with this attempt's group rank, node count and port */
    bool multi, leader;
    struct ddp_coord *coord;
    struct ddp_agent agent;        /* the node agent's state (agent.h): joining, running, draining, ... */
    struct ddp_layout_node *nodes; /* node 0: every node by node rank: joined, its own worker count, host */
    char **hosts;                  /* node 0: the host names nodes[].host points to */
    int coord_node;                /* this node's rank on the control channel (others: given at join) */
    struct ddp_layout_round round; /* node 0: how the current attempt ends across the nodes (live: agent.h) */
    uv_timer_t join;
    bool handles_closed;
    const char *stop_why; /* node 0: why the attempt stops, for STOP (during one feed) */
    /* run records (log_dir): events.jsonl and summary.json */
    struct ddp_record *rec;
    long long job_start_ms;
    char job_start_iso[32];
    int nattempts;
    bool records_written;
    /* hang forensics: stacks captured before a timed-out attempt is stopped */
    uv_timer_t capture;
    bool capturing;
    bool capture_armed; /* the SIGABRTs are sent (after SETTLE_MS when a rank reported a collective timeout) */
    long long capture_start_ms;
    json_t *hang;        /* the last verdict (summary.json "hang"), or NULL */
    struct ddp_jobs *ps; /* this job in `ddplaunch ps`, or NULL */
    uv_timer_t joinlog;  /* node 0: progress while waiting for nodes to join */
    long long join_start_ms;
    char *hang_text;    /* the same for the console summary, or NULL */
    json_t *stragglers; /* every straggler named live (progress.h), for summary.json */
};

/* supervise.c, for nodes.c. */

/* Build and start attempt `attempt` with nproc workers on this node (s->actx); 0, or negative errno with
 * s->err set and nothing started. */
int ddp_sup_start_attempt(struct sup *s, int attempt, int nproc);
/* Feed one event to the policy and carry out its actions. */
void ddp_sup_feed(struct sup *s, const struct ddp_pevent_data *ev);
/* Forget the current attempt (its memory goes once its handles are closed). */
void ddp_sup_retire(struct sup *s);
/* The failure summary of this node's attempt on stderr. */
void ddp_sup_print_summary(struct sup *s, int status);
/* events.jsonl's end and summary.json, once. */
void ddp_sup_write_records(struct sup *s, int status);
/* Close the control channel (node 0: EXIT with s->exit_status first), the timers and the signal handlers. */
void ddp_sup_close(struct sup *s);
/* Forget the failures recorded besides the root cause, and one record of a failure. */
void ddp_sup_clear_others(struct sup *s);
void ddp_sup_ended_clear(struct ended *e);

#endif
