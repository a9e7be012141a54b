/* Unit tests for holders, the /proc scan that may say "nobody holds a GPU" without NVML: each way it must not
 * say so (a holder, a process it cannot read, another pid namespace, pid 1 hidden), and the two it leaves out
 * (itself, root's persistence daemon). A fake /proc tree in a scratch directory: pid directories with fd
 * symlinks, comm and exe, and self/ns/pid. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"
#include "topo/holders.h"

static char proc[128];

/* proc/dir/name -> target */
static void put_link(const char *target, const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", proc, dir, name);
    cr_assert_eq(symlink(target, path), 0, "%s", path);
}

static void put_dir(const char *pid, const char *sub)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s%s", proc, pid, sub ? "/" : "", sub ? sub : "");
    mkdir(path, 0755);
}

/* A process: pid with the descriptors fds (targets, NULL-terminated) and comm. */
static void put_process(const char *pid, const char *comm, const char *const *fds)
{
    put_dir(pid, NULL);
    put_dir(pid, "fd");
    for (int i = 0; fds && fds[i]; i++) {
        char dir[64], n[16];
        snprintf(dir, sizeof dir, "%s/fd", pid);
        snprintf(n, sizeof n, "%d", i);
        put_link(fds[i], dir, n);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s/comm", proc, pid);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", comm);
    fclose(f);
}

static void setup(void)
{
    scratch_make("holders");
    snprintf(proc, sizeof proc, "%s/proc", base);
    cr_assert_eq(mkdir(proc, 0755), 0);
    put_dir("self", NULL);
    put_dir("self", "ns");
    char ns[64];
    snprintf(ns, sizeof ns, "pid:[%llu]", DDP_HOLDERS_INIT_PIDNS);
    put_link(ns, "self/ns", "pid");
    put_process("1", "init", (const char *const[]){"/dev/null", "socket:[1234]", NULL});
}

TestSuite(holders, .init = setup, .fini = scratch_remove_all);

Test(holders, nobody)
{
    put_process("40", "bash", (const char *const[]){"/dev/pts/0", "pipe:[5]", "/dev/nvidia", NULL});
    char why[256];
    cr_expect(ddp_holders_none(proc, 99, why, sizeof why), "%s", why);
    cr_expect(strstr(why, "no process holds /dev/nvidia*"), "%s", why);
}

Test(holders, any_device_of_the_driver_counts)
{
    put_process("40", "bash", (const char *const[]){"/dev/pts/0", "/dev/nvidia-uvm", NULL});
    char why[256];
    cr_expect_not(ddp_holders_none(proc, 99, why, sizeof why));
    cr_expect(strstr(why, "pid 40 (bash) has /dev/nvidia-uvm open"), "%s", why);
}

Test(holders, none_when_only_self_and_the_persistence_daemon_hold_one)
{
    put_process("99", "ddplaunch", (const char *const[]){"/dev/nvidiactl", NULL});
    put_process("77", "nvidia-persistenced", (const char *const[]){"/dev/nvidiactl", "/dev/nvidia0", NULL});
    put_link("/usr/bin/nvidia-persistenced", "77", "exe");
    char why[256];
    bool none = ddp_holders_none(proc, 99, why, sizeof why);
    if (geteuid() == 0) { /* the daemon is believed only as root's process (the fake tree is ours) */
        cr_expect(none, "%s", why);
        cr_expect(strstr(why, "no process holds /dev/nvidia*"), "%s", why);
    } else {
        cr_expect_not(none, "%s", why);
    }
}

Test(holders, a_holder_is_named_with_its_comm_made_printable)
{
    put_process("836", "py\033[2Jthon3", (const char *const[]){"/dev/null", "/dev/nvidia3", NULL});
    char why[256];
    cr_expect_not(ddp_holders_none(proc, 99, why, sizeof why));
    cr_expect(strstr(why, "pid 836 (") && strstr(why, ") has /dev/nvidia3 open"), "%s", why);
    cr_expect_null(strchr(why, '\033'), "another user's process name reached the line raw: %s", why);
    cr_expect_eq(ddp_holders_pid(proc, 836), 1);
    cr_expect_eq(ddp_holders_pid(proc, 1), 0);
    cr_expect_eq(ddp_holders_pid(proc, 12345), -1, "a pid that is not there is not known");
}

Test(holders, a_process_it_cannot_read_is_not_nobody)
{
    put_dir("500", NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/500/fd", proc); /* not a directory: its descriptors cannot be listed */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    char why[256];
    cr_expect_not(ddp_holders_none(proc, 99, why, sizeof why));
    cr_expect(strstr(why, "pid 500's descriptors are not readable here"), "%s", why);
    cr_expect_eq(ddp_holders_pid(proc, 500), -1);
}

Test(holders, another_pid_namespace_is_not_nobody)
{
    char path[512];
    snprintf(path, sizeof path, "%s/self/ns/pid", proc);
    cr_assert_eq(unlink(path), 0);
    put_link("pid:[4026532999]", "self/ns", "pid");
    char why[256];
    cr_expect_not(ddp_holders_none(proc, 99, why, sizeof why));
    cr_expect(strstr(why, "not the host's pid namespace (pid:[4026532999])"), "%s", why);
}

Test(holders, pid_1_out_of_sight_is_not_nobody)
{
    char path[512];
    snprintf(path, sizeof path, "%s/1/fd/0", proc);
    unlink(path);
    snprintf(path, sizeof path, "%s/1/fd/1", proc);
    unlink(path);
    snprintf(path, sizeof path, "%s/1/fd", proc);
    rmdir(path);
    snprintf(path, sizeof path, "%s/1/comm", proc);
    unlink(path);
    snprintf(path, sizeof path, "%s/1", proc);
    cr_assert_eq(rmdir(path), 0);
    char why[256];
    cr_expect_not(ddp_holders_none(proc, 99, why, sizeof why));
    cr_expect(strstr(why, "pid 1 is out of sight"), "%s", why);
}

/* proc/rel holds text */
static void put_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", proc, rel);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* pid's pid namespace link and NSpid line */
static void put_ns(const char *pid, const char *ns, const char *nspid)
{
    char rel[64], line[128];
    snprintf(rel, sizeof rel, "%s/ns", pid);
    put_dir(pid, "ns");
    char path[512];
    snprintf(path, sizeof path, "%s/%s/ns/pid", proc, pid);
    unlink(path);
    put_link(ns, rel, "pid");
    snprintf(rel, sizeof rel, "%s/status", pid);
    snprintf(line, sizeof line, "Name:\tx\nNSpid:\t%s\nUid:\t0\t0\t0\t0\n", nspid);
    put_file(rel, line);
}

Test(holders, host_pid_in_the_hosts_namespace_is_the_same)
{
    unsigned here = 0;
    cr_expect_eq(ddp_holders_host_pid(proc, 4242, &here), 1);
    cr_expect_eq(here, 4242u);
}

Test(holders, host_pid_in_a_containers_own_proc_is_not_looked_up)
{
    /* a container's own /proc: its pid 1 is the container's init, and pid 2 an unrelated process of it */
    put_ns("self", "pid:[4026532999]", "7");
    put_ns("1", "pid:[4026532999]", "1");
    put_process("2", "sleep", NULL);
    put_ns("2", "pid:[4026532999]", "2");
    unsigned here = 0;
    cr_expect_eq(ddp_holders_host_pid(proc, 2, &here), 0, "the container's pid 2 was taken for the host's");
    cr_expect_eq(ddp_holders_host_pid(proc, 4242, &here), 0);
}

Test(holders, host_pid_translated_through_nspid_where_the_hosts_proc_shows_it)
{
    /* this process is in a child namespace (5000 on the host, 3 here) and /proc is the host's */
    char init[64];
    snprintf(init, sizeof init, "pid:[%llu]", DDP_HOLDERS_INIT_PIDNS);
    put_ns("self", "pid:[4026532999]", "5000\t3");
    put_ns("1", init, "1");
    put_process("4242", "python3", (const char *const[]){"/dev/nvidia0", NULL});
    put_ns("4242", "pid:[4026532999]", "4242\t7");
    unsigned here = 0;
    cr_expect_eq(ddp_holders_host_pid(proc, 4242, &here), 1);
    cr_expect_eq(here, 7u, "NSpid's entry at this namespace's level");
    /* a process of another container (a sibling namespace), and one of the host: no pid here to name */
    put_process("4300", "python3", NULL);
    put_ns("4300", "pid:[4026533111]", "4300\t7");
    cr_expect_eq(ddp_holders_host_pid(proc, 4300, &here), 0);
    put_process("4400", "python3", NULL);
    put_ns("4400", init, "4400");
    cr_expect_eq(ddp_holders_host_pid(proc, 4400, &here), 0);
    cr_expect_eq(ddp_holders_host_pid(proc, 9999, &here), 0, "a pid that is not there");
    /* /proc's pid 1 that this user may not read: whose /proc it is cannot be told */
    char path[512];
    snprintf(path, sizeof path, "%s/1/ns/pid", proc);
    unlink(path);
    cr_expect_eq(ddp_holders_host_pid(proc, 4242, &here), 0);
}
