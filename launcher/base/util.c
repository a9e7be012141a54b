/* util: see util.h. */
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ddp_log_verbosity = DDP_LOG_INFO;
bool ddp_log_colour;

const char *ddp_colour(enum ddp_colour c)
{
    static const char *const sgr[] = {"\033[0m", "\033[1;31m", "\033[33m", "\033[32m", "\033[1m"};
    return ddp_log_colour && (unsigned)c < sizeof sgr / sizeof sgr[0] ? sgr[c] : "";
}

bool ddp_log_colour_wanted(bool tty, char *const *envp)
{
    const char *no = ddp_env_get(envp, "NO_COLOR");
    return tty && !(no && *no);
}

int ddp_errf(struct ddp_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

static void oom(size_t n, const char *file, int line)
{
    fprintf(stderr, "ddplaunch: out of memory allocating %zu bytes at %s:%d\n", n, file, line);
    abort();
}

void *ddp_xmalloc_at(size_t n, const char *file, int line)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n, file, line);
    return p;
}

void *ddp_xcalloc_at(size_t n, size_t size, const char *file, int line)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size, file, line);
    return p;
}

void *ddp_xrealloc_at(void *p, size_t n, const char *file, int line)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n, file, line);
    return q;
}

char *ddp_xstrdup_at(const char *s, const char *file, int line)
{
    char *p = strdup(s);
    if (!p)
        oom(strlen(s) + 1, file, line);
    return p;
}

char *ddp_xstrndup_at(const char *s, size_t n, const char *file, int line)
{
    char *p = strndup(s, n);
    if (!p)
        oom(n + 1, file, line);
    return p;
}

char *ddp_xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int rc = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (rc < 0)
        oom(0, __FILE__, __LINE__);
    return s;
}

void ddp_strv_push_own(struct ddp_strv *sv, char *s)
{
    if (sv->n + 2 > sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 8;
        sv->v = ddp_xrealloc(sv->v, sv->cap * sizeof *sv->v);
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
}

void ddp_strv_push(struct ddp_strv *sv, const char *s)
{
    ddp_strv_push_own(sv, ddp_xstrdup(s));
}

void ddp_strv_pushf(struct ddp_strv *sv, const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int rc = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (rc < 0)
        oom(0, __FILE__, __LINE__);
    ddp_strv_push_own(sv, s);
}

void ddp_strv_copy(struct ddp_strv *dst, const struct ddp_strv *src)
{
    ddp_strv_clear(dst);
    for (size_t i = 0; i < src->n; i++)
        ddp_strv_push(dst, src->v[i]);
}

void ddp_strv_clear(struct ddp_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

int ddp_strv_env_find(const struct ddp_strv *sv, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < sv->n; i++)
        if (strncmp(sv->v[i], name, len) == 0 && sv->v[i][len] == '=')
            return (int)i;
    return -1;
}

const char *ddp_env_get(char *const *envp, const char *name)
{
    size_t len = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
            return *envp + len + 1;
    return NULL;
}

void ddp_log(enum ddp_log_level level, const char *fmt, ...)
{
    static const char *const tag[] = {"error: ", "warning: ", "", "debug: "};
    static const enum ddp_colour colour[] = {DDP_COLOUR_RED, DDP_COLOUR_YELLOW, DDP_COLOUR_RESET, DDP_COLOUR_RESET};
    if ((int)level > ddp_log_verbosity)
        return;
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf so the line reaches stderr in one piece. */
    if (ddp_log_colour && colour[level] != DDP_COLOUR_RESET)
        fprintf(stderr, "ddplaunch: %s%s%s%s\n", ddp_colour(colour[level]), tag[level], ddp_colour(DDP_COLOUR_RESET),
                line);
    else
        fprintf(stderr, "ddplaunch: %s%s\n", tag[level], line);
}

const char *ddp_line_next(const char *text, char *buf, size_t size)
{
    const char *eol = strchr(text, '\n');
    size_t len = eol ? (size_t)(eol - text) : strlen(text);
    size_t n = len < size - 1 ? len : size - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    return eol ? eol + 1 : text + len;
}

size_t ddp_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *ddp_did_you_mean(const char *word, const char *const *candidates)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (; *candidates; candidates++) {
        size_t d = ddp_edit_distance(word, *candidates);
        if (d < best_d) {
            best_d = d;
            best = *candidates;
        }
    }
    size_t len = strlen(word);
    size_t limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    return best_d <= limit ? best : NULL;
}

int ddp_parse_int(const char *s, long long min, long long max, long long *out)
{
    if (!s || !*s)
        return -EINVAL;
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int ddp_parse_duration(const char *s, long long *ms_out, struct ddp_err *err)
{
    if (!s || !*s)
        return ddp_errf(err, -EINVAL, "expected a duration like 30s, 5m, 250ms or 1h, got an empty value");
    if (strcmp(s, "off") == 0 || strcmp(s, "none") == 0 || strcmp(s, "0") == 0) {
        *ms_out = 0;
        return 0;
    }
    char *end;
    errno = 0;
    /* plain decimal only: strtod would also take 0x10, 1e3, inf and nan */
    size_t num = strspn(s, "0123456789.");
    if (num == 0 || strspn(s, ".") == num || memchr(s, '.', num) != memrchr(s, '.', num))
        goto bad;
    double v = strtod(s, &end);
    if (end != s + num)
        goto bad;
    if (errno || end == s || !isfinite(v) || v < 0)
        goto bad;
    double mult;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mult = 60000;
    else if (strcmp(end, "h") == 0)
        mult = 3600000;
    else
        return ddp_errf(err, -EINVAL, "unknown duration unit '%s' in '%s' (expected ms, s, m or h)", end, s);
    double ms = v * mult;
    if (ms > 1e15)
        return ddp_errf(err, -ERANGE, "duration '%s' is too long", s);
    if (ms > 0 && ms < 0.5)
        return ddp_errf(err, -ERANGE, "duration '%s' is shorter than 1ms (0 or off turns it off)", s);
    *ms_out = (long long)(ms + 0.5);
    return 0;
bad:
    return ddp_errf(err, -EINVAL, "expected a duration like 30s, 5m, 250ms or 1h, got '%s'", s);
}

long long ddp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long ddp_now_ms(void)
{
    return ddp_now_ns() / 1000000;
}

void ddp_buf_add(struct ddp_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->data = ddp_xrealloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ddp_buf_puts(struct ddp_buf *b, const char *s)
{
    ddp_buf_add(b, s, strlen(s));
}

void ddp_buf_printf(struct ddp_buf *b, const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int rc = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (rc < 0)
        oom(0, __FILE__, __LINE__);
    ddp_buf_add(b, s, (size_t)rc);
    free(s);
}

static size_t utf8_len(const unsigned char *p, unsigned *cp);

void ddp_buf_json_str(struct ddp_buf *b, const char *s)
{
    if (!s) {
        ddp_buf_puts(b, "null");
        return;
    }
    ddp_buf_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            ddp_buf_puts(b, "\\\"");
            break;
        case '\\':
            ddp_buf_puts(b, "\\\\");
            break;
        case '\n':
            ddp_buf_puts(b, "\\n");
            break;
        case '\t':
            ddp_buf_puts(b, "\\t");
            break;
        case '\r':
            ddp_buf_puts(b, "\\r");
            break;
        default:
            if (*p < 0x20) {
                ddp_buf_printf(b, "\\u%04x", *p);
            } else if (*p < 0x80) {
                ddp_buf_add(b, (const char *)p, 1);
            } else { /* valid UTF-8 as it is; a byte that is not part of it as U+FFFD: the JSON stays valid */
                unsigned c = 0;
                size_t n = utf8_len(p, &c);
                if (n == 0)
                    ddp_buf_puts(b, "\\ufffd");
                else
                    ddp_buf_add(b, (const char *)p, n);
                p += n ? n - 1 : 0;
            }
        }
    }
    ddp_buf_add(b, "\"", 1);
}

void ddp_buf_free(struct ddp_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *ddp_time_iso(const struct timespec *ts, char buf[32])
{
    struct timespec now;
    struct tm tm;
    size_t n;
    if (!ts) {
        clock_gettime(CLOCK_REALTIME, &now);
        ts = &now;
    }
    time_t sec = ts->tv_sec;
    gmtime_r(&sec, &tm);
    n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 32 - n, ".%03dZ", (int)((ts->tv_nsec / 1000000) % 1000));
    return buf;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when p does not start one. */
static size_t utf8_len(const unsigned char *p, unsigned *cp)
{
    size_t n;
    unsigned c = p[0], min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, c &= 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, c &= 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, c &= 0x07, min = 0x10000;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

static bool unsafe_codepoint(unsigned c)
{
    return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0x61c || c == 0x200e || c == 0x200f ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

char *ddp_printable(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (p && *p) {
        unsigned c = 0;
        size_t n = utf8_len(p, &c);
        if (n == 0) {
            *p++ = '?';
            continue;
        }
        if (unsafe_codepoint(c))
            memset(p, '?', n);
        p += n;
    }
    return s;
}

size_t ddp_utf8_cut(const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t at = 0;
    while (p && p[at]) {
        unsigned c = 0;
        size_t n = utf8_len(p + at, &c);
        n = n ? n : 1;
        if (at + n > max)
            break;
        at += n;
    }
    return at;
}

char *ddp_text_copy(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return dst;
    size_t n = ddp_utf8_cut(src ? src : "", size - 1);
    memmove(dst, src ? src : "", n);
    dst[n] = '\0';
    return ddp_printable(dst);
}

int ddp_open_regular(int dirfd, const char *path)
{
    struct stat st;
    int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = S_ISREG(st.st_mode) ? -errno : -EINVAL;
        close(fd);
        return e;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

FILE *ddp_fopen_regular(const char *path)
{
    int fd = ddp_open_regular(AT_FDCWD, path);
    FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
    if (fd < 0)
        errno = -fd;
    else if (!f)
        close(fd);
    return f;
}

int ddp_read_regular(const char *path, size_t max, struct ddp_buf *b)
{
    char chunk[8192];
    size_t got = 0;
    ssize_t n = 0;
    int fd = ddp_open_regular(AT_FDCWD, path);
    if (fd < 0)
        return fd;
    while (got < max && ((n = read(fd, chunk, max - got < sizeof chunk ? max - got : sizeof chunk)) > 0 ||
                         (n < 0 && errno == EINTR))) {
        if (n > 0) {
            ddp_buf_add(b, chunk, (size_t)n);
            got += (size_t)n;
        }
    }
    int e = n < 0 ? -errno : 0;
    close(fd);
    return e;
}

unsigned long long ddp_nofile_need(int nproc)
{
    return 64 + 8ULL * (unsigned long long)(nproc > 0 ? nproc : 1);
}

int ddp_nofile_ensure(int nproc, struct ddp_err *err)
{
    unsigned long long need = ddp_nofile_need(nproc);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
        struct rlimit up = {.rlim_cur = need, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            return 0;
    }
    return ddp_errf(err, -EMFILE,
                    "open files limit %llu (hard %llu) is below the %llu the launcher needs for %d workers: raise "
                    "the hard limit (limits.conf, systemd LimitNOFILE=, docker --ulimit nofile=4096:4096), then "
                    "ulimit -n %llu",
                    (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, need, nproc, need);
}

char *ddp_path_normalize(const char *path)
{
    size_t len = strlen(path);
    bool abs = path[0] == '/';
    char *out = ddp_xmalloc(len + 2);
    size_t o = 0;
    size_t ups = 0; /* leading ".." kept in a relative path */
    if (abs)
        out[o++] = '/';
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        if (n == 1 && p[0] == '.') {
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            size_t base = abs ? 1 : 0;
            if (o > base + ups * 3) { /* drop the last component */
                while (o > base && out[o - 1] != '/')
                    o--;
                if (o > base)
                    o--;
            } else if (!abs) { /* a relative path that climbs: keep the ".." */
                if (o > 0)
                    out[o++] = '/';
                memcpy(out + o, "..", 2);
                o += 2;
                ups++;
            }
        } else {
            if (o > 0 && out[o - 1] != '/')
                out[o++] = '/';
            out = ddp_xrealloc(out, o + n + 2);
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    if (o == 0)
        out[o++] = '.';
    out[o] = '\0';
    return out;
}

bool ddp_ratelimit_allow(struct ddp_ratelimit *rl, long long now_ms, unsigned burst, long long interval_ms,
                         unsigned *dropped_out)
{
    *dropped_out = 0;
    if (rl->shown == 0 || now_ms - rl->start_ms >= interval_ms) {
        rl->start_ms = now_ms;
        rl->shown = 0;
    }
    if (rl->shown >= burst) {
        rl->dropped++;
        return false;
    }
    rl->shown++;
    *dropped_out = rl->dropped;
    rl->dropped = 0;
    return true;
}

ssize_t ddp_read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && got == 0)
            return -errno;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int ddp_write_full(int fd, const void *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, (const char *)buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        off += (size_t)w;
    }
    return 0;
}

int ddp_mkdir_p(const char *path, unsigned mode)
{
    char *p = ddp_xstrdup(path);
    int rc = 0;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/')
            continue;
        *q = '\0';
        if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST)
            rc = -errno;
        *q = '/';
    }
    if (rc == 0 && mkdir(p, (mode_t)mode) != 0 && errno != EEXIST)
        rc = -errno;
    free(p);
    return rc;
}

char ddp_proc_state(int pid)
{
    char path[64], buf[512], st;
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && sscanf(rp + 1, " %c", &st) == 1 ? st : 0;
}

bool ddp_proc_is_slurmstepd(int pid)
{
    char path[64], comm[32];
    if (pid <= 0)
        return false;
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, comm, sizeof(comm) - 1);
    close(fd);
    return n >= 10 && strncmp(comm, "slurmstepd", 10) == 0;
}
