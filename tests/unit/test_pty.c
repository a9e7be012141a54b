/* Unit tests for pty.c: a worker-side terminal of the launcher terminal's size, bytes unchanged, EIO at the end. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "run/pty.h"

Test(pty, size_copied_bytes_unchanged_eio_at_end)
{
    struct ddp_err err = {0};
    int tm, ts, m, s; /* a stand-in for the launcher's terminal, and the worker's pty */
    cr_assert_eq(ddp_pty_open(-1, &tm, &ts, &err), 0, "%s", err.msg);
    struct winsize ws = {.ws_row = 45, .ws_col = 123};
    cr_assert_eq(ioctl(ts, TIOCSWINSZ, &ws), 0);
    cr_assert_eq(ddp_pty_open(ts, &m, &s, &err), 0, "%s", err.msg);
    cr_expect(isatty(s), "the worker's side is a terminal");
    struct winsize got = {0};
    cr_assert_eq(ioctl(s, TIOCGWINSZ, &got), 0);
    cr_expect_eq(got.ws_col, 123);
    cr_expect_eq(got.ws_row, 45);
    /* SIGWINCH: the launcher's terminal changed; resize copies it */
    ws.ws_col = 77;
    cr_assert_eq(ioctl(ts, TIOCSWINSZ, &ws), 0);
    cr_expect_eq(ddp_pty_resize(m, ts), 0);
    cr_assert_eq(ioctl(s, TIOCGWINSZ, &got), 0);
    cr_expect_eq(got.ws_col, 77);
    cr_expect_lt(ddp_pty_resize(m, -1), 0, "no terminal to copy from");
    /* the bytes as written, no "\r\n" */
    cr_assert_eq(write(s, "a\nb\r\n", 5), 5);
    char buf[64];
    ssize_t n = read(m, buf, sizeof buf);
    cr_assert_eq(n, 5);
    cr_expect(memcmp(buf, "a\nb\r\n", 5) == 0);
    /* written, then closed: still read, then EIO (end of stream) */
    cr_assert_eq(write(s, "last", 4), 4);
    close(s);
    n = read(m, buf, sizeof buf);
    cr_expect_eq(n, 4, "bytes written before the close are still read");
    n = read(m, buf, sizeof buf);
    cr_expect(n < 0 && errno == EIO, "EIO once the worker's side is closed");
    close(m);
    close(tm);
    close(ts);
}
