/* progress: see progress.h. */
#include "watch/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "host/port.h"
#include "records/jsonlog.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/hang.h"
#include "watch/ras.h"
#include "watch/rasq.h"
#include "watch/sample.h"
#include "watch/suspect.h"

#define COLLECT_MS 300  /* from the signals to reading what the ranks wrote (a dump takes ~1-15 ms) */
#define REPEAT_MS 60000 /* a suspicion's line again while it lasts */
#define RAS_MS 2000     /* the longest wait for NCCL RAS's answer */

struct wrank {
    struct ddp_progress_rank r;
    pid_t groups[2]; /* the shim's process group, the program's own */
    bool running;
    bool sampled; /* has a stacks file */
    struct ddp_sample_file file;
    struct ddp_hang_view view; /* the last sample's place */
    bool has_view;
    long long last_ms;   /* its last sign of progress */
    const char *hb_path; /* its heartbeat file (borrowed), or NULL */
    struct timespec hb;
    json_t *straggler;       /* its entry in stragglers once named (borrowed from the array) */
    struct ddp_fr_state *fr; /* its flight recorder as the last sample showed it (fr.h), NULL: none yet */
    long long fr_moved_ms;   /* when its recorder status last moved */
    enum { ASK_NO, ASK_POKE, ASK_SENT, ASK_ANSWERED } ask; /* ddp_progress_ask's state for this rank */
};

struct ddp_progress {
    uv_timer_t tick, collect;
    int open_timers;
    const struct ddp_spec *spec;
    const char *host;
    int attempt;
    struct wrank *rk;
    size_t n;
    struct ddp_jsonlog *rec;
    json_t *stragglers;
    json_t *recorder;                   /* summary.json's flight_recorder (borrowed), or NULL */
    const struct ddp_fr_remote *remote; /* the other nodes' ranks' recorders (borrowed; node 0), or NULL */
    struct ddp_progress_hooks hooks;
    struct ddp_suspect sus;
    long long suspected_ms; /* when the current suspicion began, 0: none */
    long long quiet_since;  /* the last progress before it */
    bool fr_asked;          /* the flight recorders were asked to dump (once per suspicion) */
    bool fr_places;         /* the last round's places came from the flight recorders */
    long long round_ms;     /* when the last sample round was taken */
    long long warned_ms;
    bool acted;
    bool asking;           /* ddp_progress_ask: the regular samples pause */
    struct ddp_rasq *rasq; /* NCCL RAS's answer awaited, or NULL */
    bool *ras_named;       /* the ranks RAS's last answer named (behind, missing, failed), n of them */
    char ras_why[1024];    /* what it said of them, "" none */
};

static const char *on_suspect_name(enum ddp_on_suspect a)
{
    return a == DDP_ONSUSPECT_RESTART ? "restart" : a == DDP_ONSUSPECT_DOWNSIZE ? "downsize" : "warn";
}

static void progress(struct ddp_progress *w, size_t i, long long now)
{
    w->rk[i].last_ms = now;
    ddp_suspect_progress(&w->sus, now);
}

/* "rank 2 (local 2, host h, GPU 0000:17:00.0)" */
static void rank_desc(struct ddp_buf *b, const struct ddp_progress *w, const struct wrank *k)
{
    ddp_buf_printf(b, "rank %d (local %d, host %s, GPU %s)", k->r.rank, k->r.local_rank, w->host,
                   k->r.gpu_busid ? k->r.gpu_busid : "none");
}

static json_t *rank_json(const struct ddp_progress *w, const struct wrank *k, bool with_place)
{
    json_t *j = ddp_jsonlog_pack("{s:i, s:i, s:s, s:i, s:s?}", "rank", k->r.rank, "local_rank", k->r.local_rank, "host",
                                 w->host, "gpu", k->r.gpu, "gpu_busid", k->r.gpu_busid);
    if (with_place) {
        json_object_set_new(j, "collective", k->has_view && k->view.op[0] ? ddp_jsonlog_text(k->view.op) : json_null());
        json_object_set_new(j, "frame", k->has_view ? ddp_jsonlog_text(k->view.frame) : json_null());
    }
    return j;
}

/* ---------------------------------------------------------------- stragglers */

static void straggler_update(struct ddp_progress *w, size_t i)
{
    json_t *j = w->rk[i].straggler;
    json_object_set_new(j, "share", json_real(ddp_suspect_share(&w->sus, i)));
    json_object_set_new(j, "waited", json_real(ddp_suspect_waited(&w->sus, i)));
    json_object_set_new(j, "samples", json_integer(w->sus.rounds));
}

static void straggler_named(struct ddp_progress *w, size_t i)
{
    struct wrank *k = &w->rk[i];
    struct ddp_buf b = {0};
    json_t *j = rank_json(w, k, false);
    json_object_set_new(j, "attempt", json_integer(w->attempt));
    json_object_set_new(j, "frame", k->has_view ? ddp_jsonlog_text(k->view.frame) : json_null());
    k->straggler = j;
    straggler_update(w, i);
    rank_desc(&b, w, k);
    ddp_info("attempt %d: straggler: %s makes the others wait: it was %s in %.0f%% of the %u "
             "samples where others waited in one (the others waited on it in %.0f%% of %u samples)%s%s",
             w->attempt, b.data,
             w->fr_places ? "behind the collective the others had enqueued (flight recorder)"
                          : "outside any collective",
             100 * ddp_suspect_share(&w->sus, i), w->sus.waited, 100 * ddp_suspect_waited(&w->sus, i), w->sus.rounds,
             k->has_view ? "; last at " : "", k->has_view ? k->view.frame : "");
    ddp_buf_free(&b);
    ddp_jsonlog_event(w->rec, "stragglers", json_deep_copy(j));
    if (w->stragglers)
        json_array_append(w->stragglers, j);
    json_decref(j); /* the array (or nothing) keeps it; k->straggler stays valid while the array holds it */
    if (!w->stragglers)
        k->straggler = NULL;
}

static void count_round(struct ddp_progress *w)
{
    enum ddp_suspect_place *place = ddp_xcalloc(w->n ? w->n : 1, sizeof(*place));
    const struct ddp_fr_state **fr = ddp_xcalloc(w->n ? w->n : 1, sizeof(*fr));
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        if (k->running && k->has_view && k->view.nframes > 0)
            place[i] = k->view.op[0] ? DDP_SUSPECT_INSIDE : DDP_SUSPECT_OUTSIDE;
        fr[i] = k->running ? k->fr : NULL;
    }
    w->fr_places = ddp_fr_places(fr, w->n, place); /* the recorder, where there is one, says who waits (NCCL:
                                                      stacks cannot) */
    free(fr);
    size_t named = ddp_suspect_round(&w->sus, place);
    free(place);
    for (size_t i = 0; i < w->n; i++)
        if (w->rk[i].straggler)
            straggler_update(w, i);
    if (named != (size_t)-1)
        straggler_named(w, named);
}

/* ---------------------------------------------------------------- the flight recorder */

/* Fold rank i's sample text into its recorder state: a move is a sign of progress. */
static void recorder_sample(struct ddp_progress *w, size_t i, const char *text, size_t len, long long now)
{
    struct wrank *k = &w->rk[i];
    struct ddp_fr_state *fr = ddp_xcalloc(1, sizeof(*fr));
    if (ddp_fr_parse(text, len, fr) != 0) {
        free(fr);
        return;
    }
    if (!k->fr || ddp_fr_moved(k->fr, fr) || fr->has_entries != k->fr->has_entries) {
        if (!k->fr || ddp_fr_moved(k->fr, fr)) {
            progress(w, i, now);
            k->fr_moved_ms = now;
        }
        if (w->recorder) {
            json_t *ranks = json_object_get(w->recorder, "ranks");
            char key[16];
            if (!json_is_object(ranks) || json_integer_value(json_object_get(w->recorder, "attempt")) != w->attempt) {
                json_object_set_new(w->recorder, "attempt", json_integer(w->attempt));
                json_object_set_new(w->recorder, "ranks", ranks = json_object());
            }
            snprintf(key, sizeof(key), "%d", k->r.rank);
            json_object_set_new(ranks, key, ddp_fr_summary_json(fr));
        }
    }
    free(k->fr);
    k->fr = fr;
}

/* ---------------------------------------------------------------- suspicion */

/* Ask torch's flight recorder of every running rank to dump (torch 2.x, NCCL: a line into the FIFO it made; it
 * writes TORCH_FR_DUMP_TEMP_FILE + rank a few seconds later and runs on). The ranks asked, as a JSON array. */
static json_t *dump_flight_recorders(struct ddp_progress *w)
{
    json_t *asked = json_array();
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        struct stat st;
        if (!k->running || !k->r.fr_pipe || lstat(k->r.fr_pipe, &st) != 0 || !S_ISFIFO(st.st_mode))
            continue;
        int fd = open(k->r.fr_pipe, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue; /* ENXIO: nobody reads it (its process group is gone) */
        if (write(fd, "1\n", 2) == 2)
            json_array_append_new(asked, json_integer(k->r.rank));
        close(fd);
    }
    return asked;
}

/* The job's RAS port: the first rank's that has one, else 0. */
static int ras_port(const struct ddp_progress *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->rk[i].r.ras_port)
            return w->rk[i].r.ras_port;
    return 0;
}

/* An answer is the job's own only when every socket listening on its RAS port is open in a process of the job's
 * ranks (their shims' and programs' process groups; port.h): another user may bind the port first (it shows in
 * the lock names) and name an innocent rank. Otherwise one line, and the answer is not believed. */
static bool ras_from_job(const struct ddp_progress *w)
{
    int port = ras_port(w);
    pid_t *groups = ddp_xcalloc(2 * w->n + 1, sizeof(*groups));
    for (size_t i = 0; i < w->n; i++) {
        groups[2 * i] = w->rk[i].groups[0];
        groups[2 * i + 1] = w->rk[i].groups[1];
    }
    struct ddp_port_holder h;
    int rc = ddp_port_listener_owned(port, groups, 2 * w->n, &h);
    free(groups);
    if (rc == 1)
        return true;
    if (rc == 0 && h.pid > 0)
        ddp_warn("attempt %d: NCCL RAS: answer on port %d ignored: pid %d (%s, user %s) listens there, not one of "
                 "the job's ranks",
                 w->attempt, port, (int)h.pid, h.comm[0] ? h.comm : "?", h.user);
    else if (rc == 0)
        ddp_warn("attempt %d: NCCL RAS: answer on port %d ignored: a process not visible here (%s) listens there, "
                 "not one of the job's ranks",
                 w->attempt, port, h.user);
    else
        ddp_warn("attempt %d: NCCL RAS: answer on port %d ignored: no socket of the job's ranks listens there now",
                 w->attempt, port);
    return false;
}

/* NCCL RAS answered (rasq.h): what it says of the job's ranks, as a line and a `ras` event, when it is the job's
 * own RAS that answered (ras_from_job). */
static void ras_answered(void *arg, int rc, const struct ddp_ras *ras)
{
    struct ddp_progress *w = arg;
    w->rasq = NULL;
    if (rc < 0) {
        ddp_debug("attempt %d: NCCL RAS did not answer: %s", w->attempt, strerror(-rc));
        return;
    }
    if (!ras_from_job(w))
        return;
    size_t n = w->n ? w->n : 1;
    pid_t *pid = ddp_xcalloc(n, sizeof(*pid));
    int *rank = ddp_xcalloc(n, sizeof(*rank));
    bool *culprit = ddp_xcalloc(n, sizeof(*culprit));
    char why[1024];
    for (size_t i = 0; i < w->n; i++) {
        pid[i] = w->rk[i].groups[1];
        rank[i] = w->rk[i].r.rank;
    }
    ddp_ras_judge(ras, pid, rank, w->n, culprit, why, sizeof(why));
    memcpy(w->ras_named, culprit, w->n * sizeof(*culprit)); /* the next verdict's evidence where the stacks name
                                                               nobody */
    ddp_text_copy(w->ras_why, sizeof(w->ras_why), why);
    json_t *named = json_array();
    for (size_t i = 0; i < w->n; i++)
        if (culprit[i])
            json_array_append_new(named, json_integer(w->rk[i].r.rank));
    if (!why[0])
        snprintf(why, sizeof(why), "NCCL RAS: no rank behind, missing or failed in %zu communicator%s", ras->ncomms,
                 ras->ncomms == 1 ? "" : "s");
    ddp_warn("attempt %d: %s", w->attempt, why);
    ddp_jsonlog_event(w->rec, "ras",
                      ddp_jsonlog_pack("{s:i, s:s, s:o, s:i}", "attempt", w->attempt, "why", why, "ranks", named,
                                       "communicators", (int)ras->ncomms));
    free(pid);
    free(rank);
    free(culprit);
}

/* No rank has a flight recorder (torch 1.x, the recorder off, a stuck Python): ask NCCL's RAS, if the job has a
 * port of its own. */
static void ras_ask(struct ddp_progress *w)
{
    int port = ras_port(w);
    bool recorder = false;
    for (size_t i = 0; i < w->n; i++)
        recorder |= w->rk[i].running && w->rk[i].fr;
    if (recorder || !port || w->rasq)
        return;
    w->rasq = ddp_rasq_start(w->tick.loop, port, RAS_MS, ras_answered, w);
}

static void suspect_warn(struct ddp_progress *w, long long quiet, long long now)
{
    size_t n = w->n ? w->n : 1;
    struct ddp_hang_input *in = ddp_xcalloc(n, sizeof(*in));
    bool *culprit = ddp_xcalloc(n, sizeof(*culprit));
    struct ddp_hang_verdict v;
    struct ddp_buf b = {0};
    json_t *culprits = json_array();
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        in[i] = (struct ddp_hang_input){
            k->r.rank, k->running && k->has_view ? &k->view : NULL, false, k->running, k->last_ms, NULL, 0};
    }
    ddp_hang_decide(in, w->n, culprit, &v);
    struct ddp_fr_input *fin = ddp_xcalloc(n, sizeof(*fin));
    struct ddp_fr_verdict fv;
    bool *frc = ddp_xcalloc(n, sizeof(*frc));
    json_t *recorder = json_null(), *reached = json_object();
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        fin[i] = (struct ddp_fr_input){k->r.rank, k->running ? k->fr : NULL, now - k->fr_moved_ms,
                                       k->has_view && k->view.nframes ? k->view.frame : NULL};
        if (k->fr) {
            char key[16];
            snprintf(key, sizeof(key), "%d", k->r.rank);
            json_object_set_new(reached, key, ddp_fr_summary_json(k->fr));
        }
    }
    struct ddp_fr_remote_named remote; /* ranks on other nodes (fr_remote.h) */
    ddp_fr_remote_decide(w->remote, w->attempt, now, fin, w->n, frc, &fv, &remote);
    if (fv.kind != DDP_FR_NONE) { /* the recorder wins over the stacks; the stack still says where */
        memcpy(culprit, frc, w->n * sizeof(*culprit));
        v.confidence = fv.nculprits ? DDP_HANG_HIGH : DDP_HANG_LOW;
        v.nculprits = fv.nculprits;
        v.mismatch = fv.kind != DDP_FR_BEHIND && !fv.nculprits;
        snprintf(v.op, sizeof(v.op), "%s", fv.op);
        snprintf(v.why, sizeof(v.why), "flight recorder: %s", fv.why);
        json_decref(recorder);
        recorder = ddp_fr_verdict_json(&fv);
    }
    free(fin);
    free(frc);
    if (fv.kind == DDP_FR_NONE && !v.nculprits && w->ras_why[0]) { /* no recorder: NCCL's RAS names them */
        memcpy(culprit, w->ras_named, w->n * sizeof(*culprit));
        for (size_t i = 0; i < w->n; i++)
            v.nculprits += culprit[i];
        v.confidence = DDP_HANG_MEDIUM;
        snprintf(v.why, sizeof(v.why), "%s", w->ras_why);
    }
    for (size_t i = 0; i < w->n; i++) {
        if (!culprit[i])
            continue;
        const struct wrank *k = &w->rk[i];
        ddp_buf_puts(&b, b.len ? "; " : "");
        rank_desc(&b, w, k);
        if (k->has_view)
            ddp_buf_printf(&b, " at %s", k->view.frame);
        json_array_append_new(culprits, rank_json(w, k, true));
    }
    ddp_fr_remote_named_take(&remote, &b, culprits);
    if (!b.len)
        ddp_buf_puts(&b, v.mismatch ? "collective mismatch, no culprit named" : "no culprit named");
    enum ddp_on_suspect act = w->spec->on_suspect;
    ddp_warn("attempt %d: suspected hang: %s; no progress for %llds (limit %llds): %s; %s", w->attempt, b.data,
             quiet / 1000, ddp_suspect_limit(&w->sus) / 1000, v.why,
             act == DDP_ONSUSPECT_WARN ? "the job runs on ([timeout] on_suspect = warn)"
                                       : "the job runs on until [timeout] on_suspect_after");
    ras_ask(w);
    json_t *fr = w->fr_asked ? json_array() : dump_flight_recorders(w);
    w->fr_asked = true;
    if (json_array_size(fr))
        ddp_info("attempt %d: asked torch's flight recorder of %zu rank%s to dump (TORCH_FR_DUMP_TEMP_FILE)",
                 w->attempt, json_array_size(fr), json_array_size(fr) == 1 ? "" : "s");
    ddp_jsonlog_event(
        w->rec, "suspect",
        ddp_jsonlog_pack("{s:i, s:I, s:I, s:s, s:o, s:s?, s:s, s:b, s:s, s:o, s:o, s:o}", "attempt", w->attempt,
                         "quiet_ms", (json_int_t)quiet, "limit_ms", (json_int_t)ddp_suspect_limit(&w->sus),
                         "confidence", ddp_hang_confidence_name(v.confidence), "culprits", culprits, "collective",
                         v.op[0] ? v.op : NULL, "why", v.why, "mismatch", v.mismatch, "action", on_suspect_name(act),
                         "flight_recorder", fr, "recorder", recorder, "reached", reached));
    w->warned_ms = now;
    if (act != DDP_ONSUSPECT_WARN && !w->acted && quiet >= w->spec->on_suspect_after_ms && w->hooks.act) {
        char *why = ddp_xasprintf("suspected hang for %llds ([timeout] on_suspect = %s): %s", quiet / 1000,
                                  on_suspect_name(act), v.why);
        w->acted = true;
        w->hooks.act(w->hooks.arg, culprit, why);
        free(why);
    }
    ddp_buf_free(&b);
    free(in);
    free(culprit);
}

static void evaluate(struct ddp_progress *w, long long now)
{
    long long quiet = ddp_suspect_stalled(&w->sus, now);
    if (!quiet) {
        if (w->suspected_ms) {
            long long lasted = now - w->quiet_since;
            ddp_info("attempt %d: progress again: the suspected hang ended after about %llds", w->attempt,
                     lasted / 1000);
            ddp_jsonlog_event(w->rec, "suspect_end",
                              ddp_jsonlog_pack("{s:i, s:I}", "attempt", w->attempt, "quiet_ms", (json_int_t)lasted));
        }
        w->suspected_ms = 0;
        w->fr_asked = false;
        return;
    }
    bool due = !w->suspected_ms || now - w->warned_ms >= REPEAT_MS;
    if (!w->suspected_ms) {
        w->suspected_ms = now;
        w->quiet_since = now - quiet;
    }
    bool act_due = w->spec->on_suspect != DDP_ONSUSPECT_WARN && !w->acted && quiet >= w->spec->on_suspect_after_ms;
    if (due || act_due)
        suspect_warn(w, quiet, now);
}

/* ---------------------------------------------------------------- the loop */

static void on_collect(uv_timer_t *t)
{
    struct ddp_progress *w = t->data;
    long long now = ddp_now_ms();
    if (w->asking)
        return;
    for (size_t i = 0; i < w->n; i++) {
        struct wrank *k = &w->rk[i];
        struct ddp_buf text = {0};
        if (!k->file.pending)
            continue;
        if (ddp_sample_take(&k->file, &text) > 0) {
            struct ddp_hang_view v;
            ddp_hang_parse_stack(text.data, text.len, &v);
            if (v.nframes > 0) {
                if (!k->has_view || v.where != k->view.where)
                    progress(w, i, now);
                k->view = v;
                k->has_view = true;
            }
            recorder_sample(w, i, text.data, text.len, now);
        }
        ddp_buf_free(&text);
    }
    /* a round counts for stragglers only when the job moved since the last one: during a hang (not yet
     * suspected) the stuck rank is outside while the others wait, but it is not slow, it is stuck */
    if (!w->suspected_ms && w->sus.last_ms > w->round_ms)
        count_round(w);
    w->round_ms = now;
    evaluate(w, now);
}

static void on_tick(uv_timer_t *t)
{
    struct ddp_progress *w = t->data;
    long long now = ddp_now_ms();
    bool poked = false;
    if (w->asking)
        return;
    for (size_t i = 0; i < w->n; i++) {
        struct wrank *k = &w->rk[i];
        struct stat st;
        if (!k->running)
            continue;
        if (k->hb_path && stat(k->hb_path, &st) == 0 &&
            (st.st_mtim.tv_sec != k->hb.tv_sec || st.st_mtim.tv_nsec != k->hb.tv_nsec)) {
            k->hb = st.st_mtim;
            progress(w, i, now);
        }
        if (!k->sampled || !w->spec->timeout_sample)
            continue;
        int rc = ddp_sample_poke(&k->file, k->groups, 2, now);
        poked |= rc == 0;
        if (rc == -ECANCELED && !k->file.told) { /* once per registration, on the launcher's stderr */
            k->file.told = true;
            ddp_warn("attempt %d: rank %d: live stack sampling stopped for this rank: %s", w->attempt, k->r.rank,
                     k->file.why);
        }
    }
    if (poked)
        uv_timer_start(&w->collect, on_collect, COLLECT_MS, 0);
    else
        evaluate(w, now);
}

struct ddp_progress *ddp_progress_start(uv_loop_t *loop, const struct ddp_spec *spec, const char *host, int attempt,
                                        const struct ddp_progress_rank *ranks, size_t n, struct ddp_jsonlog *rec,
                                        json_t *stragglers, const struct ddp_progress_hooks *hooks)
{
    if (!spec->timeout_sample || spec->sample_interval_ms <= 0 || n == 0)
        return NULL;
    struct ddp_progress *w = ddp_xcalloc(1, sizeof(*w));
    long long now = ddp_now_ms();
    struct ddp_suspect_cfg cfg = {spec->suspect_floor_ms, spec->suspect_setup_ms, 3};
    w->spec = spec;
    w->host = host;
    w->attempt = attempt;
    w->n = n;
    w->rec = rec;
    w->stragglers = stragglers;
    if (hooks)
        w->hooks = *hooks;
    w->rk = ddp_xcalloc(n, sizeof(*w->rk));
    w->ras_named = ddp_xcalloc(n, sizeof(*w->ras_named));
    for (size_t i = 0; i < n; i++) {
        struct wrank *k = &w->rk[i];
        k->r = ranks[i];
        k->sampled = ranks[i].stacks_path != NULL;
        ddp_sample_file_init(&k->file, ranks[i].stacks_path ? ranks[i].stacks_path : "");
        k->last_ms = now;
    }
    ddp_suspect_init(&w->sus, &cfg, n, now);
    uv_timer_init(loop, &w->tick);
    uv_timer_init(loop, &w->collect);
    w->tick.data = w->collect.data = w;
    w->open_timers = 2;
    uv_timer_start(&w->tick, on_tick, (uint64_t)spec->sample_interval_ms, (uint64_t)spec->sample_interval_ms);
    return w;
}

void ddp_progress_spawned(struct ddp_progress *w, size_t i, pid_t pgid, const char *hb_path)
{
    if (!w || i >= w->n)
        return;
    w->rk[i].hb_path = hb_path;
    w->rk[i].groups[0] = pgid;
    w->rk[i].running = true;
}

void ddp_progress_program(struct ddp_progress *w, size_t i, pid_t pid)
{
    if (w && i < w->n)
        w->rk[i].groups[1] = pid;
}

void ddp_progress_recorder(struct ddp_progress *w, json_t *recorder, const struct ddp_fr_remote *remote)
{
    if (w) {
        w->recorder = recorder;
        w->remote = remote;
    }
}

const struct ddp_fr_state *ddp_progress_fr(const struct ddp_progress *w, size_t i, long long now, long long *still_ms)
{
    if (!w || i >= w->n || !w->rk[i].fr)
        return NULL;
    *still_ms = now - w->rk[i].fr_moved_ms;
    return w->rk[i].fr;
}

void ddp_progress_exited(struct ddp_progress *w, size_t i)
{
    if (w && i < w->n)
        w->rk[i].running = false;
}

int ddp_progress_ask(struct ddp_progress *w, long long now)
{
    int asked = 0;
    if (!w)
        return 0;
    w->asking = true;
    for (size_t i = 0; i < w->n; i++) {
        struct wrank *k = &w->rk[i];
        k->ask = k->running && k->sampled && k->fr ? ASK_POKE : ASK_NO;
        asked += k->ask == ASK_POKE;
    }
    ddp_progress_answered(w, now); /* sends the signals */
    return asked;
}

bool ddp_progress_answered(struct ddp_progress *w, long long now)
{
    bool all = true;
    for (size_t i = 0; w && i < w->n; i++) {
        struct wrank *k = &w->rk[i];
        if (k->ask == ASK_POKE && k->running) {
            k->file.want_fr = true;
            int rc = ddp_sample_poke(&k->file, k->groups, 2, now);
            k->file.want_fr = false;
            if (rc == 0)
                k->ask = ASK_SENT;
            else if (rc != -EBUSY)
                k->ask = ASK_NO; /* gone, or sampling stopped: nothing to wait for */
        } else if (k->ask == ASK_SENT) {
            struct ddp_buf text = {0};
            struct ddp_fr_state *fr = ddp_xcalloc(1, sizeof(*fr));
            if (ddp_sample_take(&k->file, &text) > 0 && ddp_fr_parse(text.data, text.len, fr) == 0 && fr->has_entries) {
                recorder_sample(w, i, text.data, text.len, now);
                k->ask = ASK_ANSWERED;
            }
            free(fr);
            ddp_buf_free(&text);
        }
        all &= k->ask == ASK_NO || k->ask == ASK_ANSWERED;
    }
    return all;
}

void ddp_progress_output(struct ddp_progress *w, size_t i, long long now)
{
    if (w && i < w->n)
        progress(w, i, now);
}

static void on_closed(uv_handle_t *h)
{
    struct ddp_progress *w = h->data;
    if (--w->open_timers > 0)
        return;
    for (size_t i = 0; i < w->n; i++) {
        ddp_sample_file_free(&w->rk[i].file);
        free(w->rk[i].fr);
    }
    ddp_suspect_free(&w->sus);
    free(w->ras_named);
    free(w->rk);
    free(w);
}

void ddp_progress_stop(struct ddp_progress *w)
{
    if (!w)
        return;
    ddp_rasq_cancel(w->rasq);
    w->rasq = NULL;
    uv_timer_stop(&w->tick);
    uv_timer_stop(&w->collect);
    uv_close((uv_handle_t *)&w->tick, on_closed);
    uv_close((uv_handle_t *)&w->collect, on_closed);
}
