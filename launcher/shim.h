/* shim: the hidden "--exec-shim" mode of ddplaunch, run as each worker's process-group leader: it dies with the
 * launcher (and then kills its whole group), applies the binding, starts the program and reports how that went
 * on a pipe. It does not supervise, restart or forward output: supervise.c does. */
#ifndef DDP_SHIM_H
#define DDP_SHIM_H

#include <stdint.h>

#include "spec.h"

/* argv of the shim, built by the supervisor:
 *   SELF --exec-shim --rank N --ppid PID --report-fd FD [--cpus LIST] [--mems LIST]
 *        [--mem-mode local|interleave|none] [--strict] -- PROGRAM ARGS...
 * The environment and working directory are the worker's (set by the spawner).
 * The shim stays the parent of PROGRAM (so that a SIGKILL of the launcher still ends every grandchild in the
 * group: PR_SET_PDEATHSIG fires in the shim, which SIGKILLs its group), and ends as PROGRAM ended (same exit code,
 * or the same signal). Signals sent to the group reach PROGRAM directly; the shim ignores them. */

/* One fixed-size record on the report pipe (close-on-exec in PROGRAM). EOF without a record = the shim died. */
enum ddp_shim_kind {
    DDP_SHIM_STARTED = 1,     /* pid = PROGRAM's pid: exec succeeded */
    DDP_SHIM_EXEC_FAILED = 2, /* err = errno of execvp, status = 127 (not found) or 126 (not executable) */
    DDP_SHIM_BIND_WARN = 3,   /* msg = why the binding was not (fully) applied; the program still runs */
    DDP_SHIM_BIND_FAILED = 4, /* strict binding failed: msg; the shim exits 1 before exec */
};
struct ddp_shim_record {
    int32_t kind;
    int32_t err;
    int32_t pid;
    int32_t status;
    char msg[496]; /* NUL-terminated */
};

/* Hidden mode: main.c calls this when argv[1] is "--exec-shim"; on success it never returns (it exits as
 * PROGRAM exited, or re-raises PROGRAM's signal). On failure it returns the exit status the process should end
 * with: 1 bad arguments/setup/strict binding, 127 not found, 126 not executable. */
int ddp_shim_main(int argc, char **argv);

/* Helper for the supervisor: the exit status 127/126 for an execvp errno. */
int ddp_shim_exec_status(int err);

#endif
