/* output: see output.h. */
#include "run/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ddp_output_init(struct ddp_output *o, int out_fd, int err_fd)
{
    memset(o, 0, sizeof(*o));
    o->fd[0] = out_fd;
    o->fd[1] = err_fd;
    struct stat st[2];
    bool ok[2];
    for (int i = 0; i < 2; i++) {
        ok[i] = o->fd[i] >= 0 && fstat(o->fd[i], &st[i]) == 0;
        o->may_block[i] = ok[i] && !S_ISREG(st[i].st_mode) && !S_ISBLK(st[i].st_mode);
        o->console_of[i] = i;
    }
    if (ok[0] && ok[1] && st[0].st_dev == st[1].st_dev && st[0].st_ino == st[1].st_ino)
        o->console_of[1] = 0; /* 2>&1, or both on one terminal */
}

/* Write what fd takes now. Returns bytes written (may be 0), or a negative errno. */
static ssize_t write_ready(int fd, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int r = poll(&pfd, 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (pfd.revents & POLLNVAL)
            return -EBADF;
        size_t chunk = n - done < PIPE_BUF ? n - done : PIPE_BUF;
        ssize_t w = write(fd, p + done, chunk);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            return -errno;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

/* Write all of buf to fd; waits (poll) when fd is non-blocking and full. 0 or negative errno; *done (when not
 * NULL) gets the bytes written, also those before a failure. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
    if (done)
        *done = 0;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                (void)poll(&pfd, 1, -1);
                continue;
            }
            return -errno;
        }
        p += w;
        n -= (size_t)w;
        if (done)
            *done += (size_t)w;
    }
    return 0;
}

static void shrink(struct ddp_buf *b)
{
    if (b->len == 0 && b->cap > 4 * DDP_OUTPUT_FLUSH) { /* after a huge line: give the memory back */
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
}

size_t ddp_output_flush(struct ddp_output *o)
{
    size_t left = 0;
    for (int i = 0; i < 2; i++) {
        struct ddp_buf *b = &o->buf[i];
        if (b->len == 0)
            continue;
        if (o->fd[i] < 0 || o->broken[i]) {
            b->len = 0;
        } else if (!o->may_block[i]) {
            if (write_all(o->fd[i], b->data, b->len, NULL) != 0)
                o->broken[i] = true;
            b->len = 0;
        } else {
            ssize_t w = write_ready(o->fd[i], b->data, b->len);
            if (w < 0) {
                o->broken[i] = true;
                b->len = 0;
            } else if ((size_t)w < b->len) {
                memmove(b->data, b->data + w, b->len - (size_t)w);
                b->len -= (size_t)w;
                b->data[b->len] = '\0';
            } else {
                b->len = 0;
            }
        }
        shrink(b);
        left += b->len;
    }
    return left;
}

void ddp_output_flush_wait(struct ddp_output *o)
{
    for (int i = 0; i < 2; i++) {
        struct ddp_buf *b = &o->buf[i];
        int idle_ms = 0;
        if (b->len && o->fd[i] >= 0 && !o->broken[i] && !o->may_block[i] &&
            write_all(o->fd[i], b->data, b->len, NULL) != 0)
            o->broken[i] = true;
        /* a pipe or terminal: wait while it makes progress; give up after 10 s without any */
        while (b->len && o->fd[i] >= 0 && !o->broken[i] && idle_ms < 10000) {
            ssize_t w = write_ready(o->fd[i], b->data, b->len);
            if (w < 0) {
                o->broken[i] = true;
                break;
            }
            if (w > 0) {
                memmove(b->data, b->data + w, b->len - (size_t)w);
                b->len -= (size_t)w;
                idle_ms = 0;
                continue;
            }
            struct pollfd pfd = {.fd = o->fd[i], .events = POLLOUT};
            if (poll(&pfd, 1, 100) == 0)
                idle_ms += 100;
        }
        b->len = 0;
        shrink(b);
    }
}

void ddp_output_free(struct ddp_output *o)
{
    ddp_output_flush_wait(o);
    ddp_buf_free(&o->buf[0]);
    ddp_buf_free(&o->buf[1]);
    for (size_t i = 0; i < o->nstopped; i++)
        free(o->stopped[i].name);
    free(o->stopped);
    o->stopped = NULL;
    o->nstopped = 0;
}

void ddp_logfile_init(struct ddp_logfile *f, int fd, int rank, const char *name)
{
    memset(f, 0, sizeof(*f));
    f->fd = fd;
    f->rank = rank;
    f->name = name ? ddp_xstrdup(name) : NULL;
}

void ddp_logfile_close(struct ddp_logfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    free(f->name);
    f->name = NULL;
}

/* Append n bytes to f. Its first failed write stops it (rather than the job): one warning, and o->stopped
 * (o may be NULL) lists it. more: the end of the warning. */
static void log_append(struct ddp_output *o, struct ddp_logfile *f, const char *p, size_t n, const char *more)
{
    size_t done;
    if (f->fd < 0 || n == 0)
        return;
    int rc = write_all(f->fd, p, n, &done);
    f->len += done;
    if (rc == 0)
        return;
    close(f->fd);
    f->fd = -1;
    f->err = -rc;
    ddp_warn("rank %d %s: log stopped at %llu bytes: %s%s", f->rank, f->name ? f->name : "log",
             (unsigned long long)f->len, strerror(f->err), more);
    if (o) {
        o->stopped = ddp_xrealloc(o->stopped, (o->nstopped + 1) * sizeof(*o->stopped));
        o->stopped[o->nstopped] = *f;
        o->stopped[o->nstopped++].name = f->name ? ddp_xstrdup(f->name) : NULL;
    }
}

void ddp_stream_init(struct ddp_stream *s, int which, const char *prefix, bool to_console, bool raw, int file_fd)
{
    static unsigned next_id;
    memset(s, 0, sizeof(*s));
    s->which = which;
    s->id = ++next_id ? next_id : ++next_id;
    s->prefix = ddp_xstrdup(prefix ? prefix : "");
    s->prefix_time = strstr(s->prefix, "${time}") != NULL;
    s->to_console = to_console;
    s->raw = raw;
    ddp_logfile_init(&s->file, file_fd, -1, NULL);
    s->keep_tail = which == 1;
}

static void file_flush(struct ddp_output *o, struct ddp_stream *s)
{
    char more[64] = "";
    if (s->timebuf.len && s->timed)
        log_append(o, s->timed, s->timebuf.data, s->timebuf.len, "");
    s->timebuf.len = 0;
    if (s->dupbuf.len && s->dup)
        log_append(o, s->dup, s->dupbuf.data, s->dupbuf.len, "");
    s->dupbuf.len = 0;
    if (s->keep_tail)
        snprintf(more, sizeof(more), "; its last %d lines are kept for the summary", DDP_OUTPUT_TAIL);
    log_append(o, &s->file, s->filebuf.data, s->filebuf.len, more);
    s->filebuf.len = 0;
    if (s->filebuf.cap > 4 * DDP_OUTPUT_FLUSH) {
        free(s->filebuf.data);
        s->filebuf.data = NULL;
        s->filebuf.cap = 0;
    }
}

static void keep_tail(struct ddp_stream *s, const char *line, size_t len)
{
    size_t n = len < DDP_OUTPUT_TAIL_LINE ? len : DDP_OUTPUT_TAIL_LINE;
    free(s->tail[s->tail_next]);
    s->tail[s->tail_next] = ddp_xstrndup(line, n);
    s->tail_next = (s->tail_next + 1) % DDP_OUTPUT_TAIL;
    if (s->ntail < DDP_OUTPUT_TAIL)
        s->ntail++;
}

bool ddp_output_filter_match(const char *filters, const char *line, size_t len)
{
    for (const char *p = filters; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n && memmem(line, len, p, n))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

bool ddp_output_fault_line(const char *line, size_t len)
{
    static const char *const starts[] = {"Fatal Python error: ",
                                         "Python runtime state: ",
                                         "Thread 0x",
                                         "Current thread 0x",
                                         "Current thread's C stack trace",
                                         "Stack (most recent call first):",
                                         "Extension modules: ",
                                         "  <",
                                         "  ...",
                                         "  Garbage-collecting",
                                         "  Binary file ",
                                         "<cannot get C stack"};
    if (len == 0)
        return true;
    for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
        size_t n = strlen(starts[i]);
        if (len >= n && memcmp(line, starts[i], n) == 0)
            return true;
    }
    /* a frame: '  File "f.py", line 3 in g' (a traceback's says "line 3, in g") */
    if (len < 9 || memcmp(line, "  File \"", 8) != 0)
        return false;
    const char *at = NULL;
    for (const char *p = line + 8; (p = memmem(p, len - (size_t)(p - line), "\", line ", 8)); p++)
        at = p;
    if (!at)
        return false;
    const char *p = at + 8, *end = line + len;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p > at + 8 && end - p >= 4 && memcmp(p, " in ", 4) == 0;
}

void ddp_stream_hold_dump(struct ddp_output *o, struct ddp_stream *s, bool hold)
{
    if (s->hold_dump == hold)
        return;
    s->hold_dump = hold;
    if (hold) {
        s->raw_shown = s->raw && !s->cr_pending ? s->partial.len : 0; /* a raw console already has these bytes */
        return;
    }
    if (s->to_console && s->raw && !s->cr_pending && s->partial.len > s->raw_shown)
        ddp_buf_add(&o->buf[s->which], s->partial.data + s->raw_shown, s->partial.len - s->raw_shown);
    s->raw_shown = 0;
}

/* A line the stream holds back (ddp_stream_hold_dump): true for the whole line; else *len may be cut to the
 * text before a dump's first line that followed it without a newline ("step 3 Fatal Python error: Aborted"). */
static bool held(const struct ddp_stream *s, const char *line, size_t *len)
{
    if (!s->hold_dump)
        return false;
    if (ddp_output_fault_line(line, *len))
        return true;
    const char *f = memmem(line, *len, "Fatal Python error: ", 20);
    if (f)
        *len = (size_t)(f - line);
    return false;
}

/* One whole line (without its end) for the caller and the tail. */
static void line_done(struct ddp_output *o, struct ddp_stream *s, const char *line, size_t len)
{
    size_t kept = len;
    bool hold = held(s, line, &kept);
    s->nlines++;
    s->nheld += hold || kept < len;
    if (s->timed && s->timed->fd >= 0) {
        ddp_buf_puts(&s->timebuf, o->stamp);
        ddp_buf_puts(&s->timebuf, s->which ? " err " : " out ");
        ddp_buf_add(&s->timebuf, line, len);
        ddp_buf_add(&s->timebuf, "\n", 1);
    }
    if (s->dup && s->dup->fd >= 0 && ddp_output_filter_match(s->dup_filters, line, len)) {
        ddp_buf_puts(&s->dupbuf, s->dup_prefix ? s->dup_prefix : "");
        ddp_buf_add(&s->dupbuf, line, len);
        ddp_buf_add(&s->dupbuf, "\n", 1);
    }
    if (s->keep_tail && !hold)
        keep_tail(s, line, kept);
    if (s->on_line)
        s->on_line(s->arg, s->which, line, len);
}

/* Framed console: end another stream's open '\r' update on this console with '\n' before writing. */
static void console_take(struct ddp_output *o, struct ddp_stream *s, struct ddp_buf *b)
{
    unsigned *owner = &o->cr_owner[o->console_of[s->which]];
    if (*owner && *owner != s->id)
        ddp_buf_add(b, "\n", 1);
    *owner = 0;
}

/* Framed console: prefix + text + end ('\n', or '\r' for a progress update that is written at once, or 0 for a
 * last line left open: both end only when another stream's line comes). */
static void console_put(struct ddp_output *o, struct ddp_stream *s, const char *text, size_t len, char end)
{
    if (!s->to_console || (s->raw && !s->hold_dump) || held(s, text, &len))
        return;
    struct ddp_buf *b = &o->buf[s->which];
    console_take(o, s, b);
    if (s->raw) { /* holding back: whole lines, less what the console had as it came */
        size_t shown = s->raw_shown < len ? s->raw_shown : len;
        text += shown;
        len -= shown;
        s->raw_shown = 0;
    } else if (s->prefix_time) {
        const char *t = strstr(s->prefix, "${time}");
        ddp_buf_add(b, s->prefix, (size_t)(t - s->prefix));
        ddp_buf_puts(b, o->stamp);
        ddp_buf_puts(b, t + 7);
    } else if (s->prefix[0]) {
        ddp_buf_puts(b, s->prefix);
    }
    ddp_buf_add(b, text, len);
    if (end)
        ddp_buf_add(b, &end, 1);
    if (end != '\n')
        o->cr_owner[o->console_of[s->which]] = s->id;
    else
        o->lines[s->which]++;
    if (b->len >= DDP_OUTPUT_FLUSH)
        ddp_output_flush(o);
}

/* Framed console: this stream's '\r' update is followed by '\n' (or the stream ends): end the console line,
 * unless another stream's line already did. */
static void console_end_cr(struct ddp_output *o, struct ddp_stream *s)
{
    unsigned *owner = &o->cr_owner[o->console_of[s->which]];
    if (!s->to_console || (s->raw && !s->hold_dump) || *owner != s->id)
        return;
    ddp_buf_add(&o->buf[s->which], "\n", 1);
    o->lines[s->which]++;
    *owner = 0;
}

void ddp_stream_feed(struct ddp_output *o, struct ddp_stream *s, const char *data, size_t len)
{
    ddp_time_iso(NULL, o->stamp);
    if (s->file.fd >= 0) /* the log file gets the bytes as they are, as torchrun's redirect does */
        ddp_buf_add(&s->filebuf, data, len);
    if (s->to_console && s->raw && !s->hold_dump && len) {
        ddp_buf_add(&o->buf[s->which], data, len);
        if (o->buf[s->which].len >= DDP_OUTPUT_FLUSH)
            ddp_output_flush(o);
    }
    while (len > 0) {
        size_t n = 0;
        while (n < len && data[n] != '\n' && data[n] != '\r')
            n++;
        if (s->cr_pending) { /* what follows a '\r': "\r\n" ends the line, anything else replaces it */
            s->cr_pending = false;
            if (n == 0 && data[0] == '\n') {
                console_end_cr(o, s);
                line_done(o, s, s->partial.data ? s->partial.data : "", s->partial.len);
                s->partial.len = 0;
                data++;
                len--;
                continue;
            }
            s->partial.len = 0;
        }
        ddp_buf_add(&s->partial, data, n);
        if (n == len) {
            if (s->partial.len >= DDP_OUTPUT_MAX_LINE) {
                console_put(o, s, s->partial.data, s->partial.len, '\n');
                line_done(o, s, s->partial.data, s->partial.len);
                s->ncut++;
                s->partial.len = 0;
            }
            break;
        }
        const char *text = s->partial.data ? s->partial.data : "";
        console_put(o, s, text, s->partial.len, data[n]);
        if (data[n] == '\n') {
            line_done(o, s, text, s->partial.len);
            s->partial.len = 0;
        } else {
            s->cr_pending = true;
        }
        data += n + 1;
        len -= n + 1;
    }
    if (s->partial.len == 0 && s->partial.cap > 4 * DDP_OUTPUT_FLUSH) {
        free(s->partial.data);
        s->partial.data = NULL;
        s->partial.cap = 0;
    }
    file_flush(o, s);
}

void ddp_stream_finish(struct ddp_output *o, struct ddp_stream *s)
{
    ddp_time_iso(NULL, o->stamp);
    if (s->cr_pending) {
        console_end_cr(o, s);
        s->cr_pending = false;
        line_done(o, s, s->partial.data ? s->partial.data : "", s->partial.len);
    } else if (s->partial.len) {
        /* without a prefix the console gets the worker's bytes: its last line stays as it left it */
        console_put(o, s, s->partial.data, s->partial.len, s->prefix[0] ? '\n' : 0);
        line_done(o, s, s->partial.data, s->partial.len);
    }
    s->partial.len = 0;
    file_flush(o, s);
}

void ddp_stream_tail(const struct ddp_stream *s, void (*fn)(void *arg, const char *line), void *arg)
{
    size_t start = (s->tail_next + DDP_OUTPUT_TAIL - s->ntail) % DDP_OUTPUT_TAIL;
    for (size_t i = 0; i < s->ntail; i++)
        fn(arg, s->tail[(start + i) % DDP_OUTPUT_TAIL]);
}

void ddp_stream_free(struct ddp_stream *s)
{
    file_flush(NULL, s);
    ddp_logfile_close(&s->file);
    ddp_buf_free(&s->partial);
    ddp_buf_free(&s->filebuf);
    ddp_buf_free(&s->timebuf);
    ddp_buf_free(&s->dupbuf);
    free(s->dup_prefix);
    s->dup_prefix = NULL;
    s->timed = NULL;
    s->dup = NULL;
    for (size_t i = 0; i < DDP_OUTPUT_TAIL; i++) {
        free(s->tail[i]);
        s->tail[i] = NULL;
    }
    s->ntail = 0;
    free(s->prefix);
    s->prefix = NULL;
}
