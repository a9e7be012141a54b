/* fake_runner_attempt: stand-in attempts for the unit tests of the runner's callers (records, the watch): a
 * struct ddp_runner_attempt and its workers as the runner fills them, without processes, which the tests then
 * read through runner.h's accessors like any caller. Besides fake_runner.h, the one test file outside launcher/run/
 * that sees the runner's private data (tests/deps-check.py allows run/runner_internal.h to fake_runner*.h). */
#ifndef DDP_TEST_FAKE_RUNNER_ATTEMPT_H
#define DDP_TEST_FAKE_RUNNER_ATTEMPT_H

#include <stdlib.h>
#include <time.h>

#include "run/runner.h"
#include "run/runner_internal.h"

/* Attempt number of n workers (rank i, local rank i, no GPU, /bin/train) whose programs all started (pid != pgid:
 * the shim reported the program's pid). */
static struct ddp_runner_attempt *fake_attempt(int number, size_t n)
{
    struct ddp_runner_attempt *run = ddp_xcalloc(1, sizeof *run);
    run->plan.attempt = number;
    run->plan.nproc = run->plan.world_size = run->plan.orig_world_size = (int)n;
    run->plan.workers = ddp_xcalloc(n, sizeof *run->plan.workers);
    run->plan.nworkers = n;
    run->w = ddp_xcalloc(n, sizeof *run->w);
    run->nw = n;
    for (size_t i = 0; i < n; i++) {
        struct ddp_worker *w = &run->plan.workers[i];
        w->rank = w->local_rank = (int)i;
        w->gpu = w->numa_node = -1;
        ddp_strv_push(&w->argv, "/bin/train");
        ddp_strv_push(&w->envp, "PATH=/usr/bin:/bin");
        struct ddp_runner_worker *k = &run->w[i];
        k->run = run;
        k->index = i;
        k->w = w;
        k->state = DDP_WS_RUNNING;
        k->pgid = 1000 + 10 * number + (int)i;
        k->pid = k->pgid + 1;
        k->start_ms = ddp_now_ms();
    }
    return run;
}

static void fake_attempt_free(struct ddp_runner_attempt *run)
{
    ddp_attempt_free(&run->plan);
    free(run->w);
    free(run);
}

/* k's program's pid is pid now (its shim's, pgid, until the shim reports it) */
static void fake_worker_pid(struct ddp_runner_worker *k, int pid)
{
    k->pid = pid;
}

/* k ended: exit code status, or death by signo */
static void fake_worker_ended(struct ddp_runner_worker *k, int status, int signo)
{
    k->state = DDP_WS_EXITED;
    k->status = signo ? 128 + signo : status;
    k->signo = signo;
    k->end_ms = k->start_ms + 5;
    k->end_wall = time(NULL);
    k->run->nexited++;
}

#endif
