/* roles: see roles.h. Who calls whom: the channel (roster.h's translation), the join timers and the driver ->
 * agent table -> [the channel] and the driver's operations (policy, start, report, finish). */
#include "driver/roles.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/exit.h"
#include "driver/agent.h"
#include "driver/frshare.h"
#include "driver/parts.h"
#include "driver/roster.h"
#include "records/report.h"

struct ddp_roles {
    struct ddp_roles_config c;
    bool leader;
    bool closed;
    struct ddp_agent agent;
    struct ddp_roster *roster;
    struct ddp_frshare *frshare; /* the flight recorders, shared with node 0 */
    uv_timer_t join, joinlog;    /* node 0: the join timeout (or last call), the progress line */
    long long join_start_ms;
};

static void policy_kind(struct ddp_roles *r, enum ddp_policy_event kind)
{
    struct ddp_policy_event_data ev = {.kind = kind};
    r->c.ops.policy(r->c.arg, &ev);
}

/* Node 0: lay the attempt out over the nodes, send START, start its own workers. */
static int leader_start(struct ddp_roles *r, int attempt, int nproc)
{
    struct ddp_plan_ctx *actx = r->c.actx;
    struct ddp_roster_place p;
    int rc = ddp_roster_start(r->roster, attempt, nproc, actx->master_port, &p, r->c.err);
    if (rc < 0)
        return rc;
    actx->node_rank = p.node_rank;
    actx->nnodes = p.nnodes;
    actx->rank_base = p.rank_base;
    actx->world_size = p.world_size;
    return r->c.ops.start(r->c.arg, attempt, nproc);
}

/* Other nodes: node 0 said START (cev): start this node's workers of the attempt. */
static void follower_start(struct ddp_roles *r, const struct ddp_coord_event *cev)
{
    struct ddp_agent_event_data failed = {.kind = DDP_AE_START_FAILED};
    bool etcd = r->c.ctx->coord.etcd_endpoints != NULL;
    if (cev->attempt > 0)
        ddp_warn("attempt %d: restarting as attempt %d with %d worker%s here, world size %d (%s)", cev->attempt - 1,
                 cev->attempt, cev->nproc, cev->nproc == 1 ? "" : "s", cev->world_size,
                 etcd ? "the job's decision in etcd" : "node 0's decision");
    if (etcd && cev->host[0])
        r->c.actx->master_addr = cev->host; /* the attempt's group rank 0: kept by rdzv_etcd until it is freed */
    r->c.actx->node_rank = cev->group_rank;
    r->c.actx->nnodes = cev->group_world_size;
    r->c.actx->master_port = cev->master_port;
    r->c.actx->rank_base = cev->rank_base;
    r->c.actx->world_size = cev->world_size;
    ddp_policy_init(r->c.pol, r->c.ctx->job.spec, cev->nproc);
    r->c.pol->attempt = cev->attempt;
    ddp_records_forget(r->c.rec);
    ddp_info("attempt %d: starting %d worker%s (ranks %d-%d of %d)", cev->attempt, cev->nproc,
             cev->nproc == 1 ? "" : "s", cev->rank_base, cev->rank_base + cev->nproc - 1, cev->world_size);
    if (r->c.ops.start(r->c.arg, cev->attempt, cev->nproc) < 0) {
        ddp_error("attempt %d: %s", cev->attempt, r->c.err->msg);
        if (ddp_agent_step(&r->agent, &failed).flags & DDP_AA_REPORT)
            ddp_roster_report(r->roster, cev->attempt, DDP_EXIT_LAUNCHER, r->c.err->msg);
    }
}

/* Feed one event to the node agent's table (agent.h) and carry out its actions. why: for NODE_FAILED, the line
 * saying which node failed; cev: the control channel's event behind it (a follower's START), or NULL. Returns
 * the result of starting an attempt on node 0 (START), else 0. */
static int feed(struct ddp_roles *r, const struct ddp_agent_event_data *ev, const char *why,
                const struct ddp_coord_event *cev)
{
    enum ddp_agent_state before = r->agent.state;
    struct ddp_agent_action a = ddp_agent_step(&r->agent, ev);
    int rc = 0;
    if (a.flags & DDP_AA_POLICY) {
        struct ddp_policy_event_data pe = {.kind = DDP_PE_SIGNAL, .signo = ev->signo};
        r->c.ops.policy(r->c.arg, &pe);
    }
    if ((a.flags & DDP_AA_STOP_WORKERS) && ddp_runner_current(r->c.rn))
        policy_kind(r, DDP_PE_REMOTE_STOP); /* the policy stops only a RUNNING attempt: a stop under way goes on */
    if (a.flags & DDP_AA_NODE_FAILED)
        r->c.ops.node_failed(r->c.arg, ddp_roster_round_attempt(r->roster), a.status, why ? why : "",
                             a.flags & DDP_AA_DISARM_GRACE);
    if (a.flags & DDP_AA_REPORT)
        r->c.ops.report(r->c.arg);
    if (a.flags & DDP_AA_DECIDE)
        policy_kind(r, DDP_PE_ALL_FINISHED);
    if (a.flags & DDP_AA_START) {
        if (r->leader)
            rc = leader_start(r, r->c.pol->attempt, r->c.pol->nproc);
        else if (cev)
            follower_start(r, cev);
    }
    if (a.flags & DDP_AA_EXIT) {
        /* a signal ends the agent (not node 0's EXIT nor its loss, which win over a signal here) */
        if (ev->kind == DDP_AE_SIGNAL ||
            (ev->kind == DDP_AE_LOCAL_DONE && ev->signo > 0 && before != DDP_AS_EXITING && before != DDP_AS_LOST))
            ddp_error("stopped by %s", ddp_report_signame(ev->signo));
        r->c.ops.finish(r->c.arg, a.exit_status);
    }
    return rc;
}

/* Node 0: attempt 0 once the nodes joined (or enough of them at the join timeout). */
static void leader_begin(struct ddp_roles *r, const struct ddp_agent_event_data *ev)
{
    struct ddp_agent_event_data failed = {.kind = DDP_AE_START_FAILED};
    uv_timer_stop(&r->join);
    if (feed(r, ev, NULL, NULL) < 0) {
        ddp_error("attempt 0: %s", r->c.err->msg);
        ddp_agent_step(&r->agent, &failed);
        r->c.ops.finish(r->c.arg, DDP_EXIT_LAUNCHER);
    }
}

static void on_join_progress(uv_timer_t *t)
{
    struct ddp_roles *r = t->data;
    if (r->agent.state != DDP_AS_JOINING || r->closed || ddp_runner_current(r->c.rn) ||
        !ddp_roster_join_progress(r->roster, ddp_now_ms() - r->join_start_ms))
        uv_timer_stop(&r->joinlog);
}

static void on_join_timeout(uv_timer_t *t)
{
    struct ddp_roles *r = t->data;
    struct ddp_agent_event_data ev;
    if (r->agent.state != DDP_AS_JOINING || r->closed)
        return;
    ddp_roster_join_timeout(r->roster, &ev, r->c.err);
    if (ev.all) {
        leader_begin(r, &ev);
        return;
    }
    ddp_error("%s; exit status 75 (EX_TEMPFAIL: retry)", r->c.err->msg);
    uv_timer_stop(&r->joinlog);
    feed(r, &ev, NULL, NULL); /* exits 75: a refusal a scheduler should retry, not a launcher failure */
}

/* Node 0, c10d with MIN < MAX (torchrun's rendezvous timing): once MIN nodes are in, and again at each join
 * after that, wait last_call more for others (never past the join timeout), then start with those in. */
static void arm_last_call(struct ddp_roles *r)
{
    const struct ddp_plan_ctx *ctx = r->c.ctx;
    int nup = ddp_roster_last_call(r->roster);
    long long left = r->join_start_ms + ctx->coord.join_timeout_ms - ddp_now_ms();
    if (!nup || r->agent.state != DDP_AS_JOINING || left <= 0)
        return;
    long long wait = ctx->coord.last_call_ms < left ? ctx->coord.last_call_ms : left;
    uv_timer_start(&r->join, on_join_timeout, (uint64_t)wait, 0);
    ddp_info("node 0: %d of %d nodes in (at least %d wanted): last call, %.1fs for more to join", nup, ctx->nnodes,
             ctx->coord.min_nnodes, (double)wait / 1000.0);
}

static void on_coord(struct ddp_coord *c, const struct ddp_coord_event *ev, void *data)
{
    struct ddp_roles *r = data;
    struct ddp_agent_event_data ae;
    char why[700];
    (void)c;
    if (r->closed)
        return;
    if (ev->kind == DDP_COORD_FR)
        return ddp_frshare_received(r->frshare, ev);
    struct ddp_runner_attempt *a = ddp_runner_current(r->c.rn);
    struct ddp_roster_view v = {r->agent.state, a ? ddp_runner_attempt_number(a) : -1,
                                r->c.pol->state != DDP_PS_RUNNING};
    if (!ddp_roster_translate(r->roster, ev, &v, &ae, why, sizeof(why)))
        return;
    if (r->leader && ae.kind == DDP_AE_JOINED && r->agent.state == DDP_AS_JOINING && ae.all) {
        leader_begin(r, &ae);
    } else {
        feed(r, &ae, why, ev);
        if (r->leader && ae.kind == DDP_AE_JOINED)
            arm_last_call(r);
    }
}

int ddp_roles_begin(const struct ddp_roles_config *c, struct ddp_roles **out)
{
    struct ddp_roles *r = ddp_xcalloc(1, sizeof(*r));
    r->c = *c;
    r->leader = c->ctx->coord.node == 0;
    ddp_agent_init(&r->agent, r->leader ? DDP_AR_LEADER : DDP_AR_FOLLOWER);
    uv_timer_t *timers[] = {&r->join, &r->joinlog};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_timer_init(c->loop, timers[i]);
        timers[i]->data = r;
    }
    *out = r;
    struct ddp_roster_config rcfg = ddp_parts_roster(c->ctx);
    int rc = ddp_roster_new(c->loop, &rcfg, c->rec, on_coord, r, &r->roster, c->err);
    if (rc < 0)
        return rc;
    r->frshare = ddp_frshare_new(c->loop, c->ctx->job.spec, r->leader, c->rn, c->watch, r->roster, c->rec);
    if (!r->leader)
        return 0;
    uv_timer_start(&r->join, on_join_timeout, (uint64_t)c->ctx->coord.join_timeout_ms, 0);
    r->join_start_ms = ddp_now_ms();
    uv_timer_start(&r->joinlog, on_join_progress, 5000, 5000);
    arm_last_call(r); /* MIN may be 1: node 0 alone */
    return 0;
}

void ddp_roles_signal(struct ddp_roles *r, int signo)
{
    struct ddp_agent_event_data ae = {.kind = DDP_AE_SIGNAL, .signo = signo};
    feed(r, &ae, NULL, NULL); /* to the policy while an attempt is under way or decided */
}

void ddp_roles_local_done(struct ddp_roles *r, int local_status)
{
    struct ddp_agent_event_data ae = {.kind = DDP_AE_LOCAL_DONE};
    if (r->leader) {
        if (ddp_agent_round_live(&r->agent))
            ae.round_done = ddp_roster_local_end(r->roster, local_status);
    } else if (r->c.pol->state == DDP_PS_STOPPING && r->c.pol->stop == DDP_STOP_SIGNAL) {
        ae.signo = r->c.pol->stop_signo;
    }
    feed(r, &ae, NULL, NULL);
}

int ddp_roles_start(struct ddp_roles *r)
{
    struct ddp_agent_event_data st = {.kind = DDP_AE_START}, failed = {.kind = DDP_AE_START_FAILED};
    int rc = feed(r, &st, NULL, NULL); /* the agent lays the attempt out over the nodes (the policy's size) */
    if (rc < 0)
        ddp_agent_step(&r->agent, &failed); /* DONE: exit 1 */
    return rc;
}

void ddp_roles_stopping(struct ddp_roles *r, const char *why)
{
    if (r->leader && ddp_agent_round_live(&r->agent))
        ddp_roster_stop(r->roster, why);
}

void ddp_roles_exit(struct ddp_roles *r, int status)
{
    struct ddp_agent_event_data ex = {.kind = DDP_AE_EXIT, .status = status};
    if (r->leader)
        ddp_agent_step(&r->agent, &ex); /* EXIT goes to every node when the channel closes */
}

void ddp_roles_report(struct ddp_roles *r, int attempt, int status, const char *why)
{
    ddp_roster_report(r->roster, attempt, status, why);
}

void ddp_roles_close(struct ddp_roles *r, int status)
{
    if (!r || r->closed)
        return;
    r->closed = true;
    ddp_roster_close(r->roster, status);
    ddp_frshare_close(r->frshare);
    uv_close((uv_handle_t *)&r->join, NULL);
    uv_close((uv_handle_t *)&r->joinlog, NULL);
}

void ddp_roles_free(struct ddp_roles *r)
{
    if (!r)
        return;
    ddp_roster_free(r->roster);
    free(r);
}
