/* capture: see capture.h. The table first, then the effects that carry its actions out. */
#include "watch/capture.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/logdir.h"
#include "records/jsonlog.h"
#include "watch/coll_timeout.h"
#include "watch/fr_remote.h"
#include "watch/hang.h"
#include "watch/live_ask.h"
#include "watch/source.h"
#include "watch/stall.h"

/* ---------------------------------------------------------------- the table */

unsigned ddp_capture_step(enum ddp_capture_state *state, const struct ddp_capture_event_data *ev)
{
    switch (*state) {
    case DDP_CS_IDLE:
        if (ev->kind != DDP_CE_BEGIN)
            return 0;
        if (ev->settle) {
            *state = DDP_CS_SETTLING;
            return DDP_CA_ARM_SETTLE;
        }
        *state = DDP_CS_WAITING;
        return DDP_CA_ABORT | DDP_CA_ARM_WINDOW | DDP_CA_CHECK;
    case DDP_CS_SETTLING:
        if (ev->kind == DDP_CE_SETTLED) {
            *state = DDP_CS_WAITING;
            return DDP_CA_ABORT | DDP_CA_ARM_WINDOW | DDP_CA_CHECK;
        }
        if (ev->kind == DDP_CE_ALL_GONE) {
            *state = DDP_CS_IDLE;
            return DDP_CA_DECIDE;
        }
        return 0;
    case DDP_CS_WAITING:
        if (ev->kind == DDP_CE_WINDOW || ev->kind == DDP_CE_ALL_GONE || (ev->kind == DDP_CE_PROGRESS && ev->complete)) {
            *state = DDP_CS_IDLE;
            return DDP_CA_DECIDE;
        }
        return 0;
    case DDP_CS__COUNT:
        break;
    }
    return 0;
}

const char *ddp_cstate_name(enum ddp_capture_state s)
{
    static const char *const names[] = {"idle", "settling", "waiting"};
    return (unsigned)s < DDP_CS__COUNT ? names[s] : "unknown";
}

const char *ddp_cevent_name(enum ddp_capture_event e)
{
    static const char *const names[] = {"begin", "settled", "progress", "window", "all-gone"};
    return (unsigned)e < DDP_CE__COUNT ? names[e] : "unknown";
}

/* ---------------------------------------------------------------- effects */

/* A worker's part in the capture.
 *   OUT      not in it
 *   IN       in it: SIGABRT sent or to be sent, or (it reported a collective timeout) waited for
 *   DUMPED   its fault handler printed its last line: its stack is whole */
enum part { OUT, IN, DUMPED };

/* What the capture keeps of a worker of the current attempt. */
struct captured {
    enum part part;
    struct ddp_buf dump; /* stderr lines after the SIGABRT: the stack dump */
};

struct ddp_capture {
    struct captured *of; /* per worker of the current attempt (ddp_capture_prepare), n of them */
    size_t n;
    void (*evidence)(void *arg, size_t i, struct ddp_capture_evidence *ev);
    void *evidence_arg;
    const struct ddp_plan_job *job;
    struct ddp_runner *rn;
    struct ddp_records *rec;
    void (*decided)(void *arg);
    void *arg;
    uv_timer_t timer; /* SETTLED or WINDOW, per state */
    enum ddp_capture_state state;
    long long start_ms;
    const struct ddp_fr_state *(*fr)(void *arg, size_t i, long long *still_ms);
    void *fr_arg;
    const struct ddp_fr_remote *remote; /* the other nodes' ranks' recorders (node 0), or NULL */
};

static void feed(struct ddp_capture *c, const struct ddp_capture_event_data *ev);

static void on_timer(uv_timer_t *t)
{
    struct ddp_capture *c = t->data;
    struct ddp_capture_event_data ev = {.kind = c->state == DDP_CS_SETTLING ? DDP_CE_SETTLED : DDP_CE_WINDOW};
    feed(c, &ev);
}

struct ddp_capture *ddp_capture_new(uv_loop_t *loop, const struct ddp_plan_job *job, struct ddp_runner *rn,
                                    struct ddp_records *rec, void (*decided)(void *arg), void *arg)
{
    struct ddp_capture *c = ddp_xcalloc(1, sizeof(*c));
    c->job = job;
    c->rn = rn;
    c->rec = rec;
    c->decided = decided;
    c->arg = arg;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    return c;
}

void ddp_capture_recorder(struct ddp_capture *c,
                          const struct ddp_fr_state *(*fr)(void *arg, size_t i, long long *still_ms), void *arg,
                          const struct ddp_fr_remote *remote)
{
    c->fr = fr;
    c->fr_arg = arg;
    c->remote = remote;
}

void ddp_capture_evidence(struct ddp_capture *c, void (*fn)(void *arg, size_t i, struct ddp_capture_evidence *ev),
                          void *arg)
{
    c->evidence = fn;
    c->evidence_arg = arg;
}

/* What the other sources know of worker i (zero without them). */
static struct ddp_capture_evidence evidence_of(const struct ddp_capture *c, size_t i)
{
    struct ddp_capture_evidence ev = {0};
    if (c->evidence)
        c->evidence(c->evidence_arg, i, &ev);
    return ev;
}

static void forget(struct ddp_capture *c)
{
    for (size_t i = 0; i < c->n; i++)
        ddp_buf_free(&c->of[i].dump);
    free(c->of);
    c->of = NULL;
    c->n = 0;
}

void ddp_capture_prepare(struct ddp_capture *c, const struct ddp_attempt *plan)
{
    forget(c);
    c->n = plan->nworkers;
    c->of = ddp_xcalloc(c->n ? c->n : 1, sizeof(*c->of));
}

/* k's entry, when k is of the current attempt. */
static struct captured *of(const struct ddp_capture *c, const struct ddp_runner_worker *k)
{
    return ddp_runner_is_current(k) && ddp_runner_worker_index(k) < c->n ? &c->of[ddp_runner_worker_index(k)] : NULL;
}

/* Worker i's part (OUT past the attempt's workers). */
static enum part part_of(const struct ddp_capture *c, size_t i)
{
    return i < c->n ? c->of[i].part : OUT;
}

bool ddp_capture_in(const struct ddp_capture *c, const struct ddp_runner_worker *k)
{
    const struct captured *o = of(c, k);
    return o && o->part != OUT;
}

void ddp_capture_close(struct ddp_capture *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->timer))
        uv_close((uv_handle_t *)&c->timer, NULL);
}

void ddp_capture_free(struct ddp_capture *c)
{
    if (c)
        forget(c);
    free(c);
}

bool ddp_capture_active(const struct ddp_capture *c)
{
    return c->state != DDP_CS_IDLE;
}

static bool can_capture(const struct ddp_runner_worker *k)
{
    const char *fh = ddp_runner_worker_env(k, "PYTHONFAULTHANDLER");
    return ddp_runner_worker_running(k) && ddp_runner_worker_plan(k)->python && fh && *fh &&
           ddp_runner_worker_pid(k) > 0 && ddp_runner_worker_pid(k) != ddp_runner_worker_pgid(k);
}

int ddp_capture_possible(const struct ddp_capture *c)
{
    struct ddp_runner_attempt *r = ddp_runner_current(c->rn);
    int n = 0;
    if (!r || !c->job->spec->timeout_stacks || c->state != DDP_CS_IDLE)
        return 0;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(r); i++)
        n += can_capture(ddp_runner_attempt_worker(r, i));
    return n;
}

void ddp_capture_begin(struct ddp_capture *c, enum ddp_class tcls)
{
    struct ddp_runner_attempt *r = ddp_runner_current(c->rn);
    int n = 0;
    if (!r || c->state != DDP_CS_IDLE)
        return;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(r); i++)
        if (can_capture(ddp_runner_attempt_worker(r, i))) {
            if (i < c->n)
                c->of[i].part = IN;
            n++;
        }
    c->start_ms = ddp_now_ms();
    ddp_info("attempt %d: capturing the stacks of %d rank%s (SIGABRT, Python faulthandler)",
             ddp_runner_attempt_number(r), n, n == 1 ? "" : "s");
    /* after a collective timeout report, the other waiting ranks report theirs within milliseconds */
    struct ddp_capture_event_data ev = {.kind = DDP_CE_BEGIN,
                                        .settle = ddp_class_is_timeout(tcls) && tcls != DDP_CLASS_HANG &&
                                                  tcls != DDP_CLASS_INIT_TIMEOUT && tcls != DDP_CLASS_WALL_TIMEOUT};
    feed(c, &ev);
}

/* SIGABRT to the ranks in the capture. A rank that reported waiting in a collective is already ending (torch
 * raises, or its NCCL watchdog aborts) and its timeout line says where it is: waited for, not interrupted, so
 * its traceback stays whole. A rank that only got torch's flight-recorder dump signal may be the hung one. */
static void abort_ranks(struct ddp_capture *c)
{
    struct ddp_runner_attempt *r = ddp_runner_current(c->rn);
    for (size_t i = 0; r && i < ddp_runner_attempt_nworkers(r); i++) {
        struct ddp_runner_worker *k = ddp_runner_attempt_worker(r, i);
        if (part_of(c, i) != OUT && !evidence_of(c, i).tmo.waiting) {
            ddp_records_captured(c->rec, k);
            ddp_runner_hold_dump(k, true); /* its dump goes to stacks.txt, not over the console */
            ddp_runner_signal_program(k, SIGABRT);
        }
    }
}

/* Complete once every rank in it has exited and its stderr was read to the end, or printed the fault handler's
 * last line, or (not interrupted) named its collective in its timeout line: measured on H200s, torch 2.11's
 * NCCL watchdog leaves such a rank running for seconds, and its place is known already. */
static bool complete(const struct ddp_capture *c)
{
    struct ddp_runner_attempt *r = ddp_runner_current(c->rn);
    for (size_t i = 0; r && i < ddp_runner_attempt_nworkers(r); i++) {
        const struct ddp_runner_worker *k = ddp_runner_attempt_worker(r, i);
        if (part_of(c, i) == IN && !evidence_of(c, i).tmo.op[0] &&
            (ddp_runner_worker_state(k) < DDP_WS_EXITED || (ddp_runner_worker_open(k) & DDP_RS_ERR)))
            return false;
    }
    return true;
}

void ddp_capture_changed(struct ddp_capture *c)
{
    if (c->state != DDP_CS_WAITING)
        return;
    struct ddp_capture_event_data ev = {.kind = DDP_CE_PROGRESS, .complete = complete(c)};
    feed(c, &ev);
}

void ddp_capture_all_gone(struct ddp_capture *c)
{
    struct ddp_capture_event_data ev = {.kind = DDP_CE_ALL_GONE};
    feed(c, &ev);
}

bool ddp_capture_line(struct ddp_capture *c, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    struct captured *o = of(c, k);
    if (!o || o->part == OUT || which != 1 || o->dump.len >= (256u << 10))
        return false;
    ddp_buf_add(&o->dump, line, len);
    ddp_buf_add(&o->dump, "\n", 1);
    /* the fault handler's last line (Python >= 3.10): the stack is whole, no need to wait for the exit
     * (measured on H200s: a CUDA process takes seconds to die after SIGABRT) */
    if (c->state == DDP_CS_WAITING && len >= 19 && memcmp(line, "Extension modules: ", 19) == 0) {
        o->part = DUMPED;
        ddp_capture_changed(c);
        return true;
    }
    return false;
}

/* ---------------------------------------------------------------- the verdict */

static void push_line_nl(void *arg, const char *line)
{
    struct ddp_buf *b = arg;
    ddp_buf_puts(b, line);
    ddp_buf_add(b, "\n", 1);
}

/* The flight recorder dumps torch left in a rank's log directory, as a JSON array of paths. */
static json_t *flight_recorder_files(const struct ddp_runner_worker *k)
{
    json_t *a = json_array();
    if (!ddp_runner_worker_plan(k)->log_dir)
        return a;
    DIR *d = opendir(ddp_runner_worker_plan(k)->log_dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "flight_recorder_rank_", 21) == 0) {
            char *path = ddp_xasprintf("%s/%s", ddp_runner_worker_plan(k)->log_dir, e->d_name);
            json_array_append_new(a, json_string(path));
            free(path);
        }
    if (d)
        closedir(d);
    return a;
}

/* What a hung attempt's capture holds while the verdict is made, one entry per worker. */
struct gathered {
    size_t n;
    struct ddp_hang_view *views;
    struct ddp_hang_input *in;
    struct ddp_capture_evidence *ev; /* what the other sources knew of each */
    struct ddp_buf *texts;           /* each rank's stack text, for stacks.txt */
    bool *culprit;
    struct ddp_hang_verdict v;
    json_t *ranks, *fr;                /* summary.json's hang.ranks and hang.flight_recorder */
    json_t *recorder;                  /* summary.json's hang.recorder: the flight recorder's finding, or NULL */
    struct ddp_fr_remote_named remote; /* culprits on other nodes (fr_remote.h) */
};

/* The flight recorder's finding (fr.h) replaces the stacks' verdict when it names something. */
static void decide_recorder(const struct ddp_capture *c, struct ddp_runner_attempt *r, struct gathered *g)
{
    size_t n = g->n ? g->n : 1;
    struct ddp_fr_input *in = ddp_xcalloc(n, sizeof(*in));
    bool *culprit = ddp_xcalloc(n, sizeof(*culprit)), any = false;
    struct ddp_fr_verdict v;
    for (size_t i = 0; i < g->n; i++) {
        long long still = 0;
        const struct ddp_fr_state *f = c->fr ? c->fr(c->fr_arg, i, &still) : NULL;
        any |= f != NULL;
        in[i] = (struct ddp_fr_input){ddp_runner_worker_rank(ddp_runner_attempt_worker(r, i)), f, still,
                                      g->views[i].nframes ? g->views[i].frame : NULL};
    }
    if (any || ddp_fr_remote_count(c->remote, ddp_runner_attempt_number(r))) {
        ddp_fr_remote_decide(c->remote, ddp_runner_attempt_number(r), ddp_now_ms(), in, g->n, culprit, &v, &g->remote);
        if (v.kind != DDP_FR_NONE) {
            memcpy(g->culprit, culprit, g->n * sizeof(*culprit));
            g->v.confidence = v.nculprits ? DDP_HANG_HIGH : DDP_HANG_LOW;
            g->v.nculprits = v.nculprits;
            g->v.mismatch = v.kind != DDP_FR_BEHIND && !v.nculprits;
            snprintf(g->v.op, sizeof(g->v.op), "%s", v.op);
            snprintf(g->v.why, sizeof(g->v.why), "flight recorder: %s", v.why);
            g->recorder = ddp_fr_verdict_json(&v);
        }
    }
    free(in);
    free(culprit);
}

/* Each rank's stack (the fault handler's dump, or the traceback of a rank that reported its timeout). */
static void gather(const struct ddp_capture *c, struct ddp_runner_attempt *r, struct gathered *g)
{
    for (size_t i = 0; i < g->n; i++) {
        struct ddp_runner_worker *k = ddp_runner_attempt_worker(r, i);
        struct captured none = {0};
        const struct captured *o = i < c->n ? &c->of[i] : &none;
        struct ddp_capture_evidence *e = &g->ev[i];
        struct ddp_hang_view tv = {0};
        struct ddp_buf tail = {0};
        ddp_runner_worker_tail(k, 1, push_line_nl, &tail);
        if (tail.len)
            ddp_hang_parse_stack(tail.data, tail.len, &tv);
        if (o->dump.len) {
            ddp_hang_parse_stack(o->dump.data, o->dump.len, &g->views[i]);
            ddp_buf_add(&g->texts[i], o->dump.data, o->dump.len);
        }
        /* a rank that already reported its timeout may be unwinding: its traceback says where it waited */
        if (tv.nframes && (!g->views[i].nframes || (!g->views[i].op[0] && tv.op[0]))) {
            g->views[i] = tv;
            if (!o->dump.len && tail.len)
                ddp_buf_add(&g->texts[i], tail.data, tail.len);
        }
        ddp_buf_free(&tail);
        /* a zombie now is a rank this capture's SIGABRT just ended: only a stopped rank is a suspect here */
        char st = ddp_runner_worker_running(k) ? ddp_proc_state(ddp_runner_worker_pid(k)) : 0;
        *e = evidence_of(c, i);
        g->in[i] = (struct ddp_hang_input){ddp_runner_worker_rank(k), g->views[i].nframes ? &g->views[i] : NULL,
                                           e->reported_timeout,       ddp_runner_worker_running(k),
                                           e->last_progress_ms,       e->tmo.waiting ? &e->tmo : NULL,
                                           st == 'Z' ? 0 : st};
        json_t *f = flight_recorder_files(k);
        json_array_extend(g->fr, f);
        json_decref(f);
    }
}

/* Where rank i stood, into d: "in all_reduce #3 (it reported a timeout), at train.py:42 in <module>"; with
 * top, its top frames rather than its frame. */
static void describe(const struct gathered *g, size_t i, bool top, struct ddp_buf *d)
{
    const struct ddp_capture_evidence *o = &g->ev[i];
    const char *op = ddp_hang_input_op(&g->in[i]);
    size_t start = d->len;
    if (op[0] || o->tmo.waiting)
        ddp_buf_printf(d, "in %s", op[0] ? op : "a collective");
    if (o->tmo.waiting && o->tmo.seq >= 0)
        ddp_buf_printf(d, " #%lld", o->tmo.seq);
    if (o->tmo.waiting)
        ddp_buf_puts(d, " (it reported a timeout)");
    if (g->views[i].nframes)
        ddp_buf_printf(d, "%sat %s", d->len > start ? ", " : "", top ? g->views[i].top : g->views[i].frame);
    else
        ddp_buf_printf(d, "%sno Python stack", d->len > start ? ", " : "");
}

/* The stacks, for people (attempt_N/stacks.txt's text, into all), and each rank's place for summary.json. */
static void gather_stacks(const struct ddp_capture *c, struct ddp_runner_attempt *r, struct gathered *g,
                          struct ddp_buf *all)
{
    for (size_t i = 0; i < g->n; i++) {
        struct ddp_runner_worker *k = ddp_runner_attempt_worker(r, i);
        const struct ddp_capture_evidence *o = &g->ev[i];
        const char *op = ddp_hang_input_op(&g->in[i]);
        struct ddp_buf d = {0};
        describe(g, i, false, &d);
        ddp_buf_printf(all, "== rank %d (local %d, pid %d, host %s, gpu %s)%s: %.*s\n", ddp_runner_worker_rank(k),
                       ddp_runner_worker_local_rank(k), ddp_runner_worker_pid(k), c->job->hostname,
                       ddp_runner_worker_plan(k)->gpu_busid ? ddp_runner_worker_plan(k)->gpu_busid : "-",
                       g->culprit[i] ? " CULPRIT" : "", (int)d.len, d.data ? d.data : "");
        ddp_buf_free(&d);
        if (g->texts[i].len)
            ddp_buf_add(all, g->texts[i].data, g->texts[i].len);
        ddp_buf_add(all, "\n", 1);
        json_t *jr = ddp_jsonlog_pack("{s:i, s:s?, s:s?, s:b, s:b}", "rank", ddp_runner_worker_rank(k), "collective",
                                      op[0] ? op : NULL, "frame", g->views[i].nframes ? g->views[i].frame : NULL,
                                      "stack", g->views[i].nframes > 0, "reported_timeout", o->reported_timeout);
        json_object_set_new(jr, "seq", o->tmo.waiting && o->tmo.seq >= 0 ? json_integer(o->tmo.seq) : json_null());
        json_array_append_new(g->ranks, jr);
    }
}

/* all into attempt_N/stacks.txt in the run directory: its path (caller frees), NULL without log_dir or when it
 * could not be written (said). */
static char *write_stacks(const struct ddp_capture *c, struct ddp_runner_attempt *r, const struct ddp_buf *all)
{
    char *stacks = NULL;
    if (c->job->logdir) {
        struct ddp_err e = {0};
        char *rel = ddp_xasprintf("attempt_%d/stacks.txt", ddp_runner_attempt_number(r));
        int fd = ddp_logdir_create_file(c->job->logdir, rel, &e);
        if (fd >= 0) {
            int rc = ddp_write_full(fd, all->data ? all->data : "", all->len);
            struct stat st;
            if (rc == 0) {
                stacks = ddp_xasprintf("%s/%s", ddp_logdir_path(c->job->logdir), rel);
            } else { /* a full disk: the verdict still reaches the console and summary.json */
                uint64_t kept = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
                ddp_warn("%s/%s: log stopped at %llu bytes: %s; the verdict is in the summary",
                         ddp_logdir_path(c->job->logdir), rel, (unsigned long long)kept, strerror(-rc));
                ddp_records_stopped(c->rec, rel, kept, -rc);
            }
            close(fd);
        } else {
            ddp_warn("%s", e.msg);
        }
        free(rel);
    }
    return stacks;
}

/* text less the fault handler's blocks of ddplaunch's own sampler thread ("Thread 0x...:" up to the blank line
 * after it, one of whose frames is in DDP_HANG_SAMPLER_FUNC), appended to out. */
static void without_sampler(const char *text, size_t len, struct ddp_buf *out)
{
    static const char tail[] = " in " DDP_HANG_SAMPLER_FUNC;
    const size_t n = sizeof(tail) - 1;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *q = nl ? nl + 1 : end;
        bool header =
            (q - p > 9 && memcmp(p, "Thread 0x", 9) == 0) || (q - p > 17 && memcmp(p, "Current thread 0x", 17) == 0);
        if (header) { /* the block: up to and with its blank line */
            bool sampler = false;
            while (q < end && *q != '\n') {
                const char *e = memchr(q, '\n', (size_t)(end - q)), *le = e ? e : end;
                sampler |= (size_t)(le - q) >= n && memcmp(le - n, tail, n) == 0;
                q = e ? e + 1 : end;
            }
            if (q < end)
                q++; /* its blank line */
            if (sampler) {
                p = q;
                continue;
            }
        }
        ddp_buf_add(out, p, (size_t)(q - p));
        p = q;
    }
}

/* The verdict on the console, never inside a rank's dump: its lines, each rank's top frames, where the stacks
 * are; without stacks.txt, the stacks themselves (less ddplaunch's own thread). */
static void print_verdict(const struct ddp_capture *c, struct ddp_runner_attempt *r, const struct gathered *g,
                          const char *verdict, const char *stacks, const struct ddp_buf *all)
{
    struct ddp_buf b = {0};
    if (ddp_log_verbosity < DDP_LOG_INFO)
        return;
    const char *why_end = strstr(verdict, "\n  stacks: ");
    ddp_buf_printf(&b, "ddplaunch: attempt %d: %.*s\n", ddp_runner_attempt_number(r),
                   (int)(why_end ? (size_t)(why_end - verdict) : strlen(verdict)), verdict);
    for (size_t i = 0; i < g->n; i++) {
        ddp_buf_printf(&b, "  rank %d%s: ", ddp_runner_worker_rank(ddp_runner_attempt_worker(r, i)),
                       g->culprit[i] ? " (culprit)" : "");
        describe(g, i, true, &b);
        ddp_buf_add(&b, "\n", 1);
    }
    if (stacks) {
        ddp_buf_printf(&b, "  stacks: %s\n", stacks);
    } else {
        ddp_buf_printf(&b, "  stacks: below (%s)\n", c->job->logdir ? "stacks.txt could not be written" : "no log_dir");
        without_sampler(all->data ? all->data : "", all->len, &b);
    }
    ddp_output_flush(ddp_runner_output(c->rn)); /* the workers' lines before it first */
    fwrite(b.data, 1, b.len, stderr);
    fflush(stderr);
    ddp_buf_free(&b);
}

/* The verdict, for the console, events.jsonl and summary.json. Returns the first culprit, NULL when none. */
static struct ddp_runner_worker *report(const struct ddp_capture *c, struct ddp_runner_attempt *r, struct gathered *g,
                                        const char *stacks, const struct ddp_buf *all, long long capture_ms)
{
    const struct ddp_hang_verdict *v = &g->v;
    const char *host = c->job->hostname;
    json_t *culprits = json_array();
    struct ddp_buf txt = {0};
    struct ddp_runner_worker *first = NULL;
    ddp_buf_printf(&txt, "Hang verdict (%s confidence): ", ddp_hang_confidence_name(v->confidence));
    for (size_t i = 0; i < g->n; i++) {
        struct ddp_runner_worker *k = ddp_runner_attempt_worker(r, i);
        if (!g->culprit[i])
            continue;
        if (!first)
            first = k;
        const char *op = ddp_hang_input_op(&g->in[i]);
        const char *frame = g->views[i].nframes ? g->views[i].frame : NULL;
        ddp_buf_printf(&txt, "%srank %d (local %d, host %s, GPU %s)%s%s%s%s", first == k ? "" : "; ",
                       ddp_runner_worker_rank(k), ddp_runner_worker_local_rank(k), host,
                       ddp_runner_worker_plan(k)->gpu_busid ? ddp_runner_worker_plan(k)->gpu_busid : "none",
                       frame ? " at " : "", frame ? frame : "", op[0] ? " in " : "", op);
        json_array_append_new(culprits,
                              ddp_jsonlog_pack("{s:i, s:i, s:s, s:i, s:s?, s:i, s:s?, s:s?}", "rank",
                                               ddp_runner_worker_rank(k), "local_rank", ddp_runner_worker_local_rank(k),
                                               "host", host, "gpu", ddp_runner_worker_plan(k)->gpu, "gpu_busid",
                                               ddp_runner_worker_plan(k)->gpu_busid, "pid", ddp_runner_worker_pid(k),
                                               "collective", op[0] ? op : NULL, "frame", frame));
    }
    if (g->remote.n) { /* after this node's culprits: those on other nodes (fr_remote.h) */
        ddp_buf_printf(&txt, "%s%s", first ? "; " : "", g->remote.text.data);
        json_array_extend(culprits, g->remote.culprits);
    }
    ddp_fr_remote_named_free(&g->remote);
    if (!first && !json_array_size(culprits))
        ddp_buf_puts(&txt, v->mismatch ? "collective mismatch, no culprit named" : "no culprit named");
    ddp_buf_printf(&txt, "\n  why: %s\n  stacks: %s\n", v->why,
                   stacks           ? stacks
                   : c->job->logdir ? "printed with the verdict above (stacks.txt could not be written)"
                                    : "printed with the verdict above (no log_dir)");
    print_verdict(c, r, g, txt.data, stacks, all);
    json_t *hang = ddp_jsonlog_pack(
        "{s:i, s:s, s:o, s:s?, s:s, s:s?, s:o, s:o, s:I}", "attempt", ddp_runner_attempt_number(r), "confidence",
        ddp_hang_confidence_name(v->confidence), "culprits", culprits, "collective", v->op[0] ? v->op : NULL, "why",
        v->why, "stacks", stacks, "ranks", g->ranks, "flight_recorder", g->fr, "capture_ms", (json_int_t)capture_ms);
    g->ranks = g->fr = NULL; /* hang owns them now */
    json_object_set_new(hang, "mismatch", json_boolean(v->mismatch));
    json_object_set_new(hang, "chain",
                        g->recorder ? json_deep_copy(json_object_get(g->recorder, "chain")) : json_array());
    json_object_set_new(hang, "recorder", g->recorder ? g->recorder : json_null());
    g->recorder = NULL;
    ddp_records_hang(c->rec, hang, txt.data);
    return first;
}

static void decide(struct ddp_capture *c)
{
    struct ddp_runner_attempt *r = ddp_runner_current(c->rn);
    long long now = ddp_now_ms();
    if (!r)
        return;
    size_t nw = ddp_runner_attempt_nworkers(r), n = nw ? nw : 1;
    struct gathered g = {.n = nw,
                         .views = ddp_xcalloc(n, sizeof(*g.views)),
                         .in = ddp_xcalloc(n, sizeof(*g.in)),
                         .ev = ddp_xcalloc(n, sizeof(*g.ev)),
                         .texts = ddp_xcalloc(n, sizeof(*g.texts)),
                         .culprit = ddp_xcalloc(n, sizeof(*g.culprit)),
                         .ranks = json_array(),
                         .fr = json_array()};
    gather(c, r, &g);
    ddp_hang_decide(g.in, g.n, g.culprit, &g.v);
    decide_recorder(c, r, &g);
    struct ddp_buf all = {0};
    gather_stacks(c, r, &g, &all);
    char *stacks = write_stacks(c, r, &all);
    struct ddp_runner_worker *first = report(c, r, &g, stacks, &all, now - c->start_ms);
    ddp_buf_free(&all);
    for (size_t i = 0; !stacks && i < g.n; i++) /* no stacks file: what a rank still prints reaches the console */
        ddp_runner_hold_dump(ddp_runner_attempt_worker(r, i), false);
    if (first) {
        /* the culprit is the root cause; the rank that reported the timeout becomes another failure */
        char *why =
            ddp_xasprintf("hang culprit (%s confidence): %s", ddp_hang_confidence_name(g.v.confidence), g.v.why);
        ddp_records_blame(c->rec, first, why,
                          "this rank was not where the others waited: its frame above (and its full stack in "
                          "stacks) shows where it was stuck or slow");
        free(why);
    }
    free(stacks);
    for (size_t i = 0; i < g.n; i++)
        ddp_buf_free(&g.texts[i]);
    free(g.texts);
    free(g.views);
    free(g.in);
    free(g.ev);
    free(g.culprit);
    json_decref(g.ranks);
    json_decref(g.fr);
    json_decref(g.recorder);
}

static void feed(struct ddp_capture *c, const struct ddp_capture_event_data *ev)
{
    struct ddp_capture_event_data next = *ev;
    for (;;) {
        unsigned a = ddp_capture_step(&c->state, &next);
        if (a & DDP_CA_ARM_SETTLE)
            uv_timer_start(&c->timer, on_timer, DDP_CAPTURE_SETTLE_MS, 0);
        if (a & DDP_CA_ABORT)
            abort_ranks(c);
        if (a & DDP_CA_ARM_WINDOW) {
            long long window = c->job->spec->shutdown_timeout_ms / 2;
            if (window > DDP_CAPTURE_MS || window <= 0)
                window = DDP_CAPTURE_MS;
            uv_timer_start(&c->timer, on_timer, (uint64_t)window, 0);
        }
        if (a & DDP_CA_DECIDE) {
            uv_timer_stop(&c->timer);
            decide(c);
            c->decided(c->arg);
        }
        if (!(a & DDP_CA_CHECK))
            return;
        next = (struct ddp_capture_event_data){.kind = DDP_CE_PROGRESS, .complete = complete(c)};
    }
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

/* the capture's verdict reads the flight recorders the live watch saw last */
static const struct ddp_fr_state *live_fr(void *arg, size_t i, long long *still_ms)
{
    return ddp_live_fr(ddp_live_in_watch(arg), i, still_ms);
}

/* what the other sources know of worker i, for the capture's verdict */
static void evidence(void *arg, size_t i, struct ddp_capture_evidence *ev)
{
    const struct ddp_stall *stall = ddp_stall_in_watch(arg);
    const struct ddp_coll_timeout *coll = ddp_coll_timeout_in_watch(arg);
    if (stall)
        ev->last_progress_ms = ddp_stall_progress_ms(stall, i);
    if (coll)
        ev->reported_timeout = ddp_coll_timeout_of(coll, i, &ev->tmo);
}

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    const struct ddp_watch_config *cfg = &env->cfg;
    struct ddp_capture *c = ddp_capture_new(cfg->loop, cfg->job, cfg->rn, cfg->rec, cfg->decided, cfg->arg);
    ddp_capture_recorder(c, live_fr, (void *)env, env->remote);
    ddp_capture_evidence(c, evidence, (void *)env);
    *self = c;
    return 0;
}

static void source_prepare(void *self, const struct ddp_attempt *plan)
{
    ddp_capture_prepare(self, plan);
}

static bool source_line(void *self, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    return ddp_capture_line(self, k, which, line, len);
}

static void source_changed(void *self)
{
    ddp_capture_changed(self);
}

static void source_all_gone(void *self)
{
    ddp_capture_all_gone(self); /* every rank is gone: decide before the policy ends the attempt */
}

static void source_close(void *self)
{
    ddp_capture_close(self);
}

static void source_free(void *self)
{
    ddp_capture_free(self);
}

const struct ddp_watch_source ddp_capture_source = {.name = "capture",
                                                    .open = source_open,
                                                    .prepare = source_prepare,
                                                    .line = source_line,
                                                    .changed = source_changed,
                                                    .all_gone = source_all_gone,
                                                    .close = source_close,
                                                    .free = source_free};

struct ddp_capture *ddp_capture_in_watch(const struct ddp_watch_env *env)
{
    return ddp_watch_state(env, &ddp_capture_source);
}
