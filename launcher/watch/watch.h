/* watch: the progress watch, a timeout source (timeouts.h): every period it gathers each rank's signs of life
 * (its heartbeat file's mtime with [timeout] heartbeat = file; its output with heartbeat = output) and asks
 * hang.c whether the attempt is hung (no sign of life within [timeout] init, no progress for [timeout] stall,
 * a silent job); a hang is reported to the sink. It decides nothing about what follows. */
#ifndef DDP_WATCH_H
#define DDP_WATCH_H

#include <uv.h>

#include "run/runner.h"
#include "spec/spec.h"
#include "watch/timeouts.h"

struct ddp_watch;

/* Caller owns; ddp_watch_close(), then ddp_watch_free() after the loop ended. spec and rn outlive it. */
struct ddp_watch *ddp_watch_new(uv_loop_t *loop, const struct ddp_spec *spec, struct ddp_runner *rn,
                                struct ddp_timeout_sink sink);
void ddp_watch_close(struct ddp_watch *w);
void ddp_watch_free(struct ddp_watch *w);

/* The workers of plan are about to start: each one's heartbeat file (DDPLAUNCH_HEARTBEAT_FILE, with [timeout]
 * heartbeat = file) made or reset with mtime = now. */
void ddp_watch_prepare(struct ddp_watch *w, const struct ddp_attempt *plan);
/* Worker i's heartbeat file of the current attempt (borrowed until the next ddp_watch_prepare), or NULL. */
const char *ddp_watch_heartbeat(const struct ddp_watch *w, size_t i);
/* An attempt's workers started (their start is their last progress): watch it, when [timeout] asks to. */
void ddp_watch_start(struct ddp_watch *w, struct ddp_rrun *r);
/* Stop watching (the attempt is being stopped, or every worker is gone). */
void ddp_watch_stop(struct ddp_watch *w);
/* k wrote output at now (life; progress with heartbeat = output). */
void ddp_watch_output(struct ddp_watch *w, struct ddp_rworker *k, long long now);
/* The console was blocked until now: that time is not the workers' silence. */
void ddp_watch_resumed(struct ddp_watch *w, long long now);

#endif
