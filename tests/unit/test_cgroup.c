/* cgroup: this process's cgroup v2 directory from /proc texts (pure v2, hybrid, none). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "cgroup.h"

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
