/* Unit tests for launcher/watch/watch: the order of the source table. A source that reads another's state says
 * which sources must run after it (its `before`, source.h); the table in watch.c keeps them on later rows, and
 * ddp_watch_order_check (run at ddp_watch_open too) fails when a row is moved against that. */
#include <criterion/criterion.h>
#include <string.h>

#include "watch/atfail.h"
#include "watch/live.h"
#include "watch/source.h"
#include "watch/watch.h"

/* The row of src in watch.c's table, or n */
static size_t row_of(const struct ddp_watch_source *const *tab, size_t n, const struct ddp_watch_source *src)
{
    size_t i = 0;
    while (i < n && tab[i] != src)
        i++;
    return i;
}

Test(watch, the_table_keeps_every_declared_order)
{
    size_t n;
    const struct ddp_watch_source *const *tab = ddp_watch_sources(&n);
    struct ddp_err err = {0};
    cr_assert_gt(n, 0);
    cr_assert_eq(ddp_watch_order_check(tab, n, &err), 0, "%s", err.msg);
    /* the one declared today: the recorders at a failure are read before the live watch stops */
    cr_assert_lt(row_of(tab, n, &ddp_atfail_source), row_of(tab, n, &ddp_live_source));
    bool declared = false;
    for (const struct ddp_watch_source *const *b = ddp_atfail_source.before; b && *b; b++)
        declared |= *b == &ddp_live_source;
    cr_assert(declared, "atfail declares that it runs before the live watch");
}

Test(watch, a_row_moved_against_its_order_fails_naming_both)
{
    size_t n;
    const struct ddp_watch_source *const *tab = ddp_watch_sources(&n);
    const struct ddp_watch_source *moved[16];
    cr_assert_leq(n, 16);
    memcpy(moved, tab, n * sizeof(*moved));
    size_t a = row_of(tab, n, &ddp_atfail_source), l = row_of(tab, n, &ddp_live_source);
    cr_assert(a < n && l < n);
    moved[a] = &ddp_live_source; /* swap the two rows */
    moved[l] = &ddp_atfail_source;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_watch_order_check(moved, n, &err), -EINVAL);
    cr_expect(strstr(err.msg, "'atfail'") && strstr(err.msg, "'live'") && strstr(err.msg, "must come before"), "%s",
              err.msg);
}

Test(watch, a_source_named_in_before_must_be_a_row)
{
    size_t n;
    const struct ddp_watch_source *const *tab = ddp_watch_sources(&n);
    const struct ddp_watch_source *without[16];
    size_t m = 0;
    cr_assert_leq(n, 16);
    for (size_t i = 0; i < n; i++)
        if (tab[i] != &ddp_live_source)
            without[m++] = tab[i];
    struct ddp_err err = {0};
    cr_assert_eq(ddp_watch_order_check(without, m, &err), -EINVAL);
    cr_expect(strstr(err.msg, "no row"), "%s", err.msg);
}

Test(watch, a_table_with_no_declared_order_passes_in_any_order)
{
    const struct ddp_watch_source a = {.name = "a"}, b = {.name = "b"};
    const struct ddp_watch_source *ab[] = {&a, &b}, *ba[] = {&b, &a};
    struct ddp_err err = {0};
    cr_expect_eq(ddp_watch_order_check(ab, 2, &err), 0);
    cr_expect_eq(ddp_watch_order_check(ba, 2, &err), 0);
}
