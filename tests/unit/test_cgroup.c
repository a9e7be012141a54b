/* cgroup: this process's cgroup v2 directory from /proc texts (pure v2, hybrid, none); the sweep of what
 * SIGKILLed launchers left, on plain directories named as attempt cgroups. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/cgroup.h"
#include "scratch.h"

static const char *mi_v2 = "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
static const char *mi_hybrid = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
                               "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                               "40 31 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
static const char *mi_v1 = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";

Test(cgroup, parse_self)
{
    char *d = NULL;
    cr_assert_eq(ddp_cgroup_parse_self("0::/user.slice/user-1000.slice/session-3.scope\n", mi_v2, &d), 0);
    cr_expect_str_eq(d, "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope");
    free(d);
    cr_assert_eq(ddp_cgroup_parse_self("4:memory:/x\n1:cpu:/\n0::/\n", mi_hybrid, &d), 0);
    cr_expect_str_eq(d, "/sys/fs/cgroup/unified");
    free(d);
    cr_expect_eq(ddp_cgroup_parse_self("4:memory:/x\n", mi_hybrid, &d), -ENOENT);
    cr_expect_eq(ddp_cgroup_parse_self("0::/a\n", mi_v1, &d), -ENOENT);
    cr_expect_eq(ddp_cgroup_parse_self("0::/a/../../etc\n", mi_v2, &d), -ENOENT);
}

SCRATCH_SUITE(cgroup_sweep);

static bool dir_exists(const char *name)
{
    char p[256];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", base, name);
    return stat(p, &st) == 0;
}

/* A launcher alive under another name (valgrind's memcheck, a renamed binary) keeps its cgroups; a pid that
 * no process has is swept. */
Test(cgroup_sweep, by_liveness_not_name)
{
    pid_t alive = fork();
    cr_assert_geq(alive, 0);
    if (alive == 0) {
        pause();
        _exit(0);
    }
    pid_t dead = scratch_gone_pid();
    char live_name[64], dead_name[64], p[256];
    snprintf(live_name, sizeof live_name, "ddplaunch-%d-attempt-0", (int)alive);
    snprintf(dead_name, sizeof dead_name, "ddplaunch-%d-attempt-3", (int)dead);
    snprintf(p, sizeof p, "%s/%s", base, live_name);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%s", base, dead_name);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/not-ours", base);
    cr_assert_eq(mkdir(p, 0755), 0);
    cr_expect_eq(ddp_cgroup_sweep(base), 1);
    cr_expect(dir_exists(live_name), "the cgroup of a live launcher (comm not ddplaunch) was swept");
    cr_expect(!dir_exists(dead_name), "the cgroup of a gone launcher was kept");
    cr_expect(dir_exists("not-ours"));
    kill(alive, SIGKILL);
    waitpid(alive, NULL, 0);
}

/* issue 40: a killed launcher's standby cgroup is swept as its attempt cgroups are (it was left for ever); a
 * directory of ours whose pid lives is not looked at while no pid is gone. */
Test(cgroup_sweep, standby_cgroups_too_and_nothing_while_every_pid_lives)
{
    pid_t dead = scratch_gone_pid();
    char live_name[64], dead_name[64], p[256];
    snprintf(live_name, sizeof live_name, "ddplaunch-%d-standby", (int)getppid());
    snprintf(dead_name, sizeof dead_name, "ddplaunch-%d-standby", (int)dead);
    snprintf(p, sizeof p, "%s/%s", base, live_name);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/ddplaunch-%d-standbyx", base, (int)dead);
    cr_assert_eq(mkdir(p, 0755), 0);
    cr_expect_eq(ddp_cgroup_sweep(base), 0, "every named pid lives (a name that is not ours does not count)");
    snprintf(p, sizeof p, "%s/%s", base, dead_name);
    cr_assert_eq(mkdir(p, 0755), 0);
    cr_expect_eq(ddp_cgroup_sweep(base), 1);
    cr_expect(!dir_exists(dead_name), "a gone launcher's standby cgroup was kept");
    cr_expect(dir_exists(live_name), "a live pid's standby cgroup was swept");
}
