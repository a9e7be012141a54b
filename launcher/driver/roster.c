/* roster: see roster.h. The decisions are agent.h's table and the driver's; this file keeps node 0's view of the
 * nodes and speaks the channel. */
#include "driver/roster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/exit.h"
#include "nodes/layout.h"
#include "nodes/rdzv_etcd.h"
#include "records/jsonlog.h"

struct ddp_roster {
    struct ddp_roster_config cfg;
    struct ddp_records *rec;
    struct ddp_coord *coord;
    struct ddp_rdzv_etcd *etcd; /* through etcd (cfg.coord->etcd_endpoints): instead of coord; never the leader */
    bool leader;
    struct ddp_layout_node *nodes;    /* node 0: every node by node rank: joined, its own worker count, host */
    char **hosts;                     /* node 0: the host names nodes[].host points to */
    struct ddp_layout_round round;    /* node 0: how the current attempt ends across the nodes */
    struct ddp_layout_assign *assign; /* node 0: the round's layout, by node rank (NULL before the first) */
};

static bool round_live(enum ddp_agent_state agent)
{
    struct ddp_agent a = {.role = DDP_AR_LEADER, .state = agent};
    return ddp_agent_round_live(&a);
}

/* Through etcd: every agent follows the decision key; the elected one writes it (rdzv_etcd.h). */
static int etcd_new(uv_loop_t *loop, struct ddp_roster *n, ddp_coord_cb cb, void *arg, struct ddp_err *err)
{
    const struct ddp_roster_config *cf = &n->cfg;
    struct ddp_rdzv_etcd_config cfg = {
        .endpoints = cf->coord->etcd_endpoints,
        .conf = cf->job->spec->rdzv_conf,
        .id = cf->job->run_id,
        .secret = cf->coord->secret,
        .job = cf->coord->job,
        .min_nodes = cf->coord->min_nnodes,
        .max_nodes = cf->nnodes,
        .nproc = cf->nproc,
        .host = cf->job->hostname,
        .master_port = cf->master_port,
        .max_restarts = cf->job->spec->max_restarts,
        .lost_after_ms = cf->coord->lost_after_ms,
        .join_timeout_ms = cf->coord->join_timeout_ms,
        .last_call_ms = cf->coord->last_call_ms,
    };
    int rc = ddp_rdzv_etcd_start(loop, &cfg, cb, arg, &n->etcd, err);
    if (rc < 0)
        ddp_error("%s", err->msg);
    return rc;
}

int ddp_roster_new(uv_loop_t *loop, const struct ddp_roster_config *cf, struct ddp_records *rec, ddp_coord_cb cb,
                   void *arg, struct ddp_roster **out, struct ddp_err *err)
{
    struct ddp_coord_config cfg = {
        .node_rank = cf->coord->node,
        .nnodes = cf->nnodes,
        .addr = cf->master_addr,
        .port = cf->coord->port,
        .listen_fd = cf->coord->listen_fd,
        .secret = cf->coord->secret,
        .job = cf->coord->job,
        .nproc = cf->nproc,
        .host = cf->job->hostname,
        .lost_after_ms = cf->coord->lost_after_ms,
        .join_timeout_ms = cf->coord->join_timeout_ms,
    };
    struct ddp_roster *n = ddp_xcalloc(1, sizeof(*n));
    n->cfg = *cf;
    n->rec = rec;
    n->leader = cf->coord->node == 0;
    *out = n;
    if (cf->coord->etcd_endpoints)
        return etcd_new(loop, n, cb, arg, err);
    if (n->leader) {
        n->nodes = ddp_xcalloc((size_t)cf->nnodes, sizeof(*n->nodes));
        n->hosts = ddp_xcalloc((size_t)cf->nnodes, sizeof(*n->hosts));
        n->nodes[0] = (struct ddp_layout_node){true, cf->nproc, cf->job->hostname};
    }
    int rc = ddp_coord_start(loop, &cfg, cb, arg, &n->coord, err);
    if (rc < 0) {
        ddp_error("%s", err->msg);
        return rc;
    }
    if (n->leader)
        ddp_info("node 0: waiting up to %llds for %d other node%s to join on control port %s:%d",
                 cf->coord->join_timeout_ms / 1000, cf->nnodes - 1, cf->nnodes == 2 ? "" : "s", cf->master_addr,
                 ddp_coord_port(n->coord));
    else if (cf->coord->node > 0)
        ddp_info("node %d: joining node 0 at %s:%d", cf->coord->node, cf->master_addr, cf->coord->port);
    else
        ddp_info("joining the rendezvous at %s:%d", cf->master_addr, cf->coord->port);
    return 0;
}

void ddp_roster_free(struct ddp_roster *n)
{
    if (!n)
        return;
    free(n->nodes);
    for (int i = 0; n->hosts && i < n->cfg.nnodes; i++)
        free(n->hosts[i]);
    free(n->hosts);
    if (n->round.state)
        ddp_layout_round_free(&n->round);
    free(n->assign);
    ddp_rdzv_etcd_free(n->etcd);
    free(n);
}

void ddp_roster_close(struct ddp_roster *n, int status)
{
    if (n && n->etcd)
        ddp_rdzv_etcd_close(n->etcd);
    if (!n || !n->coord)
        return;
    if (n->leader)
        ddp_coord_send_exit(n->coord, status);
    ddp_coord_close(n->coord, NULL, NULL);
    n->coord = NULL;
}

/* ---------------------------------------------------------------- the channel's events */

static bool leader_event(struct ddp_roster *n, const struct ddp_coord_event *ev, const struct ddp_roster_view *v,
                         struct ddp_agent_event_data *ae, char *why, size_t why_size)
{
    int nn = n->cfg.nnodes;
    bool live = round_live(v->agent);
    switch (ev->kind) {
    case DDP_COORD_JOINED:
        if (ev->node <= 0 || ev->node >= nn)
            return false;
        free(n->hosts[ev->node]);
        n->hosts[ev->node] = ddp_xstrdup(ev->host);
        n->nodes[ev->node] = (struct ddp_layout_node){true, ev->nproc, n->hosts[ev->node]};
        ddp_records_event(n->rec, "node_join", ddp_jsonlog_pack("{s:i}", "node", ev->node));
        ddp_info("node %d joined from %s with %d worker%s (%d of %d nodes up)%s", ev->node, ev->host, ev->nproc,
                 ev->nproc == 1 ? "" : "s", 1 + ddp_coord_joined(n->coord), nn,
                 v->agent == DDP_AS_JOINING ? "" : "; it takes part from the next restart");
        ae->kind = DDP_AE_JOINED;
        ae->all = ddp_coord_joined(n->coord) == nn - 1;
        return true;
    case DDP_COORD_LOST:
        if (ev->node <= 0 || ev->node >= nn)
            return false;
        n->nodes[ev->node].up = false;
        snprintf(why, why_size, "node %d lost: %s", ev->node, ev->reason);
        ddp_records_event(n->rec, "node_lost", ddp_jsonlog_pack("{s:i, s:s}", "node", ev->node, "reason", ev->reason));
        ddp_error("%s", why);
        ae->kind = DDP_AE_NODE_LOST;
        ae->status = DDP_EXIT_LAUNCHER;
        ae->fresh = live && ddp_layout_round_end(&n->round, n->round.attempt, ev->node, 1, why);
        ae->round_done = live && ddp_layout_round_done(&n->round);
        return true;
    case DDP_COORD_REPORT:
        if (!live)
            return false;
        if (ev->reason[0])
            snprintf(why, why_size, "node %d failed (status %d): %s", ev->node, ev->status, ev->reason);
        else
            snprintf(why, why_size, "node %d failed (status %d)", ev->node, ev->status);
        ae->kind = DDP_AE_NODE_REPORT;
        ae->status = ev->status;
        ae->fresh = ddp_layout_round_end(&n->round, ev->attempt, ev->node, ev->status, ev->reason);
        ae->round_done = ddp_layout_round_done(&n->round);
        return true;
    default:
        return false;
    }
}

static bool follower_event(struct ddp_roster *n, const struct ddp_coord_event *ev, const struct ddp_roster_view *v,
                           struct ddp_agent_event_data *ae)
{
    const struct ddp_roster_config *cf = &n->cfg;
    const char *who = n->etcd ? "the job's decision in etcd" : "node 0";
    switch (ev->kind) {
    case DDP_COORD_JOINED:
        if (!n->etcd)
            ddp_info("node %d: joined node 0 (%s:%d)", ev->node, cf->master_addr, cf->coord->port);
        ae->kind = DDP_AE_JOINED;
        return true;
    case DDP_COORD_START:
        if (v->attempt >= 0) {
            ddp_warn("attempt %d: %s says start while attempt %d still runs here; ignored", ev->attempt, who,
                     v->attempt);
            return false;
        }
        ae->kind = DDP_AE_START;
        return true;
    case DDP_COORD_STOP:
        if (v->attempt < 0 || v->attempt != ev->attempt)
            return false; /* an earlier attempt's: this one was not stopped */
        if (!v->stopping)
            ddp_warn("attempt %d: %s says stop (%s); stopping the workers", ev->attempt, who, ev->reason);
        ae->kind = DDP_AE_STOP;
        return true;
    case DDP_COORD_EXIT:
        ae->kind = DDP_AE_EXIT;
        ae->status = ev->status;
        return true;
    case DDP_COORD_LOST:
        if (n->etcd)
            ddp_error("etcd: %s: %s", ev->reason,
                      v->agent == DDP_AS_JOINING ? "exiting" : "stopping the workers here and exiting");
        else if (v->agent != DDP_AS_JOINING)
            ddp_error("node 0 is gone (%s): stopping the workers here and exiting", ev->reason);
        else if (cf->coord->node > 0)
            ddp_error("node %d cannot join node 0: %s", cf->coord->node, ev->reason);
        else
            ddp_error("%s cannot join node 0: %s", cf->job->hostname, ev->reason);
        ae->kind = DDP_AE_COORD_LOST;
        return true;
    default:
        return false;
    }
}

bool ddp_roster_translate(struct ddp_roster *n, const struct ddp_coord_event *ev, const struct ddp_roster_view *v,
                          struct ddp_agent_event_data *ae, char *why, size_t why_size)
{
    memset(ae, 0, sizeof(*ae));
    why[0] = '\0';
    return n->leader ? leader_event(n, ev, v, ae, why, why_size) : follower_event(n, ev, v, ae);
}

int ddp_roster_last_call(const struct ddp_roster *n)
{
    const struct ddp_roster_config *cf = &n->cfg;
    int nup = 1 + ddp_coord_joined(n->coord);
    return n->leader && cf->coord->dynamic && cf->coord->min_nnodes < cf->nnodes && nup >= cf->coord->min_nnodes &&
                   nup < cf->nnodes
               ? nup
               : 0;
}

void ddp_roster_join_timeout(struct ddp_roster *n, struct ddp_agent_event_data *ae, struct ddp_err *err)
{
    const struct ddp_roster_config *cf = &n->cfg;
    int nup = 1 + ddp_coord_joined(n->coord);
    *ae = (struct ddp_agent_event_data){.kind = DDP_AE_JOIN_TIMEOUT, .all = nup >= cf->coord->min_nnodes};
    if (ae->all && ddp_roster_last_call(n))
        ddp_info("%d of %d nodes joined (at least %d wanted); last call (%llds) over: starting with them", nup,
                 cf->nnodes, cf->coord->min_nnodes, (cf->coord->last_call_ms + 500) / 1000);
    else if (ae->all)
        ddp_warn("only %d of %d nodes joined within %llds; starting with them", nup, cf->nnodes,
                 cf->coord->join_timeout_ms / 1000);
    else
        ddp_errf(err, -ETIMEDOUT, "only %d of %d nodes joined within %llds (join_timeout)", nup, cf->nnodes,
                 cf->coord->join_timeout_ms / 1000);
}

bool ddp_roster_join_progress(struct ddp_roster *n, long long waited_ms)
{
    const struct ddp_roster_config *cf = &n->cfg;
    struct ddp_buf missing = {0};
    int nup = 1 + ddp_coord_joined(n->coord);
    if (nup >= cf->nnodes)
        return false;
    /* as ranges, the first 16 of them: 1,000 nodes starting in order leave one range, not 4 KB of numbers */
    int runs = 0, unlisted = 0;
    for (int i = 1; n->nodes && i < cf->nnodes; i++) {
        if (n->nodes[i].up || (i > 1 && !n->nodes[i - 1].up))
            continue; /* not the first of a run of missing nodes */
        int j = i;
        while (j + 1 < cf->nnodes && !n->nodes[j + 1].up)
            j++;
        if (runs++ >= 16)
            unlisted += j - i + 1;
        else if (j == i)
            ddp_buf_printf(&missing, "%s%d", missing.len ? ", " : "", i);
        else
            ddp_buf_printf(&missing, "%s%d-%d", missing.len ? ", " : "", i, j);
    }
    if (unlisted)
        ddp_buf_printf(&missing, " and %d more", unlisted);
    ddp_info("node 0: waiting for %d more node%s to join (%d of %d up%s%s; %llds of %llds)", cf->nnodes - nup,
             cf->nnodes - nup == 1 ? "" : "s", nup, cf->nnodes, missing.len ? "; missing " : "",
             missing.len ? missing.data : "", (waited_ms + 500) / 1000, cf->coord->join_timeout_ms / 1000);
    ddp_buf_free(&missing);
    return true;
}

/* ---------------------------------------------------------------- rounds */

int ddp_roster_start(struct ddp_roster *n, int attempt, int nproc, int master_port, struct ddp_roster_place *out,
                     struct ddp_err *err)
{
    const struct ddp_roster_config *cf = &n->cfg;
    int nn = cf->nnodes, world = 0, k, nup = 0;
    struct ddp_layout_assign *as = ddp_xcalloc((size_t)nn, sizeof(*as));
    struct ddp_layout_node *now = ddp_xcalloc((size_t)nn, sizeof(*now));
    for (int i = 0; i < nn; i++) {
        now[i] = n->nodes[i];
        now[i].nproc = i == 0 ? nproc : ddp_layout_scale(n->nodes[i].nproc, cf->nproc, nproc);
        nup += now[i].up;
    }
    k = ddp_layout_nodes(nn, now, cf->coord->dynamic, cf->coord->min_nnodes, as, &world);
    if (k < 0) {
        free(as);
        free(now);
        return ddp_errf(err, -ENODEV, "only %d node%s up, the job needs at least %d (nnodes): giving up", nup,
                        nup == 1 ? "" : "s", cf->coord->min_nnodes);
    }
    for (int g = 0; g < k; g++)
        for (int i = 0; i < nn; i++)
            if (as[i].nproc > 0 && as[i].group_rank == g)
                ddp_info("attempt %d: group rank %d = node %d (%s): %d worker%s, ranks %d-%d of %d", attempt, g, i,
                         now[i].host && *now[i].host ? now[i].host : "?", as[i].nproc, as[i].nproc == 1 ? "" : "s",
                         as[i].rank_base, as[i].rank_base + as[i].nproc - 1, world);
    *out = (struct ddp_roster_place){
        .node_rank = as[0].group_rank, .nnodes = k, .rank_base = as[0].rank_base, .world_size = world};
    ddp_layout_round_begin(&n->round, nn, attempt, as);
    ddp_coord_send_start(n->coord, attempt, world, k, master_port, as);
    free(n->assign);
    n->assign = as;
    free(now);
    if (k < nn)
        ddp_warn("attempt %d: on %d of %d nodes, world size %d", attempt, k, nn, world);
    return 0;
}

bool ddp_roster_local_end(struct ddp_roster *n, int status)
{
    ddp_layout_round_end(&n->round, n->round.attempt, 0, status, status ? "node 0's workers failed" : "");
    return ddp_layout_round_done(&n->round);
}

void ddp_roster_stop(struct ddp_roster *n, const char *why)
{
    if (n->coord)
        ddp_coord_send_stop(n->coord, n->round.attempt, why);
}

int ddp_roster_round_attempt(const struct ddp_roster *n)
{
    return n->round.attempt;
}

void ddp_roster_report(struct ddp_roster *n, int attempt, int status, const char *why)
{
    if (n->etcd)
        ddp_rdzv_etcd_report(n->etcd, attempt, status, why);
    if (n->coord)
        ddp_coord_report(n->coord, attempt, status, why);
}

const char *ddp_roster_runs_rank(const struct ddp_roster *n, int attempt, int node, int rank)
{
    if (!n->leader || !n->assign || attempt != n->round.attempt || node <= 0 || node >= n->cfg.nnodes)
        return NULL;
    const struct ddp_layout_assign *a = &n->assign[node];
    if (a->nproc <= 0 || rank < a->rank_base || rank >= a->rank_base + a->nproc)
        return NULL;
    return n->hosts[node] && n->hosts[node][0] ? n->hosts[node] : "?";
}

int ddp_roster_send_fr(struct ddp_roster *n, int attempt, int rank, long long still_ms, const char *json)
{
    return n->coord ? ddp_coord_send_fr(n->coord, attempt, rank, still_ms, json) : -ENOTCONN;
}
