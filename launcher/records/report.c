/* report: see report.h. */
#include "records/report.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "records/jsonlog.h"

static const struct {
    int n;
    const char *name;
} signames[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},     {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
    {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},     {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
    {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},   {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
    {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"},   {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},     {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGVTALRM, "SIGVTALRM"},
    {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},   {SIGSYS, "SIGSYS"},
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

/* A string member of o, copied (caller owns), or NULL. */
static char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? ddp_xstrndup(json_string_value(v), json_string_length(v)) : NULL;
}

int ddp_report_parse_error_json(const char *text, size_t len, char **message, char **traceback, long long *timestamp)
{
    json_error_t jerr;
    json_t *o = json_loadb(text, len, 0, &jerr), *m, *x, *ts;
    *message = *traceback = NULL;
    *timestamp = 0;
    if (!json_is_object(o)) {
        json_decref(o);
        return -EINVAL;
    }
    m = json_object_get(o, "message");
    if (json_is_string(m)) {
        *message = jstr(o, "message");
    } else if (json_is_object(m)) {
        *message = jstr(m, "message");
        x = json_object_get(m, "extraInfo");
        if (json_is_object(x)) {
            *traceback = jstr(x, "py_callstack");
            ts = json_object_get(x, "timestamp");
            if (json_is_string(ts))
                *timestamp = strtoll(json_string_value(ts), NULL, 10);
            else if (json_is_integer(ts))
                *timestamp = (long long)json_integer_value(ts);
        }
    }
    json_decref(o);
    return *message || *traceback ? 0 : -EINVAL;
}

int ddp_report_read_error_file(const char *path, char **message, char **traceback, long long *timestamp)
{
    struct ddp_buf b = {0};
    int rc;
    *message = *traceback = NULL;
    *timestamp = 0;
    /* the worker wrote it: a regular file only (a FIFO or /dev/zero in its place must not block us), bounded */
    rc = ddp_read_regular(path, 16u << 20, &b);
    if (rc < 0 || !b.data) {
        ddp_buf_free(&b);
        return rc < 0 ? rc : -EINVAL;
    }
    rc = ddp_report_parse_error_json(b.data, b.len, message, traceback, timestamp);
    ddp_buf_free(&b);
    return rc;
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

/* Under --log-dir: where the rank's whole stderr is (beside its error file), when it is there. */
static void print_stderr_log(FILE *f, const struct ddp_report_entry *e)
{
    const char *slash = e->error_file && e->error_file_kept ? strrchr(e->error_file, '/') : NULL;
    if (!slash)
        return;
    char *log = ddp_xasprintf("%.*s/stderr.log", (int)(slash - e->error_file), e->error_file);
    if (access(log, F_OK) == 0)
        fprintf(f, "  %-10s: %s\n", "stderr_log", log);
    free(log);
}

/* Whether a and b kept the same stderr lines (both some). */
static bool same_tail(const struct ddp_report_entry *a, const struct ddp_report_entry *b)
{
    if (!a || !b || a->ntail == 0 || a->ntail != b->ntail)
        return false;
    for (size_t i = 0; i < a->ntail; i++)
        if (strcmp(a->tail[i], b->tail[i]) != 0)
            return false;
    return true;
}

/* same: an entry printed in full whose stderr lines e repeats (two ranks failing alike print them once), or NULL. */
static void print_entry(FILE *f, int idx, const struct ddp_report_entry *e, const struct ddp_report_entry *same)
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
    else if (e->signo && e->captured)
        fprintf(f, "  %-10s: -%d (pid: %d) %s: stopped by ddplaunch for the stack capture\n", "exitcode", e->signo,
                e->pid, ddp_report_signame(e->signo));
    else if (e->signo)
        fprintf(f, "  %-10s: -%d (pid: %d) %s\n", "exitcode", e->signo, e->pid, ddp_report_signame(e->signo));
    else
        fprintf(f, "  %-10s: %d (pid: %d)\n", "exitcode", e->exit_code, e->pid);
    if (e->cause)
        fprintf(f, "  %-10s: %s\n", "cause", e->cause);
    if (e->reason)
        fprintf(f, "  %-10s: %s\n", "reason", e->reason);
    if (e->class_name)
        fprintf(f, "  %-10s: %s\n", "class", e->class_name);
    if (e->class_line)
        print_indented(f, "seen", e->class_line);
    if (e->hint && *e->hint)
        fprintf(f, "  %-10s: %s\n", "hint", e->hint);
    if (e->error_file && ddp_report_read_error_file(e->error_file, &msg, &tb, &ts) == 0) {
        if (e->error_file_kept)
            fprintf(f, "  %-10s: %s\n", "error_file", e->error_file);
        else
            fprintf(f, "  %-10s: <N/A> (not kept without --log-dir)\n", "error_file");
        if (msg)
            print_indented(f, "message", msg);
        if (tb)
            print_indented(f, "traceback", tb);
    } else {
        fprintf(f, "  %-10s: <N/A>\n", "error_file");
        size_t ntail = e->ntail;
        /* the capture's own dump (faulthandler's, from "Fatal Python error") is in the verdict's stacks: held
         * back from the tail (output.h), or cut here from a tail recorded before it was */
        if (e->captured)
            for (size_t i = 0; i < e->ntail; i++)
                if (strncmp(e->tail[i], "Fatal Python error: Aborted", 27) == 0) {
                    ntail = i;
                    break;
                }
        if (e->captured && ntail == 0) {
            fprintf(f, "  %-10s: only the stack capture's dump (see the Hang verdict's stacks)\n", "stderr");
        } else if (ntail < e->ntail) {
            fprintf(f, "  %-10s: last %zu line%s of stderr before the stack capture:\n", "stderr", ntail,
                    ntail == 1 ? "" : "s");
            for (size_t i = 0; i < ntail; i++)
                fprintf(f, "    %s\n", e->tail[i]);
        } else if (e->ntail && same) {
            fprintf(f, "  %-10s: last %zu line%s of stderr: the same as rank %d's\n", "stderr", e->ntail,
                    e->ntail == 1 ? "" : "s", same->rank);
        } else if (e->ntail) {
            fprintf(f, "  %-10s: last %zu line%s of stderr:\n", "stderr", e->ntail, e->ntail == 1 ? "" : "s");
            for (size_t i = 0; i < e->ntail; i++)
                fprintf(f, "    %s\n", e->tail[i]);
        } else if (e->signo) {
            fprintf(f, "  %-10s: Signal %d (%s) received by PID %d\n", "traceback", e->signo,
                    ddp_report_signame(e->signo), e->pid);
        }
    }
    print_stderr_log(f, e);
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
    /* the root cause is printed in full (below); a failure that repeats its stderr, or an earlier one's, says so */
    for (size_t i = 0; i < nothers; i++) {
        const struct ddp_report_entry *same = same_tail(&others[i], root) ? root : NULL;
        for (size_t j = 0; j < i && !same; j++)
            if (!same_tail(&others[j], root) && same_tail(&others[i], &others[j]))
                same = &others[j];
        print_entry(f, (int)i + 1, &others[i], same);
    }
    fprintf(f, "%s\nRoot Cause (first observed failure):\n", thin);
    if (root)
        print_entry(f, 0, root, NULL);
    fprintf(f, "%s\n", rule);
    fflush(f);
}

/* Worker text (a seen line, a message, a stderr line) may hold invalid UTF-8: never a NULL that drops the key. */
static json_t *str_or_null(const char *v)
{
    return ddp_jsonlog_text(v);
}

json_t *ddp_report_entry_json(const struct ddp_report_entry *e)
{
    char *msg = NULL, *tb = NULL;
    long long ts = 0;
    char when[32];
    struct timespec t = {.tv_sec = e->when};
    json_t *o = json_object(), *tail = json_array();
    json_object_set_new(o, "rank", json_integer(e->rank));
    json_object_set_new(o, "local_rank", json_integer(e->local_rank));
    json_object_set_new(o, "host", str_or_null(e->host));
    json_object_set_new(o, "pid", json_integer(e->pid));
    json_object_set_new(o, "time", e->when ? json_string(ddp_time_iso(&t, when)) : json_null());
    json_object_set_new(o, "running", json_boolean(e->running));
    json_object_set_new(o, "exit_code", e->running || e->signo ? json_null() : json_integer(e->exit_code));
    json_object_set_new(o, "signal", !e->running && e->signo ? json_string(ddp_report_signame(e->signo)) : json_null());
    json_object_set_new(o, "class", str_or_null(e->class_name));
    json_object_set_new(o, "seen", str_or_null(e->class_line));
    json_object_set_new(o, "reason", str_or_null(e->reason));
    if (e->cause)
        json_object_set_new(o, "cause", ddp_jsonlog_text(e->cause));
    json_object_set_new(o, "hint", e->hint && *e->hint ? ddp_jsonlog_text(e->hint) : json_null());
    /* named only where it stays and is: the run directory goes at exit, torch writes none for a crash */
    json_object_set_new(
        o, "error_file",
        str_or_null(e->error_file_kept && e->error_file && access(e->error_file, F_OK) == 0 ? e->error_file : NULL));
    if (e->error_file && ddp_report_read_error_file(e->error_file, &msg, &tb, &ts) == 0) {
        json_object_set_new(o, "message", str_or_null(msg));
        json_object_set_new(o, "traceback", str_or_null(tb));
    } else {
        json_object_set_new(o, "message", json_null());
        json_object_set_new(o, "traceback", json_null());
    }
    free(msg);
    free(tb);
    for (size_t i = 0; i < e->ntail; i++)
        json_array_append_new(tail, ddp_jsonlog_text(e->tail[i]));
    json_object_set_new(o, "stderr_tail", tail);
    return o;
}
