/* plan: turns a resolved spec (plus topology, GPU choice, port) into the concrete workers of one attempt,
 * and prints that plan (`ddplaunch plan`, text or JSON). Pure apart from printing: it starts nothing. */
#ifndef DDP_PLAN_H
#define DDP_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "base/util.h"
#include "spec/spec.h"

/* One worker to start. All strings owned by the attempt. */
struct ddp_worker {
    int local_rank;
    int rank;
    struct ddp_strv argv; /* argv[0] is looked up in PATH by execvp */
    struct ddp_strv envp; /* the complete environment the worker gets */
    bool python;          /* runs Python (script, module, or a python command): its stack can be captured */
    char *cwd;            /* NULL = the launcher's */
    int gpu;              /* index into the topology's GPU list, or -1 */
    char *gpu_busid;      /* "0000:17:00.0" or NULL */
    int numa_node;        /* OS index of the node it is bound to, or -1 */
    char *cpus;           /* CPU list to bind to ("0-3,8"), NULL = no CPU binding */
    char *mems;           /* memory node list, NULL = no memory policy */
    enum ddp_membind mem_mode;
    bool bind_strict;   /* a binding that cannot be applied is an error, not a warning */
    char *log_dir;      /* <attempt dir>/LOCAL_RANK, or NULL */
    char *stacks_file;  /* live stack samples (DDPLAUNCH_STACKS_FILE, progress.c), or NULL */
    char *fr_pipe;      /* torch's flight-recorder dump FIFO for this rank (TORCH_NCCL_DEBUG_INFO_PIPE_FILE + rank +
                           ".pipe"; torch 2.x with NCCL creates it), or NULL */
    int std_redirect;   /* torchrun Std for redirects: 0 none, 1 out, 2 err, 3 both */
    int std_tee;        /* torchrun Std for tee */
    bool console;       /* passes --local-ranks-filter */
    bool to_console[2]; /* its stdout [0] / stderr [1] reach the console: console, and not in redirects
                           unless tee names it too (torchrun's precedence: tee wins) */
    bool raw[2];        /* stdout [0] / stderr [1] reach the console as raw bytes (job.console), else as
                           framed whole lines with prefix[i] */
    bool tty[2];        /* stdout [0] / stderr [1] is a pseudo-terminal (the console it reaches is a terminal:
                           the worker sees one of its size, pty.h), else a pipe */
    char *prefix[2];    /* console line prefix of stdout [0] / stderr [1], e.g. "[rank3]: ", "[default3]:"
                           (a --tee copy, as torchrun's), "" for none */
};

/* One attempt of the job on this node. */
struct ddp_attempt {
    int attempt;    /* 0, 1, ... = TORCHELASTIC_RESTART_COUNT */
    int nproc;      /* local workers */
    int world_size; /* all nodes */
    int orig_world_size;
    char *run_id;
    char *master_addr;
    int master_port;
    char *dir; /* LOG_DIR/<run_id>_XXXXXXXX/attempt_N (the run dir's attempt_N when there is no log_dir) */
    struct ddp_worker *workers;
    size_t nworkers;
    char *gpu_reason; /* one line: why these GPUs ("2 GPUs on NUMA node 0, NVLink") or NULL */
};

void ddp_attempt_free(struct ddp_attempt *a);

struct ddp_logdir;

/* The context of a launch is split by concern, so that each consumer is given the parts it reads and no more:
 * the job and its host (ddp_plan_job), the GPUs it may take (ddp_plan_gpus), the run directory's files of the
 * watch and the workers (ddp_plan_watch), the scheduler's facts (ddp_plan_sched) and the control channel between
 * node agents (ddp_plan_coord). Only the driver and plan see the whole struct ddp_plan_ctx. */

/* The job on this host: its spec and the facts of the host it runs on. */
struct ddp_plan_job {
    const struct ddp_spec *spec;
    char *const *base_env; /* the launcher's environment, inherited by workers */
    const char *hostname;
    const char *run_id;
    struct ddp_topo *topo;     /* may be NULL (no topology: no GPUs, no binding) */
    struct ddp_logdir *logdir; /* log_dir's run directory LOG_DIR/<run_id>_XXXXXXXX (logdir.h), NULL in `plan`
                                  and without log_dir */
    bool sweep_leftovers;      /* this launch removes what SIGKILLed launchers of this user left: ps files,
                                  attempt cgroups (false when one did a moment ago: ddp_rundir_sweep) */
};

/* The GPUs the job may take: what its environment and scheduler give, and what other jobs and processes hold. */
struct ddp_plan_gpus {
    const char *inherited_cvd;  /* CUDA_VISIBLE_DEVICES the launcher got, or NULL */
    const char *sched;          /* the scheduler's GPUs for this node (global indices), or NULL */
    const char *const *holders; /* per topology GPU: held by another job (who), or NULL; may be NULL */
    const char *lease_dir;      /* the lock directory of this job's GPU leases (lease.h), NULL when it leases
                                   none: a restart may lease a free GPU there for one that failed */
    const char *const *held;    /* per topology GPU: a process that held memory on it at launch ("pid N
                                   (user, command, X GiB)", gpus.h), or NULL; may be NULL */
};

/* The run directory's files that the watch and the workers share: live stack sampling and the timer FIFO. */
struct ddp_plan_watch {
    const char *run_dir;      /* private runtime dir of this launch (0700): heartbeat files, error files
                                 when there is no log_dir, the timer FIFO; "<run dir>" in `plan` */
    const char *timer_file;   /* TORCHELASTIC_TIMER_FILE path, or NULL */
    const char *sample_pydir; /* live stack sampling: the sitecustomize's directory (prepended to PYTHONPATH),
                                 or NULL (no sampling); "<run dir>/python" in `plan` */
    int sample_signal;        /* the signal the sitecustomize takes (DDPLAUNCH_STACKS_SIGNAL) */
};

/* What the scheduler says of the job on this node. */
struct ddp_plan_sched {
    long long mem_kib; /* its memory for this node's part of the job (KiB), 0: none said */
    bool signals_all;  /* its daemon signals every process of the job (Slurm's slurmstepd) */
    bool step;         /* ... and this launcher runs in a step of it, not in the batch script */
};

/* nnodes > 1: the control channel between the agents (coord.h); unused on one node. */
struct ddp_plan_coord {
    const char *secret;         /* the job secret (token.h); never exported to workers */
    const char *job;            /* the job's identity bound into the handshake (rendezvous id and command) */
    int port;                   /* node 0's control port */
    int node;                   /* 0 = this agent serves; > 0 = joins as that node rank; -1 = gets one at join */
    int listen_fd;              /* serving a c10d-style rendezvous: the endpoint's listening socket, else -1 */
    const char *rdzv_source;    /* what gave the node rank ("static", "c10d", "slurm"...; rdzv.h), for plan */
    bool dynamic;               /* c10d-style: node ranks given at join, group ranks in host-name order */
    const char *etcd_endpoints; /* etcd-v3: the cluster's members (rdzv_endpoint); NULL: not through etcd */
    int min_nnodes;             /* nnodes MIN: the job goes on while at least this many nodes are up */
    long long join_timeout_ms;  /* how long node 0 waits for nnodes MAX (then starts with >= MIN), and others
                                   try to reach node 0 */
    long long last_call_ms;     /* c10d, MIN < MAX: once MIN nodes joined, node 0 waits this long for more */
    long long lost_after_ms;    /* a silent agent is lost after this long */
};

/* What a builder needs that is not in the spec: decided once per launch (the fields outside the parts: this
 * node's place in the attempt, which a job on several nodes learns anew for each attempt). */
struct ddp_plan_ctx {
    struct ddp_plan_job job;
    struct ddp_plan_gpus gpus;
    struct ddp_plan_watch watch;
    struct ddp_plan_sched sched;
    struct ddp_plan_coord coord;
    const char *master_addr;
    int master_port;
    int ras_port;         /* NCCL_RAS_ADDR's port reserved for this job on this host (0: none, NCCL's default 28028) */
    const char *port_job; /* master_port = auto derived from a scheduler's job id ("slurm job 123"), or NULL */
    int port_job_first;   /* then: the port that job id gives first (ddp_port_job_candidate) */
    int nnodes;
    int node_rank;
    int nproc;              /* resolved local worker count */
    const char *python;     /* interpreter for script/module jobs (ddp_plan_python) */
    const char *python_why; /* why that one (ddp_plan_python's phrase), or NULL */
    bool console_tty[2];    /* the launcher's stdout [0] / stderr [1] is a terminal: job.console = auto
                               prefixes lines there, and workers get a pseudo-terminal for it */
    /* An attempt laid out over nodes with their own worker counts (layout.h): this node's first global rank
     * and the world size. world_size 0 = every node runs nproc: ranks node_rank * nproc + local rank. */
    int rank_base;
    int world_size;
};

/* Build attempt number `attempt` with `nproc` local workers, leaving out the GPUs in exclude (topology
 * indices). 0, or a negative errno with err (e.g. not enough usable GPUs). Caller owns *out; free with
 * ddp_attempt_free(). */
int ddp_plan_build(const struct ddp_plan_ctx *ctx, int attempt, int nproc, const int *exclude, size_t nexclude,
                   struct ddp_attempt *out, struct ddp_err *err);

/* The placement request (topo.h) this spec makes for nproc workers, without exclusions. Used by launch.c to
 * count usable GPUs (nproc_per_node = gpu|auto) and choose the GPUs to lease. */
struct ddp_place_req;
void ddp_plan_place_req(const struct ddp_plan_job *job, const struct ddp_plan_gpus *gpus, int nproc,
                        struct ddp_place_req *req);

/* The interpreter of script and module jobs: $PYTHON_EXEC from envp when set and not empty; else env_python, the
 * python3 of the Python environment (venv, conda) ddplaunch is installed in, so that workers find that
 * environment's torch whether it is activated or not; else torchrun_python, the interpreter of the torchrun on
 * PATH (its #! line: "the Python that torchrun runs with" is what a user replacing torchrun means); else
 * path_python (python3 found on PATH, absolute), else "python3". Pure. *why_out (may be NULL) gets a static
 * phrase naming the rule. Returns one of the strings passed in or a static one. */
const char *ddp_plan_python(char *const *envp, const char *env_python, const char *torchrun_python,
                            const char *path_python, const char **why_out);
/* The Python interpreter a script's first line names: "#!/usr/bin/python3.11" -> "/usr/bin/python3.11",
 * "#! /opt/py/bin/python3 -u" -> "/opt/py/bin/python3", "#!/usr/bin/env python3" -> "python3" (a name to look up
 * on PATH). NULL when line is no #! line or names no python (pip's "#!/bin/sh" wrapper of long paths). Pure;
 * caller frees. */
char *ddp_plan_shebang_python(const char *line);
/* Print the resolved spec (value and origin per key) and the attempt, as text or one JSON document. */
/* Whether the spec's program is a Python script or module (the interpreter is ddplaunch's to choose). Pure. */
bool ddp_plan_uses_python(const struct ddp_spec *s);
/* The first worker of a whose console output is framed lines, or NULL when all of it is raw bytes. */
const struct ddp_worker *ddp_plan_console_framed(const struct ddp_attempt *a);

void ddp_plan_print(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a, bool json);
/* One screen of ddp_plan_print's text (`plan` on a terminal without --full): the settings not at their default,
 * the head (nodes, master, GPUs, console, the ranks' table) and local rank 0's command. */
void ddp_plan_print_brief(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a);

#endif
