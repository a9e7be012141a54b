/* Unit tests for runner.c with a real libuv loop and real processes: /bin/true, an exit status, a death by
 * signal, a program that cannot be executed, the lines of stdout and stderr as they arrive (a last line without
 * '\n' too), the environment the worker got, SIGTERM to every group, the shim's word on a failed program's end. The
 * test binary is its own exec shim: run with --exec-shim it is ddp_shim_main (main below), as ddplaunch is. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "run/runner.h"
#include "run/shim.h"

#define MAXW 4
#define MAXL 16

struct seen {
    struct ddp_runner *rn;
    int nlines;
    int which[MAXL];
    char line[MAXL][64];
    int started, exited, program_ended, done_all;
    int status[MAXW], signo[MAXW];
    enum ddp_worker_fail fail[MAXW];
    enum ddp_lifecycle_state from[MAXW];
    bool take_program_end; /* do what supervise.c does with the shim's word: ddp_runner_program_ended */
    int term_when_started; /* SIGTERM every group once this many workers run */
    uv_timer_t guard;
    bool timed_out;
};

static void on_line(void *arg, struct ddp_runner_worker *k, int which, const char *line, size_t len)
{
    struct seen *s = arg;
    (void)k;
    if (s->nlines == MAXL)
        return;
    s->which[s->nlines] = which;
    snprintf(s->line[s->nlines], sizeof s->line[0], "%.*s", (int)len, line);
    s->nlines++;
}

static void on_started(void *arg, struct ddp_runner_worker *k)
{
    struct seen *s = arg;
    (void)k;
    if (++s->started == s->term_when_started)
        cr_expect_eq(ddp_runner_signal_all(s->rn, SIGTERM), s->term_when_started, "one group per running worker");
}

static void on_program_ended(void *arg, struct ddp_runner_worker *k, int status, int signo)
{
    struct seen *s = arg;
    s->program_ended++;
    if (s->take_program_end)
        ddp_runner_program_ended(k, status, signo);
}

static void on_exited(void *arg, struct ddp_runner_worker *k, enum ddp_lifecycle_state from)
{
    struct seen *s = arg;
    size_t i = ddp_runner_worker_index(k);
    s->exited++;
    s->from[i] = from;
    s->status[i] = ddp_runner_worker_status(k);
    s->signo[i] = ddp_runner_worker_signo(k);
    s->fail[i] = ddp_runner_worker_fail(k);
}

static void on_done(void *arg, struct ddp_runner_worker *k, bool all)
{
    struct seen *s = arg;
    (void)k;
    if (!all)
        return;
    s->done_all++;
    uv_timer_stop(&s->guard);
    uv_close((uv_handle_t *)&s->guard, NULL);
    ddp_runner_retire(s->rn);
    ddp_runner_close(s->rn);
}

static void on_guard(uv_timer_t *t)
{
    struct seen *s = t->data;
    s->timed_out = true;
    ddp_runner_signal_all(s->rn, SIGKILL);
}

/* One worker running argv (NULL-terminated) with env (NULL-terminated, may be NULL: PATH only). */
static void add_worker(struct ddp_attempt *a, const char *const *argv, const char *const *env)
{
    a->workers = realloc(a->workers, (a->nworkers + 1) * sizeof *a->workers);
    cr_assert_not_null(a->workers);
    struct ddp_worker *w = &a->workers[a->nworkers];
    memset(w, 0, sizeof *w);
    w->local_rank = w->rank = (int)a->nworkers;
    w->gpu = w->numa_node = -1;
    for (size_t i = 0; argv[i]; i++)
        ddp_strv_push(&w->argv, argv[i]);
    ddp_strv_push(&w->envp, "PATH=/usr/bin:/bin");
    for (size_t i = 0; env && env[i]; i++)
        ddp_strv_push(&w->envp, env[i]);
    w->prefix[0] = ddp_xstrdup("");
    w->prefix[1] = ddp_xstrdup("");
    a->nworkers++;
    a->nproc = a->world_size = a->orig_world_size = (int)a->nworkers;
}

/* Start a's workers on a fresh loop and run it until every worker is DONE and every handle closed. */
static void run(struct ddp_attempt *a, struct seen *s)
{
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    struct ddp_runner_config cfg = {
        .loop = &loop,
        .grace_ms = 2000,
        .ops = {.line = on_line,
                .started = on_started,
                .program_ended = on_program_ended,
                .exited = on_exited,
                .done = on_done},
        .arg = s,
    };
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    cfg.self_exe = exe;
    s->rn = ddp_runner_new(&cfg);
    uv_timer_init(&loop, &s->guard);
    s->guard.data = s;
    uv_timer_start(&s->guard, on_guard, 10000, 0);
    struct ddp_runner_attempt *r = NULL;
    struct ddp_err err = {0};
    size_t nw = a->nworkers;
    cr_assert_eq(ddp_runner_start(s->rn, a, &r, &err), 0, "%s", err.msg);
    cr_expect_eq(a->nworkers, 0u, "the plan moved into the runner");
    cr_expect_eq(ddp_runner_current(s->rn), r);
    cr_expect_eq(ddp_runner_attempt_nworkers(r), nw);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_expect_not(s->timed_out, "the workers ended within 10 s");
    cr_expect_eq(s->done_all, 1, "done(all) once");
    cr_expect_eq(s->exited, (int)nw, "exited once per worker");
    cr_expect_null(ddp_runner_current(s->rn), "retired");
    cr_expect_eq(uv_loop_close(&loop), 0, "every handle closed");
    ddp_runner_free(s->rn);
}

Test(runner, bin_true_exits_0)
{
    struct ddp_attempt a = {0};
    struct seen s = {0};
    add_worker(&a, (const char *const[]){"/bin/true", NULL}, NULL);
    run(&a, &s);
    cr_expect_eq(s.started, 1, "the shim said the program runs");
    cr_expect_eq(s.status[0], 0);
    cr_expect_eq(s.signo[0], 0);
    cr_expect_eq(s.fail[0], DDP_WF_NONE);
    cr_expect_eq(s.nlines, 0);
}

Test(runner, exit_status_3)
{
    struct ddp_attempt a = {0};
    struct seen s = {0};
    add_worker(&a, (const char *const[]){"/bin/sh", "-c", "exit 3", NULL}, NULL);
    run(&a, &s);
    cr_expect_eq(s.status[0], 3);
    cr_expect_eq(s.signo[0], 0);
}

Test(runner, killed_by_signal)
{
    struct ddp_attempt a = {0};
    struct seen s = {0};
    add_worker(&a, (const char *const[]){"/bin/sh", "-c", "kill -USR1 $$; sleep 5", NULL}, NULL);
    run(&a, &s);
    cr_expect_eq(s.signo[0], SIGUSR1, "died by SIGUSR1, got signo %d status %d", s.signo[0], s.status[0]);
    cr_expect_eq(s.status[0], 128 + SIGUSR1);
}

Test(runner, not_executable_is_127)
{
    struct ddp_attempt a = {0};
    struct seen s = {0};
    add_worker(&a, (const char *const[]){"/nonexistent/program", NULL}, NULL);
    run(&a, &s);
    cr_expect_eq(s.started, 0, "never ran");
    cr_expect_eq(s.fail[0], DDP_WF_EXEC);
    cr_expect_eq(s.status[0], 127);
}

Test(runner, lines_of_stdout_and_stderr_arrive)
{
    struct ddp_attempt a = {0};
    struct seen s = {0};
    add_worker(&a,
               (const char *const[]){"/bin/sh", "-c",
                                     "echo one; sleep 0.1; echo two >&2; sleep 0.1; echo \"$GREETING\"; "
                                     "printf 'no newline'",
                                     NULL},
               (const char *const[]){"GREETING=hello there", NULL});
    run(&a, &s);
    cr_assert_eq(s.nlines, 4, "4 lines, got %d", s.nlines);
    cr_expect_str_eq(s.line[0], "one");
    cr_expect_eq(s.which[0], 0);
    cr_expect_str_eq(s.line[1], "two");
    cr_expect_eq(s.which[1], 1, "stderr");
    cr_expect_str_eq(s.line[2], "hello there", "the environment the worker got");
    cr_expect_str_eq(s.line[3], "no newline", "the last line without '\\n' at EOF");
    cr_expect_eq(s.which[3], 0);
}

Test(runner, sigterm_to_every_group)
{
    struct ddp_attempt a = {0};
    struct seen s = {.term_when_started = 2};
    add_worker(&a, (const char *const[]){"/bin/sleep", "30", NULL}, NULL);
    add_worker(&a, (const char *const[]){"/bin/sleep", "30", NULL}, NULL);
    run(&a, &s);
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(s.signo[i], SIGTERM, "worker %d: signo %d", i, s.signo[i]);
        cr_expect_eq(s.status[i], 128 + SIGTERM);
    }
}

Test(runner, program_end_taken_from_the_shim)
{
    struct ddp_attempt a = {0};
    struct seen s = {.take_program_end = true};
    /* the program fails and leaves a child, which the shim ends before it exits itself */
    add_worker(&a, (const char *const[]){"/bin/sh", "-c", "sleep 30 & exit 5", NULL}, NULL);
    add_worker(&a, (const char *const[]){"/bin/true", NULL}, NULL);
    run(&a, &s);
    cr_expect_eq(s.program_ended, 1, "the shim reported the failed program's end (only: 0 is no failure)");
    cr_expect_eq(s.status[0], 5);
    cr_expect_eq(s.from[0], DDP_WS_ENDING, "its end was taken before the shim exited");
    cr_expect_eq(s.status[1], 0);
    cr_expect_eq(s.from[1], DDP_WS_RUNNING);
}

/* The shim is forked, not executed (ddplaunch's workers start from a launcher of one thread; criterion's test
 * processes run two, so this runs in a process of its own: this binary with --forked-scenario, below): it starts
 * where the binary it would be executed from is not there, and the program gets what an executed one got (its
 * directory, environment, descriptors 0-2 and those the launcher inherited, none of the launcher's own, no signal
 * blocked, none of 1-31 ignored (glibc keeps 32 and 33, which an exec leaves as they were), a session of the shim's).
 */
static int forked_scenario(void)
{
    uv_loop_t loop;
    struct seen s = {0};
    struct ddp_attempt a = {0};
    signal(SIGPIPE, SIG_IGN); /* as the launcher does */
    /* what it inherited: only 7, open across exec; its own: 8, close-on-exec */
    close_range(3, ~0U, 0);
    if (dup2(STDIN_FILENO, 7) != 7 || fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 8) != 8)
        return 1;
    a.workers = calloc(1, sizeof *a.workers);
    struct ddp_worker *w = &a.workers[0];
    w->gpu = w->numa_node = -1;
    w->cwd = strdup("/usr");
    ddp_strv_push(&w->argv, "/bin/sh");
    ddp_strv_push(&w->argv, "-c");
    ddp_strv_push(&w->argv, "echo \"$PWD $GREETING\"; ls /proc/self/fd | tr '\\n' ' '; echo; "
                            "ign=$(awk '/^SigIgn/ {print $2}' /proc/self/status); "
                            "blk=$(awk '/^SigBlk/ {print $2}' /proc/self/status); "
                            "echo ignored $((0x$ign & 0x7fffffff)) blocked $((0x$blk)); "
                            "test $(ps -o sid= -p $$) = $PPID && echo session of the shim");
    ddp_strv_push(&w->envp, "PATH=/usr/bin:/bin");
    ddp_strv_push(&w->envp, "GREETING=hi");
    w->prefix[0] = strdup("");
    w->prefix[1] = strdup("");
    a.nworkers = 1;
    a.nproc = a.world_size = a.orig_world_size = 1;
    uv_loop_init(&loop);
    struct ddp_runner_config cfg = {
        .loop = &loop,
        .self_exe = "/nonexistent/ddplaunch",
        .grace_ms = 2000,
        .ops = {.line = on_line, .started = on_started, .exited = on_exited, .done = on_done},
        .arg = &s};
    s.rn = ddp_runner_new(&cfg);
    uv_timer_init(&loop, &s.guard);
    s.guard.data = &s;
    uv_timer_start(&s.guard, on_guard, 10000, 0);
    struct ddp_runner_attempt *r = NULL;
    struct ddp_err err = {0};
    if (ddp_runner_start(s.rn, &a, &r, &err) != 0) {
        printf("start: %s\n", err.msg);
        return 1;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    printf("started %d status %d\n", s.started, s.status[0]);
    for (int i = 0; i < s.nlines; i++)
        printf("%s\n", s.line[i]);
    ddp_runner_free(s.rn);
    return uv_loop_close(&loop) == 0 ? 0 : 1;
}

Test(runner, shim_forked_not_executed)
{
    char exe[4096], out[1024] = "", cmd[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    /* without boxfort's variable, which makes its constructor take the process for a test's sandbox */
    snprintf(cmd, sizeof cmd, "env -u BXFI_MAP '%s' --forked-scenario 2>&1", exe);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t got = fread(out, 1, sizeof out - 1, f);
    out[got] = '\0';
    cr_expect_eq(pclose(f), 0, "%s", out);
    cr_expect_str_eq(out,
                     "started 1 status 0\n"
                     "/usr hi\n"
                     "0 1 2 3 7 \n"
                     "ignored 0 blocked 0\n"
                     "session of the shim\n",
                     "got:\n%s", out);
}

/* The exec shim is this binary: ddplaunch's main does the same. */
int main(int argc, char *argv[])
{
    if (argc > 1 && strcmp(argv[1], "--exec-shim") == 0)
        return ddp_shim_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--forked-scenario") == 0)
        return forked_scenario();
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}
