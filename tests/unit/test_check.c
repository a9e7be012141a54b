/* Unit tests for check: each of doctor's checks fed faults (fake /proc/net/tcp with a listener on the master port,
 * fake NVML answers with a busy GPU, bad NCCL variables, a tiny RLIMIT_NOFILE, a missing interface name...), and
 * the report's exit status, text and JSON. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/exit.h"
#include "check_expect.h"
#include "doctor/check.h"
#include "doctor/check_etcd.h"
#include "doctor/check_host.h"
#include "doctor/check_net.h"
#include "host/klock.h"

/* ---- helpers ---- */

static char *print_to_string(const struct ddp_check_report *r, bool json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f);
    ddp_check_print(r, json, f);
    fclose(f);
    return text;
}

/* ---- report ---- */

Test(check, exit_status_is_the_worst_result)
{
    struct ddp_check_report r = {0};

    cr_expect_eq(ddp_check_exit_status(&r), 0);
    ddp_check_add(&r, DDP_CHECK_OK, "a", NULL, "fine");
    ddp_check_add(&r, DDP_CHECK_SKIP, "b", NULL, "nothing to check");
    cr_expect_eq(ddp_check_exit_status(&r), 0);
    ddp_check_add(&r, DDP_CHECK_WARN, "c", "do this", "doubtful");
    cr_expect_eq(ddp_check_exit_status(&r), 1);
    ddp_check_add(&r, DDP_CHECK_FAIL, "d", "do that", "broken %d", 42);
    ddp_check_add(&r, DDP_CHECK_OK, "e", NULL, "fine again");
    cr_expect_eq(ddp_check_exit_status(&r), 2);
    ddp_check_report_free(&r);
}

Test(check, text_is_one_line_per_check)
{
    struct ddp_check_report r = {0};
    char *text;

    ddp_check_add(&r, DDP_CHECK_OK, "gpus", NULL, "2 GPUs visible");
    ddp_check_add(&r, DDP_CHECK_FAIL, "master-port", "use master_port = auto", "29500 is in use by pid 1234 (python3)");
    text = print_to_string(&r, false);
    cr_expect_str_eq(text, "ok    gpus        2 GPUs visible\n"
                           "fail  master-port 29500 is in use by pid 1234 (python3); use master_port = auto\n");
    free(text);
    ddp_check_report_free(&r);
}

Test(check, json_escapes_and_counts)
{
    struct ddp_check_report r = {0};
    char *text;

    ddp_check_add(&r, DDP_CHECK_WARN, "nccl-env", NULL, "value \"x\\y\"\tend");
    ddp_check_add(&r, DDP_CHECK_OK, "gpus", NULL, "fine");
    text = print_to_string(&r, true);
    cr_expect_str_eq(text, "{\"status\":\"warn\",\"exit_status\":1,\"counts\":{\"ok\":1,\"skip\":0,\"warn\":1,"
                           "\"fail\":0},\"checks\":[{\"check\":\"nccl-env\",\"status\":\"warn\",\"found\":"
                           "\"value \\\"x\\\\y\\\"\\tend\",\"todo\":null},{\"check\":\"gpus\",\"status\":\"ok\","
                           "\"found\":\"fine\",\"todo\":null}]}\n");
    free(text);
    ddp_check_report_free(&r);
}

/* ---- busy GPUs (fake NVML answers) ---- */

static struct ddp_check_gpu fake_gpu(const char *busid, int numa, long long used_mib, long long total_mib, int util,
                                     const char *users)
{
    struct ddp_check_gpu g = {.vendor = 0x10de, .numa = numa, .package = numa, .util = util};

    snprintf(g.busid, sizeof g.busid, "%s", busid);
    g.mem_used = used_mib << 20;
    g.mem_total = total_mib << 20;
    snprintf(g.users, sizeof g.users, "%s", users);
    return g;
}

Test(check, busy_gpu_named_with_its_user)
{
    struct ddp_check_gpu all[3] = {
        fake_gpu("0000:18:00.0", 0, 300, 81920, 0, ""),
        fake_gpu("0000:19:00.0", 0, 76800, 81920, 97, "pid 1234 (python3, 75.0 GiB)"),
        fake_gpu("0000:1a:00.0", 0, 4096, 81920, 3, "pid 99 (python3, 4.0 GiB)"),
    };
    int picked[3] = {0, 1, 2};
    struct ddp_check_gpus g = {.have_topo = true,
                               .all = all,
                               .nall = 3,
                               .want_gpus = true,
                               .nproc = 3,
                               .nusable = 3,
                               .picked = picked,
                               .npicked = 3,
                               .nvml = true};
    struct ddp_check_report r = {0};

    ddp_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_FAIL,
                  "0000:19:00.0: 75.0 of 80.0 GiB in use (94%), 97% busy, by pid 1234 (python3");
    expect_result(&r.v[0], DDP_CHECK_FAIL, "0000:1a:00.0: 4.0 of 80.0 GiB in use (5%), 3% busy, by pid 99");
    cr_expect(strstr(r.v[0].found, "0000:18:00.0") == NULL, "idle GPU listed: %s", r.v[0].found);
    cr_expect(strstr(r.v[0].todo, "max_memory_used"));
    ddp_check_report_free(&r);

    /* only the moderately used one: warn */
    picked[1] = 2;
    g.npicked = 2;
    ddp_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_WARN, "0000:1a:00.0");
    ddp_check_report_free(&r);

    /* busy by utilisation alone */
    all[0].util = 55;
    g.npicked = 1;
    ddp_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_WARN, "55% busy");
    ddp_check_report_free(&r);

    all[0].util = 0;
    ddp_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_OK, "idle: at most 300 MiB in use, 0% busy");
    ddp_check_report_free(&r);

    g.nvml = false;
    g.nvml_status = "NVML: not found (libnvidia-ml.so.1: cannot open shared object file)";
    ddp_check_gpu_busy(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_SKIP, "libnvidia-ml.so.1");
    ddp_check_report_free(&r);
}

Test(check, no_topology_warns)
{
    struct ddp_check_gpus g = {.nproc = 2};
    struct ddp_check_report r = {0};

    ddp_check_gpus(&r, &g);
    ddp_check_numa(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_WARN, "topology unavailable");
    cr_expect_eq(r.v[1].status, DDP_CHECK_SKIP);
    ddp_check_report_free(&r);
}

Test(check, leases_of_other_jobs)
{
    struct ddp_lease_info l[2] = {
        {.busid = "0000:18:00.0", .pid = 4242, .job = "train-a", .user = "bob", .comm = "ddplaunch", .ddplaunch = true},
        {.busid = "0000:19:00.0", .pid = 77, .job = "me", .user = "root", .comm = "ddplaunch", .ddplaunch = true}};
    struct ddp_check_report r = {0};

    ddp_check_leases(&r, l, 2, 77, 0);
    expect_result(&r.v[0], DDP_CHECK_OK,
                  "1 GPU leased, left out of the pick: 0000:18:00.0 by job 'train-a' (pid 4242, user bob, command "
                  "ddplaunch)");
    ddp_check_leases(&r, NULL, 0, 77, 0);
    expect_result(&r.v[1], DDP_CHECK_OK, "no GPU leased");
    ddp_check_leases(&r, NULL, 0, 77, -EACCES);
    expect_result(&r.v[2], DDP_CHECK_WARN, "Permission denied");
    /* a lock held by something that is no ddplaunch job (a bare bind by another user): a warning naming it */
    struct ddp_lease_info sq = {.busid = "0000:18:00.0", .pid = 99, .user = "mallory", .comm = "python3"};
    ddp_check_leases(&r, &sq, 1, 77, 0);
    expect_result(&r.v[3], DDP_CHECK_WARN,
                  "a process that is no ddplaunch job, job '?' (pid 99, user mallory, command python3)");
    ddp_check_report_free(&r);
}

/* ---- master port (fake /proc/net/tcp) ---- */

#define TCP_HEADER "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
/* 0.0.0.0:29500 LISTEN (0A) by uid 1000, inode 5555; 127.0.0.1:29501 ESTABLISHED (01): not a listener */
static const char tcp_listen_29500[] =
    TCP_HEADER "   0: 00000000:733C 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5555 1 "
               "0000000000000000 100 0 0 10 0\n"
               "   1: 0100007F:733D 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 5556 1 "
               "0000000000000000 20 4 30 10 -1\n";

Test(check, port_held_by_a_listener_fails_naming_it)
{
    struct ddp_port_holder h = {
        .pid = 1234, .uid = 1000, .comm = "python3", .cmdline = "python3 train.py", .user = "alice", .addr = "0.0.0.0"};
    struct ddp_check_port p = {.spec = {.port = 29500},
                               .master_addr = "127.0.0.1",
                               .tcp = tcp_listen_29500,
                               .tcp6 = TCP_HEADER,
                               .holder = &h,
                               .ephemeral = "32768\t60999\n"};
    struct ddp_check_report r = {0};

    ddp_check_port(&r, &p);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "29500 is in use by pid 1234 (python3, user alice: python3 train.py)");
    cr_expect_str_eq(r.v[0].todo, "use master_port = auto");

    /* the holder's process not visible: still fails, with the uid and address from /proc/net/tcp */
    p.holder = NULL;
    ddp_check_port(&r, &p);
    expect_result(&r.v[1], DDP_CHECK_FAIL, "not visible here (uid 1000, listening on 0.0.0.0)");

    /* 29501 has only an established connection: free */
    p.spec.port = 29501;
    ddp_check_port(&r, &p);
    expect_result(&r.v[2], DDP_CHECK_OK, "29501 is free");

    /* reserved by another job (or any process that holds its lock) */
    p.lock_holder = "pid 99, user bob, command ddplaunch";
    ddp_check_port(&r, &p);
    expect_result(&r.v[3], DDP_CHECK_FAIL, "reserved by another process: pid 99, user bob, command ddplaunch");
    p.lock_holder = NULL;

    /* the bind test says busy although /proc shows nothing (another namespace, bound without listen) */
    p.probe_rc = -EADDRINUSE;
    ddp_check_port(&r, &p);
    expect_result(&r.v[4], DDP_CHECK_FAIL, "holds it without listening");

    p.probe_rc = -EACCES;
    p.spec.port = 80;
    ddp_check_port(&r, &p);
    expect_result(&r.v[5], DDP_CHECK_FAIL, "80 cannot be bound: Permission denied");
    p.probe_rc = 0;

    /* in the ephemeral range */
    p.spec.port = 40000;
    ddp_check_port(&r, &p);
    expect_result(&r.v[6], DDP_CHECK_WARN, "ephemeral range 32768\t60999");

    /* another node: not checked here */
    p.node_rank = 1;
    ddp_check_port(&r, &p);
    cr_expect_eq(r.v[7].status, DDP_CHECK_SKIP);
    ddp_check_report_free(&r);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(check, auto_port_counts_free_ports)
{
    struct ddp_check_port p = {
        .spec = {.is_auto = true, .lo = 29500, .hi = 29509}, .tcp = tcp_listen_29500, .ephemeral = "32768\t60999\n"};
    struct ddp_check_report r = {0};

    ddp_check_port(&r, &p);
    expect_result(&r.v[0], DDP_CHECK_OK, "auto: 9 of 10 ports in 29500-29509 free now (first 29501)");
    p.spec.lo = p.spec.hi = 29500;
    ddp_check_port(&r, &p);
    expect_result(&r.v[1], DDP_CHECK_FAIL, "every port in 29500-29500 is in use");
    p.spec.lo = 32000, p.spec.hi = 33000;
    ddp_check_port(&r, &p);
    expect_result(&r.v[2], DDP_CHECK_WARN, "overlaps the ephemeral range");
    /* default range */
    p.spec.lo = p.spec.hi = 0;
    ddp_check_port(&r, &p);
    expect_result(&r.v[3], DDP_CHECK_OK, "499 of 500 ports in 29500-29999");
    ddp_check_report_free(&r);
}

/* issue 34 item 14: ports whose lock another process holds (every one, squatted) are not counted free */
Test(check, auto_port_skips_reserved_ports)
{
    struct ddp_strv held = {0};
    for (int port = 29500; port <= 29509; port++) {
        char what[32], name[DDP_KLOCK_NAME_MAX + 1];
        snprintf(what, sizeof what, "port-%d", port);
        ddp_klock_name("/tmp/ns", what, name);
        ddp_strv_push(&held, name);
    }
    qsort(held.v, held.n, sizeof *held.v, cmp_names);
    struct ddp_check_port p = {.spec = {.is_auto = true, .lo = 29500, .hi = 29509},
                               .tcp = TCP_HEADER,
                               .ephemeral = "32768\t60999\n",
                               .held_locks = &held,
                               .lock_dir = "/tmp/ns"};
    struct ddp_check_report r = {0};
    ddp_check_port(&r, &p);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "every port in 29500-29509 is in use or reserved; 10 reserved by other");
    p.spec.hi = 29519;
    ddp_check_port(&r, &p);
    expect_result(&r.v[1], DDP_CHECK_OK,
                  "auto: 10 of 20 ports in 29500-29519 free now (first 29510; 10 reserved by other processes)");
    ddp_check_report_free(&r);
    ddp_strv_clear(&held);
}

/* ---- master address, interfaces ---- */

Test(check, master_addr_faults)
{
    struct ddp_check_report r = {0};
    struct ddp_check_addr a = {
        .addr = "node0.invalid", .nnodes = 2, .gai_rc = -2, .gai_error = "Name or service not known"};

    ddp_check_addr(&r, &a);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "node0.invalid does not resolve: Name or service not known");

    a = (struct ddp_check_addr){.addr = "localhost",
                                .nnodes = 2,
                                .resolved = "127.0.0.1",
                                .loopback = true,
                                .src_ip = "127.0.0.1",
                                .ifname = "lo"};
    ddp_check_addr(&r, &a);
    expect_result(&r.v[1], DDP_CHECK_FAIL, "loopback address (127.0.0.1), but nnodes = 2");
    a.nnodes = 1;
    ddp_check_addr(&r, &a);
    expect_result(&r.v[2], DDP_CHECK_OK, "localhost resolves to 127.0.0.1, reached through lo");

    a = (struct ddp_check_addr){.addr = "10.9.9.9", .nnodes = 2, .resolved = "10.9.9.9", .route_errno = ENETUNREACH};
    ddp_check_addr(&r, &a);
    expect_result(&r.v[3], DDP_CHECK_FAIL, "cannot be reached from here: Network is unreachable");
    cr_expect(strstr(r.v[3].todo, "ip route get 10.9.9.9"));
    ddp_check_report_free(&r);
}

Test(check, nccl_ifname_syntax)
{
    cr_expect(ddp_check_ifname_match("eth", "eth0"));
    cr_expect(ddp_check_ifname_match("eth", "eth10"));
    cr_expect(!ddp_check_ifname_match("eth", "ib0"));
    cr_expect(ddp_check_ifname_match("ib,eth", "ib0"));
    cr_expect(ddp_check_ifname_match("^docker,lo", "eth0"));
    cr_expect(!ddp_check_ifname_match("^docker,lo", "docker0"));
    cr_expect(!ddp_check_ifname_match("^docker,lo", "lo"));
    cr_expect(ddp_check_ifname_match("=eth0", "eth0"));
    cr_expect(!ddp_check_ifname_match("=eth0", "eth0.100"));
    cr_expect(!ddp_check_ifname_match("^=eth0", "eth0"));
    cr_expect(ddp_check_ifname_match("^=eth0", "eth0.100"));
    cr_expect(ddp_check_ifname_match("eth0:1234", "eth0"));
}

Test(check, missing_interface_name)
{
    const char *ifs[] = {"lo", "eth0", "ib0"};
    struct ddp_check_report r = {0};

    ddp_check_ifname(&r, "NCCL_SOCKET_IFNAME", "eth9", false, ifs, 3, NULL);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "NCCL_SOCKET_IFNAME=eth9 matches no interface here (lo, eth0, ib0)");
    ddp_check_ifname(&r, "NCCL_SOCKET_IFNAME", "eth,enp", false, ifs, 3, NULL);
    expect_result(&r.v[1], DDP_CHECK_WARN, "enp matches no interface here");
    ddp_check_ifname(&r, "NCCL_SOCKET_IFNAME", "^lo,eth", false, ifs, 3, NULL);
    expect_result(&r.v[2], DDP_CHECK_OK, "selects ib0");
    ddp_check_ifname(&r, "NCCL_SOCKET_IFNAME", "ib", false, ifs, 3, "eth0");
    expect_result(&r.v[3], DDP_CHECK_WARN, "selects ib0, but master_addr is reached through eth0");
    ddp_check_ifname(&r, "NCCL_SOCKET_IFNAME", "^lo,eth,ib", false, ifs, 3, NULL);
    cr_expect_eq(r.v[4].status, DDP_CHECK_FAIL, "%s", r.v[4].found);
    ddp_check_ifname(&r, "NCCL_SOCKET_IFNAME", NULL, false, ifs, 3, NULL);
    expect_result(&r.v[5], DDP_CHECK_OK, "unset");
    /* gloo: exact names only */
    ddp_check_ifname(&r, "GLOO_SOCKET_IFNAME", "eth", true, ifs, 3, NULL);
    expect_result(&r.v[6], DDP_CHECK_FAIL, "GLOO_SOCKET_IFNAME=eth matches no interface");
    ddp_check_ifname(&r, "GLOO_SOCKET_IFNAME", "eth0,ib0", true, ifs, 3, "eth0");
    expect_result(&r.v[7], DDP_CHECK_OK, "selects eth0, ib0");
    ddp_check_report_free(&r);
}

/* ---- NCCL variables ---- */

Test(check, bad_nccl_env)
{
    struct ddp_check_report r = {0};
    struct ddp_kvlist kv = {0};
    char *env_bad[] = {"NCCL_IB_TIMEOUT=600", "PATH=/bin", NULL};
    char *env_ok[] = {"NCCL_DEBUG=INFO", "HOME=/root", NULL};

    ddp_kvlist_set(&kv, "NCCL_SOCKET_TIMEOUT", "600", DDP_ORIGIN_SPEC, "job.ini", 7);
    ddp_check_nccl_env(&r, &kv, env_ok);
    cr_expect_eq(count(&r, "nccl-env"), 1);
    expect_result(&r.v[0], DDP_CHECK_WARN, "NCCL_SOCKET_TIMEOUT");
    ddp_check_report_free(&r);

    ddp_check_nccl_env(&r, NULL, env_bad);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "NCCL_IB_TIMEOUT=600");
    ddp_check_report_free(&r);

    ddp_check_nccl_env(&r, NULL, env_ok);
    expect_result(&r.v[0], DDP_CHECK_OK, "1 NCCL/torch variable valid");
    ddp_check_report_free(&r);
    ddp_kvlist_free(&kv);
}

/* ---- driver, devices, libnccl ---- */

Test(check, driver_and_devices)
{
    const char *all[] = {"nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"};
    const char *no_uvm[] = {"nvidia0", "nvidiactl"};
    const char *no_ctl[] = {"nvidia0"};
    struct ddp_check_driver d = {
        .n_nvidia = 2, .nvml_found = true, .driver = "550.54.15", .cuda_version = 12040, .devs = all, .ndevs = 4};
    struct ddp_check_report r = {0};

    ddp_check_driver(&r, &d);
    expect_result(&r.v[0], DDP_CHECK_OK, "NVIDIA driver 550.54.15, CUDA driver API 12.4");
    ddp_check_devices(&r, &d);
    expect_result(&r.v[1], DDP_CHECK_OK, "2 of 2 /dev/nvidiaN present");
    d.devs = no_uvm, d.ndevs = 2;
    ddp_check_devices(&r, &d);
    expect_result(&r.v[2], DDP_CHECK_WARN, "/dev/nvidia-uvm missing");
    d.devs = no_ctl, d.ndevs = 1;
    ddp_check_devices(&r, &d);
    expect_result(&r.v[3], DDP_CHECK_FAIL, "/dev/nvidiactl missing");
    d.ndevs = 0;
    ddp_check_devices(&r, &d);
    expect_result(&r.v[4], DDP_CHECK_FAIL, "no /dev/nvidia*");

    /* a container without the driver's libraries */
    d.cuda_version = -1;
    d.cuda_error = "libcuda.so.1: cannot open shared object file";
    ddp_check_driver(&r, &d);
    expect_result(&r.v[5], DDP_CHECK_FAIL, "driver 550.54.15, but libcuda.so.1 does not load");
    d.nvml_found = false;
    d.nvml_status = "NVML: not found";
    ddp_check_driver(&r, &d);
    expect_result(&r.v[6], DDP_CHECK_FAIL, "2 NVIDIA GPUs, but no driver library");
    d.cuda_version = 11080;
    ddp_check_driver(&r, &d);
    expect_result(&r.v[7], DDP_CHECK_WARN, "CUDA driver API 11.8, but NVML does not load");

    d.n_nvidia = 0;
    ddp_check_driver(&r, &d);
    ddp_check_devices(&r, &d);
    cr_expect_eq(r.v[8].status, DDP_CHECK_SKIP);
    cr_expect_eq(r.v[9].status, DDP_CHECK_SKIP);
    ddp_check_report_free(&r);
}

Test(check, ldcache_parser)
{
    static const char cache[] = "glibc-ld.so.cache1.1\0\x03\x03\0\0libnccl.so.2\0/usr/lib/x86_64-linux-gnu/libnccl.so.2"
                                "\0libc.so.6\0/lib/x86_64-linux-gnu/libc.so.6\0/opt/x/libnccl.so\0"
                                "/usr/lib/x86_64-linux-gnu/libnccl.so.2\0/trailing/libnccl.so.2";
    struct ddp_strv out = {0};

    cr_expect_eq(ddp_check_ldcache_find(cache, sizeof cache - 1, "libnccl.so", &out), 2);
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
        cr_expect_geq(ddp_check_ldcache_find(buf, n, "libc.so", &out), 1);
        cr_expect(out.n && strstr(out.v[0], "/libc.so"));
        ddp_strv_clear(&out);
    }
}

Test(check, nccl_lib)
{
    const char *bundled[] = {"/usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2"};
    const char *sys[] = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
    struct ddp_check_nccl_lib l = {.n_nvidia = 2, .torch_dir = "/usr/lib/python3/dist-packages/torch", .torch_cuda = 0};
    struct ddp_check_report r = {0};

    ddp_check_nccl_lib(&r, &l);
    expect_result(&r.v[0], DDP_CHECK_WARN, "CPU-only build");
    l.torch_cuda = 1;
    ddp_check_nccl_lib(&r, &l);
    expect_result(&r.v[1], DDP_CHECK_WARN, "libnccl.so not found");
    l.system = sys, l.nsystem = 1;
    ddp_check_nccl_lib(&r, &l);
    expect_result(&r.v[2], DDP_CHECK_OK, "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
    l.bundled = bundled, l.nbundled = 1;
    ddp_check_nccl_lib(&r, &l);
    expect_result(&r.v[3], DDP_CHECK_OK, "nvidia/nccl/lib/libnccl.so.2 (torch's pip dependency)");
    l.n_nvidia = 0;
    ddp_check_nccl_lib(&r, &l);
    cr_expect_eq(r.v[4].status, DDP_CHECK_SKIP);
    ddp_check_report_free(&r);
}

/* ---- CPUs ---- */

Test(check, cpu_lists)
{
    cr_expect_eq(ddp_check_list_count("0-3,8,10-11"), 7);
    cr_expect_eq(ddp_check_list_count("0"), 1);
    cr_expect_eq(ddp_check_list_count("0-1\n"), 2);
    cr_expect_eq(ddp_check_list_count("3-1"), -EINVAL);
    cr_expect_eq(ddp_check_list_count("a"), -EINVAL);
    cr_expect_eq(ddp_check_list_count(NULL), -EINVAL);
}

Test(check, cpus_versus_the_plan)
{
    struct ddp_check_report r = {0};
    const char *cpus_ok[] = {"0-3", "4-7"};
    const char *cpus_out[] = {"0-3", "8-11"};
    const char *cpus_empty[] = {"0-3", ""};
    const char *cpus_shared[] = {"0-3", "2-5"};
    const char *mems[] = {"0", "1"};
    struct ddp_check_cpus c = {.cpus_allowed = "0-7",
                               .mems_allowed = "0-1",
                               .nproc = 2,
                               .bind = DDP_BIND_NODE,
                               .rank_cpus = cpus_ok,
                               .rank_mems = mems,
                               .nranks = 2};

    ddp_check_cpus(&r, &c);
    expect_result(&r.v[0], DDP_CHECK_OK, "8 CPUs allowed (0-7), memory nodes 0-1; 2 workers, bind = node");
    c.rank_cpus = cpus_out;
    ddp_check_cpus(&r, &c);
    expect_result(&r.v[1], DDP_CHECK_FAIL, "rank 1 is bound to CPUs 8-11 outside the allowed 0-7");
    c.rank_cpus = cpus_empty;
    ddp_check_cpus(&r, &c);
    expect_result(&r.v[2], DDP_CHECK_FAIL, "rank 1 gets no CPU");
    c.rank_cpus = cpus_shared;
    c.bind = DDP_BIND_EXCLUSIVE;
    ddp_check_cpus(&r, &c);
    expect_result(&r.v[3], DDP_CHECK_WARN, "exclusive binding, but ranks 0 and 1 share CPUs");
    c.rank_cpus = cpus_ok;
    c.mems_allowed = "0"; /* cgroup cpuset.mems restricted to node 0 */
    ddp_check_cpus(&r, &c);
    expect_result(&r.v[4], DDP_CHECK_WARN, "rank 1 binds memory to node 1, but only 0 may be used");
    /* more workers than CPUs (a 2-CPU Slurm allocation, 4 workers) */
    c = (struct ddp_check_cpus){.cpus_allowed = "0-1", .nproc = 4, .bind = DDP_BIND_NONE};
    ddp_check_cpus(&r, &c);
    expect_result(&r.v[5], DDP_CHECK_WARN, "4 workers share 2 allowed CPUs (0-1)");
    ddp_check_report_free(&r);
}

/* ---- open files ---- */

Test(check, tiny_nofile_limit)
{
    struct ddp_check_report r = {0};

    ddp_check_nofile(&r, 64, 64, 8);
    expect_result(&r.v[0], DDP_CHECK_FAIL,
                  "open files limit 64 (hard 64) is below the 128 the launcher needs for 8 workers");
    cr_expect(strstr(r.v[0].todo, "hard limit is 64 too"), "%s", r.v[0].todo);
    ddp_check_nofile(&r, 1024, 524288, 8);
    expect_result(&r.v[1], DDP_CHECK_WARN, "open files limit 1024 (hard 524288)");
    cr_expect_str_eq(r.v[1].todo, "raise it before starting: ulimit -n 65536");
    ddp_check_nofile(&r, 1024, 4096, 8);
    cr_expect_str_eq(r.v[2].todo, "raise it before starting: ulimit -n 4096");
    ddp_check_nofile(&r, 65536, (unsigned long long)RLIM_INFINITY, 8);
    expect_result(&r.v[3], DDP_CHECK_OK, "open files limit 65536 (hard unlimited)");
    ddp_check_report_free(&r);
}

/* ---- NUMA span with NVLink ---- */

Test(check, nvlinked_gpus_across_sockets_are_fine)
{
    struct ddp_check_gpu all[2] = {fake_gpu("0000:18:00.0", 0, 0, 81920, 0, ""),
                                   fake_gpu("0000:b7:00.0", 1, 0, 81920, 0, "")};
    int picked[2] = {0, 1};
    struct ddp_check_gpus g = {.have_topo = true,
                               .all = all,
                               .nall = 2,
                               .want_gpus = true,
                               .nproc = 2,
                               .nusable = 2,
                               .picked = picked,
                               .npicked = 2,
                               .nvlink = true};
    struct ddp_check_report r = {0};

    ddp_check_numa(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_OK, "span NUMA nodes 0,1, across sockets 0,1, but every pair is joined by NVLink");
    g.nvlink = false;
    ddp_check_numa(&r, &g);
    expect_result(&r.v[1], DDP_CHECK_WARN, "crosses the socket link");
    ddp_check_report_free(&r);
}

/* issue 23 item 7: the workers' python must import torch; when it cannot, name one that can */
Test(check, python_imports_torch)
{
    struct ddp_check_report r = {0};
    struct ddp_check_python p = {
        .runs_python = true, .python = "/usr/bin/python3", .why = "python3 from PATH", .torch = "1.13.0"};
    ddp_check_python(&r, &p);
    expect_result(&r.v[0], DDP_CHECK_OK, "/usr/bin/python3 (python3 from PATH) imports torch 1.13.0");
    p.torch = NULL;
    p.error = "ModuleNotFoundError: No module named 'torch'";
    p.other = "/opt/conda/bin/python3";
    p.other_torch = "2.1.0";
    ddp_check_python(&r, &p);
    expect_result(&r.v[1], DDP_CHECK_FAIL, "cannot import torch: ModuleNotFoundError: No module named 'torch'");
    cr_expect_str_eq(r.v[1].todo, "run with PYTHON_EXEC=/opt/conda/bin/python3, which imports torch 2.1.0");
    p.other = NULL;
    ddp_check_python(&r, &p);
    cr_expect_eq(r.v[2].status, DDP_CHECK_FAIL);
    cr_expect(strstr(r.v[2].todo, "no python on PATH imports torch"), "%s", r.v[2].todo);
    p.runs_python = false;
    ddp_check_python(&r, &p);
    cr_expect_eq(r.v[3].status, DDP_CHECK_SKIP);
    cr_expect_eq(ddp_check_exit_status(&r), DDP_EXIT_DOCTOR_FAIL);
    ddp_check_report_free(&r);
}

/* issue 23 item 9: more workers than usable GPUs: the todo names the setting that shares them */
Test(check, more_workers_than_gpus_names_share)
{
    struct ddp_check_gpu all[1] = {fake_gpu("0000:3b:00.0", 0, 0, 81920, 0, "")};
    int picked[1] = {0};
    struct ddp_check_gpus g = {.have_topo = true,
                               .all = all,
                               .nall = 1,
                               .want_gpus = true,
                               .nproc = 3,
                               .nusable = 1,
                               .error = "asked for 3 GPUs, but only 1 of the 1 GPUs here is usable"};
    struct ddp_check_report r = {0};

    ddp_check_gpus(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "1 GPU visible, 1 usable, 3 wanted");
    cr_expect(strstr(r.v[0].todo, "use nproc_per_node = 1, or --share-gpus ([gpus] share = yes)"), "%s", r.v[0].todo);
    /* sharing already on (the one GPU is leased by another job): no point naming it */
    g.share = true;
    ddp_check_gpus(&r, &g);
    cr_expect_null(strstr(r.v[1].todo, "share"), "%s", r.v[1].todo);
    /* shared: one GPU picked for three workers is fine */
    g.error = NULL;
    g.picked = picked;
    g.npicked = 1;
    g.reason = "1 GPU on NUMA node 0; 3 workers share it, round-robin ([gpus] share)";
    ddp_check_gpus(&r, &g);
    expect_result(&r.v[2], DDP_CHECK_OK, "would pick 0000:3b:00.0 (1 GPU on NUMA node 0; 3 workers share it");
    ddp_check_report_free(&r);
}

Test(check, etcd_that_wants_a_user_is_named_as_auth)
{
    struct ddp_check_etcd f = {.backend = "etcd-v3", .nnodes = 2, .n = 1};
    snprintf(f.m[0].endpoint, sizeof f.m[0].endpoint, "127.0.0.1:2379");
    snprintf(f.m[0].version, sizeof f.m[0].version, "3.4.23");
    f.m[0].leader_known = true;
    snprintf(f.read_error, sizeof f.read_error, "etcd member 127.0.0.1:2379: HTTP 400: etcdserver: user name is empty");
    struct ddp_check_report r = {0};
    ddp_check_rdzv(&r, &f);
    cr_assert_eq(r.n, 3);
    expect_result(&r.v[2], DDP_CHECK_FAIL, "auth: the members answer but refuse a read of /ddplaunch/ without a user");
    cr_expect(strstr(r.v[2].todo, "does not log in to etcd"), "todo: %s", r.v[2].todo);
    ddp_check_report_free(&r);

    /* no member answers: quorum, not auth */
    f.m[0].version[0] = '\0';
    snprintf(f.m[0].error, sizeof f.m[0].error, "etcd member 127.0.0.1:2379: Connection refused");
    snprintf(f.read_error, sizeof f.read_error, "etcd member 127.0.0.1:2379: Connection refused");
    ddp_check_rdzv(&r, &f);
    expect_result(&r.v[2], DDP_CHECK_FAIL, "no read of /ddplaunch/ through 1 member");
    cr_expect(strstr(r.v[2].todo, "wait for quorum"));
    ddp_check_report_free(&r);
}
