/* scheduler: node ranks from schedulers and launchers other than Slurm. See scheduler.h. */
#include "nodes/scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int skypilot(char *const *envp, struct ddp_scheduler *s, struct ddp_err *err)
{
    int rc = env_num(envp, "SKYPILOT_NODE_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "skypilot";
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

static int flux(char *const *envp, struct ddp_scheduler *s, struct ddp_err *err)
{
    int size = 0, rc = env_num(envp, "FLUX_TASK_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "flux";
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

static int openmpi(char *const *envp, struct ddp_scheduler *s, struct ddp_err *err)
{
    int local = 0, rc = env_num(envp, "OMPI_COMM_WORLD_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "openmpi";
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

static int pmix(char *const *envp, struct ddp_scheduler *s, struct ddp_err *err)
{
    int rc = env_num(envp, "PMIX_RANK", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    s->name = "pmix";
    s->vars = "PMIX_RANK";
    return 1;
}

/* Kubernetes: an indexed Job's pod has JOB_COMPLETION_INDEX; under JobSet (with JOBSET_NAME,
 * REPLICATED_JOB_NAME and JOB_INDEX passed down from its labels) node 0 is the pod
 * <jobset>-<replicated job>-0-0, reachable as <that>.<jobset> (JobSet's default subdomain). */
static int kubernetes(char *const *envp, struct ddp_scheduler *s, struct ddp_err *err)
{
    int job_index = 0, rc = env_num(envp, "JOB_COMPLETION_INDEX", 0, 1 << 20, &s->node_rank, err);
    if (rc <= 0)
        return rc;
    const char *jobset = ddp_env_get(envp, "JOBSET_NAME"), *rjob = ddp_env_get(envp, "REPLICATED_JOB_NAME");
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

int ddp_scheduler_detect(char *const *envp, struct ddp_scheduler *out, struct ddp_err *err)
{
    static int (*const sources[])(char *const *, struct ddp_scheduler *, struct ddp_err *) = {
        skypilot, flux, openmpi, pmix, kubernetes,
    };
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        int rc = sources[i](envp, out, err);
        if (rc != 0) {
            if (rc < 0)
                ddp_scheduler_free(out);
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
    if (!s->name)
        return 0;
    if (s->nnodes > 0) {
        snprintf(num, sizeof num, "%d", s->nnodes);
        rc = ddp_spec_set_from_scheduler(spec, "nnodes", num, s->vars, err);
    }
    snprintf(num, sizeof num, "%d", s->node_rank);
    if (rc == 0)
        rc = ddp_spec_set_from_scheduler(spec, "node_rank", num, s->vars, err);
    if (rc == 0 && s->master_addr)
        rc = ddp_spec_set_from_scheduler(spec, "master_addr", s->master_addr, s->vars, err);
    if (rc == 0 && spec->node_rank >= spec->nnodes.max)
        rc = ddp_errf(err, -EINVAL, "%s: node rank %d is not below nnodes %d (%s; give --nnodes)", s->name,
                      spec->node_rank, spec->nnodes.max, s->vars);
    return rc;
}

void ddp_scheduler_free(struct ddp_scheduler *s)
{
    free(s->master_addr);
    memset(s, 0, sizeof *s);
}
