/* Unit tests for launcher/layout: attempts laid out over the nodes that are up with their own worker counts,
 * group ranks by host name for c10d-style jobs, downsizing shares, and how an attempt ends across nodes. */
#include <criterion/criterion.h>
#include <errno.h>

#include "nodes/layout.h"

Test(layout, over_the_nodes_that_are_up)
{
    struct ddp_layout_node n[4] = {{true, 4, "a"}, {true, 2, "b"}, {false, 4, "c"}, {true, 4, "d"}};
    struct ddp_layout_assign as[4];
    int world = -1;
    cr_assert_eq(ddp_layout_nodes(4, n, false, 2, as, &world), 3);
    cr_expect_eq(world, 10);
    cr_expect_eq(as[0].rank_base, 0);
    cr_expect_eq(as[1].rank_base, 4);
    cr_expect_eq(as[1].group_rank, 1);
    cr_expect_eq(as[2].nproc, 0, "a node that is down takes no part");
    cr_expect_eq(as[3].rank_base, 6);
    cr_expect_eq(as[3].group_rank, 2, "group ranks stay consecutive");
    cr_expect_eq(ddp_layout_nodes(4, n, false, 4, as, &world), -ENODEV, "nnodes 4:4 cannot go on with 3");
    n[0].up = false;
    cr_expect_eq(ddp_layout_nodes(4, n, false, 1, as, &world), -ENODEV, "node 0 down");
}

Test(layout, mixed_counts_in_host_order)
{
    /* joined in the order c, a, b; node 0 (the serving agent, on host z) runs 8, a 4, b 8, c 2 */
    struct ddp_layout_node n[4] = {{true, 8, "z"}, {true, 2, "c"}, {true, 4, "a"}, {true, 8, "b"}};
    struct ddp_layout_assign as[4];
    int world = -1;
    cr_assert_eq(ddp_layout_nodes(4, n, true, 1, as, &world), 4);
    cr_expect_eq(world, 22);
    cr_expect_eq(as[0].group_rank, 0, "the serving agent is group rank 0");
    cr_expect_eq(as[0].rank_base, 0);
    cr_expect_eq(as[2].group_rank, 1); /* a */
    cr_expect_eq(as[2].rank_base, 8);
    cr_expect_eq(as[3].group_rank, 2); /* b */
    cr_expect_eq(as[3].rank_base, 12);
    cr_expect_eq(as[1].group_rank, 3); /* c */
    cr_expect_eq(as[1].rank_base, 20);
    cr_expect_eq(as[1].nproc, 2);
    /* the same hosts in another join order get the same ranks */
    struct ddp_layout_node m[4] = {{true, 8, "z"}, {true, 8, "b"}, {true, 4, "a"}, {true, 2, "c"}};
    struct ddp_layout_assign bs[4];
    cr_assert_eq(ddp_layout_nodes(4, m, true, 1, bs, &world), 4);
    cr_expect_eq(bs[3].rank_base, 20); /* c */
    cr_expect_eq(bs[1].rank_base, 12); /* b */
}

Test(layout, scale_keeps_each_nodes_share)
{
    cr_expect_eq(ddp_layout_scale(8, 8, 4), 4);
    cr_expect_eq(ddp_layout_scale(4, 8, 4), 2);
    cr_expect_eq(ddp_layout_scale(1, 8, 4), 1, "at least one");
    cr_expect_eq(ddp_layout_scale(6, 2, 2), 6, "not downsized");
}

Test(layout, round_takes_the_first_failure_once)
{
    struct ddp_layout_round r = {0};
    struct ddp_layout_assign as[3] = {{1, 0, 0}, {1, 1, 1}, {0, 0, 0}};
    ddp_layout_round_begin(&r, 3, 5, as);
    cr_expect_not(ddp_layout_round_done(&r));
    cr_expect_not(ddp_layout_round_end(&r, 4, 1, 1, "old attempt"), "another attempt's report is ignored");
    cr_expect_not(ddp_layout_round_end(&r, 5, 2, 1, "not in it"), "a node that takes no part is ignored");
    cr_expect(ddp_layout_round_end(&r, 5, 1, 9, "node 1 lost: connection closed"));
    cr_expect_not(ddp_layout_round_end(&r, 5, 1, 9, "again"), "a second report of a node is ignored");
    cr_expect_not(ddp_layout_round_done(&r));
    cr_expect_not(ddp_layout_round_end(&r, 5, 0, 143, "stopped"), "only the first failure is the root cause");
    cr_expect(ddp_layout_round_done(&r));
    cr_expect_eq(r.failed_node, 1);
    cr_expect_eq(r.failed_status, 9);
    cr_expect_str_eq(r.failed_reason, "node 1 lost: connection closed");
    ddp_layout_round_free(&r);
}
