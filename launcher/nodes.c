/* nodes: see nodes.h. The decisions are agent.h's table; this file feeds it and carries its actions out. */
#include "nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit.h"
#include "report.h"
#include "supervise_internal.h"

static void finish(struct sup *s, int status)
{
    ddp_sup_write_records(s, status);
    ddp_sup_retire(s);
    s->exit_status = status;
    s->done = true;
    ddp_sup_close(s);
}

/* How this node's part of the attempt ended, as a status for REPORT (0 = every worker succeeded). */
static int local_status(const struct sup *s)
{
    if (s->pol.state == DDP_PS_RUNNING || s->pol.state == DDP_PS_DONE)
        return s->pol.state == DDP_PS_DONE ? s->exit_status : 0;
    switch (s->pol.stop) {
    case DDP_STOP_SIGNAL:
        return ddp_exit_signal(s->pol.stop_signo);
    case DDP_STOP_TIMEOUT:
        return DDP_EXIT_TIMEOUT;
    case DDP_STOP_FAILURE:
        return s->pol.stop_status ? s->pol.stop_status : DDP_EXIT_LAUNCHER;
    case DDP_STOP_REMOTE: /* node 0 stopped it: not this node's failure, but not a success either */
        return DDP_EXIT_LAUNCHER;
    case DDP_STOP_NONE:
        break;
    }
    return 0;
}

static int leader_start(struct sup *s, int attempt, int nproc)
{
    int n = s->ctx->nnodes, world = 0, k, nup = 0;
    struct ddp_layout_assign *as = ddp_xcalloc((size_t)n, sizeof(*as));
    struct ddp_layout_node *now = ddp_xcalloc((size_t)n, sizeof(*now));
    for (int i = 0; i < n; i++) {
        now[i] = s->nodes[i];
        now[i].nproc = i == 0 ? nproc : ddp_layout_scale(s->nodes[i].nproc, s->ctx->nproc, nproc);
        nup += now[i].up;
    }
    k = ddp_layout_nodes(n, now, s->ctx->coord_dynamic, s->ctx->min_nnodes, as, &world);
    if (k < 0) {
        free(as);
        free(now);
        return ddp_errf(s->err, -ENODEV, "only %d node%s up, the job needs at least %d (nnodes): giving up", nup,
                        nup == 1 ? "" : "s", s->ctx->min_nnodes);
    }
    for (int g = 0; g < k; g++)
        for (int i = 0; i < n; i++)
            if (as[i].nproc > 0 && as[i].group_rank == g)
                ddp_info("attempt %d: group rank %d = node %d (%s): %d worker%s, ranks %d-%d of %d", attempt, g, i,
                         now[i].host && *now[i].host ? now[i].host : "?", as[i].nproc, as[i].nproc == 1 ? "" : "s",
                         as[i].rank_base, as[i].rank_base + as[i].nproc - 1, world);
    s->actx.node_rank = as[0].group_rank;
    s->actx.nnodes = k;
    s->actx.rank_base = as[0].rank_base;
    s->actx.world_size = world;
    ddp_layout_round_begin(&s->round, n, attempt, as);
    ddp_coord_send_start(s->coord, attempt, world, k, s->actx.master_port, as);
    free(as);
    free(now);
    if (k < n)
        ddp_warn("attempt %d: on %d of %d nodes, world size %d", attempt, k, n, world);
    return ddp_sup_start_attempt(s, attempt, nproc);
}

/* Node 0: another node failed (or was lost) in the current attempt: the whole job stops. */
static void leader_node_failed(struct sup *s, int status, const char *why, bool disarm_grace)
{
    struct ddp_pevent_data ev = {.kind = DDP_PE_NODE_FAILED, .status = status};
    if (s->pol.state != DDP_PS_RUNNING)
        return;
    ddp_error("attempt %d: %s; stopping the workers on every node", s->round.attempt, why);
    if (status == DDP_EXIT_TIMEOUT) {
        free(s->timeout_reason);
        s->timeout_reason = ddp_xstrdup(why);
    }
    s->stop_why = why;
    ddp_sup_feed(s, &ev);
    s->stop_why = NULL;
    if (disarm_grace) {
        /* our own workers are already gone: nothing to wait for or kill here */
        uv_timer_stop(&s->grace);
        s->grace_armed = false;
    }
}

/* Other nodes: tell node 0 how this node's part of the attempt ended (the workers all ended: LOCAL_DONE). */
static void follower_report(struct sup *s)
{
    int st = local_status(s);
    int attempt = s->cur ? s->cur->plan.attempt : s->pol.attempt;
    char why[600] = "";
    if (st != 0 && s->pol.stop != DDP_STOP_REMOTE) {
        if (s->timeout_reason)
            snprintf(why, sizeof(why), "%s: %s", s->ctx->hostname, s->timeout_reason);
        else if (s->root.set)
            snprintf(why, sizeof(why), "%s: rank %d (local %d) %s %d%s%s", s->ctx->hostname, s->root.rank,
                     s->root.local_rank, s->root.signo ? "died by signal" : "exited with code",
                     s->root.signo ? s->root.signo : s->root.status, s->root.class_name ? ", " : "",
                     s->root.class_name ? s->root.class_name : "");
        if (s->pol.stop != DDP_STOP_SIGNAL)
            ddp_sup_print_summary(s, st);
    }
    if (s->coord)
        ddp_coord_report(s->coord, attempt, st, why);
    ddp_sup_retire(s);
}

/* Other nodes: node 0 said START (cev): start this node's workers of the attempt. */
static void follower_start(struct sup *s, const struct ddp_coord_event *cev)
{
    struct ddp_aevent_data failed = {.kind = DDP_AE_START_FAILED};
    if (cev->attempt > 0)
        ddp_warn("attempt %d: restarting as attempt %d with %d worker%s here, world size %d (node 0's decision)",
                 cev->attempt - 1, cev->attempt, cev->nproc, cev->nproc == 1 ? "" : "s", cev->world_size);
    s->actx.node_rank = cev->group_rank;
    s->actx.nnodes = cev->group_world_size;
    s->actx.master_port = cev->master_port;
    s->actx.rank_base = cev->rank_base;
    s->actx.world_size = cev->world_size;
    ddp_policy_init(&s->pol, s->spec, cev->nproc);
    s->pol.attempt = cev->attempt;
    ddp_sup_clear_others(s);
    ddp_sup_ended_clear(&s->root);
    ddp_info("attempt %d: starting %d worker%s (ranks %d-%d of %d)", cev->attempt, cev->nproc,
             cev->nproc == 1 ? "" : "s", cev->rank_base, cev->rank_base + cev->nproc - 1, cev->world_size);
    if (ddp_sup_start_attempt(s, cev->attempt, cev->nproc) < 0) {
        ddp_error("attempt %d: %s", cev->attempt, s->err->msg);
        if (ddp_agent_step(&s->agent, &failed).flags & DDP_AA_REPORT)
            ddp_coord_report(s->coord, cev->attempt, 1, s->err->msg);
    }
}

/* Feed one event to the node agent's table (agent.h) and carry out its actions. why: for NODE_FAILED, the line
 * saying which node failed; cev: the control channel's event behind it (a follower's START), or NULL. Returns
 * the result of starting an attempt on node 0 (START), else 0. */
static int agent_feed(struct sup *s, const struct ddp_aevent_data *ev, const char *why,
                      const struct ddp_coord_event *cev)
{
    enum ddp_astate before = s->agent.state;
    struct ddp_aaction a = ddp_agent_step(&s->agent, ev);
    int rc = 0;
    if (a.flags & DDP_AA_POLICY) {
        struct ddp_pevent_data pe = {.kind = DDP_PE_SIGNAL, .signo = ev->signo};
        ddp_sup_feed(s, &pe);
    }
    if ((a.flags & DDP_AA_STOP_WORKERS) && s->cur) {
        struct ddp_pevent_data pe = {.kind = DDP_PE_REMOTE_STOP};
        ddp_sup_feed(s, &pe); /* the policy stops only a RUNNING attempt: a stop already under way goes on */
    }
    if (a.flags & DDP_AA_NODE_FAILED)
        leader_node_failed(s, a.status, why ? why : "", a.flags & DDP_AA_DISARM_GRACE);
    if (a.flags & DDP_AA_REPORT)
        follower_report(s);
    if (a.flags & DDP_AA_DECIDE) {
        struct ddp_pevent_data pe = {.kind = DDP_PE_ALL_FINISHED};
        ddp_sup_feed(s, &pe);
    }
    if (a.flags & DDP_AA_START) {
        if (s->leader)
            rc = leader_start(s, s->pol.attempt, s->pol.nproc);
        else if (cev)
            follower_start(s, cev);
    }
    if (a.flags & DDP_AA_EXIT) {
        /* a signal ends the agent (not node 0's EXIT nor its loss, which win over a signal here) */
        if (ev->kind == DDP_AE_SIGNAL ||
            (ev->kind == DDP_AE_LOCAL_DONE && ev->signo > 0 && before != DDP_AS_EXITING && before != DDP_AS_LOST))
            ddp_error("stopped by %s", ddp_report_signame(ev->signo));
        finish(s, a.exit_status);
    }
    return rc;
}

/* Node 0: attempt 0 once the nodes joined (or enough of them at the join timeout). */
static void leader_begin(struct sup *s, const struct ddp_aevent_data *ev)
{
    struct ddp_aevent_data failed = {.kind = DDP_AE_START_FAILED};
    uv_timer_stop(&s->join);
    if (agent_feed(s, ev, NULL, NULL) < 0) {
        ddp_error("attempt 0: %s", s->err->msg);
        s->launcher_failed = true;
        ddp_agent_step(&s->agent, &failed);
        finish(s, 1);
    }
}

/* Node 0 waiting for the others: who is missing, elapsed, deadline, every 5 s. */
static void on_join_progress(uv_timer_t *t)
{
    struct sup *s = t->data;
    struct ddp_buf missing = {0};
    int nup = 1 + ddp_coord_joined(s->coord);
    if (s->agent.state != DDP_AS_JOINING || s->done || s->cur || nup >= s->ctx->nnodes) {
        uv_timer_stop(&s->joinlog);
        return;
    }
    for (int i = 1; s->nodes && i < s->ctx->nnodes; i++)
        if (!s->nodes[i].up)
            ddp_buf_printf(&missing, "%s%d", missing.len ? ", " : "", i);
    ddp_info("node 0: waiting for %d more node%s to join (%d of %d up%s%s; %llds of %llds)", s->ctx->nnodes - nup,
             s->ctx->nnodes - nup == 1 ? "" : "s", nup, s->ctx->nnodes, missing.len ? "; missing " : "",
             missing.len ? missing.data : "", (ddp_now_ms() - s->join_start_ms + 500) / 1000,
             s->ctx->join_timeout_ms / 1000);
    ddp_buf_free(&missing);
}

static void on_join_timeout(uv_timer_t *t)
{
    struct sup *s = t->data;
    int nup = 1 + ddp_coord_joined(s->coord);
    struct ddp_aevent_data ev = {.kind = DDP_AE_JOIN_TIMEOUT, .all = nup >= s->ctx->min_nnodes};
    if (s->agent.state != DDP_AS_JOINING || s->done)
        return;
    if (ev.all) {
        ddp_warn("only %d of %d nodes joined within %llds; starting with them", nup, s->ctx->nnodes,
                 s->ctx->join_timeout_ms / 1000);
        leader_begin(s, &ev);
        return;
    }
    ddp_errf(s->err, -ETIMEDOUT, "only %d of %d nodes joined within %llds (join_timeout)", nup, s->ctx->nnodes,
             s->ctx->join_timeout_ms / 1000);
    ddp_error("%s; exit status 75 (EX_TEMPFAIL: retry)", s->err->msg);
    uv_timer_stop(&s->joinlog);
    agent_feed(s, &ev, NULL, NULL); /* exits 75: a refusal a scheduler should retry, not a launcher failure */
}

static void leader_event(struct sup *s, const struct ddp_coord_event *ev)
{
    char why[700];
    int n = s->ctx->nnodes;
    struct ddp_aevent_data ae = {0};
    bool live = ddp_agent_round_live(&s->agent);
    switch (ev->kind) {
    case DDP_COORD_JOINED:
        if (ev->node <= 0 || ev->node >= n)
            break;
        free(s->hosts[ev->node]);
        s->hosts[ev->node] = ddp_xstrdup(ev->host);
        s->nodes[ev->node] = (struct ddp_layout_node){true, ev->nproc, s->hosts[ev->node]};
        ddp_record_event(s->rec, "node_join", json_pack("{s:i}", "node", ev->node));
        ddp_info("node %d joined from %s with %d worker%s (%d of %d nodes up)%s", ev->node, ev->host, ev->nproc,
                 ev->nproc == 1 ? "" : "s", 1 + ddp_coord_joined(s->coord), n,
                 s->agent.state == DDP_AS_JOINING ? "" : "; it takes part from the next restart");
        ae.kind = DDP_AE_JOINED;
        ae.all = ddp_coord_joined(s->coord) == n - 1;
        if (s->agent.state == DDP_AS_JOINING && ae.all)
            leader_begin(s, &ae);
        else
            agent_feed(s, &ae, NULL, NULL);
        break;
    case DDP_COORD_LOST:
        if (ev->node <= 0 || ev->node >= n)
            break;
        s->nodes[ev->node].up = false;
        snprintf(why, sizeof(why), "node %d lost: %s", ev->node, ev->reason);
        ddp_record_event(s->rec, "node_lost", json_pack("{s:i, s:s}", "node", ev->node, "reason", ev->reason));
        ddp_error("%s", why);
        ae.kind = DDP_AE_NODE_LOST;
        ae.status = DDP_EXIT_LAUNCHER;
        ae.fresh = live && ddp_layout_round_end(&s->round, s->round.attempt, ev->node, 1, why);
        ae.round_done = live && ddp_layout_round_done(&s->round);
        agent_feed(s, &ae, why, NULL);
        break;
    case DDP_COORD_REPORT:
        if (!live)
            break;
        if (ev->reason[0])
            snprintf(why, sizeof(why), "node %d failed (status %d): %s", ev->node, ev->status, ev->reason);
        else
            snprintf(why, sizeof(why), "node %d failed (status %d)", ev->node, ev->status);
        ae.kind = DDP_AE_NODE_REPORT;
        ae.status = ev->status;
        ae.fresh = ddp_layout_round_end(&s->round, ev->attempt, ev->node, ev->status, ev->reason);
        ae.round_done = ddp_layout_round_done(&s->round);
        agent_feed(s, &ae, why, NULL);
        break;
    default:
        break;
    }
}

static void follower_event(struct sup *s, const struct ddp_coord_event *ev)
{
    struct ddp_aevent_data ae = {0};
    switch (ev->kind) {
    case DDP_COORD_JOINED:
        s->coord_node = ev->node;
        ddp_info("node %d: joined node 0 (%s:%d)", ev->node, s->ctx->master_addr, s->ctx->coord_port);
        ae.kind = DDP_AE_JOINED;
        agent_feed(s, &ae, NULL, NULL);
        break;
    case DDP_COORD_START:
        ae.kind = DDP_AE_START;
        if (s->cur) {
            ddp_warn("attempt %d: node 0 says start while attempt %d still runs here; ignored", ev->attempt,
                     s->cur->plan.attempt);
            break;
        }
        agent_feed(s, &ae, NULL, ev);
        break;
    case DDP_COORD_STOP:
        if (!s->cur || s->cur->plan.attempt != ev->attempt)
            break; /* an earlier attempt's: this one was not stopped */
        if (s->pol.state == DDP_PS_RUNNING)
            ddp_warn("attempt %d: node 0 says stop (%s); stopping the workers", ev->attempt, ev->reason);
        ae.kind = DDP_AE_STOP;
        agent_feed(s, &ae, NULL, NULL);
        break;
    case DDP_COORD_EXIT:
        ae.kind = DDP_AE_EXIT;
        ae.status = ev->status;
        agent_feed(s, &ae, NULL, NULL);
        break;
    case DDP_COORD_LOST:
        if (s->agent.state != DDP_AS_JOINING)
            ddp_error("node 0 is gone (%s): stopping the workers here and exiting", ev->reason);
        else if (s->ctx->coord_node > 0)
            ddp_error("node %d cannot join node 0: %s", s->ctx->coord_node, ev->reason);
        else
            ddp_error("%s cannot join node 0: %s", s->ctx->hostname, ev->reason);
        ae.kind = DDP_AE_COORD_LOST;
        agent_feed(s, &ae, NULL, NULL);
        break;
    default:
        break;
    }
}

static void on_coord(struct ddp_coord *c, const struct ddp_coord_event *ev, void *data)
{
    struct sup *s = data;
    (void)c;
    if (s->done)
        return;
    if (s->leader)
        leader_event(s, ev);
    else
        follower_event(s, ev);
}

/* The workers of this node's part of the attempt all ended. */
void ddp_nodes_all_finished(struct sup *s)
{
    struct ddp_aevent_data ae = {.kind = DDP_AE_LOCAL_DONE};
    if (s->leader) {
        int st = local_status(s);
        if (ddp_agent_round_live(&s->agent)) {
            ddp_layout_round_end(&s->round, s->round.attempt, 0, st, st ? "node 0's workers failed" : "");
            ae.round_done = ddp_layout_round_done(&s->round);
        }
    } else if (s->pol.state == DDP_PS_STOPPING && s->pol.stop == DDP_STOP_SIGNAL) {
        ae.signo = s->pol.stop_signo;
    }
    agent_feed(s, &ae, NULL, NULL);
}

/* Start listening (node 0) or joining (others); node 0 starts attempt 0 once every node joined. */
int ddp_nodes_begin(struct sup *s)
{
    const struct ddp_plan_ctx *ctx = s->ctx;
    struct ddp_coord_config cfg = {
        .node_rank = ctx->coord_node,
        .nnodes = ctx->nnodes,
        .addr = ctx->master_addr,
        .port = ctx->coord_port,
        .listen_fd = ctx->coord_listen_fd,
        .secret = ctx->coord_secret,
        .job = ctx->coord_job,
        .nproc = ctx->nproc,
        .host = ctx->hostname,
        .lost_after_ms = ctx->lost_after_ms,
        .join_timeout_ms = ctx->join_timeout_ms,
    };
    int rc;
    ddp_agent_init(&s->agent, s->leader ? DDP_AR_LEADER : DDP_AR_FOLLOWER);
    s->coord_node = ctx->coord_node;
    if (s->leader) {
        s->nodes = ddp_xcalloc((size_t)ctx->nnodes, sizeof(*s->nodes));
        s->hosts = ddp_xcalloc((size_t)ctx->nnodes, sizeof(*s->hosts));
        s->nodes[0] = (struct ddp_layout_node){true, ctx->nproc, ctx->hostname};
    }
    rc = ddp_coord_start(&s->loop, &cfg, on_coord, s, &s->coord, s->err);
    if (rc < 0) {
        ddp_error("%s", s->err->msg);
        return rc;
    }
    if (s->leader) {
        ddp_info("node 0: waiting up to %llds for %d other node%s to join on control port %s:%d",
                 ctx->join_timeout_ms / 1000, ctx->nnodes - 1, ctx->nnodes == 2 ? "" : "s", ctx->master_addr,
                 ddp_coord_port(s->coord));
        uv_timer_start(&s->join, on_join_timeout, (uint64_t)ctx->join_timeout_ms, 0);
        s->join_start_ms = ddp_now_ms();
        uv_timer_start(&s->joinlog, on_join_progress, 5000, 5000);
    } else if (ctx->coord_node > 0) {
        ddp_info("node %d: joining node 0 at %s:%d", ctx->coord_node, ctx->master_addr, ctx->coord_port);
    } else {
        ddp_info("joining the rendezvous at %s:%d", ctx->master_addr, ctx->coord_port);
    }
    return 0;
}

void ddp_nodes_signal(struct sup *s, int signo)
{
    struct ddp_aevent_data ae = {.kind = DDP_AE_SIGNAL, .signo = signo};
    agent_feed(s, &ae, NULL, NULL);
}

int ddp_nodes_start(struct sup *s)
{
    struct ddp_aevent_data st = {.kind = DDP_AE_START}, failed = {.kind = DDP_AE_START_FAILED};
    int rc = agent_feed(s, &st, NULL, NULL);
    if (rc < 0)
        ddp_agent_step(&s->agent, &failed); /* DONE: the caller exits 1 */
    return rc;
}

void ddp_nodes_exit(struct sup *s, int status)
{
    struct ddp_aevent_data ex = {.kind = DDP_AE_EXIT, .status = status};
    ddp_agent_step(&s->agent, &ex);
}

void ddp_nodes_free(struct sup *s)
{
    free(s->nodes);
    for (int i = 0; s->hosts && i < s->ctx->nnodes; i++)
        free(s->hosts[i]);
    free(s->hosts);
    s->nodes = NULL;
    s->hosts = NULL;
    if (s->round.state)
        ddp_layout_round_free(&s->round);
}
