/* jsonlog: see jsonlog.h. */
#include "records/jsonlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ddp_jsonlog {
    char *dir;
    int dirfd; /* borrowed */
    int fd;    /* events.jsonl, -1 once it stopped */
    uint64_t len;
    int err;                 /* errno of the write that stopped events.jsonl, or 0 */
    char *tmp;               /* summary.json's temporary file */
    int reserve_fd;          /* it, holding DDP_JSONLOG_RESERVE bytes of the disk for the summary, or -1 */
    bool held;               /* a place is held (ddp_jsonlog_hold): events wait in queue */
    struct timespec held_ts; /* the held event's time */
    json_t *queue;           /* events stamped while held, in order */
};

int ddp_jsonlog_open(int dirfd, const char *path, struct ddp_jsonlog **out, struct ddp_err *err)
{
    int fd = openat(dirfd, "events.jsonl", O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    *out = NULL;
    if (fd < 0)
        return ddp_errf(err, -errno, "%s/events.jsonl: %s", path, strerror(errno));
    struct ddp_jsonlog *r = ddp_xcalloc(1, sizeof(*r));
    r->dir = ddp_xstrdup(path);
    r->dirfd = dirfd;
    r->fd = fd;
    r->tmp = ddp_xasprintf(".summary.json.%d", (int)getpid());
    r->queue = json_array();
    /* a disk that fills during the run still takes the summary: its room is taken now */
    r->reserve_fd = openat(dirfd, r->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (r->reserve_fd >= 0 && fallocate(r->reserve_fd, 0, 0, DDP_JSONLOG_RESERVE) != 0) {
        close(r->reserve_fd);
        unlinkat(dirfd, r->tmp, 0);
        r->reserve_fd = -1;
    }
    *out = r;
    return 0;
}

/* Write all n bytes at offset off. 0 or a negative errno. */
static int pwrite_all(int fd, const char *p, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

static json_t *stamped(const struct timespec *at, const char *name, json_t *fields)
{
    struct timespec ts;
    char buf[32];
    json_t *o = json_object();
    if (at)
        ts = *at;
    else
        clock_gettime(CLOCK_REALTIME, &ts);
    json_object_set_new(o, "v", json_integer(DDP_JSONLOG_VERSION));
    json_object_set_new(o, "ts", json_string(ddp_time_iso(&ts, buf)));
    if (name)
        json_object_set_new(o, "event", json_string(name));
    if (fields)
        json_object_update(o, fields);
    json_decref(fields);
    return o;
}

/* Append the stamped event o (taken) as one line. */
static void append(struct ddp_jsonlog *r, json_t *o)
{
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps' NUL becomes the line's end: one write, one whole line (O_APPEND) */
    size_t done = 0;
    ssize_t w = 0;
    while (r->fd >= 0 && done < n + 1) {
        w = write(r->fd, line + done, n + 1 - done);
        if (w > 0)
            done += (size_t)w;
        else if (w == 0 || errno != EINTR)
            break;
    }
    if (done == n + 1) {
        r->len += done;
    } else if (r->fd >= 0) { /* a full disk: the events so far stay whole lines, the later ones are left out */
        r->err = w < 0 ? errno : EIO;
        if (ftruncate(r->fd, (off_t)r->len) != 0)
            ddp_debug("%s/events.jsonl: ftruncate: %s", r->dir, strerror(errno));
        close(r->fd);
        r->fd = -1;
        ddp_warn("%s/events.jsonl: record stopped at %llu bytes: %s; later events are left out", r->dir,
                 (unsigned long long)r->len, strerror(r->err));
    }
    free(line);
}

void ddp_jsonlog_event(struct ddp_jsonlog *r, const char *name, json_t *fields)
{
    if (!r) {
        json_decref(fields);
        return;
    }
    json_t *o = stamped(NULL, name, fields);
    if (r->held)
        json_array_append_new(r->queue, o);
    else
        append(r, o);
}

void ddp_jsonlog_hold(struct ddp_jsonlog *r)
{
    if (!r || r->held)
        return;
    r->held = true;
    clock_gettime(CLOCK_REALTIME, &r->held_ts);
}

/* The queued events, in order; nothing is held any more. */
static void release(struct ddp_jsonlog *r)
{
    size_t i;
    json_t *o;
    r->held = false;
    json_array_foreach(r->queue, i, o) append(r, json_incref(o));
    json_array_clear(r->queue);
}

void ddp_jsonlog_fill(struct ddp_jsonlog *r, const char *name, json_t *fields)
{
    if (!r || !r->held) {
        ddp_jsonlog_event(r, name, fields);
        return;
    }
    append(r, stamped(&r->held_ts, name, fields));
    release(r);
}

int ddp_jsonlog_stopped(const struct ddp_jsonlog *r, uint64_t *len)
{
    *len = r ? r->len : 0;
    return r ? r->err : 0;
}

int ddp_jsonlog_summary(struct ddp_jsonlog *r, json_t *summary)
{
    int rc = 0, fd;
    char *tmp, *path;
    json_t *o;
    char *text;
    if (!r) {
        json_decref(summary);
        return 0;
    }
    o = stamped(NULL, NULL, summary);
    text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    tmp = r->tmp;
    path = ddp_xasprintf("%s/summary.json", r->dir);
    fd = r->reserve_fd >= 0 ? r->reserve_fd
                            : openat(r->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    r->reserve_fd = -1;
    size_t n = strlen(text);
    text[n] = '\n'; /* the NUL becomes the file's last newline */
    if (fd >= 0) {
        rc = pwrite_all(fd, text, n + 1, 0);
        if (rc == 0 && ftruncate(fd, (off_t)(n + 1)) != 0) /* the reserve's rest goes back to the disk */
            rc = -errno;
        if (close(fd) != 0 && rc == 0)
            rc = -errno;
        if (rc == 0 && renameat(r->dirfd, tmp, r->dirfd, "summary.json") != 0)
            rc = -errno;
        if (rc < 0)
            unlinkat(r->dirfd, tmp, 0);
    } else {
        rc = -errno;
    }
    if (rc < 0)
        ddp_warn("%s: %s", path, strerror(-rc));
    free(text);
    free(path);
    return rc;
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0 when the byte at s does not start one. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
    unsigned c = s[0];
    size_t n;
    unsigned cp, min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

json_t *ddp_jsonlog_text(const char *s)
{
    if (!s)
        return json_null();
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), i = 0, n;
    while (i < len && (n = utf8_seq(u + i, len - i)) > 0)
        i += n;
    if (i == len)
        return json_stringn(s, len);
    struct ddp_buf b = {0};
    ddp_buf_add(&b, s, i);
    while (i < len) {
        n = utf8_seq(u + i, len - i);
        if (n == 0) {
            ddp_buf_add(&b, "\xef\xbf\xbd", 3); /* U+FFFD */
            i++;
        } else {
            ddp_buf_add(&b, s + i, n);
            i += n;
        }
    }
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    ddp_buf_free(&b);
    return j;
}

static json_t *pack_value(const char **f, va_list *ap);

static void pack_skip(const char **f)
{
    while (**f == ' ' || **f == ',' || **f == ':')
        (*f)++;
}

static _Noreturn void pack_bad(const char *f)
{
    fprintf(stderr, "ddplaunch: internal error: ddp_jsonlog_pack format at '%s'\n", f);
    abort();
}

/* The value (or container) that starts at *f, its arguments taken from ap; *f moves past it. */
static json_t *pack_value(const char **f, va_list *ap)
{
    pack_skip(f);
    char c = *(*f)++;
    json_t *v;
    switch (c) {
    case '{':
    case '[':
        v = c == '{' ? json_object() : json_array();
        for (pack_skip(f); **f != (c == '{' ? '}' : ']'); pack_skip(f)) {
            if (!**f)
                pack_bad(*f);
            if (c == '[') {
                json_array_append_new(v, pack_value(f, ap));
                continue;
            }
            if (*(*f)++ != 's')
                pack_bad(*f - 1);
            const char *key = va_arg(*ap, const char *);
            json_t *x = pack_value(f, ap);
            json_object_set_new(v, key, x);
        }
        (*f)++;
        return v;
    case 's':
        if (**f == '?')
            (*f)++;
        return ddp_jsonlog_text(va_arg(*ap, const char *));
    case 'i':
        return json_integer(va_arg(*ap, int));
    case 'I':
        return json_integer(va_arg(*ap, json_int_t));
    case 'b':
        return json_boolean(va_arg(*ap, int));
    case 'f':
        return json_real(va_arg(*ap, double));
    case 'n':
        return json_null();
    case 'o':
    case 'O':
        if (**f == '?')
            (*f)++;
        v = va_arg(*ap, json_t *);
        return !v ? json_null() : c == 'O' ? json_incref(v) : v;
    default:
        pack_bad(*f - 1);
    }
}

json_t *ddp_jsonlog_pack(const char *fmt, ...)
{
    va_list ap;
    const char *f = fmt;
    va_start(ap, fmt);
    json_t *v = pack_value(&f, &ap);
    va_end(ap);
    pack_skip(&f);
    if (*f)
        pack_bad(f);
    return v;
}

const char *ddp_jsonlog_dir(const struct ddp_jsonlog *r)
{
    return r ? r->dir : NULL;
}

void ddp_jsonlog_close(struct ddp_jsonlog *r)
{
    if (!r)
        return;
    release(r); /* what waited for a place that was never filled */
    json_decref(r->queue);
    if (r->fd >= 0)
        close(r->fd);
    if (r->reserve_fd >= 0) { /* no summary was written */
        close(r->reserve_fd);
        unlinkat(r->dirfd, r->tmp, 0);
    }
    free(r->tmp);
    free(r->dir);
    free(r);
}
