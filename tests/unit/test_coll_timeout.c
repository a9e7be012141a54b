/* Unit tests for launcher/watch/coll_timeout: a collective timeout a rank prints is reported to the sink and kept
 * as that rank's (what the hang capture's verdict reads), per worker of the current attempt: forgotten when the
 * next attempt is prepared, and never written by a worker of a retired attempt. Workers come from the fake
 * runner (fake_runner.h); the loop never runs them. */
#include <criterion/criterion.h>
#include <string.h>

#include "fake_runner.h"
#include "records/recognise.h"
#include "watch/coll_timeout.h"

static const char *const WATCHDOG = "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
                                    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
                                    "milliseconds before timing out.";

struct reports {
    int n;
    enum ddp_class cls;
    struct ddp_runner_worker *k;
    char why[200];
};

static void on_timeout(void *arg, struct ddp_timeout *t)
{
    struct reports *r = arg;
    r->n++;
    r->cls = t->cls;
    r->k = t->k;
    snprintf(r->why, sizeof r->why, "%s", t->why);
    free(t->why);
}

static struct ddp_attempt plan_of(int attempt, size_t n)
{
    struct ddp_attempt a = {.attempt = attempt, .nworkers = n, .nproc = (int)n, .world_size = (int)n};
    a.workers = ddp_xcalloc(n, sizeof *a.workers);
    for (size_t i = 0; i < n; i++) {
        a.workers[i].rank = a.workers[i].local_rank = (int)i;
        a.workers[i].gpu = a.workers[i].numa_node = -1;
    }
    return a;
}

/* A line of rank k, classified as recognise.c does. */
static void say(struct ddp_coll_timeout *ct, struct ddp_runner_worker *k, const char *line)
{
    ddp_coll_timeout_line(ct, k, ddp_recognise_line(line, strlen(line)), line, strlen(line));
}

Test(coll_timeout, kept_per_rank_of_the_current_attempt)
{
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    struct ddp_runner_config cfg = {.loop = &loop};
    struct ddp_runner *rn = ddp_runner_new(&cfg);
    struct reports seen = {0};
    struct ddp_coll_timeout *ct = ddp_coll_timeout_new((struct ddp_timeout_sink){on_timeout, &seen, NULL});
    struct ddp_runner_attempt *r0, *r1;
    struct ddp_err err = {0};
    struct ddp_hang_timeout t;

    struct ddp_attempt p0 = plan_of(0, 2);
    ddp_coll_timeout_prepare(ct, &p0);
    cr_assert_eq(ddp_runner_start(rn, &p0, &r0, &err), 0);
    say(ct, ddp_runner_attempt_worker(r0, 1), "epoch 1 loss 0.25");
    cr_expect_eq(seen.n, 0, "an ordinary line is no timeout");
    say(ct, ddp_runner_attempt_worker(r0, 1), WATCHDOG);
    cr_expect_eq(seen.n, 1, "reported once");
    cr_expect_eq(seen.cls, DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(seen.k, ddp_runner_attempt_worker(r0, 1), "blames the rank that printed it");
    cr_expect_str_eq(seen.why, "rank 1 reported a nccl collective timeout (collective-timeout)");
    cr_expect(ddp_coll_timeout_of(ct, 1, &t), "kept for rank 1");
    cr_expect(t.waiting, "it waited in a collective");
    cr_expect_eq(t.seq, 5);
    cr_expect_not(ddp_coll_timeout_of(ct, 0, &t), "not for rank 0");
    cr_expect_not(t.waiting);
    cr_expect_not(ddp_coll_timeout_of(ct, 7, &t), "nothing past the attempt's workers");

    /* the next attempt: what attempt 0 said is forgotten, and its late lines are reported but not kept */
    ddp_runner_retire(rn);
    struct ddp_attempt p1 = plan_of(1, 2);
    ddp_coll_timeout_prepare(ct, &p1);
    cr_assert_eq(ddp_runner_start(rn, &p1, &r1, &err), 0);
    cr_expect_not(ddp_coll_timeout_of(ct, 1, &t), "forgotten with attempt 0");
    say(ct, ddp_runner_attempt_worker(r0, 1), WATCHDOG);
    cr_expect_eq(seen.n, 2, "still reported (the driver drops a retired attempt's timeouts)");
    cr_expect_not(ddp_coll_timeout_of(ct, 1, &t), "a retired worker's line is not attempt 1's rank 1");

    ddp_coll_timeout_free(ct);
    ddp_runner_close(rn);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_expect_eq(uv_loop_close(&loop), 0);
    ddp_runner_free(rn);
}
