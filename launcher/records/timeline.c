/* timeline: see timeline.h. */
#include "records/timeline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/exit.h"

struct tl_rank {
    int attempt, rank, local_rank, gpu;
    double start, end, last_out; /* seconds from the job start; -1 unknown */
    char cls[48], ended[48], frame[256];
    bool culprit;
    bool root;        /* the attempt's root cause (first observed failure), when no hang culprit names one */
    bool no_root;     /* the launcher said its attempt has none (stopped by a signal): no guess from the order */
    bool stopped;     /* ddplaunch stopped it (worker_exit "stopped"): grey, whatever its exit code */
    double straggler; /* its share of the waiting (0..1) when named a straggler, else -1 */
};

struct tl_mark {
    int attempt;
    double t;
    char kind[16];
    char text[1200];
};

struct ddp_timeline {
    char job[128], host[128], result[32], last_ts[40];
    int exit_status, nattempts;
    int pid;     /* the launcher's (job_start), -1 unknown */
    bool killed; /* no job_end and its launcher is gone (SIGKILL: Slurm's KillWait, the OOM killer) */
    double end;
    struct tl_rank *r;
    size_t nr;
    struct tl_mark *m;
    size_t nm;
};

/* "2026-12-01T01:08:54.123Z" -> seconds since the epoch; -1 when it is not one. */
static double iso_seconds(const char *s)
{
    struct tm tm = {0};
    int ms = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + ms / 1000.0;
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static int jint(const json_t *o, const char *k, int dflt)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static struct tl_rank *find_rank(struct ddp_timeline *t, int attempt, int rank)
{
    for (size_t i = 0; i < t->nr; i++)
        if (t->r[i].attempt == attempt && t->r[i].rank == rank)
            return &t->r[i];
    return NULL;
}

static struct tl_mark *add_mark(struct ddp_timeline *t, int attempt, double at, const char *kind)
{
    t->m = ddp_xrealloc(t->m, (t->nm + 1) * sizeof(*t->m));
    struct tl_mark *m = &t->m[t->nm++];
    memset(m, 0, sizeof(*m));
    m->attempt = attempt;
    m->t = at;
    snprintf(m->kind, sizeof(m->kind), "%s", kind);
    return m;
}

/* attempt_start: one bar per worker, from its start. */
static void add_attempt(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    size_t j;
    const json_t *w;
    t->nattempts++;
    json_array_foreach(json_object_get(e, "workers"), j, w)
    {
        t->r = ddp_xrealloc(t->r, (t->nr + 1) * sizeof(*t->r));
        t->r[t->nr++] = (struct tl_rank){.attempt = attempt,
                                         .rank = jint(w, "rank", -1),
                                         .local_rank = jint(w, "local_rank", -1),
                                         .gpu = jint(w, "gpu", -1),
                                         .start = at,
                                         .end = -1,
                                         .last_out = -1,
                                         .straggler = -1};
    }
}

/* Mark rank as its attempt's root cause unless the attempt has one (or a hang culprit) already; the launcher's
 * word (decision's root_rank) replaces a guess from the order of the events. */
static void mark_root(struct ddp_timeline *t, int attempt, int rank, bool sure)
{
    struct tl_rank *r = find_rank(t, attempt, rank);
    for (size_t i = 0; i < t->nr; i++) {
        if (t->r[i].attempt != attempt)
            continue;
        if (t->r[i].culprit || (t->r[i].root && !sure) || (t->r[i].no_root && !sure))
            return;
        t->r[i].root = false;
    }
    if (r)
        r->root = true;
}

/* worker_exit: the bar's end, class and how it ended; the first failure of an attempt is its root cause. */
static void end_rank(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    struct tl_rank *r = find_rank(t, attempt, jint(e, "rank", -1));
    if (!r)
        return;
    r->end = at;
    ddp_text_copy(r->cls, sizeof(r->cls), jstr(e, "class"));
    if (json_is_string(json_object_get(e, "signal")))
        ddp_text_copy(r->ended, sizeof(r->ended), jstr(e, "signal"));
    else
        snprintf(r->ended, sizeof(r->ended), "exit %d", jint(e, "exit_code", -1));
    r->stopped = json_is_true(json_object_get(e, "stopped"));
    if (strcmp(r->cls, "ok") != 0 && !r->stopped)
        mark_root(t, attempt, r->rank, false);
}

/* A decision with "root_rank": null (a stop by signal, a timeout of no one rank): the attempt has no root
 * cause, as summary.json's root_cause says; the order of the exits guesses none. */
static void clear_root(struct ddp_timeline *t, int attempt)
{
    for (size_t i = 0; i < t->nr; i++)
        if (t->r[i].attempt == attempt) {
            t->r[i].root = false;
            t->r[i].no_root = true;
        }
}

/* hang: a mark with the verdict, and the culprits' bars flagged with their frame. */
static void mark_hang(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    size_t j;
    const json_t *c;
    struct tl_mark *m = add_mark(t, attempt, at, "hang");
    snprintf(m->text, sizeof(m->text), "verdict (%s confidence): %s%s%s", jstr(e, "confidence"),
             *jstr(e, "state_text") ? jstr(e, "state_text") : "", *jstr(e, "state_text") ? "; " : "", jstr(e, "why"));
    json_array_foreach(json_object_get(e, "culprits"), j, c)
    {
        for (size_t i = 0; i < t->nr; i++) /* the culprit is the root cause */
            if (t->r[i].attempt == attempt)
                t->r[i].root = false;
        struct tl_rank *r = find_rank(t, attempt, jint(c, "rank", -1));
        if (r) {
            r->culprit = true;
            ddp_text_copy(r->frame, sizeof(r->frame), jstr(c, "frame"));
        }
    }
}

/* mismatch: a mark with what differed at a collective failure; the ranks whose values differ are its culprits. */
static void mark_mismatch(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    struct tl_mark *m = add_mark(t, attempt, at, "mismatch");
    snprintf(m->text, sizeof(m->text), "collective mismatch at rank %d's failure: %s", jint(e, "failed_rank", -1),
             jstr(e, "why"));
    for (const char *p = jstr(e, "culprits"); *p;) { /* "1, 3" */
        char *end;
        long rank = strtol(p, &end, 10);
        if (end == p)
            break;
        for (size_t i = 0; i < t->nr; i++) /* the culprit is the root cause */
            if (t->r[i].attempt == attempt)
                t->r[i].root = false;
        struct tl_rank *r = find_rank(t, attempt, (int)rank);
        if (r)
            r->culprit = true;
        p = end + strspn(end, ", ");
    }
}

/* suspect: a mark naming the ranks the others waited for (the job ran on). */
static void mark_suspect(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    size_t j, len = 0;
    const json_t *c;
    struct tl_mark *m = add_mark(t, attempt, at, "suspect");
    len += (size_t)snprintf(m->text, sizeof(m->text), "suspected hang after %llds without progress%s%s",
                            (long long)json_integer_value(json_object_get(e, "quiet_ms")) / 1000,
                            *jstr(e, "state_text") ? ": " : "", jstr(e, "state_text"));
    json_array_foreach(json_object_get(e, "culprits"), j, c) if (len < sizeof(m->text)) len += (size_t)snprintf(
        m->text + len, sizeof(m->text) - len, "%s rank %d at %s", j ? ";" : ":", jint(c, "rank", -1), jstr(c, "frame"));
    const json_t *fr = json_object_get(e, "recorder"), *reached = json_object_get(e, "reached"), *groups;
    const char *pg = json_is_object(fr) ? jstr(fr, "pg") : NULL, *key;
    if (json_object_size(reached) && len < sizeof(m->text)) /* the collective each rank reached (flight recorder) */
        len += (size_t)snprintf(m->text + len, sizeof(m->text) - len, "; reached");
    json_object_foreach((json_t *)reached, key, groups)
    {
        const json_t *g;
        json_array_foreach(groups, j, g) if ((!pg || strcmp(jstr(g, "pg"), pg) == 0) && len < sizeof(m->text))
        {
            len += (size_t)snprintf(m->text + len, sizeof(m->text) - len, " rank %s #%lld (pg %s)", key,
                                    (long long)json_integer_value(json_object_get(g, "last_enqueued")), jstr(g, "pg"));
            break;
        }
    }
    json_array_foreach(json_object_get(fr, "chain"), j, c) if (len < sizeof(m->text)) /* who waits for whom */
        len += (size_t)snprintf(m->text + len, sizeof(m->text) - len, "%s %s -> group %s #%lld -> %s",
                                j ? ";" : "; chain (waiting -> in -> for):", jstr(c, "waiting"), jstr(c, "group"),
                                (long long)json_integer_value(json_object_get(c, "seq")), jstr(c, "on"));
    if (len < sizeof(m->text))
        snprintf(m->text + len, sizeof(m->text) - len, " (%s)", jstr(e, "action"));
}

/* stragglers: a mark, and the rank's bar labelled with its share of the waiting. */
static void mark_straggler(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    struct tl_rank *r = find_rank(t, attempt, jint(e, "rank", -1));
    double share = json_number_value(json_object_get(e, "share"));
    struct tl_mark *m = add_mark(t, attempt, at, "straggler");
    snprintf(m->text, sizeof(m->text), "rank %d made the others wait (%.0f%% of the waiting)%s%s", jint(e, "rank", -1),
             100 * share, jstr(e, "frame")[0] ? ", at " : "", jstr(e, "frame"));
    if (r)
        r->straggler = share;
}

/* recovery: how long from the hang's beginning until the job trained again, and each step between. */
static void mark_recovery(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    struct tl_mark *m = add_mark(t, attempt, at, "recovery");
    const json_t *named = json_object_get(e, "named_after_ms"), *stopped = json_object_get(e, "stopped_after_ms"),
                 *training = json_object_get(e, "training_after_ms");
    size_t len = 0;
    if (json_is_integer(training))
        len = (size_t)snprintf(m->text, sizeof(m->text), "hang -> training again in %.0f s",
                               (double)json_integer_value(training) / 1000.0);
    else
        len = (size_t)snprintf(m->text, sizeof(m->text), "hang of attempt %d: not training again",
                               jint(e, "attempt", -1));
    if (json_is_integer(named) && len < sizeof(m->text))
        len += (size_t)snprintf(m->text + len, sizeof(m->text) - len, " (named after %.0f s",
                                (double)json_integer_value(named) / 1000.0);
    if (json_is_integer(named) && json_is_integer(stopped) && len < sizeof(m->text))
        len += (size_t)snprintf(m->text + len, sizeof(m->text) - len, ", stopped after %.0f s",
                                (double)json_integer_value(stopped) / 1000.0);
    if (json_is_integer(named) && len < sizeof(m->text))
        len += (size_t)snprintf(m->text + len, sizeof(m->text) - len, ")");
    if (*jstr(e, "text") && len < sizeof(m->text))
        snprintf(m->text + len, sizeof(m->text) - len, ": %s", jstr(e, "text"));
}

/* timeout: its reason, the rank it names as the root, and (*iso)[attempt], the attempt's first timeout's time (the
 * last output is taken before it; *n of them). */
static void mark_timeout(struct ddp_timeline *t, const json_t *e, int attempt, double at, char ***iso, int *n)
{
    snprintf(add_mark(t, attempt, at, "timeout")->text, sizeof(t->m[0].text), "%s", jstr(e, "reason"));
    if (json_is_integer(json_object_get(e, "rank")))
        mark_root(t, attempt, jint(e, "rank", -1), false);
    if (attempt >= 0 && attempt < 1000 && attempt >= *n) {
        *iso = ddp_xrealloc(*iso, (size_t)(attempt + 1) * sizeof(**iso));
        for (int k = *n; k <= attempt; k++)
            (*iso)[k] = NULL;
        *n = attempt + 1;
    }
    if (attempt >= 0 && attempt < *n && !(*iso)[attempt])
        (*iso)[attempt] = ddp_xstrdup(jstr(e, "ts"));
}

/* decision: the action and why (or with which status), and the root rank it names or clears. */
static void mark_decision(struct ddp_timeline *t, const json_t *e, int attempt, double at)
{
    struct tl_mark *m = add_mark(t, attempt, at, "decision");
    if (json_is_integer(json_object_get(e, "root_rank")))
        mark_root(t, attempt, jint(e, "root_rank", -1), true);
    else if (json_is_null(json_object_get(e, "root_rank")))
        clear_root(t, attempt);
    if (*jstr(e, "why"))
        snprintf(m->text, sizeof(m->text), "%s: %s", jstr(e, "action"), jstr(e, "why"));
    else if (json_is_integer(json_object_get(e, "exit_status")))
        snprintf(m->text, sizeof(m->text), "%s with status %d", jstr(e, "action"), jint(e, "exit_status", -1));
    else
        ddp_text_copy(m->text, sizeof(m->text), jstr(e, "action"));
}

/* The texts of t came from others (job names, frames, verdicts naming recorder strings) and were cut to their
 * buffers, maybe mid-character: each is made printable, a cut character shown as '?', so that the terminal
 * obeys no escape and the SVG stays well-formed XML. */
static void made_safe(struct ddp_timeline *t)
{
    ddp_printable(t->job);
    ddp_printable(t->host);
    ddp_printable(t->result);
    for (size_t i = 0; i < t->nr; i++) {
        ddp_printable(t->r[i].cls);
        ddp_printable(t->r[i].ended);
        ddp_printable(t->r[i].frame);
    }
    for (size_t i = 0; i < t->nm; i++) {
        ddp_printable(t->m[i].kind);
        ddp_printable(t->m[i].text);
    }
}

int ddp_timeline_build(const json_t *events, ddp_last_output_fn *last_output, void *arg, struct ddp_timeline **out,
                       struct ddp_err *err)
{
    struct ddp_timeline *t = ddp_xcalloc(1, sizeof(*t));
    double t0 = -1;
    size_t i;
    const json_t *e;
    char **timeout_iso = NULL; /* per attempt: the first timeout's time (last output is taken before it) */
    int ntimeout_iso = 0;
    t->exit_status = -1;
    t->pid = -1;
    json_array_foreach(events, i, e)
    {
        const char *ev = jstr(e, "event");
        double at = iso_seconds(jstr(e, "ts"));
        if (at >= 0)
            ddp_text_copy(t->last_ts, sizeof(t->last_ts), jstr(e, "ts"));
        if (strcmp(ev, "job_start") == 0) {
            t0 = at;
            t->pid = jint(e, "pid", -1);
            ddp_text_copy(t->job, sizeof(t->job), jstr(e, "job"));
            ddp_text_copy(t->host, sizeof(t->host), jstr(e, "host"));
            continue;
        }
        if (t0 < 0 || at < 0)
            continue;
        at -= t0;
        int attempt = jint(e, "attempt", -1);
        if (at > t->end)
            t->end = at;
        if (strcmp(ev, "attempt_start") == 0) {
            add_attempt(t, e, attempt, at);
        } else if (strcmp(ev, "worker_exit") == 0) {
            end_rank(t, e, attempt, at);
        } else if (strcmp(ev, "timeout") == 0) {
            mark_timeout(t, e, attempt, at, &timeout_iso, &ntimeout_iso);
        } else if (strcmp(ev, "hang") == 0) {
            mark_hang(t, e, attempt, at);
        } else if (strcmp(ev, "suspect") == 0) {
            mark_suspect(t, e, attempt, at);
        } else if (strcmp(ev, "mismatch") == 0) {
            mark_mismatch(t, e, attempt, at);
        } else if (strcmp(ev, "signal") == 0) {
            snprintf(add_mark(t, attempt, at, "signal")->text, sizeof(t->m[0].text), "got %s%s: %s", jstr(e, "signal"),
                     json_is_true(json_object_get(e, "from_slurm")) ? " from Slurm" : "", jstr(e, "action"));
        } else if (strcmp(ev, "suspect_end") == 0) {
            snprintf(add_mark(t, attempt, at, "progress")->text, sizeof(t->m[0].text),
                     "progress again after about %llds",
                     (long long)json_integer_value(json_object_get(e, "quiet_ms")) / 1000);
        } else if (strcmp(ev, "stragglers") == 0) {
            mark_straggler(t, e, attempt, at);
        } else if (strcmp(ev, "recovery") == 0) {
            mark_recovery(t, e, attempt, at);
        } else if (strcmp(ev, "works_alone") == 0) {
            snprintf(add_mark(t, attempt, at, "works alone")->text, sizeof(t->m[0].text), "%s", jstr(e, "text"));
        } else if (strcmp(ev, "decision") == 0) {
            mark_decision(t, e, attempt, at);
        } else if (strcmp(ev, "node_join") == 0 || strcmp(ev, "node_lost") == 0) {
            struct tl_mark *m = add_mark(t, attempt, at, ev[5] == 'j' ? "node" : "node-lost");
            snprintf(m->text, sizeof(m->text), "node %d %s %s", jint(e, "node", -1),
                     ev[5] == 'j' ? "joined" : "lost:", jstr(e, "reason"));
        } else if (strncmp(ev, "gpu_", 4) == 0 && *jstr(e, "text")) { /* gpu_event, gpu_left_out, gpu_cause */
            snprintf(add_mark(t, attempt, at, "gpu")->text, sizeof(t->m[0].text), "%s", jstr(e, "text"));
        } else if (strcmp(ev, "job_end") == 0) {
            t->exit_status = jint(e, "exit_status", -1);
            ddp_text_copy(t->result, sizeof(t->result), jstr(e, "result"));
        }
    }
    if (t0 < 0) {
        ddp_timeline_free(t);
        for (int k = 0; k < ntimeout_iso; k++)
            free(timeout_iso[k]);
        free(timeout_iso);
        return ddp_errf(err, -EINVAL, "no job_start event: not a ddplaunch run record");
    }
    for (i = 0; i < t->nr && last_output; i++) {
        struct tl_rank *r = &t->r[i];
        const char *before = r->attempt >= 0 && r->attempt < ntimeout_iso ? timeout_iso[r->attempt] : NULL;
        double lo = iso_seconds(last_output(arg, r->attempt, r->local_rank, before));
        if (lo >= 0)
            r->last_out = lo - t0;
    }
    for (int k = 0; k < ntimeout_iso; k++)
        free(timeout_iso[k]);
    free(timeout_iso);
    made_safe(t);
    *out = t;
    return 0;
}

void ddp_timeline_free(struct ddp_timeline *t)
{
    if (!t)
        return;
    free(t->r);
    free(t->m);
    free(t);
}

void ddp_timeline_launcher_gone(struct ddp_timeline *t, bool gone)
{
    if (t->result[0] || !gone)
        return;
    t->killed = true;
    ddp_text_copy(t->result, sizeof(t->result), "launcher-killed");
}

int ddp_timeline_pid(const struct ddp_timeline *t, const char **host)
{
    *host = t->host;
    return t->result[0] ? -1 : t->pid;
}

void ddp_timeline_print(FILE *f, const struct ddp_timeline *t)
{
    if (t->exit_status < 0)
        fprintf(f, "job %s on %s: %s, no exit status, %d attempt%s, %.1f s\n", t->job[0] ? t->job : "-", t->host,
                t->result[0] ? t->result : "still running", t->nattempts, t->nattempts == 1 ? "" : "s", t->end);
    else
        fprintf(f, "job %s on %s: %s, exit status %d, %d attempt%s, %.1f s\n", t->job[0] ? t->job : "-", t->host,
                t->result[0] ? t->result : "still running", t->exit_status, t->nattempts, t->nattempts == 1 ? "" : "s",
                t->end);
    if (t->killed)
        fprintf(f,
                "the launcher (pid %d) is gone without a summary: killed (SIGKILL: Slurm's KillWait, the OOM "
                "killer, a lost node) after its last record, %s (+%.1f s); its workers ended with it\n",
                t->pid, t->last_ts, t->end);
    for (int a = 0; a < t->nattempts; a++) {
        fprintf(f, "attempt %d\n", a);
        fprintf(f, "  %-6s %-9s %-12s %-9s %s\n", "rank", "start", "last output", "end", "how it ended");
        for (size_t i = 0; i < t->nr; i++) {
            const struct tl_rank *r = &t->r[i];
            char lo[32] = "-", end[32] = "-", start[32];
            if (r->attempt != a)
                continue;
            snprintf(start, sizeof(start), "+%.3fs", r->start); /* seconds, as every other time here */
            if (r->last_out >= 0)
                snprintf(lo, sizeof(lo), "+%.3fs", r->last_out);
            if (r->end >= 0)
                snprintf(end, sizeof(end), "+%.3fs", r->end);
            fprintf(f, "  %-6d %-9s %-12s %-9s %s%s%s%s%s\n", r->rank, start, lo, end,
                    r->end >= 0 ? r->cls
                    : t->killed ? "unknown"
                                : "running",
                    r->end >= 0 ? " (" : "", r->end >= 0 ? r->ended : "", r->end >= 0 ? ")" : "",
                    r->culprit ? "  CULPRIT"
                    : r->root  ? "  ROOT CAUSE"
                               : "");
            if (r->straggler >= 0)
                fprintf(f, "         straggler: %.0f%% of the waiting\n", 100 * r->straggler);
            if (r->culprit && r->frame[0])
                fprintf(f, "         at %s\n", r->frame);
        }
        for (size_t i = 0; i < t->nm; i++)
            if (t->m[i].attempt == a)
                fprintf(f, "  +%.3fs %s: %s\n", t->m[i].t, t->m[i].kind, t->m[i].text);
    }
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

static const char *bar_colour(const struct tl_rank *r)
{
    if (r->culprit)
        return "#d32f2f"; /* the hang's culprit */
    if (r->root)
        return "#e65100"; /* the attempt's first failure */
    if (r->end < 0)
        return "#1976d2"; /* still running */
    if (strcmp(r->cls, "ok") == 0)
        return "#2e7d32";
    if (r->stopped || strcmp(r->cls, "signal") == 0 || strcmp(r->cls, "abort") == 0)
        return "#9e9e9e"; /* stopped by the launcher (SIGTERM/SIGKILL, SIGABRT for its stack) */
    return "#f9a825";     /* failed or timed out on its own */
}

/* Where things go in the SVG: the plot's left edge and width in pixels, the lane height, the axis length (s). */
struct svg_geo {
    int left, width, lane, plot;
    double axis;
};

static int gx(const struct svg_geo *g, double sec)
{
    return g->left + (int)(sec / g->axis * g->plot);
}

/* One rank's lane at y: its label, its bar (colour by how it ended, a tooltip), last output, end label. */
static void draw_rank(FILE *f, const struct svg_geo *g, const struct tl_rank *r, int a, int y, double job_end)
{
    double end = r->end >= 0 ? r->end : job_end;
    int x0 = gx(g, r->start), x1 = gx(g, end);
    fprintf(f, "<text x=\"20\" y=\"%d\">rank %d%s</text>\n", y + 16, r->rank,
            r->culprit          ? " (culprit)"
            : r->root           ? " (root cause)"
            : r->straggler >= 0 ? " (straggler)"
                                : "");
    if (r->straggler >= 0) /* an orange outline: the others waited for it */
        fprintf(f,
                "<rect class=\"straggler\" data-rank=\"%d\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                "fill=\"none\" stroke=\"#ef6c00\" stroke-width=\"3\" rx=\"3\"><title>straggler: %.0f%% of the "
                "waiting</title></rect>\n",
                r->rank, x0 - 2, y + 2, (x1 - x0 > 1 ? x1 - x0 : 1) + 4, g->lane - 4, 100 * r->straggler);
    fprintf(f,
            "<rect class=\"rank\" data-rank=\"%d\" data-attempt=\"%d\" x=\"%d\" y=\"%d\" width=\"%d\" "
            "height=\"%d\" fill=\"%s\" rx=\"3\"><title>rank %d: ",
            r->rank, a, x0, y + 4, x1 - x0 > 1 ? x1 - x0 : 1, g->lane - 8, bar_colour(r), r->rank);
    xml_text(f, r->end >= 0 ? r->cls : "running");
    fprintf(f, " ");
    xml_text(f, r->ended);
    if (r->frame[0]) {
        fprintf(f, " at ");
        xml_text(f, r->frame);
    }
    fprintf(f, "</title></rect>\n");
    if (r->last_out >= 0)
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\" stroke-width=\"2\"/>\n",
                gx(g, r->last_out), y + 2, gx(g, r->last_out), y + g->lane - 2);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">", x1 + 4 < g->width - 230 ? x1 + 4 : g->width - 230, y + 16);
    xml_text(f, r->culprit && r->frame[0] ? r->frame : r->end >= 0 ? r->ended : "");
    if (r->straggler >= 0)
        fprintf(f, " straggler (%.0f%% of the waiting)", 100 * r->straggler);
    fprintf(f, "</text>\n");
}

void ddp_timeline_svg(FILE *f, const struct ddp_timeline *t)
{
    const int left = 170, width = 1180, lane = 24, top = 60;
    const int plot = width - left - 240;
    int lanes = 0;
    for (int a = 0; a < t->nattempts; a++) {
        lanes++; /* the attempt's title row */
        for (size_t i = 0; i < t->nr; i++)
            lanes += t->r[i].attempt == a;
    }
    int height = top + lanes * lane + 8 + 36 + (int)t->nm * 15 + 10;
    double span = t->end > 0 ? t->end : 1;
    /* round the axis up to a tidy number of seconds */
    double step = span <= 5 ? 1 : span <= 20 ? 2 : span <= 60 ? 10 : span <= 300 ? 30 : 60;
    double axis = step;
    while (axis < span)
        axis += step;
    const struct svg_geo g = {left, width, lane, plot, axis};
#define X(sec) gx(&g, (sec))
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n",
            width, height, width, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    fprintf(f, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">");
    xml_text(f, t->job[0] ? t->job : "job");
    fprintf(f, " on ");
    xml_text(f, t->host);
    if (t->exit_status < 0)
        fprintf(f, ": %s, no exit status, %d attempt%s</text>\n", t->result[0] ? t->result : "running", t->nattempts,
                t->nattempts == 1 ? "" : "s");
    else
        fprintf(f, ": %s, exit status %d, %d attempt%s</text>\n", t->result[0] ? t->result : "running", t->exit_status,
                t->nattempts, t->nattempts == 1 ? "" : "s");
    /* axis */
    int axis_y = top + lanes * lane + 8;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", left, axis_y, X(axis), axis_y);
    for (double s = 0; s <= axis + 1e-9; s += step) {
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#e0e0e0\"/>\n", X(s), top - 6, X(s), axis_y);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%gs</text>\n", X(s), axis_y + 16, s);
    }
    int y = top;
    for (int a = 0; a < t->nattempts; a++) {
        fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">attempt %d</text>\n", y + 16, a);
        y += lane;
        for (size_t i = 0; i < t->nr; i++) {
            const struct tl_rank *r = &t->r[i];
            if (r->attempt != a)
                continue;
            draw_rank(f, &g, r, a, y, t->end);
            y += lane;
        }
    }
    /* legend */
    static const char *const legend[][2] = {
        {"#2e7d32", "succeeded"},  {"#f9a825", "failed or timed out"}, {"#9e9e9e", "stopped by ddplaunch"},
        {"#e65100", "root cause"}, {"#d32f2f", "hang culprit"},        {"#1976d2", "running"}};
    for (int i = 0; i < 6; i++) {
        fprintf(f, "<rect x=\"%d\" y=\"34\" width=\"12\" height=\"12\" fill=\"%s\"/>", 10 + i * 160, legend[i][0]);
        fprintf(f, "<text x=\"%d\" y=\"45\">%s</text>\n", 27 + i * 160, legend[i][1]);
    }
    fprintf(f, "<text x=\"%d\" y=\"45\">| last output</text>\n", 10 + 6 * 160);
    /* events of note: vertical lines, labelled below the axis */
    int ly = axis_y + 36;
    for (size_t i = 0; i < t->nm; i++) {
        const struct tl_mark *m = &t->m[i];
        const char *colour =
            strcmp(m->kind, "timeout") == 0 || strcmp(m->kind, "hang") == 0 || strcmp(m->kind, "mismatch") == 0
                ? "#d32f2f"
            : strcmp(m->kind, "suspect") == 0 || strcmp(m->kind, "straggler") == 0 ? "#ef6c00"
                                                                                   : "#1565c0";
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"4 3\"/>\n", X(m->t),
                top - 6, X(m->t), axis_y, colour);
        if (ly < height - 6) {
            fprintf(f, "<text x=\"10\" y=\"%d\" fill=\"%s\" font-size=\"11\">+%.2fs ", ly, colour, m->t);
            xml_text(f, m->kind);
            fprintf(f, ": ");
            char buf[130];
            size_t n = strlen(m->text) < sizeof(buf) - 1 ? strlen(m->text) : sizeof(buf) - 1;
            memcpy(buf, m->text, n);
            buf[n] = '\0';
            xml_text(f, buf);
            fprintf(f, "</text>\n");
            ly += 15;
        }
    }
    fprintf(f, "</svg>\n");
#undef X
}

/* ---------------------------------------------------------------- the command (reads files) */

struct run_files {
    char *dir;
    char last[32];
};

static const char *last_output(void *arg, int attempt, int local_rank, const char *before)
{
    struct run_files *rf = arg;
    char *path = ddp_xasprintf("%s/attempt_%d/%d/timed.log", rf->dir, attempt, local_rank);
    FILE *f = ddp_fopen_regular(path); /* not a FIFO or /dev/zero planted in its place */
    char line[4096];
    free(path);
    rf->last[0] = '\0';
    if (!f)
        return NULL;
    while (fgets(line, sizeof(line), f)) {
        if (strlen(line) < 25 || line[24] != ' ' || line[23] != 'Z')
            continue;
        if (before && strncmp(line, before, 24) >= 0)
            break;
        memcpy(rf->last, line, 24);
        rf->last[24] = '\0';
    }
    fclose(f);
    return rf->last[0] ? rf->last : NULL;
}

/* path itself when it holds events.jsonl, else its newest subdirectory that does (caller frees), or NULL. */
static char *find_run(const char *path)
{
    struct stat st;
    char *ev = ddp_xasprintf("%s/events.jsonl", path);
    if (stat(ev, &st) == 0) {
        free(ev);
        return ddp_xstrdup(path);
    }
    free(ev);
    DIR *d = opendir(path);
    struct dirent *e;
    char *best = NULL;
    struct timespec best_t = {0};
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = ddp_xasprintf("%s/%s/events.jsonl", path, e->d_name);
        if (stat(p, &st) == 0 && (!best || st.st_mtim.tv_sec > best_t.tv_sec ||
                                  (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec > best_t.tv_nsec))) {
            free(best);
            best = ddp_xasprintf("%s/%s", path, e->d_name);
            best_t = st.st_mtim;
        }
        free(p);
    }
    if (d)
        closedir(d);
    return best;
}

/* The longest events.jsonl line report reads: an attempt_start line holds the argv and every worker, 101 KB for
 * about 430 workers, so 16 MiB is far above any real line and still bounds the memory a planted file can take. */
#define EVENT_LINE_MAX (16u << 20)

/* One whole line of f into *buf (grown as needed, caller frees), without the newline. Returns its length, -1 at
 * end of file, or -2 for a line longer than EVENT_LINE_MAX (read past and dropped; *buf holds nothing useful). */
static long read_event_line(FILE *f, char **buf, size_t *cap)
{
    size_t len = 0;
    bool too_long = false;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (too_long)
            continue;
        if (len + 1 >= *cap) {
            *cap = *cap ? *cap * 2 : 4096;
            *buf = ddp_xrealloc(*buf, *cap);
        }
        (*buf)[len++] = (char)c;
        if (len > EVENT_LINE_MAX)
            too_long = true;
    }
    if (c == EOF && len == 0 && !too_long)
        return -1;
    if (too_long)
        return -2;
    if (!*buf)
        *buf = ddp_xmalloc(*cap = 1);
    (*buf)[len] = '\0';
    return (long)len;
}

/* No job_end: whether the launcher that wrote the record is gone (this host's pid is no ddplaunch any more).
 * Another host's launcher cannot be seen from here: not gone. */
static bool launcher_gone(const struct ddp_timeline *t)
{
    const char *host;
    char me[256] = {0}, path[64], comm[32] = {0};
    int pid = ddp_timeline_pid(t, &host);
    if (pid <= 0 || gethostname(me, sizeof(me) - 1) < 0 || strcmp(me, host) != 0)
        return false;
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, comm, sizeof(comm) - 1);
    close(fd);
    return n <= 0 || strncmp(comm, "ddplaunch", 9) != 0;
}

int ddp_timeline_command(const char *path, const char *svg_path, FILE *out)
{
    struct ddp_err err = {0};
    struct run_files rf = {0};
    struct ddp_timeline *t = NULL;
    json_t *events = json_array();
    char *line = NULL;
    size_t line_cap = 0;
    long line_len;
    int status = 0;
    rf.dir = find_run(path);
    if (!rf.dir) {
        fprintf(stderr,
                "ddplaunch: report: %s: no events.jsonl there or in a run directory below it (expected a "
                "log_dir or one of its runs)\n",
                path);
        json_decref(events);
        return DDP_EXIT_USAGE;
    }
    char *evp = ddp_xasprintf("%s/events.jsonl", rf.dir);
    FILE *f = ddp_fopen_regular(evp);
    int lineno = 0;
    while (f && (line_len = read_event_line(f, &line, &line_cap)) != -1) {
        json_error_t je;
        lineno++;
        if (line_len == -2) {
            fprintf(stderr, "ddplaunch: report: %s:%d: line longer than %u MiB; skipped\n", evp, lineno,
                    EVENT_LINE_MAX >> 20);
            continue;
        }
        json_t *o = json_loadb(line, (size_t)line_len, 0, &je);
        if (!json_is_object(o)) {
            fprintf(stderr, "ddplaunch: report: %s:%d: not a JSON object (%s); skipped\n", evp, lineno, je.text);
            json_decref(o);
            continue;
        }
        json_array_append_new(events, o);
    }
    if (f)
        fclose(f);
    free(line);
    if (ddp_timeline_build(events, last_output, &rf, &t, &err) < 0) {
        fprintf(stderr, "ddplaunch: report: %s: %s\n", evp, err.msg);
        status = DDP_EXIT_USAGE;
    } else {
        fprintf(out, "run %s\n", rf.dir);
        ddp_timeline_launcher_gone(t, launcher_gone(t));
        ddp_timeline_print(out, t);
        if (svg_path) {
            int fd = open(svg_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
            FILE *s = fd >= 0 ? fdopen(fd, "w") : NULL;
            if (!s) {
                fprintf(stderr, "ddplaunch: report: %s: %s\n", svg_path, strerror(errno));
                if (fd >= 0)
                    close(fd);
                status = DDP_EXIT_USAGE;
            } else {
                ddp_timeline_svg(s, t);
                if (fclose(s) != 0) {
                    fprintf(stderr, "ddplaunch: report: %s: %s\n", svg_path, strerror(errno));
                    status = DDP_EXIT_USAGE;
                } else {
                    fprintf(out, "svg: %s\n", svg_path);
                }
            }
        }
    }
    ddp_timeline_free(t);
    json_decref(events);
    free(evp);
    free(rf.dir);
    return status;
}
