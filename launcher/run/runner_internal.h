/* runner_internal: the runner's private part of a worker (runner.h's ddp_runner_worker.io): its process and pipe
 * handles, the shim's report buffer, its output streams and timed log. Included by runner.c, runner_streams.c and
 * standby.c only (and the run folder's tests); every other module learns about a worker from the runner's events and
 * accessors. */
#ifndef DDP_RUNNER_INTERNAL_H
#define DDP_RUNNER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "base/util.h"
#include "run/output.h"
#include "run/plan.h"
#include "run/runner.h"
#include "run/shim.h"

struct ddp_runner;

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
