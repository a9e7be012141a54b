/* supervise: the driver, see supervise.h. One libuv loop, one driver for one node and for several: it owns the
 * policy (policy.h); everything that happens reaches it as an event (the runner's workers, the timeout sources,
 * signals; on several nodes the node agent, roles.h, which steps agent.h's table and calls back here), goes
 * through the policy's table, and the actions it returns are carried out here: the runner (runner.h) starts and
 * signals workers, records.h writes what happened, the watch's capture (capture_ask.h) captures a hang's stacks,
 * roles.h tells the other nodes.
 *
 * Who calls whom (no module is passed twice on one event's way):
 *   runner / timeout source / signal -> supervise -> policy table -> supervise carries the actions out ->
 *   runner, records, watch (the hang capture), roles (STOP, START, EXIT to the other nodes);
 *   coord -> roles [roster: translate] -> agent table -> supervise (roles.h's operations) -> policy table.
 * Every timeout and evidence source is the watch's (watch.h): the driver calls its one interface, and asks the
 * capture and the recorders at a failure through their narrow headers (capture_ask.h, atfail.h). */
#include "driver/supervise.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exit.h"
#include "driver/gpus.h"
#include "driver/gpuset.h"
#include "driver/parts.h"
#include "driver/policy.h"
#include "driver/roles.h"
#include "driver/signals.h"
#include "host/cgroup.h"
#include "host/logdir.h"
#include "records/records.h"
#include "records/report.h"
#include "run/runner.h"
#include "run/shim.h"
#include "run/standby.h"
#include "topo/place.h"
#include "watch/atfail.h"
#include "watch/capture_ask.h"
#include "watch/gpuwatch.h"
#include "watch/timeout.h"
#include "watch/watch.h"

/* Which driver this node runs: alone, node 0 of several, or another node. */
enum role { ROLE_SINGLE, ROLE_LEADER, ROLE_FOLLOWER };

struct sup {
    uv_loop_t loop;
    const struct ddp_plan_ctx *ctx;
    const struct ddp_spec *spec;
    struct ddp_plan_ctx actx; /* ctx with this attempt's group rank, node count and port */
    enum role role;
    struct ddp_policy pol;
    struct ddp_runner *rn;
    struct ddp_records *rec;
    struct ddp_watch *watch; /* the hang watch: every timeout and evidence source (watch.h) */
    struct ddp_roles *roles; /* several nodes: the node agent (roles.h) */
    struct ddp_signals *sigs;
    uv_timer_t grace, backoff, force;
    struct ddp_policy_action pending; /* START waiting for the backoff timer */
    struct ddp_gpus_read *gpucheck;   /* busy = warn: the holder check beside attempt 0's spawn, until it answers */
    bool gpucheck_started;
    struct ddp_gpus_read *recheck;        /* NVML's state before a restart, until it answers */
    struct ddp_policy_action recheck_act; /* the restart's action, carried out once it answers */
    int exit_status;
    bool closed;             /* exit decided: handles closed, the loop ends */
    bool launcher_failed;    /* exit 1 whatever the policy says */
    bool sig_reached;        /* the signal being fed reached every worker already (Slurm): not forwarded */
    bool term_reached;       /* Slurm's SIGTERM reached every worker: a later stop sends no second one */
    struct ddp_gpuset *gpus; /* the job's GPUs from attempt to attempt: left out, held, leased (gpuset.h) */
    char *timeout_reason;    /* why the current attempt is being stopped for a timeout */
    enum ddp_class timeout_class;
    const char *stop_why;              /* node 0: why the attempt stops, for STOP (during one feed) */
    char *cgroup_base;                 /* where attempt cgroups go (cgroup.h), or NULL */
    struct ddp_standby_pool *standbys; /* warm restart (standby.h), or NULL */
    struct ddp_err *err;
};

static void apply(struct sup *s, const struct ddp_policy_action *a);
/* How long a worker's failure waits for the busy check beside the spawn (its cause may be the holder): bounded,
 * the loop does not run meanwhile. */
#define SETTLE_MS 1000
static void all_done(struct sup *s);

static int cur_attempt(const struct sup *s)
{
    struct ddp_runner_attempt *r = ddp_runner_current(s->rn);
    return r ? ddp_runner_attempt_number(r) : s->pol.attempt;
}

/* The watch's hang capture (capture_ask.h) and its recorders at a collective failure (atfail.h). */
static struct ddp_capture *capture(const struct sup *s)
{
    return ddp_capture_in_watch(ddp_watch_env(s->watch));
}

static struct ddp_atfail *atfail(const struct sup *s)
{
    return ddp_atfail_in_watch(ddp_watch_env(s->watch));
}

/* The class a failure recorded with a reason gets while a timeout stops the attempt. */
static enum ddp_class timeout_cls(const struct sup *s)
{
    return s->timeout_reason ? s->timeout_class : DDP_CLASS_NONE;
}

/* Forget the current attempt (its memory goes once its handles are closed). */
static void retire(struct sup *s)
{
    ddp_watch_stopping(s->watch);
    ddp_runner_retire(s->rn);
}

/* ---------------------------------------------------------------- the tables */

/* Feed one event to the policy and carry out its actions. */
static void feed(struct sup *s, const struct ddp_policy_event_data *ev)
{
    enum ddp_policy_state before = s->pol.state;
    struct ddp_policy_action a = ddp_policy_step(&s->pol, ev);
    if (before == DDP_PS_RUNNING && s->pol.state != DDP_PS_RUNNING)
        ddp_watch_attempt_stop(s->watch); /* a timeout is news only while the attempt runs */
    if (before == DDP_PS_RUNNING && s->pol.state == DDP_PS_STOPPING)
        ddp_records_stopping(s->rec, cur_attempt(s)); /* its ranks exit as stopped, not failed */
    /* no suspicion while it is stopped (a Ctrl-C's output is no progress); the recorders asked at a collective
     * failure are read first (TERM_ALL comes when they answered) */
    if ((a.flags & (DDP_ACT_TERM_ALL | DDP_ACT_CAPTURE | DDP_ACT_KILL_ALL)) ||
        (before == DDP_PS_RUNNING && s->pol.state == DDP_PS_STOPPING && !(a.flags & DDP_ACT_RECORDERS)))
        ddp_watch_stopping(s->watch);
    /* a signal from Slurm reached every node's workers already: the other nodes stop on their own copy */
    if (s->role == ROLE_LEADER && before == DDP_PS_RUNNING && s->pol.state == DDP_PS_STOPPING && !s->sig_reached) {
        const char *why = s->stop_why                       ? s->stop_why
                          : s->pol.stop == DDP_STOP_SIGNAL  ? "node 0 got a signal"
                          : s->pol.stop == DDP_STOP_TIMEOUT ? "a timeout on node 0"
                                                            : "a worker on node 0 failed";
        ddp_roles_stopping(s->roles, why);
    }
    if (ev->kind == DDP_PE_SIGNAL && a.flags)
        ddp_signals_tell(s->rec, cur_attempt(s), ev->signo, s->sig_reached, a.flags & DDP_ACT_KILL_ALL,
                         ddp_runner_alive(s->rn));
    apply(s, &a);
}

static void feed_kind(struct sup *s, enum ddp_policy_event kind)
{
    struct ddp_policy_event_data ev = {.kind = kind};
    feed(s, &ev);
}

/* Close the control channel (node 0: EXIT with s->exit_status first), the timers and the signal handlers. */
static void close_all(struct sup *s)
{
    if (s->closed)
        return;
    s->closed = true;
    ddp_roles_close(s->roles, s->exit_status);
    uv_timer_t *timers[] = {&s->grace, &s->backoff, &s->force};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++)
        uv_close((uv_handle_t *)timers[i], NULL);
    ddp_standby_close(s->standbys);
    ddp_runner_close(s->rn);
    ddp_watch_close(s->watch);
    ddp_gpus_read_close(s->gpucheck); /* the job's end does not wait for NVML */
    ddp_gpus_read_close(s->recheck);
    s->gpucheck = s->recheck = NULL;
    ddp_signals_close(s->sigs);
}

/* job_end and summary.json. */
static void write_records(struct sup *s, int status)
{
    const char *result = status == 0                                            ? "succeeded"
                         : s->launcher_failed                                   ? "launcher-failed"
                         : s->pol.stop == DDP_STOP_SIGNAL                       ? "stopped-by-signal"
                         : s->pol.stop == DDP_STOP_TIMEOUT || s->timeout_reason ? "timeout"
                                                                                : "failed";
    ddp_records_job_end(s->rec, status, result, s->timeout_reason);
}

/* The launcher exits with status. */
static void finish(struct sup *s, int status)
{
    write_records(s, status);
    retire(s);
    s->exit_status = status;
    close_all(s);
}

/* The launcher itself failed: exit 1 (said on stderr already). */
static void launcher_failed(struct sup *s)
{
    s->launcher_failed = true;
    s->exit_status = ddp_policy_exit_status(true, s->exit_status);
    write_records(s, s->exit_status); /* summary.json: exit.source launcher */
    close_all(s);
}

/* ---------------------------------------------------------------- starting an attempt */

/* Warm restart: which ranks of r started in a standby interpreter. */
static void say_warm(const struct ddp_runner_attempt *r)
{
    struct ddp_buf b = {0};
    size_t n = 0;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(r); i++)
        if (ddp_runner_worker_warm(ddp_runner_attempt_worker(r, i))) {
            ddp_buf_printf(&b, "%s%d", n++ ? "," : "", ddp_runner_worker_rank(ddp_runner_attempt_worker(r, i)));
        }
    if (n)
        ddp_info("attempt %d: rank%s %s started warm (standby interpreter%s), %zu fresh", ddp_runner_attempt_number(r),
                 n == 1 ? "" : "s", b.data, n == 1 ? "" : "s", ddp_runner_attempt_nworkers(r) - n);
    ddp_buf_free(&b);
}

/* Warm restart ([restart] warm = yes, or auto): the standby pool, when restarts are allowed. */
static void standbys_open(struct sup *s)
{
    const struct ddp_spec *sp = s->spec;
    if (sp->restart_warm == DDP_NO)
        return;
    if (sp->max_restarts == 0) {
        if (sp->restart_warm == DDP_YES)
            ddp_debug("warm restart: no standby interpreters: no restarts allowed ([restart] max_restarts = 0)");
        return;
    }
    struct ddp_standby_config c = {.loop = &s->loop,
                                   .rn = s->rn,
                                   .preload = &sp->restart_preload,
                                   .pydir = s->ctx->watch.sample_pydir,
                                   .sampling = s->ctx->job.spec->timeout_sample && s->ctx->watch.sample_pydir,
                                   .sample_signal = s->ctx->watch.sample_signal,
                                   .cgroup_base = s->cgroup_base,
                                   .quiet = sp->restart_warm == DDP_AUTO,
                                   .sched_mem_kib = s->ctx->sched.mem_kib};
    s->standbys = ddp_standby_new(&c);
    ddp_runner_set_adopt(s->rn, ddp_standby_take, s->standbys);
}

static void left_out(void *arg, int gpu, const char *busid, const char *why);

/* The busy check beside the spawn answered (its warnings printed): its holders are the OOM cause's evidence and
 * what the check before a restart compares with; a GPU the judge found lost or faulty is left out of a restart. */
static void gpucheck_answered(void *arg, struct ddp_gpus_found *found)
{
    struct sup *s = arg;
    size_t ngpus = ddp_topo_ngpus(s->ctx->job.topo);
    s->gpucheck = NULL;
    ddp_gpuset_set_held(s->gpus, found->held);
    for (size_t g = 0; found->held && g < ngpus; g++)
        if (found->held[g])
            ddp_records_gpu_held(s->rec, (int)g, found->held[g]);
    for (size_t g = 0; found->unfit && g < ngpus; g++)
        if (found->unfit[g])
            left_out(s, (int)g, ddp_topo_gpu_busid(s->ctx->job.topo, g), found->unfit[g]);
    ddp_gpus_held_free(found->unfit, ngpus);
}

/* Build and start attempt `attempt` with nproc workers on this node (s->actx). 0 (a worker that could not be
 * started is a failure of the attempt, said on stderr), or a negative errno with s->err set and nothing
 * started. */
static int start_attempt(struct sup *s, int attempt, int nproc)
{
    struct ddp_attempt plan = {0};
    struct ddp_runner_attempt *r;
    size_t nexclude, nfaulted;
    const int *exclude = ddp_gpuset_excluded(s->gpus, false, &nexclude);
    const int *faulted = ddp_gpuset_excluded(s->gpus, true, &nfaulted);
    int rc = ddp_plan_build(&s->actx, attempt, nproc, exclude, nexclude, &plan, s->err);
    if (rc < 0 && nexclude > nfaulted) { /* a GPU's own fault stays out; a stalled rank's GPU may return */
        ddp_warn("attempt %d: %s; trying again without leaving out the GPUs of the stalled ranks", attempt,
                 s->err->msg);
        ddp_attempt_free(&plan);
        plan = (struct ddp_attempt){0};
        rc = ddp_plan_build(&s->actx, attempt, nproc, faulted, nfaulted, &plan, s->err);
    }
    if (rc == 0)
        ddp_gpuset_ran(s->gpus, &plan);
    if (rc == 0 && s->ctx->job.logdir)
        rc = ddp_logdir_attempt(s->ctx->job.logdir, attempt, nproc, s->err);
    if (rc < 0) {
        ddp_attempt_free(&plan);
        return rc;
    }
    free(s->timeout_reason);
    s->timeout_reason = NULL;
    if (attempt > 0 && plan.gpu_reason)
        ddp_info("attempt %d: %s", attempt, plan.gpu_reason);
    ddp_watch_prepare(s->watch, &plan);
    if (ddp_runner_start(s->rn, &plan, &r, s->err) < 0) {
        /* the workers started so far are stopped like after a failure; then we exit 1 */
        ddp_error("%s", s->err->msg);
        s->launcher_failed = true;
        struct ddp_policy_event_data ev = {.kind = DDP_PE_WORKER_FAILED, .launcher = true};
        if (s->pol.state == DDP_PS_RUNNING)
            feed(s, &ev);
        if (ddp_runner_attempt_ndone(r) == ddp_runner_attempt_nworkers(r) && ddp_runner_current(s->rn) == r)
            all_done(s);
        return 0;
    }
    ddp_records_attempt_begin(s->rec, r);
    ddp_watch_attempt_start(s->watch, r);
    say_warm(r);
    if (s->standbys && ddp_runner_attempt_number(r) < s->spec->max_restarts) /* the next one's, as this one runs */
        ddp_standby_fill(s->standbys, ddp_runner_attempt_plan(r));
    if (!s->gpucheck_started && ddp_gpus_check_beside(s->spec, true)) { /* else checked before the spawn */
        s->gpucheck_started = true;
        s->gpucheck =
            ddp_gpus_check_start(&s->loop, s->ctx->job.topo, s->spec, ddp_runner_attempt_plan(r), gpucheck_answered, s);
    }
    return 0;
}

/* ---------------------------------------------------------------- several nodes: the driver's side of roles.h */

static void roles_policy(void *arg, const struct ddp_policy_event_data *ev)
{
    feed(arg, ev);
}

static int roles_start(void *arg, int attempt, int nproc)
{
    return start_attempt(arg, attempt, nproc);
}

/* Node 0: another node failed (or was lost) in the current attempt: the whole job stops. */
static void roles_node_failed(void *arg, int attempt, int status, const char *why, bool disarm_grace)
{
    struct sup *s = arg;
    struct ddp_policy_event_data ev = {.kind = DDP_PE_NODE_FAILED, .status = status};
    if (s->pol.state != DDP_PS_RUNNING)
        return;
    ddp_error("attempt %d: %s; stopping the workers on every node", attempt, why);
    if (ddp_policy_status_is_timeout(status)) {
        free(s->timeout_reason);
        s->timeout_reason = ddp_xstrdup(why);
        ev.capture = ddp_capture_possible(capture(s)) > 0;
    }
    s->stop_why = why;
    feed(s, &ev);
    s->stop_why = NULL;
    if (disarm_grace)
        uv_timer_stop(&s->grace); /* our own workers are already gone: nothing to wait for or kill here */
}

/* Other nodes: tell node 0 how this node's part of the attempt ended (the workers all ended: LOCAL_DONE). */
static void roles_report(void *arg)
{
    struct sup *s = arg;
    int st = ddp_policy_local_status(&s->pol, s->exit_status);
    char why[600] = "", root[512];
    if (st != 0 && s->pol.stop != DDP_STOP_REMOTE) {
        ddp_records_root_line(s->rec, root, sizeof(root));
        if (s->timeout_reason)
            snprintf(why, sizeof(why), "%s: %s", s->ctx->job.hostname, s->timeout_reason);
        else if (root[0])
            snprintf(why, sizeof(why), "%s: %s", s->ctx->job.hostname, root);
        if (s->pol.stop != DDP_STOP_SIGNAL)
            ddp_records_print_summary(s->rec, st, ddp_runner_output(s->rn));
    }
    ddp_roles_report(s->roles, cur_attempt(s), st, why);
    retire(s);
}

static void roles_finish(void *arg, int status)
{
    finish(arg, status);
}

/* Start listening (node 0) or joining (others); node 0 starts attempt 0 once every node joined. */
static int roles_begin(struct sup *s)
{
    struct ddp_roles_config c = {.loop = &s->loop,
                                 .ctx = s->ctx,
                                 .actx = &s->actx,
                                 .pol = &s->pol,
                                 .rn = s->rn,
                                 .rec = s->rec,
                                 .watch = s->watch,
                                 .err = s->err,
                                 .ops = {roles_policy, roles_start, roles_node_failed, roles_report, roles_finish},
                                 .arg = s};
    return ddp_roles_begin(&c, &s->roles);
}

/* This node's workers of the current attempt all ended. */
static void all_done(struct sup *s)
{
    if (s->role == ROLE_SINGLE)
        feed_kind(s, DDP_PE_ALL_FINISHED);
    else
        ddp_roles_local_done(s->roles, ddp_policy_local_status(&s->pol, s->exit_status));
}

/* ---------------------------------------------------------------- carrying out the policy's actions */

static void on_grace(uv_timer_t *t)
{
    feed_kind(t->data, DDP_PE_GRACE_EXPIRED);
}

static void on_backoff(uv_timer_t *t)
{
    feed_kind(t->data, DDP_PE_BACKOFF_DONE);
}

/* After SIGKILL, a process outside the groups may still hold a pipe: give up on those pipes. */
static void on_force(uv_timer_t *t)
{
    struct sup *s = t->data;
    ddp_runner_give_up(s->rn);
}

static void capture_decided(void *arg)
{
    feed_kind(arg, DDP_PE_CAPTURE_DONE);
}

static bool gpu_recheck_start(struct sup *s, const struct ddp_policy_action *a);
static void gpu_recheck(struct sup *s, struct ddp_policy_action *a, const struct ddp_nvml *nv);
static void apply_now(struct sup *s, const struct ddp_policy_action *act);
static void fit_to_gpus_left(struct sup *s, struct ddp_policy_action *a);

/* The stop's grace passed with workers still running: one line naming them and the signal they outlived, before
 * SIGKILL (issue 43: the escalation was silent after a Ctrl-C). False when no worker runs (leftover processes
 * only: the policy's own reason says that). */
static bool say_escalation(struct sup *s, int attempt)
{
    struct ddp_runner_attempt *r = ddp_runner_current(s->rn);
    struct ddp_buf b = {0};
    size_t n = 0;
    for (size_t i = 0; r && i < ddp_runner_attempt_nworkers(r); i++)
        if (ddp_runner_worker_running(ddp_runner_attempt_worker(r, i)))
            ddp_buf_printf(&b, "%s%d", n++ ? ", " : "", ddp_runner_worker_rank(ddp_runner_attempt_worker(r, i)));
    if (n > 0) {
        int sig = s->pol.stop == DDP_STOP_SIGNAL ? s->pol.stop_signo : SIGTERM;
        char *d = ddp_timeout_duration(s->spec->shutdown_timeout_ms);
        ddp_warn("attempt %d: rank%s %s still running %s after SIG%s (shutdown_timeout): SIGKILL", attempt,
                 n > 1 ? "s" : "", b.data, d, sigabbrev_np(sig));
        free(d);
    }
    ddp_buf_free(&b);
    return n > 0;
}

static void apply(struct sup *s, const struct ddp_policy_action *act)
{
    /* before a restart: NVML's state of the GPUs, read off the loop (gpu_recheck_answered carries on) */
    if ((act->flags & DDP_ACT_ARM_BACKOFF) && gpu_recheck_start(s, act))
        return;
    struct ddp_policy_action next = *act;
    if (next.flags & DDP_ACT_ARM_BACKOFF)
        gpu_recheck(s, &next, NULL); /* events left GPUs out: fit the size to those left */
    apply_now(s, &next);
}

static void apply_now(struct sup *s, const struct ddp_policy_action *act)
{
    int attempt = cur_attempt(s);
    struct ddp_policy_action next = *act; /* fit_to_gpus_left may change a START */
    const struct ddp_policy_action *a = &next;
    if ((a->flags & DDP_ACT_TERM_ALL) && !s->term_reached) /* one SIGTERM per worker: Slurm's came already */
        ddp_runner_signal_all(s->rn, SIGTERM);
    if (a->flags & DDP_ACT_CAPTURE)
        ddp_capture_begin(capture(s), s->timeout_class);
    if (a->flags & DDP_ACT_RECORDERS)
        ddp_atfail_begin(atfail(s));
    if ((a->flags & DDP_ACT_FORWARD) && !s->sig_reached) /* one copy per worker: Slurm's reached them */
        ddp_runner_signal_all(s->rn, a->signo);
    if (a->flags & DDP_ACT_KILL_ALL) {
        /* grace timer no longer running while stopping: it expired (a second SIGINT comes while it runs) */
        bool grace_passed = s->pol.state == DDP_PS_STOPPING && !uv_is_active((uv_handle_t *)&s->grace);
        bool said = grace_passed && say_escalation(s, attempt);
        if (!said && a->why[0] && !(s->pol.state == DDP_PS_STOPPING && s->pol.stop == DDP_STOP_SIGNAL))
            ddp_warn("attempt %d: %s", attempt, a->why);
        ddp_runner_signal_all(s->rn, SIGKILL);
        uv_timer_start(&s->force, on_force, 1000, 0);
    }
    if (a->flags & DDP_ACT_ARM_GRACE)
        uv_timer_start(&s->grace, on_grace, (uint64_t)s->spec->shutdown_timeout_ms, 0);
    if (a->flags & DDP_ACT_ARM_BACKOFF) {
        ddp_records_decision(s->rec, attempt, a->downsized ? "downsize" : "restart", a->attempt, a->nproc, a->delay_ms,
                             -1, a->why);
        if (s->timeout_reason)
            ddp_warn("attempt %d: %s; %s", attempt, s->timeout_reason, a->why);
        else
            ddp_warn("attempt %d: %s", attempt, a->why);
        retire(s);
        s->pending = *a;
        uv_timer_start(&s->backoff, on_backoff, (uint64_t)(a->delay_ms > 0 ? a->delay_ms : 0), 0);
    }
    if (next.flags & DDP_ACT_START)
        fit_to_gpus_left(s, &next); /* a GPU fault that came during the backoff */
    if (a->flags & DDP_ACT_START) {
        ddp_info("attempt %d: starting %d worker%s", a->attempt, a->nproc, a->nproc == 1 ? "" : "s");
        int rc;
        if (s->role == ROLE_LEADER) /* the agent lays the attempt out over the nodes (the policy's size) */
            rc = ddp_roles_start(s->roles);
        else
            rc = start_attempt(s, a->attempt, a->nproc);
        if (rc < 0) {
            ddp_error("attempt %d: %s", a->attempt, s->err->msg);
            launcher_failed(s);
        }
    }
    if (a->flags & DDP_ACT_EXIT) {
        int status = ddp_policy_exit_status(s->launcher_failed, a->exit_status);
        if (s->pol.stop == DDP_STOP_TIMEOUT && s->timeout_reason)
            ddp_error("attempt %d: %s; %s", attempt, s->timeout_reason, a->why[0] ? a->why : "exiting");
        else if (a->why[0] && status != 0)
            ddp_info("%s", a->why);
        if (s->pol.stop == DDP_STOP_SIGNAL)
            ddp_error("stopped by %s", ddp_report_signame(s->pol.stop_signo));
        else if (status != 0)
            ddp_records_print_summary(s->rec, status, ddp_runner_output(s->rn));
        else
            ddp_records_print_success(s->rec);
        ddp_records_decision(s->rec, attempt, "exit", -1, -1, -1, status, a->why);
        if (s->role == ROLE_LEADER)
            ddp_roles_exit(s->roles, status); /* EXIT goes to every node when the channel closes */
        finish(s, status);
    }
}

/* ---------------------------------------------------------------- the GPUs' own state (gpuset.h) */

/* The rank of the current attempt on topology GPU gpu, or -1. */
static int rank_on_gpu(const struct sup *s, int gpu)
{
    struct ddp_runner_attempt *r = ddp_runner_current(s->rn);
    for (size_t i = 0; r && i < ddp_runner_attempt_nworkers(r); i++)
        if (ddp_runner_worker_plan(ddp_runner_attempt_worker(r, i))->gpu == gpu)
            return ddp_runner_worker_rank(ddp_runner_attempt_worker(r, i));
    return -1;
}

/* A GPU failed on its own: out of every later attempt, said and recorded. */
static void left_out(void *arg, int gpu, const char *busid, const char *why)
{
    struct sup *s = arg;
    char *text = ddp_gpuset_left_out(s->gpus, gpu, busid, why);
    if (!text)
        return;
    ddp_warn("%s", text);
    ddp_records_gpu_left_out(s->rec, cur_attempt(s), gpu, busid, why, text);
    free(text);
}

/* Before a restart, another process holds a GPU of the job: the evidence for a CUDA OOM's cause. */
static void held_now(void *arg, int gpu, const char *who)
{
    struct sup *s = arg;
    ddp_records_gpu_held(s->rec, gpu, who);
}

/* An NVML event (gpuwatch.h), in the loop: a console line, an event, evidence for the verdict; a GPU fault also
 * leaves the GPU out of the next attempt. Events for GPUs the attempt does not use are said at debug level. */
static void on_gpu_event(void *arg, const struct ddp_gpuwatch_event *ev)
{
    struct sup *s = arg;
    int rank = rank_on_gpu(s, ev->gpu);
    if (rank < 0 && !ddp_gpuset_holds(s->gpus, ev->gpu)) {
        ddp_debug("GPU %d (%s), not held by this job: %s", ev->gpu, ev->busid ? ev->busid : "?", ev->text);
        return;
    }
    char *text = ddp_gpuwatch_event_text(ev, rank, s->pol.state == DDP_PS_RUNNING);
    if (ev->fault || ev->type == DDP_NVML_EV_CLOCK)
        ddp_warn("attempt %d: %s", cur_attempt(s), text);
    else
        ddp_info("attempt %d: %s", cur_attempt(s), text);
    ddp_records_event(s->rec, "gpu_event", ddp_gpuwatch_event_json(ev, cur_attempt(s), rank, text));
    if (ev->fault) {
        ddp_records_gpu_fault(s->rec, ev->gpu, ev->busid, ev->text);
        left_out(s, ev->gpu, ev->busid, ev->text);
    }
    free(text);
}

/* Before a restart, for an attempt with GPU workers: NVML's state now, read off the loop with its deadline; the
 * restart's action waits for the answer (signals are answered meanwhile). false when nothing is read. */
static void gpu_recheck_answered(void *arg, const struct ddp_nvml *nv);

static bool gpu_recheck_start(struct sup *s, const struct ddp_policy_action *a)
{
    struct ddp_runner_attempt *r = ddp_runner_current(s->rn);
    const struct ddp_topo *topo = s->ctx->job.topo;
    bool gpus = false;
    for (size_t i = 0; r && i < ddp_runner_attempt_plan(r)->nworkers; i++)
        gpus |= ddp_runner_attempt_plan(r)->workers[i].gpu >= 0;
    if (!gpus || !topo || !ddp_topo_nvml(topo)->found || s->recheck) /* a job without GPUs never loads NVML */
        return false;
    /* no UUIDs, names or NVLinks */
    s->recheck =
        ddp_gpus_read_start(&s->loop, DDP_NVML_MEMORY | DDP_NVML_HEALTH, NULL, NULL, 0, gpu_recheck_answered, s);
    if (s->recheck)
        s->recheck_act = *a;
    return s->recheck != NULL;
}

static void gpu_recheck_answered(void *arg, const struct ddp_nvml *nv)
{
    struct sup *s = arg;
    struct ddp_policy_action next = s->recheck_act;
    s->recheck = NULL;
    if (nv->late) { /* the policy says whether the restart goes on unchecked */
        struct ddp_policy_event_data ev = {.kind = DDP_PE_GPUS_UNCHECKED, .why = nv->status, .pending = &next};
        ddp_warn("attempt %d: %s: the GPUs were not checked before the restart", cur_attempt(s), nv->status);
        next = ddp_policy_step(&s->pol, &ev);
        if (next.flags & DDP_ACT_EXIT) {
            apply_now(s, &next);
            return;
        }
    }
    gpu_recheck(s, &next, nv->late ? NULL : nv);
    apply_now(s, &next);
}

/* Before a restart: NVML's state now (nv; NULL: not read) for the GPUs the job holds; one the judge finds unfit
 * is left out (gpuset.h); then the next attempt is fitted to the GPUs left (fit_to_gpus_left). */
static void gpu_recheck(struct sup *s, struct ddp_policy_action *a, const struct ddp_nvml *nv)
{
    ddp_gpuset_recheck(s->gpus, nv, held_now, left_out, s);
    fit_to_gpus_left(s, a);
}

/* GPUs were left out for their own faults (the restart check, or an event, also during the backoff): the next
 * attempt a is fitted to the GPUs left (gpuset.h), downsizing as for a hung rank's GPU; with none left the job
 * ends, saying why, instead of restarting on a GPU that failed. One node only. */
static void fit_to_gpus_left(struct sup *s, struct ddp_policy_action *a)
{
    if (s->role != ROLE_SINGLE || s->spec->gpus_share)
        return;
    char why[256] = "";
    struct ddp_policy_event_data ev = {.kind = DDP_PE_GPUS_LEFT, .why = why, .pending = a};
    ev.gpus_left = ddp_gpuset_fit(s->gpus, &s->actx.gpus, a->nproc, why, sizeof why);
    if (ev.gpus_left < a->nproc)
        *a = ddp_policy_step(&s->pol, &ev);
}

/* ---------------------------------------------------------------- what the timeout sources report */

/* The one entry point of every timeout source (timeout.h): a timeout stops the attempt while it runs. */
static void on_timeout(void *arg, struct ddp_timeout *t)
{
    struct sup *s = arg;
    struct ddp_runner_attempt *r = ddp_runner_current(s->rn);
    if (!r || s->pol.state != DDP_PS_RUNNING || (t->k && !ddp_runner_is_current(t->k))) {
        free(t->why);
        return;
    }
    for (size_t i = 0; i < t->ngpus; i++)
        ddp_gpuset_exclude(s->gpus, t->gpus[i]);
    free(s->timeout_reason);
    s->timeout_reason = t->why;
    s->timeout_class = t->cls;
    ddp_records_root(s->rec, t->k, t->why, t->cls);
    ddp_records_timeout(s->rec, ddp_runner_attempt_number(r), t->cls, t->k, t->why);
    ddp_error("attempt %d: %s; stopping the workers", ddp_runner_attempt_number(r), t->why);
    struct ddp_policy_event_data ev = {
        .kind = DDP_PE_TIMEOUT, .capture = ddp_capture_possible(capture(s)) > 0, .final = t->final};
    feed(s, &ev);
}

/* ---------------------------------------------------------------- what the runner reports */

static void on_started(void *arg, struct ddp_runner_worker *k)
{
    struct sup *s = arg;
    ddp_records_attempt_flush(s->rec, ddp_runner_worker_attempt(k));
    ddp_watch_started(s->watch, k);
}

static void on_output(void *arg, struct ddp_runner_worker *k, long long now)
{
    struct sup *s = arg;
    ddp_watch_output(s->watch, k, now);
}

static void on_resumed(void *arg, long long now)
{
    struct sup *s = arg;
    ddp_watch_resumed(s->watch, now);
}

static void on_line(void *arg, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    struct sup *s = arg;
    ddp_watch_line(s->watch, k, which, line, len);
}

/* k failed first: it is the root cause, the others are stopped. */
static void worker_failed(struct sup *s, const struct ddp_runner_worker *k)
{
    int attempt = ddp_runner_attempt_number(ddp_runner_worker_attempt(k)), signo = ddp_runner_worker_signo(k);
    int rank = ddp_runner_worker_rank(k), local = ddp_runner_worker_local_rank(k), pid = ddp_runner_worker_pid(k);
    ddp_records_root(s->rec, k, NULL, DDP_CLASS_NONE);
    if (signo)
        ddp_error("attempt %d: rank %d (local %d, pid %d) died by %s; stopping the other workers", attempt, rank, local,
                  pid, ddp_report_signame(signo));
    else
        ddp_error("attempt %d: rank %d (local %d, pid %d) exited with code %d; stopping the other workers", attempt,
                  rank, local, pid, ddp_runner_worker_status(k));
}

/* The shim says the program failed while it still ends what the program left behind (which may take up to
 * shutdown_timeout): stop the other workers now. */
static void on_program_ended(void *arg, struct ddp_runner_worker *k, int status, int signo)
{
    struct sup *s = arg;
    if (!ddp_runner_is_current(k) || s->pol.state != DDP_PS_RUNNING)
        return;
    ddp_runner_program_ended(k, status, signo);
    worker_failed(s, k);
    struct ddp_policy_event_data ev = {
        .kind = DDP_PE_WORKER_FAILED, .status = status, .recorders = ddp_atfail_possible(atfail(s), k)};
    feed(s, &ev);
}

static void on_exited(void *arg, struct ddp_runner_worker *k, enum ddp_lifecycle_state from)
{
    struct sup *s = arg;
    struct ddp_runner_attempt *r = ddp_runner_worker_attempt(k);
    int status = ddp_runner_worker_status(k), signo = ddp_runner_worker_signo(k);
    ddp_watch_exited(s->watch, k);
    ddp_records_worker_exit(s->rec, k);
    if (!ddp_runner_is_current(k))
        return;
    if (status != 0) /* a failure's cause may be the holder the check beside the spawn is about to name */
        ddp_gpus_read_settle(s->gpucheck, SETTLE_MS);
    ddp_records_exited(s->rec, k, timeout_cls(s));
    if (from != DDP_WS_ENDING) { /* else its failure was fed when the shim said the program ended */
        struct ddp_policy_event_data ev = {.kind = status == 0 ? DDP_PE_WORKER_OK : DDP_PE_WORKER_FAILED};
        if (status != 0) {
            ev.status = status;
            ev.fatal = ddp_runner_worker_fail(k) != DDP_WF_NONE;
            if (s->pol.state == DDP_PS_RUNNING) {
                worker_failed(s, k);
                ev.recorders = ddp_atfail_possible(atfail(s), k);
            } else if (s->pol.state == DDP_PS_STOPPING && s->pol.stop != DDP_STOP_SIGNAL &&
                       ddp_runner_worker_fail(k) != DDP_WF_EXEC && !ddp_capture_in(capture(s), k) && signo != SIGTERM &&
                       signo != SIGKILL && status != ddp_exit_signal(SIGTERM))
                ddp_records_other(s->rec, k); /* a failure of its own while we were stopping */
        }
        feed(s, &ev);
    }
    /* every worker exited but processes they left behind hold their output pipes: wait, then kill them */
    if (ddp_runner_attempt_nexited(r) == ddp_runner_attempt_nworkers(r) &&
        ddp_runner_attempt_ndone(r) < ddp_runner_attempt_nworkers(r) && !uv_is_active((uv_handle_t *)&s->grace) &&
        s->pol.state == DDP_PS_RUNNING)
        uv_timer_start(&s->grace, on_grace, (uint64_t)s->spec->shutdown_timeout_ms, 0);
}

static void on_done(void *arg, struct ddp_runner_worker *k, bool all)
{
    struct sup *s = arg;
    if (!all || !ddp_runner_is_current(k))
        return;
    ddp_watch_all_gone(s->watch); /* every rank is gone: the capture decides before the policy ends the attempt */
    uv_timer_stop(&s->grace);
    uv_timer_stop(&s->force);
    all_done(s);
}

static void on_changed(void *arg, struct ddp_runner_worker *k)
{
    struct sup *s = arg;
    (void)k;
    ddp_watch_changed(s->watch);
}

/* ---------------------------------------------------------------- signals */

static void on_signal(void *arg, int signo, bool reached)
{
    struct sup *s = arg;
    s->sig_reached = reached;
    s->term_reached |= reached && signo == SIGTERM;
    if (s->role != ROLE_SINGLE) {
        ddp_roles_signal(s->roles, signo); /* to the policy while an attempt is under way or decided */
    } else {
        struct ddp_policy_event_data ev = {.kind = DDP_PE_SIGNAL, .signo = signo};
        feed(s, &ev);
    }
    s->sig_reached = false;
}

/* ---------------------------------------------------------------- entry */

int ddp_supervise_run(const struct ddp_plan_ctx *ctx, const char *self_exe, const char *self_exec, struct ddp_err *err)
{
    struct sup *s = ddp_xcalloc(1, sizeof(*s));
    int rc, status;
    bool multi = ctx->nnodes > 1 && ctx->coord.secret;

    s->ctx = ctx;
    s->actx = *ctx;
    s->spec = ctx->job.spec;
    s->role = !multi ? ROLE_SINGLE : ctx->coord.node == 0 ? ROLE_LEADER : ROLE_FOLLOWER;
    s->err = err;
    s->gpus = ddp_gpuset_new(&ctx->job, &ctx->gpus);
    s->actx.gpus.holders = ddp_gpuset_holders(s->gpus); /* ours to change: a GPU leased for a restart */
    if (ddp_cgroup_base(&s->cgroup_base) < 0)
        s->cgroup_base = NULL; /* no cgroup v2 of ours: the shims' subreaping alone */
    else if (ctx->job.sweep_leftovers)
        ddp_cgroup_sweep(s->cgroup_base); /* what SIGKILLed launchers left there */
    signal(SIGPIPE, SIG_IGN);             /* a closed console must not kill the launcher (workers get SIG_DFL back) */
    /* what a worker's killed shim contained comes back to us, not to init */
    rc = ddp_shim_adopt_orphans();
    if (rc < 0)
        ddp_debug("not a child subreaper: %s", strerror(-rc));
    rc = uv_loop_init(&s->loop);
    if (rc < 0) { /* EMFILE at a low open-files limit: nothing was started, nothing to close */
        ddp_errf(err, rc, "cannot start the event loop: %s", uv_strerror(rc));
        free(s->cgroup_base);
        free(s);
        return ddp_policy_exit_status(true, 0);
    }
    struct ddp_runner_config rcfg = {
        .loop = &s->loop,
        .self_exe = self_exe,
        .self_exec = self_exec,
        .grace_ms = s->spec->shutdown_timeout_ms,
        .logdir = ctx->job.logdir,
        .dup_filters = {s->spec->duplicate_stdout_filters, s->spec->duplicate_stderr_filters},
        .cgroup_base = s->cgroup_base,
        .ops = {.started = on_started,
                .line = on_line,
                .output = on_output,
                .resumed = on_resumed,
                .program_ended = on_program_ended,
                .exited = on_exited,
                .done = on_done,
                .changed = on_changed},
        .arg = s,
    };
    s->rn = ddp_runner_new(&rcfg);
    ddp_runner_prepare(s->rn, 0); /* an agent's cgroup is ready before the other nodes are */
    standbys_open(s);
    uv_timer_t *timers[] = {&s->grace, &s->backoff, &s->force};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_timer_init(&s->loop, timers[i]);
        timers[i]->data = s;
    }
    /* Signals first, so that one arriving while the workers start is not lost. */
    s->sigs = ddp_signals_start(&s->loop, s->spec, ctx->sched, on_signal, s);
    s->rec = ddp_records_open(ddp_parts_records(ctx), ddp_runner_output(s->rn));
    struct ddp_watch_config wcfg = {.loop = &s->loop,
                                    .job = &ctx->job,
                                    .timer_file = ctx->watch.timer_file,
                                    .rn = s->rn,
                                    .rec = s->rec,
                                    .sink = {on_timeout, s, ddp_policy_suspect},
                                    .decided = capture_decided,
                                    .gpu_event = on_gpu_event,
                                    .arg = s};
    if (ddp_watch_open(&wcfg, &s->watch, err) < 0) {
        ddp_error("%s", err->msg);
        s->launcher_failed = true;
    }
    ddp_policy_init(&s->pol, s->spec, ctx->nproc);
    rc = s->launcher_failed ? -1 : multi ? roles_begin(s) : start_attempt(s, 0, ctx->nproc);
    if (rc < 0) {
        if (!s->launcher_failed && !multi)
            ddp_error("%s", err->msg); /* roles_begin said it already */
        launcher_failed(s);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* Anything still open (should be nothing): close and run once more so that memory is returned. */
    retire(s);
    status = ddp_policy_exit_status(s->launcher_failed, s->exit_status);
    if (s->launcher_failed)
        err->msg[0] = '\0'; /* said on stderr where it happened: the caller must not say it again */
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    ddp_runner_free(s->rn);
    ddp_standby_free(s->standbys);
    ddp_records_close(s->rec);
    ddp_watch_free(s->watch);
    ddp_roles_free(s->roles);
    free(s->sigs);
    ddp_gpuset_free(s->gpus);
    free(s->cgroup_base);
    free(s->timeout_reason);
    free(s);
    return status;
}
