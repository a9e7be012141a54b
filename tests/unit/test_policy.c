/* Unit tests for policy.c: every (state, event) pair of the table, then whole scenarios. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "base/exit.h"
#include "driver/policy.h"

static struct ddp_spec spec_with(int max_restarts, enum ddp_on_timeout ot, int nproc_min)
{
    struct ddp_spec s;
    memset(&s, 0, sizeof(s));
    s.max_restarts = max_restarts;
    s.backoff_ms = 50;
    s.on_failure = DDP_ONFAIL_RESTART;
    s.on_timeout = ot;
    s.downsize_after = 1;
    s.downsize_to.divisor = 2;
    s.min_nproc_per_node = nproc_min;
    s.shutdown_timeout_ms = 30000;
    return s;
}

static struct ddp_policy_event_data ev(enum ddp_policy_event k)
{
    struct ddp_policy_event_data e = {.kind = k, .status = 3, .signo = SIGTERM};
    return e;
}

/* Put p in state st the way the supervisor would get there. */
static void reach(struct ddp_policy *p, const struct ddp_spec *s, enum ddp_policy_state st)
{
    ddp_policy_init(p, s, 4);
    if (st == DDP_PS_RUNNING)
        return;
    struct ddp_policy_event_data f = ev(DDP_PE_WORKER_FAILED);
    ddp_policy_step(p, &f);
    if (st == DDP_PS_STOPPING)
        return;
    struct ddp_policy_event_data a = ev(DDP_PE_ALL_FINISHED);
    ddp_policy_step(p, &a); /* max_restarts > 0: BACKOFF; else DONE */
}

struct cell {
    enum ddp_policy_state from;
    enum ddp_policy_event event;
    enum ddp_policy_state to;
    unsigned flags;
};

/* The whole table, with max_restarts = 2, on_timeout = restart, a failure (exit 3) as the stopping cause,
 * and SIGTERM as the signal. */
static const struct cell cells[] = {
    {DDP_PS_RUNNING, DDP_PE_WORKER_OK, DDP_PS_RUNNING, 0},
    {DDP_PS_RUNNING, DDP_PE_WORKER_FAILED, DDP_PS_STOPPING, DDP_ACT_TERM_ALL | DDP_ACT_ARM_GRACE},
    {DDP_PS_RUNNING, DDP_PE_TIMEOUT, DDP_PS_STOPPING, DDP_ACT_TERM_ALL | DDP_ACT_ARM_GRACE},
    {DDP_PS_RUNNING, DDP_PE_SIGNAL, DDP_PS_STOPPING, DDP_ACT_FORWARD | DDP_ACT_ARM_GRACE},
    {DDP_PS_RUNNING, DDP_PE_ALL_FINISHED, DDP_PS_DONE, DDP_ACT_EXIT},
    {DDP_PS_RUNNING, DDP_PE_GRACE_EXPIRED, DDP_PS_RUNNING, DDP_ACT_KILL_ALL},
    {DDP_PS_RUNNING, DDP_PE_BACKOFF_DONE, DDP_PS_RUNNING, 0},
    {DDP_PS_RUNNING, DDP_PE_REMOTE_STOP, DDP_PS_STOPPING, DDP_ACT_TERM_ALL | DDP_ACT_ARM_GRACE},
    {DDP_PS_RUNNING, DDP_PE_NODE_FAILED, DDP_PS_STOPPING, DDP_ACT_TERM_ALL | DDP_ACT_ARM_GRACE},
    {DDP_PS_RUNNING, DDP_PE_CAPTURE_DONE, DDP_PS_RUNNING, 0},
    {DDP_PS_RUNNING, DDP_PE_GPUS_UNCHECKED, DDP_PS_RUNNING, 0}, /* no pending action: none */
    {DDP_PS_RUNNING, DDP_PE_GPUS_LEFT, DDP_PS_RUNNING, 0},
    {DDP_PS_STOPPING, DDP_PE_WORKER_OK, DDP_PS_STOPPING, 0},
    {DDP_PS_STOPPING, DDP_PE_WORKER_FAILED, DDP_PS_STOPPING, 0},
    {DDP_PS_STOPPING, DDP_PE_TIMEOUT, DDP_PS_STOPPING, 0},
    {DDP_PS_STOPPING, DDP_PE_SIGNAL, DDP_PS_STOPPING, DDP_ACT_FORWARD},
    {DDP_PS_STOPPING, DDP_PE_ALL_FINISHED, DDP_PS_BACKOFF, DDP_ACT_ARM_BACKOFF},
    {DDP_PS_STOPPING, DDP_PE_GRACE_EXPIRED, DDP_PS_STOPPING, DDP_ACT_KILL_ALL},
    {DDP_PS_STOPPING, DDP_PE_BACKOFF_DONE, DDP_PS_STOPPING, 0},
    {DDP_PS_STOPPING, DDP_PE_REMOTE_STOP, DDP_PS_STOPPING, 0},
    {DDP_PS_STOPPING, DDP_PE_NODE_FAILED, DDP_PS_STOPPING, 0},
    {DDP_PS_STOPPING, DDP_PE_CAPTURE_DONE, DDP_PS_STOPPING, DDP_ACT_TERM_ALL},
    {DDP_PS_STOPPING, DDP_PE_GPUS_UNCHECKED, DDP_PS_STOPPING, 0}, /* no pending action: none */
    {DDP_PS_STOPPING, DDP_PE_GPUS_LEFT, DDP_PS_STOPPING, 0},
    {DDP_PS_BACKOFF, DDP_PE_WORKER_OK, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_WORKER_FAILED, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_TIMEOUT, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_SIGNAL, DDP_PS_DONE, DDP_ACT_EXIT},
    {DDP_PS_BACKOFF, DDP_PE_ALL_FINISHED, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_GRACE_EXPIRED, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_BACKOFF_DONE, DDP_PS_RUNNING, DDP_ACT_START},
    {DDP_PS_BACKOFF, DDP_PE_REMOTE_STOP, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_NODE_FAILED, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_CAPTURE_DONE, DDP_PS_BACKOFF, 0},
    {DDP_PS_BACKOFF, DDP_PE_GPUS_UNCHECKED, DDP_PS_BACKOFF, 0}, /* no pending action: none */
    {DDP_PS_BACKOFF, DDP_PE_GPUS_LEFT, DDP_PS_BACKOFF, 0},
};

/* A timeout with a stack capture possible: the capture replaces TERM_ALL (the table never asks for both, and
 * nothing overrides it); the workers are stopped at CAPTURE_DONE, also when a signal took over the stop since. */
Test(policy, timeout_with_capture_stops_at_capture_done)
{
    struct ddp_spec s = spec_with(2, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT, .capture = true};
    struct ddp_policy_action a = ddp_policy_step(&p, &t);
    cr_expect_eq(a.flags, DDP_ACT_CAPTURE | DDP_ACT_ARM_GRACE);
    cr_expect_eq(p.state, DDP_PS_STOPPING);
    cr_expect_eq(p.stop, DDP_STOP_TIMEOUT);
    struct ddp_policy_event_data sig = {.kind = DDP_PE_SIGNAL, .signo = SIGTERM};
    a = ddp_policy_step(&p, &sig);
    cr_expect_eq(a.flags, DDP_ACT_FORWARD);
    cr_expect_eq(p.stop, DDP_STOP_SIGNAL);
    struct ddp_policy_event_data done = {.kind = DDP_PE_CAPTURE_DONE};
    a = ddp_policy_step(&p, &done);
    cr_expect_eq(a.flags, DDP_ACT_TERM_ALL);
    cr_expect_eq(p.state, DDP_PS_STOPPING);
    /* another node's timeout (124) on node 0 captures the same way */
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data nf = {.kind = DDP_PE_NODE_FAILED, .status = 124, .capture = true};
    a = ddp_policy_step(&p, &nf);
    cr_expect_eq(a.flags, DDP_ACT_CAPTURE | DDP_ACT_ARM_GRACE);
    cr_expect_eq(p.stop, DDP_STOP_TIMEOUT);
}

/* A collective error with the others' flight recorders to ask (atfail.h): RECORDERS replaces TERM_ALL, the
 * workers are stopped at CAPTURE_DONE; a Ctrl-C meanwhile kills them at once; the failure's status stays. */
Test(policy, collective_failure_asks_the_recorders_first)
{
    struct ddp_spec s = spec_with(0, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 134, .recorders = true};
    struct ddp_policy_action a = ddp_policy_step(&p, &f);
    cr_expect_eq(a.flags, DDP_ACT_RECORDERS | DDP_ACT_ARM_GRACE);
    cr_expect_eq(p.stop, DDP_STOP_FAILURE);
    struct ddp_policy_event_data done = {.kind = DDP_PE_CAPTURE_DONE};
    a = ddp_policy_step(&p, &done);
    cr_expect_eq(a.flags, DDP_ACT_TERM_ALL);
    a = ddp_policy_step(&p, &(struct ddp_policy_event_data){.kind = DDP_PE_ALL_FINISHED});
    cr_expect_eq(a.flags, DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 134);
    ddp_policy_init(&p, &s, 4);
    ddp_policy_step(&p, &f);
    a = ddp_policy_step(&p, &(struct ddp_policy_event_data){.kind = DDP_PE_SIGNAL, .signo = SIGINT});
    cr_expect_eq(a.flags, DDP_ACT_KILL_ALL);
}

Test(policy, every_state_and_event)
{
    struct ddp_spec s = spec_with(2, DDP_ONTIMEOUT_RESTART, 0);
    size_t seen = 0;
    for (int st = 0; st < DDP_PS__COUNT; st++) {
        for (int e = 0; e < DDP_PE__COUNT; e++) {
            struct ddp_policy p;
            struct ddp_policy_event_data d = ev((enum ddp_policy_event)e);
            if (st == DDP_PS_DONE) {
                reach(&p, &s, DDP_PS_RUNNING);
                struct ddp_policy_event_data fin = ev(DDP_PE_ALL_FINISHED);
                ddp_policy_step(&p, &fin);
                cr_assert_eq(p.state, DDP_PS_DONE);
                struct ddp_policy_action a = ddp_policy_step(&p, &d);
                cr_expect_eq(a.flags, 0u, "done + %s must do nothing", ddp_pevent_name(e));
                cr_expect_eq(p.state, DDP_PS_DONE);
                seen++;
                continue;
            }
            reach(&p, &s, (enum ddp_policy_state)st);
            cr_assert_eq(p.state, (enum ddp_policy_state)st, "could not reach %s", ddp_pstate_name(st));
            const struct cell *c = NULL;
            for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
                if (cells[i].from == (enum ddp_policy_state)st && cells[i].event == (enum ddp_policy_event)e)
                    c = &cells[i];
            cr_assert_not_null(c, "no expectation for (%s, %s)", ddp_pstate_name(st), ddp_pevent_name(e));
            struct ddp_policy_action a = ddp_policy_step(&p, &d);
            cr_expect_eq(a.flags, c->flags, "(%s, %s): flags %#x, want %#x", ddp_pstate_name(st), ddp_pevent_name(e),
                         a.flags, c->flags);
            cr_expect_eq(p.state, c->to, "(%s, %s): state %s, want %s", ddp_pstate_name(st), ddp_pevent_name(e),
                         ddp_pstate_name(p.state), ddp_pstate_name(c->to));
            seen++;
        }
    }
    cr_expect_eq(seen, (size_t)DDP_PS__COUNT * DDP_PE__COUNT);
}

/* The GPUs' rows (issue 53 item 2): before a restart, NVML unanswered exits 75 only with busy = fail; GPUs left
 * out for their faults downsize the pending restart, or end the job with the root cause's status. */
Test(policy, gpu_rows_rewrite_the_pending_restart)
{
    struct ddp_spec s = spec_with(2, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    reach(&p, &s, DDP_PS_BACKOFF);
    struct ddp_policy_action restart = {.flags = DDP_ACT_ARM_BACKOFF, .attempt = 1, .nproc = p.nproc};
    struct ddp_policy_event_data u = {
        .kind = DDP_PE_GPUS_UNCHECKED, .why = "NVML: did not answer in 1 s", .pending = &restart};
    struct ddp_policy_action a = ddp_policy_step(&p, &u);
    cr_expect_eq(a.flags, DDP_ACT_ARM_BACKOFF, "busy = warn: the restart goes on unchecked");
    cr_expect_eq(p.state, DDP_PS_BACKOFF);
    s.gpus_busy = DDP_BUSY_FAIL;
    a = ddp_policy_step(&p, &u);
    cr_expect_eq(a.flags, DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, DDP_EXIT_TEMPFAIL);
    cr_expect(strstr(a.why, "busy = fail, so no restart"), "%s", a.why);
    cr_expect_eq(p.state, DDP_PS_DONE);

    s.gpus_busy = DDP_BUSY_WARN;
    reach(&p, &s, DDP_PS_BACKOFF);
    int before = p.nproc;
    restart.nproc = before;
    struct ddp_policy_event_data left = {.kind = DDP_PE_GPUS_LEFT, .gpus_left = before - 1, .pending = &restart};
    a = ddp_policy_step(&p, &left);
    cr_expect_eq(a.flags, DDP_ACT_ARM_BACKOFF);
    cr_expect_eq(a.nproc, before - 1);
    cr_expect(a.downsized);
    cr_expect_eq(p.nproc, before - 1, "the policy's size from now on");
    restart.nproc = p.nproc;
    left.gpus_left = 0;
    left.why = "no usable GPU left: GPU 0 (x): Xid 79";
    a = ddp_policy_step(&p, &left);
    cr_expect_eq(a.flags, DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 3, "the root cause's status");
    cr_expect_str_eq(a.why, "no usable GPU left: GPU 0 (x): Xid 79");
    cr_expect_eq(p.state, DDP_PS_DONE);
}

/* Several nodes, another node: node 0 stops the attempt. The workers stop; the stop is node 0's, not a failure
 * here (no stop status, nothing counted against max_restarts). */
Test(policy, remote_stop_is_not_a_local_failure)
{
    struct ddp_spec s = spec_with(2, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data r = ev(DDP_PE_REMOTE_STOP);
    struct ddp_policy_action a = ddp_policy_step(&p, &r);
    cr_expect_eq(a.flags, (unsigned)(DDP_ACT_TERM_ALL | DDP_ACT_ARM_GRACE));
    cr_expect_eq(p.state, DDP_PS_STOPPING);
    cr_expect_eq(p.stop, DDP_STOP_REMOTE);
    cr_expect_eq(p.stop_status, 0);
    cr_expect_eq(p.restarts_used, 0);
    struct ddp_policy_event_data f = ev(DDP_PE_WORKER_FAILED); /* a worker dying of the SIGTERM changes nothing */
    cr_expect_eq(ddp_policy_step(&p, &f).flags, 0u);
    cr_expect_eq(p.stop, DDP_STOP_REMOTE);
}

/* Node 0: another node failed (its status) or timed out (124): the attempt stops as after a failure or a timeout
 * here, and the node's status is the root cause's. */
Test(policy, node_failed_is_a_failure_or_a_timeout)
{
    struct ddp_spec s = spec_with(0, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data n = {.kind = DDP_PE_NODE_FAILED, .status = 7};
    cr_expect_eq(ddp_policy_step(&p, &n).flags, (unsigned)(DDP_ACT_TERM_ALL | DDP_ACT_ARM_GRACE));
    cr_expect_eq(p.stop, DDP_STOP_FAILURE);
    cr_expect_eq(p.stop_status, 7);
    cr_expect(!p.stop_fatal);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 7);
    ddp_policy_init(&p, &s, 4);
    n.status = 124;
    ddp_policy_step(&p, &n);
    cr_expect_eq(p.stop, DDP_STOP_TIMEOUT);
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.exit_status, 124);
}

Test(policy, failure_without_restarts_exits_with_root_cause_code)
{
    struct ddp_spec s = spec_with(0, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 7};
    ddp_policy_step(&p, &f);
    struct ddp_policy_event_data f2 = {.kind = DDP_PE_WORKER_FAILED, .status = 143};
    ddp_policy_step(&p, &f2); /* a peer dying of our SIGTERM is not the root cause */
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 7);
}

Test(policy, restarts_count_and_run_out)
{
    struct ddp_spec s = spec_with(2, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    for (int i = 1; i <= 3; i++) {
        struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 1};
        struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
        struct ddp_policy_event_data bo = {.kind = DDP_PE_BACKOFF_DONE};
        ddp_policy_step(&p, &f);
        struct ddp_policy_action a = ddp_policy_step(&p, &fin);
        if (i <= 2) {
            cr_assert_eq(a.flags, (unsigned)DDP_ACT_ARM_BACKOFF);
            cr_expect_eq(a.delay_ms, i == 1 ? 0 : 50); /* the first restart at once */
            cr_expect(strstr(a.why, "restart") != NULL, "why: %s", a.why);
            a = ddp_policy_step(&p, &bo);
            cr_assert_eq(a.flags, (unsigned)DDP_ACT_START);
            cr_expect_eq(a.attempt, i);
            cr_expect_eq(a.nproc, 2);
        } else {
            cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
            cr_expect_eq(a.exit_status, 1);
        }
    }
}

Test(policy, fatal_start_failure_is_not_restarted)
{
    struct ddp_spec s = spec_with(5, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 127, .fatal = true};
    ddp_policy_step(&p, &f);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 127);
}

Test(policy, on_failure_fail)
{
    struct ddp_spec s = spec_with(5, DDP_ONTIMEOUT_RESTART, 0);
    s.on_failure = DDP_ONFAIL_FAIL;
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 4};
    ddp_policy_step(&p, &f);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 4);
}

Test(policy, signal_stops_and_never_restarts)
{
    struct ddp_spec s = spec_with(5, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data sg = {.kind = DDP_PE_SIGNAL, .signo = SIGTERM};
    struct ddp_policy_action a = ddp_policy_step(&p, &sg);
    cr_expect_eq(a.flags, (unsigned)(DDP_ACT_FORWARD | DDP_ACT_ARM_GRACE));
    cr_expect_eq(a.signo, SIGTERM);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 143};
    ddp_policy_step(&p, &f);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 143);
}

Test(policy, second_sigint_kills_at_once)
{
    struct ddp_spec s = spec_with(0, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data sg = {.kind = DDP_PE_SIGNAL, .signo = SIGINT};
    struct ddp_policy_action a = ddp_policy_step(&p, &sg);
    cr_expect_eq(a.flags & DDP_ACT_KILL_ALL, 0u);
    a = ddp_policy_step(&p, &sg);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_KILL_ALL);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.exit_status, 130);
}

Test(policy, sigint_while_stopping_after_failure_keeps_root_cause)
{
    struct ddp_spec s = spec_with(3, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 9};
    ddp_policy_step(&p, &f);
    struct ddp_policy_event_data sg = {.kind = DDP_PE_SIGNAL, .signo = SIGINT};
    struct ddp_policy_action a = ddp_policy_step(&p, &sg);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_KILL_ALL);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT, "a signal cancels the restart");
    cr_expect_eq(a.exit_status, 9);
}

Test(policy, usr1_is_forwarded_without_stopping)
{
    struct ddp_spec s = spec_with(0, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data sg = {.kind = DDP_PE_SIGNAL, .signo = SIGUSR1};
    struct ddp_policy_action a = ddp_policy_step(&p, &sg);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_FORWARD);
    cr_expect_eq(a.signo, SIGUSR1);
    cr_expect_eq(p.state, DDP_PS_RUNNING);
}

Test(policy, timeout_fail_exits_124)
{
    struct ddp_spec s = spec_with(3, DDP_ONTIMEOUT_FAIL, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT};
    ddp_policy_step(&p, &t);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 124);
}

Test(policy, sigterm_while_a_timeout_stops_exits_143)
{
    struct ddp_spec s = spec_with(3, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT};
    ddp_policy_step(&p, &t);
    struct ddp_policy_event_data sig = {.kind = DDP_PE_SIGNAL, .signo = SIGTERM};
    struct ddp_policy_action a = ddp_policy_step(&p, &sig);
    cr_expect(a.flags & DDP_ACT_FORWARD);
    cr_expect_eq(p.stop, DDP_STOP_SIGNAL);
    struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT, "restarted although stopped by SIGTERM");
    cr_expect_eq(a.exit_status, 128 + SIGTERM);
}

Test(policy, timeout_restart_counts_then_124)
{
    struct ddp_spec s = spec_with(1, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT}, fin = {.kind = DDP_PE_ALL_FINISHED},
                                 bo = {.kind = DDP_PE_BACKOFF_DONE};
    ddp_policy_step(&p, &t);
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_ARM_BACKOFF);
    a = ddp_policy_step(&p, &bo);
    cr_expect_eq(a.nproc, 4);
    ddp_policy_step(&p, &t);
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.exit_status, 124);
}

Test(policy, downsize_halves_to_min_then_restarts_then_124)
{
    struct ddp_spec s = spec_with(1, DDP_ONTIMEOUT_DOWNSIZE, 2);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 8);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT}, fin = {.kind = DDP_PE_ALL_FINISHED},
                                 bo = {.kind = DDP_PE_BACKOFF_DONE};
    int want[] = {4, 2, 2};
    for (int i = 0; i < 3; i++) {
        ddp_policy_step(&p, &t);
        struct ddp_policy_action a = ddp_policy_step(&p, &fin);
        cr_assert_eq(a.flags, (unsigned)DDP_ACT_ARM_BACKOFF, "step %d", i);
        cr_expect_eq(a.nproc, want[i]);
        cr_expect_eq(a.downsized, i < 2);
        if (i < 2)
            cr_expect(strstr(a.why, "downsizing") != NULL, "why: %s", a.why);
        a = ddp_policy_step(&p, &bo);
        cr_expect_eq(a.nproc, want[i]);
        cr_expect_eq(a.attempt, i + 1);
    }
    ddp_policy_step(&p, &t);
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 124);
}

Test(policy, downsize_after_two_timeouts)
{
    struct ddp_spec s = spec_with(5, DDP_ONTIMEOUT_DOWNSIZE, 1);
    s.downsize_after = 2;
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT}, fin = {.kind = DDP_PE_ALL_FINISHED},
                                 bo = {.kind = DDP_PE_BACKOFF_DONE};
    ddp_policy_step(&p, &t);
    struct ddp_policy_action a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.nproc, 4, "first timeout at 4: same size");
    ddp_policy_step(&p, &bo);
    ddp_policy_step(&p, &t);
    a = ddp_policy_step(&p, &fin);
    cr_expect_eq(a.nproc, 2, "second timeout at 4: downsize");
}

Test(policy, next_size)
{
    struct ddp_downsize half = {.divisor = 2}, fixed = {.size = 2};
    cr_expect_eq(ddp_policy_next_size(&half, 8, 1), 4);
    cr_expect_eq(ddp_policy_next_size(&half, 3, 1), 1);
    cr_expect_eq(ddp_policy_next_size(&half, 8, 6), 6);
    cr_expect_eq(ddp_policy_next_size(&half, 2, 2), 2);
    cr_expect_eq(ddp_policy_next_size(&half, 1, 1), 1);
    cr_expect_eq(ddp_policy_next_size(&fixed, 8, 1), 2);
    cr_expect_eq(ddp_policy_next_size(&fixed, 2, 1), 1);
}

Test(policy, backoff_signal_exits_without_workers)
{
    struct ddp_spec s = spec_with(3, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 1}, fin = {.kind = DDP_PE_ALL_FINISHED};
    ddp_policy_step(&p, &f);
    ddp_policy_step(&p, &fin);
    cr_assert_eq(p.state, DDP_PS_BACKOFF);
    struct ddp_policy_event_data sg = {.kind = DDP_PE_SIGNAL, .signo = SIGHUP};
    struct ddp_policy_action a = ddp_policy_step(&p, &sg);
    cr_expect_eq(a.flags, (unsigned)DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 128 + SIGHUP);
}

/* Several nodes: what this node reports to node 0 for its part of an attempt, by why it stopped. */
Test(policy, local_status_by_why_it_stopped)
{
    struct ddp_spec s = spec_with(2, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    cr_expect_eq(ddp_policy_local_status(&p, 7), 0, "running: nothing went wrong");
    struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 3};
    ddp_policy_step(&p, &f);
    cr_expect_eq(ddp_policy_local_status(&p, 7), 3, "a failure: the root cause's status");
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT};
    ddp_policy_step(&p, &t);
    cr_expect_eq(ddp_policy_local_status(&p, 7), 124);
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data g = {.kind = DDP_PE_SIGNAL, .signo = SIGTERM};
    ddp_policy_step(&p, &g);
    cr_expect_eq(ddp_policy_local_status(&p, 7), 128 + SIGTERM);
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data r = {.kind = DDP_PE_REMOTE_STOP};
    ddp_policy_step(&p, &r);
    cr_expect_eq(ddp_policy_local_status(&p, 7), 1, "node 0 stopped it: not a success");
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data a = {.kind = DDP_PE_ALL_FINISHED};
    ddp_policy_step(&p, &a);
    cr_expect_eq(ddp_policy_local_status(&p, 7), 7, "done: the exit status");
}

/* The first restart starts at once; the pause is [restart] backoff from the second, doubling, up to a minute. */
Test(policy, first_restart_at_once_then_backoff_grows)
{
    struct ddp_spec s = spec_with(12, DDP_ONTIMEOUT_RESTART, 0);
    s.backoff_ms = 1000;
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 2);
    static const int want[] = {0, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct ddp_policy_event_data f = {.kind = DDP_PE_WORKER_FAILED, .status = 1};
        struct ddp_policy_event_data fin = {.kind = DDP_PE_ALL_FINISHED};
        struct ddp_policy_event_data bo = {.kind = DDP_PE_BACKOFF_DONE};
        ddp_policy_step(&p, &f);
        struct ddp_policy_action a = ddp_policy_step(&p, &fin);
        cr_assert_eq(a.flags, (unsigned)DDP_ACT_ARM_BACKOFF);
        cr_expect_eq(a.delay_ms, want[i], "restart %zu: %d ms, want %d", i + 1, a.delay_ms, want[i]);
        ddp_policy_step(&p, &bo);
    }
}

Test(policy, final_timeout_ends_the_job_whatever_restarts_are_left)
{
    struct ddp_spec s = spec_with(3, DDP_ONTIMEOUT_RESTART, 0);
    struct ddp_policy p;
    ddp_policy_init(&p, &s, 4);
    struct ddp_policy_event_data t = {.kind = DDP_PE_TIMEOUT, .final = true};
    struct ddp_policy_action a = ddp_policy_step(&p, &t);
    cr_expect(a.flags & DDP_ACT_TERM_ALL);
    struct ddp_policy_event_data f = ev(DDP_PE_ALL_FINISHED);
    a = ddp_policy_step(&p, &f);
    cr_expect_eq(a.flags, DDP_ACT_EXIT);
    cr_expect_eq(a.exit_status, 124);
    cr_expect_str_eq(a.why, "a rank worked alone past [timeout] busy_limit: not restarting");
    cr_expect_eq(p.restarts_used, 0);
}

/* The suspicion table: on_suspect x state. */
Test(policy, suspect_table)
{
    struct ddp_suspect_facts f = {.quiet_ms = 40000, .after_ms = 600000, .confirm_ms = 15000, .busy_limit_ms = 1800000};
    f.on_suspect = DDP_ONSUSPECT_AUTO;
    f.state = DDP_SUSPECT_STUCK;
    f.stuck_ms = 14999;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_SAY, "auto, stuck, not yet confirmed");
    f.stuck_ms = 15000;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_STOP, "auto, stuck and confirmed");
    f.state = DDP_SUSPECT_WEAK;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_SAY, "auto, weak evidence: warn only");
    f.state = DDP_SUSPECT_BUSY;
    f.busy_ms = 1799999;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_ALONE, "busy: works alone, no action");
    f.busy_ms = 1800000;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_END, "busy past busy_limit: the job ends");
    f.busy_limit_ms = 0;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_ALONE, "busy_limit off: never");
    f.on_suspect = DDP_ONSUSPECT_WARN;
    f.state = DDP_SUSPECT_STUCK;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_SAY, "warn never stops");
    f.on_suspect = DDP_ONSUSPECT_RESTART;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_SAY, "restart: before on_suspect_after");
    f.quiet_ms = 600000;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_STOP, "restart: after on_suspect_after");
    f.state = DDP_SUSPECT_BUSY;
    cr_expect_eq(ddp_policy_suspect(&f), DDP_SUSPECT_ALONE, "restart never stops a rank working alone");
}
