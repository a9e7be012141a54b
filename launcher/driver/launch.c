/* launch: load, resolve and acquire for one launch (launch.h). */
#include "driver/launch.h"
#include "driver/gpus.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/exit.h"
#include "driver/policy.h"
#include "host/logdir.h"
#include "host/port.h"
#include "host/rundir.h"
#include "nodes/coord.h"
#include "nodes/rdzv.h"
#include "nodes/token.h"
#include "spec/nccl.h"
#include "topo/place.h"
#include "topo/topo.h"
#include "watch/watch.h"

static int fail(struct ddp_launch *l, int status, int rc)
{
    l->fail_status = status;
    return rc;
}

/* err's message, prefixed with "FILE:LINE: " when [job] key was set in a file (spec or site config). Returns rc. */
static int at_key(const struct ddp_spec *spec, const char *key, int rc, struct ddp_err *err)
{
    int i = ddp_spec_key_find("job", key);
    if (i >= 0 && spec->set_file[i]) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        ddp_errf(err, rc, "%s:%d: %s", spec->set_file[i], spec->set_line[i], msg);
    }
    return rc;
}

/* name's absolute path on envp's PATH (an executable regular file), or NULL. Caller frees. */
char *ddp_launch_find_on_path(const char *name, char *const *envp)
{
    const char *path = ddp_env_get(envp, "PATH");
    struct stat st;
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? ddp_xstrdup(name) : NULL;
    for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        char *cand = ddp_xasprintf("%.*s/%s", (int)n, n ? p : ".", name);
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
            if (cand[0] != '/') {
                char abs[PATH_MAX];
                if (realpath(cand, abs)) {
                    free(cand);
                    cand = ddp_xstrdup(abs);
                }
            }
            return cand;
        }
        free(cand);
        p += n + (p[n] == ':');
    }
    return NULL;
}

/* --no-python PROGRAM or [job] program that cannot be found (a bare name on PATH, or a path): one line, exit 2,
 * before anything starts, as a missing script. The PATH is the workers' own when [env] sets it. */
static int check_program(const struct ddp_spec *spec, char *const *envp, struct ddp_err *err)
{
    const char *prog = spec->program, *path = ddp_env_get(envp, "PATH");
    if (!prog || !*prog)
        return 0;
    for (size_t i = 0; i < spec->env.n; i++)
        if (strcmp(spec->env.v[i].key, "PATH") == 0)
            path = strchr(spec->env.v[i].value, '$') ? NULL : spec->env.v[i].value;
    if (!path && !strchr(prog, '/'))
        return 0; /* [env] PATH names variables: the workers' PATH is not known here */
    struct stat st;
    if (strchr(prog, '/')) { /* one that is there but cannot be executed is the shim's 126, with its errno */
        char *at = prog[0] != '/' && spec->workdir && *spec->workdir ? ddp_xasprintf("%s/%s", spec->workdir, prog)
                                                                     : ddp_xstrdup(prog);
        int missing = stat(at, &st) < 0 && errno == ENOENT;
        free(at);
        return missing ? at_key(spec, "program", ddp_errf(err, -ENOENT, "program: no such file: '%s'", prog), err) : 0;
    }
    char *pathvar = ddp_xasprintf("PATH=%s", path);
    char *const penv[] = {pathvar, NULL};
    char *found = ddp_launch_find_on_path(prog, penv);
    free(pathvar);
    bool on_path = found != NULL;
    free(found);
    return on_path ? 0
                   : at_key(spec, "program",
                            ddp_errf(err, -ENOENT, "program: '%s' is not on PATH (as an executable file; PATH=%s)",
                                     prog, path),
                            err);
}

void ddp_launch_init(struct ddp_launch *l, enum ddp_cmd cmd)
{
    memset(l, 0, sizeof *l);
    l->cmd = cmd;
    l->fail_status = DDP_EXIT_LAUNCHER;
    l->listen_fd = -1;
    ddp_spec_init(&l->spec);
}

void ddp_launch_free(struct ddp_launch *l)
{
    ddp_lease_release(l->gpus);
    ddp_port_release(l->port);
    ddp_port_release(l->ras_port);
    ddp_port_release(l->coord_port);
    if (l->listen_fd >= 0)
        close(l->listen_fd);
    ddp_scheduler_free(&l->sched);
    ddp_logdir_close(l->logdir);
    /* The run dir holds only what ddplaunch made; removed without following symlinks. */
    if (l->run_dir)
        ddp_rundir_run_remove(l->run_dir, l->run_dir_lock);
    if (l->topo)
        ddp_topo_destroy(l->topo);
    ddp_launch_holders_free(l->holders, l->nholders);
    free(l->run_id);
    free(l->python);
    free(l->run_dir);
    free(l->timer_path);
    free(l->sample_pydir);
    if (l->secret)
        ddp_crypto_wipe(l->secret, strlen(l->secret));
    free(l->secret);
    ddp_spec_free(&l->spec);
    free(l->resolved_name); /* the rest of resolved is spec's memory */
    memset(l, 0, sizeof *l);
}

/* ---- load ---- */

static int load_site(struct ddp_spec *spec, const struct ddp_cli *cli, char *const *envp, struct ddp_err *err)
{
    const char *path = cli->config ? cli->config : ddp_env_get(envp, "DDPLAUNCH_CONFIG");
    if (path && *path)
        return ddp_spec_load_file(spec, path, DDP_ORIGIN_SITE, err);
    const char *def = DDP_SYSCONFDIR "/ddplaunch/ddplaunch.ini";
    if (access(def, F_OK) != 0)
        return 0;
    return ddp_spec_load_file(spec, def, DDP_ORIGIN_SITE, err);
}

/* rdzv_endpoint HOST[:PORT] sets master_addr/master_port unless those were given with higher precedence. */
static int apply_endpoint(struct ddp_spec *spec, struct ddp_err *err)
{
    if (!spec->rdzv_endpoint || !*spec->rdzv_endpoint)
        return 0;
    const char *b = spec->rdzv_backend ? spec->rdzv_backend : "";
    if (strcmp(b, "etcd-v3") == 0 || strcmp(b, "etcd") == 0 || strcmp(b, "etcd-v2") == 0)
        return 0; /* etcd's members, not node 0's address: MASTER_ADDR is the one of the attempt's group rank 0 */
    enum ddp_origin o = spec->origin[ddp_spec_key_find("job", "rdzv_endpoint")];
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

/* TORCHELASTIC_ENABLE_FILE_TIMER=1, how torchrun users turn on the file timer (torchrun's agent then serves
 * TORCHELASTIC_TIMER_FILE): [timeout] timer_file = yes at the PET_* layer, so DDPLAUNCH_* and the command line
 * still win. Any other value leaves it off, as torchrun's "== '1'" does. */
static int apply_torchelastic_env(struct ddp_spec *spec, char *const *envp, struct ddp_err *err)
{
    const char *v = ddp_env_get(envp, "TORCHELASTIC_ENABLE_FILE_TIMER");
    if (!v || strcmp(v, "1") != 0)
        return 0;
    return ddp_spec_set(spec, "timeout", "timer_file", "yes", DDP_ORIGIN_ENV, "TORCHELASTIC_ENABLE_FILE_TIMER", err);
}

int ddp_launch_load_spec(struct ddp_launch *l, const struct ddp_cli *cli, char *const *envp, struct ddp_err *err)
{
    struct ddp_spec *spec = &l->spec;
    int rc;

    if ((rc = load_site(spec, cli, envp, err)) < 0 ||
        (cli->spec_path && (rc = ddp_spec_load_file(spec, cli->spec_path, DDP_ORIGIN_SPEC, err)) < 0) ||
        (rc = ddp_cli_apply_pet(spec, envp, err)) < 0 || (rc = apply_torchelastic_env(spec, envp, err)) < 0 ||
        (rc = ddp_spec_apply_env(spec, envp, err)) < 0 || (rc = ddp_cli_apply(cli, spec, envp, err)) < 0 ||
        (rc = apply_endpoint(spec, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, rc);
    /* [gpus] select = auto is the same as no list: every module reads an empty list as "choose for me". */
    if (spec->gpus_select.n == 1 && strcmp(spec->gpus_select.v[0], "auto") == 0)
        ddp_strv_clear(&spec->gpus_select);
    return 0;
}

static bool has_program(const struct ddp_spec *s)
{
    return s->command.n || s->script || s->module || s->program;
}

int ddp_launch_scheduler(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    const struct ddp_spec *spec = &l->spec;
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) < 0)
        host[0] = 0;
    struct ddp_scheduler_opts so = {
        .slurm = spec->slurm_enabled,
        .dynamic_rdzv = spec->rdzv_backend && strcmp(spec->rdzv_backend, "static") != 0,
        .hostname = host[0] ? host : NULL,
    };
    ddp_scheduler_free(&l->sched);
    return ddp_scheduler_detect(envp, &so, &l->sched, err);
}

int ddp_launch_check_spec(struct ddp_launch *l, const struct ddp_cli *cli, char *const *envp, struct ddp_err *err)
{
    struct ddp_spec *spec = &l->spec;
    bool doctor = l->cmd == DDP_CMD_DOCTOR;
    int rc;

    if (!cli->spec_path && !cli->target && l->cmd == DDP_CMD_RUN && !has_program(spec)) {
        l->fail_usage = true;
        return fail(l, DDP_EXIT_USAGE, ddp_errf(err, -EINVAL, "expected a job spec (JOB.ini) or a training script"));
    }
    if (l->cmd == DDP_CMD_RUN || l->cmd == DDP_CMD_PLAN || doctor) {
        /* A training script that is not there: one line before anything starts, not a failed worker per rank
         * ("ddplaunch help" names a script called help); plan and doctor catch it as the run would. */
        char *check = ddp_cli_script_to_check(cli, spec->workdir, envp);
        struct stat st;
        if (check && stat(check, &st) < 0 && errno == ENOENT) {
            l->fail_usage = l->cmd == DDP_CMD_RUN;
            rc = l->cmd == DDP_CMD_RUN && ddp_cli_is_command(cli->target)
                     ? ddp_errf(err, -ENOENT,
                                "no such file: '%s'; the command comes first: ddplaunch %s [OPTIONS] ... (the "
                                "commands are %s)",
                                check, cli->target, ddp_cli_command_names())
                     : ddp_errf(err, -ENOENT, "no such file: '%s' (the training script to run; the commands are %s)",
                                check, ddp_cli_command_names());
            free(check);
            return fail(l, DDP_EXIT_USAGE, rc);
        }
        free(check);
        /* the job spec's script (relative to the spec's directory, spec_file.c): file:line, before anything */
        int si = ddp_spec_key_find("job", "script");
        if (!cli->target && spec->script && spec->origin[si] == DDP_ORIGIN_SPEC && spec->set_file[si] &&
            stat(spec->script, &st) < 0 && errno == ENOENT)
            return fail(l, DDP_EXIT_USAGE,
                        ddp_errf(err, -ENOENT,
                                 "%s:%d: script: no such file: '%s' (relative paths are taken from the "
                                 "job spec's directory)",
                                 spec->set_file[si], spec->set_line[si], spec->script));
    }
    if (doctor && !has_program(spec))
        ddp_spec_set(spec, "job", "program", "true", DDP_ORIGIN_DEFAULT, "doctor", NULL); /* checks need none */
    if ((rc = ddp_spec_validate(spec, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, rc);
    if ((!spec->log_dir || !*spec->log_dir) && ((spec->duplicate_stdout_filters && *spec->duplicate_stdout_filters) ||
                                                (spec->duplicate_stderr_filters && *spec->duplicate_stderr_filters)))
        return fail(
            l, DDP_EXIT_USAGE,
            at_key(
                spec, spec->duplicate_stdout_filters ? "dup_stdout_filters" : "dup_stderr_filters",
                ddp_errf(
                    err, -EINVAL,
                    "dup_stdout_filters and dup_stderr_filters copy lines to a file of the run: give log_dir (--log-dir)"),
                err));
    if (spec->log_dir && *spec->log_dir && (rc = ddp_logdir_check(spec->log_dir, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, at_key(spec, "log_dir", rc, err));
    if (l->cmd == DDP_CMD_RUN && (rc = check_program(spec, envp, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, rc);

    /* NCCL: the preset's variables (below explicit ones), then every NCCL/torch variable checked. */
    if (spec->nccl_preset && *spec->nccl_preset &&
        (rc = ddp_nccl_preset_apply(spec->nccl_preset, spec->log_dir, &spec->nccl, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, rc);
    struct ddp_strv warnings = {0};
    rc = ddp_nccl_validate(&spec->nccl, envp, &warnings, err);
    for (size_t i = 0; i < warnings.n && !doctor; i++)
        ddp_warn("%s", warnings.v[i]); /* doctor prints them as its nccl-env check */
    ddp_strv_clear(&warnings);
    if (rc < 0 && !doctor) /* doctor reports it as a failed check */
        return fail(l, DDP_EXIT_USAGE, rc);

    /* The scheduler (scheduler.h: Slurm, LSF, PBS, SkyPilot, ...): nodes, this node's rank, node 0's address,
     * the GPUs it gave and the job's id, unless the command line says otherwise. */
    if ((rc = ddp_launch_scheduler(l, envp, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, rc);
    if (l->sched.warning)
        ddp_warn("%s", l->sched.warning);
    if ((rc = ddp_scheduler_apply(&l->sched, spec, err)) < 0)
        return fail(l, DDP_EXIT_USAGE, rc);
    return 0;
}

const char *ddp_launch_topology_path(const struct ddp_cli *cli, char *const *envp)
{
    const char *path = cli->topology ? cli->topology : ddp_env_get(envp, "DDPLAUNCH_TOPOLOGY");
    return path && *path ? path : NULL;
}

/* Whether the spec's workers may use GPUs (not nproc_per_node = cpu, not [gpus] select = none). */
static bool spec_wants_gpus(const struct ddp_spec *spec)
{
    return spec->nproc_per_node.kind != DDP_NPROC_CPU &&
           !(spec->gpus_select.n == 1 && strcmp(spec->gpus_select.v[0], "none") == 0);
}

bool ddp_launch_wants_gpus(const struct ddp_launch *l)
{
    return l->topo && ddp_topo_ngpus(l->topo) > 0 && spec_wants_gpus(&l->spec);
}

int ddp_launch_load_topology(struct ddp_launch *l, const char *path, bool required, char *const *envp,
                             struct ddp_err *err)
{
    /* run and plan use the topology cache. A job without GPUs never loads NVML (no library, no /dev/nvidia*,
     * no thread). For GPU workers, plan and the busy = skip and fail launches need the GPUs' holders now (the
     * busy check: gpus.h): /proc first, NVML's memory in use and holders only when /proc cannot say that no
     * other process holds a GPU (holders.h; a memory limit always reads NVML); a busy = warn launch reads them
     * beside the spawn (ddp_gpus_check_start). DDPLAUNCH_TOPOLOGY_PROC (tests) names the /proc to scan.
     * topo and doctor report the machine as it is now (and refresh the cache). DDPLAUNCH_TOPOLOGY_NVML=1 reads
     * NVML for an XML topology too (the tests' fake NVML). */
    bool report = l->cmd == DDP_CMD_TOPO || l->cmd == DDP_CMD_DOCTOR;
    const struct ddp_spec *spec = &l->spec;
    bool want_gpus = spec_wants_gpus(spec);
    bool mem_limit = spec->gpus_max_memory_used.bytes || spec->gpus_max_memory_used.percent; /* chooses by it */
    const char *xml_nvml = ddp_env_get(envp, "DDPLAUNCH_TOPOLOGY_NVML");
    const char *proc_root = ddp_env_get(envp, "DDPLAUNCH_TOPOLOGY_PROC");
    struct ddp_topo_opts o = {
        .xml_path = path,
        .envp = envp,
        .refresh = report,
        .gpu_usage = want_gpus && !ddp_gpus_check_beside(spec, l->cmd == DDP_CMD_RUN),
        .xml_nvml = xml_nvml && strcmp(xml_nvml, "1") == 0,
        .no_nvml = !want_gpus && !report,
        .holders_first = !mem_limit,
        .proc_root = proc_root && *proc_root ? proc_root : NULL,
    };
    int rc = ddp_topo_load_opts(&o, &l->topo, err);
    if (rc < 0) {
        l->topo = NULL;
        if (required || path)
            return fail(l, path ? DDP_EXIT_USAGE : DDP_EXIT_LAUNCHER, rc);
        /* Needed for GPUs and binding; without it the job still runs, unbound. */
        ddp_warn("topology unavailable, workers will not be bound: %s", err->msg);
    }
    return 0;
}

/* ---- resolve (pure) ---- */

char **ddp_launch_holders(const struct ddp_topo *topo, const struct ddp_lease_info *leases, size_t nleases, pid_t self)
{
    if (!topo)
        return NULL;
    size_t ngpus = ddp_topo_ngpus(topo);
    char **holders = ddp_xcalloc(ngpus + 1, sizeof *holders);
    for (size_t i = 0; i < nleases; i++) {
        int g = ddp_topo_gpu_find(topo, leases[i].busid);
        if (g < 0 || leases[i].pid == self)
            continue;
        free(holders[g]);
        holders[g] = ddp_xasprintf("%s '%s' (pid %d, user %s, command %s)",
                                   leases[i].ddplaunch ? "job" : "a process that is no ddplaunch job, job",
                                   leases[i].job[0] ? leases[i].job : "?", (int)leases[i].pid,
                                   leases[i].user[0] ? leases[i].user : "?", leases[i].comm[0] ? leases[i].comm : "?");
    }
    return holders;
}

void ddp_launch_holders_free(char **holders, size_t n)
{
    for (size_t i = 0; holders && i < n; i++)
        free(holders[i]);
    free(holders);
}

static char *run_id_of(const struct ddp_spec *spec, const struct ddp_scheduler *sched, const struct ddp_launch_facts *f)
{
    if (spec->run_id && *spec->run_id && strcmp(spec->run_id, "none") != 0)
        return ddp_xstrdup(spec->run_id);
    if (sched->name && sched->job_id && *sched->job_id)
        return ddp_xasprintf("%s-%s", sched->name, sched->job_id); /* "slurm-1234": the same on every node */
    if (spec->nnodes.max > 1)
        return ddp_xstrdup("none"); /* as torchrun: the same on every node without anything to agree on */
    return ddp_xstrdup(f->random_id);
}

/* Workers on this node: nproc_per_node as a number, one per usable GPU (gpu, auto), one per CPU (cpu, auto
 * without GPUs). */
static int resolve_nproc(struct ddp_launch *l, const struct ddp_launch_facts *f, struct ddp_err *err)
{
    const struct ddp_spec *spec = &l->resolved;
    switch (spec->nproc_per_node.kind) {
    case DDP_NPROC_INT:
        return spec->nproc_per_node.n;
    case DDP_NPROC_GPU:
    case DDP_NPROC_AUTO: {
        struct ddp_place_req req;
        ddp_plan_place_req(&l->ctx.job, &l->ctx.gpus, 1, &req);
        int usable = l->topo && req.want_gpus ? ddp_place_count_usable(l->topo, &req) : 0;
        if (usable > 0)
            return usable;
        if (spec->nproc_per_node.kind == DDP_NPROC_GPU && l->cmd == DDP_CMD_DOCTOR)
            return 1; /* the gpus check explains what is missing */
        if (spec->nproc_per_node.kind == DDP_NPROC_GPU)
            return ddp_errf(err, -ENODEV,
                            "nproc_per_node = gpu, but no usable GPU was found%s (for CPU workers give cpu, auto "
                            "or a number)",
                            l->topo ? "" : " (no topology)");
    } /* fall through: auto without GPUs = one per CPU */
    /* FALLTHROUGH */
    case DDP_NPROC_CPU: {
        long n = l->topo ? ddp_topo_ncpus(l->topo) : f->online_cpus;
        return n > 0 ? (int)n : 1;
    }
    }
    return 1;
}

/* Several nodes: how the agents meet (rdzv.h), and master_port: reserved on node 0, derived from the scheduler's
 * job id on the others (auto), as given, or (c10d) reserved by the agent that serves the rendezvous and sent to the
 * others. */
/* The master port and where it comes from: the one writer of ctx.master_port and port_source (port 0 while
 * acquire has yet to reserve it, or while node 0 has yet to send it). */
static void port_decided(struct ddp_launch *l, enum ddp_launch_port source, int port)
{
    l->port_source = source;
    l->ctx.master_port = port;
}

static int resolve_port(struct ddp_launch *l, struct ddp_err *err)
{
    struct ddp_spec *spec = &l->resolved;
    struct ddp_plan_ctx *ctx = &l->ctx;
    struct ddp_rdzv rdzv;
    int rc = ddp_rdzv_decide(spec, ctx->nnodes > 1 && l->sched.rendezvous ? l->sched.name : NULL, &rdzv, err);
    if (rc < 0)
        return rc;
    ctx->coord.rdzv_source = rdzv.source;
    ctx->coord.dynamic = rdzv.dynamic;
    ctx->coord.node = ctx->node_rank;
    ctx->coord.listen_fd = -1;
    ctx->coord.join_timeout_ms = rdzv.join_timeout_ms;
    ctx->coord.last_call_ms = rdzv.last_call_ms;
    ctx->coord.lost_after_ms = rdzv.lost_after_ms;
    if (rdzv.note && l->cmd == DDP_CMD_RUN)
        ddp_info("%s", rdzv.note);
    if (rdzv.etcd && rdzv.several) {
        /* Through etcd: every agent reserves a MASTER_PORT of its own, used when it is group rank 0. */
        ctx->coord.etcd_endpoints = spec->rdzv_endpoint;
        ctx->coord.node = DDP_COORD_ANY_RANK;
        ctx->node_rank = 0;
        port_decided(l, DDP_LAUNCH_PORT_RESERVE, 0);
        return 0;
    }
    if (rdzv.dynamic) {
        /* The endpoint's port is the rendezvous; MASTER_PORT is node 0's to choose. Whether this agent serves
         * is decided by acquire (it must try the address and the port). */
        ctx->coord.port = spec->master_port.is_auto ? DDP_RDZV_C10D_PORT : spec->master_port.port;
        ctx->node_rank = 0;
        ddp_port_spec_parse("auto", &spec->master_port, NULL);
        port_decided(l, DDP_LAUNCH_PORT_RESERVE, 0);
        return 0;
    }
    if (rdzv.several && spec->master_port.is_auto && !l->sched.key_job)
        ddp_port_spec_parse("29500", &spec->master_port, NULL); /* torchrun's default for several nodes */
    if (ctx->node_rank != 0 && spec->master_port.is_auto) {
        /* Node 0 reserves the port; the others compute the same one from the job id. */
        int port = ddp_scheduler_port(&l->sched, spec->master_port.lo, spec->master_port.hi);
        if (port <= 0)
            return ddp_errf(
                err, -EINVAL,
                "master_port = auto on node %d needs a scheduler's job id (Slurm, LSF, PBS: to derive node 0's "
                "port); "
                "give every node the same --master-port",
                ctx->node_rank);
        port_decided(l, DDP_LAUNCH_PORT_DERIVED, port);
    } else if (ctx->node_rank == 0) {
        port_decided(l, DDP_LAUNCH_PORT_RESERVE, 0);
    } else {
        port_decided(l, DDP_LAUNCH_PORT_GIVEN, spec->master_port.port);
    }
    return 0;
}

int ddp_launch_resolve(struct ddp_launch *l, const struct ddp_launch_facts *f, struct ddp_err *err)
{
    struct ddp_spec *spec = &l->resolved;
    struct ddp_plan_ctx *ctx = &l->ctx;

    free(l->resolved_name);
    l->resolved_name = NULL;
    l->resolved = l->spec; /* shares its memory; only values of its own are changed below */

    free(l->run_id);
    free(l->python);
    l->run_id = run_id_of(spec, &l->sched, f);
    snprintf(l->hostname, sizeof l->hostname, "%s", f->hostname);
    const char *python_why = NULL;
    l->python = ddp_xstrdup(ddp_plan_python(f->envp, f->env_python, f->torchrun_python, f->path_python, &python_why));
    *ctx = (struct ddp_plan_ctx){
        .job = {.spec = spec, .base_env = f->envp, .hostname = l->hostname, .run_id = l->run_id, .topo = l->topo},
        .python = l->python,
        .python_why = python_why,
        .console_tty = {f->console_tty[0], f->console_tty[1]},
        .gpus = {.inherited_cvd = l->sched.gpus_local ? NULL : ddp_env_get(f->envp, "CUDA_VISIBLE_DEVICES"),
                 .sched = l->sched.gpus},
        .sched = {.mem_kib = l->sched.mem_kib,
                  .signals_all = l->sched.name && strcmp(l->sched.name, "slurm") == 0,
                  .step = l->sched.step_signals},
        .nnodes = spec->nnodes.max,
        .node_rank = spec->node_rank,
        .master_addr = spec->standalone ? "127.0.0.1" : spec->master_addr,
    };
    int n = resolve_nproc(l, f, err);
    if (n < 0)
        return fail(l, DDP_EXIT_USAGE, n);
    ctx->nproc = n;

    /* Derived defaults the spec leaves open. */
    spec->min_nproc_per_node = ddp_policy_min_nproc(spec, ctx->nproc);
    if (!spec->name || !*spec->name) {
        const char *prog = spec->command.n ? spec->command.v[0]
                           : spec->script  ? spec->script
                           : spec->module  ? spec->module
                                           : spec->program;
        const char *slash = strrchr(prog, '/');
        l->resolved_name = ddp_xstrdup(slash ? slash + 1 : prog);
        spec->name = l->resolved_name;
    }

    /* GPU leases: concurrent jobs on this host without a scheduler get disjoint GPUs. */
    struct ddp_place_req req;
    ddp_plan_place_req(&ctx->job, &ctx->gpus, ctx->nproc, &req);
    l->lease = l->cmd == DDP_CMD_RUN && l->topo && req.want_gpus && ddp_topo_ngpus(l->topo) > 0 &&
               (spec->gpus_lease == DDP_YES || (spec->gpus_lease == DDP_AUTO && !l->sched.allocates_gpus));
    ddp_launch_holders_free(l->holders, l->nholders);
    l->holders = NULL;
    l->nholders = 0;
    if (!l->lease && l->topo) {
        l->holders = ddp_launch_holders(l->topo, f->leases, f->nleases, f->self);
        l->nholders = ddp_topo_ngpus(l->topo);
    }
    ctx->gpus.holders = (const char *const *)l->holders;

    if (spec->master_port.is_auto && l->sched.key_job) { /* doctor says where the port comes from */
        snprintf(l->port_job, sizeof l->port_job, "%s job %s", l->sched.name, l->sched.job_id ? l->sched.job_id : "?");
        ctx->port_job = l->port_job;
        ctx->port_job_first = ddp_scheduler_port(&l->sched, spec->master_port.lo, spec->master_port.hi);
    }
    if (l->cmd == DDP_CMD_DOCTOR) {
        port_decided(l, DDP_LAUNCH_PORT_NONE, spec->master_port.is_auto ? 0 : spec->master_port.port);
        return 0;
    }
    int rc = resolve_port(l, err);
    return rc < 0 ? fail(l, DDP_EXIT_USAGE, rc) : 0;
}

/* ---- acquire ---- */

/* NCCL 2.24+ runs a RAS thread in every rank, listening on localhost:28028 unless NCCL_RAS_ADDR says otherwise: two
 * jobs on one host would share it. This job gets its own port, reserved host-wide as MASTER_PORT is (a lock per
 * port), unless NCCL_RAS_ADDR is set or RAS is off (NCCL_RAS_ENABLE=0); with no free port it runs on NCCL's
 * default. */
static void reserve_ras_port(struct ddp_launch *l, char *const *envp)
{
    if (!ddp_launch_wants_gpus(l)) /* no NCCL: a thousand agents of a CPU job would search the range in turn */
        return;
    const char *set = ddp_env_get(envp, "NCCL_RAS_ADDR"), *on = ddp_env_get(envp, "NCCL_RAS_ENABLE");
    if ((set && *set) || (on && strcmp(on, "0") == 0))
        return;
    char *ephemeral = ddp_port_ephemeral_range();
    struct ddp_port_req preq = {
        .lock_dir = ddp_rundir_lock_dir(envp), .addr = "localhost", .ephemeral_range = ephemeral};
    struct ddp_err e = {0};
    int got = 0;
    ddp_port_spec_parse(DDP_PORT_RAS_RANGE, &preq.spec, NULL);
    if (ddp_port_reserve(&preq, &l->ras_port, &got, &e) == 0)
        l->ctx.ras_port = got;
    free(ephemeral);
}

static int reserve_port(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    const struct ddp_spec *spec = &l->resolved;
    char *ephemeral = ddp_port_ephemeral_range();
    struct ddp_port_req preq = {
        .lock_dir = ddp_rundir_lock_dir(envp),
        .addr = l->ctx.master_addr,
        .spec = spec->master_port,
        .ephemeral_range = ephemeral,
    };
    if (l->sched.key_job) {
        preq.job_key = l->sched.key_job;
        preq.job_step_key = l->sched.key_step;
        preq.max_candidates = l->ctx.nnodes > 1 ? 1 : 0;
    }
    int got = 0;
    int rc = ddp_port_reserve(&preq, &l->port, &got, err);
    free(ephemeral);
    port_decided(l, DDP_LAUNCH_PORT_RESERVE, rc < 0 ? 0 : got);
    if (rc == -EADDRINUSE && l->ctx.nnodes > 1 && spec->node_rank == 0 && !l->ctx.coord.dynamic &&
        !l->sched.rendezvous) {
        /* a second agent of a static job as node 0 (often without --node-rank: torchrun's default is 0) */
        char *why = ddp_xstrdup(err->msg), *cut = strstr(why, "; use master_port");
        if (cut)
            *cut = '\0';
        char ranks[32] = "1";
        if (l->ctx.nnodes > 2)
            snprintf(ranks, sizeof ranks, "1 to %d", l->ctx.nnodes - 1);
        rc = ddp_errf(err, rc, "node rank 0 is taken (%s): start this node with --node-rank %s", why, ranks);
        free(why);
    }
    if (rc < 0)
        return fail(l, rc == -EADDRINUSE && !spec->master_port.is_auto ? DDP_EXIT_USAGE : DDP_EXIT_LAUNCHER, rc);
    reserve_ras_port(l, envp);
    return 0;
}

/* ddp_lease_acquire's chooser: the placement this job would make with the GPUs other jobs hold (held[]) left
 * out (placement then says "in use by another job", not "left out"). */
static int choose_gpus(void *arg, const char *const *held, size_t nheld, struct ddp_strv *chosen, struct ddp_err *err)
{
    const struct ddp_plan_ctx *ctx = arg;
    size_t ngpus = ddp_topo_ngpus(ctx->job.topo);
    const char **holders = ddp_xcalloc(ngpus + 1, sizeof *holders);
    struct ddp_place_req req;
    struct ddp_placement pl = {0};

    ddp_plan_place_req(&ctx->job, &ctx->gpus, ctx->nproc, &req);
    int usable_all = ddp_place_count_usable(ctx->job.topo, &req), needed = ddp_place_count_gpus(ctx->job.topo, &req);
    for (size_t i = 0; i < nheld; i++) {
        int g = ddp_topo_gpu_find(ctx->job.topo, held[i]);
        if (g >= 0)
            holders[g] = "another ddplaunch job";
    }
    req.holders = holders;
    int rc = ddp_place_ranks(ctx->job.topo, &req, &pl, err);
    free(holders);
    if (rc < 0)
        return usable_all >= needed && nheld > 0 ? -ENODEV : rc; /* -ENODEV: wait for the held ones */
    for (size_t r = 0; r < pl.nranks; r++) {
        const char *b = pl.ranks[r].busid;
        bool dup = false;
        for (size_t j = 0; b && j < chosen->n; j++)
            dup |= strcmp(chosen->v[j], b) == 0;
        if (b && !dup)
            ddp_strv_push(chosen, b);
    }
    ddp_place_free(&pl);
    return 0;
}

static int lease_gpus(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    size_t ngpus = ddp_topo_ngpus(l->topo);
    const char **all = ddp_xcalloc(ngpus + 1, sizeof *all);
    for (size_t g = 0; g < ngpus; g++)
        all[g] = ddp_topo_gpu_busid(l->topo, g);
    struct ddp_strv chosen = {0};
    int rc = ddp_lease_acquire(ddp_rundir_lock_dir(envp), all, ngpus, choose_gpus, &l->ctx, l->resolved.name,
                               l->resolved.gpus_lease_wait_ms, &l->gpus, &chosen, err);
    free(all);
    if (rc < 0) {
        ddp_strv_clear(&chosen);
        return fail(l, rc == -EBUSY ? DDP_EXIT_TEMPFAIL : DDP_EXIT_USAGE, rc); /* -EBUSY: leased by other jobs */
    }
    /* Later attempts (downsizing) choose only among the GPUs this job leased. */
    ddp_launch_holders_free(l->holders, l->nholders);
    l->holders = ddp_xcalloc(ngpus + 1, sizeof *l->holders);
    l->nholders = ngpus;
    for (size_t g = 0; g < ngpus; g++) {
        bool mine = false;
        for (size_t j = 0; j < chosen.n; j++)
            mine |= ddp_topo_gpu_find(l->topo, chosen.v[j]) == (int)g;
        if (!mine)
            l->holders[g] = ddp_xstrdup("not leased by this job");
    }
    l->ctx.gpus.holders = (const char *const *)l->holders;
    l->ctx.gpus.lease_dir = ddp_rundir_lock_dir(envp);
    ddp_strv_clear(&chosen);
    return 0;
}

/* A fresh private directory for this launch (heartbeat files, error files, the timer FIFO): rundir.c makes it
 * with mkdtemp, owner checked, no symlinks, and sweeps what SIGKILLed launches of this user left. Without one,
 * a job that asks for heartbeat files or the timer FIFO is refused (exit 2): hang detection must not be off
 * silently; other jobs go on with a warning. */
static int make_run_dir(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    struct ddp_err e = {0};
    l->ctx.job.sweep_leftovers = ddp_rundir_sweep(envp, getuid(), 60) != -EALREADY;
    if (ddp_rundir_run_create(envp, getuid(), &l->run_dir, &l->run_dir_lock, &e) < 0) {
        l->run_dir = NULL;
        bool hb = l->resolved.heartbeat == DDP_HEARTBEAT_FILE && l->resolved.timeout_stall_ms > 0;
        if (hb || l->resolved.timer_file) {
            l->fail_status = DDP_EXIT_USAGE;
            return ddp_errf(err, e.code, "%s; needed for %s: set XDG_RUNTIME_DIR to a private directory", e.msg,
                            hb ? "[timeout] heartbeat = file" : "[timeout] timer_file");
        }
        ddp_warn("no runtime directory, so no heartbeat files: %s", e.msg);
    }
    l->ctx.watch.run_dir = l->run_dir;
    /* live stack sampling: the sitecustomize the workers load; warm restart's standbys load it too (standby.h) */
    bool warm = l->resolved.restart_warm != DDP_NO && l->resolved.max_restarts > 0 && !l->resolved.program;
    if ((l->resolved.timeout_sample || warm) && l->run_dir) {
        if (ddp_watch_install(l->run_dir, &l->sample_pydir, &l->ctx.watch.sample_signal, &e) < 0) {
            if (l->resolved.timeout_sample)
                ddp_warn("no live stack sampling: %s", e.msg);
            l->resolved.timeout_sample = false;
        }
        l->ctx.watch.sample_pydir = l->sample_pydir;
    }
    if (l->resolved.timer_file && l->run_dir) {
        l->timer_path = ddp_xasprintf("%s/timer", l->run_dir); /* the FIFO torch's FileTimerClient writes to */
        l->ctx.watch.timer_file = l->timer_path;
    }
    return 0;
}

/* `plan` makes no run directory: the variables that name it (heartbeat and stacks files, PYTHONPATH's sampler
 * entry, the timer FIFO, the attempt directory) show "<run dir>" in its place, so plan lists every variable a
 * worker gets, by the rules a run uses. */
static void plan_run_dir(struct ddp_launch *l)
{
    l->ctx.watch.run_dir = "<run dir>";
    if (l->resolved.timeout_sample) {
        ddp_watch_where(l->ctx.watch.run_dir, &l->sample_pydir, &l->ctx.watch.sample_signal);
        l->ctx.watch.sample_pydir = l->sample_pydir;
    }
    if (l->resolved.timer_file) {
        l->timer_path = ddp_xasprintf("%s/timer", l->ctx.watch.run_dir);
        l->ctx.watch.timer_file = l->timer_path;
    }
}

/* Reserve port explicitly against other ddplaunch jobs on this host (its lock, and a bind test). */
static int reserve_exact(struct ddp_launch *l, char *const *envp, int port, bool quiet, struct ddp_port_resv **resv,
                         struct ddp_err *err)
{
    struct ddp_port_req preq = {.lock_dir = ddp_rundir_lock_dir(envp), .addr = l->ctx.master_addr, .quiet = quiet};
    int got = 0;
    preq.spec.port = port;
    return ddp_port_reserve(&preq, resv, &got, err);
}

/* c10d-style rendezvous: serve the endpoint when its address is this host's and its port is free (reserved
 * against other ddplaunch jobs, then listened on): node 0; else join, and get a node rank and MASTER_PORT from
 * the serving agent. */
static int serve_or_join(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    struct ddp_plan_ctx *ctx = &l->ctx;
    int fd = -1;
    int rc = ddp_coord_listen(ctx->master_addr, 0, &fd, err); /* is the address one of this host's? */
    if (rc == 0) {
        close(fd);
        rc = reserve_exact(l, envp, ctx->coord.port, true, &l->coord_port, err);
        if (rc == 0)
            rc = ddp_coord_listen(ctx->master_addr, ctx->coord.port, &l->listen_fd, err);
    }
    if (rc == -EADDRNOTAVAIL || rc == -EADDRINUSE) { /* not this host, or another agent here serves: join it */
        memset(err, 0, sizeof *err);                 /* not an error: nothing to report at exit */
        ctx->coord.node = DDP_COORD_ANY_RANK;
        port_decided(l, DDP_LAUNCH_PORT_SENT, 0);
        return 0;
    }
    if (rc < 0)
        return fail(l, DDP_EXIT_LAUNCHER, rc);
    ctx->coord.node = 0;
    ctx->coord.listen_fd = l->listen_fd;
    return 0;
}

int ddp_launch_acquire(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    int rc;
    if (l->ctx.coord.dynamic && !l->ctx.coord.etcd_endpoints && l->cmd == DDP_CMD_RUN &&
        (rc = serve_or_join(l, envp, err)) < 0)
        return rc;
    if (l->port_source == DDP_LAUNCH_PORT_RESERVE && (rc = reserve_port(l, envp, err)) < 0)
        return rc;
    if (l->lease && (rc = lease_gpus(l, envp, err)) < 0)
        return rc;
    if (l->cmd == DDP_CMD_PLAN)
        plan_run_dir(l);
    else if ((rc = make_run_dir(l, envp, err)) < 0)
        return rc;
    /* torchrun's layout LOG_DIR/<run_id>_XXXXXXXX/attempt_N/RANK: a fresh run directory each launch */
    if (l->cmd == DDP_CMD_RUN && l->resolved.log_dir) {
        /* several nodes sharing one file system: the node's rank in its run directory's name (issue 54) */
        char named[256];
        if (l->ctx.nnodes > 1 && l->ctx.node_rank >= 0)
            snprintf(named, sizeof named, "%s_node%d", l->run_id, l->ctx.node_rank);
        else
            snprintf(named, sizeof named, "%s", l->run_id);
        if ((rc = ddp_logdir_make(l->resolved.log_dir, named, l->resolved.trust_log_dir, &l->logdir, err)) < 0) {
            l->fail_status = DDP_EXIT_USAGE;
            return at_key(&l->resolved, "log_dir", rc, err);
        }
        ddp_info("logs in %s", ddp_logdir_path(l->logdir));
        l->ctx.job.logdir = l->logdir;
    }
    return 0;
}

int ddp_launch_acquire_secret(struct ddp_launch *l, char *const *envp, struct ddp_err *err)
{
    struct ddp_plan_ctx *ctx = &l->ctx;
    const struct ddp_spec *spec = &l->resolved;
    if (ctx->nnodes <= 1)
        return 0;
    /* Several nodes: the agents coordinate over an authenticated control channel: on the c10d endpoint's port,
     * or on master_port + 1 (static), reserved like master_port on node 0. */
    if (!ctx->coord.dynamic && !ctx->coord.etcd_endpoints) {
        ctx->coord.port = ctx->master_port + 1;
        int rc = ctx->node_rank == 0 ? reserve_exact(l, envp, ctx->coord.port, false, &l->coord_port, err) : 0;
        if (rc < 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return fail(l, rc == -EADDRINUSE ? DDP_EXIT_USAGE : DDP_EXIT_LAUNCHER,
                        ddp_errf(err, rc, "control port (master_port + 1): %s", msg));
        }
    }
    int rc = ddp_token_job_secret(spec, envp, l->sched.job_id ? l->sched.job_id : l->run_id, &l->secret, err);
    if (rc < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return fail(l, DDP_EXIT_USAGE, ddp_errf(err, rc, "job secret: %s", msg));
    }
    struct ddp_strv job_argv = {0}; /* what runs: the same on every node of one job */
    if (spec->command.n)
        ddp_strv_copy(&job_argv, &spec->command);
    else
        ddp_strv_pushf(&job_argv, "%s %s",
                       spec->script   ? "script"
                       : spec->module ? "module"
                                      : "program",
                       spec->script   ? spec->script
                       : spec->module ? spec->module
                                      : spec->program);
    for (size_t i = 0; i < spec->args.n; i++)
        ddp_strv_push(&job_argv, spec->args.v[i]);
    ddp_rdzv_identity(l->run_id, (const char *const *)job_argv.v, l->job);
    ddp_strv_clear(&job_argv);
    ctx->coord.secret = l->secret;
    ctx->coord.job = l->job;
    ctx->coord.min_nnodes = spec->nnodes.min > 0 ? spec->nnodes.min : ctx->nnodes;
    return 0;
}
