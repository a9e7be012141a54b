/* agent: see agent.h. The whole behaviour is the two tables at the bottom: one handler per (state, event). */
#include "driver/agent.h"

#include "base/exit.h"
#include "driver/policy.h"

typedef struct ddp_agent_action handler_fn(struct ddp_agent *a, const struct ddp_agent_event_data *ev);

void ddp_agent_init(struct ddp_agent *a, enum ddp_agent_role role)
{
    a->role = role;
    a->state = DDP_AS_JOINING;
    a->exit_status = 0;
}

static struct ddp_agent_action none(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)a;
    (void)ev;
    return (struct ddp_agent_action){0};
}

static struct ddp_agent_action go(struct ddp_agent *a, enum ddp_agent_state next, unsigned flags)
{
    struct ddp_agent_action r = {0};
    a->state = next;
    r.flags = flags;
    return r;
}

static struct ddp_agent_action exit_with(struct ddp_agent *a, int status, unsigned flags)
{
    struct ddp_agent_action r = go(a, DDP_AS_DONE, flags | DDP_AA_EXIT);
    a->exit_status = status;
    r.exit_status = status;
    return r;
}

/* Both roles */
static struct ddp_agent_action start(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return go(a, DDP_AS_RUNNING, DDP_AA_START);
}

static struct ddp_agent_action exit_now(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    return exit_with(a, ev->status, 0);
}

static struct ddp_agent_action to_policy(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)a;
    (void)ev;
    return (struct ddp_agent_action){.flags = DDP_AA_POLICY};
}

/* No attempt under way: a stopping signal ends the agent (128+N); others have no worker to go to. */
static struct ddp_agent_action idle_signal(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    if (!ddp_policy_signal_stops(ev->signo))
        return none(a, ev);
    return exit_with(a, ddp_exit_signal(ev->signo), 0);
}

/* Leader */
static struct ddp_agent_action l_joined(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    return ev->all ? start(a, ev) : none(a, ev);
}

static struct ddp_agent_action l_join_timeout(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    return ev->all ? start(a, ev) : exit_with(a, DDP_EXIT_TEMPFAIL, 0); /* a scheduler should retry */
}

static struct ddp_agent_action l_start_failed(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return exit_with(a, DDP_EXIT_LAUNCHER, 0);
}

static struct ddp_agent_action l_node_running(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    struct ddp_agent_action r = {0};
    (void)a;
    if (ev->fresh && ev->status != 0) {
        r.flags = DDP_AA_NODE_FAILED;
        r.status = ev->status;
    }
    return r; /* round_done needs node 0's own end, which moves it to DRAINING first */
}

static struct ddp_agent_action l_local_done(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    return ev->round_done ? go(a, DDP_AS_WAITING, DDP_AA_DECIDE) : go(a, DDP_AS_DRAINING, 0);
}

static struct ddp_agent_action l_node_draining(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    struct ddp_agent_action r = {0};
    if (ev->fresh && ev->status != 0) {
        r.flags = DDP_AA_NODE_FAILED | DDP_AA_DISARM_GRACE;
        r.status = ev->status;
    }
    if (ev->round_done) {
        a->state = DDP_AS_WAITING;
        r.flags |= DDP_AA_DECIDE;
    }
    return r;
}

/* Follower */
static struct ddp_agent_action f_joined(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return go(a, DDP_AS_WAITING, 0);
}

static struct ddp_agent_action f_lost_idle(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return exit_with(a, DDP_EXIT_LAUNCHER, 0);
}

static struct ddp_agent_action f_start_failed(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return go(a, DDP_AS_WAITING, DDP_AA_REPORT);
}

static struct ddp_agent_action f_stop(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return go(a, DDP_AS_STOPPING, DDP_AA_STOP_WORKERS);
}

static struct ddp_agent_action f_exit_busy(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    a->exit_status = ev->status;
    return go(a, DDP_AS_EXITING, DDP_AA_STOP_WORKERS);
}

static struct ddp_agent_action f_lost_busy(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    a->exit_status = DDP_EXIT_LAUNCHER;
    return go(a, DDP_AS_LOST, DDP_AA_STOP_WORKERS);
}

/* The workers ended on their own or by node 0's STOP: report; a signal that stopped them here ends the agent. */
static struct ddp_agent_action f_done_attempt(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    if (ev->signo > 0)
        return exit_with(a, ddp_exit_signal(ev->signo), DDP_AA_REPORT);
    return go(a, DDP_AS_WAITING, DDP_AA_REPORT);
}

/* EXITING, LOST: the workers are gone: report, then exit as decided. */
static struct ddp_agent_action f_done_exit(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    (void)ev;
    return exit_with(a, a->exit_status, DDP_AA_REPORT);
}

#define N none
/* Columns: JOINED, JOIN_TIMEOUT, START, START_FAILED, STOP, EXIT, NODE_LOST, NODE_REPORT, LOCAL_DONE,
 * COORD_LOST, SIGNAL. */
static handler_fn *const leader[DDP_AS__COUNT][DDP_AE__COUNT] = {
    [DDP_AS_JOINING] = {l_joined, l_join_timeout, N, N, N, exit_now, N, N, N, N, idle_signal},
    [DDP_AS_WAITING] = {N, N, start, N, N, exit_now, N, N, N, N, to_policy},
    [DDP_AS_RUNNING] = {N, N, N, l_start_failed, N, exit_now, l_node_running, l_node_running, l_local_done, N,
                        to_policy},
    [DDP_AS_DRAINING] = {N, N, N, N, N, exit_now, l_node_draining, l_node_draining, N, N, to_policy},
    [DDP_AS_STOPPING] = {N, N, N, N, N, N, N, N, N, N, N},
    [DDP_AS_EXITING] = {N, N, N, N, N, N, N, N, N, N, N},
    [DDP_AS_LOST] = {N, N, N, N, N, N, N, N, N, N, N},
    [DDP_AS_DONE] = {N, N, N, N, N, N, N, N, N, N, N},
};

static handler_fn *const follower[DDP_AS__COUNT][DDP_AE__COUNT] = {
    [DDP_AS_JOINING] = {f_joined, N, start, N, N, exit_now, N, N, N, f_lost_idle, idle_signal},
    [DDP_AS_WAITING] = {N, N, start, N, N, exit_now, N, N, N, f_lost_idle, idle_signal},
    [DDP_AS_RUNNING] = {N, N, N, f_start_failed, f_stop, f_exit_busy, N, N, f_done_attempt, f_lost_busy, to_policy},
    [DDP_AS_DRAINING] = {N, N, N, N, N, N, N, N, N, N, N},
    [DDP_AS_STOPPING] = {N, N, N, N, N, f_exit_busy, N, N, f_done_attempt, f_lost_busy, to_policy},
    [DDP_AS_EXITING] = {N, N, N, N, N, f_exit_busy, N, N, f_done_exit, f_lost_busy, to_policy},
    [DDP_AS_LOST] = {N, N, N, N, N, N, N, N, f_done_exit, N, to_policy},
    [DDP_AS_DONE] = {N, N, N, N, N, N, N, N, N, N, N},
};
#undef N

struct ddp_agent_action ddp_agent_step(struct ddp_agent *a, const struct ddp_agent_event_data *ev)
{
    if ((unsigned)a->role >= DDP_AR__COUNT || (unsigned)a->state >= DDP_AS__COUNT ||
        (unsigned)ev->kind >= DDP_AE__COUNT)
        return (struct ddp_agent_action){0};
    return (a->role == DDP_AR_LEADER ? leader : follower)[a->state][ev->kind](a, ev);
}

bool ddp_agent_round_live(const struct ddp_agent *a)
{
    return a->role == DDP_AR_LEADER && (a->state == DDP_AS_RUNNING || a->state == DDP_AS_DRAINING);
}

bool ddp_agent_idle(const struct ddp_agent *a)
{
    return a->state == DDP_AS_JOINING || (a->role == DDP_AR_FOLLOWER && a->state == DDP_AS_WAITING);
}

const char *ddp_astate_name(enum ddp_agent_state s)
{
    static const char *const names[] = {"joining",  "waiting", "running", "draining",
                                        "stopping", "exiting", "lost",    "done"};
    return (unsigned)s < DDP_AS__COUNT ? names[s] : "unknown";
}

const char *ddp_aevent_name(enum ddp_agent_event e)
{
    static const char *const names[] = {"joined",    "join-timeout", "start",      "start-failed", "stop",  "exit",
                                        "node-lost", "node-report",  "local-done", "coord-lost",   "signal"};
    return (unsigned)e < DDP_AE__COUNT ? names[e] : "unknown";
}
