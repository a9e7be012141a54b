/* scheduler: the schedulers and launchers that started this agent, one row each. See scheduler.h. */
#include "nodes/scheduler.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/port.h"
#include "nodes/slurm.h"

/* NAME as a whole number in [min, max] into *out: 1; absent: 0; malformed: -EINVAL with err. */
static int env_num(char *const *envp, const char *name, long long min, long long max, int *out, struct ddp_err *err)
{
    const char *v = ddp_env_get(envp, name);
    long long n;
    if (!v)
        return 0;
    if (ddp_parse_int(v, min, max, &n) < 0)
        return ddp_errf(err, -EINVAL, "%s=%s: expected a whole number from %lld to %lld", name, v, min, max);
    *out = (int)n;
    return 1;
}

/* Slurm (slurm.c reads it): in an srun step the nodes, this node's rank and node 0's host; in any Slurm job its
 * GPUs and the job and step ids (ports, run ids, the job secret). */
static int slurm(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    struct ddp_slurm sl;
    int rc = ddp_slurm_detect(envp, o->slurm, &sl, err);
    if (rc < 0)
        return rc;
    if (!sl.active) {
        ddp_slurm_free(&sl);
        return 0;
    }
    s->name = "slurm";
    s->vars = "SLURM_STEP_NUM_NODES, SLURM_NODEID, SLURM_STEP_NODELIST";
    s->sets_nodes = sl.is_step;
    s->nnodes = sl.nnodes;
    s->node_rank = sl.node_rank;
    s->master_addr = sl.master_addr ? ddp_xstrdup(sl.master_addr) : NULL;
    s->where[0] = "SLURM_STEP_NUM_NODES";
    s->where[1] = "SLURM_NODEID";
    s->where[2] = "SLURM_STEP_NODELIST";
    s->job_id = sl.job_id ? ddp_xstrdup(sl.job_id) : NULL;
    s->key_job = sl.job_id_num;
    s->key_step = sl.step_id_num;
    s->gpus = sl.gpus ? ddp_xstrdup(sl.gpus) : NULL;
    s->allocates_gpus = true;
    s->gpus_local = sl.gpus_local;
    s->mem_kib = sl.mem_kib;
    s->step_signals = sl.is_step;
    s->warning = sl.warning ? ddp_xstrdup(sl.warning) : NULL;
    ddp_slurm_free(&sl);
    return 1;
}

/* The leading number of a job id ("4567.pbs01" -> 4567), 0 when there is none. */
static unsigned long long job_number(const char *id)
{
    unsigned long long n = 0;
    for (; id && isdigit((unsigned char)*id) && n < (1ULL << 56); id++)
        n = n * 10 + (unsigned long long)(*id - '0');
    return n;
}

/* Whether host names a and b are the same host: equal, or equal up to the first dot of either (a scheduler's
 * short name against a fully qualified hostname). */
static bool same_host(const char *a, const char *b)
{
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");
    return strcmp(a, b) == 0 || (la == lb && strncmp(a, b, la) == 0);
}

/* The distinct hosts of a list in first-seen order into s (nnodes, master_addr = the first, node_rank = this
 * host's place). words: the list split on white space (LSF) or lines (PBS); counted: every second word is a
 * slot count (LSB_MCPU_HOSTS). 0, or -EINVAL with err naming var. */
static int host_list(struct ddp_scheduler *s, const char *list, bool counted, const char *var, const char *hostname,
                     struct ddp_err *err)
{
    struct ddp_strv hosts = {0};
    const char *p = list;
    int word = 0;
    while (*p) {
        p += strspn(p, " \t\r\n");
        size_t n = strcspn(p, " \t\r\n");
        if (n == 0)
            break;
        if (!counted || word % 2 == 0) {
            char *h = ddp_xstrndup(p, n);
            bool seen = false;
            for (size_t i = 0; i < hosts.n && !seen; i++)
                seen = strcmp(hosts.v[i], h) == 0;
            if (!seen)
                ddp_strv_push(&hosts, h);
            free(h);
        }
        word++;
        p += n;
    }
    if (hosts.n == 0) {
        ddp_strv_clear(&hosts);
        return ddp_errf(err, -EINVAL, "%s: no host in its list", var);
    }
    s->nnodes = (int)hosts.n;
    s->master_addr = ddp_xstrdup(hosts.v[0]);
    s->node_rank = -1;
    for (size_t i = 0; hostname && i < hosts.n && s->node_rank < 0; i++)
        if (same_host(hosts.v[i], hostname))
            s->node_rank = (int)i;
    ddp_strv_clear(&hosts);
    if (s->node_rank < 0) /* said by apply, unless the command line gives the rank */
        s->not_listed = ddp_xasprintf("%s: this host (%s) is not in the job's host list; give --node-rank", var,
                                      hostname ? hostname : "?");
    return 0;
}

/* IBM LSF: `blaunch` (or a wrapper) runs one ddplaunch per host of the job; LSB_MCPU_HOSTS ("hostA 4 hostB 4")
 * or LSB_HOSTS (one word per slot) lists the hosts in order, the first is node 0. */
static int lsf(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    const char *id = ddp_env_get(envp, "LSB_JOBID");
    if (!id || !*id)
        return 0;
    const char *mcpu = ddp_env_get(envp, "LSB_MCPU_HOSTS"), *hosts = ddp_env_get(envp, "LSB_HOSTS");
    s->name = "lsf";
    s->job_id = ddp_xstrdup(id);
    s->key_job = job_number(id);
    if (!(mcpu && *mcpu) && !(hosts && *hosts))
        return 1; /* a job without a host list: its id only */
    s->sets_nodes = !o->dynamic_rdzv;
    s->vars = mcpu && *mcpu ? "LSB_MCPU_HOSTS" : "LSB_HOSTS";
    int rc = host_list(s, mcpu && *mcpu ? mcpu : hosts, mcpu && *mcpu, s->vars, o->hostname, err);
    return rc < 0 ? rc : 1;
}

/* PBS Pro and Torque: PBS_NODEFILE lists one line per slot, hosts in order, the first is node 0; `pbsdsh -u`
 * gives each host's PBS_NODENUM. */
static int pbs(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    const char *id = ddp_env_get(envp, "PBS_JOBID");
    if (!id || !*id)
        return 0;
    s->name = "pbs";
    s->job_id = ddp_xstrdup(id);
    s->key_job = job_number(id);
    const char *path = ddp_env_get(envp, "PBS_NODEFILE");
    if (!path || !*path)
        return 1;
    s->sets_nodes = !o->dynamic_rdzv;
    s->vars = "PBS_NODEFILE";
    struct ddp_buf text = {0};
    int rc = ddp_read_regular(path, 1 << 20, &text);
    if (rc < 0) {
        ddp_buf_free(&text);
        return ddp_errf(err, -EINVAL, "PBS_NODEFILE=%s: cannot read it: %s", path, strerror(-rc));
    }
    int num = -1;
    rc = host_list(s, text.data ? text.data : "", false, "PBS_NODEFILE", o->hostname, err);
    ddp_buf_free(&text);
    if (rc < 0 || (rc = env_num(envp, "PBS_NODENUM", 0, 1 << 20, &num, err)) < 0)
        return rc;
    if (rc == 1) { /* pbsdsh said this host's number, whatever its name in the file */
        s->node_rank = num;
        s->vars = "PBS_NODEFILE, PBS_NODENUM";
        free(s->not_listed);
        s->not_listed = NULL;
    }
    return 1;
}

static int skypilot(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    (void)o;
    int rc = env_num(envp, "SKYPILOT_NODE_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "skypilot";
    s->sets_nodes = true;
    s->vars = "SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS";
    if ((rc = env_num(envp, "SKYPILOT_NUM_NODES", 1, 1 << 20, &s->nnodes, err)) < 0 ||
        (rc = env_num(envp, "SKYPILOT_NUM_GPUS_PER_NODE", 0, 1 << 16, &s->gpus_per_node, err)) < 0)
        return rc;
    const char *ips = ddp_env_get(envp, "SKYPILOT_NODE_IPS"); /* one per line, the head node's first */
    if (ips) {
        while (*ips == '\n' || *ips == ' ')
            ips++;
        size_t n = strcspn(ips, "\n ");
        if (n > 0)
            s->master_addr = ddp_xstrndup(ips, n);
    }
    return 1;
}

static int flux(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    (void)o;
    int size = 0, rc = env_num(envp, "FLUX_TASK_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "flux";
    s->sets_nodes = true;
    s->vars = "FLUX_TASK_RANK, FLUX_JOB_SIZE, FLUX_JOB_NNODES";
    if ((rc = env_num(envp, "FLUX_JOB_NNODES", 1, 1 << 20, &s->nnodes, err)) < 0 ||
        (rc = env_num(envp, "FLUX_JOB_SIZE", 1, 1 << 20, &size, err)) < 0)
        return rc;
    if (size && s->nnodes && size != s->nnodes)
        return ddp_errf(err, -EINVAL,
                        "flux: %d tasks on %d nodes (FLUX_JOB_SIZE, FLUX_JOB_NNODES): run one "
                        "ddplaunch per node (flux run -N%d -n%d ddplaunch ...); it starts the workers",
                        size, s->nnodes, s->nnodes, s->nnodes);
    return 1;
}

static int openmpi(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    (void)o;
    int local = 0, rc = env_num(envp, "OMPI_COMM_WORLD_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "openmpi";
    s->sets_nodes = true;
    s->vars = "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE";
    if ((rc = env_num(envp, "OMPI_COMM_WORLD_SIZE", 1, 1 << 20, &s->nnodes, err)) < 0 ||
        (rc = env_num(envp, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1 << 20, &local, err)) < 0)
        return rc;
    if (local > 1)
        return ddp_errf(err, -EINVAL,
                        "mpirun started %d ddplaunch on this node (OMPI_COMM_WORLD_LOCAL_SIZE): run "
                        "one per node (mpirun -N 1 ddplaunch ...); it starts the workers",
                        local);
    return 1;
}

static int pmix(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s, struct ddp_err *err)
{
    (void)o;
    int rc = env_num(envp, "PMIX_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "pmix";
    s->sets_nodes = true;
    s->vars = "PMIX_RANK";
    return 1;
}

/* Kubernetes: an indexed Job's pod has JOB_COMPLETION_INDEX; under JobSet (with JOBSET_NAME,
 * REPLICATED_JOB_NAME and JOB_INDEX passed down from its labels) node 0 is the pod
 * <jobset>-<replicated job>-0-0, reachable as <that>.<jobset> (JobSet's default subdomain). */
static int kubernetes(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *s,
                      struct ddp_err *err)
{
    (void)o;
    int job_index = 0, rc = env_num(envp, "JOB_COMPLETION_INDEX", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    const char *jobset = ddp_env_get(envp, "JOBSET_NAME"), *rjob = ddp_env_get(envp, "REPLICATED_JOB_NAME");
    s->sets_nodes = true;
    if (!(jobset && *jobset && rjob && *rjob)) {
        s->name = "kubernetes";
        s->vars = "JOB_COMPLETION_INDEX";
        return 1;
    }
    s->name = "jobset";
    s->vars = "JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX, JOB_COMPLETION_INDEX";
    if ((rc = env_num(envp, "JOB_INDEX", 0, 1 << 20, &job_index, err)) < 0)
        return rc;
    if (job_index != 0)
        return ddp_errf(err, -EINVAL,
                        "jobset: JOB_INDEX=%d: node ranks come from JOB_COMPLETION_INDEX within one "
                        "replicated job (replicas: 1); give --node-rank for several",
                        job_index);
    s->master_addr = ddp_xasprintf("%s-%s-0-0.%s", jobset, rjob, jobset);
    return 1;
}

int ddp_scheduler_detect(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *out,
                         struct ddp_err *err)
{
    static int (*const sources[])(char *const *, const struct ddp_scheduler_opts *, struct ddp_scheduler *,
                                  struct ddp_err *) = {
        slurm, lsf, pbs, skypilot, flux, openmpi, pmix, kubernetes,
    };
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        int rc = sources[i](envp, o, out, err);
        if (rc != 0) {
            if (rc < 0)
                ddp_scheduler_free(out);
            else if (strcmp(out->name, "slurm") == 0)
                out->rendezvous = true; /* an srun step or a batch step: Slurm's, whatever the backend */
            else if (o->dynamic_rdzv && !out->job_id) {
                ddp_scheduler_free(out); /* a c10d rendezvous: node ranks come from it, not from a launcher */
                return 0;
            } else if (o->dynamic_rdzv) {
                out->sets_nodes = false; /* its job id and GPUs only */
            } else {
                out->rendezvous = out->sets_nodes;
            }
            return rc;
        }
        ddp_scheduler_free(out);
    }
    return 0;
}

int ddp_scheduler_apply(const struct ddp_scheduler *s, struct ddp_spec *spec, struct ddp_err *err)
{
    char num[32];
    int rc = 0;
    if (!s->name || !s->sets_nodes)
        return 0;
    if (s->node_rank < 0 && spec->origin[ddp_spec_key_find("job", "node_rank")] < DDP_ORIGIN_ENV)
        return ddp_errf(err, -EINVAL, "%s", s->not_listed ? s->not_listed : "no node rank for this host");
    if (s->nnodes > 0) {
        snprintf(num, sizeof num, "%d", s->nnodes);
        rc = ddp_spec_set_from_scheduler(spec, "nnodes", num, s->where[0] ? s->where[0] : s->vars, err);
    }
    snprintf(num, sizeof num, "%d", s->node_rank);
    if (rc == 0 && s->node_rank >= 0)
        rc = ddp_spec_set_from_scheduler(spec, "node_rank", num, s->where[1] ? s->where[1] : s->vars, err);
    if (rc == 0 && s->master_addr)
        rc = ddp_spec_set_from_scheduler(spec, "master_addr", s->master_addr, s->where[2] ? s->where[2] : s->vars, err);
    if (rc == 0 && spec->node_rank >= spec->nnodes.max)
        rc = ddp_errf(err, -EINVAL, "%s: node rank %d is not below nnodes %d (%s; give --nnodes)", s->name,
                      spec->node_rank, spec->nnodes.max, s->vars);
    return rc;
}

int ddp_scheduler_port(const struct ddp_scheduler *s, int lo, int hi)
{
    if (!s->name || !s->key_job)
        return -EINVAL;
    struct ddp_port_spec ps = {.is_auto = true, .lo = lo, .hi = hi};
    return ddp_port_job_port(s->key_job, s->key_step, &ps);
}

void ddp_scheduler_free(struct ddp_scheduler *s)
{
    free(s->master_addr);
    free(s->job_id);
    free(s->gpus);
    free(s->warning);
    free(s->not_listed);
    memset(s, 0, sizeof *s);
}
