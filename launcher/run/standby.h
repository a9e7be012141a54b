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

/* Where the program starts in a Python worker's argv: argv[0] names python ("python3", "/usr/bin/python3.11"),
 * then only options that a standby can share (-u -B -O -OO -s -E -b -bb -q -R, -W X, -X X), then SCRIPT or
 * "-m MODULE". Returns the index of SCRIPT or of "-m", or -1 when the argv does not fit (no python, -c, -P, -i,
 * "-", an unknown option). *module: "-m". */
int ddp_standby_split(const struct ddp_strv *argv, bool *module);

/* The standby's environment: the worker's (envp) less the variables that name a rank, an attempt or its files
 * (RANK, LOCAL_RANK, WORLD_SIZE..., MASTER_ADDR/PORT, TORCHELASTIC_*, CUDA_VISIBLE_DEVICES, DDPLAUNCH_* but
 * DDPLAUNCH_PYTHONPATH, TORCH_NCCL_DEBUG_INFO_*). out is cleared first. */
void ddp_standby_env(const struct ddp_strv *envp, struct ddp_strv *out);

/* Whether variable NAME=... is one of those (name up to '=' or the end). */
bool ddp_standby_env_dropped(const char *name);

/* The memory a standby is expected to take before one was measured: 256 MiB when preload names torch (torch
 * 1.13's import takes 234 MiB of RSS), else 32 MiB. */
long long ddp_standby_estimate_mib(const struct ddp_strv *preload);

/* For `ddplaunch plan` (text): one line saying how many standby interpreters the job would keep and their
 * expected memory, or why none; nothing when [restart] warm = no. */
void ddp_standby_print_plan(FILE *f, const struct ddp_spec *s, const struct ddp_attempt *a);

/* The "go" message for worker w whose program starts at argv index at (ddp_standby_split): see standby.py.
 * site: the launcher's sitecustomize.py, or NULL. cwd: the directory the worker runs in. Appends to out. */
void ddp_standby_message(const struct ddp_worker *w, int at, bool module, const char *cwd, const char *site,
                         struct ddp_buf *out);

/* ---------------------------------------------------------------- the pool */

struct ddp_standby_config {
    uv_loop_t *loop;
    struct ddp_runner *rn;          /* spawns through its shim set-up (runner_internal.h) */
    const struct ddp_strv *preload; /* the modules to import */
    const char *site;               /* the sitecustomize.py workers run (sample.h), or NULL */
    int sample_signal;              /* with site: the signal its sampler takes, blocked in what preload starts */
    const char *cgroup_base;        /* the standbys' own cgroup goes there, or NULL */
    bool quiet;                     /* warm = auto: say why standbys are not started only with -v */
};

/* Caller owns; ddp_standby_close() before the loop's last run, ddp_standby_free() after it. */
struct ddp_standby_pool *ddp_standby_new(const struct ddp_standby_config *cfg);

/* After attempt a started: one standby per local rank of a that has none (its workers as the model: their
 * interpreter, options, binding and environment less the rank's variables), unless MemAvailable is below twice
 * their expected total (said once), and none once a standby's preload initialised CUDA's driver (standby.py: a
 * /dev/nvidia* descriptor open; said once, every standby ended, restarts start fresh). Standbys of local
 * ranks a has not are ended. */
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
