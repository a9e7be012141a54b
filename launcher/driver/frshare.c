/* frshare: see frshare.h. */
#include "driver/frshare.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "nodes/frame.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/live_ask.h"

struct sent {
    bool has;
    struct ddp_fr_state fr; /* what went to node 0 last */
};

struct ddp_frshare {
    uv_timer_t tick;
    bool leader;
    struct ddp_runner *rn;
    struct ddp_watch *watch;
    struct ddp_roster *nodes;
    struct ddp_records *rec;
    int attempt; /* the attempt sent[] is about, -1 none */
    struct sent *sent;
    size_t nsent;
};

static bool changed(const struct ddp_fr_state *a, const struct ddp_fr_state *b)
{
    return a->ngroups != b->ngroups || a->has_entries != b->has_entries || ddp_fr_moved(a, b) || ddp_fr_moved(b, a);
}

static void on_tick(uv_timer_t *t)
{
    struct ddp_frshare *f = t->data;
    const struct ddp_runner_attempt *r = ddp_runner_current(f->rn);
    long long now = ddp_now_ms();
    if (!r)
        return;
    if (ddp_runner_attempt_number(r) != f->attempt) {
        free(f->sent);
        f->nsent = ddp_runner_attempt_nworkers(r);
        f->sent = ddp_xcalloc(f->nsent ? f->nsent : 1, sizeof(*f->sent));
        f->attempt = ddp_runner_attempt_number(r);
    }
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(r) && i < f->nsent; i++) {
        long long still = 0;
        const struct ddp_fr_state *fr = ddp_live_fr_now(ddp_live_in_watch(ddp_watch_env(f->watch)), i, now, &still);
        if (!fr || (f->sent[i].has && !changed(&f->sent[i].fr, fr)))
            continue;
        const struct ddp_worker *w = ddp_runner_worker_plan(ddp_runner_attempt_worker(r, i));
        struct ddp_fr_remote_rank where = {w->local_rank, w->gpu, ""};
        char json[DDP_FRAME_FR_MAX + 1];
        snprintf(where.busid, sizeof(where.busid), "%s", w->gpu_busid ? w->gpu_busid : "");
        if (ddp_fr_remote_encode(fr, &where, json, sizeof(json)) < 0 ||
            ddp_roster_send_fr(f->nodes, ddp_runner_attempt_number(r), w->rank, still, json) < 0)
            continue;
        f->sent[i].has = true;
        f->sent[i].fr = *fr;
    }
}

struct ddp_frshare *ddp_frshare_new(uv_loop_t *loop, const struct ddp_spec *spec, bool leader, struct ddp_runner *rn,
                                    struct ddp_watch *watch, struct ddp_roster *nodes, struct ddp_records *rec)
{
    if (!spec->timeout_sample || spec->sample_interval_ms <= 0)
        return NULL;
    struct ddp_frshare *f = ddp_xcalloc(1, sizeof(*f));
    f->leader = leader;
    f->attempt = -1;
    f->rn = rn;
    f->watch = watch;
    f->nodes = nodes;
    f->rec = rec;
    uv_timer_init(loop, &f->tick);
    f->tick.data = f;
    if (!leader)
        uv_timer_start(&f->tick, on_tick, (uint64_t)spec->sample_interval_ms, (uint64_t)spec->sample_interval_ms);
    return f;
}

void ddp_frshare_received(struct ddp_frshare *f, const struct ddp_coord_event *ev)
{
    if (!f || !f->leader)
        return;
    const char *host = ddp_roster_runs_rank(f->nodes, ev->attempt, ev->node, ev->rank);
    if (!host) {
        ddp_debug("node %d: flight recorder of rank %d in attempt %d ignored: not one of its ranks now", ev->node,
                  ev->rank, ev->attempt);
        return;
    }
    if (ddp_fr_remote_put(ddp_watch_remote(f->watch), ev->attempt, ev->node, host, ev->rank, ev->still_ms, ev->reason,
                          ddp_now_ms(), ddp_records_recorder(f->rec)) == -EINVAL)
        ddp_debug("node %d: rank %d's flight recorder summary could not be read: ignored", ev->node, ev->rank);
}

static void on_closed(uv_handle_t *h)
{
    struct ddp_frshare *f = h->data;
    free(f->sent);
    free(f);
}

void ddp_frshare_close(struct ddp_frshare *f)
{
    if (!f)
        return;
    uv_timer_stop(&f->tick);
    uv_close((uv_handle_t *)&f->tick, on_closed);
}
