/* fake_runner: the runner's interface (run/runner.h) for unit tests, defined here so that the linker takes it
 * instead of runner.o. Its workers follow a script (struct script S: exit with a code 20 ms after the start, print
 * one line in attempt 0, or hang until signalled); it spawns nothing and sends no signal, it notes what each
 * worker was sent. Include it in one test file per binary. */
#ifndef DDP_TEST_FAKE_RUNNER_H
#define DDP_TEST_FAKE_RUNNER_H

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exit.h"
#include "run/runner.h"
#include "run/runner_internal.h"

/* ---------------------------------------------------------------- the script */

#define HANG (-1) /* the worker runs until it is signalled */
#define MAX_ATTEMPTS 4
#define MAX_RANKS 4

struct script {
    int outcome[MAX_ATTEMPTS][MAX_RANKS]; /* exit code, or HANG */
    const char *line[MAX_RANKS];          /* printed on stderr by that rank in attempt 0, or NULL */
};

static struct script S;                         /* what the workers do */
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

void ddp_runner_prepare(struct ddp_runner *rn, int attempt)
{
    (void)rn, (void)attempt; /* no cgroups here */
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

void ddp_runner_hold_dump(struct ddp_runner_worker *k, bool hold)
{
    (void)k; /* no streams here: nothing reaches a console */
    (void)hold;
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

/* Warm restart (standby.c links against these): no worker is ever offered a standby here. */
void ddp_runner_set_adopt(struct ddp_runner *rn, ddp_runner_adopt_fn fn, void *arg)
{
    (void)rn;
    (void)fn;
    (void)arg;
}

int ddp_runner_open_pipes(const struct ddp_worker *w, int rp[2], int op[2], int ep[2], struct ddp_err *err)
{
    (void)w;
    (void)rp;
    (void)op;
    (void)ep;
    return ddp_errf(err, -ENOSYS, "fake runner: no pipes");
}

void ddp_runner_shim_argv(const struct ddp_runner *rn, const struct ddp_worker *w, const char *cgroup,
                          const struct ddp_strv *prog, struct ddp_strv *args)
{
    (void)rn;
    (void)w;
    (void)cgroup;
    (void)prog;
    (void)args;
}

const char *ddp_runner_shim_file(const struct ddp_runner *rn)
{
    (void)rn;
    return "/nonexistent";
}

#endif
