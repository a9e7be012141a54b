/* Unit tests for hang.c: stalls from timestamps, stacks parsed from faulthandler dumps and tracebacks, and the
 * culprit verdict. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "hang.h"

Test(hang, check_init_then_stall_then_silence)
{
    struct ddp_hang_limits lim = {.init_ms = 1000, .stall_ms = 2000, .heartbeat = DDP_HEARTBEAT_FILE};
    struct ddp_hang_rank r[3] = {
        {0, true, true, true, 0, 5000},
        {1, true, false, true, 0, 0},  /* never alive */
        {2, false, false, true, 0, 0}, /* exited: never blamed */
    };
    bool st[3];
    struct ddp_hang_check c;
    ddp_hang_check(&lim, r, 3, 500, false, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_NONE, "before init_ms");
    ddp_hang_check(&lim, r, 3, 1000, false, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_INIT);
    cr_expect_eq(c.first, 1);
    cr_expect(st[1] && !st[0] && !st[2]);
    r[1].alive = true;
    r[1].last_progress_ms = 6000;
    ddp_hang_check(&lim, r, 3, 7000, false, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_STALL, "rank 0 had no progress for 2 s");
    cr_expect_eq(c.first, 0);
    cr_expect_eq(c.nstalled, 1);
    cr_expect(c.blame_gpus);
    ddp_hang_check(&lim, r, 3, 8000, false, 0, false, st, &c);
    cr_expect_eq(c.nstalled, 2);
    cr_expect(c.blame_gpus, "2 of 3 workers (the third exited)");
    r[2].running = true;
    r[2].alive = true;
    ddp_hang_check(&lim, r, 3, 9000, false, 0, false, st, &c);
    cr_expect_eq(c.nstalled, 3);
    cr_expect_not(c.blame_gpus, "every rank stalled: nobody's GPU is to blame");

    struct ddp_hang_limits out = {.init_ms = 0, .stall_ms = 2000, .heartbeat = DDP_HEARTBEAT_OUTPUT};
    ddp_hang_check(&out, r, 3, 9000, true, 8000, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_NONE);
    ddp_hang_check(&out, r, 3, 10000, true, 8000, true, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_NONE, "a paused console is not silence");
    ddp_hang_check(&out, r, 3, 10000, true, 8000, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_SILENT);
    cr_expect_eq(c.nstalled, 0);
}

static const char dump_outside[] =
    "Fatal Python error: Aborted\n\n"
    "Thread 0x00007f8bb37616c0 (most recent call first):\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n\n"
    "Current thread 0x00007f8bb3a1c040 (most recent call first):\n"
    "  File \"/work/train.py\", line 18 in load_batch\n"
    "  File \"/work/train.py\", line 30 in <module>\n\n"
    "Extension modules: torch._C, numpy (total: 2)\n";

static const char dump_waiting[] =
    "Fatal Python error: Aborted\n\n"
    "Current thread 0x00007f0 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541 in all_reduce\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/c10d_logger.py\", line 81 in wrapper\n"
    "  File \"/work/train.py\", line 33 in <module>\n";

static const char traceback_waiting[] =
    "[W something]\n"
    "Traceback (most recent call last):\n"
    "  File \"/work/train.py\", line 33, in <module>\n"
    "    dist.all_reduce(x)\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541, in all_reduce\n"
    "    work.wait()\n"
    "RuntimeError: [gloo] Timed out waiting 6000ms for recv operation to complete\n";

Test(hang, parse_faulthandler_and_traceback)
{
    struct ddp_hang_view v;
    ddp_hang_parse_stack(dump_outside, strlen(dump_outside), &v);
    cr_expect_eq(v.nframes, 2, "the current thread, not the helper thread");
    cr_expect_str_eq(v.op, "");
    cr_expect_str_eq(v.frame, "train.py:18 in load_batch");
    ddp_hang_parse_stack(dump_waiting, strlen(dump_waiting), &v);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.frame, "train.py:33 in <module>", "the program's frame, not torch's");
    ddp_hang_parse_stack(traceback_waiting, strlen(traceback_waiting), &v);
    cr_expect_eq(v.nframes, 2);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.frame, "train.py:33 in <module>");
    const char *none = "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n"
                       "  Garbage-collecting\n  <no Python frame>\n";
    ddp_hang_parse_stack(none, strlen(none), &v);
    cr_expect_eq(v.nframes, 0);
    /* a traceback cut by a dump (SIGABRT while it was printed) counts for nothing; the dump decides */
    const char *cut = "Traceback (most recent call last):\n  File \"/work/train.py\", line 33, in <module>\n"
                      "    dist.all_reduce(x)\nFatal Python error: Aborted\n\n"
                      "Current thread 0x1 (most recent call first):\n  Garbage-collecting\n  <no Python frame>\n";
    ddp_hang_parse_stack(cut, strlen(cut), &v);
    cr_expect_eq(v.nframes, 0);
    ddp_hang_parse_stack(traceback_waiting, (size_t)(strstr(traceback_waiting, "RuntimeError") - traceback_waiting), &v);
    cr_expect_eq(v.nframes, 0, "no exception line yet");
    ddp_hang_parse_stack("", 0, &v);
    cr_expect_eq(v.nframes, 0);
    /* cut anywhere: never reads past len */
    for (size_t n = 0; n < sizeof(dump_waiting) - 1; n++)
        ddp_hang_parse_stack(dump_waiting, n, &v);
}

static struct ddp_hang_view view(const char *op, const char *frame)
{
    struct ddp_hang_view v = {.nframes = 3};
    snprintf(v.op, sizeof(v.op), "%s", op);
    snprintf(v.frame, sizeof(v.frame), "%s", frame);
    return v;
}

Test(hang, culprit_outside_the_collective)
{
    struct ddp_hang_view w = view("all_reduce", "t.py:33 in <module>"), o = view("", "t.py:18 in load_batch");
    struct ddp_hang_input in[4] = {{0, &w, true, false, 0}, {1, &w, false, true, 0}, {2, &o, false, true, 0},
                                   {3, &w, false, true, 0}};
    bool c[4];
    struct ddp_hang_verdict v;
    ddp_hang_decide(in, 4, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect_eq(v.nculprits, 1);
    cr_expect(c[2] && !c[0] && !c[1] && !c[3]);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.why, "ranks 0, 1 and 3 wait in all_reduce; rank 2 is not in it (at t.py:18 in load_batch)");
    in[1].view = NULL; /* a rank gave no stack: still named, less sure */
    ddp_hang_decide(in, 4, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_MEDIUM);
    cr_expect(c[2] && !c[1]);
}

Test(hang, culprit_in_another_collective_and_ties)
{
    struct ddp_hang_view w = view("all_reduce", "t.py:33 in <module>"), b = view("broadcast", "t.py:31 in <module>");
    struct ddp_hang_input in[3] = {{0, &w, true, true, 0}, {1, &b, true, true, 0}, {2, &w, true, true, 0}};
    bool c[3];
    struct ddp_hang_verdict v;
    ddp_hang_decide(in, 3, c, &v);
    cr_expect(c[1] && !c[0] && !c[2]);
    cr_expect(strstr(v.why, "in another collective: broadcast") != NULL, "%s", v.why);
    /* two ranks, two collectives: the one a timeout reporter is in wins the tie */
    struct ddp_hang_input two[2] = {{0, &w, false, true, 0}, {1, &b, true, true, 0}};
    ddp_hang_decide(two, 2, c, &v);
    cr_expect(c[0] && !c[1]);
    cr_expect_str_eq(v.op, "broadcast");
}

Test(hang, no_stack_no_collective_and_everyone)
{
    struct ddp_hang_view w = view("all_reduce", "t.py:33 in <module>"), o = view("", "t.py:9 in step");
    bool c[3];
    struct ddp_hang_verdict v;
    /* everyone with a stack waits: the one without a stack is suspected */
    struct ddp_hang_input a[3] = {{0, &w, false, true, 0}, {1, NULL, false, true, 0}, {2, &w, false, true, 0}};
    ddp_hang_decide(a, 3, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_LOW);
    cr_expect(c[1] && !c[0] && !c[2]);
    /* no collective anywhere: the rank without progress longest, when it clearly lags */
    struct ddp_hang_input b[3] = {{0, &o, false, true, 9000}, {1, &o, false, true, 2000}, {2, &o, false, true, 8500}};
    ddp_hang_decide(b, 3, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_LOW);
    cr_expect(c[1] && !c[0] && !c[2]);
    b[1].last_progress_ms = 8000;
    ddp_hang_decide(b, 3, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_UNKNOWN, "500 ms apart is no evidence");
    cr_expect_eq(v.nculprits, 0);
    /* every rank outside: no single culprit */
    struct ddp_hang_input d[2] = {{0, &o, false, true, 0}, {1, &o, false, true, 0}};
    ddp_hang_decide(d, 2, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_UNKNOWN);
    cr_expect(!c[0] && !c[1]);
    ddp_hang_decide(NULL, 0, c, &v);
    cr_expect_eq(v.nculprits, 0);
}
