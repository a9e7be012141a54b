/* Unit tests for port: the master_port parser and default range, the Slurm candidate sequence, the
 * /proc/net/tcp parser on fake content, and reservations on this host (two reservations get different ports,
 * a port reserved by another process or bound by a socket is skipped, a busy explicit port names its holder,
 * the lock is close-on-exec and dies with a SIGKILLed holder). Tests use ports below the ephemeral range. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/port.h"
#include "host/rundir.h"
#include "scratch.h"

SCRATCH_SUITE(port);

/* A port range of our own per test (criterion runs tests in parallel), free of leftovers. */
static int test_range(int slot)
{
    return 23000 + slot * 20;
}

static struct ddp_port_req auto_req(int lo, int hi)
{
    struct ddp_port_req r = {.lock_dir = lockdir, .addr = "127.0.0.1"};
    r.spec.is_auto = true;
    r.spec.lo = lo;
    r.spec.hi = hi;
    return r;
}

static struct ddp_port_req fixed_req(int port)
{
    struct ddp_port_req r = {.lock_dir = lockdir, .addr = "127.0.0.1"};
    r.spec.port = port;
    return r;
}

static int listen_on(int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0, "bind %d: %s", port, strerror(errno));
    cr_assert_eq(listen(s, 4), 0);
    return s;
}

Test(port, spec_parse)
{
    struct ddp_port_spec ps;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_spec_parse("auto", &ps, &err), 0);
    cr_expect(ps.is_auto && ps.lo == 0 && ps.hi == 0);
    cr_assert_eq(ddp_port_spec_parse("auto:30000-30010", &ps, &err), 0);
    cr_expect(ps.is_auto && ps.lo == 30000 && ps.hi == 30010);
    cr_assert_eq(ddp_port_spec_parse("29500", &ps, &err), 0);
    cr_expect(!ps.is_auto && ps.port == 29500);
    cr_assert_eq(ddp_port_spec_parse("0", &ps, &err), 0);
    cr_expect(ps.is_auto);
    const char *bad[] = {"", "x", "70000", "-1", "auto:5-3", "auto:1-", "auto:", "auto:1-70000", "29500x", NULL};
    for (int i = 0; bad[i]; i++) {
        err.msg[0] = '\0';
        cr_expect_eq(ddp_port_spec_parse(bad[i], &ps, &err), -EINVAL, "'%s' accepted", bad[i]);
        cr_expect(strstr(err.msg, "expected") || strstr(err.msg, "empty"), "'%s': %s", bad[i], err.msg);
    }
}

Test(port, default_range_avoids_ephemeral)
{
    int lo, hi;
    ddp_port_default_range("32768\t60999\n", &lo, &hi);
    cr_expect(lo == 29500 && hi == 29999, "%d-%d", lo, hi);
    ddp_port_default_range(NULL, &lo, &hi);
    cr_expect(lo == 29500 && hi == 29999);
    ddp_port_default_range("20000 60999", &lo, &hi);
    cr_expect(lo == 19500 && hi == 19999, "%d-%d", lo, hi);
    ddp_port_default_range("1100 40000", &lo, &hi); /* no room below: above it */
    cr_expect(lo == 40001 && hi == 40500, "%d-%d", lo, hi);
    cr_expect(ddp_port_range_overlaps_ephemeral("32768 60999", 32000, 33000));
    cr_expect(!ddp_port_range_overlaps_ephemeral("32768 60999", 29500, 29999));
    cr_expect(!ddp_port_range_overlaps_ephemeral(NULL, 1, 65535));
}

Test(port, slurm_candidates_same_everywhere_distinct_and_spread)
{
    int n = 500;
    char *seen = calloc((size_t)n, 1);
    for (unsigned i = 0; i < (unsigned)n; i++) {
        int p = ddp_port_job_candidate(123456, 0, 29500, 29999, i);
        cr_assert(p >= 29500 && p <= 29999, "%d", p);
        cr_expect_eq(seen[p - 29500], 0, "candidate %u repeats %d", i, p);
        seen[p - 29500] = 1;
        cr_expect_eq(p, ddp_port_job_candidate(123456, 0, 29500, 29999, i)); /* deterministic */
    }
    free(seen);
    /* job ids that share their last 4 digits (Lightning's 15000 + id % 10000 collides) */
    cr_expect_neq(ddp_port_job_candidate(10042, 0, 29500, 29999, 0), ddp_port_job_candidate(20042, 0, 29500, 29999, 0));
    /* two steps of one job running at once on a node */
    cr_expect_neq(ddp_port_job_candidate(10042, 0, 29500, 29999, 0), ddp_port_job_candidate(10042, 1, 29500, 29999, 0));
    cr_expect_eq(ddp_port_job_candidate(7, 0, 30000, 30000, 3), 30000);
}

static const char fake_tcp[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1171 1 "
    "000000004b97a8e1 100 0 0 10 0\n"
    "   1: 0100007F:7338 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 98765 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   2: 0100007F:7338 0100007F:CBBE 01 00000000:00000000 00:00000000 00000000  1000        0 98766 1 "
    "0000000000000000 20 4 30 10 -1\n"
    "   3: 0100007F:A033 0100007F:7338 06 00000000:00000000 03:00000244 00000000     0        0 0 3 "
    "000000007f1b0542\n";

static const char fake_tcp6[] =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:7338 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0000000000000000FFFF00000100007F:93A8 0000000000000000FFFF00000100007F:7425 06 00000000:00000000 "
    "03:000011EF 00000000     0        0 0 3 00000000577d011c\n";

Test(port, auto_tries_torchrun_and_c10d_ports_last)
{
    /* issue 54: a ddplaunch job took 29500 and a torchrun job beside it failed with EADDRINUSE */
    bool seen[65536] = {false};
    int n = 29999 - 29300 + 1;
    for (int i = 0; i < n; i++) {
        int p = ddp_port_candidate(29300, 29999, 0, (unsigned)i);
        cr_assert(p >= 29300 && p <= 29999, "candidate %d: %d", i, p);
        cr_expect(!seen[p], "candidate %d: %d twice", i, p);
        seen[p] = true;
        if (i < n - 2)
            cr_expect(p != DDP_PORT_TORCHRUN && p != DDP_PORT_C10D, "candidate %d is %d", i, p);
    }
    cr_expect_eq(ddp_port_candidate(29300, 29999, 0, 0), 29300);
    cr_expect_eq(ddp_port_candidate(29500, 29999, 0, 0), 29501);
    cr_expect_eq(ddp_port_candidate(29500, 29999, 0, 499), 29500); /* when nothing else is free */
    cr_expect_eq(ddp_port_candidate(29500, 29500, 0, 0), 29500);
    /* a job-id sequence keeps its order but for the two, which move to its end */
    for (unsigned long long job = 1; job < 3000; job++) {
        int p0 = ddp_port_job_candidate(job, 0, 29400, 29999, 0);
        cr_expect(p0 != DDP_PORT_TORCHRUN && p0 != DDP_PORT_C10D, "job %llu: %d", job, p0);
        int last = ddp_port_job_candidate(job, 0, 29400, 29999, 599);
        cr_expect(last == DDP_PORT_TORCHRUN || last == DDP_PORT_C10D, "job %llu: last %d", job, last);
    }
}

Test(port, parse_proc_net_tcp)
{
    struct ddp_port_listener ls[4];
    int n = ddp_port_parse_listeners(fake_tcp, false, 0x7338, ls, 4); /* 29496 */
    cr_assert_eq(n, 1, "only the LISTEN line counts, not established or TIME_WAIT ones");
    cr_expect_eq(ls[0].inode, 98765);
    cr_expect_eq(ls[0].uid, 1000);
    cr_expect_str_eq(ls[0].addr, "127.0.0.1");
    n = ddp_port_parse_listeners(fake_tcp, false, 2024, ls, 4);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(ls[0].addr, "0.0.0.0");
    cr_expect_eq(ls[0].inode, 1171);
    cr_expect_eq(ddp_port_parse_listeners(fake_tcp, false, 29500, ls, 4), 0);
    n = ddp_port_parse_listeners(fake_tcp6, true, 0x7338, ls, 4);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(ls[0].addr, "::");
    cr_expect_eq(ls[0].inode, 4242);
    cr_expect_eq(ddp_port_parse_listeners("this is not /proc/net/tcp\n", false, 1, ls, 4), -EINVAL);
    cr_expect_eq(ddp_port_parse_listeners("", false, 1, ls, 4), 0);
}

Test(port, two_reservations_get_different_ports)
{
    int lo = test_range(0);
    struct ddp_port_req req = auto_req(lo, lo + 9);
    struct ddp_port_resv *a, *b;
    int pa, pb;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &a, &pa, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_port_reserve(&req, &b, &pb, &err), 0, "%s", err.msg);
    cr_expect_neq(pa, pb);
    cr_expect(pa >= lo && pa <= lo + 9 && pb >= lo && pb <= lo + 9);
    ddp_port_release(a);
    /* released: the next reservation may take it again */
    struct ddp_port_resv *c;
    int pc;
    cr_assert_eq(ddp_port_reserve(&req, &c, &pc, &err), 0, "%s", err.msg);
    cr_expect_eq(pc, pa);
    ddp_port_release(b);
    ddp_port_release(c);
}

/* Fork a child that reserves req and waits; returns its pid once it holds the reservation. */
static pid_t child_reserving(const struct ddp_port_req *req, int *port_out)
{
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        struct ddp_port_resv *r;
        int port = -1;
        struct ddp_err err = {0};
        if (ddp_port_reserve(req, &r, &port, &err) < 0)
            port = -1;
        if (write(pfd[1], &port, sizeof port) != sizeof port)
            _exit(1);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    cr_assert_eq(read(pfd[0], port_out, sizeof *port_out), (ssize_t)sizeof *port_out);
    close(pfd[0]);
    cr_assert_gt(*port_out, 0, "child could not reserve");
    return pid;
}

static void kill9(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(port, port_reserved_by_another_process_is_skipped_until_it_is_killed)
{
    int lo = test_range(1);
    struct ddp_port_req req = auto_req(lo, lo + 9);
    int cport;
    pid_t child = child_reserving(&req, &cport);
    cr_expect_eq(cport, lo);
    struct ddp_port_resv *r;
    int p;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, lo + 1, "the port locked by pid %d was handed out again", (int)child);
    ddp_port_release(r);
    /* an explicit request for the child's port names it as a ddplaunch reservation */
    struct ddp_port_req fx = fixed_req(lo);
    cr_expect_eq(ddp_port_reserve(&fx, &r, &p, &err), -EADDRINUSE);
    char pidstr[32];
    snprintf(pidstr, sizeof pidstr, "pid %d", (int)child);
    cr_expect(strstr(err.msg, "reserved by another process") && strstr(err.msg, pidstr), "%s", err.msg);
    cr_expect(strstr(err.msg, "master_port = auto"), "%s", err.msg);
    /* kill -9 the holder: the kernel drops its lock */
    kill9(child);
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, lo);
    ddp_port_release(r);
}

Test(port, port_bound_by_a_socket_is_skipped)
{
    int lo = test_range(2);
    int s = listen_on(lo);
    struct ddp_port_req req = auto_req(lo, lo + 9);
    struct ddp_port_resv *r;
    int p;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, lo + 1);
    cr_expect_eq(ddp_port_probe(lo), -EADDRINUSE);
    cr_expect_eq(ddp_port_probe(lo + 2), 0);
    ddp_port_release(r);
    close(s);
}

Test(port, explicit_busy_port_names_the_listening_process)
{
    int port = test_range(3);
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t child = fork();
    if (child == 0) {
        close(pfd[0]);
        int s = listen_on(port);
        (void)s;
        char ok = 1;
        if (write(pfd[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char ok;
    cr_assert_eq(read(pfd[0], &ok, 1), 1);
    struct ddp_port_holder h;
    cr_assert_eq(ddp_port_holder(port, &h), 0);
    cr_expect_eq(h.pid, child);
    cr_expect_str_eq(h.comm, "test_port");
    cr_expect_str_eq(h.addr, "127.0.0.1");
    struct ddp_port_req req = fixed_req(port);
    struct ddp_port_resv *r;
    int p;
    struct ddp_err err = {0};
    cr_expect_eq(ddp_port_reserve(&req, &r, &p, &err), -EADDRINUSE);
    char want[96];
    snprintf(want, sizeof want, "master_port %d on 127.0.0.1 is in use: pid %d (test_port)", port, (int)child);
    cr_expect(strstr(err.msg, want), "got: %s\nwant: %s", err.msg, want);
    cr_expect(strstr(err.msg, "master_port = auto"), "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
    kill9(child);
    cr_expect_eq(ddp_port_holder(port, &h), -ENOENT);
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, port);
    ddp_port_release(r);
}

Test(port, range_exhausted_says_why)
{
    int lo = test_range(4);
    int s = listen_on(lo);
    struct ddp_port_req req = auto_req(lo, lo + 1);
    struct ddp_port_resv *a, *b;
    int p;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &a, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(ddp_port_reserve(&req, &b, &p, &err), -EBUSY);
    char want[64];
    snprintf(want, sizeof want, "in %d-%d", lo, lo + 1);
    char who[96];
    snprintf(who, sizeof who, "1 reserved: reserved by pid %d, user ", (int)getpid());
    cr_expect(strstr(err.msg, want) && strstr(err.msg, who) && strstr(err.msg, "command test_port, 1 in use"), "%s",
              err.msg);
    ddp_port_release(a);
    close(s);
}

Test(port, lock_fd_is_close_on_exec_and_held)
{
    int first_free = dup(0); /* criterion's own sockets are below this */
    close(first_free);
    int lo = test_range(5);
    struct ddp_port_req req = auto_req(lo, lo + 9);
    struct ddp_port_resv *r;
    int p;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    /* the reservation is one socket of this process, close-on-exec, and the kernel says it is held */
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int found = 0;
    while ((de = readdir(d))) {
        char link[300], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strncmp(target, "socket:", 7) == 0 && atoi(de->d_name) >= first_free) {
            found++;
            int fl = fcntl(atoi(de->d_name), F_GETFD);
            cr_expect(fl & FD_CLOEXEC, "lock fd %s is inherited by workers", de->d_name);
        }
    }
    closedir(d);
    cr_expect_eq(found, 1, "the reservation must stay open while reserved (found %d sockets)", found);
    char who[160];
    cr_expect_eq(ddp_port_lock_holder(lockdir, p, who, sizeof who), 0);
    char want[64];
    snprintf(want, sizeof want, "pid %d, ", (int)getpid());
    cr_expect(strstr(who, want), "%s", who);
    ddp_port_release(r);
}

Test(port, lock_dir_does_not_matter_to_reservations)
{
    int lo = test_range(6);
    char *target = ddp_xasprintf("%s/elsewhere", base);
    cr_assert_eq(mkdir(target, 01777), 0);
    cr_assert_eq(symlink(target, lockdir), 0);
    struct ddp_port_req req = auto_req(lo, lo + 9);
    struct ddp_port_resv *r;
    int p;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, lo);
    ddp_port_release(r);
    free(target);
}

Test(port, slurm_job_uses_its_derived_port)
{
    int lo = test_range(7), hi = lo + 19;
    struct ddp_port_req req = auto_req(lo, hi);
    req.job_key = 4711;
    struct ddp_port_resv *r, *r2;
    int p, p2;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, ddp_port_job_candidate(4711, 0, lo, hi, 0));
    /* a node that cannot be told another port: one candidate only, and a clear error when it is taken */
    req.max_candidates = 1;
    cr_expect_eq(ddp_port_reserve(&req, &r2, &p2, &err), -EBUSY);
    cr_expect(strstr(err.msg, "derived from the job id 4711"), "%s", err.msg);
    req.max_candidates = 0;
    cr_assert_eq(ddp_port_reserve(&req, &r2, &p2, &err), 0, "%s", err.msg);
    cr_expect_eq(p2, ddp_port_job_candidate(4711, 0, lo, hi, 1));
    ddp_port_release(r);
    ddp_port_release(r2);
}

Test(port, slurm_port_of_other_nodes_matches_node0_reservation)
{
    struct ddp_port_spec ps = {.is_auto = true};
    int other = ddp_port_job_port(987654, 2, &ps);
    cr_expect(other >= DDP_PORT_AUTO_LO && other <= DDP_PORT_AUTO_HI, "%d", other);
    cr_expect_eq(other, ddp_port_job_candidate(987654, 2, DDP_PORT_AUTO_LO, DDP_PORT_AUTO_HI, 0));
    /* node 0 ignores a narrow ephemeral range for Slurm jobs, so that all nodes agree */
    if (ddp_port_probe(other) < 0)
        cr_skip_test("port %d busy on this host", other);
    struct ddp_port_req req = {.lock_dir = lockdir,
                               .spec = ps,
                               .job_key = 987654,
                               .job_step_key = 2,
                               .max_candidates = 1,
                               .ephemeral_range = "20000 60999"};
    struct ddp_port_resv *r;
    int p;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_port_reserve(&req, &r, &p, &err), 0, "%s", err.msg);
    cr_expect_eq(p, other);
    ddp_port_release(r);
    ps.lo = 30000;
    ps.hi = 30099;
    int q = ddp_port_job_port(987654, 2, &ps);
    cr_expect(q >= 30000 && q <= 30099);
}

Test(port, listener_owned_only_by_the_jobs_process_groups)
{
    int port = test_range(8);
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t child = fork();
    if (child == 0) { /* leads a group of its own; its child (same group) listens, as a rank's helper would */
        setpgid(0, 0);
        if (fork() == 0) {
            close(pfd[0]);
            int s = listen_on(port);
            (void)s;
            char ok = 1;
            if (write(pfd[1], &ok, 1) != 1)
                _exit(1);
            pause();
            _exit(0);
        }
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char ok;
    cr_assert_eq(read(pfd[0], &ok, 1), 1);
    struct ddp_port_holder h;
    pid_t job[2] = {getpid(), child};
    cr_expect_eq(ddp_port_listener_owned(port, job, 2, &h), 1, "the listener is in the job's process group");
    pid_t others[1] = {getpid()};
    cr_expect_eq(ddp_port_listener_owned(port, others, 1, &h), 0, "a listener outside the job was believed");
    cr_expect(h.pid > 0 && h.pid != child, "pid %d", (int)h.pid);
    cr_expect_str_eq(h.comm, "test_port");
    cr_expect_str_eq(h.addr, "127.0.0.1");
    kill(-child, SIGKILL);
    waitpid(child, NULL, 0);
    for (int i = 0; i < 200 && ddp_port_listener_owned(port, job, 2, &h) != -ENOENT; i++)
        usleep(10000);
    cr_expect_eq(ddp_port_listener_owned(port, job, 2, &h), -ENOENT);
}
