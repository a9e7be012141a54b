/* Unit tests for launcher/driver/supervise: the driver on one node with a fake runner (fake_runner.h defines
 * the runner's interface itself, so that the linker takes it instead of runner.o): its workers are scripted
 * (exit with a code after a few milliseconds, print a line, or hang until signalled), no process is spawned
 * and no signal is sent. What is checked is what a user sees: the exit status, how many attempts ran,
 * which signals the workers got, the environment of a restarted attempt. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/exit.h"
#include "driver/supervise.h"
#include "run/runner.h"

#include "fake_runner.h"

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
    ctx.job.spec = &spec;
    ctx.job.base_env = base_env;
    ctx.job.hostname = "node7";
    ctx.job.run_id = "run42";
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
