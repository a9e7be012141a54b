/* Unit tests for launcher/driver/supervise: the driver on one node with a fake runner. This file defines the
 * runner's interface (run/runner.h) itself, so that the linker takes it instead of runner.o: its workers are
 * scripted (exit with a code after a few milliseconds, print a line, or hang until signalled), no process is
 * spawned and no signal is sent. What is checked is what a user sees: the exit status, how many attempts ran,
 * which signals the workers got, the environment of a restarted attempt. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exit.h"
#include "driver/supervise.h"
#include "run/runner.h"

/* ---------------------------------------------------------------- the script */

#define HANG (-1) /* the worker runs until it is signalled */
#define MAX_ATTEMPTS 4
#define MAX_RANKS 4

struct script {
    int outcome[MAX_ATTEMPTS][MAX_RANKS]; /* exit code, or HANG */
    const char *line[MAX_RANKS];          /* printed on stderr by that rank in attempt 0, or NULL */
};

static struct script S;
static int nstarted;                            /* attempts started */
static int nworkers[MAX_ATTEMPTS];              /* workers per attempt */
static int got_signal[MAX_ATTEMPTS][MAX_RANKS]; /* the first signal each worker got (0: none) */
static char restart_count[MAX_ATTEMPTS][MAX_RANKS][16];

/* ---------------------------------------------------------------- the fake runner */

struct fake_worker {
    long long due_ms; /* when it exits by itself (HANG: never) */
    int code;
    int kill_sig; /* signalled: it exits with 128 + this at the next tick */
    bool told_started, told_line;
};

struct ddp_runner {
    struct ddp_runner_config cfg;
    struct ddp_output out;
    struct ddp_runner_attempt *cur;
    struct ddp_runner_attempt *all[MAX_ATTEMPTS];
    struct fake_worker fw[MAX_ATTEMPTS][MAX_RANKS];
    size_t nall;
    uv_timer_t tick;
};

static void end_worker(struct ddp_runner *rn, struct ddp_runner_worker *k, int status, int signo)
{
    struct ddp_runner_attempt *r = k->run;
    k->state = DDP_WS_EXITED;
    k->status = status;
    k->signo = signo;
    k->end_ms = ddp_now_ms();
    k->end_wall = time(NULL);
    r->nexited++;
    if (rn->cfg.ops.exited)
        rn->cfg.ops.exited(rn->cfg.arg, k, DDP_WS_RUNNING);
    k->state = DDP_WS_DONE;
    k->open = 0;
    r->ndone++;
    if (rn->cfg.ops.done)
        rn->cfg.ops.done(rn->cfg.arg, k, r->ndone == r->nw);
    if (rn->cfg.ops.changed)
        rn->cfg.ops.changed(rn->cfg.arg, k);
}

static void on_tick(uv_timer_t *t)
{
    struct ddp_runner *rn = t->data;
    long long now = ddp_now_ms();
    for (size_t a = 0; a < rn->nall; a++) {
        struct ddp_runner_attempt *r = rn->all[a];
        for (size_t i = 0; i < r->nw; i++) {
            struct ddp_runner_worker *k = &r->w[i];
            struct fake_worker *f = &rn->fw[a][i];
            if (k->state != DDP_WS_RUNNING)
                continue;
            if (!f->told_started) {
                f->told_started = true;
                if (rn->cfg.ops.started)
                    rn->cfg.ops.started(rn->cfg.arg, k);
            }
            if (!f->told_line && a == 0 && S.line[i]) {
                f->told_line = true;
                if (rn->cfg.ops.output)
                    rn->cfg.ops.output(rn->cfg.arg, k, now);
                if (rn->cfg.ops.line)
                    rn->cfg.ops.line(rn->cfg.arg, k, 1, S.line[i], strlen(S.line[i]));
            }
            if (f->kill_sig)
                end_worker(rn, k, ddp_exit_signal(f->kill_sig), f->kill_sig);
            else if (f->code != HANG && now >= f->due_ms)
                end_worker(rn, k, f->code, 0);
        }
    }
}

struct ddp_runner *ddp_runner_new(const struct ddp_runner_config *cfg)
{
    struct ddp_runner *rn = calloc(1, sizeof(*rn));
    cr_assert_not_null(rn);
    rn->cfg = *cfg;
    ddp_output_init(&rn->out, STDOUT_FILENO, STDERR_FILENO);
    uv_timer_init(cfg->loop, &rn->tick);
    rn->tick.data = rn;
    uv_timer_start(&rn->tick, on_tick, 5, 5);
    return rn;
}

void ddp_runner_free(struct ddp_runner *rn)
{
    for (size_t a = 0; a < rn->nall; a++) {
        free(rn->all[a]->w);
        ddp_attempt_free(&rn->all[a]->plan);
        free(rn->all[a]);
    }
    ddp_output_free(&rn->out);
    free(rn);
}

struct ddp_output *ddp_runner_output(struct ddp_runner *rn)
{
    return &rn->out;
}

int ddp_runner_start(struct ddp_runner *rn, struct ddp_attempt *plan, struct ddp_runner_attempt **out,
                     struct ddp_err *err)
{
    (void)err;
    cr_assert_lt(rn->nall, MAX_ATTEMPTS, "at most %d attempts", MAX_ATTEMPTS);
    struct ddp_runner_attempt *r = calloc(1, sizeof(*r));
    cr_assert_not_null(r);
    size_t a = rn->nall++;
    rn->all[a] = r;
    r->runner = rn;
    r->plan = *plan;
    memset(plan, 0, sizeof(*plan));
    r->nw = r->plan.nworkers;
    cr_assert_leq(r->nw, MAX_RANKS);
    r->w = calloc(r->nw ? r->nw : 1, sizeof(*r->w));
    r->start_ms = ddp_now_ms();
    nworkers[a] = (int)r->nw;
    nstarted++;
    for (size_t i = 0; i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        k->run = r;
        k->index = i;
        k->w = &r->plan.workers[i];
        k->state = DDP_WS_RUNNING;
        k->open = DDP_RS_OUT | DDP_RS_ERR;
        k->pid = k->pgid = getpid(); /* never signalled: the fake only notes what it was sent */
        k->start_ms = r->start_ms;
        rn->fw[a][i] = (struct fake_worker){.due_ms = r->start_ms + 20, .code = S.outcome[a][i]};
        const char *rc = ddp_runner_worker_env(k, "TORCHELASTIC_RESTART_COUNT");
        snprintf(restart_count[a][i], sizeof restart_count[a][i], "%s", rc ? rc : "");
    }
    rn->cur = r;
    *out = r;
    return 0;
}

struct ddp_runner_attempt *ddp_runner_current(const struct ddp_runner *rn)
{
    return rn->cur;
}

bool ddp_runner_is_current(const struct ddp_runner_worker *k)
{
    return k->run->runner->cur == k->run;
}

void ddp_runner_retire(struct ddp_runner *rn)
{
    if (rn->cur)
        rn->cur->retired = true;
    rn->cur = NULL;
}

bool ddp_runner_worker_running(const struct ddp_runner_worker *k)
{
    return k->state == DDP_WS_RUNNING || k->state == DDP_WS_ENDING;
}

int ddp_runner_alive(const struct ddp_runner *rn)
{
    int n = 0;
    for (size_t i = 0; rn->cur && i < rn->cur->nw; i++)
        n += ddp_runner_worker_running(&rn->cur->w[i]);
    return n;
}

void ddp_runner_program_ended(struct ddp_runner_worker *k, int status, int signo)
{
    k->state = DDP_WS_ENDING;
    k->status = status;
    k->signo = signo;
}

static size_t attempt_index(const struct ddp_runner *rn, const struct ddp_runner_attempt *r)
{
    for (size_t a = 0; a < rn->nall; a++)
        if (rn->all[a] == r)
            return a;
    cr_assert_fail("an attempt the fake did not start");
    return 0;
}

static void note_signal(struct ddp_runner *rn, struct ddp_runner_worker *k, int sig)
{
    size_t a = attempt_index(rn, k->run);
    if (!got_signal[a][k->index])
        got_signal[a][k->index] = sig;
    if (sig == SIGTERM || sig == SIGKILL || sig == SIGINT)
        rn->fw[a][k->index].kill_sig = sig;
}

int ddp_runner_signal_all(struct ddp_runner *rn, int sig)
{
    int n = 0;
    for (size_t i = 0; rn->cur && i < rn->cur->nw; i++)
        if (ddp_runner_worker_running(&rn->cur->w[i])) {
            note_signal(rn, &rn->cur->w[i], sig);
            n++;
        }
    return n;
}

void ddp_runner_signal_program(struct ddp_runner_worker *k, int sig)
{
    if (ddp_runner_worker_running(k))
        note_signal(k->run->runner, k, sig);
}

void ddp_runner_give_up(struct ddp_runner *rn)
{
    (void)rn;
}

struct ddp_runner_worker *ddp_runner_find_pid(struct ddp_runner *rn, int pid)
{
    (void)rn;
    (void)pid;
    return NULL;
}

void ddp_runner_worker_tail(const struct ddp_runner_worker *k, int which, void (*fn)(void *arg, const char *line),
                            void *arg)
{
    (void)k;
    (void)which;
    (void)fn;
    (void)arg;
}

const char *ddp_runner_worker_env(const struct ddp_runner_worker *k, const char *name)
{
    int i = ddp_strv_env_find(&k->w->envp, name);
    return i >= 0 ? k->w->envp.v[i] + strlen(name) + 1 : NULL;
}

bool ddp_runner_paused(const struct ddp_runner *rn)
{
    (void)rn;
    return false;
}

void ddp_runner_close(struct ddp_runner *rn)
{
    if (!uv_is_closing((uv_handle_t *)&rn->tick))
        uv_close((uv_handle_t *)&rn->tick, NULL);
}

/* ---------------------------------------------------------------- the driver */

static char *base_env[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", NULL};

/* Run the driver on job spec ini (the command, [restart] and [timeout] keys) with nproc workers playing script;
 * returns its exit status. */
static int supervise(const char *ini, int nproc, const struct script *script)
{
    struct ddp_spec spec;
    struct ddp_plan_ctx ctx = {0};
    struct ddp_err err = {0};
    S = *script;
    nstarted = 0;
    memset(nworkers, 0, sizeof nworkers);
    memset(got_signal, 0, sizeof got_signal);
    memset(restart_count, 0, sizeof restart_count);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_spec_load_string(&spec, "job.ini", ini, strlen(ini), DDP_ORIGIN_SPEC, &err), 0, "%s", err.msg);
    ctx.spec = &spec;
    ctx.base_env = base_env;
    ctx.hostname = "node7";
    ctx.run_id = "run42";
    ctx.master_addr = "127.0.0.1";
    ctx.master_port = 29501;
    ctx.nnodes = 1;
    ctx.nproc = nproc;
    int status = ddp_supervise_run(&ctx, "/usr/bin/ddplaunch", NULL, &err);
    ddp_spec_free(&spec);
    return status;
}

TestSuite(supervise, .timeout = 30);

#define JOB "[job]\ncommand = /bin/true\n"

/* Rank 1 fails while rank 0 runs: rank 0 is stopped (SIGTERM), the job restarts once as attempt 1 with the same
 * size and TORCHELASTIC_RESTART_COUNT=1, and exits 0 when that attempt succeeds. */
Test(supervise, failure_with_a_restart_left_restarts_then_succeeds)
{
    struct script s = {.outcome = {{HANG, 3}, {0, 0}}};
    int status = supervise(JOB "[restart]\nmax_restarts = 1\nbackoff = 10ms\n", 2, &s);
    cr_expect_eq(status, DDP_EXIT_OK, "exit status %d", status);
    cr_expect_eq(nstarted, 2, "two attempts, got %d", nstarted);
    cr_expect_eq(nworkers[1], 2, "the restart keeps the size");
    cr_expect_eq(got_signal[0][0], SIGTERM, "the surviving rank got SIGTERM (%d)", got_signal[0][0]);
    cr_expect_eq(got_signal[0][1], 0, "the failed rank got nothing");
    cr_expect_str_eq(restart_count[0][0], "0");
    cr_expect_str_eq(restart_count[1][0], "1");
    cr_expect_eq(got_signal[1][0] + got_signal[1][1], 0, "the good attempt was left alone");
}

/* With no restart left, the job exits with the failed rank's code, after one attempt. */
Test(supervise, failure_without_restarts_exits_with_its_code)
{
    struct script s = {.outcome = {{HANG, 3}}};
    int status = supervise(JOB, 2, &s);
    cr_expect_eq(status, 3, "exit status %d", status);
    cr_expect_eq(nstarted, 1);
    cr_expect_eq(got_signal[0][0], SIGTERM);
}

/* Every restart used up: the last attempt's failure is the exit status. */
Test(supervise, failures_use_up_the_restarts)
{
    struct script s = {.outcome = {{7}, {7}, {9}}};
    int status = supervise(JOB "[restart]\nmax_restarts = 2\nbackoff = 10ms\n", 1, &s);
    cr_expect_eq(status, 9, "exit status %d", status);
    cr_expect_eq(nstarted, 3);
}

/* A worker that shows no life within [timeout] init is a timeout: stopped, and the job exits 124. */
Test(supervise, init_timeout_exits_124)
{
    struct script s = {.outcome = {{HANG, HANG}}};
    int status = supervise(JOB "[timeout]\ninit = 200ms\nheartbeat = output\nsample = no\n", 2, &s);
    cr_expect_eq(status, DDP_EXIT_TIMEOUT, "exit status %d", status);
    cr_expect_eq(nstarted, 1);
    cr_expect_eq(got_signal[0][0], SIGTERM);
    cr_expect_eq(got_signal[0][1], SIGTERM);
}

/* The timeout restarts the job when a restart is left ([restart] on_timeout = restart, the default). */
Test(supervise, init_timeout_with_a_restart_left_restarts)
{
    struct script s = {.outcome = {{HANG}, {0}}};
    int status = supervise(JOB "[restart]\nmax_restarts = 1\nbackoff = 10ms\n[timeout]\ninit = 200ms\nheartbeat = "
                               "output\nsample = no\n",
                           1, &s);
    cr_expect_eq(status, DDP_EXIT_OK, "exit status %d", status);
    cr_expect_eq(nstarted, 2);
}

/* A collective timeout a rank prints reaches the driver through the watch (watch.c: the line, its class, the
 * collective-timeout source): the other rank is stopped and the job exits 124, though no [timeout] is set. */
Test(supervise, printed_collective_timeout_stops_the_job)
{
    struct script s = {.outcome = {{HANG, HANG}},
                       .line = {"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
                                "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
                                "milliseconds before timing out."}};
    int status = supervise(JOB "[timeout]\nsample = no\n", 2, &s);
    cr_expect_eq(status, DDP_EXIT_TIMEOUT, "exit status %d", status);
    cr_expect_eq(nstarted, 1);
    cr_expect_eq(got_signal[0][1], SIGTERM, "the other rank was stopped (%d)", got_signal[0][1]);
}
