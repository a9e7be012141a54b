/* shim: a copy of the launcher forked for each worker (ddp_shim_fork), or the hidden "--exec-shim" mode of
 * ddplaunch where it cannot be forked, run as each worker's process-group leader and as the child
 * subreaper of its program's whole process tree: it applies the binding, starts the program, reports how that
 * went on a pipe, and ends every descendant of the program (setsid, setpgid and double-forked ones included)
 * when the program ends, when the launcher asks (ddp_shim_kill) and when the launcher dies.
 * It does not supervise, restart or forward output: supervise.c does. */
#ifndef DDP_SHIM_H
#define DDP_SHIM_H

#include <stdint.h>

#include "spec/spec.h"

/* argv of the shim, built by the supervisor:
 *   SELF --exec-shim --rank N --ppid PID --report-fd FD [--grace-ms MS] [--cgroup DIR] [--cpus LIST] [--mems LIST]
 *        [--mem-mode local|interleave|none] [--strict] [--exec-path FILE] -- PROGRAM ARGS...
 * With --exec-path the shim executes FILE (ddp_shim_reach) with PROGRAM ARGS as argv, else PROGRAM by PATH.
 * The environment and working directory are the worker's (set by the spawner). With --cgroup PROGRAM starts in
 * that cgroup v2 directory (the attempt's, cgroup.h), so its whole tree is counted there: created in it
 * (ddp_cgroup_fork_into), or, on a kernel before 5.7, after the shim moved itself there.
 * The shim stays the parent of PROGRAM and is a child subreaper (PR_SET_CHILD_SUBREAPER), so every process of
 * PROGRAM's tree stays its descendant whatever session or group it moves to. PROGRAM leads a process group of
 * its own (not the shim's), so that a worker signalling its own group (`kill -9 0`) cannot end the shim; a signal
 * the launcher sends to the shim's group is passed on to PROGRAM's group. When PROGRAM ends, the shim sends
 * SIGTERM to each remaining descendant, SIGKILL after MS (the job's shutdown_timeout), reaps them all, and only
 * then ends as PROGRAM ended (same exit code, or the same signal). When the launcher dies (PR_SET_PDEATHSIG) or
 * sends ddp_shim_kill(), it SIGKILLs the whole tree at once. SIGTERM, SIGINT and SIGHUP sent to the group reach
 * PROGRAM's group and the descendants outside it; the shim ignores them itself. A worker that kills the shim
 * itself leaves its tree to the launcher (ddp_shim_adopt_orphans, ddp_shim_sweep_orphans).
 * Not covered: a process that changes its user id, or that another service (systemd-run, sshd, at) starts. */

/* One fixed-size record on the report pipe (close-on-exec in PROGRAM). EOF without a record = the shim died. */
enum ddp_shim_kind {
    DDP_SHIM_STARTED = 1,     /* pid = PROGRAM's pid: exec succeeded */
    DDP_SHIM_EXEC_FAILED = 2, /* err = errno of execvp, status = 127 (not found) or 126 (not executable) */
    DDP_SHIM_BIND_WARN = 3,   /* msg = why the binding was not (fully) applied; the program still runs */
    DDP_SHIM_BIND_FAILED = 4, /* strict binding failed: msg; the shim exits 1 before exec */
    DDP_SHIM_EXITED = 5,      /* PROGRAM ended: status = exit code or 128+N, err = N (signal) or 0; the shim ends
                               * its leftover descendants before it exits itself (up to shutdown_timeout) */
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

/* For the runner: start the shim of argv (its command line as for --exec-shim; argv[0] is only shown) without
 * an exec, as a child of this process: a session of its own, fds[i] as its descriptor i for i < 4, every other
 * descriptor that an exec would close closed (the launcher's own; what it inherited open passes on), working
 * directory cwd (NULL: this one), environment envp (PROGRAM's), every signal's disposition the default; then
 * ddp_shim_main's work, on a copy of this process's memory. An exec of the static ddplaunch costs ~1.1 ms on a
 * 2-CPU VM, a fork ~0.08 ms. Returns the shim's pid with *pidfd (pidfd_open: readable once it ended; the caller
 * reaps it with waitpid), or a negative errno: -EBUSY while it cannot be done safely (this process runs more than
 * one thread), -ENOSYS where it never can (a kernel before 5.3 has no pidfd); the caller executes the shim then. */
int ddp_shim_fork(char **argv, char **envp, const char *cwd, const int fds[4], int *pidfd);

/* For main(), before anything changes argv: where a forked shim writes its command line (ddp_shim_fork). */
void ddp_shim_title_area(int argc, char **argv);

/* For the supervisor: ask the shim SHIM_PID to SIGKILL its program's whole tree and end (it then ends as the
 * program did, normally killed by SIGKILL). Not SIGKILL to the group: that would kill the shim first and leave
 * the processes outside the group to init. 0 or -errno of kill(2). */
int ddp_shim_kill(int shim_pid);

/* For the launcher, at each worker's start: keep program (argv[0], resolved with path_env as execvp would)
 * reachable for restarts. The first call for a program opens what it resolves to now (O_PATH, close-on-exec,
 * held for the launcher's life) and returns NULL (start it by name); a later call returns NULL while the path
 * still names that file, else (deleted, or replaced by another file) warns once and returns
 * "/proc/PID/fd/N", the program the job started with, to pass to the shim as --exec-path (argv[0] unchanged).
 * Static storage, overwritten by the next call; up to 8 programs per job. */
const char *ddp_shim_reach(const char *program, const char *path_env);

/* For the launcher, once before it starts shims: make it a child subreaper (PR_SET_CHILD_SUBREAPER), so that
 * when a worker kills its shim (`kill -9 $PPID`) what the shim contained comes back to the launcher, not to
 * init. 0 or -errno of prctl(2). */
int ddp_shim_adopt_orphans(void);

/* For the launcher, when a shim has ended: SIGKILL every descendant of this process that is not below one of
 * the shims still running (shims[0..nshims), libuv's children), until none is left (at most 3 s: a process in
 * the kernel's D state dies late), and reap those that became its children. Never waits for a shim.
 * Returns how many it reaped. */
int ddp_shim_sweep_orphans(const pid_t *shims, size_t nshims);

/* Helper for the supervisor: the exit status 127/126 for an execvp errno. */
int ddp_shim_exec_status(int err);

#endif
