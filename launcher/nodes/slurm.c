/* slurm: Slurm job environment -> multi-node facts. See slurm.h. */
#include "nodes/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/port.h"
#include "nodes/hostlist.h"

/* The first of several variable names that is set. */
static const char *env_first(char *const *envp, const char *a, const char *b, const char **which)
{
    const char *v = ddp_env_get(envp, a);
    *which = a;
    if (!v && b) {
        v = ddp_env_get(envp, b);
        *which = b;
    }
    return v;
}

static int env_int(char *const *envp, const char *a, const char *b, long long min, long long max, int *out,
                   struct ddp_err *err)
{
    const char *name;
    const char *v = env_first(envp, a, b, &name);
    if (!v)
        return ddp_errf(err, -EINVAL, "Slurm step without %s%s%s (is this an srun step?)", a, b ? " or " : "",
                        b ? b : "");
    long long x;
    if (ddp_parse_int(v, min, max, &x) < 0)
        return ddp_errf(err, -EINVAL, "Slurm: %s='%s': expected a number in %lld..%lld", name, v, min, max);
    *out = (int)x;
    return 0;
}

/* "0,1,2" -> true; also counts the entries and tells whether they are exactly 0..n-1. */
static bool parse_index_list(const char *s, int *count, bool *is_identity)
{
    int n = 0;
    bool ident = true;
    const char *p = s;
    if (!*p)
        return false;
    for (;;) {
        if (*p < '0' || *p > '9')
            return false;
        long v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p - '0');
            if (v > 1000000)
                return false;
            p++;
        }
        if (v != n)
            ident = false;
        n++;
        if (*p == '\0')
            break;
        if (*p != ',')
            return false;
        p++;
    }
    *count = n;
    *is_identity = ident;
    return true;
}

static int fail(struct ddp_slurm *out, int rc)
{
    ddp_slurm_free(out);
    return rc;
}

/* Inside an srun step: one task per node, the step's nodes, this node's rank, node 0 as the master. Errors leave
 * the caller to free *out. */
static int detect_step(char *const *envp, struct ddp_slurm *out, const char *job_id, const char *step_id,
                       const char *nodename, const char *list_var, const char *list, struct ddp_err *err)
{
    int rc;
    int ntasks;
    rc = env_int(envp, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", 1, DDP_HOSTLIST_MAX_HOSTS, &out->nnodes, err);
    if (rc == 0)
        rc = env_int(envp, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", 1, 1 << 24, &ntasks, err);
    if (rc == 0)
        rc = env_int(envp, "SLURM_NODEID", NULL, 0, DDP_HOSTLIST_MAX_HOSTS - 1, &out->node_rank, err);
    if (rc < 0)
        return rc;
    if (ntasks != out->nnodes) {
        const char *tpn = ddp_env_get(envp, "SLURM_STEP_TASKS_PER_NODE");
        return ddp_errf(err, -EINVAL,
                        "Slurm step %s.%s runs %d tasks on %d nodes (tasks per node: %s); "
                        "ddplaunch starts the workers itself and wants one task per node: "
                        "srun --ntasks=%d --ntasks-per-node=1 ddplaunch ... (srun inherits "
                        "sbatch's --ntasks, so give --ntasks too), or set [slurm] enabled = no",
                        job_id, step_id, ntasks, out->nnodes, tpn ? tpn : "?", out->nnodes);
    }
    out->ntasks_per_node = 1;
    if (out->hosts.n != (size_t)out->nnodes)
        return ddp_errf(err, -EINVAL,
                        "Slurm: %s='%s' names %zu hosts but the step has "
                        "%d nodes",
                        list_var, list, out->hosts.n, out->nnodes);
    if (out->node_rank >= out->nnodes)
        return ddp_errf(err, -EINVAL,
                        "Slurm: SLURM_NODEID=%d, but the step has only %d "
                        "nodes",
                        out->node_rank, out->nnodes);
    if (nodename && strcmp(nodename, out->hosts.v[out->node_rank]) != 0)
        return ddp_errf(err, -EINVAL,
                        "Slurm: SLURMD_NODENAME=%s, but node %d of %s "
                        "(%s) is %s",
                        nodename, out->node_rank, list_var, list, out->hosts.v[out->node_rank]);
    out->master_addr = ddp_xstrdup(out->hosts.v[0]);
    return 0;
}

/* The GPUs Slurm gave the step (or job), and whether CUDA_VISIBLE_DEVICES renumbers them from 0. Errors leave the
 * caller to free *out. */
static int detect_gpus(char *const *envp, struct ddp_slurm *out, struct ddp_err *err)
{
    const char *gpus = NULL, *gpus_var = "SLURM_STEP_GPUS";
    if (out->is_step)
        gpus = ddp_env_get(envp, "SLURM_STEP_GPUS");
    if (!gpus) {
        gpus_var = "SLURM_JOB_GPUS";
        gpus = ddp_env_get(envp, gpus_var);
    }
    int ngpus = 0;
    bool ident = false;
    if (gpus && *gpus) {
        if (!parse_index_list(gpus, &ngpus, &ident))
            return ddp_errf(err, -EINVAL, "Slurm: %s='%s': expected GPU indices like 0,1,2", gpus_var, gpus);
        out->gpus = ddp_xstrdup(gpus);
    }
    const char *cvd = ddp_env_get(envp, "CUDA_VISIBLE_DEVICES");
    if (cvd) {
        out->cuda_visible = ddp_xstrdup(cvd);
        int ncvd;
        bool cvd_ident;
        if (out->gpus && strcmp(cvd, out->gpus) != 0 && parse_index_list(cvd, &ncvd, &cvd_ident) && cvd_ident &&
            ncvd == ngpus)
            out->gpus_local = true;
    }
    return 0;
}

/* The job's memory on this node (MiB in the variables) in KiB, or 0 when Slurm does not say. */
static long long mem_kib(char *const *envp)
{
    const char *node = ddp_env_get(envp, "SLURM_MEM_PER_NODE"), *cpu = ddp_env_get(envp, "SLURM_MEM_PER_CPU");
    const char *cpus = ddp_env_get(envp, "SLURM_CPUS_ON_NODE");
    if (!cpus)
        cpus = ddp_env_get(envp, "SLURM_JOB_CPUS_PER_NODE"); /* "8(x2)" or "8,4": this node's first */
    if (node && atoll(node) > 0)
        return atoll(node) * 1024;
    if (cpu && atoll(cpu) > 0 && cpus && atoll(cpus) > 0)
        return atoll(cpu) * atoll(cpus) * 1024;
    return 0;
}

int ddp_slurm_detect(char *const *envp, enum ddp_tristate enabled, struct ddp_slurm *out, struct ddp_err *err)
{
    memset(out, 0, sizeof *out);
    if (enabled == DDP_NO)
        return 0;
    const char *name;
    const char *job_id = env_first(envp, "SLURM_JOB_ID", "SLURM_JOBID", &name);
    if (!job_id || !*job_id) {
        if (enabled == DDP_YES)
            return ddp_errf(err, -EINVAL,
                            "[slurm] enabled = yes, but SLURM_JOB_ID is not set: this "
                            "is not inside a Slurm job (use enabled = auto to run either way)");
        return 0;
    }
    out->active = true;
    out->job_id = ddp_xstrdup(job_id);
    out->job_id_num = strtoull(job_id, NULL, 10);
    const char *nodename = ddp_env_get(envp, "SLURMD_NODENAME");
    if (nodename)
        out->nodename = ddp_xstrdup(nodename);
    out->mem_kib = mem_kib(envp);
    const char *step_id = env_first(envp, "SLURM_STEP_ID", "SLURM_STEPID", &name);
    out->is_step = step_id != NULL;
    if (step_id) {
        out->step_id = ddp_xstrdup(step_id);
        out->step_id_num = strtoull(step_id, NULL, 10);
    }

    int rc = env_int(envp, "SLURM_JOB_NUM_NODES", "SLURM_NNODES", 1, DDP_HOSTLIST_MAX_HOSTS, &out->job_nnodes, err);
    if (rc < 0)
        return fail(out, rc);
    const char *list_var = out->is_step ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    const char *list = ddp_env_get(envp, list_var);
    if (!list) {
        list_var = "SLURM_NODELIST";
        list = ddp_env_get(envp, list_var);
    }
    if (!list)
        return fail(out, ddp_errf(err, -EINVAL, "Slurm job %s without %s", job_id,
                                  out->is_step ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST"));
    struct ddp_err herr = {0};
    rc = ddp_hostlist_expand(list, &out->hosts, &herr);
    if (rc < 0)
        return fail(out, ddp_errf(err, rc, "Slurm: %s: %s", list_var, herr.msg));

    if (out->is_step) {
        rc = detect_step(envp, out, job_id, step_id, nodename, list_var, list, err);
        if (rc < 0)
            return fail(out, rc);
    } else {
        /* The batch (or salloc) shell: SLURM_PROCID/NODEID describe the shell, not ranks. */
        out->nnodes = 1;
        out->node_rank = 0;
        out->ntasks_per_node = 1;
        if (out->job_nnodes > 1)
            out->warning = ddp_xasprintf(
                "running in the batch step of Slurm job %s, on %s only of its %d nodes (%s); to use every node, "
                "start ddplaunch with: srun --ntasks=%d --ntasks-per-node=1 ddplaunch ...",
                job_id, nodename ? nodename : "one", out->job_nnodes, list, out->job_nnodes);
    }

    rc = detect_gpus(envp, out, err);
    if (rc < 0)
        return fail(out, rc);
    return 0;
}

int ddp_slurm_apply(const struct ddp_slurm *s, struct ddp_spec *spec, struct ddp_err *err)
{
    if (!s->active || !s->is_step)
        return 0;
    char num[32];
    snprintf(num, sizeof num, "%d", s->nnodes);
    int rc = ddp_spec_set_from_scheduler(spec, "nnodes", num, "SLURM_STEP_NUM_NODES", err);
    snprintf(num, sizeof num, "%d", s->node_rank);
    if (rc == 0)
        rc = ddp_spec_set_from_scheduler(spec, "node_rank", num, "SLURM_NODEID", err);
    if (rc == 0)
        rc = ddp_spec_set_from_scheduler(spec, "master_addr", s->master_addr, "SLURM_STEP_NODELIST", err);
    return rc;
}

int ddp_slurm_port(const struct ddp_slurm *s, int lo, int hi)
{
    if (!s->active)
        return -EINVAL;
    struct ddp_port_spec ps = {.is_auto = true, .lo = lo, .hi = hi};
    return ddp_port_job_port(s->job_id_num, s->step_id_num, &ps);
}

void ddp_slurm_free(struct ddp_slurm *s)
{
    free(s->master_addr);
    free(s->job_id);
    free(s->step_id);
    free(s->nodename);
    free(s->gpus);
    free(s->cuda_visible);
    free(s->warning);
    ddp_strv_clear(&s->hosts);
    memset(s, 0, sizeof *s);
}
