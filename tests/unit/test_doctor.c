/* Unit tests for doctor: the facts it gathers, checked through the report (a cross-socket GPU selection on the
 * g4dn 2-socket fixture, too many GPUs, unsafe state directories) and the whole driver on this machine (every check
 * present, well under a second). The checks themselves are fed faults in test_check.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_expect.h"
#include "doctor/doctor.h"
#include "scratch.h"
#include "topo/topo.h"

/* ---- helpers ---- */

SCRATCH_SUITE(doctor);

static const struct ddp_check_result *find(const struct ddp_check_report *r, const char *check)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].check, check) == 0)
            return &r->v[i];
    cr_assert_fail("no '%s' result", check);
    return NULL;
}

static char *fixture(const char *name)
{
    const char *src = getenv("DDP_SRCDIR");

    cr_assert(src, "DDP_SRCDIR is not set (run through `make unit`)");
    return ddp_xasprintf("%s/tests/fixtures/topo/%s", src, name);
}

/* ---- GPUs on the g4dn fixture (2 sockets, GPUs 0-3 on node 0, 4-7 on node 1) ---- */

struct g4dn {
    struct ddp_spec spec;
    struct ddp_topo *topo;
    struct ddp_plan_job job;
    struct ddp_plan_gpus gpus;
    struct ddp_doctor_config dc;
    struct ddp_check_report r;
    char lock_env[128], xdg_env[128];
    char *envp[4];
};

/* GPUs other jobs hold, as launch.c's resolve step passes them (per topology GPU), or NULL. */
static const char *const *g4dn_holders;

static void g4dn_run(struct g4dn *g, int nproc, const char *select)
{
    char *path = fixture("2s-8gpu-aws-g4dn-metal-t4.xml");
    struct ddp_err err = {0};

    memset(g, 0, sizeof *g);
    ddp_spec_init(&g->spec);
    if (select)
        cr_assert_eq(ddp_spec_set(&g->spec, "gpus", "select", select, DDP_ORIGIN_CLI, "--set", &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_topo_load(path, &g->topo, &err), 0, "%s", err.msg);
    free(path);
    snprintf(g->lock_env, sizeof g->lock_env, "DDPLAUNCH_LOCK_DIR=%s/locks", base);
    snprintf(g->xdg_env, sizeof g->xdg_env, "XDG_RUNTIME_DIR=%s", base);
    g->envp[0] = g->lock_env;
    g->envp[1] = g->xdg_env;
    g->envp[2] = "PATH=/usr/bin:/bin";
    g->job.spec = &g->spec;
    g->job.base_env = g->envp;
    g->job.topo = g->topo;
    g->gpus.holders = g4dn_holders;
    g->dc.job = &g->job;
    g->dc.gpus = &g->gpus;
    g->dc.master_addr = "127.0.0.1";
    g->dc.nnodes = 1;
    g->dc.nproc = nproc;
    g->dc.python = "/usr/bin/python3";
    ddp_doctor_collect(&g->dc, &g->r);
}

static void g4dn_free(struct g4dn *g)
{
    ddp_check_report_free(&g->r);
    ddp_topo_destroy(g->topo);
    ddp_spec_free(&g->spec);
}

Test(doctor, same_numa_pick_is_ok)
{
    struct g4dn g;

    g4dn_run(&g, 4, NULL);
    expect_result(find(&g.r, "gpus"), DDP_CHECK_OK,
                  "8 GPUs visible (8 usable); would pick 0000:18:00.0,0000:19:00.0,0000:35:00.0,0000:36:00.0");
    expect_result(find(&g.r, "numa"), DDP_CHECK_OK, "share NUMA node 0");
    /* an XML topology describes another machine: NVML, driver and devices are not this machine's */
    cr_expect_eq(find(&g.r, "gpu-busy")->status, DDP_CHECK_SKIP);
    cr_expect_eq(find(&g.r, "driver")->status, DDP_CHECK_SKIP);
    cr_expect_eq(find(&g.r, "devices")->status, DDP_CHECK_SKIP);
    g4dn_free(&g);
}

Test(doctor, cross_socket_selection_names_a_better_set)
{
    struct g4dn g;

    g4dn_run(&g, 4, "0,1,4,5");
    expect_result(find(&g.r, "gpus"), DDP_CHECK_OK, "would pick 0000:18:00.0,0000:19:00.0,0000:e7:00.0,0000:e8:00.0");
    expect_result(find(&g.r, "numa"), DDP_CHECK_WARN, "span NUMA nodes 0,1, across sockets 0,1");
    expect_result(find(&g.r, "numa"), DDP_CHECK_WARN,
                  "0000:18:00.0,0000:19:00.0,0000:35:00.0,0000:36:00.0 on NUMA node 0 would not");
    cr_expect(strstr(find(&g.r, "numa")->todo, "[gpus] select = 0000:18:00.0"));
    cr_expect_geq(ddp_check_exit_status(&g.r), 1);
    g4dn_free(&g);
}

Test(doctor, eight_gpus_must_span_and_says_so)
{
    struct g4dn g;

    g4dn_run(&g, 8, NULL);
    expect_result(find(&g.r, "numa"), DDP_CHECK_WARN, "across sockets 0,1");
    cr_expect(strstr(find(&g.r, "numa")->todo, "at most 4 GPUs share a NUMA node"), "%s", find(&g.r, "numa")->todo);
    g4dn_free(&g);
}

Test(doctor, too_many_gpus_fails)
{
    struct g4dn g;

    g4dn_run(&g, 9, NULL);
    expect_result(find(&g.r, "gpus"), DDP_CHECK_FAIL, "8 GPUs visible, 8 usable, 9 wanted");
    cr_expect(strstr(find(&g.r, "gpus")->todo, "nproc_per_node = 8"));
    cr_expect_eq(ddp_check_exit_status(&g.r), 2);
    g4dn_free(&g);
}

Test(doctor, gpus_other_jobs_hold_are_left_out_of_the_pick)
{
    static const char *const held[8] = {
        [0] = "job 'bert' (pid 4242, user alice)", [1] = "job 'bert' (pid 4242, user alice)"};
    struct g4dn g;

    g4dn_holders = held;
    g4dn_run(&g, 4, NULL);
    g4dn_holders = NULL;
    /* node 0 keeps two free GPUs: the four come from node 1 */
    expect_result(find(&g.r, "gpus"), DDP_CHECK_OK,
                  "8 GPUs visible (6 usable); would pick 0000:e7:00.0,0000:e8:00.0,0000:f4:00.0,0000:f5:00.0");
    expect_result(find(&g.r, "numa"), DDP_CHECK_OK, "share NUMA node 1");
    g4dn_free(&g);

    /* seven GPUs cannot be had without the held ones */
    g4dn_holders = held;
    g4dn_run(&g, 7, NULL);
    g4dn_holders = NULL;
    expect_result(find(&g.r, "gpus"), DDP_CHECK_FAIL, "8 GPUs visible, 6 usable, 7 wanted");
    g4dn_free(&g);
}

/* ---- state directories ---- */

Test(doctor, state_dirs)
{
    char lock[128], xdg[128], lockd[96], privd[96];
    char *envp[] = {lock, xdg, NULL};
    struct ddp_check_report r = {0};

    snprintf(lockd, sizeof lockd, "%s/locks", base);
    snprintf(privd, sizeof privd, "%s/ddplaunch", base);
    snprintf(lock, sizeof lock, "DDPLAUNCH_LOCK_DIR=%s", lockd);
    snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", base);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_CHECK_OK, "usable");
    cr_expect(strstr(r.v[0].found, lockd) && strstr(r.v[0].found, privd), "%s", r.v[0].found);
    ddp_check_report_free(&r);

    /* world-writable without the sticky bit: anyone could delete others' info files; the leases themselves
     * are kernel locks, so only the job names are at stake: a warning */
    cr_assert_eq(chmod(lockd, 0777), 0);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_CHECK_WARN, lockd);
    ddp_check_report_free(&r);
    cr_assert_eq(chmod(lockd, 01777), 0);

    /* a private directory others can read */
    cr_assert_eq(chmod(privd, 0755), 0);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_CHECK_FAIL, privd);
    ddp_check_report_free(&r);

    /* a symlink in place of the lock directory */
    cr_assert_eq(chmod(privd, 0700), 0);
    cr_assert_eq(rmdir(lockd), 0);
    cr_assert_eq(symlink("/tmp", lockd), 0);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_CHECK_WARN, lockd);
    ddp_check_report_free(&r);
}

/* ---- the whole driver on this machine ---- */

Test(doctor, live_machine_runs_every_check_quickly)
{
    static const char *const checks[] = {"gpus",        "numa",        "gpu-busy", "leases",      "driver",
                                         "devices",     "nccl-lib",    "nccl-env", "master-port", "master-addr",
                                         "nccl-ifname", "gloo-ifname", "cpus",     "nofile",      "state-dir"};
    struct ddp_spec spec;
    struct ddp_plan_job job = {0};
    struct ddp_plan_gpus gpus = {0};
    struct ddp_check_report r = {0};
    char lock[128], xdg[128];
    char *envp[] = {lock, xdg, "NCCL_SOCKET_IFNAME=nosuchif0", NULL};
    struct ddp_err err = {0};
    long long t0;

    snprintf(lock, sizeof lock, "DDPLAUNCH_LOCK_DIR=%s/locks", base);
    snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", base);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_spec_set(&spec, "job", "master_port", "29431", DDP_ORIGIN_CLI, "--set", &err), 0, "%s", err.msg);
    job.spec = &spec;
    job.base_env = envp;
    cr_assert_eq(ddp_topo_load(NULL, &job.topo, &err), 0, "%s", err.msg);
    struct ddp_doctor_config dc = {
        .job = &job, .gpus = &gpus, .master_addr = "127.0.0.1", .nnodes = 1, .nproc = 2, .python = "python3"};
    t0 = ddp_now_ms();
    ddp_doctor_collect(&dc, &r);
    cr_expect_lt(ddp_now_ms() - t0, 1000, "doctor took %lld ms", ddp_now_ms() - t0);
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        cr_expect_geq(count(&r, checks[i]), 1, "no %s check", checks[i]);
    expect_result(find(&r, "nccl-ifname"), DDP_CHECK_FAIL, "NCCL_SOCKET_IFNAME=nosuchif0 matches no interface");
    expect_result(find(&r, "master-addr"), DDP_CHECK_OK, "127.0.0.1 reached through lo");
    expect_result(find(&r, "master-port"), DDP_CHECK_OK, "29431 is free");
    expect_result(find(&r, "state-dir"), DDP_CHECK_OK, base);
    cr_expect_eq(ddp_check_exit_status(&r), 2);
    ddp_check_report_free(&r);
    ddp_topo_destroy(job.topo);
    ddp_spec_free(&spec);
}
