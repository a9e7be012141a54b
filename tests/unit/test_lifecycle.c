/* lifecycle.c: a worker's lifecycle, ddp_wstate_step, the only way runner.c moves a worker. A worker is DONE when its
 * shim exited AND every stream (stdout, stderr, the shim's report pipe) reached EOF, in whatever order they
 * come; DONE is said once. Pure: no loop, no processes. */
#include <criterion/criterion.h>

#include "run/lifecycle.h"

struct worker {
    enum ddp_lifecycle_state state;
    unsigned open;
    int done; /* times ddp_wstate_step said "became DONE" */
};

static void ev(struct worker *w, enum ddp_lifecycle_event e, unsigned stream)
{
    w->done += ddp_wstate_step(&w->state, &w->open, e, stream);
}

static struct worker spawned(void)
{
    struct worker w = {DDP_WS_NEW, 0, 0};
    ev(&w, DDP_WE_SPAWNED, 0);
    cr_assert_eq(w.state, DDP_WS_RUNNING);
    cr_assert_eq(w.open, (unsigned)DDP_RS_ALL);
    return w;
}

/* Streams close first (the usual end), then the shim exits: DONE at the exit. */
Test(lifecycle, streams_then_exit)
{
    struct worker w = spawned();
    ev(&w, DDP_WE_EOF, DDP_RS_OUT);
    ev(&w, DDP_WE_EOF, DDP_RS_REP);
    ev(&w, DDP_WE_EOF, DDP_RS_ERR);
    cr_expect_eq(w.state, DDP_WS_RUNNING, "streams at EOF are not an exit");
    cr_expect_eq(w.done, 0);
    ev(&w, DDP_WE_EXITED, 0);
    cr_expect_eq(w.state, DDP_WS_DONE);
    cr_expect_eq(w.done, 1);
}

/* The shim exits while a grandchild still holds stderr: EXITED until the last stream ends. */
Test(lifecycle, exit_then_last_stream)
{
    struct worker w = spawned();
    ev(&w, DDP_WE_EOF, DDP_RS_REP);
    ev(&w, DDP_WE_EXITED, 0);
    cr_expect_eq(w.state, DDP_WS_EXITED);
    ev(&w, DDP_WE_EOF, DDP_RS_OUT);
    cr_expect_eq(w.state, DDP_WS_EXITED, "stderr is still open");
    cr_expect_eq(w.done, 0);
    ev(&w, DDP_WE_EOF, DDP_RS_ERR);
    cr_expect_eq(w.state, DDP_WS_DONE);
    cr_expect_eq(w.open, 0u);
    cr_expect_eq(w.done, 1);
}

/* The shim says the program failed (ENDING) while it ends the program's leftovers; the exit comes later. */
Test(lifecycle, program_ended_then_exit)
{
    struct worker w = spawned();
    ev(&w, DDP_WE_PROGRAM_ENDED, 0);
    cr_expect_eq(w.state, DDP_WS_ENDING);
    ev(&w, DDP_WE_PROGRAM_ENDED, 0);
    cr_expect_eq(w.state, DDP_WS_ENDING, "said once");
    ev(&w, DDP_WE_EOF, DDP_RS_OUT);
    ev(&w, DDP_WE_EOF, DDP_RS_ERR);
    ev(&w, DDP_WE_EXITED, 0);
    cr_expect_eq(w.state, DDP_WS_EXITED, "the report pipe is still open");
    ev(&w, DDP_WE_EOF, DDP_RS_REP);
    cr_expect_eq(w.state, DDP_WS_DONE);
    cr_expect_eq(w.done, 1);
}

/* After SIGKILL a process outside the group holds a pipe: giving up makes the exited worker DONE; a running one
 * is not given up on. */
Test(lifecycle, give_up_only_after_exit)
{
    struct worker w = spawned();
    ev(&w, DDP_WE_GIVE_UP, 0);
    cr_expect_eq(w.state, DDP_WS_RUNNING);
    cr_expect_eq(w.open, (unsigned)DDP_RS_ALL);
    ev(&w, DDP_WE_EXITED, 0);
    ev(&w, DDP_WE_GIVE_UP, 0);
    cr_expect_eq(w.state, DDP_WS_DONE);
    cr_expect_eq(w.open, 0u);
    cr_expect_eq(w.done, 1);
}

/* DONE absorbs everything and is said once; a worker never started is DONE at once and never runs. */
Test(lifecycle, done_is_final_and_said_once)
{
    struct worker w = spawned();
    ev(&w, DDP_WE_EOF, DDP_RS_ALL);
    ev(&w, DDP_WE_EXITED, 0);
    cr_expect_eq(w.done, 1);
    for (int e = 0; e < DDP_WE__COUNT; e++) {
        ev(&w, (enum ddp_lifecycle_event)e, DDP_RS_ALL);
        cr_expect_eq(w.state, DDP_WS_DONE, "done + %s", ddp_wevent_name(e));
    }
    cr_expect_eq(w.done, 1);
    struct worker n = {DDP_WS_NEW, 0, 0};
    ev(&n, DDP_WE_EOF, DDP_RS_OUT);
    ev(&n, DDP_WE_EXITED, 0);
    ev(&n, DDP_WE_PROGRAM_ENDED, 0);
    cr_expect_eq(n.state, DDP_WS_NEW, "nothing happens to a worker before it started");
    ev(&n, DDP_WE_NOT_STARTED, 0);
    cr_expect_eq(n.state, DDP_WS_DONE);
    cr_expect_eq(n.done, 1);
    ev(&n, DDP_WE_SPAWNED, 0);
    cr_expect_eq(n.state, DDP_WS_DONE, "a worker given up before its start never runs");
}

/* Every order of the three EOFs and the exit ends in DONE exactly once, at the last of the four. */
Test(lifecycle, every_order_of_exit_and_eofs)
{
    const unsigned bits[3] = {DDP_RS_OUT, DDP_RS_ERR, DDP_RS_REP};
    int orders = 0;
    for (int exit_at = 0; exit_at < 4; exit_at++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 3; c++) {
                    if (a == b || b == c || a == c)
                        continue;
                    const unsigned order[3] = {bits[a], bits[b], bits[c]};
                    struct worker w = spawned();
                    for (int i = 0, j = 0; i < 4; i++) {
                        cr_expect_eq(w.done, 0, "DONE before the last of the four");
                        if (i == exit_at)
                            ev(&w, DDP_WE_EXITED, 0);
                        else
                            ev(&w, DDP_WE_EOF, order[j++]);
                    }
                    cr_expect_eq(w.state, DDP_WS_DONE);
                    cr_expect_eq(w.done, 1);
                    orders++;
                }
    cr_expect_eq(orders, 24);
}
