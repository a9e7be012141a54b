/* lifecycle: one worker's lifecycle as a pure step function (state x event -> state), the only way runner.c
 * moves a worker: a worker is DONE when its shim exited AND every one of its streams reached EOF. No processes,
 * no loop, no clock. */
#ifndef DDP_LIFECYCLE_H
#define DDP_LIFECYCLE_H

#include <stdbool.h>

/* A worker's streams, as the bit set ddp_runner_worker.open. */
enum { DDP_RS_OUT = 1, DDP_RS_ERR = 2, DDP_RS_REP = 4, DDP_RS_ALL = 7 };

/* One worker's lifecycle (one enum, no flags). A worker is DONE when its shim exited AND every one of its
 * streams (stdout, stderr, the shim's report pipe) reached EOF.
 *   NEW      not started yet
 *   RUNNING  its program runs (the shim is up)
 *   ENDING   the shim said its program ended with a failure (status, signo set; ddp_runner_program_ended) while
 *            the shim still ends what the program left behind
 *   EXITED   the shim exited (status, signo, end times set); some of its streams are still open
 *   DONE     exited and every stream at EOF (or given up on: ddp_runner_give_up); or it could never be started
 *            (pgid 0, status 1) */
enum ddp_lifecycle_state { DDP_WS_NEW, DDP_WS_RUNNING, DDP_WS_ENDING, DDP_WS_EXITED, DDP_WS_DONE };

/* What moves a worker's lifecycle.
 *   SPAWNED        its shim started: RUNNING, every stream open
 *   NOT_STARTED    it will never start (a worker before it could not be): DONE at once
 *   PROGRAM_ENDED  the shim said its program failed and the caller took that as its end: ENDING
 *   EXITED         its shim exited: EXITED, or DONE when every stream is at EOF already
 *   EOF            stream `stream` (DDP_RS_*) reached EOF: DONE when it was the last of an exited worker
 *   GIVE_UP        after SIGKILL, stop waiting for an exited worker's streams (a process outside its group holds
 *                  them): DONE */
enum ddp_lifecycle_event {
    DDP_WE_SPAWNED,
    DDP_WE_NOT_STARTED,
    DDP_WE_PROGRAM_ENDED,
    DDP_WE_EXITED,
    DDP_WE_EOF,
    DDP_WE_GIVE_UP,
    DDP_WE__COUNT
};

/* One step of a worker's lifecycle: *state and *open (its DDP_RS_* streams not at EOF) by ev (stream: for EOF).
 * Returns true when the worker became DONE with this step (once per worker). An event that does not apply to
 * the state changes nothing. Pure; runner.c moves its workers only through it. */
bool ddp_wstate_step(enum ddp_lifecycle_state *state, unsigned *open, enum ddp_lifecycle_event ev, unsigned stream);
const char *ddp_wstate_name(enum ddp_lifecycle_state s);
const char *ddp_wevent_name(enum ddp_lifecycle_event e);

#endif
