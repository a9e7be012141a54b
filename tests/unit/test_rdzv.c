/* Unit tests for launcher/rdzv: static vs c10d-style rendezvous, the refusal of several nodes without any way to
 * get node ranks, join_timeout from the key, from rdzv_conf and torchrun's defaults, and the job identity. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nodes/rdzv.h"

static struct ddp_spec spec;
static struct ddp_err err;

static void set(const char *key, const char *value)
{
    const char *dot = strchr(key, '.');
    char section[32];
    snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
    cr_assert_eq(ddp_spec_set(&spec, section, dot + 1, value, DDP_ORIGIN_CLI, "test", &err), 0, "%s", err.msg);
}

static void fresh(void)
{
    ddp_spec_free(&spec);
    ddp_spec_init(&spec);
}

Test(rdzv, decide)
{
    struct ddp_rdzv r;
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0);
    cr_expect_not(r.several);
    /* several nodes, static, no node rank, no scheduler: node 0, as torchrun (issue 23 item 2); its own
     * address is torchrun's default 127.0.0.1 */
    set("job.nnodes", "1:2");
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0, "%s", err.msg);
    cr_expect_str_eq(r.source, "static, node rank 0 by default");
    cr_expect_not(r.dynamic);
    set("job.node_rank", "0");
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0, "%s", err.msg);
    cr_expect_str_eq(r.source, "static");
    set("job.node_rank", "1");
    cr_expect_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), -EINVAL, "no address for node 0");
    cr_expect(strstr(err.msg, "--master-addr"), "%s", err.msg);
    set("job.master_addr", "n0");
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0);
    cr_expect_str_eq(r.source, "static");
    cr_expect_not(r.dynamic);
    cr_expect_eq(r.join_timeout_ms, 900000, "torchrun's static default");
    cr_assert_eq(ddp_rdzv_decide(&spec, "skypilot", &r, &err), 0);
    cr_expect_str_eq(r.source, "skypilot", "the scheduler is named as the source");
    /* c10d: ranks at join, 600 s, rdzv_conf's join_timeout, the key over both */
    fresh();
    set("job.nnodes", "1:2");
    set("job.rdzv_backend", "c10d");
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0);
    cr_expect(r.dynamic);
    cr_expect_str_eq(r.source, "c10d");
    cr_expect_eq(r.join_timeout_ms, 600000);
    cr_expect_eq(r.last_call_ms, 30000, "torchrun's last_call_timeout");
    cr_expect_eq(r.lost_after_ms, 15000);
    set("job.rdzv_conf", "read_timeout=60,join_timeout=75,last_call_timeout=2.5");
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0);
    cr_expect_eq(r.join_timeout_ms, 75000);
    cr_expect_eq(r.last_call_ms, 2500);
    set("job.join_timeout", "2m");
    set("job.lost_after", "20s");
    cr_assert_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), 0);
    cr_expect_eq(r.join_timeout_ms, 120000);
    cr_expect_eq(r.lost_after_ms, 20000);
    set("job.rdzv_conf", "join_timeout=soon");
    cr_expect_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), -EINVAL);
    cr_expect(strstr(err.msg, "join_timeout=soon"), "%s", err.msg);
    set("job.rdzv_conf", "");
    set("job.rdzv_backend", "zookeeper");
    cr_expect_eq(ddp_rdzv_decide(&spec, NULL, &r, &err), -EINVAL);
    ddp_spec_free(&spec);
}

Test(rdzv, identity_binds_run_and_command)
{
    const char *a[] = {"train.py", "--lr", "1", NULL}, *b[] = {"train.py", "--lr", "2", NULL},
               *c[] = {"train.py", "--lr1", NULL};
    char x[65], y[65], z[65];
    ddp_rdzv_identity("none", a, x);
    ddp_rdzv_identity("none", a, y);
    cr_expect_str_eq(x, y);
    ddp_rdzv_identity("none", b, y);
    cr_expect_str_neq(x, y, "another command");
    ddp_rdzv_identity("job-2", a, y);
    cr_expect_str_neq(x, y, "another rendezvous id");
    const char *d[] = {"train.py", "--lr", NULL};
    ddp_rdzv_identity("none", d, y);
    ddp_rdzv_identity("none", c, z);
    cr_expect_str_neq(y, z, "argument boundaries count");
}
