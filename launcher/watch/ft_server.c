/* ft_server: torch's FileTimerServer protocol (torch/distributed/elastic/timer/file_based_local_timer.py, 1.13 and
 * later) served from the supervisor's libuv loop. */
#include "watch/ft_server.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 8192 /* clients refuse requests over PIPE_BUF (4096) */
#define MAX_WAKE_MS 1000    /* re-check at least this often: deadlines are wall-clock times */

struct entry {
    int pid;
    char *scope;
    double expires; /* unix time, seconds */
    int signo;
};

struct ddp_ft_server {
    uv_loop_t *loop;
    uv_pipe_t pipe;
    uv_timer_t wake;
    int keep_writer_fd; /* our own write end: the FIFO never reports EOF */
    char *path;
    ddp_ft_server_expired_cb on_expired;
    void *arg;
    struct entry *v;
    size_t n, cap;
    char line[LINE_MAX_BYTES];
    size_t line_len;
    bool line_too_long;
    size_t requests;
    size_t bad_lines;
    struct ddp_ratelimit warn_limit; /* a client can send bad lines at will: a few warnings per minute */
    int handles_open;
    bool closing;
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- requests: one JSON object per line, read with jansson ---- */

/* A number that is an integer in int range (torch sends ints; 5.0 is accepted as 5, 5.5 is not). */
static bool json_int(const json_t *v, long long *out)
{
    double d;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < -2147483648LL || i > 2147483647LL)
            return false;
        *out = (long long)i;
        return true;
    }
    if (!json_is_real(v))
        return false;
    d = json_real_value(v);
    if (d != floor(d) || d < -2147483648.0 || d > 2147483647.0)
        return false;
    *out = (long long)d;
    return true;
}

int ddp_ft_server_parse_request(const char *line, size_t len, struct ddp_ft_request *r, const char **why)
{
    json_error_t jerr;
    json_t *o, *v;
    memset(r, 0, sizeof(*r));
    r->version = 1;
    /* JSON_REJECT_DUPLICATES: a line with two "pid"s is not what a client writes; no NUL inside strings */
    o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        *why = "malformed JSON";
        return -EINVAL;
    }
    if (!json_is_object(o)) {
        *why = "not a JSON object";
        goto fail;
    }
    if ((v = json_object_get(o, "version")) && !json_int(v, &r->version))
        goto syntax;
    if ((v = json_object_get(o, "pid")) && !json_int(v, &r->pid))
        goto syntax;
    if ((v = json_object_get(o, "signal")) && !json_int(v, &r->signo))
        goto syntax;
    v = json_object_get(o, "expiration_time");
    if (v && !json_is_number(v))
        goto syntax;
    if (v) {
        r->expires = json_number_value(v);
        if (!isfinite(r->expires))
            goto syntax;
    }
    if (!json_object_get(o, "pid") || !v || !json_object_get(o, "scope_id")) {
        *why = "pid, scope_id and expiration_time are required";
        goto fail;
    }
    v = json_object_get(o, "scope_id");
    if (!json_is_string(v))
        goto syntax;
    if (r->version != 1) {
        *why = "unsupported version (expected 1)";
        goto fail;
    }
    if (r->pid <= 0) {
        *why = "pid must be positive";
        goto fail;
    }
    if (r->signo < 0 || r->signo > 64)
        r->signo = 0; /* torch: a negative or zero signal does not kill */
    r->scope = ddp_xstrdup(json_string_value(v));
    json_decref(o);
    return 0;
syntax:
    *why = "malformed JSON";
fail:
    json_decref(o);
    return -EINVAL;
}

/* ---- timers ---- */

static void entry_remove(struct ddp_ft_server *s, size_t i)
{
    free(s->v[i].scope);
    s->v[i] = s->v[--s->n];
}

static void rearm(struct ddp_ft_server *s);

static void apply_request(struct ddp_ft_server *s, struct ddp_ft_request *r)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].pid == r->pid && strcmp(s->v[i].scope, r->scope) == 0) {
            if (r->expires < 0) {
                entry_remove(s, i);
            } else {
                s->v[i].expires = r->expires;
                s->v[i].signo = (int)r->signo;
            }
            free(r->scope);
            r->scope = NULL;
            return;
        }
    }
    if (r->expires < 0) { /* release of an unknown timer: nothing to do */
        free(r->scope);
        r->scope = NULL;
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = ddp_xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = (struct entry){(int)r->pid, r->scope, r->expires, (int)r->signo};
    r->scope = NULL;
}

/* Report and clear expired timers, torch's way. */
static void expire(struct ddp_ft_server *s)
{
    double now = wall_now();
    while (!s->closing) {
        /* The expired timer with a signal whose pid has the earliest such deadline. */
        size_t best = s->n;
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].expires <= now && s->v[i].signo > 0 && (best == s->n || s->v[i].expires < s->v[best].expires))
                best = i;
        if (best == s->n)
            break;
        int pid = s->v[best].pid, signo = s->v[best].signo;
        char *scope = ddp_xstrdup(s->v[best].scope);
        for (size_t i = s->n; i-- > 0;)
            if (s->v[i].pid == pid)
                entry_remove(s, i);
        s->on_expired(s->arg, pid, signo, scope);
        free(scope);
    }
    if (s->closing)
        return;
    /* Expired without a signal: the client asked not to be killed; forget them. */
    for (size_t i = s->n; i-- > 0;)
        if (s->v[i].expires <= now) {
            ddp_debug("timer: pid %d scope '%s' expired without a signal; not reported", s->v[i].pid, s->v[i].scope);
            entry_remove(s, i);
        }
}

static void on_wake(uv_timer_t *t)
{
    struct ddp_ft_server *s = t->data;
    expire(s);
    if (!s->closing)
        rearm(s);
}

static void rearm(struct ddp_ft_server *s)
{
    if (s->n == 0) {
        uv_timer_stop(&s->wake);
        return;
    }
    double earliest = s->v[0].expires;
    for (size_t i = 1; i < s->n; i++)
        if (s->v[i].expires < earliest)
            earliest = s->v[i].expires;
    double ms = (earliest - wall_now()) * 1000.0;
    uint64_t delay = ms <= 0 ? 0 : ms >= MAX_WAKE_MS ? MAX_WAKE_MS : (uint64_t)ceil(ms);
    uv_timer_start(&s->wake, on_wake, delay, 0);
}

#define WARN_BURST 5
#define WARN_INTERVAL_MS 60000

/* A warning about what a client sent, rate-limited (WARN_BURST per WARN_INTERVAL_MS, then how many were
 * left out). */
static void warn_limited(struct ddp_ft_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_limited(struct ddp_ft_server *s, const char *fmt, ...)
{
    unsigned dropped;
    char msg[512];
    va_list ap;
    if (!ddp_ratelimit_allow(&s->warn_limit, ddp_now_ms(), WARN_BURST, WARN_INTERVAL_MS, &dropped))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ddp_printable(msg);
    if (dropped)
        ddp_warn("%s: %s (and %u more such warnings in the last minute)", s->path, msg, dropped);
    else
        ddp_warn("%s: %s", s->path, msg);
}

static void handle_line(struct ddp_ft_server *s, const char *line)
{
    s->requests++;
    struct ddp_ft_request r;
    const char *why = NULL;
    if (ddp_ft_server_parse_request(line, strlen(line), &r, &why) < 0) {
        s->bad_lines++;
        warn_limited(s, "ignored a timer request (%s): %.200s", why, line);
        return;
    }
    apply_request(s, &r);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    static char chunk[65536]; /* one loop thread; data is consumed before the next read */
    buf->base = chunk;
    buf->len = sizeof(chunk);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct ddp_ft_server *s = stream->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            ddp_warn("%s: read: %s", s->path, uv_strerror((int)nread));
        uv_read_stop(stream);
        return;
    }
    for (ssize_t i = 0; i < nread; i++) {
        char c = buf->base[i];
        if (c == '\n') {
            if (s->line_too_long) {
                s->requests++;
                s->bad_lines++;
                warn_limited(s, "ignored a timer request longer than %d bytes", LINE_MAX_BYTES);
            } else if (s->line_len > 0) {
                s->line[s->line_len] = '\0';
                handle_line(s, s->line);
            }
            s->line_len = 0;
            s->line_too_long = false;
        } else if (s->line_len + 1 >= sizeof(s->line)) {
            s->line_too_long = true;
        } else if (!s->line_too_long) {
            s->line[s->line_len++] = c;
        }
    }
    expire(s); /* an acquire may already be in the past */
    if (!s->closing)
        rearm(s);
}

/* ---- lifecycle ---- */

static int check_private_dir(const char *fifo_path, struct ddp_err *err)
{
    char *dir = ddp_xstrdup(fifo_path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        free(dir);
        return ddp_errf(err, -EINVAL, "%s: the timer FIFO needs an absolute path in a private directory", fifo_path);
    }
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    int rc = 0;
    if (lstat(dir, &st) < 0)
        rc = ddp_errf(err, -errno, "%s: %s", dir, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = ddp_errf(err, -ENOTDIR, "%s: not a directory (a symlink is not accepted for the timer FIFO)", dir);
    else if (st.st_uid != geteuid() || (st.st_mode & 0077) != 0)
        rc = ddp_errf(err, -EPERM,
                      "%s: the timer FIFO's directory must be ours and private (mode 0700), is uid %u "
                      "mode %03o",
                      dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
    free(dir);
    return rc;
}

int ddp_ft_server_server_start(uv_loop_t *loop, const char *fifo_path, ddp_ft_server_expired_cb on_expired, void *arg,
                               struct ddp_ft_server **out, struct ddp_err *err)
{
    *out = NULL;
    if (fifo_path == NULL || on_expired == NULL)
        return ddp_errf(err, -EINVAL, "timer server: a FIFO path and a callback are required");
    int rc = check_private_dir(fifo_path, err);
    if (rc < 0)
        return rc;
    struct stat st;
    if (lstat(fifo_path, &st) == 0) {
        if (!S_ISFIFO(st.st_mode) || st.st_uid != geteuid())
            return ddp_errf(err, -EEXIST, "%s: exists and is not a FIFO of ours; not replacing it", fifo_path);
        if (unlink(fifo_path) < 0)
            return ddp_errf(err, -errno, "%s: unlink: %s", fifo_path, strerror(errno));
    }
    if (mkfifo(fifo_path, 0600) < 0)
        return ddp_errf(err, -errno, "%s: mkfifo: %s", fifo_path, strerror(errno));
    int rfd = open(fifo_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (rfd < 0) {
        rc = ddp_errf(err, -errno, "%s: open for reading: %s", fifo_path, strerror(errno));
        unlink(fifo_path);
        return rc;
    }
    if (fstat(rfd, &st) < 0 || !S_ISFIFO(st.st_mode) || st.st_uid != geteuid()) {
        close(rfd);
        unlink(fifo_path);
        return ddp_errf(err, -EPERM, "%s: replaced while opening; refusing it", fifo_path);
    }
    int wfd = open(fifo_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (wfd < 0) {
        rc = ddp_errf(err, -errno, "%s: open for writing: %s", fifo_path, strerror(errno));
        close(rfd);
        unlink(fifo_path);
        return rc;
    }
    struct ddp_ft_server *s = ddp_xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->path = ddp_xstrdup(fifo_path);
    s->on_expired = on_expired;
    s->arg = arg;
    s->keep_writer_fd = wfd;
    uv_pipe_init(loop, &s->pipe, 0);
    s->pipe.data = s;
    uv_timer_init(loop, &s->wake);
    s->wake.data = s;
    s->handles_open = 2;
    int uvrc = uv_pipe_open(&s->pipe, rfd);
    if (uvrc < 0)
        close(rfd); /* not adopted by the handle */
    else
        uvrc = uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
    if (uvrc < 0) {
        rc = ddp_errf(err, uvrc, "%s: cannot watch the FIFO: %s", fifo_path, uv_strerror(uvrc));
        ddp_ft_server_server_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct ddp_ft_server *s = h->data;
    if (--s->handles_open > 0)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].scope);
    free(s->v);
    free(s->path);
    free(s);
}

void ddp_ft_server_server_close(struct ddp_ft_server *s)
{
    if (s == NULL || s->closing)
        return;
    s->closing = true;
    if (s->keep_writer_fd >= 0)
        close(s->keep_writer_fd);
    s->keep_writer_fd = -1;
    unlink(s->path);
    uv_close((uv_handle_t *)&s->pipe, on_closed);
    uv_close((uv_handle_t *)&s->wake, on_closed);
}

void ddp_ft_server_server_clear_all(struct ddp_ft_server *s)
{
    if (s == NULL || s->closing)
        return;
    while (s->n > 0)
        entry_remove(s, s->n - 1);
    rearm(s);
}

size_t ddp_ft_server_server_count(const struct ddp_ft_server *s)
{
    return s ? s->n : 0;
}

size_t ddp_ft_server_server_requests(const struct ddp_ft_server *s)
{
    return s ? s->requests : 0;
}
