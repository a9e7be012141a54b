/* Unit tests for output.c: framing, prefixes, partial lines, long lines, files, tail. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/output.h"

/* Read everything written so far to a file made by fx_init (consumes it). Caller frees. */
static char *slurp(int fd, size_t *len)
{
    struct ddp_buf b = {0};
    char chunk[65536];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        ddp_buf_add(&b, chunk, (size_t)n);
    if (ftruncate(fd, 0) == 0) /* a console file: start it afresh (read-only log files stay) */
        lseek(fd, 0, SEEK_SET);
    *len = b.len;
    return b.data ? b.data : strdup("");
}

/* The console is two temporary files (a pipe would block once full: nobody reads it during the test). */
struct fx {
    int out[2], err[2];
    struct ddp_output o;
};

static int tmpfd(void)
{
    char path[] = "/tmp/ddp_test_console_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    unlink(path);
    return fd;
}

static void fx_init(struct fx *f)
{
    f->out[0] = f->out[1] = tmpfd();
    f->err[0] = f->err[1] = tmpfd();
    ddp_output_init(&f->o, f->out[1], f->err[1]);
}

static void fx_free(struct fx *f)
{
    ddp_output_free(&f->o);
    close(f->out[0]);
    close(f->err[0]);
}

Test(output, lines_split_across_reads_are_whole_and_prefixed)
{
    struct fx f;
    struct ddp_stream s;
    size_t len;
    fx_init(&f);
    ddp_stream_init(&s, 0, "[rank3]: ", true, false, -1);
    ddp_stream_feed(&f.o, &s, "hel", 3);
    ddp_stream_feed(&f.o, &s, "lo\nwor", 6);
    ddp_stream_feed(&f.o, &s, "ld\n\nlast", 8);
    ddp_output_flush(&f.o);
    char *got = slurp(f.out[0], &len);
    cr_expect_str_eq(got, "[rank3]: hello\n[rank3]: world\n[rank3]: \n");
    free(got);
    ddp_stream_finish(&f.o, &s);
    ddp_stream_finish(&f.o, &s); /* idempotent */
    ddp_output_flush(&f.o);
    got = slurp(f.out[0], &len);
    cr_expect_str_eq(got, "[rank3]: last\n", "the partial last line is flushed with a newline");
    free(got);
    cr_expect_eq(s.nlines, 4);
    ddp_stream_free(&s);
    fx_free(&f);
}

static void push_line(void *arg, const char *line)
{
    ddp_strv_push(arg, line);
}

Test(output, stderr_goes_to_fd2_and_keeps_a_tail)
{
    struct fx f;
    struct ddp_stream s;
    size_t len;
    char line[64];
    fx_init(&f);
    ddp_stream_init(&s, 1, "", true, false, -1);
    for (int i = 0; i < DDP_OUTPUT_TAIL + 5; i++) {
        int n = snprintf(line, sizeof(line), "e%d\n", i);
        ddp_stream_feed(&f.o, &s, line, (size_t)n);
    }
    ddp_output_flush(&f.o);
    char *got = slurp(f.err[0], &len);
    cr_expect(strncmp(got, "e0\ne1\n", 6) == 0);
    free(got);
    got = slurp(f.out[0], &len);
    cr_expect_eq(len, 0u);
    free(got);
    struct ddp_strv tail = {0};
    ddp_stream_tail(&s, push_line, &tail);
    cr_assert_eq(tail.n, (size_t)DDP_OUTPUT_TAIL);
    cr_expect_str_eq(tail.v[0], "e5");
    cr_expect_str_eq(tail.v[DDP_OUTPUT_TAIL - 1], "e24");
    ddp_strv_clear(&tail);
    ddp_stream_free(&s);
    fx_free(&f);
}

Test(output, one_mib_line_intact_and_files_unprefixed)
{
    struct fx f;
    struct ddp_stream s;
    size_t len, n = 1 << 20;
    char path[] = "/tmp/ddp_test_output_XXXXXX";
    int tfd = mkstemp(path);
    cr_assert(tfd >= 0);
    fx_init(&f);
    ddp_stream_init(&s, 0, "[r]: ", true, false, tfd);
    char *big = malloc(n + 1);
    memset(big, 'y', n);
    big[n] = '\n';
    for (size_t off = 0; off <= n; off += 4096) /* arrives in pipe-sized pieces */
        ddp_stream_feed(&f.o, &s, big + off, off + 4096 <= n + 1 ? 4096 : n + 1 - off);
    ddp_output_flush(&f.o);
    char *got = slurp(f.out[0], &len);
    cr_expect_eq(len, n + 6);
    cr_expect(strncmp(got, "[r]: yyyy", 9) == 0);
    cr_expect_eq(got[len - 1], '\n');
    cr_expect_eq(s.nlines, 1);
    free(got);
    ddp_stream_free(&s);
    int rfd = open(path, O_RDONLY);
    got = slurp(rfd, &len);
    close(rfd);
    cr_expect_eq(len, n + 1, "the file gets the line without prefix");
    cr_expect_eq(got[0], 'y');
    free(got);
    free(big);
    unlink(path);
    fx_free(&f);
}

Test(output, not_to_console_still_writes_the_file)
{
    struct fx f;
    struct ddp_stream s;
    size_t len;
    char path[] = "/tmp/ddp_test_output_XXXXXX";
    int tfd = mkstemp(path);
    cr_assert(tfd >= 0);
    fx_init(&f);
    ddp_stream_init(&s, 0, "[x]: ", false, false, tfd);
    ddp_stream_feed(&f.o, &s, "a\nb", 3);
    ddp_stream_finish(&f.o, &s);
    ddp_output_flush(&f.o);
    char *got = slurp(f.out[0], &len);
    cr_expect_eq(len, 0u);
    free(got);
    ddp_stream_free(&s);
    int rfd = open(path, O_RDONLY);
    got = slurp(rfd, &len);
    close(rfd);
    cr_expect_str_eq(got, "a\nb", "the file gets the bytes as they came");
    free(got);
    unlink(path);
    fx_free(&f);
}

Test(output, broken_console_is_not_fatal)
{
    struct ddp_output o;
    struct ddp_stream s;
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    ddp_output_init(&o, p[1], -1);
    ddp_stream_init(&s, 0, "", true, false, -1);
    ddp_stream_feed(&o, &s, "x\n", 2);
    cr_expect_eq(ddp_output_flush(&o), 0);
    cr_expect(o.broken[0]);
    ddp_stream_feed(&o, &s, "y\n", 2);
    ddp_output_flush(&o);
    cr_expect_eq(s.nlines, 2);
    ddp_stream_free(&s);
    ddp_output_free(&o);
    close(p[1]);
}

Test(output, raw_passes_bytes_as_they_come)
{
    struct fx f;
    struct ddp_stream s;
    size_t len;
    fx_init(&f);
    ddp_stream_init(&s, 0, "[rank0]: ", true, true, -1);
    ddp_stream_feed(&f.o, &s, "{\"a\": 1", 7);
    ddp_output_flush(&f.o);
    char *got = slurp(f.out[0], &len);
    cr_expect_eq(len, 7, "no waiting for the newline");
    free(got);
    ddp_stream_feed(&f.o, &s, "}\n10%\r", 6);
    ddp_stream_finish(&f.o, &s);
    ddp_output_flush(&f.o);
    got = slurp(f.out[0], &len);
    cr_expect_eq(len, 6);
    cr_expect(memcmp(got, "}\n10%\r", 6) == 0, "no prefix, nothing added at the end");
    cr_expect_eq(s.nlines, 2, "lines are still seen (classification, tail)");
    free(got);
    ddp_stream_free(&s);
    fx_free(&f);
}

/* issue 23 item 4: whole lines without a prefix (several workers, console not a terminal) are the workers'
 * bytes: split writes never merge two streams in one line, and a last line without newline stays open. */
Test(output, no_prefix_lines_are_the_bytes_never_merged)
{
    struct fx f;
    struct ddp_stream a, b;
    size_t len;
    fx_init(&f);
    ddp_stream_init(&a, 0, "", true, false, -1);
    ddp_stream_init(&b, 0, "", true, false, -1);
    ddp_stream_feed(&f.o, &a, "r0 half ", 8);
    ddp_stream_feed(&f.o, &b, "r1 half ", 8);
    ddp_stream_feed(&f.o, &b, "end\n", 4);
    ddp_stream_feed(&f.o, &a, "end\n{\"done\": true}", 19);
    ddp_stream_finish(&f.o, &a);
    ddp_output_flush(&f.o);
    char *got = slurp(f.out[0], &len);
    cr_expect_str_eq(got, "r1 half end\nr0 half end\n{\"done\": true}", "whole lines; the last one left open");
    free(got);
    ddp_stream_feed(&f.o, &b, "late\n", 5);
    ddp_output_flush(&f.o);
    got = slurp(f.out[0], &len);
    cr_expect_str_eq(got, "\nlate\n", "another stream's line ends the open one first");
    free(got);
    ddp_stream_free(&a);
    ddp_stream_free(&b);
    fx_free(&f);
}

Test(output, progress_updates_at_once_and_never_merged)
{
    struct fx f;
    struct ddp_stream a, b;
    size_t len;
    fx_init(&f);
    ddp_stream_init(&a, 1, "[rank0]: ", true, false, -1);
    ddp_stream_init(&b, 1, "[rank1]: ", true, false, -1);
    ddp_stream_feed(&f.o, &a, " 10%|#  |\r", 10);
    ddp_output_flush(&f.o);
    char *got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, "[rank0]:  10%|#  |\r", "a \\r update is written at once");
    free(got);
    ddp_stream_feed(&f.o, &a, " 20%|## |\r", 10);
    ddp_stream_feed(&f.o, &b, "hello\n", 6);
    ddp_stream_feed(&f.o, &a, " 30%|###|\r\n", 11);
    ddp_output_flush(&f.o);
    got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, "[rank0]:  20%|## |\r\n[rank1]: hello\n[rank0]:  30%|###|\r\n",
                     "another rank's line ends the open update first; \\r\\n ends it once");
    free(got);
    cr_expect_eq(b.nlines, 1);
    cr_expect_eq(a.nlines, 1, "\\r updates replace each other; \\r\\n ends the line");
    const char *want = " 30%|###|";
    struct ddp_strv tail = {0};
    ddp_stream_tail(&a, push_line, &tail);
    cr_assert_eq(tail.n, 1);
    cr_expect_str_eq(tail.v[0], want, "the tail keeps the last state of the bar");
    ddp_strv_clear(&tail);
    /* a stream that ends on an update: its line is ended on the console */
    ddp_stream_feed(&f.o, &b, "50%\r", 4);
    ddp_stream_finish(&f.o, &b);
    ddp_output_flush(&f.o);
    got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, "[rank1]: 50%\r\n");
    free(got);
    ddp_stream_free(&a);
    ddp_stream_free(&b);
    fx_free(&f);
}

Test(output, time_field_in_the_console_prefix_and_the_timed_log)
{
    struct fx f;
    struct ddp_stream so, se;
    size_t len;
    char before[32], after[32];
    int tfd = tmpfd();
    fx_init(&f);
    ddp_stream_init(&so, 0, "${time} [r1]: ", true, false, -1);
    ddp_stream_init(&se, 1, "[r1]: ", true, false, -1);
    struct ddp_logfile timed;
    ddp_logfile_init(&timed, tfd, 1, "attempt_0/1/timed.log");
    so.timed = se.timed = &timed; /* one timed log for both streams of a worker */
    ddp_time_iso(NULL, before);
    ddp_stream_feed(&f.o, &so, "hello\n", 6);
    ddp_stream_feed(&f.o, &se, "oops\npart", 9);
    ddp_stream_finish(&f.o, &se);
    ddp_time_iso(NULL, after);
    ddp_output_flush(&f.o);
    char *got = slurp(f.out[0], &len);
    cr_assert_eq(len, 24 + 13, "%s", got);
    cr_expect(strncmp(got, before, 24) >= 0 && strncmp(got, after, 24) <= 0, "%s", got);
    cr_expect(strncmp(got + 24, " [r1]: hello\n", 13) == 0, "%s", got);
    free(got);
    got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, "[r1]: oops\n[r1]: part\n", "no time field unless the template asks");
    free(got);
    got = slurp(tfd, &len);
    /* "2026-12-01T01:08:54.123Z out hello\n..." */
    cr_assert_eq(len, 3 * 30 + 5 + 4 + 4, "%s", got);
    const char *want[3] = {" out hello", " err oops", " err part"};
    const char *l = got;
    char prev[32] = "";
    for (int i = 0; i < 3; i++) {
        cr_expect(l[4] == '-' && l[10] == 'T' && l[19] == '.' && l[23] == 'Z', "%s", l);
        cr_expect(strncmp(l + 24, want[i], strlen(want[i])) == 0, "%s", l);
        cr_expect(strncmp(prev, l, 24) <= 0, "sorted");
        memcpy(prev, l, 24);
        l = strchr(l, '\n') + 1;
    }
    free(got);
    ddp_stream_free(&so);
    ddp_stream_free(&se);
    cr_expect_eq(fcntl(tfd, F_GETFD), 0, "the timed log is the caller's: not closed by the streams");
    cr_expect_eq(timed.len, 3 * 30 + 5 + 4 + 4, "its bytes are counted");
    ddp_logfile_close(&timed);
    cr_expect_eq(fcntl(tfd, F_GETFD), -1, "closed by ddp_logfile_close");
    fx_free(&f);
}

/* Issue 24 item 5: a log on a full disk (/dev/full: every write is ENOSPC) stops at its first failed write,
 * once: listed for the summary with its bytes and errno; the console and the stderr tail keep every line. */
Test(output, a_log_on_a_full_disk_stops_once_and_is_listed)
{
    struct fx f;
    struct ddp_stream so, se;
    struct ddp_logfile timed;
    int full[3];
    for (int i = 0; i < 3; i++) {
        full[i] = open("/dev/full", O_WRONLY | O_CLOEXEC);
        cr_assert(full[i] >= 0, "/dev/full: %s", strerror(errno));
    }
    fx_init(&f);
    ddp_stream_init(&so, 0, "", true, false, full[0]);
    ddp_stream_init(&se, 1, "", true, false, full[1]);
    ddp_logfile_init(&so.file, full[0], 2, "attempt_0/2/stdout.log");
    ddp_logfile_init(&se.file, full[1], 2, "attempt_0/2/stderr.log");
    ddp_logfile_init(&timed, full[2], 2, "attempt_0/2/timed.log");
    so.timed = se.timed = &timed;
    for (int i = 0; i < 3; i++) {
        ddp_stream_feed(&f.o, &so, "out\n", 4);
        ddp_stream_feed(&f.o, &se, "FATAL: last words\n", 18);
    }
    cr_assert_eq(f.o.nstopped, 3, "each log once (the timed log is shared by both streams)");
    const char *want[3] = {"attempt_0/2/timed.log", "attempt_0/2/stdout.log", "attempt_0/2/stderr.log"};
    for (int i = 0; i < 3; i++) {
        cr_expect_str_eq(f.o.stopped[i].name, want[i]);
        cr_expect_eq(f.o.stopped[i].rank, 2);
        cr_expect_eq(f.o.stopped[i].len, 0);
        cr_expect_eq(f.o.stopped[i].err, ENOSPC);
        cr_expect_eq(f.o.stopped[i].fd, -1);
    }
    cr_expect_eq(so.file.fd, -1, "closed");
    cr_expect_eq(fcntl(full[0], F_GETFD), -1, "closed");
    ddp_output_flush(&f.o);
    size_t len;
    char *got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, "FATAL: last words\nFATAL: last words\nFATAL: last words\n", "the console has every line");
    free(got);
    cr_expect_eq(se.ntail, 3, "the stderr tail is in memory");
    cr_expect_str_eq(se.tail[0], "FATAL: last words");
    ddp_stream_free(&so);
    ddp_stream_free(&se);
    ddp_logfile_close(&timed);
    fx_free(&f);
}

/* issue 43 item 4: Python's fault handler dump, line by line (3.11 as captured, and the other versions' forms). */
Test(output, fault_handler_lines_are_told_from_a_traceback)
{
    static const char *const dump[] = {"Fatal Python error: Aborted",
                                       "",
                                       "Thread 0x00007fce39e176c0 (most recent call first):",
                                       "  File \"/usr/lib/python3.11/signal.py\", line 82 in sigwait",
                                       "Current thread 0x00007fce3a0d22c0 (most recent call first):",
                                       "  File \"/w/t, line 9 x.py\", line 24 in load_batch",
                                       "Stack (most recent call first):",
                                       "  <no Python frame>",
                                       "  ...",
                                       "  Garbage-collecting",
                                       "Python runtime state: initialized",
                                       "Current thread's C stack trace (most recent call first):",
                                       "  Binary file \"/lib/libc.so.6\", at abort+0xd3 [0x7f]",
                                       "Extension modules: torch._C, numpy.core._multiarray_umath (total: 2)"};
    static const char *const other[] = {"Traceback (most recent call last):",
                                        "  File \"/w/x.py\", line 39, in <module>",
                                        "    dist.all_reduce(x)",
                                        "RuntimeError: Timed out waiting 5000ms for recv operation to complete",
                                        "  File \"/w/x.py\", line 39 inside",
                                        "  File \"/w/x.py\", line  in f",
                                        "step 3 Fatal Python error: Aborted",
                                        "Thread 1 done"};
    for (size_t i = 0; i < sizeof(dump) / sizeof(dump[0]); i++)
        cr_expect(ddp_output_fault_line(dump[i], strlen(dump[i])), "%s", dump[i]);
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        cr_expect(!ddp_output_fault_line(other[i], strlen(other[i])), "%s", other[i]);
}

static void count_line(void *arg, int which, const char *line, size_t len)
{
    (void)which;
    (void)line;
    (void)len;
    (*(int *)arg)++;
}

/* From ddp_stream_hold_dump on, the dump reaches the log file and the caller, not the console nor the tail; the
 * program's own lines still reach both, and a line left open before the dump is ended without it. */
static void hold_case(bool raw)
{
    struct fx f;
    struct ddp_stream s;
    size_t len;
    int lines = 0, file = tmpfd();
    fx_init(&f);
    ddp_stream_init(&s, 1, raw ? "" : "[1]: ", true, raw, dup(file));
    s.on_line = count_line;
    s.arg = &lines;
    ddp_stream_feed(&f.o, &s, "before\nopen ", 12);
    ddp_output_flush(&f.o);
    free(slurp(f.err[0], &len));
    ddp_stream_hold_dump(&f.o, &s, true);
    static const char dump[] = "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n"
                               "  File \"x.py\", line 6 in stuck\n\nmine, after\nExtension modules: a (total: 1)\n";
    ddp_stream_feed(&f.o, &s, dump, sizeof(dump) - 1);
    ddp_stream_finish(&f.o, &s);
    ddp_output_flush(&f.o);
    char *got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, raw ? "\nmine, after\n" : "[1]: open \n[1]: mine, after\n");
    free(got);
    cr_expect_eq(lines, 8, "every line still reaches the caller");
    cr_expect_eq(s.nheld, 6u);
    struct ddp_strv tail = {0};
    ddp_stream_tail(&s, push_line, &tail);
    cr_assert_eq(tail.n, 3u);
    cr_expect_str_eq(tail.v[0], "before");
    cr_expect_str_eq(tail.v[1], "open ");
    cr_expect_str_eq(tail.v[2], "mine, after");
    ddp_strv_clear(&tail);
    ddp_stream_free(&s);
    got = slurp(file, &len);
    cr_expect_eq(len, 12 + sizeof(dump) - 1, "the log file keeps every byte");
    free(got);
    close(file);
    fx_free(&f);
}

Test(output, a_held_dump_reaches_the_log_not_the_console)
{
    hold_case(false);
}

Test(output, a_held_dump_on_a_raw_console)
{
    hold_case(true);
}

/* Released (no stacks file to take the rest): the console gets lines again, a raw one the open line's bytes it
 * has not had yet first. */
Test(output, a_released_raw_stream_shows_its_open_line)
{
    struct fx f;
    struct ddp_stream s;
    size_t len;
    fx_init(&f);
    ddp_stream_init(&s, 1, "", true, true, -1);
    ddp_stream_feed(&f.o, &s, "ab", 2);
    ddp_stream_hold_dump(&f.o, &s, true);
    const char *held = "c\nThread 0x1 (most recent call first):\nde", *after = "f\n  File \"x.py\", line 6 in g\n";
    ddp_stream_feed(&f.o, &s, held, strlen(held));
    ddp_stream_hold_dump(&f.o, &s, false);
    ddp_stream_feed(&f.o, &s, after, strlen(after));
    ddp_output_flush(&f.o);
    char *got = slurp(f.err[0], &len);
    cr_expect_str_eq(got, "abc\ndef\n  File \"x.py\", line 6 in g\n");
    free(got);
    ddp_stream_free(&s);
    fx_free(&f);
}

Test(output, duplicate_filters_match_any_comma_separated_substring)
{
    const char *line = "step 3 loss 0.5";
    cr_expect(ddp_output_filter_match("acc,loss", line, strlen(line)));
    cr_expect(ddp_output_filter_match("3 loss", line, strlen(line)), "spaces belong to the pattern");
    cr_expect_not(ddp_output_filter_match("acc,,lr", line, strlen(line)), "empty patterns match nothing");
    cr_expect_not(ddp_output_filter_match("", line, strlen(line)));
    cr_expect_not(ddp_output_filter_match(NULL, line, strlen(line)));
    cr_expect_not(ddp_output_filter_match("0.5", line, 10), "only the line's len bytes count");
}
