/* Unit tests for suspect.c: the no-progress limit learned from the job's own cadence (setup allowance, floor) and
 * stragglers from sample rounds. */
#include <criterion/criterion.h>

#include "watch/suspect.h"

static const struct ddp_suspect_cfg cfg = {.floor_ms = 30000, .setup_ms = 60000, .factor = 3};

Test(suspect, floor_then_setup_then_learned)
{
    struct ddp_suspect s;
    ddp_suspect_init(&s, &cfg, 3, 1000);
    for (long long t = 2000; t <= 11000; t += 2000) /* steps every 2 s */
        ddp_suspect_progress(&s, t);
    cr_expect_eq(ddp_suspect_limit(&s), 30000, "3 x 2 s is under the floor");
    cr_expect_eq(ddp_suspect_stalled(&s, 40000), 0, "29 s quiet: under the floor");
    cr_expect_eq(ddp_suspect_stalled(&s, 55000), 0, "44 s quiet but within the setup allowance (60 s from start)");
    cr_expect_eq(ddp_suspect_stalled(&s, 61000), 51000, "past setup and floor");
    ddp_suspect_progress(&s, 61000); /* it was a 51 s checkpoint: learned */
    cr_expect_eq(s.longest_gap_ms, 51000);
    cr_expect_eq(ddp_suspect_limit(&s), 153000);
    cr_expect_eq(ddp_suspect_stalled(&s, 61000 + 152999), 0);
    cr_expect_eq(ddp_suspect_stalled(&s, 61000 + 153000), 153000);
    ddp_suspect_progress(&s, 1000); /* the past: ignored */
    cr_expect_eq(s.last_ms, 61000);
    ddp_suspect_free(&s);
}

Test(suspect, no_progress_at_all_counts_from_start)
{
    struct ddp_suspect s;
    ddp_suspect_init(&s, &cfg, 2, 0);
    cr_expect_eq(ddp_suspect_stalled(&s, 59999), 0);
    cr_expect_eq(ddp_suspect_stalled(&s, 60000), 60000);
    ddp_suspect_free(&s);
}

static size_t round_of(struct ddp_suspect *s, const char *places)
{
    enum ddp_suspect_place p[8];
    for (size_t i = 0; places[i]; i++)
        p[i] = places[i] == 'i' ? DDP_SUSPECT_INSIDE : places[i] == 'o' ? DDP_SUSPECT_OUTSIDE : DDP_SUSPECT_NONE;
    return ddp_suspect_round(s, p);
}

Test(suspect, straggler_named_once_with_its_share)
{
    struct ddp_suspect s;
    size_t named = (size_t)-1;
    ddp_suspect_init(&s, &cfg, 3, 0);
    /* rank 2 is 40% slower: the others wait on it in about 2 rounds of 7 */
    for (int step = 0; step < 40 && named == (size_t)-1; step++) {
        const char *r = step % 7 == 0 ? "iio" : step % 7 == 3 ? "iio" : "ooo";
        named = round_of(&s, r);
    }
    cr_expect_eq(named, 2);
    cr_expect_eq(s.waited, DDP_SUSPECT_MIN_WAITED);
    cr_expect_float_eq(ddp_suspect_share(&s, 2), 1.0, 1e-9);
    cr_expect_float_eq(ddp_suspect_share(&s, 0), 0.0, 1e-9);
    cr_expect(ddp_suspect_waited(&s, 2) >= 0.15);
    for (int i = 0; i < 20; i++)
        cr_expect_eq(round_of(&s, "iio"), (size_t)-1, "named once");
    ddp_suspect_free(&s);
}

Test(suspect, balanced_job_names_nobody)
{
    struct ddp_suspect s;
    ddp_suspect_init(&s, &cfg, 3, 0);
    static const char *const r[] = {"oii", "ioi", "iio", "ooo", "ooo", "iii", "ooo"};
    for (int i = 0; i < 700; i++)
        cr_expect_eq(round_of(&s, r[i % 7]), (size_t)-1, "round %d", i);
    cr_expect_float_eq(ddp_suspect_share(&s, 1), 1.0 / 3, 1e-9);
    ddp_suspect_free(&s);
}

Test(suspect, rare_waits_are_not_a_straggler)
{
    struct ddp_suspect s;
    ddp_suspect_init(&s, &cfg, 2, 0);
    /* rank 1 is always the last, but the other waits on it in 1 round of 10: under 15% */
    for (int i = 0; i < 400; i++)
        cr_expect_eq(round_of(&s, i % 10 ? "oo" : "io"), (size_t)-1);
    cr_expect_float_eq(ddp_suspect_share(&s, 1), 1.0, 1e-9);
    ddp_suspect_free(&s);
}

Test(suspect, unplaced_ranks_do_not_count)
{
    struct ddp_suspect s;
    ddp_suspect_init(&s, &cfg, 3, 0);
    for (int i = 0; i < 50; i++)
        cr_expect_eq(round_of(&s, "in-"), (size_t)-1, "one placed rank is no round");
    cr_expect_eq(s.rounds, 0);
    ddp_suspect_free(&s);
}

Test(suspect, confirmation_is_two_samples_half_the_floor_at_most_30s)
{
    cr_expect_eq(ddp_suspect_confirm_ms(30000, 1000), 15000);
    cr_expect_eq(ddp_suspect_confirm_ms(4000, 1000), 2000);
    cr_expect_eq(ddp_suspect_confirm_ms(1000, 1000), 2000);
    cr_expect_eq(ddp_suspect_confirm_ms(600000, 1000), 30000);
}
