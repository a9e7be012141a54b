/* Unit tests for classify: real log snippets (tests/fixtures/logs, see SOURCES there) and exit statuses. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "records/recognise.h"

static enum ddp_class cl(const char *s)
{
    return ddp_recognise_line(s, strlen(s));
}

static enum ddp_class class_by_name(const char *name)
{
    for (int c = 0; c < DDP_CLASS__COUNT; c++)
        if (strcmp(ddp_class_name((enum ddp_class)c), name) == 0)
            return (enum ddp_class)c;
    cr_assert_fail("unknown class name '%s' in EXPECT", name);
    return DDP_CLASS_NONE;
}

static const char *logs_dir(void)
{
    static char dir[4096];
    const char *src = getenv("DDP_SRCDIR");
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/logs", src ? src : ".");
    return dir;
}

/* The merge over all lines of a file, as the supervisor does over a rank's output. */
static enum ddp_class classify_file(const char *path, int *nlines_matched)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    enum ddp_class acc = DDP_CLASS_NONE;
    *nlines_matched = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n')
            n--;
        enum ddp_class c = ddp_recognise_line(line, (size_t)n);
        if (c != DDP_CLASS_NONE)
            (*nlines_matched)++;
        acc = ddp_class_merge(acc, c);
    }
    free(line);
    fclose(f);
    return acc;
}

Test(classify, every_collected_real_log_gets_its_class)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/EXPECT", logs_dir());
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s (run with DDP_SRCDIR set)", path);
    char buf[512];
    int checked = 0;
    while (fgets(buf, sizeof(buf), f)) {
        char file[256], cls[64];
        if (buf[0] == '#' || sscanf(buf, "%255s %63s", file, cls) != 2)
            continue;
        char fp[4600];
        snprintf(fp, sizeof(fp), "%s/%s", logs_dir(), file);
        int matched;
        enum ddp_class got = classify_file(fp, &matched);
        cr_expect_eq(got, class_by_name(cls), "%s: expected %s, got %s", file, cls, ddp_class_name(got));
        checked++;
    }
    fclose(f);
    cr_assert_geq(checked, 20, "only %d fixtures checked", checked);
}

Test(classify, torch113_gloo_timeout_lines)
{
    /* Verbatim from a 4-rank gloo run on this machine (torch 1.13.1). */
    cr_expect_eq(cl("RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms for recv "
                    "operation to complete"),
                 DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(cl("RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 3000ms for send "
                    "operation to complete"),
                 DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(cl("RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:27035"),
                 DDP_CLASS_NCCL_ERROR);
    cr_expect_eq(cl("RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms"),
                 DDP_CLASS_NCCL_TIMEOUT);
}

Test(classify, nccl_watchdog_in_both_wordings)
{
    cr_expect_eq(cl("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
                    "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds "
                    "before timing out."),
                 DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(cl("[rank1]:[E1129 00:01:02.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) "
                    "Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, "
                    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds before timing out."),
                 DDP_CLASS_NCCL_TIMEOUT);
    /* Prefixed by ddplaunch's own rank prefix, as the supervisor may see it after framing. */
    cr_expect_eq(cl("[rank3]: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(...)"),
                 DDP_CLASS_NCCL_TIMEOUT);
}

/* issue 23 item 12: the backend named in the message, not in the class */
static const char *be(const char *line)
{
    return ddp_recognise_backend(line, line ? strlen(line) : 0);
}

Test(classify, backend_of_a_line)
{
    cr_expect_str_eq(be("RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms for "
                        "recv operation to complete"),
                     "gloo");
    cr_expect_str_eq(be("Timed out waiting 3000ms for send operation to complete"), "gloo");
    cr_expect_str_eq(be("RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms"), "gloo");
    cr_expect_str_eq(be("RuntimeError: Connection closed by peer [127.0.0.1]:27035"), "gloo");
    cr_expect_str_eq(be("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=5)"),
                     "nccl");
    cr_expect_str_eq(be("[Rank 1] Watchdog caught collective operation timeout: Work(SeqNum=5)"), "nccl");
    cr_expect_str_eq(be("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error"), "nccl");
    cr_expect_null(be("DistBackendError: something failed"));
    cr_expect_null(be(NULL));
}

/* issue 43 item 4: Python's fault handler on a fatal signal: the stack that follows is shown, and the hint says so */
Test(classify, fault_handler_on_a_fatal_signal)
{
    cr_expect_eq(cl("Fatal Python error: Segmentation fault"), DDP_CLASS_SEGFAULT);
    cr_expect_eq(cl("Fatal Python error: Bus error"), DDP_CLASS_SEGFAULT);
    cr_expect_eq(cl("Fatal Python error: Illegal instruction"), DDP_CLASS_SEGFAULT);
    cr_expect_eq(cl("Fatal Python error: Floating point exception"), DDP_CLASS_SEGFAULT);
}

Test(classify, benign_lines_are_none)
{
    const char *benign[] = {
        "",
        "hello",
        "epoch 3 step 100 loss 0.25",
        "Timed out",                                               /* too generic on its own */
        "Timed out waiting for pending OwnerRRefs to be deleted.", /* RPC shutdown, not a collective */
        "NCCL INFO Channel 00/02 :    0   1",
        "the word timeout alone",
        "ProcessGroupNCCL is available",
        "Fatal Python error: Aborted", /* the hang capture's SIGABRT prints it too */
    };
    for (size_t i = 0; i < sizeof(benign) / sizeof(benign[0]); i++)
        cr_expect_eq(cl(benign[i]), DDP_CLASS_NONE, "'%s' -> %s", benign[i], ddp_class_name(cl(benign[i])));
    cr_expect_eq(ddp_recognise_line(NULL, 0), DDP_CLASS_NONE);
}

Test(classify, length_is_respected_not_nul)
{
    const char *s = "xxxx CUDA out of memory. Tried to allocate";
    /* Cut before the match: nothing found even though the bytes follow. */
    cr_expect_eq(ddp_recognise_line(s, 12), DDP_CLASS_NONE);
    cr_expect_eq(ddp_recognise_line(s, strlen(s)), DDP_CLASS_CUDA_OOM);
}

Test(classify, status)
{
    cr_expect_eq(ddp_recognise_status(0, 0), DDP_CLASS_NONE);
    cr_expect_eq(ddp_recognise_status(3, 0), DDP_CLASS_EXIT);
    cr_expect_eq(ddp_recognise_status(0, SIGSEGV), DDP_CLASS_SEGFAULT);
    cr_expect_eq(ddp_recognise_status(0, SIGBUS), DDP_CLASS_SEGFAULT);
    cr_expect_eq(ddp_recognise_status(0, SIGABRT), DDP_CLASS_ABORT);
    cr_expect_eq(ddp_recognise_status(0, SIGKILL), DDP_CLASS_KILLED);
    cr_expect_eq(ddp_recognise_status(0, SIGTERM), DDP_CLASS_SIGNAL);
}

Test(classify, fast_enough_for_every_line)
{
    const char *line = "[rank3]: epoch 12 step 4000 loss 0.1234 lr 3e-4 tokens/s 123456 grad_norm 0.98 mem 12.3G";
    size_t len = strlen(line);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int hits = 0;
    for (int i = 0; i < 200000; i++)
        hits += ddp_recognise_line(line, len) != DDP_CLASS_NONE;
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 200000.0;
    cr_expect_eq(hits, 0);
    cr_log_info("ddp_recognise_line: %.0f ns per benign 90-byte line", ns);
    cr_expect_lt(ns, 20000.0, "%.0f ns per line", ns); /* generous: sanitizer and valgrind builds */
}

Test(classify, retry_warnings_are_not_failures)
{
    /* torch logs these while it retries; the job may still come up. The supervisor must not stop on them. */
    cr_expect_eq(cl("[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 "
                    "(errno: 99 - Cannot assign requested address)."),
                 DDP_CLASS_NONE);
    cr_expect_eq(cl("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:25641 (errno: 98 - "
                    "Address already in use)."),
                 DDP_CLASS_NONE);
    cr_expect_eq(cl("[rank1]:[W1129 00:01:02.123456789 socket.cpp:752] [c10d] The client socket has timed out "
                    "after 1s while trying to connect to (127.0.0.1, 29500)."),
                 DDP_CLASS_NONE);
    /* The exception that follows is the failure. */
    cr_expect_eq(cl("[rank0]: RuntimeError: The server socket has failed to listen on any local network address. "
                    "The server socket has failed to bind to [::]:29732 (errno: 98 - Address already in use)."),
                 DDP_CLASS_PORT_IN_USE);
    cr_expect_eq(cl("TimeoutError: The client socket has timed out after 3s while trying to connect to "
                    "(127.0.0.1, 29734)."),
                 DDP_CLASS_RENDEZVOUS_TIMEOUT);
    /* Error-level torch lines still count. */
    cr_expect_eq(cl("[rank1]:[E1129 00:01:02.1 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
                    "operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, ...)"),
                 DDP_CLASS_NCCL_TIMEOUT);
}
