/* report: see report.h. */
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const struct {
    int n;
    const char *name;
} signames[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
    {SIGPWR, "SIGPWR"},   {SIGSYS, "SIGSYS"},
};

const char *ddp_report_signame(int signo)
{
    static _Thread_local char buf[16];
    for (size_t i = 0; i < sizeof(signames) / sizeof(signames[0]); i++)
        if (signames[i].n == signo)
            return signames[i].name;
    snprintf(buf, sizeof(buf), "SIG%d", signo);
    return buf;
}

int ddp_report_signum(const char *name)
{
    long long n;
    if (ddp_parse_int(name, 1, 64, &n) == 0)
        return (int)n;
    if (strncasecmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < sizeof(signames) / sizeof(signames[0]); i++)
        if (strcasecmp(signames[i].name + 3, name) == 0)
            return signames[i].n;
    return -EINVAL;
}

/* A small JSON reader: enough to walk objects and read strings. p points into a NUL-terminated text. */
static const char *ws(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* Parse a string at p (at '"'); if out, store the decoded string (caller owns). Returns the position after it,
 * or NULL on error. */
static const char *jstring(const char *p, char **out)
{
    struct ddp_buf b = {0};
    if (*p != '"')
        return NULL;
    p++;
    while (*p && *p != '"') {
        if (*p == '\\') {
            p++;
            char c = *p;
            switch (c) {
            case 'n': ddp_buf_add(&b, "\n", 1); break;
            case 't': ddp_buf_add(&b, "\t", 1); break;
            case 'r': ddp_buf_add(&b, "\r", 1); break;
            case 'b': ddp_buf_add(&b, "\b", 1); break;
            case 'f': ddp_buf_add(&b, "\f", 1); break;
            case 'u': {
                unsigned v = 0;
                for (int i = 1; i <= 4; i++) {
                    if (!isxdigit((unsigned char)p[i])) {
                        ddp_buf_free(&b);
                        return NULL;
                    }
                    v = v * 16 + (unsigned)(isdigit((unsigned char)p[i]) ? p[i] - '0' : (tolower(p[i]) - 'a' + 10));
                }
                p += 4;
                char u[4];
                size_t n;
                if (v < 0x80) {
                    u[0] = (char)v;
                    n = 1;
                } else if (v < 0x800) {
                    u[0] = (char)(0xc0 | (v >> 6));
                    u[1] = (char)(0x80 | (v & 0x3f));
                    n = 2;
                } else {
                    u[0] = (char)(0xe0 | (v >> 12));
                    u[1] = (char)(0x80 | ((v >> 6) & 0x3f));
                    u[2] = (char)(0x80 | (v & 0x3f));
                    n = 3;
                }
                ddp_buf_add(&b, u, n);
                break;
            }
            case '\0': ddp_buf_free(&b); return NULL;
            default: ddp_buf_add(&b, &c, 1); break;
            }
            p++;
        } else {
            const char *q = p;
            while (*q && *q != '"' && *q != '\\')
                q++;
            ddp_buf_add(&b, p, (size_t)(q - p));
            p = q;
        }
    }
    if (*p != '"') {
        ddp_buf_free(&b);
        return NULL;
    }
    if (out)
        *out = b.data ? b.data : ddp_xstrdup("");
    else
        ddp_buf_free(&b);
    return p + 1;
}

static const char *jskip(const char *p, int depth)
{
    p = ws(p);
    if (depth > 64)
        return NULL;
    if (*p == '"')
        return jstring(p, NULL);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                p = jstring(ws(p), NULL);
                if (!p)
                    return NULL;
                p = ws(p);
                if (*p != ':')
                    return NULL;
                p++;
            }
            p = jskip(p, depth + 1);
            if (!p)
                return NULL;
            p = ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == close)
                return p + 1;
            return NULL;
        }
    }
    if (*p == '-' || isalnum((unsigned char)*p)) {
        while (*p == '-' || *p == '+' || *p == '.' || isalnum((unsigned char)*p))
            p++;
        return p;
    }
    return NULL;
}

/* In the object at p, find key; returns the position of its value or NULL. */
static const char *jfind(const char *p, const char *key)
{
    p = ws(p);
    if (*p != '{')
        return NULL;
    p = ws(p + 1);
    while (*p == '"') {
        char *k = NULL;
        p = jstring(p, &k);
        if (!p)
            return NULL;
        bool match = strcmp(k, key) == 0;
        free(k);
        p = ws(p);
        if (*p != ':')
            return NULL;
        p = ws(p + 1);
        if (match)
            return p;
        p = jskip(p, 0);
        if (!p)
            return NULL;
        p = ws(p);
        if (*p == ',')
            p = ws(p + 1);
    }
    return NULL;
}

int ddp_report_read_error_file(const char *path, char **message, char **traceback, long long *timestamp)
{
    struct ddp_buf b = {0};
    char chunk[8192];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    *message = *traceback = NULL;
    *timestamp = 0;
    if (fd < 0)
        return -errno;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0 && b.len < (16u << 20))
        ddp_buf_add(&b, chunk, (size_t)n);
    close(fd);
    if (!b.data) {
        return -EINVAL;
    }
    const char *m = jfind(b.data, "message");
    if (!m) {
        ddp_buf_free(&b);
        return -EINVAL;
    }
    if (*m == '"') {
        jstring(m, message);
    } else {
        const char *mm = jfind(m, "message");
        if (mm && *mm == '"')
            jstring(mm, message);
        const char *x = jfind(m, "extraInfo");
        if (x) {
            const char *cs = jfind(x, "py_callstack");
            if (cs && *cs == '"')
                jstring(cs, traceback);
            const char *ts = jfind(x, "timestamp");
            if (ts) {
                char *t = NULL;
                if (*ts == '"')
                    jstring(ts, &t);
                else
                    t = ddp_xstrndup(ts, 20);
                if (t)
                    *timestamp = strtoll(t, NULL, 10);
                free(t);
            }
        }
    }
    ddp_buf_free(&b);
    return *message || *traceback ? 0 : -EINVAL;
}

static void print_indented(FILE *f, const char *label, const char *text)
{
    const char *p = text;
    bool first = true;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(f, "  %-10s: %.*s\n", first ? label : "", (int)n, p);
        first = false;
        p += n;
        if (*p == '\n')
            p++;
    }
}

static void print_entry(FILE *f, int idx, const struct ddp_report_entry *e)
{
    char when[64] = "-";
    struct tm tm;
    char *msg = NULL, *tb = NULL;
    long long ts = 0;
    if (e->when && localtime_r(&e->when, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d_%H:%M:%S", &tm);
    fprintf(f, "[%d]:\n", idx);
    fprintf(f, "  %-10s: %s\n", "time", when);
    fprintf(f, "  %-10s: %s\n", "host", e->host ? e->host : "-");
    fprintf(f, "  %-10s: %d (local_rank: %d)\n", "rank", e->rank, e->local_rank);
    if (e->running)
        fprintf(f, "  %-10s: - (pid: %d) still running when the launcher stopped waiting\n", "exitcode", e->pid);
    else if (e->signo)
        fprintf(f, "  %-10s: -%d (pid: %d) %s\n", "exitcode", e->signo, e->pid, ddp_report_signame(e->signo));
    else
        fprintf(f, "  %-10s: %d (pid: %d)\n", "exitcode", e->exit_code, e->pid);
    if (e->reason)
        fprintf(f, "  %-10s: %s\n", "reason", e->reason);
    if (e->class_name)
        fprintf(f, "  %-10s: %s\n", "class", e->class_name);
    if (e->class_line)
        print_indented(f, "seen", e->class_line);
    if (e->hint && *e->hint)
        fprintf(f, "  %-10s: %s\n", "hint", e->hint);
    if (e->error_file && ddp_report_read_error_file(e->error_file, &msg, &tb, &ts) == 0) {
        fprintf(f, "  %-10s: %s\n", "error_file", e->error_file);
        if (msg)
            print_indented(f, "message", msg);
        if (tb)
            print_indented(f, "traceback", tb);
    } else {
        fprintf(f, "  %-10s: <N/A>\n", "error_file");
        if (e->ntail) {
            fprintf(f, "  %-10s: last %zu line%s of stderr:\n", "stderr", e->ntail, e->ntail == 1 ? "" : "s");
            for (size_t i = 0; i < e->ntail; i++)
                fprintf(f, "    %s\n", e->tail[i]);
        } else if (e->signo) {
            fprintf(f, "  %-10s: Signal %d (%s) received by PID %d\n", "traceback", e->signo,
                    ddp_report_signame(e->signo), e->pid);
        }
    }
    free(msg);
    free(tb);
}

void ddp_report_print(FILE *f, const char *title, const struct ddp_report_entry *root,
                      const struct ddp_report_entry *others, size_t nothers)
{
    static const char rule[] = "============================================================";
    static const char thin[] = "------------------------------------------------------------";
    fprintf(f, "%s\n%s\n%s\n", rule, title, thin);
    fprintf(f, "Failures:\n");
    if (nothers == 0)
        fprintf(f, "  <NO_OTHER_FAILURES>\n");
    for (size_t i = 0; i < nothers; i++)
        print_entry(f, (int)i + 1, &others[i]);
    fprintf(f, "%s\nRoot Cause (first observed failure):\n", thin);
    if (root)
        print_entry(f, 0, root);
    fprintf(f, "%s\n", rule);
    fflush(f);
}
