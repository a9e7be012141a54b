/* runner_internal: the runner's private data: a worker and its attempt (runner.h declares them opaque and reads
 * them for other modules through its accessors, runner_worker.c), and a worker's io: its process and pipe handles,
 * the shim's report buffer, its output streams and timed log. Included by launcher/run/ only (and the runner's unit
 * test stand-ins, tests/unit/fake_runner*.h); tests/deps-check.py fails on any other include. */
#ifndef DDP_RUNNER_INTERNAL_H
#define DDP_RUNNER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <uv.h>

#include "base/util.h"
#include "run/output.h"
#include "run/plan.h"
#include "run/runner.h"
#include "run/shim.h"

struct ddp_runner;

/* One worker of one attempt. */
struct ddp_runner_worker {
    struct ddp_runner_attempt *run;
    size_t index;               /* in run->w */
    const struct ddp_worker *w; /* its plan (run->plan.workers[index]) */
    enum ddp_lifecycle_state state;
    unsigned open; /* DDP_RS_* not at EOF yet */
    enum ddp_worker_fail fail;
    int exec_err;   /* DDP_WF_EXEC: errno of exec */
    char *bind_msg; /* DDP_WF_BIND: the shim's message */
    int status;     /* exit code, or 128+N (ENDING and later) */
    int signo;      /* death by signal N, or 0 */
    int pid;        /* the program's pid (from the shim), else the shim's */
    int pgid;       /* the group to signal (the shim's pid), 0 = never started */
    bool warm;      /* its program runs in a standby interpreter (standby.h), not a fresh one */
    long long start_ms, end_ms;
    time_t end_wall;
    struct ddp_runner_io *io; /* the runner's own (libuv handles, pipes, line buffers), below */
};

/* One attempt's workers. Freed once retired (ddp_runner_retire) and every libuv handle of it closed. */
struct ddp_runner_attempt {
    struct ddp_runner *runner;
    struct ddp_attempt plan;
    struct ddp_runner_worker *w;
    size_t nw;
    size_t nexited, ndone;
    long long start_ms;
    char *cgroup; /* the attempt's cgroup v2 directory (cgroup.h), or NULL */
    int open_handles;
    bool retired;
    struct ddp_logfile filtered[2]; /* attempt_N/filtered_stdout.log, _stderr.log ([job] dup_*_filters) */
};

struct ddp_runner_io {
    struct ddp_stream s_out, s_err; /* line framing, prefix, console and log of stdout and stderr */
    uv_process_t proc;              /* the shim, executed (uv_spawn: a standby's, or where it could not be forked) */
    uv_poll_t pidw;                 /* or the shim forked (ddp_shim_fork): its pidfd, readable once it ended */
    int pidfd;
    bool forked;
    uv_pipe_t out, err, rep;
    char rep_buf[sizeof(struct ddp_shim_record)];
    size_t rep_len;
    struct ddp_logfile timed; /* timed.log (fd -1 without log_dir) */
};

/* runner_streams.c: worker k's line streams (stdout, stderr: prefix, console, raw) and, with cfg's logdir, its
 * stdout, stderr and timed log files and its attempt's filtered copies ([job] dup_*_filters), or with its own
 * log_dir only that directory. Their on_line is the caller's to set. 0, or a negative errno with err; what was
 * opened is closed with the worker's handles (also after a failure). */
int ddp_runner_open_streams(const struct ddp_runner_config *cfg, struct ddp_runner_worker *k, struct ddp_err *err);
/* runner_streams.c, for runner.c and standby.c (a standby starts as a worker does): the worker's output pipes or
 * pseudo-terminals and the shim's report pipe, [0] read here, [1] the child's (all close-on-exec); 0 or a negative
 * errno with err. */
int ddp_runner_open_pipes(const struct ddp_worker *w, int rp[2], int op[2], int ep[2], struct ddp_err *err);
/* The shim's argv for worker w's binding, in cgroup (or NULL), running prog. */
void ddp_runner_shim_argv(const struct ddp_runner *rn, const struct ddp_worker *w, const char *cgroup,
                          const struct ddp_strv *prog, struct ddp_strv *args);
/* The path a shim is executed by (runner.h's self_exec, else self_exe). */
const char *ddp_runner_shim_file(const struct ddp_runner *rn);

#endif
