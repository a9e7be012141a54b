/* watch: the hang watch as one subsystem, the one interface the driver calls. It owns every timeout and evidence
 * source of an attempt (the progress watch stall.c, [timeout] wall, torch's FileTimer, the collective timeouts
 * ranks print, the live watch with its stack sampler and flight recorder, NVML's GPU events, the hang capture)
 * and feeds each the runner's facts it needs; each source keeps its own per-worker state. The sources are listed
 * in one table in watch.c, each row a module's own operations (source.h): a new evidence or timeout source is a
 * module beside these, exporting its struct ddp_watch_source, and one row there (README's "Where new code goes"
 * names every file it touches).
 * It decides nothing about what follows: timeouts go to the sink (timeout.h), the capture's end to decided, GPU
 * events to gpu_event; the driver (supervise.c) and its policy decide. It names no source: what the driver asks
 * of one is in that source's narrow header (capture_ask.h, atfail.h, live_ask.h), found through ddp_watch_env. */
#ifndef DDP_WATCH_H
#define DDP_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "base/util.h"
#include "records/class.h"
#include "records/records.h"
#include "run/plan.h"
#include "run/runner.h"
#include "watch/fr_remote.h"
#include "watch/source.h"
#include "watch/timeout.h"

struct ddp_watch;

/* Before the launch: write the stack sampler's sitecustomize.py into run_dir (sample.h). 0 with *pydir_out (the
 * directory for PYTHONPATH; caller frees), or a negative errno with err. *signo_out is the signal it takes,
 * either way. */
int ddp_watch_install(const char *run_dir, char **pydir_out, int *signo_out, struct ddp_err *err);
/* Where ddp_watch_install would put it, writing nothing (`plan`): *pydir_out (caller frees) and *signo_out. */
void ddp_watch_where(const char *run_dir, char **pydir_out, int *signo_out);

/* Open every source. *out is set always (caller owns; ddp_watch_close, then ddp_watch_free after the loop
 * ended); returns 0, or a negative errno with err when a source the spec asks for could not start (torch's
 * FileTimer FIFO; the others run), or when the table's rows break a source's `before` (source.h). */
int ddp_watch_open(const struct ddp_watch_config *cfg, struct ddp_watch **out, struct ddp_err *err);
void ddp_watch_close(struct ddp_watch *w);
void ddp_watch_free(struct ddp_watch *w);

/* The workers of plan are about to start: forget the last attempt's state (per worker, FileTimer's timers) and
 * make what they need (heartbeat files, stack sample directory). */
void ddp_watch_prepare(struct ddp_watch *w, const struct ddp_attempt *plan);
/* Attempt r started: watch it. */
void ddp_watch_attempt_start(struct ddp_watch *w, struct ddp_runner_attempt *r);
/* The attempt no longer runs (it is being stopped, or every worker is gone): its timeouts are no news. */
void ddp_watch_attempt_stop(struct ddp_watch *w);
/* Its workers are being stopped or the attempt is retired: no live suspicion from now on (the capture's
 * verdict reads the flight recorders as they were now). */
void ddp_watch_stopping(struct ddp_watch *w);

/* What the runner reports (struct ddp_runner_ops), in the driver's callbacks. */
void ddp_watch_started(struct ddp_watch *w, const struct ddp_runner_worker *k);
/* k wrote a line (which: 0 stdout, 1 stderr): the capture keeps stack dumps, recognise.c classifies it (records.h
 * keeps the class), a collective timeout it names is reported. */
void ddp_watch_line(struct ddp_watch *w, struct ddp_runner_worker *k, int which, const char *line, size_t len);
void ddp_watch_output(struct ddp_watch *w, struct ddp_runner_worker *k, long long now);
void ddp_watch_resumed(struct ddp_watch *w, long long now);
void ddp_watch_exited(struct ddp_watch *w, const struct ddp_runner_worker *k);
/* A worker exited or a stream of it closed. */
void ddp_watch_changed(struct ddp_watch *w);
/* Every worker of the current attempt is done: the capture decides now, the timeouts stop. */
void ddp_watch_all_gone(struct ddp_watch *w);

/* The environment its sources were opened in, where a source's typed accessor finds it (ddp_capture_in_watch,
 * ddp_atfail_in_watch, ddp_live_in_watch...: the source's own narrow header says what else may be asked of it). */
const struct ddp_watch_env *ddp_watch_env(const struct ddp_watch *w);
/* The table of sources, in its order (*n rows): for test_watch (ddp_watch_order_check, source.h). */
const struct ddp_watch_source *const *ddp_watch_sources(size_t *n);
/* The store of the other nodes' ranks' flight recorders (fr_remote.h) that the live verdict and the capture
 * judge with this node's: node 0's driver/frshare.c fills it. Owned by the watch. */
struct ddp_fr_remote *ddp_watch_remote(struct ddp_watch *w);

#endif
