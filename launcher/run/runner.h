/* runner: the workers of one attempt on this node, and nothing else: spawns each through the exec shim, reads
 * its stdout, stderr and the shim's report pipe, reaps it, signals its process group, ends the attempt's cgroup.
 * It decides nothing and knows no policy, nodes, timeouts or records: what happens goes up through struct
 * ddp_runner_ops, and the caller (supervise.c, the driver) says what to do next. */
#ifndef DDP_RUNNER_H
#define DDP_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <uv.h>

#include "base/util.h"
#include "run/lifecycle.h"
#include "run/output.h"
#include "run/plan.h"
#include "run/shim.h"

/* Why a worker never ran its program. */
enum ddp_worker_fail { DDP_WF_NONE, DDP_WF_EXEC, DDP_WF_BIND };

struct ddp_logdir;
struct ddp_runner;
struct ddp_runner_attempt;
struct ddp_runner_io;
struct ddp_runner_worker;

/* A worker of one attempt, and the attempt: opaque outside launcher/run/ (their data: run/runner_internal.h), read
 * through these accessors (runner_worker.c), never written. A caller that keeps something per worker keeps it
 * itself, by index (the watch's modules do). A worker's: */
/* the attempt it is of, its index there and its plan (run/plan.h: its rank, GPU, CPUs, argv...) */
struct ddp_runner_attempt *ddp_runner_worker_attempt(const struct ddp_runner_worker *k);
size_t ddp_runner_worker_index(const struct ddp_runner_worker *k);
const struct ddp_worker *ddp_runner_worker_plan(const struct ddp_runner_worker *k);
/* its plan's global and local rank */
int ddp_runner_worker_rank(const struct ddp_runner_worker *k);
int ddp_runner_worker_local_rank(const struct ddp_runner_worker *k);
/* where it is in its lifecycle (lifecycle.h), and its DDP_RS_* streams not at EOF yet */
enum ddp_lifecycle_state ddp_runner_worker_state(const struct ddp_runner_worker *k);
unsigned ddp_runner_worker_open(const struct ddp_runner_worker *k);
/* why it never ran its program; for DDP_WF_EXEC exec's errno, for DDP_WF_BIND the shim's message (or NULL) */
enum ddp_worker_fail ddp_runner_worker_fail(const struct ddp_runner_worker *k);
int ddp_runner_worker_exec_err(const struct ddp_runner_worker *k);
const char *ddp_runner_worker_bind_msg(const struct ddp_runner_worker *k);
/* its exit code, or 128+N (ENDING and later); death by signal N, or 0 */
int ddp_runner_worker_status(const struct ddp_runner_worker *k);
int ddp_runner_worker_signo(const struct ddp_runner_worker *k);
/* its program's pid (from the shim), else the shim's; the group to signal (the shim's pid), 0: never started */
int ddp_runner_worker_pid(const struct ddp_runner_worker *k);
int ddp_runner_worker_pgid(const struct ddp_runner_worker *k);
/* true when its program runs in a standby interpreter (standby.h), not a fresh one */
bool ddp_runner_worker_warm(const struct ddp_runner_worker *k);
/* when it started and ended (monotonic ms), and when it ended (wall clock) */
long long ddp_runner_worker_start_ms(const struct ddp_runner_worker *k);
long long ddp_runner_worker_end_ms(const struct ddp_runner_worker *k);
time_t ddp_runner_worker_end_wall(const struct ddp_runner_worker *k);

/* An attempt's plan (run/plan.h) and its attempt number there; its workers, worker i (i < nworkers), how many of
 * them EXITED or DONE and how many DONE; when it started (monotonic ms). */
const struct ddp_attempt *ddp_runner_attempt_plan(const struct ddp_runner_attempt *r);
int ddp_runner_attempt_number(const struct ddp_runner_attempt *r);
size_t ddp_runner_attempt_nworkers(const struct ddp_runner_attempt *r);
struct ddp_runner_worker *ddp_runner_attempt_worker(const struct ddp_runner_attempt *r, size_t i);
size_t ddp_runner_attempt_nexited(const struct ddp_runner_attempt *r);
size_t ddp_runner_attempt_ndone(const struct ddp_runner_attempt *r);
long long ddp_runner_attempt_start_ms(const struct ddp_runner_attempt *r);

/* What happens, told to the caller (each may be NULL). Called from the loop's callbacks only (and from
 * ddp_runner_program_ended and ddp_runner_give_up, which read a worker's last output or end it), never while
 * starting or signalling; the caller may signal, retire or start attempts from inside them. A retired attempt's
 * workers still report (line, output, exited, done). */
struct ddp_runner_ops {
    /* a whole line of k's stdout (which 0) or stderr (1), without '\n' */
    void (*line)(void *arg, struct ddp_runner_worker *k, int which, const char *line, size_t len);
    /* k's program runs: the shim started it (ddp_runner_worker_pid(k) is the program's now) */
    void (*started)(void *arg, struct ddp_runner_worker *k);
    /* bytes of k's output arrived at now (monotonic ms) */
    void (*output)(void *arg, struct ddp_runner_worker *k, long long now);
    /* the console drained after back-pressure at now: the time it was blocked is not the workers' silence */
    void (*resumed)(void *arg, long long now);
    /* the shim said k's program ended with status (exit code or 128+N; signo or 0) while k RUNNING; the caller
     * may take that as k's end with ddp_runner_program_ended */
    void (*program_ended)(void *arg, struct ddp_runner_worker *k, int status, int signo);
    /* k's shim exited (EXITED; what was in its pipes is read and forwarded); from: the state it left (RUNNING,
     * or ENDING when its program's end was taken already) */
    void (*exited)(void *arg, struct ddp_runner_worker *k, enum ddp_lifecycle_state from);
    /* k became DONE; all: every worker of its attempt is DONE now */
    void (*done)(void *arg, struct ddp_runner_worker *k, bool all);
    /* after k exited or one of its streams reached EOF (after exited/done) */
    void (*changed)(void *arg, struct ddp_runner_worker *k);
};

struct ddp_runner_config {
    uv_loop_t *loop;
    const char *self_exe;       /* re-executed with --exec-shim (its argv[0], and the name in messages) */
    const char *self_exec;      /* the path exec'd for it: /proc/self/fd/N of the binary held open since start, so
                                   that removing or replacing the file mid-job breaks no restart; NULL: self_exe */
    long long grace_ms;         /* the shim's --grace-ms ([restart] shutdown_timeout) */
    struct ddp_logdir *logdir;  /* per-rank stdout/stderr/timed logs, or NULL */
    const char *dup_filters[2]; /* with logdir: torchrun's --duplicate-stdout/stderr-filters, or NULL */
    const char *cgroup_base;    /* where attempt cgroups go, or NULL */
    struct ddp_runner_ops ops;
    void *arg;
};

/* Create the runner (console on fds 1 and 2). Caller owns; ddp_runner_free() after the loop ended. */
struct ddp_runner *ddp_runner_new(const struct ddp_runner_config *cfg);
void ddp_runner_free(struct ddp_runner *rn);

/* The console all workers share (for ddp_output_flush_wait before the summary). */
struct ddp_output *ddp_runner_output(struct ddp_runner *rn);

/* Make attempt's cgroup now (cgroup.h), for ddp_runner_start to take: an agent does it while it waits for the
 * other nodes, so that START finds the system-wide cgroup lock's work done (a thousand agents on one host would
 * queue for it). Nothing without a cgroup base; removed by ddp_runner_free if that attempt never starts. */
void ddp_runner_prepare(struct ddp_runner *rn, int attempt);

/* Take plan (moved: *plan is zeroed) as the current attempt and start its workers. 0 with *out (borrowed, the
 * current attempt), or a negative errno with err when worker i could not be started: the workers from i on are
 * then DONE (status 1) and the ones before run on; the attempt is still current (*out set). */
int ddp_runner_start(struct ddp_runner *rn, struct ddp_attempt *plan, struct ddp_runner_attempt **out,
                     struct ddp_err *err);

/* A process already running that a worker may take in place of a fresh one (warm restart: standby.h): its
 * shim's process handle (running; the runner sets its data and exit callback and closes it), the read ends of
 * its stdout, stderr and report pipes, the shim's and the program's pids. */
struct ddp_runner_adopted {
    struct ddp_runner_io *io;
    int out_fd, err_fd, rep_fd;
    int shim_pid, py_pid;
};
/* Offers worker w (of the attempt whose cgroup is cgroup, or NULL) such a process: 0 with *t, or -1 (why in
 * why[0..whylen)): w starts fresh. */
typedef int (*ddp_runner_adopt_fn)(void *arg, const struct ddp_worker *w, const char *cgroup,
                                   struct ddp_runner_adopted *t, char *why, size_t whylen);
/* From now on, each worker is first offered to adopt(arg, ...) (NULL: never). */
void ddp_runner_set_adopt(struct ddp_runner *rn, ddp_runner_adopt_fn adopt, void *arg);

/* The current attempt, or NULL. */
struct ddp_runner_attempt *ddp_runner_current(const struct ddp_runner *rn);
/* True when k belongs to the current attempt. */
bool ddp_runner_is_current(const struct ddp_runner_worker *k);
/* Forget the current attempt (its memory goes once its handles are closed). */
void ddp_runner_retire(struct ddp_runner *rn);

/* k is RUNNING or ENDING (its program or the shim may still run). */
bool ddp_runner_worker_running(const struct ddp_runner_worker *k);
/* Workers of the current attempt that are running. */
int ddp_runner_alive(const struct ddp_runner *rn);

/* Take the shim's word that k's program ended (status, signo): ENDING, end times set, what waits in its pipes
 * read and forwarded. Only from RUNNING. */
void ddp_runner_program_ended(struct ddp_runner_worker *k, int status, int signo);

/* kill(-pgid, sig) for every worker group of the current attempt that may still have processes; SIGKILL goes
 * to a running shim (it kills its program's whole tree). Returns the groups signalled. */
int ddp_runner_signal_all(struct ddp_runner *rn, int sig);
/* sig to k's program (not its group), when it runs. */
void ddp_runner_signal_program(struct ddp_runner_worker *k, int sig);

/* After SIGKILL a process outside the groups may still hold a pipe: stop reading the exited workers' streams
 * (warns per worker), which makes them DONE. */
void ddp_runner_give_up(struct ddp_runner *rn);

/* The worker of the current attempt that is pid or whose group holds pid, when it runs; NULL otherwise. */
struct ddp_runner_worker *ddp_runner_find_pid(struct ddp_runner *rn, int pid);

/* hold: from now on k's stderr holds back Python's fault handler dump (output.h's ddp_stream_hold_dump: the
 * hang capture's SIGABRT is coming; the caller files the dump, which reaches it through the line op and k's
 * stderr.log); !hold: no longer. No-op for a worker without io. */
void ddp_runner_hold_dump(struct ddp_runner_worker *k, bool hold);

/* The last lines k wrote on stderr (which 1) or stdout (0), oldest first, each to fn(arg, line) (output.h's
 * ddp_stream_tail: what its stream keeps for the failure summary); nothing for a worker without io. */
void ddp_runner_worker_tail(const struct ddp_runner_worker *k, int which, void (*fn)(void *arg, const char *line),
                            void *arg);

/* The worker's environment variable name, or NULL. */
const char *ddp_runner_worker_env(const struct ddp_runner_worker *k, const char *name);

/* True while the console is full and the workers' pipes are not read (back-pressure). */
bool ddp_runner_paused(const struct ddp_runner *rn);

/* Close the runner's timer (the loop ends once the attempts' handles are closed too). */
void ddp_runner_close(struct ddp_runner *rn);

#endif
