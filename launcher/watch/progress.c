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
#include "records/jsonlog.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/hang.h"
#include "watch/progress_internal.h"
#include "watch/rankstate.h"
#include "watch/rasq.h"
#include "watch/sample.h"
#include "watch/suspect.h"
#include "watch/timeout.h"

#define COLLECT_MS 300     /* from the signals to reading what the ranks wrote (a dump takes ~1-15 ms) */
#define REPEAT_MS 60000    /* a suspicion's line again while it lasts */
#define PROC_QUIET_MS 2000 /* /proc is read for each running rank once the job made no progress this long */
#define EARLY_MS 15000     /* with a recorder and a stuck culprit, a hang is named this soon (after setup) */

static const char *on_suspect_name(enum ddp_on_suspect a)
{
    return a == DDP_ONSUSPECT_RESTART    ? "restart"
           : a == DDP_ONSUSPECT_DOWNSIZE ? "downsize"
           : a == DDP_ONSUSPECT_AUTO     ? "auto"
                                         : "warn";
}

static void progress(struct ddp_progress *w, size_t i, long long now)
{
    w->rk[i].last_ms = now;
    ddp_suspect_progress(&w->sus, now);
}

/* The attempt after a hang made progress: by a recorder move (recorder), else its first output (replaced by a
 * recorder move that comes later). */
static void training_again(struct ddp_progress *w, long long now, bool recorder)
{
    struct ddp_recovery *r = w->recovery;
    if (!r || r->attempt < 0 || !r->restarted_ms || r->attempt >= w->attempt ||
        (r->training_ms && !(r->training_provisional && recorder)))
        return;
    r->training_ms = now;
    r->training_provisional = !recorder;
}

static bool any_recorder(const struct ddp_progress *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->rk[i].running && w->rk[i].fr)
            return true;
    return false;
}

/* Read /proc of every running rank once the job has been quiet PROC_QUIET_MS (rankstate.h): the first reading
 * of a quiet spell stays as its base. */
static void read_proc(struct ddp_progress *w, long long now)
{
    bool quiet = now - w->sus.last_ms >= PROC_QUIET_MS;
    for (size_t i = 0; i < w->n; i++) {
        struct wrank *k = &w->rk[i];
        struct ddp_rankstate_sample cur;
        if (!quiet || !k->running || k->groups[1] <= 0) {
            k->proc_base.ok = k->proc_last.ok = false;
            continue;
        }
        if (ddp_rankstate_read("/proc", k->groups[1], now, w->clk_tck, &cur) < 0)
            continue;
        if (!k->proc_base.ok)
            k->proc_base = cur;
        k->proc_last = cur;
    }
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
    json_t *j = ddp_progress_rank_json(w, k, false);
    json_object_set_new(j, "attempt", json_integer(w->attempt));
    json_object_set_new(j, "frame", k->has_view ? ddp_jsonlog_text(k->view.frame) : json_null());
    k->straggler = j;
    straggler_update(w, i);
    ddp_progress_rank_desc(&b, w, k);
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
            if (k->fr)
                training_again(w, now, true);
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

/* Each running rank's state for the suspect event: {rank: {"state", "words"}}. */
static json_t *states_json(const struct ddp_progress *w)
{
    json_t *o = json_object();
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        char key[16];
        if (!k->running)
            continue;
        snprintf(key, sizeof(key), "%d", k->r.rank);
        json_object_set_new(o, key,
                            ddp_jsonlog_pack("{s:s, s:s, s:f}", "state", ddp_rankstate_name(k->state.state), "words",
                                             k->state.words, "cpu_pct", k->state.cpu_pct));
    }
    return o;
}

/* The suspected hang's line and its `suspect` event (then, the first time, NCCL RAS and the recorders' dumps). */
static void say_suspect(struct ddp_progress *w, struct judged *j, long long quiet, long long now,
                        enum ddp_suspect_action act, long long stop_in_ms)
{
    enum ddp_on_suspect mode = w->spec->on_suspect;
    char *follows = mode == DDP_ONSUSPECT_WARN   ? ddp_xstrdup("the job runs on ([timeout] on_suspect = warn)")
                    : mode != DDP_ONSUSPECT_AUTO ? ddp_xstrdup("the job runs on until [timeout] on_suspect_after")
                    : act == DDP_SUSPECT_STOP    ? ddp_xstrdup("stopping it ([timeout] on_suspect = auto)")
                    : j->st == DDP_SUSPECT_STUCK
                        ? ddp_xasprintf("stopping it in %llds unless it moves ([timeout] on_suspect = auto)",
                                        (stop_in_ms + 999) / 1000)
                        : ddp_xstrdup("the job runs on: the evidence is weak ([timeout] on_suspect = auto)");
    ddp_warn("attempt %d: suspected hang: %s; no progress for %llds (limit %llds): %s%s%s; %s", w->attempt,
             j->desc.data, quiet / 1000, ddp_suspect_limit(&w->sus) / 1000, j->v.why, j->words.len ? "; " : "",
             j->words.len ? j->words.data : "", follows);
    free(follows);
    if (!w->said_hang || now - w->warned_ms >= REPEAT_MS) /* not again for the line that says it is now stuck */
        ddp_progress_ras_ask(w);
    json_t *fr = w->fr_asked ? json_array() : dump_flight_recorders(w);
    w->fr_asked = true;
    if (json_array_size(fr))
        ddp_info("attempt %d: asked torch's flight recorder of %zu rank%s to dump (TORCH_FR_DUMP_TEMP_FILE)",
                 w->attempt, json_array_size(fr), json_array_size(fr) == 1 ? "" : "s");
    json_t *ev =
        ddp_jsonlog_pack("{s:i, s:I, s:I, s:s, s:O, s:s?, s:s, s:b, s:s, s:o, s:O, s:O}", "attempt", w->attempt,
                         "quiet_ms", (json_int_t)quiet, "limit_ms", (json_int_t)ddp_suspect_limit(&w->sus),
                         "confidence", ddp_hang_confidence_name(j->v.confidence), "culprits", j->culprits, "collective",
                         j->v.op[0] ? j->v.op : NULL, "why", j->v.why, "mismatch", j->v.mismatch, "action",
                         on_suspect_name(mode), "flight_recorder", fr, "recorder", j->recorder, "reached", j->reached);
    json_object_set_new(ev, "state", json_string(ddp_suspect_state_name(j->st)));
    json_object_set_new(ev, "state_text", ddp_jsonlog_text(j->words.data ? j->words.data : ""));
    json_object_set_new(ev, "states", states_json(w));
    ddp_jsonlog_event(w->rec, "suspect", ev);
    w->warned_ms = now;
    w->said_hang = true;
}

/* The one "works alone" line of the attempt, and its event. */
static void say_alone(struct ddp_progress *w, struct judged *j, long long quiet)
{
    char *limit = w->spec->busy_limit_ms > 0 ? ddp_timeout_duration(w->spec->busy_limit_ms) : ddp_xstrdup("off");
    ddp_info("attempt %d: %s: no action before [timeout] busy_limit (%s)", w->attempt, j->words.data, limit);
    ddp_jsonlog_event(w->rec, "works_alone",
                      ddp_jsonlog_pack("{s:i, s:I, s:s, s:I, s:o}", "attempt", w->attempt, "quiet_ms",
                                       (json_int_t)quiet, "text", j->words.data, "busy_limit_ms",
                                       (json_int_t)w->spec->busy_limit_ms, "states", states_json(w)));
    free(limit);
    w->alone_said = true;
}

/* The recovery record (records.h): the hang was named, or stopped. */
static void recovery_mark(struct ddp_progress *w, const struct judged *j, long long began, long long now, bool stop)
{
    struct ddp_recovery *r = w->recovery;
    if (!r)
        return;
    if (r->attempt != w->attempt) {
        memset(r, 0, sizeof(*r));
        r->attempt = w->attempt;
        r->began_ms = began;
        r->named_ms = now;
    }
    ddp_text_copy(r->state, sizeof(r->state), ddp_suspect_state_name(j->st));
    ddp_text_copy(r->text, sizeof(r->text), j->words.data ? j->words.data : "");
    if (stop)
        r->stopped_ms = now;
}

/* Stop the attempt (STOP: as a hang of the culprits; END: of the busy ranks, and the job ends). */
static void act_on(struct ddp_progress *w, struct judged *j, enum ddp_suspect_action a, long long quiet, long long now)
{
    bool end = a == DDP_SUSPECT_END;
    char *why;
    if (end) {
        char *limit = ddp_timeout_duration(w->spec->busy_limit_ms);
        why = ddp_xasprintf("%s, past [timeout] busy_limit (%s)", j->words.data, limit);
        free(limit);
        for (size_t i = 0; i < w->n; i++)
            j->culprit[i] = w->rk[i].running && w->rk[i].state.state == DDP_RANKSTATE_BUSY;
    } else {
        why = ddp_xasprintf("suspected hang for %llds ([timeout] on_suspect = %s): %s%s%s", quiet / 1000,
                            on_suspect_name(w->spec->on_suspect), j->words.len ? j->words.data : "",
                            j->words.len ? "; " : "", j->v.why);
    }
    recovery_mark(w, j, now - quiet, now, true);
    w->acted = true;
    if (w->hooks.act)
        w->hooks.act(w->hooks.arg, j->culprit, why, end);
    free(why);
}

/* No progress for quiet ms (a suspicion, or an early look with a recorder: early): judge it, then do what the
 * policy's table says (hooks.decide; without one, only say it). */
static void suspect(struct ddp_progress *w, long long quiet, long long now, bool early)
{
    struct judged j;
    ddp_progress_judge(w, quiet, now, &j);
    if (early && !(j.fr_verdict && j.st == DDP_SUSPECT_STUCK)) { /* named early only when it is clear */
        ddp_progress_judged_free(&j);
        return;
    }
    if (!w->suspected_ms) {
        w->suspected_ms = now;
        w->quiet_since = now - quiet;
    }
    w->stuck_since = j.st != DDP_SUSPECT_STUCK ? 0 : w->stuck_since ? w->stuck_since : now;
    struct ddp_suspect_facts f = {(int)w->spec->on_suspect,
                                  j.st,
                                  quiet,
                                  w->stuck_since ? now - w->stuck_since : 0,
                                  j.st == DDP_SUSPECT_BUSY ? quiet : 0,
                                  w->spec->on_suspect_after_ms,
                                  ddp_suspect_confirm_ms(w->spec->suspect_floor_ms, w->spec->sample_interval_ms),
                                  w->spec->busy_limit_ms};
    enum ddp_suspect_action a = w->hooks.decide ? w->hooks.decide(&f) : DDP_SUSPECT_SAY;
    if (!w->hooks.decide && j.st == DDP_SUSPECT_BUSY)
        a = DDP_SUSPECT_ALONE;
    bool due = !w->said_hang || now - w->warned_ms >= REPEAT_MS;
    if (a == DDP_SUSPECT_ALONE && j.all_busy) { /* every rank works: nobody works alone, nothing to say */
        ddp_progress_judged_free(&j);
        return;
    }
    if ((a == DDP_SUSPECT_ALONE || a == DDP_SUSPECT_END) && !w->alone_said)
        say_alone(w, &j, quiet);
    if ((a == DDP_SUSPECT_SAY && due) || (a == DDP_SUSPECT_STOP && !w->said_hang) ||
        (a == DDP_SUSPECT_SAY && j.st == DDP_SUSPECT_STUCK && !w->said_stuck)) {
        say_suspect(w, &j, quiet, now, a, f.confirm_ms - f.stuck_ms);
        w->said_stuck |= j.st == DDP_SUSPECT_STUCK;
        if (j.st == DDP_SUSPECT_STUCK)
            recovery_mark(w, &j, now - quiet, now, false);
    }
    if ((a == DDP_SUSPECT_STOP || a == DDP_SUSPECT_END) && !w->acted)
        act_on(w, &j, a, quiet, now);
    ddp_progress_judged_free(&j);
}

static void evaluate(struct ddp_progress *w, long long now)
{
    long long quiet = ddp_suspect_stalled(&w->sus, now);
    long long raw = now - w->sus.last_ms, early = w->spec->suspect_floor_ms < EARLY_MS ? 0 : EARLY_MS;
    if (!quiet && early && raw >= early && now - w->sus.start_ms >= w->sus.cfg.setup_ms && any_recorder(w)) {
        suspect(w, raw, now, true);
        return;
    }
    if (!quiet) {
        if (w->suspected_ms && w->said_hang) {
            long long lasted = now - w->quiet_since;
            ddp_info("attempt %d: progress again: the suspected hang ended after about %llds", w->attempt,
                     lasted / 1000);
            ddp_jsonlog_event(w->rec, "suspect_end",
                              ddp_jsonlog_pack("{s:i, s:I}", "attempt", w->attempt, "quiet_ms", (json_int_t)lasted));
        }
        w->suspected_ms = w->stuck_since = 0;
        w->said_hang = w->said_stuck = w->fr_asked = false;
        for (size_t i = 0; i < w->n; i++)
            w->rk[i].worked = false;
        return;
    }
    if (!w->acted)
        suspect(w, quiet, now, false);
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
    read_proc(w, now);
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
    w->clk_tck = sysconf(_SC_CLK_TCK);
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
    if (w && i < w->n) {
        progress(w, i, now);
        training_again(w, now, false);
    }
}

void ddp_progress_recovery(struct ddp_progress *w, struct ddp_recovery *r, long long now)
{
    if (!w)
        return;
    w->recovery = r;
    if (r && r->attempt >= 0 && r->attempt < w->attempt && r->stopped_ms && !r->restarted_ms)
        r->restarted_ms = now;
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
