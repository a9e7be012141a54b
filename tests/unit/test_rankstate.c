/* Unit tests for rankstate.c: stuck, busy or waiting from two /proc readings (fixture snapshots of real processes,
 * tests/fixtures/proc/README) and the stack's evidence. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/rankstate.h"

static void read_pair(int pid, struct ddp_rankstate_sample *a, struct ddp_rankstate_sample *b)
{
    const char *src = getenv("DDP_SRCDIR");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/proc/a", src ? src : ".");
    cr_assert_eq(ddp_rankstate_read(dir, pid, 1000, 100, a), 0, "fixture a/%d (DDP_SRCDIR=%s)", pid, src);
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/proc/b", src ? src : ".");
    cr_assert_eq(ddp_rankstate_read(dir, pid, 3000, 100, b), 0);
}

static const struct ddp_rankstate_evidence outside = {false, false, true};

Test(rankstate, sleeping_rank_is_stuck)
{
    struct ddp_rankstate_sample a, b;
    struct ddp_rankstate_verdict v;
    read_pair(100, &a, &b);
    cr_expect_eq(b.main_state, 'S');
    cr_expect_str_eq(b.wchan, "hrtimer_nanosleep");
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_STUCK, "%s", v.words);
    cr_expect_eq(v.window_ms, 2000);
    cr_expect(v.cpu_pct < 1.0);
    cr_expect(strstr(v.words, "no CPU, no I/O for 2 s") != NULL, "%s", v.words);
    cr_expect(strstr(v.words, "hrtimer_nanosleep") != NULL, "%s", v.words);
}

Test(rankstate, spinning_rank_is_busy_unless_it_waits)
{
    struct ddp_rankstate_sample a, b;
    struct ddp_rankstate_verdict v;
    read_pair(200, &a, &b);
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_BUSY, "%s", v.words);
    cr_expect(v.cpu_pct >= DDP_RANKSTATE_BUSY_CPU, "%.1f", v.cpu_pct); /* ~40%: two cores shared with the writer */
    cr_expect(strncmp(v.words, "CPU ", 4) == 0, "%s", v.words);
    /* the same CPU inside a collective, or in a GPU sync: never busy */
    struct ddp_rankstate_evidence coll = {true, false, false}, gpu = {false, true, false},
                                  gpu_culprit = {false, true, true};
    ddp_rankstate_classify(&a, &b, &coll, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_WAITING);
    ddp_rankstate_classify(&a, &b, &gpu, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_WAITING);
    ddp_rankstate_classify(&a, &b, &gpu_culprit, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_STUCK, "a GPU wait the others wait for never ends");
    cr_expect_str_eq(v.words, "spins in a GPU wait that does not end");
}

Test(rankstate, writing_rank_is_busy_with_its_rate)
{
    struct ddp_rankstate_sample a, b;
    struct ddp_rankstate_verdict v;
    read_pair(300, &a, &b);
    cr_expect(a.has_io && b.has_io);
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_BUSY, "%s", v.words);
    cr_expect(v.write_Bps > 10e6, "%.0f", v.write_Bps);
    cr_expect(strstr(v.words, "MB/s written") != NULL, "%s", v.words);
}

Test(rankstate, short_window_or_missing_process_says_nothing)
{
    struct ddp_rankstate_sample a, b;
    struct ddp_rankstate_verdict v;
    read_pair(100, &a, &b);
    b.at_ms = a.at_ms + 500;
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_UNKNOWN);
    cr_expect_eq(ddp_rankstate_read("/nonexistent", 100, 0, 100, &a), -ENOENT);
    cr_expect(!a.ok);
}

Test(rankstate, poll_loop_and_little_cpu_are_weak)
{
    struct ddp_rankstate_sample a = {.ok = true, .at_ms = 0, .clk_tck = 100, .cpu_ticks = 10, .vol_switches = 0}, b = a;
    struct ddp_rankstate_verdict v;
    b.at_ms = 10000;
    b.vol_switches = 1000; /* 100 wake-ups a second, 0 CPU: a poll loop with a short sleep */
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_UNKNOWN, "%s", v.words);
    b.vol_switches = 0;
    b.cpu_ticks = 10 + 100; /* 10% of a core: neither */
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_UNKNOWN, "%s", v.words);
    b.cpu_ticks = 10;
    b.main_state = 'D';
    ddp_rankstate_classify(&a, &b, &outside, &v);
    cr_expect_eq(v.state, DDP_RANKSTATE_STUCK);
    cr_expect(strstr(v.words, "state D") != NULL, "%s", v.words);
}

Test(rankstate, gpu_wait_frames)
{
    cr_expect(ddp_rankstate_gpu_wait_frame("synchronize", "torch/cuda/__init__.py"));
    cr_expect(ddp_rankstate_gpu_wait_frame("item", NULL));
    cr_expect(!ddp_rankstate_gpu_wait_frame("fetch_batch", "data.py"));
    cr_expect(!ddp_rankstate_gpu_wait_frame(NULL, NULL));
    cr_expect_str_eq(ddp_rankstate_name(DDP_RANKSTATE_BUSY), "busy");
}

Test(rankstate, view_in_gpu_wait)
{
    struct ddp_hang_view v = {.nframes = 2};
    snprintf(v.frame, sizeof(v.frame), "train.py:40 in step");
    snprintf(v.top, sizeof(v.top), "__init__.py:801 in synchronize < train.py:40 in step");
    cr_expect(ddp_rankstate_view_in_gpu_wait(&v), "torch.cuda.synchronize innermost");
    snprintf(v.top, sizeof(v.top), "train.py:40 in step");
    cr_expect(!ddp_rankstate_view_in_gpu_wait(&v));
    snprintf(v.frame, sizeof(v.frame), "states_worker.py:12 in synchronize");
    cr_expect(ddp_rankstate_view_in_gpu_wait(&v), "the program's own innermost frame");
}
