/* Unit tests for wall.c: when the wall limit's timer looks again. */
#include <criterion/criterion.h>

#include "watch/wall.h"

Test(wall, the_timer_looks_again_at_least_every_minute_until_the_limit)
{
    cr_expect_eq(ddp_wall_wait_ms(3000, 0), 3000);
    cr_expect_eq(ddp_wall_wait_ms(3000, 2999), 1);
    cr_expect_eq(ddp_wall_wait_ms(3000, 3000), 0, "reached");
    cr_expect_eq(ddp_wall_wait_ms(3000, 7000), 0, "passed while the launcher was stopped");
    cr_expect_eq(ddp_wall_wait_ms(3600000, 0), DDP_WALL_CHECK_MS, "an hour: looked at every minute");
    cr_expect_eq(ddp_wall_wait_ms(3600000, 3590000), 10000);
}
