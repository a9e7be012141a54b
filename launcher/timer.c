/* timer: torch's FileTimerServer protocol (torch/distributed/elastic/timer/file_based_local_timer.py, 1.13 and
 * later) served from the supervisor's libuv loop. */
#include "timer.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 8192  /* clients refuse requests over PIPE_BUF (4096) */
#define MAX_WAKE_MS 1000     /* re-check at least this often: deadlines are wall-clock times */

struct entry {
    int pid;
    char *scope;
    double expires; /* unix time, seconds */
    int signo;
};

struct ddp_timer_server {
    uv_loop_t *loop;
    uv_pipe_t pipe;
    uv_timer_t wake;
    int keep_writer_fd; /* our own write end: the FIFO never reports EOF */
    char *path;
    ddp_timer_expired_cb on_expired;
    void *arg;
    struct entry *v;
    size_t n, cap;
    char line[LINE_MAX_BYTES];
    size_t line_len;
    bool line_too_long;
    size_t requests;
    size_t bad_lines;
    int handles_open;
    bool closing;
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- a small parser for one flat JSON object ---- */

struct request {
    long long version;
    long long pid;
    char *scope;
    double expires;
    long long signo;
    bool has_pid, has_scope, has_expires;
};

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\r' || **p == '\n')
        (*p)++;
}

static void put_utf8(struct ddp_buf *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    ddp_buf_add(b, u, n);
}

static bool hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

/* A JSON string at *p (after the opening quote is checked here). Caller owns *out. */
static bool parse_string(const char **p, char **out)
{
    if (**p != '"')
        return false;
    (*p)++;
    struct ddp_buf b = {0};
    while (**p != '"') {
        char c = **p;
        if (c == '\0' || (unsigned char)c < 0x20)
            goto bad;
        if (c != '\\') {
            ddp_buf_add(&b, *p, 1);
            (*p)++;
            continue;
        }
        (*p)++;
        char e = **p;
        (*p)++;
        switch (e) {
        case '"': ddp_buf_add(&b, "\"", 1); break;
        case '\\': ddp_buf_add(&b, "\\", 1); break;
        case '/': ddp_buf_add(&b, "/", 1); break;
        case 'b': ddp_buf_add(&b, "\b", 1); break;
        case 'f': ddp_buf_add(&b, "\f", 1); break;
        case 'n': ddp_buf_add(&b, "\n", 1); break;
        case 'r': ddp_buf_add(&b, "\r", 1); break;
        case 't': ddp_buf_add(&b, "\t", 1); break;
        case 'u': {
            unsigned cp;
            if (!hex4(*p, &cp))
                goto bad;
            *p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && (*p)[0] == '\\' && (*p)[1] == 'u') {
                unsigned lo;
                if (hex4(*p + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    *p += 6;
                }
            }
            if (cp == 0)
                goto bad; /* no NUL inside a C string */
            put_utf8(&b, cp);
            break;
        }
        default:
            goto bad;
        }
    }
    (*p)++;
    *out = b.data ? b.data : ddp_xstrdup("");
    return true;
bad:
    ddp_buf_free(&b);
    return false;
}

static bool parse_number(const char **p, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(*p, &end);
    if (end == *p || errno == ERANGE || !isfinite(v))
        return false;
    *p = end;
    *out = v;
    return true;
}

static bool as_int(double d, long long *out)
{
    if (d != floor(d) || d < -2147483648.0 || d > 2147483647.0)
        return false;
    *out = (long long)d;
    return true;
}

/* Skip a value we do not use (string, number, true/false/null). Nested values are not part of the protocol. */
static bool skip_value(const char **p)
{
    if (**p == '"') {
        char *s;
        if (!parse_string(p, &s))
            return false;
        free(s);
        return true;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (size_t i = 0; i < 3; i++)
        if (strncmp(*p, words[i], strlen(words[i])) == 0) {
            *p += strlen(words[i]);
            return true;
        }
    double d;
    return parse_number(p, &d);
}

/* 0, or -EINVAL with a short reason in *why. r->scope is owned by the caller on success. */
static int parse_request(const char *line, struct request *r, const char **why)
{
    memset(r, 0, sizeof(*r));
    r->version = 1;
    const char *p = line;
    skip_ws(&p);
    if (*p != '{') {
        *why = "not a JSON object";
        return -EINVAL;
    }
    p++;
    skip_ws(&p);
    bool first = true;
    while (*p != '}') {
        if (!first) {
            if (*p != ',')
                goto syntax;
            p++;
            skip_ws(&p);
        }
        first = false;
        char *key;
        if (!parse_string(&p, &key))
            goto syntax;
        skip_ws(&p);
        if (*p != ':') {
            free(key);
            goto syntax;
        }
        p++;
        skip_ws(&p);
        bool ok = true;
        double d;
        if (strcmp(key, "scope_id") == 0) {
            free(r->scope);
            r->scope = NULL;
            ok = parse_string(&p, &r->scope);
            r->has_scope = ok;
        } else if (strcmp(key, "pid") == 0) {
            ok = parse_number(&p, &d) && as_int(d, &r->pid);
            r->has_pid = ok;
        } else if (strcmp(key, "expiration_time") == 0) {
            ok = parse_number(&p, &r->expires);
            r->has_expires = ok;
        } else if (strcmp(key, "signal") == 0) {
            ok = parse_number(&p, &d) && as_int(d, &r->signo);
        } else if (strcmp(key, "version") == 0) {
            ok = parse_number(&p, &d) && as_int(d, &r->version);
        } else {
            ok = skip_value(&p);
        }
        free(key);
        if (!ok)
            goto syntax;
        skip_ws(&p);
    }
    p++;
    skip_ws(&p);
    if (*p != '\0')
        goto syntax;
    if (!r->has_pid || !r->has_scope || !r->has_expires) {
        *why = "pid, scope_id and expiration_time are required";
        goto fail;
    }
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
    return 0;
syntax:
    *why = "malformed JSON";
fail:
    free(r->scope);
    r->scope = NULL;
    return -EINVAL;
}

/* ---- timers ---- */

static void entry_remove(struct ddp_timer_server *s, size_t i)
{
    free(s->v[i].scope);
    s->v[i] = s->v[--s->n];
}

static void rearm(struct ddp_timer_server *s);

static void apply_request(struct ddp_timer_server *s, struct request *r)
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
static void expire(struct ddp_timer_server *s)
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
    struct ddp_timer_server *s = t->data;
    expire(s);
    if (!s->closing)
        rearm(s);
}

static void rearm(struct ddp_timer_server *s)
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

static void handle_line(struct ddp_timer_server *s, const char *line)
{
    s->requests++;
    struct request r;
    const char *why = NULL;
    if (parse_request(line, &r, &why) < 0) {
        s->bad_lines++;
        if (s->bad_lines <= 5)
            ddp_warn("%s: ignored a timer request (%s): %.200s", s->path, why, line);
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
    struct ddp_timer_server *s = stream->data;
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
                ddp_warn("%s: ignored a timer request longer than %d bytes", s->path, LINE_MAX_BYTES);
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
        rc = ddp_errf(err, -EPERM, "%s: the timer FIFO's directory must be ours and private (mode 0700), is uid %u "
                                   "mode %03o", dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
    free(dir);
    return rc;
}

int ddp_timer_server_start(uv_loop_t *loop, const char *fifo_path, ddp_timer_expired_cb on_expired, void *arg,
                           struct ddp_timer_server **out, struct ddp_err *err)
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
    struct ddp_timer_server *s = ddp_xcalloc(1, sizeof(*s));
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
        ddp_timer_server_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct ddp_timer_server *s = h->data;
    if (--s->handles_open > 0)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].scope);
    free(s->v);
    free(s->path);
    free(s);
}

void ddp_timer_server_close(struct ddp_timer_server *s)
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

void ddp_timer_server_clear_pid(struct ddp_timer_server *s, int pid)
{
    if (s == NULL || s->closing)
        return;
    for (size_t i = s->n; i-- > 0;)
        if (s->v[i].pid == pid)
            entry_remove(s, i);
    rearm(s);
}

void ddp_timer_server_clear_all(struct ddp_timer_server *s)
{
    if (s == NULL || s->closing)
        return;
    while (s->n > 0)
        entry_remove(s, s->n - 1);
    rearm(s);
}

size_t ddp_timer_server_count(const struct ddp_timer_server *s)
{
    return s ? s->n : 0;
}

size_t ddp_timer_server_requests(const struct ddp_timer_server *s)
{
    return s ? s->requests : 0;
}
