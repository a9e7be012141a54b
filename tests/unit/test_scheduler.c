/* Unit tests for launcher/scheduler: each scheduler's real variables give the node rank, the node count and node 0's
 * address; more than one ddplaunch per node is refused; the command line wins over what a scheduler says. Slurm,
 * LSF and PBS are rows of the same table and fill the same struct (job key, GPUs). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nodes/scheduler.h"

static struct ddp_scheduler s;
static struct ddp_err err;

static struct ddp_scheduler_opts opts = {.slurm = DDP_AUTO, .hostname = "node-b"};

static int detect(char **envp)
{
    ddp_scheduler_free(&s);
    return ddp_scheduler_detect(envp, &opts, &s, &err);
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

Test(scheduler, slurm_is_a_row)
{
    char *step[] = {"SLURM_JOB_ID=4711",
                    "SLURM_STEP_ID=2",
                    "SLURM_STEP_NUM_NODES=2",
                    "SLURM_NODEID=1",
                    "SLURM_STEP_NODELIST=gpu[01-02]",
                    "SLURM_STEP_NUM_TASKS=2",
                    "SLURM_STEP_TASKS_PER_NODE=1(x2)",
                    "SLURM_STEP_GPUS=2,3",
                    "CUDA_VISIBLE_DEVICES=0,1",
                    "SLURM_JOB_NUM_NODES=2",
                    NULL};
    cr_assert_eq(detect(step), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "slurm");
    cr_expect(s.sets_nodes && s.rendezvous);
    cr_expect_eq(s.node_rank, 1);
    cr_expect_eq(s.nnodes, 2);
    cr_expect_str_eq(s.master_addr, "gpu01");
    cr_expect_str_eq(s.job_id, "4711");
    cr_expect_eq(s.key_job, 4711ULL);
    cr_expect_eq(s.key_step, 2ULL);
    cr_expect_str_eq(s.gpus, "2,3");
    cr_expect(s.allocates_gpus);
    cr_expect(ddp_scheduler_port(&s, 0, 0) > 0, "node 0's port derived from the job key");
    struct ddp_spec spec;
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_scheduler_apply(&s, &spec, &err), 0, "%s", err.msg);
    cr_expect_eq(spec.node_rank, 1);
    cr_expect_str_eq(spec.master_addr, "gpu01");
    ddp_spec_free(&spec);
    /* [slurm] enabled = no: not read; a batch step: its ids and GPUs, no node ranks */
    struct ddp_scheduler_opts no = {.slurm = DDP_NO};
    ddp_scheduler_free(&s);
    cr_expect_eq(ddp_scheduler_detect(step, &no, &s, &err), 0);
    cr_expect_null(s.name);
    char *batch[] = {"SLURM_JOB_ID=4712", "SLURM_JOB_GPUS=0", "SLURM_JOB_NUM_NODES=1", "SLURM_JOB_NODELIST=gpu01",
                     NULL};
    cr_assert_eq(detect(batch), 1, "%s", err.msg);
    cr_expect(!s.sets_nodes);
    cr_expect_str_eq(s.gpus, "0");
    ddp_scheduler_free(&s);
}

Test(scheduler, lsf_hosts_give_the_rank)
{
    char *m[] = {"LSB_JOBID=81234", "LSB_MCPU_HOSTS=node-a 8 node-b 8 node-c 8", "LSB_DJOB_NUMPROC=24", NULL};
    cr_assert_eq(detect(m), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "lsf");
    cr_expect(s.sets_nodes && s.rendezvous);
    cr_expect_eq(s.nnodes, 3);
    cr_expect_eq(s.node_rank, 1, "node-b is the second host");
    cr_expect_str_eq(s.master_addr, "node-a");
    cr_expect_eq(s.key_job, 81234ULL);
    cr_expect_str_eq(s.vars, "LSB_MCPU_HOSTS");
    cr_expect(!s.allocates_gpus);
    /* LSB_HOSTS: one word per slot; a fully qualified hostname matches the short name */
    char *h[] = {"LSB_JOBID=5", "LSB_HOSTS=n1 n1 n2 n2", NULL};
    struct ddp_scheduler_opts fq = {.slurm = DDP_AUTO, .hostname = "n2.cluster.example"};
    ddp_scheduler_free(&s);
    cr_assert_eq(ddp_scheduler_detect(h, &fq, &s, &err), 1, "%s", err.msg);
    cr_expect_eq(s.nnodes, 2);
    cr_expect_eq(s.node_rank, 1);
    /* this host not in the list: said, with the way out */
    char *x[] = {"LSB_JOBID=6", "LSB_MCPU_HOSTS=other 4", NULL};
    cr_assert_eq(detect(x), 1, "%s", err.msg);
    struct ddp_spec spec;
    ddp_spec_init(&spec);
    cr_expect_eq(ddp_scheduler_apply(&s, &spec, &err), -EINVAL);
    cr_expect(strstr(err.msg, "LSB_MCPU_HOSTS: this host (node-b) is not in the job's host list"), "%s", err.msg);
    ddp_spec_free(&spec);
    ddp_spec_init(&spec); /* the command line's rank wins */
    cr_assert_eq(ddp_spec_set(&spec, "job", "node_rank", "0", DDP_ORIGIN_CLI, "--node-rank", &err), 0);
    cr_assert_eq(ddp_spec_set(&spec, "job", "nnodes", "1", DDP_ORIGIN_CLI, "--nnodes", &err), 0);
    cr_expect_eq(ddp_scheduler_apply(&s, &spec, &err), 0, "%s", err.msg);
    ddp_spec_free(&spec);
    /* under a c10d rendezvous: the job id, no node ranks */
    struct ddp_scheduler_opts c10d = {.slurm = DDP_AUTO, .hostname = "node-b", .dynamic_rdzv = true};
    ddp_scheduler_free(&s);
    cr_assert_eq(ddp_scheduler_detect(m, &c10d, &s, &err), 1, "%s", err.msg);
    cr_expect(!s.sets_nodes && !s.rendezvous);
    cr_expect_str_eq(s.job_id, "81234");
    ddp_scheduler_free(&s);
}

Test(scheduler, pbs_nodefile_gives_the_rank)
{
    char path[] = "/tmp/ddp-test-pbs-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    const char *text = "node-a\nnode-a\nnode-b\nnode-b\nnode-c\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char nf[64], *env[] = {"PBS_JOBID=4567.pbs01", nf, NULL};
    snprintf(nf, sizeof nf, "PBS_NODEFILE=%s", path);
    cr_assert_eq(detect(env), 1, "%s", err.msg);
    cr_expect_str_eq(s.name, "pbs");
    cr_expect_eq(s.nnodes, 3);
    cr_expect_eq(s.node_rank, 1);
    cr_expect_str_eq(s.master_addr, "node-a");
    cr_expect_eq(s.key_job, 4567ULL, "the number of 4567.pbs01");
    cr_expect_str_eq(s.job_id, "4567.pbs01");
    /* pbsdsh's PBS_NODENUM wins over the host name */
    char *env2[] = {"PBS_JOBID=4567.pbs01", nf, "PBS_NODENUM=2", NULL};
    cr_assert_eq(detect(env2), 1, "%s", err.msg);
    cr_expect_eq(s.node_rank, 2);
    unlink(path);
    char *gone[] = {"PBS_JOBID=1", "PBS_NODEFILE=/nonexistent/nodefile", NULL};
    cr_expect_eq(detect(gone), -EINVAL);
    cr_expect(strstr(err.msg, "PBS_NODEFILE=/nonexistent/nodefile: cannot read it"), "%s", err.msg);
    ddp_scheduler_free(&s);
}
