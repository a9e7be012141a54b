/* Unit tests for rdzv_etcd_plan.c: signed values, decisions as text, the decision-maker's rule. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "nodes/rdzv_etcd_internal.h"

static void up(struct ddp_re_view *v, int k, int nproc, const char *addr, int port)
{
    v->members[k].up = true;
    v->members[k].nproc = nproc;
    v->members[k].port = port;
    snprintf(v->members[k].addr, sizeof v->members[k].addr, "%s", addr);
}

static char *decide_text(const struct ddp_re_view *v, const struct ddp_re_params *p)
{
    struct ddp_re_decision next;
    if (!ddp_re_decide(v, p, &next))
        return NULL;
    char *s = ddp_re_decision_text(&next);
    ddp_re_decision_free(&next);
    return s;
}

Test(rdzv_etcd, sign_and_verify)
{
    char *v = ddp_re_sign("0123456789abcdef0123", "job", "/ddplaunch/x/decision", "attempt=0 state=exit status=0");
    cr_assert_str_eq(ddp_re_verify("0123456789abcdef0123", "job", "/ddplaunch/x/decision", v),
                     "attempt=0 state=exit status=0");
    cr_assert_null(ddp_re_verify("another secret 12345", "job", "/ddplaunch/x/decision", v));
    cr_assert_null(ddp_re_verify("0123456789abcdef0123", "job2", "/ddplaunch/x/decision", v));
    cr_assert_null(ddp_re_verify("0123456789abcdef0123", "job", "/ddplaunch/x/node/0", v)); /* moved to a key */
    v[70] ^= 1;
    cr_assert_null(ddp_re_verify("0123456789abcdef0123", "job", "/ddplaunch/x/decision", v));
    cr_assert_null(ddp_re_verify("s", "job", "k", "short"));
    free(v);
}

Test(rdzv_etcd, decision_text_round_trip)
{
    struct ddp_re_decision d;
    cr_assert_eq(ddp_re_decision_parse("attempt=2 state=stop status=0 master=10.0.0.1:29500 nodes=1:8,2:4 "
                                       "reason=node 0 lost (its etcd lease expired)",
                                       &d),
                 0);
    cr_assert_eq(d.state, DDP_RE_STOP);
    cr_assert_eq(d.attempt, 2);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.node[1], 2);
    cr_assert_eq(d.nproc[0], 8);
    cr_assert_str_eq(d.master, "10.0.0.1");
    cr_assert_eq(d.port, 29500);
    cr_assert_str_eq(d.reason, "node 0 lost (its etcd lease expired)");
    char *s = ddp_re_decision_text(&d);
    cr_assert_str_eq(s, "attempt=2 state=stop status=0 master=10.0.0.1:29500 nodes=1:8,2:4 reason=node 0 lost (its "
                        "etcd lease expired)");
    free(s);
    ddp_re_decision_free(&d);
    cr_assert_lt(ddp_re_decision_parse("attempt=0 state=start nodes=", &d), 0); /* a start on no node */
    ddp_re_decision_free(&d);
    cr_assert_lt(ddp_re_decision_parse("attempt=x state=exit", &d), 0);
    ddp_re_decision_free(&d);
    cr_assert_lt(ddp_re_decision_parse("attempt=0 state=start nodes=1:0", &d), 0);
    ddp_re_decision_free(&d);
}

Test(rdzv_etcd, join_waits_for_max_or_last_call)
{
    struct ddp_re_view v;
    struct ddp_re_params p = {.min_nodes = 2, .max_nodes = 3, .max_restarts = 1};
    ddp_re_view_init(&v, 3);
    up(&v, 0, 2, "10.0.0.1", 100);
    cr_assert_null(decide_text(&v, &p));
    up(&v, 2, 2, "10.0.0.3", 300);
    cr_assert_null(decide_text(&v, &p)); /* MIN in: the last call runs */
    p.last_call_over = true;
    char *s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=0 state=start status=0 master=10.0.0.1:100 nodes=0:2,2:2");
    free(s);
    p.last_call_over = false;
    up(&v, 1, 4, "10.0.0.2", 200);
    s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=0 state=start status=0 master=10.0.0.1:100 nodes=0:2,1:4,2:2");
    free(s);
    ddp_re_view_free(&v);
}

Test(rdzv_etcd, join_timeout_below_min_exits_75)
{
    struct ddp_re_view v;
    struct ddp_re_params p = {.min_nodes = 2, .max_nodes = 3, .join_over = true};
    ddp_re_view_init(&v, 3);
    up(&v, 1, 1, "a", 1);
    char *s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=0 state=exit status=75 reason=1 of at least 2 nodes joined by the join timeout");
    free(s);
    ddp_re_view_free(&v);
}

/* Attempt 0 on nodes 0, 1, 2; node 0 lost: stop, then (the others reported) attempt 1 on 1 and 2. */
Test(rdzv_etcd, lost_node_0_restarts_on_the_others)
{
    struct ddp_re_view v;
    struct ddp_re_params p = {.min_nodes = 2, .max_nodes = 3, .max_restarts = 1};
    ddp_re_view_init(&v, 3);
    up(&v, 1, 2, "10.0.0.2", 200);
    up(&v, 2, 2, "10.0.0.3", 300);
    cr_assert_eq(ddp_re_decision_parse("attempt=0 state=start master=10.0.0.1:100 nodes=0:2,1:2,2:2", &v.d), 0);
    char *s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=0 state=stop status=0 master=10.0.0.1:100 nodes=0:2,1:2,2:2 reason=node 0 lost "
                        "(its etcd lease expired)");
    free(s);
    v.d.state = DDP_RE_STOP;
    cr_assert_null(decide_text(&v, &p)); /* stopped already; nodes 1 and 2 not ended */
    v.report[1] = 143;
    v.report[2] = 0;
    s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=1 state=start status=0 master=10.0.0.2:200 nodes=1:2,2:2");
    free(s);
    ddp_re_view_free(&v);
}

Test(rdzv_etcd, success_exits_0_and_no_restarts_left_exits_with_the_failure)
{
    struct ddp_re_view v;
    struct ddp_re_params p = {.min_nodes = 1, .max_nodes = 2, .max_restarts = 0};
    ddp_re_view_init(&v, 2);
    up(&v, 0, 1, "a", 1);
    up(&v, 1, 1, "b", 2);
    cr_assert_eq(ddp_re_decision_parse("attempt=0 state=start master=a:1 nodes=0:1,1:1", &v.d), 0);
    v.report[0] = 0;
    cr_assert_null(decide_text(&v, &p)); /* node 1 still runs */
    v.report[1] = 0;
    char *s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=0 state=exit status=0");
    free(s);
    v.report[1] = 3;
    v.d.state = DDP_RE_STOP;
    s = decide_text(&v, &p);
    cr_assert_str_eq(s, "attempt=0 state=exit status=3 reason=node 1 failed (exit status 3); no restarts left");
    free(s);
    v.d.state = DDP_RE_EXIT;
    cr_assert_null(decide_text(&v, &p));
    ddp_re_view_free(&v);
}

Test(rdzv_etcd, fields)
{
    char buf[32];
    cr_assert(ddp_re_field("a=1 bb=22 reason=x y z", "bb", buf, sizeof buf));
    cr_assert_str_eq(buf, "22");
    cr_assert(ddp_re_field("a=1 reason=x y z", "reason", buf, sizeof buf));
    cr_assert_str_eq(buf, "x y z");
    cr_assert_not(ddp_re_field("ab=1", "b", buf, sizeof buf));
    cr_assert_eq(ddp_re_field_int("n=12x", "n", -1), -1);
}
