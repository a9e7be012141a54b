/* Unit tests for doctor: each check fed faults (a cross-socket GPU selection on the g4dn 2-socket fixture, fake
 * /proc/net/tcp with a listener on the master port, fake NVML answers with a busy GPU, bad NCCL variables, a tiny
 * RLIMIT_NOFILE, a missing interface name, unsafe state directories...), the report's exit status, text and JSON,
 * and the whole driver on this machine (every check present, well under a second). */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"
#include "topo.h"

/* ---- helpers ---- */

static char base[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void setup(void)
{
    snprintf(base, sizeof base, "/tmp/ddp-doctor-test.XXXXXX");
    cr_assert_not_null(mkdtemp(base));
}

static void teardown(void)
{
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(doctor, .init = setup, .fini = teardown);

static const struct ddp_doctor_result *find(const struct ddp_doctor_report *r, const char *check)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].check, check) == 0)
            return &r->v[i];
    cr_assert_fail("no '%s' result", check);
    return NULL;
}

static size_t count(const struct ddp_doctor_report *r, const char *check)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n; i++)
        n += strcmp(r->v[i].check, check) == 0;
    return n;
}

#define expect_result(res, st, text)                                                                              \
    do {                                                                                                          \
        const struct ddp_doctor_result *res_ = (res);                                                             \
        cr_expect_eq(res_->status, (st), "%s: status %s, expected %s: %s", res_->check,                            \
                     ddp_doctor_status_name(res_->status), ddp_doctor_status_name(st), res_->found);              \
        cr_expect(strstr(res_->found, (text)) != NULL, "%s: '%s' not in: %s", res_->check, (text), res_->found);  \
    } while (0)

static char *fixture(const char *name)
{
    const char *src = getenv("DDP_SRCDIR");

    cr_assert(src, "DDP_SRCDIR is not set (run through `make unit`)");
    return ddp_xasprintf("%s/tests/fixtures/topo/%s", src, name);
}

static char *print_to_string(const struct ddp_doctor_report *r, bool json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f);
    ddp_doctor_print(r, json, f);
    fclose(f);
    return text;
}

/* ---- report ---- */

Test(doctor, exit_status_is_the_worst_result)
{
    struct ddp_doctor_report r = {0};

    cr_expect_eq(ddp_doctor_exit_status(&r), 0);
    ddp_doctor_add(&r, DDP_DOCTOR_OK, "a", NULL, "fine");
    ddp_doctor_add(&r, DDP_DOCTOR_SKIP, "b", NULL, "nothing to check");
    cr_expect_eq(ddp_doctor_exit_status(&r), 0);
    ddp_doctor_add(&r, DDP_DOCTOR_WARN, "c", "do this", "doubtful");
    cr_expect_eq(ddp_doctor_exit_status(&r), 1);
    ddp_doctor_add(&r, DDP_DOCTOR_FAIL, "d", "do that", "broken %d", 42);
    ddp_doctor_add(&r, DDP_DOCTOR_OK, "e", NULL, "fine again");
    cr_expect_eq(ddp_doctor_exit_status(&r), 2);
    ddp_doctor_report_free(&r);
}

Test(doctor, text_is_one_line_per_check)
{
    struct ddp_doctor_report r = {0};
    char *text;

    ddp_doctor_add(&r, DDP_DOCTOR_OK, "gpus", NULL, "2 GPUs visible");
    ddp_doctor_add(&r, DDP_DOCTOR_FAIL, "master-port", "use master_port = auto", "29500 is in use by pid 1234 (python3)");
    text = print_to_string(&r, false);
    cr_expect_str_eq(text, "ok    gpus        2 GPUs visible\n"
                           "fail  master-port 29500 is in use by pid 1234 (python3); use master_port = auto\n");
    free(text);
    ddp_doctor_report_free(&r);
}

Test(doctor, json_escapes_and_counts)
{
    struct ddp_doctor_report r = {0};
    char *text;

    ddp_doctor_add(&r, DDP_DOCTOR_WARN, "nccl-env", NULL, "value \"x\\y\"\tend");
    ddp_doctor_add(&r, DDP_DOCTOR_OK, "gpus", NULL, "fine");
    text = print_to_string(&r, true);
    cr_expect_str_eq(text, "{\"status\":\"warn\",\"exit_status\":1,\"counts\":{\"ok\":1,\"skip\":0,\"warn\":1,"
                           "\"fail\":0},\"checks\":[{\"check\":\"nccl-env\",\"status\":\"warn\",\"found\":"
                           "\"value \\\"x\\\\y\\\"\\tend\",\"todo\":null},{\"check\":\"gpus\",\"status\":\"ok\","
                           "\"found\":\"fine\",\"todo\":null}]}\n");
    free(text);
    ddp_doctor_report_free(&r);
}

/* ---- GPUs on the g4dn fixture (2 sockets, GPUs 0-3 on node 0, 4-7 on node 1) ---- */

struct g4dn {
    struct ddp_spec spec;
    struct ddp_topo *topo;
    struct ddp_plan_ctx ctx;
    struct ddp_doctor_report r;
    char lock_env[128], xdg_env[128];
    char *envp[4];
};

static void g4dn_run(struct g4dn *g, int nproc, const char *select)
{
    char *path = fixture("2s-8gpu-aws-g4dn-metal-t4.xml");
    struct ddp_err err = {0};

    memset(g, 0, sizeof *g);
    ddp_spec_init(&g->spec);
    if (select)
        cr_assert_eq(ddp_spec_set(&g->spec, "gpus", "select", select, DDP_ORIGIN_CLI, "--set", &err), 0, "%s",
                     err.msg);
    cr_assert_eq(ddp_topo_load(path, &g->topo, &err), 0, "%s", err.msg);
    free(path);
    snprintf(g->lock_env, sizeof g->lock_env, "DDPLAUNCH_LOCK_DIR=%s/locks", base);
    snprintf(g->xdg_env, sizeof g->xdg_env, "XDG_RUNTIME_DIR=%s", base);
    g->envp[0] = g->lock_env;
    g->envp[1] = g->xdg_env;
    g->envp[2] = "PATH=/usr/bin:/bin";
    g->ctx.spec = &g->spec;
    g->ctx.base_env = g->envp;
    g->ctx.master_addr = "127.0.0.1";
    g->ctx.nnodes = 1;
    g->ctx.nproc = nproc;
    g->ctx.python = "/usr/bin/python3";
    g->ctx.topo = g->topo;
    ddp_doctor_collect(&g->ctx, &g->r);
}

static void g4dn_free(struct g4dn *g)
{
    ddp_doctor_report_free(&g->r);
    ddp_topo_destroy(g->topo);
    ddp_spec_free(&g->spec);
}

Test(doctor, same_numa_pick_is_ok)
{
    struct g4dn g;

    g4dn_run(&g, 4, NULL);
    expect_result(find(&g.r, "gpus"), DDP_DOCTOR_OK,
                  "8 GPUs visible (8 usable); would pick 0000:18:00.0,0000:19:00.0,0000:35:00.0,0000:36:00.0");
    expect_result(find(&g.r, "numa"), DDP_DOCTOR_OK, "share NUMA node 0");
    /* an XML topology describes another machine: NVML, driver and devices are not this machine's */
    cr_expect_eq(find(&g.r, "gpu-busy")->status, DDP_DOCTOR_SKIP);
    cr_expect_eq(find(&g.r, "driver")->status, DDP_DOCTOR_SKIP);
    cr_expect_eq(find(&g.r, "devices")->status, DDP_DOCTOR_SKIP);
    g4dn_free(&g);
}

Test(doctor, cross_socket_selection_names_a_better_set)
{
    struct g4dn g;

    g4dn_run(&g, 4, "0,1,4,5");
    expect_result(find(&g.r, "gpus"), DDP_DOCTOR_OK, "would pick 0000:18:00.0,0000:19:00.0,0000:e7:00.0,0000:e8:00.0");
    expect_result(find(&g.r, "numa"), DDP_DOCTOR_WARN, "span NUMA nodes 0,1, across sockets 0,1");
    expect_result(find(&g.r, "numa"), DDP_DOCTOR_WARN,
                  "0000:18:00.0,0000:19:00.0,0000:35:00.0,0000:36:00.0 on NUMA node 0 would not");
    cr_expect(strstr(find(&g.r, "numa")->todo, "[gpus] select = 0000:18:00.0"));
    cr_expect_geq(ddp_doctor_exit_status(&g.r), 1);
    g4dn_free(&g);
}

Test(doctor, eight_gpus_must_span_and_says_so)
{
    struct g4dn g;

    g4dn_run(&g, 8, NULL);
    expect_result(find(&g.r, "numa"), DDP_DOCTOR_WARN, "across sockets 0,1");
    cr_expect(strstr(find(&g.r, "numa")->todo, "at most 4 GPUs share a NUMA node"), "%s", find(&g.r, "numa")->todo);
    g4dn_free(&g);
}

Test(doctor, too_many_gpus_fails)
{
    struct g4dn g;

    g4dn_run(&g, 9, NULL);
    expect_result(find(&g.r, "gpus"), DDP_DOCTOR_FAIL, "8 GPUs visible, 8 usable, 9 wanted");
    cr_expect(strstr(find(&g.r, "gpus")->todo, "nproc_per_node = 8"));
    cr_expect_eq(ddp_doctor_exit_status(&g.r), 2);
    g4dn_free(&g);
}

/* ---- busy GPUs (fake NVML answers) ---- */

static struct ddp_doctor_gpu fake_gpu(const char *busid, int numa, long long used_mib, long long total_mib, int util,
                                      const char *users)
{
    struct ddp_doctor_gpu g = {.vendor = 0x10de, .numa = numa, .package = numa, .util = util};

    snprintf(g.busid, sizeof g.busid, "%s", busid);
    g.mem_used = used_mib << 20;
    g.mem_total = total_mib << 20;
    snprintf(g.users, sizeof g.users, "%s", users);
    return g;
}

Test(doctor, busy_gpu_named_with_its_user)
{
    struct ddp_doctor_gpu all[3] = {
        fake_gpu("0000:18:00.0", 0, 300, 81920, 0, ""),
        fake_gpu("0000:19:00.0", 0, 76800, 81920, 97, "pid 1234 (python3, 75.0 GiB)"),
        fake_gpu("0000:1a:00.0", 0, 4096, 81920, 3, "pid 99 (python3, 4.0 GiB)"),
    };
    int picked[3] = {0, 1, 2};
    struct ddp_doctor_gpus g = {.have_topo = true, .all = all, .nall = 3, .want_gpus = true, .nproc = 3,
                                .nusable = 3, .picked = picked, .npicked = 3, .nvml = true};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "0000:19:00.0: 75.0 of 80.0 GiB in use (94%), 97% busy, by pid 1234 (python3");
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "0000:1a:00.0: 4.0 of 80.0 GiB in use (5%), 3% busy, by pid 99");
    cr_expect(strstr(r.v[0].found, "0000:18:00.0") == NULL, "idle GPU listed: %s", r.v[0].found);
    cr_expect(strstr(r.v[0].todo, "max_memory_used"));
    ddp_doctor_report_free(&r);

    /* only the moderately used one: warn */
    picked[1] = 2;
    g.npicked = 2;
    ddp_doctor_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_WARN, "0000:1a:00.0");
    ddp_doctor_report_free(&r);

    /* busy by utilisation alone */
    all[0].util = 55;
    g.npicked = 1;
    ddp_doctor_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_WARN, "55% busy");
    ddp_doctor_report_free(&r);

    all[0].util = 0;
    ddp_doctor_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "idle: at most 300 MiB in use, 0% busy");
    ddp_doctor_report_free(&r);

    g.nvml = false;
    g.nvml_status = "NVML: not found (libnvidia-ml.so.1: cannot open shared object file)";
    ddp_doctor_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_SKIP, "libnvidia-ml.so.1");
    ddp_doctor_report_free(&r);
}

Test(doctor, no_topology_warns)
{
    struct ddp_doctor_gpus g = {.nproc = 2};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_gpus(&r, &g);
    ddp_doctor_check_numa(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_WARN, "topology unavailable");
    cr_expect_eq(r.v[1].status, DDP_DOCTOR_SKIP);
    ddp_doctor_report_free(&r);
}

Test(doctor, leases_of_other_jobs)
{
    struct ddp_lease_info l[2] = {{.busid = "0000:18:00.0", .pid = 4242, .job = "train-a", .user = "bob"},
                                  {.busid = "0000:19:00.0", .pid = 77, .job = "me", .user = "root"}};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_leases(&r, l, 2, 77, 0);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "1 GPU leased, left out of the pick: 0000:18:00.0 by job 'train-a' (pid 4242, user bob)");
    ddp_doctor_check_leases(&r, NULL, 0, 77, 0);
    expect_result(&r.v[1], DDP_DOCTOR_OK, "no GPU leased");
    ddp_doctor_check_leases(&r, NULL, 0, 77, -EACCES);
    expect_result(&r.v[2], DDP_DOCTOR_WARN, "Permission denied");
    ddp_doctor_report_free(&r);
}

/* ---- master port (fake /proc/net/tcp) ---- */

#define TCP_HEADER                                                                                                 \
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
/* 0.0.0.0:29500 LISTEN (0A) by uid 1000, inode 5555; 127.0.0.1:29501 ESTABLISHED (01): not a listener */
static const char tcp_listen_29500[] =
    TCP_HEADER
    "   0: 00000000:733C 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5555 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:733D 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 5556 1 "
    "0000000000000000 20 4 30 10 -1\n";

Test(doctor, port_held_by_a_listener_fails_naming_it)
{
    struct ddp_port_holder h = {.pid = 1234, .uid = 1000, .comm = "python3", .cmdline = "python3 train.py",
                                .user = "alice", .addr = "0.0.0.0"};
    struct ddp_doctor_port p = {.spec = {.port = 29500}, .master_addr = "127.0.0.1", .tcp = tcp_listen_29500,
                                .tcp6 = TCP_HEADER, .holder = &h, .ephemeral = "32768\t60999\n"};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "29500 is in use by pid 1234 (python3, user alice: python3 train.py)");
    cr_expect_str_eq(r.v[0].todo, "use master_port = auto");

    /* the holder's process not visible: still fails, with the uid and address from /proc/net/tcp */
    p.holder = NULL;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[1], DDP_DOCTOR_FAIL, "not visible here (uid 1000, listening on 0.0.0.0)");

    /* 29501 has only an established connection: free */
    p.spec.port = 29501;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[2], DDP_DOCTOR_OK, "29501 is free");

    /* reserved by another ddplaunch job */
    p.lock_holder = "pid 99 (ddplaunch, user bob)";
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[3], DDP_DOCTOR_FAIL, "reserved by another ddplaunch job: pid 99 (ddplaunch, user bob)");
    p.lock_holder = NULL;

    /* the bind test says busy although /proc shows nothing (another namespace, bound without listen) */
    p.probe_rc = -EADDRINUSE;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[4], DDP_DOCTOR_FAIL, "holds it without listening");

    p.probe_rc = -EACCES;
    p.spec.port = 80;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[5], DDP_DOCTOR_FAIL, "80 cannot be bound: Permission denied");
    p.probe_rc = 0;

    /* in the ephemeral range */
    p.spec.port = 40000;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[6], DDP_DOCTOR_WARN, "ephemeral range 32768\t60999");

    /* another node: not checked here */
    p.node_rank = 1;
    ddp_doctor_check_port(&r, &p);
    cr_expect_eq(r.v[7].status, DDP_DOCTOR_SKIP);
    ddp_doctor_report_free(&r);
}

Test(doctor, auto_port_counts_free_ports)
{
    struct ddp_doctor_port p = {.spec = {.is_auto = true, .lo = 29500, .hi = 29509}, .tcp = tcp_listen_29500,
                                .ephemeral = "32768\t60999\n"};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "auto: 9 of 10 ports in 29500-29509 free now (first 29501)");
    p.spec.lo = p.spec.hi = 29500;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[1], DDP_DOCTOR_FAIL, "every port in 29500-29500 is in use");
    p.spec.lo = 32000, p.spec.hi = 33000;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[2], DDP_DOCTOR_WARN, "overlaps the ephemeral range");
    /* default range */
    p.spec.lo = p.spec.hi = 0;
    ddp_doctor_check_port(&r, &p);
    expect_result(&r.v[3], DDP_DOCTOR_OK, "499 of 500 ports in 29500-29999");
    ddp_doctor_report_free(&r);
}

/* ---- master address, interfaces ---- */

Test(doctor, master_addr_faults)
{
    struct ddp_doctor_report r = {0};
    struct ddp_doctor_addr a = {.addr = "node0.invalid", .nnodes = 2, .gai_rc = -2,
                                .gai_error = "Name or service not known"};

    ddp_doctor_check_addr(&r, &a);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "node0.invalid does not resolve: Name or service not known");

    a = (struct ddp_doctor_addr){.addr = "localhost", .nnodes = 2, .resolved = "127.0.0.1", .loopback = true,
                                 .src_ip = "127.0.0.1", .ifname = "lo"};
    ddp_doctor_check_addr(&r, &a);
    expect_result(&r.v[1], DDP_DOCTOR_FAIL, "loopback address (127.0.0.1), but nnodes = 2");
    a.nnodes = 1;
    ddp_doctor_check_addr(&r, &a);
    expect_result(&r.v[2], DDP_DOCTOR_OK, "localhost resolves to 127.0.0.1, reached through lo");

    a = (struct ddp_doctor_addr){.addr = "10.9.9.9", .nnodes = 2, .resolved = "10.9.9.9", .route_errno = ENETUNREACH};
    ddp_doctor_check_addr(&r, &a);
    expect_result(&r.v[3], DDP_DOCTOR_FAIL, "cannot be reached from here: Network is unreachable");
    cr_expect(strstr(r.v[3].todo, "ip route get 10.9.9.9"));
    ddp_doctor_report_free(&r);
}

Test(doctor, nccl_ifname_syntax)
{
    cr_expect(ddp_doctor_ifname_match("eth", "eth0"));
    cr_expect(ddp_doctor_ifname_match("eth", "eth10"));
    cr_expect(!ddp_doctor_ifname_match("eth", "ib0"));
    cr_expect(ddp_doctor_ifname_match("ib,eth", "ib0"));
    cr_expect(ddp_doctor_ifname_match("^docker,lo", "eth0"));
    cr_expect(!ddp_doctor_ifname_match("^docker,lo", "docker0"));
    cr_expect(!ddp_doctor_ifname_match("^docker,lo", "lo"));
    cr_expect(ddp_doctor_ifname_match("=eth0", "eth0"));
    cr_expect(!ddp_doctor_ifname_match("=eth0", "eth0.100"));
    cr_expect(!ddp_doctor_ifname_match("^=eth0", "eth0"));
    cr_expect(ddp_doctor_ifname_match("^=eth0", "eth0.100"));
    cr_expect(ddp_doctor_ifname_match("eth0:1234", "eth0"));
}

Test(doctor, missing_interface_name)
{
    const char *ifs[] = {"lo", "eth0", "ib0"};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_ifname(&r, "NCCL_SOCKET_IFNAME", "eth9", false, ifs, 3, NULL);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "NCCL_SOCKET_IFNAME=eth9 matches no interface here (lo, eth0, ib0)");
    ddp_doctor_check_ifname(&r, "NCCL_SOCKET_IFNAME", "eth,enp", false, ifs, 3, NULL);
    expect_result(&r.v[1], DDP_DOCTOR_WARN, "enp matches no interface here");
    ddp_doctor_check_ifname(&r, "NCCL_SOCKET_IFNAME", "^lo,eth", false, ifs, 3, NULL);
    expect_result(&r.v[2], DDP_DOCTOR_OK, "selects ib0");
    ddp_doctor_check_ifname(&r, "NCCL_SOCKET_IFNAME", "ib", false, ifs, 3, "eth0");
    expect_result(&r.v[3], DDP_DOCTOR_WARN, "selects ib0, but master_addr is reached through eth0");
    ddp_doctor_check_ifname(&r, "NCCL_SOCKET_IFNAME", "^lo,eth,ib", false, ifs, 3, NULL);
    cr_expect_eq(r.v[4].status, DDP_DOCTOR_FAIL, "%s", r.v[4].found);
    ddp_doctor_check_ifname(&r, "NCCL_SOCKET_IFNAME", NULL, false, ifs, 3, NULL);
    expect_result(&r.v[5], DDP_DOCTOR_OK, "unset");
    /* gloo: exact names only */
    ddp_doctor_check_ifname(&r, "GLOO_SOCKET_IFNAME", "eth", true, ifs, 3, NULL);
    expect_result(&r.v[6], DDP_DOCTOR_FAIL, "GLOO_SOCKET_IFNAME=eth matches no interface");
    ddp_doctor_check_ifname(&r, "GLOO_SOCKET_IFNAME", "eth0,ib0", true, ifs, 3, "eth0");
    expect_result(&r.v[7], DDP_DOCTOR_OK, "selects eth0, ib0");
    ddp_doctor_report_free(&r);
}

/* ---- NCCL variables ---- */

Test(doctor, bad_nccl_env)
{
    struct ddp_doctor_report r = {0};
    struct ddp_kvlist kv = {0};
    char *env_bad[] = {"NCCL_IB_TIMEOUT=600", "PATH=/bin", NULL};
    char *env_ok[] = {"NCCL_DEBUG=INFO", "HOME=/root", NULL};

    ddp_kvlist_set(&kv, "NCCL_SOCKET_TIMEOUT", "600", DDP_ORIGIN_SPEC, "job.ini", 7);
    ddp_doctor_check_nccl_env(&r, &kv, env_ok);
    cr_expect_eq(count(&r, "nccl-env"), 1);
    expect_result(&r.v[0], DDP_DOCTOR_WARN, "NCCL_SOCKET_TIMEOUT");
    ddp_doctor_report_free(&r);

    ddp_doctor_check_nccl_env(&r, NULL, env_bad);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "NCCL_IB_TIMEOUT=600");
    ddp_doctor_report_free(&r);

    ddp_doctor_check_nccl_env(&r, NULL, env_ok);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "1 NCCL/torch variable valid");
    ddp_doctor_report_free(&r);
    ddp_kvlist_free(&kv);
}

/* ---- driver, devices, libnccl ---- */

Test(doctor, driver_and_devices)
{
    const char *all[] = {"nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"};
    const char *no_uvm[] = {"nvidia0", "nvidiactl"};
    const char *no_ctl[] = {"nvidia0"};
    struct ddp_doctor_driver d = {.n_nvidia = 2, .nvml_found = true, .driver = "550.54.15", .cuda_version = 12040,
                                  .devs = all, .ndevs = 4};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_driver(&r, &d);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "NVIDIA driver 550.54.15, CUDA driver API 12.4");
    ddp_doctor_check_devices(&r, &d);
    expect_result(&r.v[1], DDP_DOCTOR_OK, "2 of 2 /dev/nvidiaN present");
    d.devs = no_uvm, d.ndevs = 2;
    ddp_doctor_check_devices(&r, &d);
    expect_result(&r.v[2], DDP_DOCTOR_WARN, "/dev/nvidia-uvm missing");
    d.devs = no_ctl, d.ndevs = 1;
    ddp_doctor_check_devices(&r, &d);
    expect_result(&r.v[3], DDP_DOCTOR_FAIL, "/dev/nvidiactl missing");
    d.ndevs = 0;
    ddp_doctor_check_devices(&r, &d);
    expect_result(&r.v[4], DDP_DOCTOR_FAIL, "no /dev/nvidia*");

    /* a container without the driver's libraries */
    d.cuda_version = -1;
    d.cuda_error = "libcuda.so.1: cannot open shared object file";
    ddp_doctor_check_driver(&r, &d);
    expect_result(&r.v[5], DDP_DOCTOR_FAIL, "driver 550.54.15, but libcuda.so.1 does not load");
    d.nvml_found = false;
    d.nvml_status = "NVML: not found";
    ddp_doctor_check_driver(&r, &d);
    expect_result(&r.v[6], DDP_DOCTOR_FAIL, "2 NVIDIA GPUs, but no driver library");
    d.cuda_version = 11080;
    ddp_doctor_check_driver(&r, &d);
    expect_result(&r.v[7], DDP_DOCTOR_WARN, "CUDA driver API 11.8, but NVML does not load");

    d.n_nvidia = 0;
    ddp_doctor_check_driver(&r, &d);
    ddp_doctor_check_devices(&r, &d);
    cr_expect_eq(r.v[8].status, DDP_DOCTOR_SKIP);
    cr_expect_eq(r.v[9].status, DDP_DOCTOR_SKIP);
    ddp_doctor_report_free(&r);
}

Test(doctor, ldcache_parser)
{
    static const char cache[] = "glibc-ld.so.cache1.1\0\x03\x03\0\0libnccl.so.2\0/usr/lib/x86_64-linux-gnu/libnccl.so.2"
                                "\0libc.so.6\0/lib/x86_64-linux-gnu/libc.so.6\0/opt/x/libnccl.so\0"
                                "/usr/lib/x86_64-linux-gnu/libnccl.so.2\0/trailing/libnccl.so.2";
    struct ddp_strv out = {0};

    cr_expect_eq(ddp_doctor_ldcache_find(cache, sizeof cache - 1, "libnccl.so", &out), 2);
    cr_assert_eq(out.n, 2);
    cr_expect_str_eq(out.v[0], "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
    cr_expect_str_eq(out.v[1], "/opt/x/libnccl.so");
    ddp_strv_clear(&out);

    /* this machine's real cache knows libc */
    FILE *f = fopen("/etc/ld.so.cache", "rb");
    if (f) {
        static char buf[8 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);

        fclose(f);
        cr_expect_geq(ddp_doctor_ldcache_find(buf, n, "libc.so", &out), 1);
        cr_expect(out.n && strstr(out.v[0], "/libc.so"));
        ddp_strv_clear(&out);
    }
}

Test(doctor, nccl_lib)
{
    const char *bundled[] = {"/usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2"};
    const char *sys[] = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
    struct ddp_doctor_nccl_lib l = {.n_nvidia = 2, .torch_dir = "/usr/lib/python3/dist-packages/torch",
                                    .torch_cuda = 0};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_nccl_lib(&r, &l);
    expect_result(&r.v[0], DDP_DOCTOR_WARN, "CPU-only build");
    l.torch_cuda = 1;
    ddp_doctor_check_nccl_lib(&r, &l);
    expect_result(&r.v[1], DDP_DOCTOR_WARN, "libnccl.so not found");
    l.system = sys, l.nsystem = 1;
    ddp_doctor_check_nccl_lib(&r, &l);
    expect_result(&r.v[2], DDP_DOCTOR_OK, "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
    l.bundled = bundled, l.nbundled = 1;
    ddp_doctor_check_nccl_lib(&r, &l);
    expect_result(&r.v[3], DDP_DOCTOR_OK, "nvidia/nccl/lib/libnccl.so.2 (torch's pip dependency)");
    l.n_nvidia = 0;
    ddp_doctor_check_nccl_lib(&r, &l);
    cr_expect_eq(r.v[4].status, DDP_DOCTOR_SKIP);
    ddp_doctor_report_free(&r);
}

/* ---- CPUs ---- */

Test(doctor, cpu_lists)
{
    cr_expect_eq(ddp_doctor_list_count("0-3,8,10-11"), 7);
    cr_expect_eq(ddp_doctor_list_count("0"), 1);
    cr_expect_eq(ddp_doctor_list_count("0-1\n"), 2);
    cr_expect_eq(ddp_doctor_list_count("3-1"), -1);
    cr_expect_eq(ddp_doctor_list_count("a"), -1);
    cr_expect_eq(ddp_doctor_list_count(NULL), -1);
}

Test(doctor, cpus_versus_the_plan)
{
    struct ddp_doctor_report r = {0};
    const char *cpus_ok[] = {"0-3", "4-7"};
    const char *cpus_out[] = {"0-3", "8-11"};
    const char *cpus_empty[] = {"0-3", ""};
    const char *cpus_shared[] = {"0-3", "2-5"};
    const char *mems[] = {"0", "1"};
    struct ddp_doctor_cpus c = {.cpus_allowed = "0-7", .mems_allowed = "0-1", .nproc = 2, .bind = DDP_BIND_NODE,
                                .rank_cpus = cpus_ok, .rank_mems = mems, .nranks = 2};

    ddp_doctor_check_cpus(&r, &c);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "8 CPUs allowed (0-7), memory nodes 0-1; 2 workers, bind = node");
    c.rank_cpus = cpus_out;
    ddp_doctor_check_cpus(&r, &c);
    expect_result(&r.v[1], DDP_DOCTOR_FAIL, "rank 1 is bound to CPUs 8-11 outside the allowed 0-7");
    c.rank_cpus = cpus_empty;
    ddp_doctor_check_cpus(&r, &c);
    expect_result(&r.v[2], DDP_DOCTOR_FAIL, "rank 1 gets no CPU");
    c.rank_cpus = cpus_shared;
    c.bind = DDP_BIND_EXCLUSIVE;
    ddp_doctor_check_cpus(&r, &c);
    expect_result(&r.v[3], DDP_DOCTOR_WARN, "exclusive binding, but ranks 0 and 1 share CPUs");
    c.rank_cpus = cpus_ok;
    c.mems_allowed = "0"; /* cgroup cpuset.mems restricted to node 0 */
    ddp_doctor_check_cpus(&r, &c);
    expect_result(&r.v[4], DDP_DOCTOR_WARN, "rank 1 binds memory to node 1, but only 0 may be used");
    /* more workers than CPUs (a 2-CPU Slurm allocation, 4 workers) */
    c = (struct ddp_doctor_cpus){.cpus_allowed = "0-1", .nproc = 4, .bind = DDP_BIND_NONE};
    ddp_doctor_check_cpus(&r, &c);
    expect_result(&r.v[5], DDP_DOCTOR_WARN, "4 workers share 2 allowed CPUs (0-1)");
    ddp_doctor_report_free(&r);
}

/* ---- open files ---- */

Test(doctor, tiny_nofile_limit)
{
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_nofile(&r, 64, 64, 8);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, "open files limit 64 (hard 64) is below the 80 the launcher needs for 8 workers");
    cr_expect(strstr(r.v[0].todo, "hard limit is 64 too"), "%s", r.v[0].todo);
    ddp_doctor_check_nofile(&r, 1024, 524288, 8);
    expect_result(&r.v[1], DDP_DOCTOR_WARN, "open files limit 1024 (hard 524288)");
    cr_expect_str_eq(r.v[1].todo, "raise it before starting: ulimit -n 65536");
    ddp_doctor_check_nofile(&r, 1024, 4096, 8);
    cr_expect_str_eq(r.v[2].todo, "raise it before starting: ulimit -n 4096");
    ddp_doctor_check_nofile(&r, 65536, (unsigned long long)RLIM_INFINITY, 8);
    expect_result(&r.v[3], DDP_DOCTOR_OK, "open files limit 65536 (hard unlimited)");
    ddp_doctor_report_free(&r);
}

/* ---- state directories ---- */

Test(doctor, state_dirs)
{
    char lock[128], xdg[128], lockd[96], privd[96];
    char *envp[] = {lock, xdg, NULL};
    struct ddp_doctor_report r = {0};

    snprintf(lockd, sizeof lockd, "%s/locks", base);
    snprintf(privd, sizeof privd, "%s/ddplaunch", base);
    snprintf(lock, sizeof lock, "DDPLAUNCH_LOCK_DIR=%s", lockd);
    snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", base);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_DOCTOR_OK, "usable");
    cr_expect(strstr(r.v[0].found, lockd) && strstr(r.v[0].found, privd), "%s", r.v[0].found);
    ddp_doctor_report_free(&r);

    /* world-writable without the sticky bit: anyone could delete others' lock files */
    cr_assert_eq(chmod(lockd, 0777), 0);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    cr_expect_eq(ddp_doctor_exit_status(&r), 2);
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, lockd);
    ddp_doctor_report_free(&r);
    cr_assert_eq(chmod(lockd, 01777), 0);

    /* a private directory others can read */
    cr_assert_eq(chmod(privd, 0755), 0);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, privd);
    ddp_doctor_report_free(&r);

    /* a symlink in place of the lock directory */
    cr_assert_eq(chmod(privd, 0700), 0);
    cr_assert_eq(rmdir(lockd), 0);
    cr_assert_eq(symlink("/tmp", lockd), 0);
    ddp_doctor_check_state_dirs(&r, envp, getuid());
    expect_result(&r.v[0], DDP_DOCTOR_FAIL, lockd);
    ddp_doctor_report_free(&r);
}

/* ---- the whole driver on this machine ---- */

Test(doctor, live_machine_runs_every_check_quickly)
{
    static const char *const checks[] = {"gpus", "numa", "gpu-busy", "leases", "driver", "devices", "nccl-lib",
                                         "nccl-env", "master-port", "master-addr", "nccl-ifname", "gloo-ifname",
                                         "cpus", "nofile", "state-dir"};
    struct ddp_spec spec;
    struct ddp_plan_ctx ctx = {0};
    struct ddp_doctor_report r = {0};
    char lock[128], xdg[128];
    char *envp[] = {lock, xdg, "NCCL_SOCKET_IFNAME=nosuchif0", NULL};
    struct ddp_err err = {0};
    long long t0;

    snprintf(lock, sizeof lock, "DDPLAUNCH_LOCK_DIR=%s/locks", base);
    snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", base);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_spec_set(&spec, "job", "master_port", "29431", DDP_ORIGIN_CLI, "--set", &err), 0, "%s", err.msg);
    ctx.spec = &spec;
    ctx.base_env = envp;
    ctx.master_addr = "127.0.0.1";
    ctx.nnodes = 1;
    ctx.nproc = 2;
    ctx.python = "python3";
    cr_assert_eq(ddp_topo_load(NULL, &ctx.topo, &err), 0, "%s", err.msg);
    t0 = ddp_now_ms();
    ddp_doctor_collect(&ctx, &r);
    cr_expect_lt(ddp_now_ms() - t0, 1000, "doctor took %lld ms", ddp_now_ms() - t0);
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        cr_expect_geq(count(&r, checks[i]), 1, "no %s check", checks[i]);
    expect_result(find(&r, "nccl-ifname"), DDP_DOCTOR_FAIL, "NCCL_SOCKET_IFNAME=nosuchif0 matches no interface");
    expect_result(find(&r, "master-addr"), DDP_DOCTOR_OK, "127.0.0.1 reached through lo");
    expect_result(find(&r, "master-port"), DDP_DOCTOR_OK, "29431 is free");
    expect_result(find(&r, "state-dir"), DDP_DOCTOR_OK, base);
    cr_expect_eq(ddp_doctor_exit_status(&r), 2);
    ddp_doctor_report_free(&r);
    ddp_topo_destroy(ctx.topo);
    ddp_spec_free(&spec);
}

Test(doctor, nvlinked_gpus_across_sockets_are_fine)
{
    struct ddp_doctor_gpu all[2] = {fake_gpu("0000:18:00.0", 0, 0, 81920, 0, ""),
                                    fake_gpu("0000:b7:00.0", 1, 0, 81920, 0, "")};
    int picked[2] = {0, 1};
    struct ddp_doctor_gpus g = {.have_topo = true, .all = all, .nall = 2, .want_gpus = true, .nproc = 2,
                                .nusable = 2, .picked = picked, .npicked = 2, .nvlink = true};
    struct ddp_doctor_report r = {0};

    ddp_doctor_check_numa(&r, &g);
    expect_result(&r.v[0], DDP_DOCTOR_OK, "span NUMA nodes 0,1, across sockets 0,1, but every pair is joined by NVLink");
    g.nvlink = false;
    ddp_doctor_check_numa(&r, &g);
    expect_result(&r.v[1], DDP_DOCTOR_WARN, "crosses the socket link");
    ddp_doctor_report_free(&r);
}
