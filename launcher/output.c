/* output: see output.h. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ddp_output_init(struct ddp_output *o, int out_fd, int err_fd)
{
    memset(o, 0, sizeof(*o));
    o->fd[0] = out_fd;
    o->fd[1] = err_fd;
    for (int i = 0; i < 2; i++) {
        struct stat st;
        o->may_block[i] = o->fd[i] >= 0 && fstat(o->fd[i], &st) == 0 && !S_ISREG(st.st_mode) &&
                          !S_ISBLK(st.st_mode);
    }
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

/* Write all of buf to fd; waits (poll) when fd is non-blocking and full. 0 or negative errno. */
static int write_all(int fd, const char *p, size_t n)
{
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
            if (write_all(o->fd[i], b->data, b->len) != 0)
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
            write_all(o->fd[i], b->data, b->len) != 0)
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
}

void ddp_stream_init(struct ddp_stream *s, int which, const char *prefix, bool to_console, int file_fd)
{
    memset(s, 0, sizeof(*s));
    s->which = which;
    s->prefix = ddp_xstrdup(prefix ? prefix : "");
    s->to_console = to_console;
    s->file_fd = file_fd;
    s->keep_tail = which == 1;
}

static void file_flush(struct ddp_stream *s)
{
    if (s->filebuf.len == 0)
        return;
    if (s->file_fd >= 0 && write_all(s->file_fd, s->filebuf.data, s->filebuf.len) != 0) {
        close(s->file_fd); /* disk full or similar: stop logging to it rather than fail the job */
        s->file_fd = -1;
    }
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

/* One whole line (without '\n'). */
static void emit(struct ddp_output *o, struct ddp_stream *s, const char *line, size_t len)
{
    s->nlines++;
    if (s->to_console) {
        struct ddp_buf *b = &o->buf[s->which];
        if (s->prefix[0])
            ddp_buf_puts(b, s->prefix);
        ddp_buf_add(b, line, len);
        ddp_buf_add(b, "\n", 1);
        o->lines[s->which]++;
        if (b->len >= DDP_OUTPUT_FLUSH)
            ddp_output_flush(o);
    }
    if (s->keep_tail)
        keep_tail(s, line, len);
    if (s->on_line)
        s->on_line(s->arg, s->which, line, len);
}

void ddp_stream_feed(struct ddp_output *o, struct ddp_stream *s, const char *data, size_t len)
{
    if (s->file_fd >= 0) /* the log file gets the bytes as they are, as torchrun's redirect does */
        ddp_buf_add(&s->filebuf, data, len);
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        if (!nl) {
            ddp_buf_add(&s->partial, data, len);
            if (s->partial.len >= DDP_OUTPUT_MAX_LINE) {
                emit(o, s, s->partial.data, s->partial.len);
                s->ncut++;
                s->partial.len = 0;
            }
            break;
        }
        size_t n = (size_t)(nl - data);
        if (s->partial.len) {
            ddp_buf_add(&s->partial, data, n);
            emit(o, s, s->partial.data, s->partial.len);
            s->partial.len = 0;
        } else {
            emit(o, s, data, n);
        }
        data += n + 1;
        len -= n + 1;
    }
    if (s->partial.len == 0 && s->partial.cap > 4 * DDP_OUTPUT_FLUSH) {
        free(s->partial.data);
        s->partial.data = NULL;
        s->partial.cap = 0;
    }
    file_flush(s);
}

void ddp_stream_finish(struct ddp_output *o, struct ddp_stream *s)
{
    if (s->partial.len) {
        emit(o, s, s->partial.data, s->partial.len);
        s->partial.len = 0;
    }
    file_flush(s);
}

void ddp_stream_tail(const struct ddp_stream *s, void (*fn)(void *arg, const char *line), void *arg)
{
    size_t start = (s->tail_next + DDP_OUTPUT_TAIL - s->ntail) % DDP_OUTPUT_TAIL;
    for (size_t i = 0; i < s->ntail; i++)
        fn(arg, s->tail[(start + i) % DDP_OUTPUT_TAIL]);
}

void ddp_stream_free(struct ddp_stream *s)
{
    file_flush(s);
    if (s->file_fd >= 0)
        close(s->file_fd);
    s->file_fd = -1;
    ddp_buf_free(&s->partial);
    ddp_buf_free(&s->filebuf);
    for (size_t i = 0; i < DDP_OUTPUT_TAIL; i++) {
        free(s->tail[i]);
        s->tail[i] = NULL;
    }
    s->ntail = 0;
    free(s->prefix);
    s->prefix = NULL;
}
