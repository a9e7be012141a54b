/* runner_internal: the runner's private part of a worker (runner.h's ddp_runner_worker.io): its process and pipe
 * handles, the shim's report buffer, its output streams and timed log. Included by runner.c only (and the run
 * folder's tests); every other module learns about a worker from the runner's events and accessors. */
#ifndef DDP_RUNNER_INTERNAL_H
#define DDP_RUNNER_INTERNAL_H

#include <stddef.h>
#include <uv.h>

#include "run/output.h"
#include "run/shim.h"

struct ddp_runner_io {
    struct ddp_stream s_out, s_err; /* line framing, prefix, console and log of stdout and stderr */
    uv_process_t proc;
    uv_pipe_t out, err, rep;
    char rep_buf[sizeof(struct ddp_shim_record)];
    size_t rep_len;
    struct ddp_logfile timed; /* timed.log (fd -1 without log_dir) */
};

#endif
