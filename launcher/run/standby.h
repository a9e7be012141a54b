/* standby: warm restart's standby interpreters ([restart] warm). While an attempt runs, one Python interpreter per
 * local rank, started through the exec shim like a worker (same binding, a cgroup of their own), imports the
 * preload list at low priority and waits (standby.py, built into the binary); when the next attempt starts, the
 * runner hands a fitting, ready one the worker's environment, argv and working directory (ddp_standby_take), and
 * it runs the program in place of a fresh interpreter, on the pipes it was started with.
 * It decides nothing about restarts (policy.h) and starts nothing by itself: the driver fills the pool after each
 * start (ddp_standby_fill) and closes it at the end. */
#ifndef DDP_STANDBY_H
#define DDP_STANDBY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "base/util.h"
#include "run/plan.h"
#include "run/runner.h"

struct ddp_runner;
struct ddp_runner_io;
struct ddp_standby_pool;

/* ---------------------------------------------------------------- pure parts (unit-tested) */

/* Where the program starts in a Python worker's argv: argv[0] names python (its base name "python" and digits or
 * dots: "python3", "/usr/bin/python3.11"; not "python_job.sh"), then only options that a standby can share (-u -B
 * -O -OO -s -b -bb -q -R, -W X, -X X), then SCRIPT or "-m MODULE". Returns the index of SCRIPT or of "-m", or -1
 * when the argv does not fit (no python, -c, -E, -I, -S, -P, -i, "-", an unknown option). *module: "-m". */
int ddp_standby_split(const struct ddp_strv *argv, bool *module);

/* The standby's environment: the worker's (envp) less the variables that name a rank, an attempt or its files
 * (RANK, LOCAL_RANK, WORLD_SIZE..., MASTER_ADDR/PORT, TORCHELASTIC_*, CUDA_VISIBLE_DEVICES, DDPLAUNCH_* but
 * DDPLAUNCH_PYTHONPATH, TORCH_NCCL_DEBUG_INFO_*); with pydir (the directory of the launcher's sitecustomize.py),
 * pydir first on PYTHONPATH (where the workers' is not so already) and DDPLAUNCH_STANDBY=1: the sitecustomize then
 * holds the program's own sitecustomize and usercustomize back until "go". out is cleared first. */
void ddp_standby_env(const struct ddp_strv *envp, const char *pydir, struct ddp_strv *out);

/* Whether variable NAME=... is one of those (name up to '=' or the end). */
bool ddp_standby_env_dropped(const char *name);

/* The memory a standby is expected to take before one was measured: 256 MiB when preload names torch (torch
 * 1.13's import takes 234 MiB of RSS), else 32 MiB. */
long long ddp_standby_estimate_mib(const struct ddp_strv *preload);

/* Why a standby cannot run SCRIPT (relative to cwd, or NULL) as "python SCRIPT" would, or NULL when it can:
 * python runs a directory (its __main__.py), a zip archive (a zipapp, a PEX: a zip's end record in its last
 * 64 KiB) and a compiled file (.pyc, by its name or its magic) otherwise than source text; one that is not a
 * regular file it can read is left to python's own message. */
const char *ddp_standby_refuse(const char *cwd, const char *script);

/* Why a standby cannot stand for worker w's interpreter, or NULL: argv[0] (found as execvp would, on the PATH of
 * w's environment) is a script (#!), a wrapper that may set variables or options before it runs python. */
const char *ddp_standby_refuse_interp(const struct ddp_worker *w);

/* The memory rule's view: -1 where unknown. */
struct ddp_standby_mem {
    long long avail_kib;       /* /proc/meminfo MemAvailable */
    long long cgroup_room_kib; /* the least memory.max - memory.current (v2; v1: limit_in_bytes - usage_in_bytes)
                                * over the launcher's cgroup and those above it that have a limit */
    long long sched_kib;       /* the scheduler's allocation on this node (nodes/slurm.c reads Slurm's) */
    long long tree_kib;        /* the resident memory of the launcher and every process below it */
};
/* Read it now. */
void ddp_standby_mem_read(struct ddp_standby_mem *m, long long sched_kib);
/* The room the standbys may take: the least of MemAvailable, the cgroup's room and Slurm's allocation less the
 * launcher's tree, with which one (*which: "MemAvailable", "the job's cgroup memory.max leaves", "Slurm's
 * allocation leaves"); -1 when none is known. */
long long ddp_standby_mem_room(const struct ddp_standby_mem *m, const char **which);
/* The least room under a memory limit for the cgroup named in proc_cgroup (a /proc/PID/cgroup file) below
 * root (/sys/fs/cgroup), cgroup v2 or v1, or -1 where no level has a limit. */
long long ddp_standby_cgroup_room_kib(const char *proc_cgroup, const char *root);

/* For `ddplaunch plan` (text): one line saying how many standby interpreters the job would keep and their
 * expected memory, or why none; nothing when [restart] warm = no, or auto without restarts. */
void ddp_standby_print_plan(FILE *f, const struct ddp_spec *s, const struct ddp_attempt *a);

/* The "go" message for worker w whose program starts at argv index at (ddp_standby_split): see standby.py.
 * sampling: the workers sample stacks (the launcher's sitecustomize registers the sampler). cwd: the directory
 * the worker runs in (absolute). Appends to out. */
void ddp_standby_message(const struct ddp_worker *w, int at, bool module, const char *cwd, bool sampling,
                         struct ddp_buf *out);

/* ---------------------------------------------------------------- the pool */

struct ddp_standby_config {
    uv_loop_t *loop;
    struct ddp_runner *rn;          /* spawns through its shim set-up (runner_internal.h) */
    const struct ddp_strv *preload; /* the modules to import */
    const char *pydir;              /* the directory of the launcher's sitecustomize.py (sample.h); NULL: none */
    bool sampling;                  /* the workers sample stacks (their PYTHONPATH has pydir) */
    int sample_signal;              /* with sampling: the signal its sampler takes, blocked in what preload starts */
    const char *cgroup_base;        /* the standbys' own cgroup goes there, or NULL */
    bool quiet;                     /* warm = auto: why standbys are not started is said as info, not a warning */
    long long sched_mem_kib;        /* the scheduler's memory for this node's part of the job (KiB), 0: none */
};

/* Caller owns; ddp_standby_close() before the loop's last run, ddp_standby_free() after it. */
struct ddp_standby_pool *ddp_standby_new(const struct ddp_standby_config *cfg);

/* After attempt a started: one standby per local rank of a that has none (its workers as the model: their
 * interpreter, options, binding and environment less the rank's variables), unless the room for them
 * (ddp_standby_mem_room) is below twice their expected total (said once), none when the program is one a standby
 * cannot run (ddp_standby_refuse; said once), and none once a standby's preload initialised CUDA's driver (standby.py:
 * a /dev/nvidia* descriptor open; said once, every standby ended, restarts start fresh). Standbys of local ranks a has
 * not are ended. */
void ddp_standby_fill(struct ddp_standby_pool *p, const struct ddp_attempt *a);

/* ddp_runner_adopt_fn for the runner (arg: the pool): for worker w of the attempt whose cgroup is cgroup (or
 * NULL), a standby of w's local rank that is ready and fits (same interpreter and options, binding and
 * terminal), moved into that cgroup and sent "go". 0 with *t (the runner owns what it holds), or -1: start w
 * fresh (a standby that was there but did not fit, was not ready or could not be sent "go" is ended; why is in
 * why[0..whylen)). */
int ddp_standby_take(void *pool, const struct ddp_worker *w, const char *cgroup, struct ddp_runner_adopted *t,
                     char *why, size_t whylen);

/* End every standby (ddp_shim_kill) and close the pool's handles. */
void ddp_standby_close(struct ddp_standby_pool *p);
void ddp_standby_free(struct ddp_standby_pool *p);

#endif
