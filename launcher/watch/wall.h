/* wall: [timeout] wall, a timeout source (timeout.h): an attempt that runs longer than the limit is reported
 * to the sink once. The limit is wall-clock time from the attempt's start (CLOCK_BOOTTIME): time the launcher
 * was stopped (Ctrl-Z, a debugger, SIGSTOP) and time the machine was suspended count, so that a job ends by its
 * deadline. It decides nothing about what follows. */
#ifndef DDP_WALL_H
#define DDP_WALL_H

#include <uv.h>

#include "watch/timeout.h"

#define DDP_WALL_CHECK_MS 60000 /* the longest the timer sleeps: a suspended machine is noticed this late */

struct ddp_wall;

/* limit_ms 0 = off. Caller owns; ddp_wall_close(), then ddp_wall_free() after the loop ended. */
struct ddp_wall *ddp_wall_new(uv_loop_t *loop, long long limit_ms, struct ddp_timeout_sink sink);
void ddp_wall_close(struct ddp_wall *w);
void ddp_wall_free(struct ddp_wall *w);
/* An attempt started / is being stopped. */
void ddp_wall_start(struct ddp_wall *w);
void ddp_wall_stop(struct ddp_wall *w);

/* How long to sleep before looking again, elapsed_ms after the start: 0 = the limit is reached; else the time
 * left, at most DDP_WALL_CHECK_MS (the loop's timers run on CLOCK_MONOTONIC, which a suspend stops). */
long long ddp_wall_wait_ms(long long limit_ms, long long elapsed_ms);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_wall_source;

#endif
