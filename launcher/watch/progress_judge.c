/* progress_judge: what the evidence says of a suspected hang (progress_internal.h): the verdict from the stacks,
 * the flight recorders or NCCL's RAS, each running rank's state from /proc and the job's, in words. Says and does
 * nothing itself (progress.c does, by the policy's table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "records/jsonlog.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/hang.h"
#include "watch/progress_internal.h"
#include "watch/rankstate.h"
#include "watch/suspect.h"

/* "rank 2 (local 2, host h, GPU 0000:17:00.0)" */
void ddp_progress_rank_desc(struct ddp_buf *b, const struct ddp_progress *w, const struct wrank *k)
{
    ddp_buf_printf(b, "rank %d (local %d, host %s, GPU %s)", k->r.rank, k->r.local_rank, w->host,
                   k->r.gpu_busid ? k->r.gpu_busid : "none");
}

json_t *ddp_progress_rank_json(const struct ddp_progress *w, const struct wrank *k, bool with_place)
{
    json_t *j = ddp_jsonlog_pack("{s:i, s:i, s:s, s:i, s:s?}", "rank", k->r.rank, "local_rank", k->r.local_rank, "host",
                                 w->host, "gpu", k->r.gpu, "gpu_busid", k->r.gpu_busid);
    if (with_place) {
        json_object_set_new(j, "collective", k->has_view && k->view.op[0] ? ddp_jsonlog_text(k->view.op) : json_null());
        json_object_set_new(j, "frame", k->has_view ? ddp_jsonlog_text(k->view.frame) : json_null());
    }
    return j;
}

/* The verdict from the stacks, then the flight recorder's (it wins), then NCCL RAS's where neither named one. */
static void judge_verdict(struct ddp_progress *w, long long now, struct judged *j)
{
    size_t n = w->n ? w->n : 1;
    struct ddp_hang_input *in = ddp_xcalloc(n, sizeof(*in));
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        in[i] = (struct ddp_hang_input){
            k->r.rank, k->running && k->has_view ? &k->view : NULL, false, k->running, k->last_ms, NULL, 0};
    }
    ddp_hang_decide(in, w->n, j->culprit, &j->v);
    free(in);
    struct ddp_fr_input *fin = ddp_xcalloc(n, sizeof(*fin));
    struct ddp_fr_verdict fv;
    bool *frc = ddp_xcalloc(n, sizeof(*frc));
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        fin[i] = (struct ddp_fr_input){k->r.rank, k->running ? k->fr : NULL, now - k->fr_moved_ms,
                                       k->has_view && k->view.nframes ? k->view.frame : NULL};
        if (k->fr) {
            char key[16];
            snprintf(key, sizeof(key), "%d", k->r.rank);
            json_object_set_new(j->reached, key, ddp_fr_summary_json(k->fr));
        }
    }
    struct ddp_fr_remote_named remote; /* ranks on other nodes (fr_remote.h) */
    ddp_fr_remote_decide(w->remote, w->attempt, now, fin, w->n, frc, &fv, &remote);
    if (fv.kind != DDP_FR_NONE) { /* the recorder wins over the stacks; the stack still says where */
        memcpy(j->culprit, frc, w->n * sizeof(*j->culprit));
        j->fr_verdict = true;
        j->deadlock = fv.nculprits && (fv.kind == DDP_FR_OP || fv.kind == DDP_FR_SHAPE || fv.kind == DDP_FR_ORDER);
        j->v.confidence = fv.nculprits ? DDP_HANG_HIGH : DDP_HANG_LOW;
        j->v.nculprits = fv.nculprits;
        j->v.mismatch = fv.kind != DDP_FR_BEHIND && !fv.nculprits;
        snprintf(j->v.op, sizeof(j->v.op), "%s", fv.op);
        snprintf(j->v.why, sizeof(j->v.why), "flight recorder: %s", fv.why);
        json_decref(j->recorder);
        j->recorder = ddp_fr_verdict_json(&fv);
    }
    free(fin);
    free(frc);
    if (fv.kind == DDP_FR_NONE && !j->v.nculprits && w->ras_why[0]) { /* no recorder: NCCL's RAS names them */
        memcpy(j->culprit, w->ras_named, w->n * sizeof(*j->culprit));
        for (size_t i = 0; i < w->n; i++)
            j->v.nculprits += j->culprit[i];
        j->v.confidence = DDP_HANG_MEDIUM;
        snprintf(j->v.why, sizeof(j->v.why), "%s", w->ras_why);
    }
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        if (!j->culprit[i])
            continue;
        ddp_buf_puts(&j->desc, j->desc.len ? "; " : "");
        ddp_progress_rank_desc(&j->desc, w, k);
        if (k->has_view)
            ddp_buf_printf(&j->desc, " at %s", k->view.frame);
        json_array_append_new(j->culprits, ddp_progress_rank_json(w, k, true));
    }
    ddp_fr_remote_named_take(&remote, &j->desc, j->culprits);
    if (!j->desc.len)
        ddp_buf_puts(&j->desc, j->v.mismatch ? "collective mismatch, no culprit named" : "no culprit named");
}

/* Each running rank's state from /proc and its evidence, and the job's: BUSY when a rank outside every collective
 * works (or worked earlier in this quiet spell and is not stuck now), STUCK when every culprit is stuck and the
 * verdict is of medium or high confidence, else WEAK. */
static enum ddp_suspect_state judge_states(struct ddp_progress *w, struct judged *j)
{
    size_t nculprits = 0, nstuck = 0, nrunning = 0, nbusy = 0;
    bool busy = false;
    for (size_t i = 0; i < w->n; i++) {
        struct wrank *k = &w->rk[i];
        memset(&k->state, 0, sizeof(k->state));
        if (!k->running)
            continue;
        struct ddp_rankstate_evidence ev = {.in_collective = (k->has_view && k->view.op[0]) ||
                                                             (j->fr_verdict && !j->culprit[i] && k->fr),
                                            .in_gpu_wait = k->has_view && ddp_rankstate_view_in_gpu_wait(&k->view),
                                            .culprit = j->culprit[i]};
        ddp_rankstate_classify(&k->proc_base, &k->proc_last, &ev, &k->state);
        if (j->deadlock && j->culprit[i] && k->state.state != DDP_RANKSTATE_BUSY) { /* waits where nobody comes */
            k->state.state = DDP_RANKSTATE_STUCK;
            snprintf(k->state.words, sizeof(k->state.words), "in a collective the others never match");
        }
        if (k->state.state == DDP_RANKSTATE_BUSY)
            k->worked = true;
        else if (k->worked && k->state.state != DDP_RANKSTATE_STUCK && k->state.state != DDP_RANKSTATE_WAITING)
            k->state.state = DDP_RANKSTATE_BUSY; /* it worked earlier in this quiet spell: not stuck now */
        busy |= k->state.state == DDP_RANKSTATE_BUSY;
        nbusy += k->state.state == DDP_RANKSTATE_BUSY;
        nrunning++;
        nculprits += j->culprit[i];
        nstuck += j->culprit[i] && k->state.state == DDP_RANKSTATE_STUCK;
    }
    j->all_busy = busy && nbusy == nrunning;
    if (busy)
        return DDP_SUSPECT_BUSY;
    return nculprits && nstuck == nculprits && j->v.confidence >= DDP_HANG_MEDIUM ? DDP_SUSPECT_STUCK
                                                                                  : DDP_SUSPECT_WEAK;
}

/* The job's state in words: "rank 5 is stuck (no CPU, no I/O for 30 s, at data.py:40 in fetch_batch); ranks 3-4
 * wait in all_reduce for it", "rank 0 works alone (CPU 100%, 38 MB/s written, at train.py:88 in save_checkpoint)
 * for 94 s while ranks 1-2 wait in all_reduce". */
static void judge_words(struct ddp_progress *w, struct judged *j, long long quiet)
{
    size_t n = w->n ? w->n : 1, nsubj = 0, nwait = 0;
    long long *waiting = ddp_xcalloc(n, sizeof(*waiting));
    bool busy = j->st == DDP_SUSPECT_BUSY;
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *k = &w->rk[i];
        bool subject = busy ? k->state.state == DDP_RANKSTATE_BUSY : j->culprit[i];
        if (k->running && !subject && (busy || k->state.state == DDP_RANKSTATE_WAITING))
            waiting[nwait++] = k->r.rank;
        if (!subject || !k->running)
            continue;
        ddp_buf_printf(&j->words, "%srank %d %s (%s%s%s)", nsubj++ ? "; " : "", k->r.rank,
                       busy                                    ? "works alone"
                       : k->state.state == DDP_RANKSTATE_STUCK ? "is stuck"
                                                               : "is behind",
                       k->state.words, k->has_view ? ", at " : "", k->has_view ? k->view.frame : "");
    }
    if (busy)
        ddp_buf_printf(&j->words, " for %lld s", quiet / 1000);
    if (nwait) {
        char list[256];
        ddp_fr_ranks_text(list, sizeof(list), waiting, nwait);
        ddp_buf_printf(&j->words, "%s%s %s wait%s%s%s", busy ? " while " : "; ", nwait == 1 ? "rank" : "ranks", list,
                       nwait == 1 ? "s" : "", j->v.op[0] ? " in " : "", j->v.op);
        if (!busy && nsubj)
            ddp_buf_printf(&j->words, " for %s", nsubj == 1 ? "it" : "them");
    }
    free(waiting);
}

void ddp_progress_judge(struct ddp_progress *w, long long quiet, long long now, struct judged *j)
{
    size_t n = w->n ? w->n : 1;
    memset(j, 0, sizeof(*j));
    j->culprit = ddp_xcalloc(n, sizeof(*j->culprit));
    j->culprits = json_array();
    j->recorder = json_null();
    j->reached = json_object();
    judge_verdict(w, now, j);
    j->st = judge_states(w, j);
    judge_words(w, j, quiet);
}

void ddp_progress_judged_free(struct judged *j)
{
    free(j->culprit);
    json_decref(j->culprits);
    json_decref(j->recorder);
    json_decref(j->reached);
    ddp_buf_free(&j->desc);
    ddp_buf_free(&j->words);
}
