/* Unit tests for launcher/slurm: the variable sets a live Slurm 22.05.8 cluster (tests/slurm/start.sh, two
 * nodes n1 n2 with 2 fake GPUs each) gave a batch step, an srun step, a one-node step inside a two-node
 * job, and a step with two tasks per node; plus ConstrainDevices numbering and the enabled switch. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "host/port.h"
#include "nodes/slurm.h"

/* sbatch -N2 --ntasks-per-node=2 --gres=gpu:2: the batch shell on n1. */
static char *batch_env[] = {"CUDA_VISIBLE_DEVICES=0,1",
                            "GPU_DEVICE_ORDINAL=0,1",
                            "SLURMD_NODENAME=n1",
                            "SLURM_CPUS_ON_NODE=2",
                            "SLURM_GPUS_ON_NODE=2",
                            "SLURM_GTIDS=0",
                            "SLURM_JOBID=3",
                            "SLURM_JOB_CPUS_PER_NODE=2(x2)",
                            "SLURM_JOB_GPUS=0,1",
                            "SLURM_JOB_ID=3",
                            "SLURM_JOB_NAME=job.sh",
                            "SLURM_JOB_NODELIST=n[1-2]",
                            "SLURM_JOB_NUM_NODES=2",
                            "SLURM_LOCALID=0",
                            "SLURM_NNODES=2",
                            "SLURM_NODEID=0",
                            "SLURM_NODELIST=n[1-2]",
                            "SLURM_NPROCS=4",
                            "SLURM_NTASKS=4",
                            "SLURM_NTASKS_PER_NODE=2",
                            "SLURM_PROCID=0",
                            "SLURM_TASKS_PER_NODE=2(x2)",
                            "SLURM_TOPOLOGY_ADDR=n1",
                            "PATH=/usr/bin",
                            NULL};

/* srun -N2 --ntasks-per-node=1 in a 2-node job: the task on n2. */
static char *step_env[] = {"CUDA_VISIBLE_DEVICES=0,1",
                           "SLURMD_NODENAME=n2",
                           "SLURM_CPUS_ON_NODE=1",
                           "SLURM_GTIDS=1",
                           "SLURM_JOBID=2",
                           "SLURM_JOB_CPUS_PER_NODE=1(x2)",
                           "SLURM_JOB_GPUS=0,1",
                           "SLURM_JOB_ID=2",
                           "SLURM_JOB_NODELIST=n[1-2]",
                           "SLURM_JOB_NUM_NODES=2",
                           "SLURM_LOCALID=0",
                           "SLURM_NNODES=2",
                           "SLURM_NODEID=1",
                           "SLURM_NODELIST=n[1-2]",
                           "SLURM_NPROCS=2",
                           "SLURM_NTASKS=2",
                           "SLURM_NTASKS_PER_NODE=1",
                           "SLURM_PROCID=1",
                           "SLURM_STEPID=0",
                           "SLURM_STEP_GPUS=0,1",
                           "SLURM_STEP_ID=0",
                           "SLURM_STEP_NODELIST=n[1-2]",
                           "SLURM_STEP_NUM_NODES=2",
                           "SLURM_STEP_NUM_TASKS=2",
                           "SLURM_STEP_TASKS_PER_NODE=1(x2)",
                           "SLURM_TASKS_PER_NODE=1(x2)",
                           NULL};

/* srun -N1 -n1 -w n2 --gres=gpu:1 inside the 2-node job: SLURM_NODEID is relative to the step. */
static char *sub_env[] = {"CUDA_VISIBLE_DEVICES=0", "SLURMD_NODENAME=n2",
                          "SLURM_GPUS_ON_NODE=1",   "SLURM_JOB_GPUS=0,1",
                          "SLURM_JOB_ID=3",         "SLURM_JOB_NODELIST=n[1-2]",
                          "SLURM_JOB_NUM_NODES=2",  "SLURM_NNODES=1",
                          "SLURM_NODEID=0",         "SLURM_PROCID=0",
                          "SLURM_STEP_GPUS=0",      "SLURM_STEP_ID=2",
                          "SLURM_STEP_NODELIST=n2", "SLURM_STEP_NUM_NODES=1",
                          "SLURM_STEP_NUM_TASKS=1", NULL};

/* srun -N2 --ntasks-per-node=2 (or --ntasks-per-node=1 silently overridden by sbatch's SLURM_NTASKS=4). */
static char *multi_env[] = {"SLURMD_NODENAME=n2",
                            "SLURM_JOB_ID=3",
                            "SLURM_JOB_NODELIST=n[1-2]",
                            "SLURM_JOB_NUM_NODES=2",
                            "SLURM_LOCALID=1",
                            "SLURM_NNODES=2",
                            "SLURM_NODEID=1",
                            "SLURM_PROCID=3",
                            "SLURM_STEP_ID=1",
                            "SLURM_STEP_NODELIST=n[1-2]",
                            "SLURM_STEP_NUM_NODES=2",
                            "SLURM_STEP_NUM_TASKS=4",
                            "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                            NULL};

Test(slurm, batch_step_takes_no_ranks)
{
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(batch_env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect(s.active);
    cr_expect_not(s.is_step);
    cr_expect_eq(s.nnodes, 1);
    cr_expect_eq(s.node_rank, 0);
    cr_expect_eq(s.job_nnodes, 2);
    cr_expect_null(s.master_addr);
    cr_expect_str_eq(s.job_id, "3");
    cr_expect_str_eq(s.gpus, "0,1");
    cr_expect_not(s.gpus_local);
    cr_expect_eq(s.hosts.n, 2);
    /* A two-node job used from its batch shell: say how to use every node. */
    cr_assert_not_null(s.warning);
    cr_expect(strstr(s.warning, "srun --ntasks=2 --ntasks-per-node=1 ddplaunch"), "%s", s.warning);
    ddp_slurm_free(&s);
}

Test(slurm, srun_step)
{
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(step_env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect(s.active);
    cr_expect(s.is_step);
    cr_expect_eq(s.nnodes, 2);
    cr_expect_eq(s.node_rank, 1);
    cr_expect_eq(s.ntasks_per_node, 1);
    cr_expect_str_eq(s.master_addr, "n1");
    cr_expect_str_eq(s.job_id, "2");
    cr_expect_str_eq(s.step_id, "0");
    cr_expect_str_eq(s.nodename, "n2");
    cr_expect_str_eq(s.gpus, "0,1");
    cr_expect_str_eq(s.cuda_visible, "0,1");
    cr_expect_null(s.warning);
    cr_assert_eq(s.hosts.n, 2);
    cr_expect_str_eq(s.hosts.v[1], "n2");
    ddp_slurm_free(&s);
}

Test(slurm, step_on_part_of_the_job)
{
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(sub_env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect_eq(s.nnodes, 1);
    cr_expect_eq(s.node_rank, 0);
    cr_expect_eq(s.job_nnodes, 2);
    cr_expect_str_eq(s.master_addr, "n2");
    cr_expect_str_eq(s.gpus, "0"); /* the step's GPU, not the job's two */
    ddp_slurm_free(&s);
}

Test(slurm, several_tasks_per_node_is_an_error_saying_what_to_do)
{
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(multi_env, DDP_AUTO, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "runs 4 tasks on 2 nodes"), "%s", err.msg);
    cr_expect(strstr(err.msg, "srun --ntasks=2 --ntasks-per-node=1"), "%s", err.msg);
    cr_expect(strstr(err.msg, "2(x2)"), "%s", err.msg);
    cr_expect_null(s.job_id); /* nothing left to free */
}

Test(slurm, enabled_switch)
{
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(step_env, DDP_NO, &s, &err), 0);
    cr_expect_not(s.active);
    cr_expect_null(s.job_id);
    ddp_slurm_free(&s);
    char *plain[] = {"PATH=/usr/bin", "HOME=/root", NULL};
    cr_assert_eq(ddp_slurm_detect(plain, DDP_AUTO, &s, &err), 0);
    cr_expect_not(s.active);
    ddp_slurm_free(&s);
    cr_assert_eq(ddp_slurm_detect(plain, DDP_YES, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "SLURM_JOB_ID is not set"), "%s", err.msg);
    cr_assert_eq(ddp_slurm_detect(NULL, DDP_AUTO, &s, &err), 0);
    cr_expect_not(s.active);
}

Test(slurm, constrained_devices_number_gpus_locally)
{
    char *env[] = {"SLURM_JOB_ID=9",
                   "SLURM_JOB_NUM_NODES=1",
                   "SLURM_STEP_ID=0",
                   "SLURM_STEP_NUM_NODES=1",
                   "SLURM_STEP_NUM_TASKS=1",
                   "SLURM_NODEID=0",
                   "SLURM_STEP_NODELIST=gpu007",
                   "SLURM_STEP_GPUS=4,6",
                   "CUDA_VISIBLE_DEVICES=0,1",
                   NULL};
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(s.gpus, "4,6");
    cr_expect(s.gpus_local);
    ddp_slurm_free(&s);
    /* Without ConstrainDevices CUDA sees the global indices. */
    env[8] = "CUDA_VISIBLE_DEVICES=4,6";
    cr_assert_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect_not(s.gpus_local);
    ddp_slurm_free(&s);
    env[7] = "SLURM_STEP_GPUS=4,x";
    cr_expect_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "SLURM_STEP_GPUS='4,x'"), "%s", err.msg);
}

Test(slurm, big_hostlists_and_bad_variables)
{
    char *env[] = {"SLURM_JOB_ID=77",
                   "SLURM_JOB_NUM_NODES=9",
                   "SLURM_STEP_ID=3",
                   "SLURM_STEP_NUM_NODES=9",
                   "SLURM_STEP_NUM_TASKS=9",
                   "SLURM_NODEID=7",
                   "SLURMD_NODENAME=rack2n01",
                   "SLURM_STEP_NODELIST=gpu[001-004,010],rack[1-2]n[01-02]",
                   NULL};
    struct ddp_slurm s;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect_str_eq(s.master_addr, "gpu001");
    cr_expect_str_eq(s.hosts.v[8], "rack2n02");
    cr_expect_null(s.gpus);
    ddp_slurm_free(&s);
    /* SLURMD_NODENAME must be the node SLURM_NODEID names. */
    env[5] = "SLURM_NODEID=5";
    cr_expect_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "SLURMD_NODENAME=rack2n01, but node 5"), "%s", err.msg);
    env[5] = "SLURM_NODEID=9";
    cr_expect_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), -EINVAL);
    env[5] = "SLURM_NODEID=x";
    cr_expect_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "SLURM_NODEID='x'"), "%s", err.msg);
    env[5] = "SLURM_NODEID=7";
    env[7] = "SLURM_STEP_NODELIST=gpu[001-004";
    cr_expect_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "SLURM_STEP_NODELIST: hostlist"), "%s", err.msg);
    env[7] = "SLURM_STEP_NODELIST=n[1-8]";
    cr_expect_eq(ddp_slurm_detect(env, DDP_AUTO, &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "names 8 hosts but the step has 9 nodes"), "%s", err.msg);
}

Test(slurm, apply_fills_the_spec_below_env_and_cli)
{
    struct ddp_slurm s;
    struct ddp_err err = {0};
    struct ddp_spec spec;
    cr_assert_eq(ddp_slurm_detect(step_env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    cr_expect_eq(s.job_id_num, 2);
    cr_expect_eq(s.step_id_num, 0);
    ddp_spec_init(&spec);
    const char *ini = "[job]\nscript = t.py\nnnodes = 4\nmaster_addr = 10.0.0.9\n";
    cr_assert_eq(ddp_spec_load_string(&spec, "job.ini", ini, strlen(ini), DDP_ORIGIN_SPEC, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_spec_set(&spec, "job", "master_addr", "n1-ib", DDP_ORIGIN_CLI, "--master-addr", &err), 0);
    cr_assert_eq(ddp_slurm_apply(&s, &spec, &err), 0, "%s", err.msg);
    cr_expect_eq(spec.nnodes.min, 2); /* the job spec's 4 is below the environment */
    cr_expect_eq(spec.nnodes.max, 2);
    cr_expect_eq(spec.node_rank, 1);
    cr_expect_str_eq(spec.master_addr, "n1-ib"); /* the command line wins */
    cr_expect(spec.master_port.is_auto);
    cr_expect_eq(ddp_spec_validate(&spec, &err), 0, "%s", err.msg);
    ddp_spec_free(&spec);
    ddp_slurm_free(&s);
    /* A batch step changes nothing. */
    cr_assert_eq(ddp_slurm_detect(batch_env, DDP_AUTO, &s, &err), 0, "%s", err.msg);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_slurm_apply(&s, &spec, &err), 0);
    cr_expect_eq(spec.nnodes.max, 1);
    cr_expect_eq(spec.node_rank, 0);
    cr_expect_str_eq(spec.master_addr, "127.0.0.1");
    ddp_spec_free(&spec);
    ddp_slurm_free(&s);
}

Test(slurm, port_is_the_one_node0_reserves)
{
    struct ddp_slurm a, b;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_slurm_detect(step_env, DDP_AUTO, &a, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_slurm_detect(sub_env, DDP_AUTO, &b, &err), 0, "%s", err.msg);
    int p = ddp_slurm_port(&a, 0, 0);
    cr_expect(p >= DDP_PORT_AUTO_LO && p <= DDP_PORT_AUTO_HI, "port %d", p);
    /* Candidate 0 of port.c's sequence for job 2 step 0: what node 0's ddp_port_reserve() tries. */
    cr_expect_eq(p, ddp_port_job_candidate(2, 0, DDP_PORT_AUTO_LO, DDP_PORT_AUTO_HI, 0));
    int q = ddp_slurm_port(&a, 40000, 40099);
    cr_expect(q >= 40000 && q <= 40099, "port %d", q);
    cr_expect_neq(ddp_slurm_port(&b, 0, 0), -EINVAL);
    struct ddp_slurm none = {0};
    cr_expect_eq(ddp_slurm_port(&none, 0, 0), -EINVAL);
    ddp_slurm_free(&a);
    ddp_slurm_free(&b);
}

/* issue 52 item 12: the job's memory on this node, per node or per CPU, for warm restart's memory rule */
Test(slurm, memory_of_the_job_on_this_node)
{
#define JOB "SLURM_JOB_ID=7", "SLURM_JOB_NUM_NODES=1", "SLURM_JOB_NODELIST=n1"
    char *per_node[] = {JOB, "SLURM_MEM_PER_NODE=1000", NULL};
    char *per_cpu[] = {JOB, "SLURM_MEM_PER_CPU=100", "SLURM_CPUS_ON_NODE=8", NULL};
    char *per_cpu_job[] = {JOB, "SLURM_MEM_PER_CPU=100", "SLURM_JOB_CPUS_PER_NODE=4(x2)", NULL};
    char *none[] = {JOB, NULL};
#undef JOB
    char **envs[] = {per_node, per_cpu, per_cpu_job, none};
    long long want[] = {1000 * 1024, 800 * 1024, 400 * 1024, 0};
    for (size_t i = 0; i < 4; i++) {
        struct ddp_slurm s;
        struct ddp_err err = {0};
        cr_assert_eq(ddp_slurm_detect(envs[i], DDP_AUTO, &s, &err), 0, "%s", err.msg);
        cr_expect_eq(s.mem_kib, want[i], "case %zu: %lld", i, s.mem_kib);
        ddp_slurm_free(&s);
    }
}
