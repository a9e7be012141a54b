/* Unit tests for hang.c: stalls from timestamps, stacks parsed from faulthandler dumps and tracebacks, and the
 * culprit verdict. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/hang.h"

/* the tables below leave trailing fields (a rank's /proc state) zero unless a test is about them */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

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

/* issue 43 trap 1: heartbeat = file, but no rank ever touched its file: measured on output (a printing job is not
 * hung); once one rank touched its file, the file rule is back. */
Test(hang, check_file_never_touched_is_measured_on_output)
{
    struct ddp_hang_limits lim = {.init_ms = 0, .stall_ms = 2000, .heartbeat = DDP_HEARTBEAT_FILE};
    struct ddp_hang_rank r[2] = {
        {0, true, true, true, 0, 0, 0, true},
        {1, true, true, true, 0, 0, 0, true},
    };
    bool st[2];
    struct ddp_hang_check c;
    ddp_hang_check(&lim, r, 2, 5000, true, 4500, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_NONE, "output 0.5 s ago: not hung although no heartbeat for 5 s");
    cr_expect(c.on_output);
    ddp_hang_check(&lim, r, 2, 7000, true, 4500, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_SILENT);
    cr_expect(c.on_output);
    r[1].untouched = false;
    r[1].last_progress_ms = 6500;
    ddp_hang_check(&lim, r, 2, 7000, true, 6900, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_STALL, "rank 1 heartbeats, rank 0 does not: the file rule");
    cr_expect_eq(c.first, 0);
    cr_expect_not(c.on_output);
}

static const char dump_outside[] = "Fatal Python error: Aborted\n\n"
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
    cr_expect_str_eq(v.top, "train.py:18 in load_batch < train.py:30 in <module>");
    ddp_hang_parse_stack(dump_waiting, strlen(dump_waiting), &v);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.frame, "train.py:33 in <module>", "the program's frame, not torch's");
    cr_expect_str_eq(v.top,
                     "distributed_c10d.py:1541 in all_reduce < c10d_logger.py:81 in wrapper < train.py:33 in "
                     "<module>",
                     "the innermost three, torch's too");
    ddp_hang_parse_stack(traceback_waiting, strlen(traceback_waiting), &v);
    cr_expect_eq(v.nframes, 2);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.frame, "train.py:33 in <module>");
    cr_expect_str_eq(v.top, "distributed_c10d.py:1541 in all_reduce < train.py:33 in <module>",
                     "a traceback's innermost first");
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
    ddp_hang_parse_stack(traceback_waiting, (size_t)(strstr(traceback_waiting, "RuntimeError") - traceback_waiting),
                         &v);
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
    struct ddp_hang_input in[4] = {{0, &w, true, false, 0, NULL},
                                   {1, &w, false, true, 0, NULL},
                                   {2, &o, false, true, 0, NULL},
                                   {3, &w, false, true, 0, NULL}};
    bool c[4];
    struct ddp_hang_verdict v;
    ddp_hang_decide(in, 4, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect_eq(v.nculprits, 1);
    cr_expect(c[2] && !c[0] && !c[1] && !c[3]);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.why,
                     "ranks 0, 1 and 3 wait in all_reduce; rank 2 is not in a collective (at t.py:18 in load_batch)");
    in[1].view = NULL; /* a rank gave no stack: still named, less sure */
    ddp_hang_decide(in, 4, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_MEDIUM);
    cr_expect(c[2] && !c[1]);
}

Test(hang, culprit_in_another_collective_and_ties)
{
    struct ddp_hang_view w = view("all_reduce", "t.py:33 in <module>"), b = view("broadcast", "t.py:31 in <module>");
    struct ddp_hang_input in[3] = {
        {0, &w, true, true, 0, NULL}, {1, &b, true, true, 0, NULL}, {2, &w, true, true, 0, NULL}};
    bool c[4];
    struct ddp_hang_verdict v;
    ddp_hang_decide(in, 3, c, &v);
    cr_expect(c[1] && !c[0] && !c[2]);
    cr_expect(strstr(v.why, "in another collective: broadcast") != NULL, "%s", v.why);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    /* two ranks, two collectives: no majority, no guess (who reported first says nothing) */
    struct ddp_hang_input two[2] = {{0, &w, false, true, 0, NULL}, {1, &b, true, true, 0, NULL}};
    ddp_hang_decide(two, 2, c, &v);
    cr_expect(!c[0] && !c[1]);
    cr_expect(v.mismatch);
    cr_expect_eq(v.confidence, DDP_HANG_LOW);
    cr_expect_str_eq(v.why, "collective mismatch: rank 0 in all_reduce (at t.py:33 in <module>), rank 1 in broadcast "
                            "(at t.py:31 in <module>); no majority says which "
                            "is wrong, so no culprit is named (the rank whose program took the other branch is; "
                            "compare the stacks)");
    /* 2 against 2: no strict majority either */
    struct ddp_hang_input four[4] = {{0, &w, true, true, 0, NULL},
                                     {1, &b, true, true, 0, NULL},
                                     {2, &w, true, true, 0, NULL},
                                     {3, &b, true, true, 0, NULL}};
    ddp_hang_decide(four, 4, c, &v);
    cr_expect(v.mismatch && !c[0] && !c[1] && !c[2] && !c[3]);
}

Test(hang, timeout_lines)
{
    struct ddp_hang_timeout t = {false, "", -1};
    const char *wd = "[rank0]:[E1201 02:21:28.589699256 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective "
                     "operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, "
                     "Timeout(ms)=15000) ran for 15078 milliseconds before timing out.";
    cr_expect(ddp_hang_parse_timeout(wd, strlen(wd), &t));
    cr_expect(t.waiting);
    cr_expect_str_eq(t.op, "all_reduce");
    cr_expect_eq(t.seq, 3);
    /* cut anywhere: never reads past len, never claims more than it saw */
    for (size_t n = 0; n < strlen(wd); n++) {
        struct ddp_hang_timeout u = {false, "", -1};
        ddp_hang_parse_timeout(wd, n, &u);
        cr_expect(u.seq == -1 || u.seq == 3);
    }
    const char *seq = "[PG 1 Rank 4] Timeout at NCCL work: 9141, last enqueued NCCL work: 9141";
    struct ddp_hang_timeout u = {false, "", -1};
    cr_expect(ddp_hang_parse_timeout(seq, strlen(seq), &u));
    cr_expect_eq(u.seq, 9141);
    cr_expect_str_eq(u.op, "");
    const char *gloo = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                       "6000ms for recv operation to complete";
    u = (struct ddp_hang_timeout){false, "", -1};
    cr_expect(ddp_hang_parse_timeout(gloo, strlen(gloo), &u));
    cr_expect(u.waiting && u.seq == -1 && !u.op[0]);
    const char *mb = "RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms";
    u = (struct ddp_hang_timeout){false, "", -1};
    cr_expect(ddp_hang_parse_timeout(mb, strlen(mb), &u));
    cr_expect_str_eq(u.op, "monitored_barrier");
    const char *dump = "[PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from"
                       "  rank 0 and we will try our best to dump the debug info.";
    u = (struct ddp_hang_timeout){false, "", -1};
    cr_expect_not(ddp_hang_parse_timeout(dump, strlen(dump), &u), "the hung rank itself prints this");
    cr_expect_not(u.waiting);
    char name[DDP_HANG_OP];
    ddp_hang_op_name("_ALLGATHER_BASE", 15, name);
    cr_expect_str_eq(name, "all_gather");
    ddp_hang_op_name("REDUCE_SCATTER", 14, name);
    cr_expect_str_eq(name, "reduce_scatter");
    ddp_hang_op_name("BROADCAST", 9, name);
    cr_expect_str_eq(name, "broadcast");
}

Test(hang, sequence_numbers_and_reports_without_stacks)
{
    struct ddp_hang_timeout a3 = {true, "all_reduce", 3}, a4 = {true, "all_reduce", 4}, g = {true, "", -1};
    struct ddp_hang_view o = view("", "t.py:18 in load_batch");
    bool c[3];
    struct ddp_hang_verdict v;
    /* rank 1 lags: it waits in #3 while the others are at #4 */
    struct ddp_hang_input lag[3] = {
        {0, NULL, true, true, 0, &a4}, {1, NULL, true, true, 0, &a3}, {2, NULL, true, true, 0, &a4}};
    ddp_hang_decide(lag, 3, c, &v);
    cr_expect(c[1] && !c[0] && !c[2]);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect_str_eq(v.why, "rank 1 lags: rank 0 in all_reduce #4, rank 1 in all_reduce #3, rank 2 in all_reduce #4 "
                            "(collective sequence numbers)");
    /* a reporter without a stack is in its collective; the rank with a stack outside is the culprit */
    struct ddp_hang_input out[2] = {{0, NULL, true, false, 0, &a3}, {1, &o, false, true, 0, NULL}};
    ddp_hang_decide(out, 2, c, &v);
    cr_expect(c[1] && !c[0]);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect_str_eq(v.why, "rank 0 waits in all_reduce; rank 1 is not in a collective (at t.py:18 in load_batch)");
    /* gloo: the report says it waited, not in what: still in a collective */
    out[0].timeout = &g;
    ddp_hang_decide(out, 2, c, &v);
    cr_expect(c[1] && !c[0]);
    cr_expect_str_eq(v.why, "rank 0 waits in a collective; rank 1 is not in a collective (at t.py:18 in load_batch)");
    /* everyone waits in the same collective at the same number: nobody stands out */
    struct ddp_hang_input same[2] = {{0, NULL, true, true, 0, &a3}, {1, NULL, true, true, 0, &a3}};
    ddp_hang_decide(same, 2, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_UNKNOWN);
    cr_expect_not(v.mismatch);
    cr_expect_str_eq(v.why, "every rank waits in all_reduce: no rank stands out");
}

/* The real H200 logs (tests/fixtures/logs/hang-h200/SOURCES): each rank's stderr as ddplaunch kept it. */
static void real_kind(const char *kind, struct ddp_hang_view views[2], struct ddp_hang_timeout tmo[2],
                      struct ddp_hang_input in[2])
{
    const char *src = getenv("DDP_SRCDIR");
    for (int r = 0; r < 2; r++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/tests/fixtures/logs/hang-h200/%s-rank%d.log", src ? src : ".", kind, r);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "cannot open %s", path);
        static char text[65536];
        size_t len = fread(text, 1, sizeof(text), f);
        fclose(f);
        tmo[r] = (struct ddp_hang_timeout){false, "", -1};
        for (const char *p = text, *end = text + len; p < end;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
            ddp_hang_parse_timeout(p, n, &tmo[r]);
            p += n + 1;
        }
        ddp_hang_parse_stack(text, len, &views[r]);
        in[r] = (struct ddp_hang_input){r, views[r].nframes ? &views[r] : NULL, tmo[r].waiting, true,
                                        0, tmo[r].waiting ? &tmo[r] : NULL};
    }
}

Test(hang, culprit_from_real_h200_logs)
{
    struct ddp_hang_view views[2];
    struct ddp_hang_timeout tmo[2];
    struct ddp_hang_input in[2];
    bool c[2];
    struct ddp_hang_verdict v;

    real_kind("outside", views, tmo, in);
    cr_expect(tmo[0].waiting && !tmo[1].waiting);
    cr_expect_str_eq(tmo[0].op, "all_reduce");
    cr_expect_eq(tmo[0].seq, 3);
    cr_expect_eq(views[0].nframes, 0, "rank 0 reported and was not interrupted");
    cr_expect_str_eq(views[1].frame, "hang_worker.py:24 in load_batch");
    ddp_hang_decide(in, 2, c, &v);
    cr_expect(c[1] && !c[0], "%s", v.why);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect_str_eq(v.op, "all_reduce");

    real_kind("slow", views, tmo, in);
    cr_expect(tmo[1].waiting && tmo[1].seq == 3);
    cr_expect_str_eq(views[0].frame, "hang_worker.py:30 in slow_step");
    cr_expect_eq(views[1].nframes, 0, "C++ 'frame #0' lines are not a Python stack");
    ddp_hang_decide(in, 2, c, &v);
    cr_expect(c[0] && !c[1], "%s", v.why);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);

    real_kind("other", views, tmo, in);
    cr_expect_str_eq(tmo[0].op, "all_reduce");
    cr_expect_str_eq(tmo[1].op, "broadcast");
    cr_expect(tmo[0].seq == 3 && tmo[1].seq == 3);
    ddp_hang_decide(in, 2, c, &v);
    cr_expect(!c[0] && !c[1], "two ranks, one each: no guess");
    cr_expect(v.mismatch);
    cr_expect_eq(v.confidence, DDP_HANG_LOW);
    cr_expect(strstr(v.why, "rank 0 in all_reduce #3, rank 1 in broadcast #3") != NULL, "%s", v.why);
}

Test(hang, no_stack_no_collective_and_everyone)
{
    struct ddp_hang_view w = view("all_reduce", "t.py:33 in <module>"), o = view("", "t.py:9 in step");
    bool c[3];
    struct ddp_hang_verdict v;
    /* everyone with a stack waits: the one without a stack is suspected */
    struct ddp_hang_input a[3] = {
        {0, &w, false, true, 0, NULL}, {1, NULL, false, true, 0, NULL}, {2, &w, false, true, 0, NULL}};
    ddp_hang_decide(a, 3, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_LOW);
    cr_expect(c[1] && !c[0] && !c[2]);
    /* no collective anywhere: the rank without progress longest, when it clearly lags */
    struct ddp_hang_input b[3] = {
        {0, &o, false, true, 9000, NULL}, {1, &o, false, true, 2000, NULL}, {2, &o, false, true, 8500, NULL}};
    ddp_hang_decide(b, 3, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_LOW);
    cr_expect(c[1] && !c[0] && !c[2]);
    b[1].last_progress_ms = 8000;
    ddp_hang_decide(b, 3, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_UNKNOWN, "500 ms apart is no evidence");
    cr_expect_eq(v.nculprits, 0);
    /* every rank outside: no single culprit */
    struct ddp_hang_input d[2] = {{0, &o, false, true, 0, NULL}, {1, &o, false, true, 0, NULL}};
    ddp_hang_decide(d, 2, c, &v);
    cr_expect_eq(v.confidence, DDP_HANG_UNKNOWN);
    cr_expect(!c[0] && !c[1]);
    ddp_hang_decide(NULL, 0, c, &v);
    cr_expect_eq(v.nculprits, 0);
}

/* torch 2.x prints an uncaught exception's traceback with "[rankN]: " before each line (the real
 * tests/fixtures/logs/torch211-nccl-hang-rank0-h200.log): the stack is still read. */
Test(hang, rank_prefixed_traceback_torch2)
{
    const char *src = getenv("DDP_SRCDIR");
    char path[4200];
    static char text[65536];
    struct ddp_hang_view v;
    snprintf(path, sizeof(path), "%s/tests/fixtures/logs/torch211-nccl-hang-rank0-h200.log", src ? src : ".");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t len = fread(text, 1, sizeof(text), f);
    fclose(f);
    ddp_hang_parse_stack(text, len, &v);
    cr_expect_str_eq(v.op, "all_reduce");
    cr_expect_str_eq(v.frame, "train_ddp.py:116 in main");
}

/* gloo on torch 2.11 (the measurement): every rank times out in its own collective and says only
 * "Timed out waiting ...ms for recv operation"; the prefixed tracebacks say which collective: 3 ranks name the
 * minority, 2 say mismatch. */
static void gloo2_rank(int r, const char *op, char *text, size_t cap, struct ddp_hang_view *v,
                       struct ddp_hang_timeout *t, struct ddp_hang_input *in)
{
    int len = snprintf(
        text, cap,
        "[rank%d]: Traceback (most recent call last):\n"
        "[rank%d]:   File \"/w/hang_worker.py\", line %d, in <module>\n"
        "[rank%d]:     dist.%s(x%s)\n"
        "[rank%d]:   File \"/venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py\", line 83, in wrapper\n"
        "[rank%d]:     return func(*args, **kwargs)\n"
        "[rank%d]:            ^^^^^^^^^^^^^^^^^^^^^\n"
        "[rank%d]:   File \"/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py\", line %d, in %s\n"
        "[rank%d]:     work.wait()\n"
        "[rank%d]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
        "waiting 15000ms for recv operation to complete\n",
        r, r, op[0] == 'b' ? 37 : 39, r, op, op[0] == 'b' ? ", src=0" : "", r, r, r, r, op[0] == 'b' ? 2824 : 3068, op,
        r, r);
    *t = (struct ddp_hang_timeout){false, "", -1};
    const char *last = strrchr(text, '[');
    cr_assert(ddp_hang_parse_timeout(last, strlen(last), t));
    ddp_hang_parse_stack(text, (size_t)len, v);
    *in = (struct ddp_hang_input){r, v, true, true, 0, t};
}

Test(hang, gloo_torch2_mismatch_minority_and_pair)
{
    static char text[3][2048];
    struct ddp_hang_view v[3];
    struct ddp_hang_timeout t[3];
    struct ddp_hang_input in[3];
    struct ddp_hang_verdict verdict;
    bool c[3];
    for (int r = 0; r < 3; r++)
        gloo2_rank(r, r == 1 ? "broadcast" : "all_reduce", text[r], sizeof(text[r]), &v[r], &t[r], &in[r]);
    cr_expect_str_eq(v[1].op, "broadcast");
    cr_expect_str_eq(v[1].frame, "hang_worker.py:37 in <module>");
    ddp_hang_decide(in, 3, c, &verdict);
    cr_expect(c[1] && !c[0] && !c[2], "%s", verdict.why);
    cr_expect_eq(verdict.confidence, DDP_HANG_HIGH);
    cr_expect_str_eq(verdict.op, "all_reduce");
    ddp_hang_decide(in, 2, c, &verdict); /* ranks 0 and 1 only */
    cr_expect(verdict.mismatch, "%s", verdict.why);
    cr_expect(!c[0] && !c[1]);
    cr_expect(strstr(verdict.why, "rank 1 in broadcast"), "%s", verdict.why);
}

Test(hang, stopped_or_zombie_rank_first)
{
    struct ddp_hang_limits lim = {.init_ms = 0, .stall_ms = 1000, .heartbeat = DDP_HEARTBEAT_OUTPUT};
    struct ddp_hang_rank r[3] = {
        {0, true, true, false, 0, 0, 'S'},
        {1, true, true, false, 0, 0, 'T'},
        {2, true, true, false, 0, 0, 'S'},
    };
    bool st[3];
    struct ddp_hang_check c;
    ddp_hang_check(&lim, r, 3, 500, true, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_NONE); /* a stopped rank alone is no stall yet */
    ddp_hang_check(&lim, r, 3, 1500, true, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_STALL);
    cr_expect(c.stuck && c.first == 1 && c.nstalled == 1 && st[1] && !st[0] && !st[2]);
    r[0].state = r[2].state = 't'; /* every rank stopped (the job paused): nobody to blame */
    ddp_hang_check(&lim, r, 3, 1500, true, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_SILENT);
    cr_expect(!c.stuck);

    struct ddp_hang_view w = view("all_reduce", "t.py:33 in <module>");
    struct ddp_hang_input in[3] = {
        {0, &w, false, true, 0, NULL, 'S'}, {1, &w, false, true, 0, NULL, 'Z'}, {2, NULL, false, true, 0, NULL, 'R'}};
    bool cu[3];
    struct ddp_hang_verdict v;
    ddp_hang_decide(in, 3, cu, &v);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect(v.nculprits == 1 && cu[1] && !cu[0] && !cu[2]);
    cr_expect_str_eq(v.why, "rank 1 is a zombie while the others wait");
}

/* Issue 34 item 13: the stopped rank is the only one left (rank 0 ended with 0): still the culprit, high. */
Test(hang, stopped_rank_alone_after_the_others_ended)
{
    struct ddp_hang_limits lim = {.init_ms = 0, .stall_ms = 1000, .heartbeat = DDP_HEARTBEAT_OUTPUT};
    struct ddp_hang_rank r[2] = {{0, false, true, false, 0, 0, 0}, {1, true, true, false, 0, 0, 'T'}};
    bool st[2];
    struct ddp_hang_check c;
    ddp_hang_check(&lim, r, 2, 1500, true, 0, false, st, &c);
    cr_expect_eq(c.kind, DDP_HANG_STALL);
    cr_expect(c.stuck && c.alone && c.first == 1 && c.nstalled == 1 && st[1] && !st[0]);

    struct ddp_hang_input in[2] = {{0, NULL, false, false, 0, NULL, 0}, {1, NULL, false, true, 0, NULL, 'T'}};
    bool cu[2];
    struct ddp_hang_verdict v;
    ddp_hang_decide(in, 2, cu, &v);
    cr_expect_eq(v.confidence, DDP_HANG_HIGH);
    cr_expect(v.nculprits == 1 && cu[1] && !cu[0]);
    cr_expect_str_eq(v.why, "rank 1 is stopped (SIGSTOP or a debugger) and the others ended");
    in[0].running = true; /* both running and stopped: the job was stopped, nobody is singled out */
    in[0].state = 'T';
    ddp_hang_decide(in, 2, cu, &v);
    cr_expect_eq(v.confidence, DDP_HANG_UNKNOWN);
}
