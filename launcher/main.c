/* main: wires the modules together: cli -> spec layers -> topology -> plan -> supervise -> exit status.
 * Only main.c and the exec shim call exit(). */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "coord.h"
#include "doctor.h"
#include "lease.h"
#include "nccl.h"
#include "plan.h"
#include "port.h"
#include "rundir.h"
#include "slurm.h"
#include "shim.h"
#include "spec.h"
#include "supervise.h"
#include "topo.h"
#include "util.h"

extern char **environ;

enum { EXIT_USAGE = 2, EXIT_LAUNCHER = 1 };

static int usage_error(const char *msg)
{
    fprintf(stderr, "ddplaunch: %s\nTry 'ddplaunch --help'.\n", msg);
    return EXIT_USAGE;
}

static int spec_error(const struct ddp_err *err)
{
    fprintf(stderr, "ddplaunch: %s\n", err->msg);
    return EXIT_USAGE;
}

/* Site config: --config, else $DDPLAUNCH_CONFIG (must exist), else SYSCONFDIR's file if present. */
static int load_site(struct ddp_spec *spec, const struct ddp_cli *cli, struct ddp_err *err)
{
    const char *path = cli->config ? cli->config : getenv("DDPLAUNCH_CONFIG");
    if (path && *path)
        return ddp_spec_load_file(spec, path, DDP_ORIGIN_SITE, err);
    const char *def = DDP_SYSCONFDIR "/ddplaunch/ddplaunch.ini";
    if (access(def, F_OK) != 0)
        return 0;
    return ddp_spec_load_file(spec, def, DDP_ORIGIN_SITE, err);
}

static char *make_run_id(const struct ddp_spec *spec)
{
    if (spec->run_id && *spec->run_id && strcmp(spec->run_id, "none") != 0)
        return ddp_xstrdup(spec->run_id);
    const char *slurm = getenv("SLURM_JOB_ID");
    if (slurm && *slurm && spec->slurm_enabled != DDP_NO)
        return ddp_xasprintf("slurm-%s", slurm);
    if (spec->nnodes.max > 1)
        return ddp_xstrdup("none"); /* as torchrun: the same on every node without anything to agree on */
    unsigned char raw[6] = { 0 };
    FILE *f = fopen("/dev/urandom", "re");
    if (!f || fread(raw, 1, sizeof raw, f) != sizeof raw) {
        long long t = ddp_now_ns() ^ getpid();
        memcpy(raw, &t, sizeof raw);
    }
    if (f)
        fclose(f);
    return ddp_xasprintf("%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2], raw[3], raw[4], raw[5]);
}

/* rdzv_endpoint HOST[:PORT] sets master_addr/master_port unless those were given with higher precedence. */
static int apply_endpoint(struct ddp_spec *spec, struct ddp_err *err)
{
    if (!spec->rdzv_endpoint || !*spec->rdzv_endpoint)
        return 0;
    int ei = ddp_spec_key_find("job", "rdzv_endpoint");
    enum ddp_origin o = spec->origin[ei];
    char *host = ddp_xstrdup(spec->rdzv_endpoint);
    char *colon = strrchr(host, ':');
    int rc = 0;
    if (colon && !strchr(colon, ']')) {
        *colon = '\0';
        if (spec->origin[ddp_spec_key_find("job", "master_port")] <= o)
            rc = ddp_spec_set(spec, "job", "master_port", colon + 1, o, "rdzv_endpoint", err);
    }
    if (rc == 0 && *host && spec->origin[ddp_spec_key_find("job", "master_addr")] <= o) {
        char *h = host;
        if (h[0] == '[' && h[strlen(h) - 1] == ']') {
            h[strlen(h) - 1] = '\0';
            h++;
        }
        rc = ddp_spec_set(spec, "job", "master_addr", h, o, "rdzv_endpoint", err);
    }
    free(host);
    return rc;
}

static char *self_exe(const char *argv0)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = '\0';
        return ddp_xstrdup(buf);
    }
    return ddp_xstrdup(argv0);
}

/* A fresh private directory for this launch (heartbeat files, error files, the timer FIFO) inside the user's
 * private runtime directory (0700, owner checked, no symlinks: rundir.c). NULL with a warning if impossible. */
static char *make_run_dir(void)
{
    struct ddp_err err;
    char *parent = ddp_rundir_private_path(environ, getuid());
    char *path = NULL;
    if (ddp_rundir_make_private(parent, NULL, &err) < 0 || ddp_rundir_mkdtemp(parent, "run", &path, &err) < 0) {
        ddp_warn("no runtime directory, so no heartbeat files: %s", err.msg);
        path = NULL;
    }
    free(parent);
    return path;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* The run dir holds only what ddplaunch made; remove it without following symlinks. */
static void remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Mark the GPUs other ddplaunch jobs lease now as held in the topology (shown by topo and plan). */
static void mark_leases(struct ddp_topo *topo, char *const *envp)
{
    struct ddp_lease_info *info = NULL;
    size_t n = 0;
    if (!topo || ddp_lease_list(ddp_rundir_lock_dir(envp), &info, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < ddp_topo_ngpus(topo); g++)
            if (strcmp(info[i].busid, ddp_topo_gpu_busid(topo, g)) == 0 && info[i].pid != getpid()) {
                char who[256];
                snprintf(who, sizeof who, "job '%s' (pid %d, user %s)", info[i].job[0] ? info[i].job : "?",
                         (int)info[i].pid, info[i].user[0] ? info[i].user : "?");
                ddp_topo_set_holder(topo, (int)g, who);
            }
    free(info);
}

struct lease_choice {
    const struct ddp_plan_ctx *ctx;
};

static int topo_index(const struct ddp_topo *topo, const char *busid)
{
    for (size_t g = 0; g < ddp_topo_ngpus(topo); g++)
        if (strcmp(ddp_topo_gpu_busid(topo, g), busid) == 0)
            return (int)g;
    return -1;
}

/* ddp_lease_acquire's chooser: the placement this job would make with the GPUs other jobs hold marked as
 * held in the topology (placement then says "in use by another job", not "left out"). */
static int choose_gpus(void *arg, const char *const *held, size_t nheld, struct ddp_strv *chosen, struct ddp_err *err)
{
    const struct lease_choice *lc = arg;
    const struct ddp_plan_ctx *ctx = lc->ctx;
    struct ddp_place_req req;
    struct ddp_placement pl = { 0 };
    ddp_plan_place_req(ctx, ctx->nproc, &req);
    int usable_all = ddp_place_count_usable(ctx->topo, &req);
    for (size_t i = 0; i < nheld; i++) {
        int g = topo_index(ctx->topo, held[i]);
        if (g >= 0)
            ddp_topo_set_holder(ctx->topo, g, "another ddplaunch job");
    }
    int rc = ddp_place(ctx->topo, &req, &pl, err);
    for (size_t i = 0; i < nheld; i++) {
        int g = topo_index(ctx->topo, held[i]);
        if (g >= 0)
            ddp_topo_set_holder(ctx->topo, g, NULL);
    }
    if (rc < 0)
        return usable_all >= ctx->nproc && nheld > 0 ? -ENODEV : rc;
    for (size_t r = 0; r < pl.nranks; r++) {
        const char *b = pl.ranks[r].busid;
        bool dup = false;
        for (size_t j = 0; b && j < chosen->n; j++)
            dup |= strcmp(chosen->v[j], b) == 0;
        if (b && !dup)
            ddp_strv_push(chosen, b);
    }
    ddp_placement_free(&pl);
    return 0;
}

static void ignore_signal(int signo)
{
    (void)signo;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--exec-shim") == 0)
        return ddp_shim_main(argc, argv);

    /* SIGUSR1/SIGUSR2 must not kill the launcher: Slurm sends them to every process of a step as a preemption
     * warning (--signal=USR1@T), and workers get them directly. A handler (not SIG_IGN) so that exec'd workers
     * start with the default disposition; with signals_to_handle listing them, the supervisor forwards them. */
    struct sigaction sa = { .sa_handler = ignore_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    struct ddp_cli cli;
    struct ddp_err err = { 0 };
    int status = EXIT_LAUNCHER;

    if (ddp_cli_parse(argc, argv, &cli, &err) < 0) {
        ddp_cli_free(&cli);
        return usage_error(err.msg);
    }
    ddp_log_verbosity = DDP_LOG_INFO + cli.verbosity;
    switch (cli.cmd) {
    case DDP_CMD_HELP:
        ddp_cli_help(stdout);
        ddp_cli_free(&cli);
        return 0;
    case DDP_CMD_VERSION:
        printf("ddplaunch %s\n", DDP_VERSION);
        ddp_cli_free(&cli);
        return 0;
    case DDP_CMD_KEYS:
        ddp_cli_help_keys(stdout);
        ddp_cli_free(&cli);
        return 0;
    default:
        break;
    }

    struct ddp_spec spec;
    struct ddp_topo *topo = NULL;
    struct ddp_attempt attempt = { 0 };
    struct ddp_slurm slurm = { 0 };
    struct ddp_port_resv *port_resv = NULL;
    struct ddp_lease *gpu_lease = NULL;
    char *coord_secret = NULL;
    char *run_id = NULL, *exe = NULL, *run_dir = NULL, *timer_path = NULL;
    ddp_spec_init(&spec);

    if (load_site(&spec, &cli, &err) < 0 ||
        (cli.spec_path && ddp_spec_load_file(&spec, cli.spec_path, DDP_ORIGIN_SPEC, &err) < 0) ||
        ddp_cli_apply_pet(&spec, environ, &err) < 0 || ddp_spec_apply_env(&spec, environ, &err) < 0 ||
        ddp_cli_apply(&cli, &spec, environ, &err) < 0 || apply_endpoint(&spec, &err) < 0) {
        status = spec_error(&err);
        goto out;
    }

    /* [gpus] select = auto is the same as no list: every module reads an empty list as "choose for me". */
    if (spec.gpus_select.n == 1 && strcmp(spec.gpus_select.v[0], "auto") == 0)
        ddp_strv_clear(&spec.gpus_select);

    const char *topo_file = cli.topology ? cli.topology : getenv("DDPLAUNCH_TOPOLOGY");
    if (topo_file && !*topo_file)
        topo_file = NULL;

    if (cli.cmd == DDP_CMD_TOPO) {
        if (ddp_topo_load(topo_file, &topo, &err) < 0) {
            fprintf(stderr, "ddplaunch: %s\n", err.msg);
            status = topo_file ? EXIT_USAGE : EXIT_LAUNCHER;
            goto out;
        }
        mark_leases(topo, environ);
        status = ddp_topo_command(topo, &spec, cli.json, stdout);
        goto out;
    }

    if (!cli.spec_path && !cli.target && cli.cmd == DDP_CMD_RUN && !spec.command.n && !spec.script &&
        !spec.module && !spec.program) {
        status = usage_error("expected a job spec (JOB.ini) or a training script");
        goto out;
    }
    bool doctor = cli.cmd == DDP_CMD_DOCTOR;
    if (doctor && !spec.command.n && !spec.script && !spec.module && !spec.program)
        ddp_spec_set(&spec, "job", "program", "true", DDP_ORIGIN_DEFAULT, "doctor", NULL); /* checks need none */
    if (ddp_spec_validate(&spec, &err) < 0) {
        status = spec_error(&err);
        goto out;
    }

    /* NCCL: the preset's variables (below explicit ones), then every NCCL/torch variable checked. */
    if (spec.nccl_preset && *spec.nccl_preset &&
        ddp_nccl_preset_apply(spec.nccl_preset, spec.log_dir, &spec.nccl, &err) < 0) {
        status = spec_error(&err);
        goto out;
    }
    {
        struct ddp_strv warnings = { 0 };
        int rc = ddp_nccl_validate(&spec.nccl, environ, &warnings, &err);
        for (size_t i = 0; i < warnings.n && cli.cmd != DDP_CMD_DOCTOR; i++)
            ddp_warn("%s", warnings.v[i]); /* doctor prints them as its nccl-env check */
        ddp_strv_clear(&warnings);
        if (rc < 0 && !doctor) { /* doctor reports it as a failed check */
            status = spec_error(&err);
            goto out;
        }
    }

    /* SLURM: inside an srun step, nodes, ranks, rank 0's address and the GPU set come from Slurm, unless the
     * command line says otherwise. */
    if (ddp_slurm_detect(environ, spec.slurm_enabled, &slurm, &err) < 0) {
        status = spec_error(&err);
        goto out;
    }
    if (slurm.warning)
        ddp_warn("%s", slurm.warning);
    if (ddp_slurm_apply(&slurm, &spec, &err) < 0) {
        status = spec_error(&err);
        goto out;
    }

    /* Topology: needed for GPUs and binding. Without it the job still runs, unbound. */
    if (ddp_topo_load(topo_file, &topo, &err) < 0) {
        if (topo_file) {
            status = spec_error(&err);
            goto out;
        }
        ddp_warn("topology unavailable, workers will not be bound: %s", err.msg);
        topo = NULL;
    }

    struct ddp_plan_ctx ctx = { 0 };
    char hostname[256] = "localhost";
    gethostname(hostname, sizeof hostname - 1);
    const char *py = getenv("PYTHON_EXEC");
    run_id = make_run_id(&spec);
    ctx.spec = &spec;
    ctx.base_env = environ;
    ctx.hostname = hostname;
    ctx.run_id = run_id;
    ctx.python = py && *py ? py : "python3";
    ctx.topo = topo;
    ctx.inherited_cvd = slurm.gpus_local ? NULL : getenv("CUDA_VISIBLE_DEVICES");
    ctx.slurm_gpus = slurm.active ? slurm.gpus : NULL;
    ctx.nnodes = spec.nnodes.max;
    ctx.node_rank = spec.node_rank;
    ctx.master_addr = spec.standalone ? "127.0.0.1" : spec.master_addr;

    /* Workers on this node. */
    switch (spec.nproc_per_node.kind) {
    case DDP_NPROC_INT:
        ctx.nproc = spec.nproc_per_node.n;
        break;
    case DDP_NPROC_GPU:
    case DDP_NPROC_AUTO: {
        struct ddp_place_req req;
        ddp_plan_place_req(&ctx, 1, &req);
        int usable = topo && req.want_gpus ? ddp_place_count_usable(topo, &req) : 0;
        if (usable > 0) {
            ctx.nproc = usable;
            break;
        }
        if (spec.nproc_per_node.kind == DDP_NPROC_GPU && doctor) {
            ctx.nproc = 1; /* the gpus check explains what is missing */
            break;
        }
        if (spec.nproc_per_node.kind == DDP_NPROC_GPU) {
            fprintf(stderr, "ddplaunch: nproc_per_node = gpu, but no usable GPU was found%s\n",
                    topo ? "" : " (no topology)");
            status = EXIT_USAGE;
            goto out;
        }
    } /* fall through: auto without GPUs = one per CPU */
    /* FALLTHROUGH */
    case DDP_NPROC_CPU: {
        long n = topo ? ddp_topo_ncpus(topo) : sysconf(_SC_NPROCESSORS_ONLN);
        ctx.nproc = n > 0 ? (int)n : 1;
        break;
    }
    }

    /* Derived defaults the spec leaves open. */
    if (spec.min_nproc_per_node == 0)
        spec.min_nproc_per_node = spec.on_timeout == DDP_ONTIMEOUT_DOWNSIZE ? 1 : ctx.nproc;
    if (spec.min_nproc_per_node > ctx.nproc)
        spec.min_nproc_per_node = ctx.nproc;
    if (!spec.name || !*spec.name) {
        const char *prog = spec.command.n ? spec.command.v[0]
                           : spec.script  ? spec.script
                           : spec.module  ? spec.module
                                          : spec.program;
        const char *slash = strrchr(prog, '/');
        free(spec.name);
        spec.name = ddp_xstrdup(slash ? slash + 1 : prog);
    }

    if (doctor) {
        mark_leases(topo, environ);
        ctx.master_port = spec.master_port.is_auto ? 0 : spec.master_port.port;
        status = ddp_doctor_run(&ctx, cli.json, stdout);
        goto out;
    }

    /* PORTS: master_port: reserved host-wide (auto), or checked to be free (explicit, on node 0). */
    if (spec.master_port.is_auto && ctx.nnodes > 1 && !slurm.active) {
        fprintf(stderr, "ddplaunch: master_port = auto needs a single node or Slurm; give every node the same "
                        "--master-port\n");
        status = EXIT_USAGE;
        goto out;
    }
    if (ctx.node_rank != 0 && spec.master_port.is_auto) {
        /* Node 0 reserves the port; the others compute the same one from the job id. */
        ctx.master_port = ddp_slurm_port(&slurm, spec.master_port.lo, spec.master_port.hi);
        if (ctx.master_port <= 0) {
            fprintf(stderr, "ddplaunch: master_port = auto on node %d needs Slurm (to derive node 0's port); give "
                            "every node the same --master-port\n", ctx.node_rank);
            status = EXIT_USAGE;
            goto out;
        }
    } else if (ctx.node_rank == 0) {
        char ephemeral[64] = "";
        FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
        if (f) {
            if (!fgets(ephemeral, sizeof ephemeral, f))
                ephemeral[0] = '\0';
            fclose(f);
        }
        struct ddp_port_req preq = {
            .lock_dir = ddp_rundir_lock_dir(environ),
            .addr = ctx.master_addr,
            .spec = spec.master_port,
            .ephemeral_range = ephemeral[0] ? ephemeral : NULL,
        };
        if (slurm.active && slurm.job_id) {
            preq.slurm_job_id = slurm.job_id_num;
            preq.slurm_step_id = slurm.step_id_num;
            preq.max_candidates = ctx.nnodes > 1 ? 1 : 0;
        }
        if (ddp_port_reserve(&preq, &port_resv, &ctx.master_port, &err) < 0) {
            fprintf(stderr, "ddplaunch: %s\n", err.msg);
            status = err.code == -EADDRINUSE && !spec.master_port.is_auto ? EXIT_USAGE : EXIT_LAUNCHER;
            goto out;
        }
    } else {
        ctx.master_port = spec.master_port.port;
    }

    /* GPU leases: concurrent jobs on this host without a scheduler get disjoint GPUs. The job's later attempts
     * (downsizing) choose only among the GPUs it leased. */
    bool lease = spec.gpus_lease == DDP_YES || (spec.gpus_lease == DDP_AUTO && !slurm.active);
    struct ddp_place_req lreq;
    ddp_plan_place_req(&ctx, ctx.nproc, &lreq);
    if (lease && topo && lreq.want_gpus && ddp_topo_ngpus(topo) > 0 && cli.cmd == DDP_CMD_RUN) {
        size_t ngpus = ddp_topo_ngpus(topo);
        const char **all = ddp_xcalloc(ngpus + 1, sizeof *all);
        for (size_t g = 0; g < ngpus; g++)
            all[g] = ddp_topo_gpu_busid(topo, g);
        struct lease_choice lc = { .ctx = &ctx };
        struct ddp_strv chosen = { 0 };
        int rc = ddp_lease_acquire(ddp_rundir_lock_dir(environ), all, ngpus, choose_gpus, &lc, spec.name,
                                   spec.gpus_lease_wait_ms, &gpu_lease, &chosen, &err);
        free(all);
        if (rc < 0) {
            ddp_strv_clear(&chosen);
            fprintf(stderr, "ddplaunch: %s\n", err.msg);
            status = rc == -EBUSY ? EXIT_LAUNCHER : EXIT_USAGE;
            goto out;
        }
        /* Later attempts (downsizing) choose only among the GPUs this job leased. */
        for (size_t g = 0; g < ngpus; g++) {
            bool mine = false;
            for (size_t j = 0; j < chosen.n; j++)
                mine |= strcmp(chosen.v[j], ddp_topo_gpu_busid(topo, g)) == 0;
            if (!mine)
                ddp_topo_set_holder(topo, (int)g, "not leased by this job");
        }
        ddp_strv_clear(&chosen);
    } else if (topo) {
        mark_leases(topo, environ);
    }

    if (cli.cmd != DDP_CMD_PLAN) {
        run_dir = make_run_dir();
        ctx.run_dir = run_dir;
        if (spec.timer_file && run_dir) {
            timer_path = ddp_xasprintf("%s/timer", run_dir); /* the FIFO torch's FileTimerClient writes to */
            ctx.timer_file = timer_path;
        }
    }
    /* Attempt 0 as `plan` shows it, also before a run: what it rejects ([env] ${VAR} not set, too few
     * GPUs) is a usage error, exit 2, before anything starts. */
    if (ddp_plan_build(&ctx, 0, ctx.nproc, NULL, 0, &attempt, &err) < 0) {
        status = spec_error(&err);
        goto out;
    }
    if (cli.cmd == DDP_CMD_PLAN) {
        ddp_plan_print(stdout, &ctx, &attempt, cli.json);
        status = 0;
        goto out;
    }
    ddp_attempt_free(&attempt);

    /* Several nodes: the agents coordinate over an authenticated control channel on master_port + 1. */
    if (ctx.nnodes > 1) {
        const char *tf = getenv("DDPLAUNCH_TOKEN_FILE");
        const char *home = getenv("HOME");
        char *tpath = tf && *tf ? ddp_xstrdup(tf) : ddp_xasprintf("%s/.config/ddplaunch/token", home ? home : "");
        if (!(tf && *tf) && home) {
            char *d = ddp_xasprintf("%s/.config", home);
            mkdir(d, 0700);
            free(d);
            d = ddp_xasprintf("%s/.config/ddplaunch", home);
            mkdir(d, 0700);
            free(d);
        }
        int rc = ddp_coord_secret(spec.secret, tpath, slurm.active && slurm.job_id ? slurm.job_id : run_id,
                                  &coord_secret, &err);
        free(tpath);
        if (rc < 0) {
            fprintf(stderr, "ddplaunch: job secret: %s\n", err.msg);
            status = EXIT_USAGE;
            goto out;
        }
        ctx.coord_secret = coord_secret;
        ctx.coord_port = ctx.master_port + 1;
        ctx.min_nnodes = spec.nnodes.min > 0 ? spec.nnodes.min : ctx.nnodes;
    }

    exe = self_exe(argv[0]);
    status = ddp_supervise_run(&ctx, exe, &err);
    if (status == EXIT_LAUNCHER && err.msg[0])
        fprintf(stderr, "ddplaunch: %s\n", err.msg);

out:
    ddp_lease_release(gpu_lease);
    ddp_port_release(port_resv);
    ddp_slurm_free(&slurm);
    if (run_dir)
        remove_tree(run_dir);
    ddp_attempt_free(&attempt);
    if (topo)
        ddp_topo_destroy(topo);
    free(run_id);
    free(coord_secret);
    free(exe);
    free(run_dir);
    free(timer_path);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    return status;
}
