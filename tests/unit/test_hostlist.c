/* Unit tests for launcher/hostlist: Slurm's hostlist grammar (examples from Slurm's docs and a live 22.05
 * cluster), errors for malformed input, and size bounds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "nodes/hostlist.h"

/* Expand expr and return the hosts joined by spaces (caller frees), asserting success. */
static char *expand_joined(const char *expr)
{
    struct ddp_strv hosts = {0};
    struct ddp_err err = {0};
    int rc = ddp_hostlist_expand(expr, &hosts, &err);
    cr_assert_geq(rc, 1, "expand '%s' failed: %d %s", expr, rc, err.msg);
    cr_assert_eq((size_t)rc, hosts.n);
    struct ddp_buf b = {0};
    for (size_t i = 0; i < hosts.n; i++) {
        if (i)
            ddp_buf_puts(&b, " ");
        ddp_buf_puts(&b, hosts.v[i]);
    }
    ddp_strv_clear(&hosts);
    return b.data;
}

static void check_expand(const char *expr, const char *want)
{
    char *got = expand_joined(expr);
    cr_expect_str_eq(got, want, "expand '%s'", expr);
    free(got);
}

static int expand_err(const char *expr, struct ddp_err *err)
{
    struct ddp_strv hosts = {0};
    ddp_strv_push(&hosts, "keep");
    int rc = ddp_hostlist_expand(expr, &hosts, err);
    cr_expect_lt(rc, 0, "expand '%s' should fail", expr);
    cr_expect_eq(hosts.n, 1, "out changed on error for '%s'", expr);
    ddp_strv_clear(&hosts);
    return rc;
}

Test(hostlist, plain_names)
{
    check_expand("n1", "n1");
    check_expand("node-a.example.com", "node-a.example.com");
    check_expand("a,b c\tz", "a b c z");
    check_expand(" a,,b ,", "a b");
}

Test(hostlist, ranges_and_padding)
{
    check_expand("n[8-10]", "n8 n9 n10");
    check_expand("m[08-10]", "m08 m09 m10");
    check_expand("gpu[001-004,010]", "gpu001 gpu002 gpu003 gpu004 gpu010");
    check_expand("n[1,3,5-6]", "n1 n3 n5 n6");
    check_expand("n[7]", "n7");
    check_expand("n[0]", "n0");
    check_expand("n[098-101]", "n098 n099 n100 n101");
}

Test(hostlist, several_tokens_and_products)
{
    check_expand("gpu[001-004,010],login[1-2]", "gpu001 gpu002 gpu003 gpu004 gpu010 login1 login2");
    check_expand("rack[1-2]n[01-02]", "rack1n01 rack1n02 rack2n01 rack2n02");
    check_expand("gpu[001-004,010],rack[1-2]n[01-02]",
                 "gpu001 gpu002 gpu003 gpu004 gpu010 rack1n01 rack1n02 rack2n01 rack2n02");
    check_expand("r[1-2]c[1-2]n[1-2]", "r1c1n1 r1c1n2 r1c2n1 r1c2n2 r2c1n1 r2c1n2 r2c2n1 r2c2n2");
    check_expand("[1-3]", "1 2 3");
    /* Text after the last bracket (Slurm >= 23.02). */
    check_expand("n[1-2].cluster", "n1.cluster n2.cluster");
    check_expand("n[1-2]-ib", "n1-ib n2-ib");
}

Test(hostlist, duplicates_are_kept_in_order)
{
    check_expand("n2,n1,n[1-2]", "n2 n1 n1 n2");
}

Test(hostlist, appends_to_out)
{
    struct ddp_strv hosts = {0};
    ddp_strv_push(&hosts, "first");
    struct ddp_err err = {0};
    cr_assert_eq(ddp_hostlist_expand("n[1-2]", &hosts, &err), 2);
    cr_assert_eq(hosts.n, 3);
    cr_expect_str_eq(hosts.v[0], "first");
    cr_expect_str_eq(hosts.v[2], "n2");
    cr_expect_null(hosts.v[3]);
    ddp_strv_clear(&hosts);
}

Test(hostlist, malformed_input_is_an_error_with_column)
{
    struct ddp_err err = {0};
    cr_expect_eq(expand_err("n[1-2", &err), -EINVAL);
    cr_expect(strstr(err.msg, "without a matching ']'"), "%s", err.msg);
    cr_expect(strstr(err.msg, "column 2"), "%s", err.msg);
    cr_expect_eq(expand_err("n1-2]", &err), -EINVAL);
    cr_expect(strstr(err.msg, "']' without a matching '['"), "%s", err.msg);
    cr_expect_eq(expand_err("n[]", &err), -EINVAL);
    cr_expect(strstr(err.msg, "empty brackets"), "%s", err.msg);
    cr_expect_eq(expand_err("n[3-1]", &err), -EINVAL);
    cr_expect(strstr(err.msg, "goes down"), "%s", err.msg);
    cr_expect_eq(expand_err("n[a-b]", &err), -EINVAL);
    cr_expect(strstr(err.msg, "expected a number"), "%s", err.msg);
    cr_expect_eq(expand_err("n[1-]", &err), -EINVAL);
    cr_expect_eq(expand_err("n[-1]", &err), -EINVAL);
    cr_expect_eq(expand_err("n[1,]", &err), -EINVAL);
    cr_expect_eq(expand_err("n[1-2-3]", &err), -EINVAL);
    cr_expect(strstr(err.msg, "unexpected '-'"), "%s", err.msg);
    cr_expect_eq(expand_err("n[1[2]]", &err), -EINVAL);
    cr_expect_eq(expand_err("n[1 2]", &err), -EINVAL);
    cr_expect_eq(expand_err("n\001x", &err), -EINVAL);
    cr_expect(strstr(err.msg, "control character"), "%s", err.msg);
    cr_expect_eq(expand_err("", &err), -EINVAL);
    cr_expect(strstr(err.msg, "empty"), "%s", err.msg);
    cr_expect_eq(expand_err(" , ", &err), -EINVAL);
    cr_expect_eq(expand_err("n[1234567890123456789]", &err), -EINVAL);
    cr_expect(strstr(err.msg, "longer than 18 digits"), "%s", err.msg);
    cr_expect(strncmp(err.msg, "hostlist 'n[1234567890123456789]'", 33) == 0, "%s", err.msg);
}

Test(hostlist, huge_expansions_are_refused_fast)
{
    struct ddp_err err = {0};
    long long t0 = ddp_now_ms();
    cr_expect_eq(expand_err("n[0-999999999999999999]", &err), -E2BIG);
    cr_expect(strstr(err.msg, "more than 65536 hosts"), "%s", err.msg);
    cr_expect_eq(expand_err("n[0-999]m[0-999]", &err), -E2BIG);
    cr_expect_eq(expand_err("a[0-999999999999999999]b[0-999999999999999999]c[0-999999999999999999]", &err), -E2BIG);
    /* Within one token the limit is exact... */
    struct ddp_strv hosts = {0};
    cr_expect_eq(ddp_hostlist_expand("n[1-65536]", &hosts, &err), 65536, "%s", err.msg);
    cr_expect_str_eq(hosts.v[65535], "n65536");
    ddp_strv_clear(&hosts);
    cr_expect_eq(expand_err("n[1-65537]", &err), -E2BIG);
    /* ...and it counts across tokens. */
    cr_expect_eq(expand_err("n[1-65536],x", &err), -E2BIG);
    cr_expect_lt(ddp_now_ms() - t0, 2000);
}

Test(hostlist, long_names_are_refused)
{
    struct ddp_err err = {0};
    char name[300];
    memset(name, 'a', sizeof name);
    name[255] = '\0';
    check_expand(name, name);
    name[255] = 'a';
    name[256] = '\0';
    cr_expect_eq(expand_err(name, &err), -E2BIG);
    cr_expect(strstr(err.msg, "longer than 255"), "%s", err.msg);
    /* A bracket group counts at the width of its widest number. */
    memset(name, 'a', sizeof name);
    strcpy(name + 250, "[1-100000]");
    cr_expect_eq(expand_err(name, &err), -E2BIG);
}
