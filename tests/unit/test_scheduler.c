/* Unit tests for launcher/scheduler: each scheduler's real variables give the node rank, the node count and node 0's
 * address; more than one ddplaunch per node is refused; the command line wins over what a scheduler says. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "nodes/scheduler.h"

static struct ddp_scheduler s;
static struct ddp_err err;

static int detect(char **envp)
{
    ddp_scheduler_free(&s);
    return ddp_scheduler_detect(envp, &s, &err);
}

Test(scheduler, none)
{
    char *env[] = {"HOME=/root", "RANK=3", "WORLD_SIZE=4", NULL}; /* Kubeflow v1's stale pod variables */
    cr_expect_eq(detect(env), 0);
    cr_expect_null(s.name, "RANK/WORLD_SIZE alone are no source (they are the workers' variables)");
}

Test(scheduler, skypilot)
{
    char *env[] = {"SKYPILOT_NODE_RANK=2", "SKYPILOT_NUM_NODES=3", "SKYPILOT_NODE_IPS=10.0.0.5\n10.0.0.6\n10.0.0.7",
                   "SKYPILOT_NUM_GPUS_PER_NODE=8", NULL};
    cr_assert_eq(detect(env), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "skypilot");
    cr_expect_eq(s.node_rank, 2);
    cr_expect_eq(s.nnodes, 3);
    cr_expect_str_eq(s.master_addr, "10.0.0.5");
    cr_expect_eq(s.gpus_per_node, 8);
    ddp_scheduler_free(&s);
}

Test(scheduler, flux_and_openmpi_one_per_node)
{
    char *f[] = {"FLUX_TASK_RANK=1", "FLUX_JOB_SIZE=2", "FLUX_JOB_NNODES=2", "FLUX_TASK_LOCAL_ID=0", NULL};
    cr_assert_eq(detect(f), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "flux");
    cr_expect_eq(s.node_rank, 1);
    cr_expect_eq(s.nnodes, 2);
    cr_expect_null(s.master_addr);
    char *f4[] = {"FLUX_TASK_RANK=1", "FLUX_JOB_SIZE=4", "FLUX_JOB_NNODES=2", NULL};
    cr_expect_eq(detect(f4), -EINVAL);
    cr_expect(strstr(err.msg, "one ddplaunch per node"), "%s", err.msg);
    char *o[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=1", "PMIX_RANK=0",
                 NULL};
    cr_assert_eq(detect(o), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "openmpi");
    cr_expect_eq(s.nnodes, 2);
    char *o2[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL};
    cr_expect_eq(detect(o2), -EINVAL);
    cr_expect(strstr(err.msg, "mpirun -N 1"), "%s", err.msg);
    char *p[] = {"PMIX_RANK=3", NULL};
    cr_assert_eq(detect(p), 1);
    cr_expect_str_eq(s.name, "pmix");
    cr_expect_eq(s.nnodes, 0, "PMIx alone does not say how many");
    char *bad[] = {"FLUX_TASK_RANK=x", NULL};
    cr_expect_eq(detect(bad), -EINVAL);
    cr_expect(strstr(err.msg, "FLUX_TASK_RANK=x"), "%s", err.msg);
    ddp_scheduler_free(&s);
}

Test(scheduler, kubernetes_and_jobset)
{
    char *k[] = {"JOB_COMPLETION_INDEX=1", "KUBERNETES_SERVICE_HOST=10.96.0.1", NULL};
    cr_assert_eq(detect(k), 1);
    cr_expect_str_eq(s.name, "kubernetes");
    cr_expect_eq(s.node_rank, 1);
    cr_expect_null(s.master_addr, "an indexed Job does not say node 0's address");
    char *j[] = {"JOB_COMPLETION_INDEX=2", "JOBSET_NAME=train", "REPLICATED_JOB_NAME=workers", "JOB_INDEX=0", NULL};
    cr_assert_eq(detect(j), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "jobset");
    cr_expect_eq(s.node_rank, 2);
    cr_expect_str_eq(s.master_addr, "train-workers-0-0.train");
    char *j1[] = {"JOB_COMPLETION_INDEX=0", "JOBSET_NAME=train", "REPLICATED_JOB_NAME=workers", "JOB_INDEX=1", NULL};
    cr_expect_eq(detect(j1), -EINVAL);
    ddp_scheduler_free(&s);
}

Test(scheduler, apply_below_the_command_line)
{
    struct ddp_spec spec;
    char *env[] = {"SKYPILOT_NODE_RANK=1", "SKYPILOT_NUM_NODES=2", "SKYPILOT_NODE_IPS=10.0.0.5\n10.0.0.6", NULL};
    ddp_spec_init(&spec);
    cr_assert_eq(detect(env), 1);
    cr_assert_eq(ddp_scheduler_apply(&s, &spec, &err), 0, "%s", err.msg);
    cr_expect_eq(spec.node_rank, 1);
    cr_expect_eq(spec.nnodes.max, 2);
    cr_expect_str_eq(spec.master_addr, "10.0.0.5");
    ddp_spec_free(&spec);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_spec_set(&spec, "job", "master_addr", "head", DDP_ORIGIN_CLI, "--master-addr", &err), 0);
    cr_assert_eq(ddp_scheduler_apply(&s, &spec, &err), 0, "%s", err.msg);
    cr_expect_str_eq(spec.master_addr, "head", "the command line wins");
    ddp_spec_free(&spec);
    /* a rank not below the count */
    char *k[] = {"JOB_COMPLETION_INDEX=3", NULL};
    ddp_spec_init(&spec);
    cr_assert_eq(detect(k), 1);
    cr_assert_eq(ddp_spec_set(&spec, "job", "nnodes", "2", DDP_ORIGIN_CLI, "--nnodes", &err), 0);
    cr_expect_eq(ddp_scheduler_apply(&s, &spec, &err), -EINVAL);
    cr_expect(strstr(err.msg, "node rank 3 is not below nnodes 2"), "%s", err.msg);
    ddp_spec_free(&spec);
    ddp_scheduler_free(&s);
}
