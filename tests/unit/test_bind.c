/* Unit tests for launcher/bind: the binding the calling process really gets (Cpus_allowed_list in
 * /proc/self/status, get_mempolicy), intersection with what it may use, and the errors. Criterion runs each
 * test in its own process, so binding the test process is safe. Needs at least 2 CPUs for some checks. */
#include <criterion/criterion.h>
#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/bind.h"

/* The value of a "Key:\tvalue" line of /proc/self/status. Caller frees. */
static char *status_field(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[4096];
    size_t kl = strlen(key);
    char *v = NULL;

    cr_assert(f);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            char *p = line + kl + 1;

            p += strspn(p, " \t");
            p[strcspn(p, "\n")] = '\0';
            v = strdup(p);
        }
    fclose(f);
    cr_assert(v, "no %s in /proc/self/status", key);
    return v;
}

static int ncpus_allowed(void)
{
    cpu_set_t cs;

    cr_assert_eq(sched_getaffinity(0, sizeof cs, &cs), 0);
    return CPU_COUNT(&cs);
}

Test(bind, cpus_really_change)
{
    struct ddp_err err = {0};
    char *s, *cur;

    if (ncpus_allowed() < 2)
        cr_skip_test("needs 2 CPUs");
    cr_assert_eq(ddp_bind_self("1", NULL, DDP_MEM_NONE, &err), 0, "%s", err.msg);
    s = status_field("Cpus_allowed_list");
    cr_expect_str_eq(s, "1");
    cur = ddp_bind_current_cpus();
    cr_expect_str_eq(cur, "1");
    free(cur);
    free(s);
}

Test(bind, only_allowed_cpus_are_used)
{
    struct ddp_err err = {0};
    cpu_set_t one;
    char *s;

    if (ncpus_allowed() < 2)
        cr_skip_test("needs 2 CPUs");
    /* like running under `taskset -c 0`: CPU 1 exists but is not ours */
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    cr_expect_eq(ddp_bind_self("1", NULL, DDP_MEM_NONE, &err), -EINVAL);
    cr_expect_str_eq(err.msg, "cpus 1: none of them is allowed here (allowed: 0)");
    s = status_field("Cpus_allowed_list");
    cr_expect_str_eq(s, "0", "a failed bind changes nothing");
    free(s);
    /* a list from an XML topology of a bigger machine: the CPUs that exist here are used, with a warning */
    cr_expect_eq(ddp_bind_self("0,24-47", NULL, DDP_MEM_NONE, &err), 0, "%s", err.msg);
    s = status_field("Cpus_allowed_list");
    cr_expect_str_eq(s, "0");
    free(s);
}

Test(bind, bad_lists)
{
    struct ddp_err err = {0};

    cr_expect_eq(ddp_bind_self("0-x", NULL, DDP_MEM_NONE, &err), -EINVAL);
    cr_expect(strstr(err.msg, "cpus '0-x': not a CPU list"), "%s", err.msg);
    cr_expect_eq(ddp_bind_self(NULL, "zero", DDP_MEM_LOCAL, &err), -EINVAL);
    cr_expect(strstr(err.msg, "mems 'zero': not a NUMA node list"), "%s", err.msg);
    cr_expect_eq(ddp_bind_self("4000-4001", NULL, DDP_MEM_NONE, &err), -EINVAL);
    cr_expect(strstr(err.msg, "cpus 4000-4001: none of them is allowed here"), "%s", err.msg);
    cr_expect_eq(ddp_bind_self(NULL, "63", DDP_MEM_LOCAL, &err), -EINVAL);
    cr_expect(strstr(err.msg, "mems 63: none of these NUMA nodes is allowed here"), "%s", err.msg);
    /* nothing asked: nothing done */
    cr_expect_eq(ddp_bind_self(NULL, NULL, DDP_MEM_LOCAL, &err), 0);
    cr_expect_eq(ddp_bind_self("", "", DDP_MEM_LOCAL, &err), 0);
}

static int mempolicy(unsigned long *mask)
{
    int mode = -1;

    *mask = 0;
    cr_assert_eq(get_mempolicy(&mode, mask, sizeof *mask * 8, NULL, 0), 0, "get_mempolicy: %s", strerror(errno));
    return mode;
}

Test(bind, memory_policies)
{
    struct ddp_err err = {0};
    unsigned long mask;

    cr_expect_eq(mempolicy(&mask), MPOL_DEFAULT);
    /* mode none: mems ignored */
    cr_assert_eq(ddp_bind_self(NULL, "0", DDP_MEM_NONE, &err), 0, "%s", err.msg);
    cr_expect_eq(mempolicy(&mask), MPOL_DEFAULT);
    cr_assert_eq(ddp_bind_self(NULL, "0", DDP_MEM_INTERLEAVE, &err), 0, "%s", err.msg);
    cr_expect_eq(mempolicy(&mask), MPOL_INTERLEAVE);
    cr_expect_eq(mask, 1UL);
    cr_assert_eq(ddp_bind_self("0", "0", DDP_MEM_LOCAL, &err), 0, "%s", err.msg);
    cr_expect_eq(mempolicy(&mask), MPOL_BIND);
    cr_expect_eq(mask, 1UL);
}
