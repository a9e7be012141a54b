/* launch: what one `ddplaunch run|plan|doctor` launches, and what it holds while it runs. Three steps:
 * load (the spec's layers, the scheduler's variables, the topology), resolve (pure: spec + facts -> the plan context:
 * workers on this node, derived defaults, run id, interpreter, port source, GPUs held by other jobs) and acquire
 * (the master port, GPU leases, the run directory, the job secret).
 * It does not parse the command line (cli.h), build or print workers (plan.h) or start them (supervise.h). */
#ifndef DDP_LAUNCH_H
#define DDP_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"
#include "host/lease.h"
#include "nodes/scheduler.h"
#include "run/plan.h"
#include "spec/cli.h"
#include "spec/spec.h"

/* Where the master port comes from (after resolve). */
enum ddp_launch_port {
    DDP_LAUNCH_PORT_NONE,    /* doctor: nothing to take; ctx.master_port is the explicit port or 0 */
    DDP_LAUNCH_PORT_RESERVE, /* node 0: reserved host-wide (auto) or checked to be free (explicit) by acquire */
    DDP_LAUNCH_PORT_DERIVED, /* node > 0 with auto under a scheduler: from its job id, as node 0 reserves it */
    DDP_LAUNCH_PORT_GIVEN,   /* node > 0 with an explicit port: taken as given */
    DDP_LAUNCH_PORT_SENT     /* c10d, a joining node: the serving agent sends it with every START */
};

/* What resolve reads from the world, gathered by ddp_launch_facts_gather() (tests fill it by hand). */
struct ddp_launch_facts {
    char *const *envp; /* the launcher's environment (CUDA_VISIBLE_DEVICES, PYTHON_EXEC, ...) */
    char hostname[256];
    long online_cpus;      /* for nproc_per_node = cpu|auto without a topology */
    char random_id[13];    /* 12 hex digits: the run id when neither the spec nor a scheduler names one */
    char *torchrun_python; /* the interpreter of the torchrun found on PATH (its #! line, a bare name looked up on
                              PATH), or NULL */
    char *path_python;     /* python3 found on PATH, absolute, or NULL */
    char *env_python;      /* BINDIR/python3 when ddplaunch's BINDIR is a Python environment's bin/
                              (BINDIR/../pyvenv.cfg or BINDIR/../conda-meta/), else NULL */
    const struct ddp_lease_info *leases; /* GPUs leased now by ddplaunch jobs on this host (lease.h) */
    size_t nleases;
    pid_t self;          /* this launcher: its own leases are not "another job" */
    bool console_tty[2]; /* stdout [0] / stderr [1] is a terminal (isatty) */
};

/* One launch. Zero-initialise with ddp_launch_init(); everything in it is owned; free with ddp_launch_free(). */
struct ddp_launch {
    enum ddp_cmd cmd;
    struct ddp_spec spec;
    struct ddp_scheduler sched; /* what the scheduler that started us says (scheduler.h); name NULL: none */
    struct ddp_topo *topo;      /* NULL: no topology (the job runs unbound) */
    /* The spec as resolved (ddp_launch_resolve, then acquire), beside spec, which keeps what the user wrote:
     * spec's values with what was decided from the facts: name (the program's when none is given),
     * min_nproc_per_node, master_port (auto for c10d, torchrun's 29500 for several static nodes) and
     * timeout_sample (off when the sampler cannot be installed). ctx.job.spec points here. It shares spec's memory
     * except resolved_name; launch.c alone writes it. */
    struct ddp_spec resolved;
    char *resolved_name;
    struct ddp_plan_ctx ctx; /* what plan, doctor and supervise take; its strings point into this struct */
    /* where ctx.master_port comes from; both are written by launch.c's port_decided() alone */
    enum ddp_launch_port port_source;
    bool lease; /* acquire leases GPUs against other ddplaunch jobs (run, GPUs wanted) */
    char *run_id;
    char *python;
    char hostname[256]; /* facts' host name, kept: ctx.job.hostname points here after the facts are freed */
    char port_job[128]; /* ctx.port_job's text: "slurm job 123" */
    char **holders;     /* per topology GPU: who else holds it, or NULL (= ctx.gpus.holders) */
    size_t nholders;
    /* acquired */
    struct ddp_port_resv *port;
    struct ddp_port_resv *ras_port; /* NCCL_RAS_ADDR's (= ctx.ras_port), or NULL */
    struct ddp_lease *gpus;
    char *run_dir;             /* removed again by ddp_launch_free() */
    int run_dir_lock;          /* its lock (rundir.h), valid while run_dir is set */
    struct ddp_logdir *logdir; /* run: log_dir's fresh run directory (= ctx.job.logdir), kept at exit */
    char *timer_path;
    char *sample_pydir; /* the sitecustomize's directory in run_dir, or NULL */
    char *secret;
    struct ddp_port_resv *coord_port; /* node 0: the control port's reservation */
    int listen_fd;                    /* c10d, serving: the endpoint's listener (coord takes a copy); -1 none */
    char job[65];                     /* several nodes: the job's identity (rdzv.h) */
    /* when a step fails: the exit status it means (2 the user's mistake, 1 the machine's), and whether the
     * message is a command-line usage error (then "Try 'ddplaunch --help'." follows it) */
    int fail_status;
    bool fail_usage;
};

void ddp_launch_init(struct ddp_launch *l, enum ddp_cmd cmd);
/* Releases what acquire took (leases, port, run directory and its contents) and frees everything. */
void ddp_launch_free(struct ddp_launch *l);

/* The spec's layers, lowest first: defaults, the site config (--config, else $DDPLAUNCH_CONFIG, else
 * SYSCONFDIR's file when present), the job spec, PET_* and DDPLAUNCH_* variables, the command line; then
 * rdzv_endpoint fills master_addr/master_port where nothing of higher precedence set them, and
 * [gpus] select = auto becomes the empty list. 0, or a negative errno with err (fail_status set). */
int ddp_launch_load_spec(struct ddp_launch *l, const struct ddp_cli *cli, char *const *envp, struct ddp_err *err);

/* After load_spec for run, plan and doctor: a program to run (doctor runs `true` when none is given), the
 * spec's cross-key checks, the NCCL preset and the NCCL/torch variables (warnings logged; doctor reports them
 * itself), then what the scheduler says (scheduler.h: Slurm, LSF, PBS, ...). 0, or a negative errno with err
 * (fail_status, fail_usage set). */
int ddp_launch_check_spec(struct ddp_launch *l, const struct ddp_cli *cli, char *const *envp, struct ddp_err *err);

/* The topology file: --topology, else $DDPLAUNCH_TOPOLOGY, else NULL (the live machine). */
const char *ddp_launch_topology_path(const struct ddp_cli *cli, char *const *envp);
/* Load the topology into l->topo (the live machine through the topology cache of envp's runtime directory for
 * run and plan; discovered now for topo and doctor). required (the `topo` command): a failure is an error
 * (exit 2 for a file, else 1). Otherwise only a file that cannot be loaded is; without one the job runs unbound
 * (a warning). */
int ddp_launch_load_topology(struct ddp_launch *l, const char *path, bool required, char *const *envp,
                             struct ddp_err *err);

/* launch_facts.c: live facts for resolve of l (its spec and topology loaded): hostname, CPUs online, a random id and
 * the current GPU leases, these only for topo, doctor and a job whose workers may use GPUs (one read of /proc/net/unix,
 * which lists every launcher's locks: a thousand agents of a CPU job need none). Free with ddp_launch_facts_free(). */
void ddp_launch_facts_gather(struct ddp_launch_facts *f, const struct ddp_launch *l, char *const *envp);
/* Whether the launch's workers may use GPUs: the topology has some and the spec neither runs CPU workers
 * (nproc_per_node = cpu) nor selects none. */
bool ddp_launch_wants_gpus(const struct ddp_launch *l);
void ddp_launch_facts_free(struct ddp_launch_facts *f);
/* name's absolute path on envp's PATH (an executable regular file; a name with a '/' as is, when executable), or
 * NULL. Caller frees. */
char *ddp_launch_find_on_path(const char *name, char *const *envp);

/* Who holds each topology GPU, from the lease list (leases of pid self left out): "job 'NAME' (pid P, user U)".
 * Pure. Returns an array of ngpus entries (NULL = free) that the caller frees with ddp_launch_holders_free(),
 * or NULL when topo is NULL. */
char **ddp_launch_holders(const struct ddp_topo *topo, const struct ddp_lease_info *leases, size_t nleases, pid_t self);
void ddp_launch_holders_free(char **holders, size_t n);

/* What the scheduler that started this agent says (scheduler.h) into l->sched, from envp and the spec's
 * [slurm] enabled and rendezvous backend; ddp_launch_check_spec calls it. 0, 1 (one found) or -EINVAL with err. */
int ddp_launch_scheduler(struct ddp_launch *l, char *const *envp, struct ddp_err *err);

/* The pure resolve step: fills l->ctx from l->spec, l->sched, l->topo and facts: the number of workers on this
 * node (nproc_per_node: an int, one per usable GPU, one per CPU), the defaults the spec leaves open
 * (min_nproc_per_node, name: written into l->spec), the run id, the interpreter, the master address and where
 * the port comes from (port_source), whether to lease GPUs, and the GPUs other jobs hold (ctx.gpus.holders;
 * none when this launch leases, whose acquire decides). Reads no file and no variable outside facts.
 * 0, or a negative errno with err and fail_status (nproc_per_node = gpu without a usable GPU; master_port =
 * auto on several nodes without a scheduler job id). */
int ddp_launch_resolve(struct ddp_launch *l, const struct ddp_launch_facts *facts, struct ddp_err *err);

/* The acquire step: the master port (port_source RESERVE), the GPU leases (lease: waits up to
 * [gpus] lease_wait for the GPUs this job's placement wants; afterwards every GPU it did not lease is held
 * "not leased by this job", so that downsizing chooses only among its own) and, except for plan, the run
 * directory with the timer FIFO's path; for run with log_dir, the log run directory (logdir.h; a log_dir that
 * cannot be used fails with status 2, and the path is logged). 0, or a negative errno with err and
 * fail_status. */
int ddp_launch_acquire(struct ddp_launch *l, char *const *envp, struct ddp_err *err);

/* Several nodes: the job secret (token.h: job.secret, secret_file, else derived from the token file
 * $DDPLAUNCH_TOKEN_FILE or ~/.config/ddplaunch/token, made when missing), the job's identity, the control
 * channel's port (static: master_port + 1, reserved on node 0) and node minimum. Nothing on one node. 0, or a
 * negative errno with err (fail_status 2). */
int ddp_launch_acquire_secret(struct ddp_launch *l, char *const *envp, struct ddp_err *err);

#endif
