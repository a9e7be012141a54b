/* stall: the progress watch, a timeout source (timeout.h): every period it gathers each rank's signs of life
 * (its heartbeat file's mtime with [timeout] heartbeat = file; its output with heartbeat = output) and asks
 * hang.c whether the attempt is hung (no sign of life within [timeout] init, no progress for [timeout] stall,
 * a silent job); a hang is reported to the sink. It decides nothing about what follows. */
#ifndef DDP_STALL_H
#define DDP_STALL_H

#include <uv.h>

#include "run/runner.h"
#include "spec/spec.h"
#include "watch/timeout.h"

struct ddp_stall;

/* Caller owns; ddp_stall_close(), then ddp_stall_free() after the loop ended. spec and rn outlive it. */
struct ddp_stall *ddp_stall_new(uv_loop_t *loop, const struct ddp_spec *spec, struct ddp_runner *rn,
                                struct ddp_timeout_sink sink);
void ddp_stall_close(struct ddp_stall *w);
void ddp_stall_free(struct ddp_stall *w);

/* The workers of plan are about to start: each one's heartbeat file (DDPLAUNCH_HEARTBEAT_FILE, with [timeout]
 * heartbeat = file) made or reset with mtime = now. */
void ddp_stall_prepare(struct ddp_stall *w, const struct ddp_attempt *plan);
/* Worker i's heartbeat file of the current attempt (borrowed until the next ddp_stall_prepare), or NULL. */
const char *ddp_stall_heartbeat(const struct ddp_stall *w, size_t i);
/* An attempt's workers started (their start is their last progress): watch it, when [timeout] asks to. */
void ddp_stall_start(struct ddp_stall *w, struct ddp_runner_attempt *r);
/* Stop watching (the attempt is being stopped, or every worker is gone). */
void ddp_stall_stop(struct ddp_stall *w);
/* k wrote output at now (life; progress with heartbeat = output). */
void ddp_stall_output(struct ddp_stall *w, struct ddp_runner_worker *k, long long now);
/* Worker i of the current attempt: the monotonic time of its last sign of progress (0: none known). */
long long ddp_stall_progress_ms(const struct ddp_stall *w, size_t i);
/* The console was blocked until now: that time is not the workers' silence. */
void ddp_stall_resumed(struct ddp_stall *w, long long now);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_stall_source;
/* The progress watch of the watch env belongs to (source.h), or NULL when it is not open: for the live watch
 * (heartbeat files) and the capture's evidence (last progress). */
struct ddp_watch_env;
const struct ddp_stall *ddp_stall_in_watch(const struct ddp_watch_env *env);

#endif
