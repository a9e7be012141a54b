/* capture.c's table: every (state, event) pair, and the ways a capture runs from BEGIN to its verdict. Pure: no
 * loop, no processes, no clock. */
#include <criterion/criterion.h>

#include "watch/capture.h"

struct cell {
    enum ddp_capture_state from;
    struct ddp_capture_event_data ev;
    enum ddp_capture_state to;
    unsigned actions;
};

#define EV(k, ...)                                                                                                     \
    {                                                                                                                  \
        .kind = DDP_CE_##k, __VA_ARGS__                                                                                \
    }

static const struct cell cells[] = {
    /* IDLE: only BEGIN starts a capture; nothing else means anything */
    {DDP_CS_IDLE, EV(BEGIN, .settle = false), DDP_CS_WAITING, DDP_CA_ABORT | DDP_CA_ARM_WINDOW | DDP_CA_CHECK},
    {DDP_CS_IDLE, EV(BEGIN, .settle = true), DDP_CS_SETTLING, DDP_CA_ARM_SETTLE},
    {DDP_CS_IDLE, EV(SETTLED), DDP_CS_IDLE, 0},
    {DDP_CS_IDLE, EV(PROGRESS, .complete = true), DDP_CS_IDLE, 0},
    {DDP_CS_IDLE, EV(PROGRESS, .complete = false), DDP_CS_IDLE, 0},
    {DDP_CS_IDLE, EV(WINDOW), DDP_CS_IDLE, 0},
    {DDP_CS_IDLE, EV(ALL_GONE), DDP_CS_IDLE, 0},
    /* SETTLING: the others report their own timeouts; nobody is interrupted yet */
    {DDP_CS_SETTLING, EV(BEGIN, .settle = false), DDP_CS_SETTLING, 0},
    {DDP_CS_SETTLING, EV(BEGIN, .settle = true), DDP_CS_SETTLING, 0},
    {DDP_CS_SETTLING, EV(SETTLED), DDP_CS_WAITING, DDP_CA_ABORT | DDP_CA_ARM_WINDOW | DDP_CA_CHECK},
    {DDP_CS_SETTLING, EV(PROGRESS, .complete = true), DDP_CS_SETTLING, 0},
    {DDP_CS_SETTLING, EV(PROGRESS, .complete = false), DDP_CS_SETTLING, 0},
    {DDP_CS_SETTLING, EV(WINDOW), DDP_CS_SETTLING, 0},
    {DDP_CS_SETTLING, EV(ALL_GONE), DDP_CS_IDLE, DDP_CA_DECIDE},
    /* WAITING: the verdict once complete, at the window, or when every worker is gone */
    {DDP_CS_WAITING, EV(BEGIN, .settle = false), DDP_CS_WAITING, 0},
    {DDP_CS_WAITING, EV(BEGIN, .settle = true), DDP_CS_WAITING, 0},
    {DDP_CS_WAITING, EV(SETTLED), DDP_CS_WAITING, 0},
    {DDP_CS_WAITING, EV(PROGRESS, .complete = true), DDP_CS_IDLE, DDP_CA_DECIDE},
    {DDP_CS_WAITING, EV(PROGRESS, .complete = false), DDP_CS_WAITING, 0},
    {DDP_CS_WAITING, EV(WINDOW), DDP_CS_IDLE, DDP_CA_DECIDE},
    {DDP_CS_WAITING, EV(ALL_GONE), DDP_CS_IDLE, DDP_CA_DECIDE},
};

Test(capture, every_state_and_event)
{
    bool seen[DDP_CS__COUNT][DDP_CE__COUNT] = {{false}};
    for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++) {
        const struct cell *c = &cells[i];
        enum ddp_capture_state st = c->from;
        unsigned a = ddp_capture_step(&st, &c->ev);
        cr_expect_eq(a, c->actions, "(%s, %s): actions %#x, want %#x", ddp_cstate_name(c->from),
                     ddp_cevent_name(c->ev.kind), a, c->actions);
        cr_expect_eq(st, c->to, "(%s, %s): state %s, want %s", ddp_cstate_name(c->from), ddp_cevent_name(c->ev.kind),
                     ddp_cstate_name(st), ddp_cstate_name(c->to));
        seen[c->from][c->ev.kind] = true;
    }
    for (int s = 0; s < DDP_CS__COUNT; s++)
        for (int e = 0; e < DDP_CE__COUNT; e++)
            cr_expect(seen[s][e], "no expectation for (%s, %s)", ddp_cstate_name(s), ddp_cevent_name(e));
}

/* Run events through the table from IDLE; returns the union of the actions, *decided: DECIDE came (once). */
static unsigned run(const struct ddp_capture_event_data *evs, size_t n, enum ddp_capture_state *st, int *decided)
{
    unsigned all = 0;
    *st = DDP_CS_IDLE;
    *decided = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned a = ddp_capture_step(st, &evs[i]);
        *decided += (a & DDP_CA_DECIDE) != 0;
        all |= a;
    }
    return all;
}

/* A stall: SIGABRT at once, the dumps come in, the last one completes it: one verdict, no settle. */
Test(capture, stall_aborts_at_once_and_decides_when_complete)
{
    struct ddp_capture_event_data evs[] = {EV(BEGIN), EV(PROGRESS, .complete = false), EV(PROGRESS, .complete = true),
                                           EV(WINDOW), EV(ALL_GONE)};
    enum ddp_capture_state st;
    int decided;
    unsigned all = run(evs, sizeof(evs) / sizeof(evs[0]), &st, &decided);
    cr_expect_eq(decided, 1, "the verdict is made once, not again at the window or when all are gone");
    cr_expect_eq(st, DDP_CS_IDLE);
    cr_expect_eq(all & DDP_CA_ARM_SETTLE, 0u, "a stall does not wait for timeout reports");
    cr_expect(all & DDP_CA_ABORT);
}

/* A collective timeout: settle first (nobody interrupted), then SIGABRT; a rank that never dumps is decided at
 * the window. */
Test(capture, collective_timeout_settles_then_waits_for_the_window)
{
    struct ddp_capture_event_data evs[] = {EV(BEGIN, .settle = true), EV(PROGRESS, .complete = true), EV(SETTLED),
                                           EV(PROGRESS, .complete = false)};
    enum ddp_capture_state st;
    int decided;
    unsigned all = run(evs, sizeof(evs) / sizeof(evs[0]), &st, &decided);
    cr_expect_eq(decided, 0, "no verdict while settling, nor before every rank is in");
    cr_expect_eq(st, DDP_CS_WAITING);
    cr_expect(all & DDP_CA_ARM_SETTLE);
    cr_expect(all & DDP_CA_ABORT);
    struct ddp_capture_event_data w = EV(WINDOW);
    cr_expect_eq(ddp_capture_step(&st, &w), (unsigned)DDP_CA_DECIDE);
    cr_expect_eq(st, DDP_CS_IDLE);
}

/* Every worker ended while settling: decide on what they left (their tracebacks), never SIGABRT anyone. */
Test(capture, all_gone_while_settling_decides_without_abort)
{
    struct ddp_capture_event_data evs[] = {EV(BEGIN, .settle = true), EV(ALL_GONE), EV(SETTLED)};
    enum ddp_capture_state st;
    int decided;
    unsigned all = run(evs, sizeof(evs) / sizeof(evs[0]), &st, &decided);
    cr_expect_eq(decided, 1);
    cr_expect_eq(all & DDP_CA_ABORT, 0u);
    cr_expect_eq(st, DDP_CS_IDLE);
}
