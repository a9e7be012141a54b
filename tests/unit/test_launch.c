/* Unit tests for launcher/launch: the pure resolve step (spec + facts -> workers on this node, derived
 * defaults, run id, interpreter, master address, port source, lease decision, GPUs other jobs hold) on a real
 * hwloc fixture and without a topology. Facts are filled by hand: nothing here reads the environment, /proc or
 * the lock directory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver/launch.h"
#include "topo/topo.h"

static char *fixture_path(const char *name)
{
    const char *src = getenv("DDP_SRCDIR");

    cr_assert(src, "DDP_SRCDIR is not set (run through `make unit`)");
    return ddp_xasprintf("%s/tests/fixtures/topo/%s", src, name);
}

/* 8 T4 GPUs, 4 per NUMA node: 0000:18, 19, 35, 36 on node 0; 96 CPUs. */
#define T4 "2s-8gpu-aws-g4dn-metal-t4.xml"

static char *no_env[] = {NULL};

static void setup(struct ddp_launch *l, enum ddp_cmd cmd, const char *topo, const char *ini)
{
    struct ddp_err err = {0};

    ddp_launch_init(l, cmd);
    cr_assert_eq(ddp_spec_load_string(&l->spec, "job.ini", ini, strlen(ini), DDP_ORIGIN_SPEC, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_spec_validate(&l->spec, &err), 0, "%s", err.msg);
    if (topo) {
        char *path = fixture_path(topo);

        cr_assert_eq(ddp_launch_load_topology(l, path, true, NULL, &err), 0, "%s", err.msg);
        free(path);
    }
}

static struct ddp_launch_facts facts(char **envp)
{
    struct ddp_launch_facts f = {
        .envp = envp ? envp : no_env, .online_cpus = 6, .random_id = "0123456789ab", .self = 100};

    strcpy(f.hostname, "node7");
    return f;
}

static void resolve_ok(struct ddp_launch *l, const struct ddp_launch_facts *f)
{
    struct ddp_err err = {0};

    cr_assert_eq(ddp_launch_resolve(l, f, &err), 0, "%s", err.msg);
}

Test(launch, nproc_int_and_derived_defaults)
{
    struct ddp_launch l;
    struct ddp_launch_facts f = facts(NULL);

    setup(&l, DDP_CMD_RUN, NULL, "[job]\nscript = /home/u/train.py\nnproc_per_node = 3\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 3);
    cr_expect_eq(l.resolved.min_nproc_per_node, 3); /* restart: the same size again */
    cr_expect_str_eq(l.resolved.name, "train.py");
    cr_expect_eq(l.spec.min_nproc_per_node, 0, "the parsed spec keeps what the user wrote (nothing)");
    cr_expect(!l.spec.name || !*l.spec.name, "no name was given");
    cr_expect_str_eq(l.ctx.job.run_id, "0123456789ab");
    cr_expect_str_eq(l.ctx.python, "python3");
    cr_expect_str_eq(l.ctx.job.hostname, "node7");
    cr_expect_eq(l.ctx.job.spec, &l.resolved);
    cr_expect_null(l.ctx.gpus.holders); /* no topology: nothing held */
    cr_expect_eq(l.port_source, DDP_LAUNCH_PORT_RESERVE);
    cr_expect_not(l.lease);
    ddp_launch_free(&l);

    setup(&l, DDP_CMD_RUN, NULL,
          "[job]\nname = bert\nmodule = pkg.train\nnproc_per_node = 4\nrun_id = r1\n"
          "[restart]\non_timeout = downsize\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.resolved.min_nproc_per_node, 1); /* downsizing may go down to one */
    cr_expect_str_eq(l.resolved.name, "bert");
    cr_expect_str_eq(l.ctx.job.run_id, "r1");
    ddp_launch_free(&l);
}

Test(launch, run_id_python_and_address_from_the_environment)
{
    struct ddp_launch l;
    char *env[] = {"SLURM_JOB_ID=777", "SLURM_JOB_NODELIST=n1", "SLURM_JOB_NUM_NODES=1",
                   "PYTHON_EXEC=/opt/py/bin/python", NULL};
    struct ddp_launch_facts f = facts(env);
    struct ddp_err err;

    setup(&l, DDP_CMD_PLAN, NULL, "[job]\nprogram = /bin/true\nnproc_per_node = 1\nstandalone = yes\n");
    cr_assert_eq(ddp_launch_scheduler(&l, env, &err), 1, "%s", err.msg); /* as check_spec does */
    resolve_ok(&l, &f);
    cr_expect_str_eq(l.ctx.job.run_id, "slurm-777", "the scheduler's job id, the same on every node");
    cr_expect_str_eq(l.ctx.python, "/opt/py/bin/python");
    cr_expect_str_eq(l.ctx.master_addr, "127.0.0.1");
    ddp_launch_free(&l);

    /* several nodes without anything to agree on: torchrun's "none" */
    f = facts(NULL);
    setup(&l, DDP_CMD_PLAN, NULL,
          "[job]\nprogram = /bin/true\nnproc_per_node = 1\nnnodes = 2\nnode_rank = 1\nmaster_addr = n0\n"
          "master_port = 29400\n");
    resolve_ok(&l, &f);
    cr_expect_str_eq(l.ctx.job.run_id, "none");
    cr_expect_str_eq(l.ctx.master_addr, "n0");
    cr_expect_eq(l.ctx.nnodes, 2);
    cr_expect_eq(l.ctx.node_rank, 1);
    /* node 1 with an explicit port takes it as given; node 0 would reserve it */
    cr_expect_eq(l.port_source, DDP_LAUNCH_PORT_GIVEN);
    cr_expect_eq(l.ctx.master_port, 29400);
    ddp_launch_free(&l);
}

Test(launch, nproc_gpu_counts_usable_gpus)
{
    struct ddp_launch l;
    char *env[] = {"CUDA_VISIBLE_DEVICES=4,5,6", NULL};
    struct ddp_launch_facts f = facts(NULL);

    setup(&l, DDP_CMD_RUN, T4, "[job]\nprogram = /bin/true\nnproc_per_node = gpu\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 8);
    cr_expect(l.lease); /* gpus.lease = auto outside Slurm */
    cr_expect_null(l.ctx.gpus.holders);
    ddp_launch_free(&l);

    f = facts(env);
    setup(&l, DDP_CMD_RUN, T4, "[job]\nprogram = /bin/true\nnproc_per_node = gpu\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 3);
    cr_expect_str_eq(l.ctx.gpus.inherited_cvd, "4,5,6");
    ddp_launch_free(&l);

    /* auto without GPUs: one per CPU the process may use */
    f = facts(NULL);
    setup(&l, DDP_CMD_RUN, T4, "[job]\nprogram = /bin/true\nnproc_per_node = auto\n[gpus]\nselect = none\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 96);
    cr_expect_not(l.lease);
    ddp_launch_free(&l);

    /* no topology: cpu = the CPUs online */
    setup(&l, DDP_CMD_RUN, NULL, "[job]\nprogram = /bin/true\nnproc_per_node = cpu\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 6);
    ddp_launch_free(&l);
}

Test(launch, nproc_gpu_without_gpus_is_a_usage_error_except_in_doctor)
{
    struct ddp_launch l;
    struct ddp_launch_facts f = facts(NULL);
    struct ddp_err err = {0};

    setup(&l, DDP_CMD_RUN, NULL, "[job]\nprogram = /bin/true\nnproc_per_node = gpu\n");
    cr_expect_eq(ddp_launch_resolve(&l, &f, &err), -ENODEV);
    cr_expect_str_eq(err.msg, "nproc_per_node = gpu, but no usable GPU was found (no topology) (for CPU workers give "
                              "cpu, auto or a number)");
    cr_expect_eq(l.fail_status, 2);
    ddp_launch_free(&l);

    setup(&l, DDP_CMD_DOCTOR, NULL, "[job]\nprogram = /bin/true\nnproc_per_node = gpu\nmaster_port = 29444\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 1); /* the gpus check explains what is missing */
    cr_expect_eq(l.port_source, DDP_LAUNCH_PORT_NONE);
    cr_expect_eq(l.ctx.master_port, 29444);
    ddp_launch_free(&l);
}

Test(launch, several_nodes_need_a_source_of_node_ranks)
{
    struct ddp_launch l;
    struct ddp_launch_facts f = facts(NULL);
    struct ddp_err err = {0};

    /* static, no node rank, no scheduler: node 0, torchrun's --node-rank default (a second node 0 is refused when
     * it takes the port, integration 48) */
    setup(&l, DDP_CMD_RUN, NULL,
          "[job]\nprogram = /bin/true\nnproc_per_node = 1\nnnodes = 2\nmaster_addr = n0\nmaster_port = auto\n");
    cr_expect_eq(ddp_launch_resolve(&l, &f, &err), 0, "%s", err.msg);
    cr_expect_eq(l.ctx.node_rank, 0);
    ddp_launch_free(&l);

    /* static with a node rank and no port: torchrun's 29500, reserved on node 0 */
    setup(&l, DDP_CMD_RUN, NULL,
          "[job]\nprogram = /bin/true\nnproc_per_node = 1\nnnodes = 2\nnode_rank = 0\nmaster_addr = n0\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.port_source, DDP_LAUNCH_PORT_RESERVE);
    cr_expect_not(l.resolved.master_port.is_auto);
    cr_expect_eq(l.resolved.master_port.port, 29500);
    cr_expect(l.spec.master_port.is_auto, "the parsed spec keeps auto (the default)");
    cr_expect_str_eq(l.ctx.coord.rdzv_source, "static");
    cr_expect_eq(l.ctx.coord.join_timeout_ms, 900000);
    ddp_launch_free(&l);

    /* c10d: the endpoint's port is the rendezvous (29400 by default); MASTER_PORT is node 0's to choose */
    setup(&l, DDP_CMD_RUN, NULL,
          "[job]\nprogram = /bin/true\nnproc_per_node = 1\nnnodes = 1:2\nrdzv_backend = c10d\n"
          "master_addr = n0\n"); /* as load_spec sets it from rdzv_endpoint = n0 */
    resolve_ok(&l, &f);
    cr_expect(l.ctx.coord.dynamic);
    cr_expect_eq(l.ctx.coord.port, 29400);
    cr_expect(l.resolved.master_port.is_auto);
    cr_expect_str_eq(l.ctx.master_addr, "n0");
    cr_expect_str_eq(l.ctx.coord.rdzv_source, "c10d");
    cr_expect_eq(l.ctx.coord.join_timeout_ms, 600000);
    ddp_launch_free(&l);
}

static const struct ddp_lease_info leases[] = {
    {.busid = "0000:19:00.0", .pid = 4242, .job = "bert", .user = "alice", .comm = "python3", .ddplaunch = true},
    {.busid = "0000:35:00.0", .pid = 100, .job = "me", .user = "u"}, /* this launcher's own */
    {.busid = "0000:aa:00.0", .pid = 5, .job = "gone", .user = "u"}, /* not in this topology */
    {.busid = "0000:E7:00.0", .pid = 77, .job = "", .user = ""},     /* any case, no ddplaunch job */
};

Test(launch, gpus_other_jobs_lease_are_held_in_the_placement)
{
    struct ddp_launch l;
    struct ddp_launch_facts f = facts(NULL);
    struct ddp_attempt a = {0};
    struct ddp_err err = {0};

    f.leases = leases;
    f.nleases = sizeof leases / sizeof *leases;
    /* plan shows what a run without leasing would get: GPUs of other jobs are left out */
    setup(&l, DDP_CMD_PLAN, T4, "[job]\nprogram = /bin/true\nnproc_per_node = 4\n");
    resolve_ok(&l, &f);
    cr_expect_not(l.lease);
    cr_assert_not_null(l.ctx.gpus.holders);
    cr_expect_null(l.ctx.gpus.holders[0]);
    cr_expect_str_eq(l.ctx.gpus.holders[1], "job 'bert' (pid 4242, user alice, command python3)");
    cr_expect_null(l.ctx.gpus.holders[2]);
    cr_expect_str_eq(l.ctx.gpus.holders[4], "a process that is no ddplaunch job, job '?' (pid 77, user ?, command ?)");
    cr_assert_eq(ddp_plan_build(&l.ctx, 0, 4, NULL, 0, &a, &err), 0, "%s", err.msg);
    /* node 0 has three free GPUs, node 1 three: four GPUs span both, none of them held */
    for (size_t i = 0; i < a.nworkers; i++) {
        cr_expect_neq(a.workers[i].gpu, 1);
        cr_expect_neq(a.workers[i].gpu, 4);
    }
    ddp_attempt_free(&a);
    ddp_launch_free(&l);

    /* nproc = gpu counts every GPU: the lease step (a run) waits for held ones instead */
    setup(&l, DDP_CMD_RUN, T4, "[job]\nprogram = /bin/true\nnproc_per_node = gpu\n");
    resolve_ok(&l, &f);
    cr_expect_eq(l.ctx.nproc, 8);
    cr_expect(l.lease);
    cr_expect_null(l.ctx.gpus.holders);
    ddp_launch_free(&l);

    /* [gpus] lease = no: held GPUs are left out when counting */
    setup(&l, DDP_CMD_RUN, T4, "[job]\nprogram = /bin/true\nnproc_per_node = 8\n[gpus]\nlease = no\n");
    resolve_ok(&l, &f);
    cr_expect_not(l.lease);
    cr_expect_eq(ddp_plan_build(&l.ctx, 0, 8, NULL, 0, &a, &err), -ENODEV);
    cr_expect(strstr(err.msg, "(GPU 1: job 'bert' (pid 4242, user alice, command python3))"), "%s", err.msg);
    ddp_launch_free(&l);
}

Test(launch, holders_match_bus_ids_in_any_case)
{
    struct ddp_launch l;
    char **h;

    setup(&l, DDP_CMD_TOPO, T4, "[job]\nprogram = /bin/true\n");
    cr_expect_eq(ddp_topo_gpu_find(l.topo, "0000:19:00.0"), 1);
    cr_expect_eq(ddp_topo_gpu_find(l.topo, "0000:E7:00.0"), 4);
    cr_expect_eq(ddp_topo_gpu_find(l.topo, "0000:aa:00.0"), -1);
    h = ddp_launch_holders(l.topo, leases, 4, 100);
    cr_expect_str_eq(h[1], "job 'bert' (pid 4242, user alice, command python3)");
    cr_expect_null(h[2]);
    cr_expect_not_null(h[4]);
    ddp_launch_holders_free(h, ddp_topo_ngpus(l.topo));
    cr_expect_null(ddp_launch_holders(NULL, leases, 4, 100));
    ddp_launch_free(&l);
}
