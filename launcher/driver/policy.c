/* policy: see policy.h. The whole behaviour is the table at the bottom: one handler per (state, event). */
#include "driver/policy.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/exit.h"

typedef struct ddp_policy_action handler_fn(struct ddp_policy *p, const struct ddp_policy_event_data *ev);

int ddp_policy_min_nproc(const struct ddp_spec *spec, int nproc)
{
    int min = spec->min_nproc_per_node > 0                 ? spec->min_nproc_per_node
              : spec->on_timeout == DDP_ONTIMEOUT_DOWNSIZE ? 1
                                                           : nproc;
    return min < nproc ? min : nproc;
}

void ddp_policy_init(struct ddp_policy *p, const struct ddp_spec *spec, int nproc)
{
    memset(p, 0, sizeof(*p));
    p->state = DDP_PS_RUNNING;
    p->nproc = nproc;
    p->min_nproc = ddp_policy_min_nproc(spec, nproc);
    p->spec = spec;
}

int ddp_policy_next_size(const struct ddp_downsize *to, int nproc, int min_nproc)
{
    int next;
    if (to->divisor > 1)
        next = nproc / to->divisor;
    else if (to->size > 0 && to->size < nproc)
        next = to->size;
    else
        next = nproc / 2; /* a fixed size not below the current one: keep halving */
    if (next < min_nproc)
        next = min_nproc;
    if (next < 1)
        next = 1;
    return next < nproc ? next : nproc;
}

bool ddp_policy_signal_stops(int signo)
{
    return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
}

static struct ddp_policy_action none(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    (void)p;
    (void)ev;
    return (struct ddp_policy_action){0};
}

static struct ddp_policy_action stop_with(struct ddp_policy *p, enum ddp_policy_stop why, unsigned flags)
{
    struct ddp_policy_action a = {0};
    p->state = DDP_PS_STOPPING;
    p->stop = why;
    a.flags = flags | DDP_ACT_ARM_GRACE;
    return a;
}

/* RUNNING */
static struct ddp_policy_action run_failed(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    p->stop_status = ev->launcher ? DDP_EXIT_LAUNCHER : ev->status;
    p->stop_fatal = ev->fatal || ev->launcher;
    /* a collective error: the others' flight recorders first (TERM_ALL comes at CAPTURE_DONE) */
    return stop_with(p, DDP_STOP_FAILURE, ev->recorders ? DDP_ACT_RECORDERS : DDP_ACT_TERM_ALL);
}

static struct ddp_policy_action run_remote_stop(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    (void)ev;
    return stop_with(p, DDP_STOP_REMOTE, DDP_ACT_TERM_ALL);
}

/* Another node's failure stops the job's attempt like one here; its timeout (124) like a timeout here. */
static struct ddp_policy_action run_node_failed(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    if (ev->status == DDP_EXIT_TIMEOUT)
        return stop_with(p, DDP_STOP_TIMEOUT, ev->capture ? DDP_ACT_CAPTURE : DDP_ACT_TERM_ALL);
    p->stop_status = ev->status;
    p->stop_fatal = false;
    return stop_with(p, DDP_STOP_FAILURE, DDP_ACT_TERM_ALL);
}

/* A timeout stops the attempt; with a capture, the workers' stacks first (TERM_ALL comes at CAPTURE_DONE). */
static struct ddp_policy_action run_timeout(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    p->final_timeout = ev->final;
    return stop_with(p, DDP_STOP_TIMEOUT, ev->capture ? DDP_ACT_CAPTURE : DDP_ACT_TERM_ALL);
}

static struct ddp_policy_action run_signal(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    if (!ddp_policy_signal_stops(ev->signo)) {
        a.flags = DDP_ACT_FORWARD;
        a.signo = ev->signo;
        return a;
    }
    p->stop_signo = ev->signo;
    p->no_restart = true;
    a = stop_with(p, DDP_STOP_SIGNAL, DDP_ACT_FORWARD);
    a.signo = ev->signo;
    return a;
}

static struct ddp_policy_action run_all_finished(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    (void)ev;
    p->state = DDP_PS_DONE;
    a.flags = DDP_ACT_EXIT;
    a.exit_status = 0;
    return a;
}

/* The supervisor arms the grace timer in RUNNING only when every worker exited but leftover processes of
 * their groups still hold the output pipes: kill them. */
static struct ddp_policy_action run_grace(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    (void)p;
    (void)ev;
    a.flags = DDP_ACT_KILL_ALL;
    snprintf(a.why, sizeof(a.why), "processes left behind by exited workers still hold their output: killing them");
    return a;
}

/* STOPPING */
static struct ddp_policy_action stop_signal(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    if (!ddp_policy_signal_stops(ev->signo)) {
        a.flags = DDP_ACT_FORWARD;
        a.signo = ev->signo;
        return a;
    }
    p->no_restart = true;
    if (p->stop == DDP_STOP_SIGNAL && p->stop_signo == SIGINT && ev->signo == SIGINT) {
        a.flags = DDP_ACT_KILL_ALL;
        snprintf(a.why, sizeof(a.why), "second SIGINT: killing all workers now");
        return a;
    }
    if (p->stop == DDP_STOP_TIMEOUT) {
        /* stopped from outside while a timeout stops the attempt (a scheduler's preemption): the signal is
         * why the job ends, 128+N, not the timeout's 124 */
        p->stop = DDP_STOP_SIGNAL;
        p->stop_signo = ev->signo;
    }
    if (p->stop != DDP_STOP_SIGNAL) {
        /* the user wants out while we stop after a failure: no restart, keep the root cause */
        if (ev->signo == SIGINT) {
            a.flags = DDP_ACT_KILL_ALL;
            snprintf(a.why, sizeof(a.why), "SIGINT while stopping: killing all workers now");
            return a;
        }
    }
    a.flags = DDP_ACT_FORWARD;
    a.signo = ev->signo;
    return a;
}

/* The stacks or the recorders are in: stop the workers (whatever stops the attempt now: the timeout, the failure,
 * or a signal since). */
static struct ddp_policy_action stop_capture_done(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    (void)p;
    (void)ev;
    a.flags = DDP_ACT_TERM_ALL;
    return a;
}

static struct ddp_policy_action stop_grace(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    (void)p;
    (void)ev;
    a.flags = DDP_ACT_KILL_ALL;
    snprintf(a.why, sizeof(a.why), "shutdown timeout passed: sending SIGKILL to the workers left");
    return a;
}

static struct ddp_policy_action exit_with(struct ddp_policy *p, int status)
{
    struct ddp_policy_action a = {0};
    p->state = DDP_PS_DONE;
    a.flags = DDP_ACT_EXIT;
    a.exit_status = status;
    return a;
}

/* The pause before attempt `attempt` (1 = the first restart): none for the first (one rank died: the common
 * case, and torchrun restarts at once), then [restart] backoff, doubling from the second on, up to a minute (or
 * backoff itself when it is longer): a rank that keeps failing is not restarted in a tight loop. */
#define BACKOFF_MAX_MS 60000
static int backoff_delay(const struct ddp_spec *spec, int attempt)
{
    long long ms = spec->backoff_ms > 0 ? spec->backoff_ms : 0;
    long long cap = ms > BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
    if (attempt <= 1)
        return 0;
    for (int i = 2; i < attempt && ms < cap; i++)
        ms *= 2;
    return (int)(ms < cap ? ms : cap);
}

static struct ddp_policy_action backoff_for(struct ddp_policy *p, int nproc, bool counts)
{
    struct ddp_policy_action a = {0};
    if (counts)
        p->restarts_used++;
    a.downsized = nproc < p->nproc;
    if (a.downsized)
        p->timeouts_at_size = 0;
    p->nproc = nproc;
    p->state = DDP_PS_BACKOFF;
    a.flags = DDP_ACT_ARM_BACKOFF;
    a.nproc = nproc;
    a.attempt = p->attempt + 1;
    a.delay_ms = backoff_delay(p->spec, a.attempt);
    return a;
}

static struct ddp_policy_action stop_all_finished(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a;
    int left = p->spec->max_restarts - p->restarts_used;
    (void)ev;
    switch (p->stop) {
    case DDP_STOP_SIGNAL:
        return exit_with(p, ddp_exit_signal(p->stop_signo));
    case DDP_STOP_FAILURE:
        if (p->no_restart || p->stop_fatal || p->spec->on_failure == DDP_ONFAIL_FAIL || left <= 0) {
            a = exit_with(p, p->stop_status);
            snprintf(a.why, sizeof(a.why), "%s",
                     p->no_restart && p->spec->max_restarts > 0   ? "stopped by a signal: not restarting"
                     : p->no_restart                              ? ""
                     : p->stop_fatal && p->spec->max_restarts > 0 ? "the program could not be started: not restarting"
                     : p->stop_fatal                              ? ""
                     : p->spec->on_failure == DDP_ONFAIL_FAIL && p->spec->max_restarts > 0
                         ? "on_failure = fail: not restarting"
                     : p->spec->max_restarts > 0 ? "no restarts left"
                                                 : "");
            return a;
        }
        a = backoff_for(p, p->nproc, true);
        snprintf(a.why, sizeof(a.why), "restarting with %d workers (restart %d of %d)", p->nproc, p->restarts_used,
                 p->spec->max_restarts);
        return a;
    case DDP_STOP_TIMEOUT:
        if (p->no_restart)
            return exit_with(p, DDP_EXIT_TIMEOUT);
        if (p->final_timeout) {
            a = exit_with(p, DDP_EXIT_TIMEOUT);
            snprintf(a.why, sizeof(a.why), "a rank worked alone past [timeout] busy_limit: not restarting");
            return a;
        }
        if (p->spec->on_timeout == DDP_ONTIMEOUT_FAIL) {
            a = exit_with(p, DDP_EXIT_TIMEOUT);
            snprintf(a.why, sizeof(a.why), "on_timeout = fail: exiting");
            return a;
        }
        p->timeouts_at_size++;
        if (p->spec->on_timeout == DDP_ONTIMEOUT_DOWNSIZE && p->timeouts_at_size >= p->spec->downsize_after) {
            int next = ddp_policy_next_size(&p->spec->downsize_to, p->nproc, p->min_nproc);
            if (next < p->nproc) {
                int from = p->nproc;
                a = backoff_for(p, next, false);
                snprintf(a.why, sizeof(a.why), "downsizing %d -> %d workers", from, next);
                return a;
            }
        }
        if (left <= 0) {
            a = exit_with(p, DDP_EXIT_TIMEOUT);
            snprintf(a.why, sizeof(a.why), "%s",
                     p->spec->on_timeout == DDP_ONTIMEOUT_DOWNSIZE && p->nproc <= p->min_nproc
                         ? "already at the minimum size and no restarts left: exiting"
                         : "no restarts left: exiting");
            return a;
        }
        a = backoff_for(p, p->nproc, true);
        snprintf(a.why, sizeof(a.why), "restarting with %d workers (restart %d of %d)", p->nproc, p->restarts_used,
                 p->spec->max_restarts);
        return a;
    case DDP_STOP_REMOTE: /* node 0 decides what follows; reached only if a caller feeds it anyway */
        return exit_with(p, DDP_EXIT_LAUNCHER);
    case DDP_STOP_NONE:
        break;
    }
    return exit_with(p, 0);
}

/* BACKOFF */
static struct ddp_policy_action backoff_done(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = {0};
    (void)ev;
    p->state = DDP_PS_RUNNING;
    p->stop = DDP_STOP_NONE;
    p->stop_status = 0;
    p->stop_fatal = false;
    p->attempt++;
    a.flags = DDP_ACT_START;
    a.attempt = p->attempt;
    a.nproc = p->nproc;
    return a;
}

static struct ddp_policy_action backoff_signal(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    if (!ddp_policy_signal_stops(ev->signo))
        return none(p, ev);
    p->stop = DDP_STOP_SIGNAL;
    p->stop_signo = ev->signo;
    p->no_restart = true;
    return exit_with(p, ddp_exit_signal(ev->signo));
}

/* GPUS_UNCHECKED, GPUS_LEFT where nothing changes: the pending action as it was. */
static struct ddp_policy_action pending(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    (void)p;
    return ev->pending ? *ev->pending : (struct ddp_policy_action){0};
}

static struct ddp_policy_action backoff_unchecked(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    if (p->spec->gpus_busy != DDP_BUSY_FAIL)
        return pending(p, ev);
    struct ddp_policy_action a = exit_with(p, DDP_EXIT_TEMPFAIL);
    snprintf(a.why, sizeof(a.why),
             "%s: the GPUs were not checked before the restart; [gpus] busy = fail, so no "
             "restart",
             ev->why ? ev->why : "NVML did not answer");
    return a;
}

/* BACKOFF (the restart armed) or RUNNING (its START, after a fault during the backoff). */
static struct ddp_policy_action gpus_left(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    struct ddp_policy_action a = pending(p, ev);
    if (!(a.flags & (DDP_ACT_ARM_BACKOFF | DDP_ACT_START)))
        return a;
    if (ev->gpus_left < 1) { /* no restart on a GPU that failed: the job ends, saying why */
        int status = p->stop_status > 0 ? p->stop_status : DDP_EXIT_LAUNCHER;
        p->state = DDP_PS_DONE;
        a.flags = (a.flags & ~(unsigned)(DDP_ACT_ARM_BACKOFF | DDP_ACT_START)) | DDP_ACT_EXIT;
        a.exit_status = status;
        snprintf(a.why, sizeof(a.why), "%s", ev->why ? ev->why : "no usable GPU left");
    } else if (ev->gpus_left < a.nproc) {
        snprintf(a.why, sizeof(a.why), "downsizing %d -> %d workers (GPUs left out for their faults)", a.nproc,
                 ev->gpus_left);
        a.nproc = p->nproc = ev->gpus_left; /* the policy's size from now on */
        a.downsized = true;
    }
    return a;
}

/* The table. Rows: states; columns: WORKER_OK, WORKER_FAILED, TIMEOUT, SIGNAL, ALL_FINISHED, GRACE_EXPIRED,
 * BACKOFF_DONE, REMOTE_STOP, NODE_FAILED, CAPTURE_DONE, GPUS_UNCHECKED, GPUS_LEFT. */
static handler_fn *const table[DDP_PS__COUNT][DDP_PE__COUNT] = {
    [DDP_PS_RUNNING] = {none, run_failed, run_timeout, run_signal, run_all_finished, run_grace, none, run_remote_stop,
                        run_node_failed, none, pending, gpus_left},
    [DDP_PS_STOPPING] = {none, none, none, stop_signal, stop_all_finished, stop_grace, none, none, none,
                         stop_capture_done, pending, pending},
    [DDP_PS_BACKOFF] = {none, none, none, backoff_signal, none, none, backoff_done, none, none, none, backoff_unchecked,
                        gpus_left},
    [DDP_PS_DONE] = {none, none, none, none, none, none, none, none, none, none, pending, pending},
};

struct ddp_policy_action ddp_policy_step(struct ddp_policy *p, const struct ddp_policy_event_data *ev)
{
    if ((unsigned)p->state >= DDP_PS__COUNT || (unsigned)ev->kind >= DDP_PE__COUNT)
        return (struct ddp_policy_action){0};
    return table[p->state][ev->kind](p, ev);
}

int ddp_policy_exit_status(bool launcher_failed, int status)
{
    return launcher_failed ? DDP_EXIT_LAUNCHER : status;
}

bool ddp_policy_status_is_timeout(int status)
{
    return status == DDP_EXIT_TIMEOUT;
}

/* ---------------------------------------------------------------- suspected hangs */

typedef enum ddp_suspect_action suspect_fn(const struct ddp_suspect_facts *f);

static enum ddp_suspect_action say(const struct ddp_suspect_facts *f)
{
    (void)f;
    return DDP_SUSPECT_SAY;
}

static enum ddp_suspect_action say_then_stop(const struct ddp_suspect_facts *f)
{
    return f->quiet_ms >= f->after_ms ? DDP_SUSPECT_STOP : DDP_SUSPECT_SAY;
}

static enum ddp_suspect_action stop_when_confirmed(const struct ddp_suspect_facts *f)
{
    return f->stuck_ms >= f->confirm_ms ? DDP_SUSPECT_STOP : DDP_SUSPECT_SAY;
}

static enum ddp_suspect_action alone_until_limit(const struct ddp_suspect_facts *f)
{
    return f->busy_limit_ms > 0 && f->busy_ms >= f->busy_limit_ms ? DDP_SUSPECT_END : DDP_SUSPECT_ALONE;
}

/* Rows: on_suspect (warn, restart, downsize, auto); columns: weak, stuck, busy. */
static suspect_fn *const suspect_table[4][3] = {
    [DDP_ONSUSPECT_WARN] = {say, say, alone_until_limit},
    [DDP_ONSUSPECT_RESTART] = {say_then_stop, say_then_stop, alone_until_limit},
    [DDP_ONSUSPECT_DOWNSIZE] = {say_then_stop, say_then_stop, alone_until_limit},
    [DDP_ONSUSPECT_AUTO] = {say, stop_when_confirmed, alone_until_limit},
};

enum ddp_suspect_action ddp_policy_suspect(const struct ddp_suspect_facts *f)
{
    if ((unsigned)f->on_suspect >= 4 || (unsigned)f->state >= 3)
        return DDP_SUSPECT_SAY;
    return suspect_table[f->on_suspect][f->state](f);
}

int ddp_policy_local_status(const struct ddp_policy *p, int exit_status)
{
    if (p->state == DDP_PS_RUNNING || p->state == DDP_PS_DONE)
        return p->state == DDP_PS_DONE ? exit_status : 0;
    switch (p->stop) {
    case DDP_STOP_SIGNAL:
        return ddp_exit_signal(p->stop_signo);
    case DDP_STOP_TIMEOUT:
        return DDP_EXIT_TIMEOUT;
    case DDP_STOP_FAILURE:
        return p->stop_status ? p->stop_status : DDP_EXIT_LAUNCHER;
    case DDP_STOP_REMOTE: /* node 0 stopped it: not this node's failure, but not a success either */
        return DDP_EXIT_LAUNCHER;
    case DDP_STOP_NONE:
        break;
    }
    return 0;
}

const char *ddp_pstate_name(enum ddp_policy_state s)
{
    static const char *const names[] = {"running", "stopping", "backoff", "done"};
    return (unsigned)s < DDP_PS__COUNT ? names[s] : "unknown";
}

const char *ddp_pevent_name(enum ddp_policy_event e)
{
    static const char *const names[] = {"worker-ok",    "worker-failed", "timeout",        "signal",
                                        "all-finished", "grace-expired", "backoff-done",   "remote-stop",
                                        "node-failed",  "capture-done",  "gpus-unchecked", "gpus-left"};
    return (unsigned)e < DDP_PE__COUNT ? names[e] : "unknown";
}
