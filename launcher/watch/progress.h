/* progress: the live watcher of a running attempt (a progress source): samples every Python rank's stacks and,
 * on torch 2.x, its flight recorder at [timeout] sample_interval (sample.h, fr.h), counts signs of progress
 * (output, heartbeat files, stacks or recorders that moved), and when the job has made no progress for longer
 * than its own cadence allows (suspect.h) names the rank the others wait for (fr.h's rules, then hang.h's)
 * in one console line and a `suspect` event, repeated every minute while it lasts; where no rank has a flight
 * recorder, asks NCCL's RAS (ras.h, rasq.h) and says what it found in a second line and a `ras` event; names
 * stragglers from the same samples. Once the job is quiet it reads /proc of each rank and judges it stuck, busy or
 * waiting (rankstate.h): a rank that works alone gets one "works alone" line instead. It stops nothing itself:
 * what a suspicion does is the driver's policy table (hooks.decide), and a stop goes to its owner (hooks.act). */
#ifndef DDP_PROGRESS_H
#define DDP_PROGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#include "records/jsonlog.h"
#include "records/records.h"
#include "spec/spec.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/suspect.h"

struct ddp_progress;

struct ddp_progress_rank {
    int rank, local_rank, gpu;
    const char *gpu_busid;   /* borrowed, or NULL */
    const char *stacks_path; /* borrowed: its DDPLAUNCH_STACKS_FILE, NULL when it is not sampled */
    const char *fr_pipe;     /* borrowed: torch's flight-recorder dump FIFO (may not exist), or NULL */
    int ras_port;            /* the NCCL RAS port its NCCL_RAS_ADDR names on this host (rasq.h), 0 none */
};

struct ddp_progress_hooks {
    void *arg;
    /* Stop the attempt as a hang (culprit[i] for each of the n ranks; none set when no culprit was named; why is
     * one line); final: the job ends after it (busy_limit). Called once per attempt, when decide says so. */
    void (*act)(void *arg, const bool *culprit, const char *why, bool final);
    /* What a suspicion does (the driver's policy table: ddp_policy_suspect); NULL: it is only said. */
    ddp_suspect_decide_fn *decide;
};

/* Start watching an attempt of n ranks (ranks[] and its strings must outlive the watcher). stragglers (borrowed
 * JSON array, may be NULL) gets one object per straggler named (summary.json's stragglers); rec may be NULL.
 * Returns NULL when [timeout] sample is off and nothing else is to be watched. Caller owns; ddp_progress_stop(). */
struct ddp_progress *ddp_progress_start(uv_loop_t *loop, const struct ddp_spec *spec, const char *host, int attempt,
                                        const struct ddp_progress_rank *ranks, size_t n, struct ddp_jsonlog *rec,
                                        json_t *stragglers, const struct ddp_progress_hooks *hooks);

/* Rank i started in process group pgid (the shim's); hb_path (borrowed, may be NULL): its heartbeat file. Then
 * its program's pid, which leads a group of its own. NULL w: no-op. */
void ddp_progress_spawned(struct ddp_progress *w, size_t i, pid_t pgid, const char *hb_path);
void ddp_progress_program(struct ddp_progress *w, size_t i, pid_t pid);
void ddp_progress_exited(struct ddp_progress *w, size_t i);
/* recorder (borrowed JSON object, summary.json's flight_recorder): gets {"attempt", "ranks": {rank: [each process
 * group's "pg", "ranks", "last_enqueued", "last_completed", "op", "shape"]}} from the ranks' flight recorders
 * (torch 2.x, fr.h) as the samples show them. remote (borrowed, may be NULL): the other nodes' ranks'
 * recorders (node 0, fr_remote.h), judged with this node's. NULL w: no-op. */
void ddp_progress_recorder(struct ddp_progress *w, json_t *recorder, const struct ddp_fr_remote *remote);

/* Rank i's flight recorder as the last sample showed it (fr.h), and *still_ms how long it had not moved at
 * now; NULL when it has none (torch 1.x, not sampled yet) or w is NULL. Borrowed until the next sample. */
const struct ddp_fr_state *ddp_progress_fr(const struct ddp_progress *w, size_t i, long long now, long long *still_ms);
void ddp_progress_output(struct ddp_progress *w, size_t i, long long now); /* output from rank i: progress */
/* Where the watch records a hang it names and how the job recovered (records.h; borrowed, may be NULL): the
 * attempt started at now; if the record's hang stopped an earlier attempt, this one is its restart. */
void ddp_progress_recovery(struct ddp_progress *w, struct ddp_recovery *r, long long now);

/* A rank failed with a collective error (atfail.h): ask every running sampled rank whose sampler has shown a
 * flight recorder for its recorder with its entries now (ddp_sample_poke with want_fr). The regular samples and
 * the suspicion pause until ddp_progress_stop. Returns how many ranks were asked (0: none has a recorder). */
int ddp_progress_ask(struct ddp_progress *w, long long now);
/* Read what the asked ranks wrote so far (ddp_progress_fr then gives it); true once every asked rank answered
 * with its entries. A rank whose signal was still pending is asked again. */
bool ddp_progress_answered(struct ddp_progress *w, long long now);

/* Stop the timers; the memory goes once libuv closed them. NULL is a no-op. */
void ddp_progress_stop(struct ddp_progress *w);

#endif
