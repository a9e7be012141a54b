/* Unit tests for agent.c: every (role, state, event) triple of the node agent's tables, then the cases that
 * depend on what an event says (every node joined, the round is over, a signal stopped the workers). */
#include <criterion/criterion.h>
#include <signal.h>

#include "driver/agent.h"

/* The event as the pairwise test feeds it: status 3, SIGTERM for SIGNAL, not every node joined, a node's first
 * end of the round, the round not over yet, no signal behind a LOCAL_DONE. */
static struct ddp_agent_event_data ev(enum ddp_agent_event k)
{
    struct ddp_agent_event_data e = {.kind = k, .status = 3, .signo = k == DDP_AE_SIGNAL ? SIGTERM : 0, .fresh = true};
    return e;
}

static void step(struct ddp_agent *a, enum ddp_agent_event k, bool all, bool round_done)
{
    struct ddp_agent_event_data e = ev(k);
    e.all = all;
    e.round_done = round_done;
    ddp_agent_step(a, &e);
}

/* Put a in state st the way the agent would get there (rows a role never reaches: set directly). */
static void reach(struct ddp_agent *a, enum ddp_agent_role role, enum ddp_agent_state st)
{
    ddp_agent_init(a, role);
    if (role == DDP_AR_LEADER) {
        switch (st) {
        case DDP_AS_JOINING:
            return;
        case DDP_AS_RUNNING:
            step(a, DDP_AE_JOINED, true, false);
            return;
        case DDP_AS_DRAINING:
            step(a, DDP_AE_JOINED, true, false);
            step(a, DDP_AE_LOCAL_DONE, false, false);
            return;
        case DDP_AS_WAITING:
            step(a, DDP_AE_JOINED, true, false);
            step(a, DDP_AE_LOCAL_DONE, false, true);
            return;
        case DDP_AS_DONE:
            step(a, DDP_AE_EXIT, false, false);
            return;
        default:
            a->state = st;
            return;
        }
    }
    switch (st) {
    case DDP_AS_JOINING:
        return;
    case DDP_AS_WAITING:
        step(a, DDP_AE_JOINED, false, false);
        return;
    case DDP_AS_RUNNING:
    case DDP_AS_STOPPING:
    case DDP_AS_EXITING:
    case DDP_AS_LOST:
        step(a, DDP_AE_JOINED, false, false);
        step(a, DDP_AE_START, false, false);
        if (st == DDP_AS_STOPPING)
            step(a, DDP_AE_STOP, false, false);
        if (st == DDP_AS_EXITING) {
            struct ddp_agent_event_data e = ev(DDP_AE_EXIT);
            e.status = 5;
            ddp_agent_step(a, &e);
        }
        if (st == DDP_AS_LOST)
            step(a, DDP_AE_COORD_LOST, false, false);
        return;
    case DDP_AS_DONE:
        step(a, DDP_AE_EXIT, false, false);
        return;
    default:
        a->state = st;
        return;
    }
}

struct cell {
    enum ddp_agent_role role;
    enum ddp_agent_state from;
    enum ddp_agent_event event;
    enum ddp_agent_state to;
    unsigned flags;
    int exit_status; /* when flags has EXIT */
};

#define L DDP_AR_LEADER
#define F DDP_AR_FOLLOWER
/* Every pair not listed does nothing and keeps the state. */
static const struct cell cells[] = {
    {L, DDP_AS_JOINING, DDP_AE_JOIN_TIMEOUT, DDP_AS_DONE, DDP_AA_EXIT, 75},
    {L, DDP_AS_JOINING, DDP_AE_EXIT, DDP_AS_DONE, DDP_AA_EXIT, 3},
    {L, DDP_AS_JOINING, DDP_AE_SIGNAL, DDP_AS_DONE, DDP_AA_EXIT, 128 + SIGTERM},
    {L, DDP_AS_WAITING, DDP_AE_START, DDP_AS_RUNNING, DDP_AA_START, 0},
    {L, DDP_AS_WAITING, DDP_AE_EXIT, DDP_AS_DONE, DDP_AA_EXIT, 3},
    {L, DDP_AS_WAITING, DDP_AE_SIGNAL, DDP_AS_WAITING, DDP_AA_POLICY, 0},
    {L, DDP_AS_RUNNING, DDP_AE_START_FAILED, DDP_AS_DONE, DDP_AA_EXIT, 1},
    {L, DDP_AS_RUNNING, DDP_AE_EXIT, DDP_AS_DONE, DDP_AA_EXIT, 3},
    {L, DDP_AS_RUNNING, DDP_AE_NODE_LOST, DDP_AS_RUNNING, DDP_AA_NODE_FAILED, 0},
    {L, DDP_AS_RUNNING, DDP_AE_NODE_REPORT, DDP_AS_RUNNING, DDP_AA_NODE_FAILED, 0},
    {L, DDP_AS_RUNNING, DDP_AE_LOCAL_DONE, DDP_AS_DRAINING, 0, 0},
    {L, DDP_AS_RUNNING, DDP_AE_SIGNAL, DDP_AS_RUNNING, DDP_AA_POLICY, 0},
    {L, DDP_AS_DRAINING, DDP_AE_EXIT, DDP_AS_DONE, DDP_AA_EXIT, 3},
    {L, DDP_AS_DRAINING, DDP_AE_NODE_LOST, DDP_AS_DRAINING, DDP_AA_NODE_FAILED | DDP_AA_DISARM_GRACE, 0},
    {L, DDP_AS_DRAINING, DDP_AE_NODE_REPORT, DDP_AS_DRAINING, DDP_AA_NODE_FAILED | DDP_AA_DISARM_GRACE, 0},
    {L, DDP_AS_DRAINING, DDP_AE_SIGNAL, DDP_AS_DRAINING, DDP_AA_POLICY, 0},

    {F, DDP_AS_JOINING, DDP_AE_JOINED, DDP_AS_WAITING, 0, 0},
    {F, DDP_AS_JOINING, DDP_AE_START, DDP_AS_RUNNING, DDP_AA_START, 0},
    {F, DDP_AS_JOINING, DDP_AE_EXIT, DDP_AS_DONE, DDP_AA_EXIT, 3},
    {F, DDP_AS_JOINING, DDP_AE_COORD_LOST, DDP_AS_DONE, DDP_AA_EXIT, 1},
    {F, DDP_AS_JOINING, DDP_AE_SIGNAL, DDP_AS_DONE, DDP_AA_EXIT, 128 + SIGTERM},
    {F, DDP_AS_WAITING, DDP_AE_START, DDP_AS_RUNNING, DDP_AA_START, 0},
    {F, DDP_AS_WAITING, DDP_AE_EXIT, DDP_AS_DONE, DDP_AA_EXIT, 3},
    {F, DDP_AS_WAITING, DDP_AE_COORD_LOST, DDP_AS_DONE, DDP_AA_EXIT, 1},
    {F, DDP_AS_WAITING, DDP_AE_SIGNAL, DDP_AS_DONE, DDP_AA_EXIT, 128 + SIGTERM},
    {F, DDP_AS_RUNNING, DDP_AE_START_FAILED, DDP_AS_WAITING, DDP_AA_REPORT, 0},
    {F, DDP_AS_RUNNING, DDP_AE_STOP, DDP_AS_STOPPING, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_RUNNING, DDP_AE_EXIT, DDP_AS_EXITING, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_RUNNING, DDP_AE_LOCAL_DONE, DDP_AS_WAITING, DDP_AA_REPORT, 0},
    {F, DDP_AS_RUNNING, DDP_AE_COORD_LOST, DDP_AS_LOST, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_RUNNING, DDP_AE_SIGNAL, DDP_AS_RUNNING, DDP_AA_POLICY, 0},
    {F, DDP_AS_STOPPING, DDP_AE_EXIT, DDP_AS_EXITING, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_STOPPING, DDP_AE_LOCAL_DONE, DDP_AS_WAITING, DDP_AA_REPORT, 0},
    {F, DDP_AS_STOPPING, DDP_AE_COORD_LOST, DDP_AS_LOST, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_STOPPING, DDP_AE_SIGNAL, DDP_AS_STOPPING, DDP_AA_POLICY, 0},
    {F, DDP_AS_EXITING, DDP_AE_EXIT, DDP_AS_EXITING, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_EXITING, DDP_AE_LOCAL_DONE, DDP_AS_DONE, DDP_AA_REPORT | DDP_AA_EXIT, 5},
    {F, DDP_AS_EXITING, DDP_AE_COORD_LOST, DDP_AS_LOST, DDP_AA_STOP_WORKERS, 0},
    {F, DDP_AS_EXITING, DDP_AE_SIGNAL, DDP_AS_EXITING, DDP_AA_POLICY, 0},
    {F, DDP_AS_LOST, DDP_AE_LOCAL_DONE, DDP_AS_DONE, DDP_AA_REPORT | DDP_AA_EXIT, 1},
    {F, DDP_AS_LOST, DDP_AE_SIGNAL, DDP_AS_LOST, DDP_AA_POLICY, 0},
};
#undef L
#undef F

Test(agent, every_role_state_and_event)
{
    size_t seen = 0;
    for (int r = 0; r < DDP_AR__COUNT; r++) {
        for (int st = 0; st < DDP_AS__COUNT; st++) {
            for (int e = 0; e < DDP_AE__COUNT; e++) {
                struct ddp_agent a;
                struct ddp_agent_event_data d = ev((enum ddp_agent_event)e);
                const struct cell *c = NULL;
                reach(&a, (enum ddp_agent_role)r, (enum ddp_agent_state)st);
                cr_assert_eq(a.state, (enum ddp_agent_state)st, "%s: could not reach %s", r ? "follower" : "leader",
                             ddp_astate_name(st));
                for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
                    if (cells[i].role == (enum ddp_agent_role)r && cells[i].from == (enum ddp_agent_state)st &&
                        cells[i].event == (enum ddp_agent_event)e)
                        c = &cells[i];
                struct ddp_agent_action act = ddp_agent_step(&a, &d);
                unsigned want = c ? c->flags : 0;
                enum ddp_agent_state to = c ? c->to : (enum ddp_agent_state)st;
                cr_expect_eq(act.flags, want, "%s (%s, %s): flags %#x, want %#x", r ? "follower" : "leader",
                             ddp_astate_name(st), ddp_aevent_name(e), act.flags, want);
                cr_expect_eq(a.state, to, "%s (%s, %s): state %s, want %s", r ? "follower" : "leader",
                             ddp_astate_name(st), ddp_aevent_name(e), ddp_astate_name(a.state), ddp_astate_name(to));
                if (want & DDP_AA_EXIT) {
                    cr_expect_eq(act.exit_status, c->exit_status, "%s (%s, %s): exit %d, want %d",
                                 r ? "follower" : "leader", ddp_astate_name(st), ddp_aevent_name(e), act.exit_status,
                                 c->exit_status);
                    cr_expect_eq(a.exit_status, c->exit_status);
                }
                if (want & DDP_AA_NODE_FAILED)
                    cr_expect_eq(act.status, 3, "the node's status goes to the policy");
                seen++;
            }
        }
    }
    cr_expect_eq(seen, (size_t)DDP_AR__COUNT * DDP_AS__COUNT * DDP_AE__COUNT);
}

/* Node 0: the last node to join starts attempt 0; a join timeout starts with the nodes up when they are enough. */
Test(agent, leader_starts_when_every_node_joined_or_enough_at_the_timeout)
{
    struct ddp_agent a;
    ddp_agent_init(&a, DDP_AR_LEADER);
    struct ddp_agent_event_data j = ev(DDP_AE_JOINED);
    j.all = true;
    cr_expect_eq(ddp_agent_step(&a, &j).flags, (unsigned)DDP_AA_START);
    cr_expect_eq(a.state, DDP_AS_RUNNING);
    cr_expect(ddp_agent_round_live(&a));
    ddp_agent_init(&a, DDP_AR_LEADER);
    struct ddp_agent_event_data t = ev(DDP_AE_JOIN_TIMEOUT);
    t.all = true;
    cr_expect_eq(ddp_agent_step(&a, &t).flags, (unsigned)DDP_AA_START);
    cr_expect_eq(a.state, DDP_AS_RUNNING);
    struct ddp_agent_event_data again = ev(DDP_AE_JOIN_TIMEOUT); /* too late: the attempt runs */
    cr_expect_eq(ddp_agent_step(&a, &again).flags, 0u);
    cr_expect_eq(a.state, DDP_AS_RUNNING);
}

/* Node 0: the round is decided once its own workers and every other node ended, in either order; a node's
 * second end, or its success, stops nothing. */
Test(agent, leader_decides_when_the_round_is_over)
{
    struct ddp_agent a;
    reach(&a, DDP_AR_LEADER, DDP_AS_RUNNING);
    struct ddp_agent_event_data ld = ev(DDP_AE_LOCAL_DONE);
    ld.round_done = true; /* the others had all ended: node 0's end closes the round */
    cr_expect_eq(ddp_agent_step(&a, &ld).flags, (unsigned)DDP_AA_DECIDE);
    cr_expect_eq(a.state, DDP_AS_WAITING);
    cr_expect(!ddp_agent_round_live(&a));

    reach(&a, DDP_AR_LEADER, DDP_AS_DRAINING);
    struct ddp_agent_event_data ok = ev(DDP_AE_NODE_REPORT);
    ok.status = 0;
    cr_expect_eq(ddp_agent_step(&a, &ok).flags, 0u);
    struct ddp_agent_event_data stale = ev(DDP_AE_NODE_LOST);
    stale.fresh = false; /* it had ended already */
    cr_expect_eq(ddp_agent_step(&a, &stale).flags, 0u);
    struct ddp_agent_event_data last = ev(DDP_AE_NODE_REPORT);
    last.round_done = true;
    struct ddp_agent_action act = ddp_agent_step(&a, &last);
    cr_expect_eq(act.flags, (unsigned)(DDP_AA_NODE_FAILED | DDP_AA_DISARM_GRACE | DDP_AA_DECIDE));
    cr_expect_eq(act.status, 3);
    cr_expect_eq(a.state, DDP_AS_WAITING);
    struct ddp_agent_event_data st = ev(DDP_AE_START);
    cr_expect_eq(ddp_agent_step(&a, &st).flags, (unsigned)DDP_AA_START);
    cr_expect(ddp_agent_round_live(&a));
}

/* Another node: workers stopped here by a signal: report, then exit 128+N; EXIT during an attempt waits for the
 * workers, node 0 lost wins over an EXIT already said; a non-stopping signal while idle does nothing. */
Test(agent, follower_exits_as_decided_once_the_workers_are_gone)
{
    struct ddp_agent a;
    reach(&a, DDP_AR_FOLLOWER, DDP_AS_RUNNING);
    cr_expect(!ddp_agent_idle(&a));
    struct ddp_agent_event_data ld = ev(DDP_AE_LOCAL_DONE);
    ld.signo = SIGINT;
    struct ddp_agent_action act = ddp_agent_step(&a, &ld);
    cr_expect_eq(act.flags, (unsigned)(DDP_AA_REPORT | DDP_AA_EXIT));
    cr_expect_eq(act.exit_status, 128 + SIGINT);

    reach(&a, DDP_AR_FOLLOWER, DDP_AS_EXITING);
    struct ddp_agent_event_data lost = ev(DDP_AE_COORD_LOST);
    ddp_agent_step(&a, &lost);
    struct ddp_agent_event_data ex = ev(DDP_AE_EXIT);
    ex.status = 9;
    cr_expect_eq(ddp_agent_step(&a, &ex).flags, 0u);
    struct ddp_agent_event_data gone = ev(DDP_AE_LOCAL_DONE);
    act = ddp_agent_step(&a, &gone);
    cr_expect_eq(act.exit_status, 1);

    reach(&a, DDP_AR_FOLLOWER, DDP_AS_WAITING);
    cr_expect(ddp_agent_idle(&a));
    struct ddp_agent_event_data usr = ev(DDP_AE_SIGNAL);
    usr.signo = SIGUSR1;
    cr_expect_eq(ddp_agent_step(&a, &usr).flags, 0u);
    cr_expect_eq(a.state, DDP_AS_WAITING);
}
