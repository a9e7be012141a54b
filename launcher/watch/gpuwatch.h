/* gpuwatch: NVML's event set for the job's GPUs (Xid critical errors, double-bit ECC errors, hardware clock-event
 * reasons), read by a thread of its own because nvmlEventSetWait_v2 blocks; each event reaches the loop through
 * a uv_async_t and is handed to the caller's callback there. It decides nothing about the job (supervise.c does)
 * and never blocks the loop. When NVML or its event calls are missing, it watches nothing (said at debug level). */
#ifndef DDP_GPUWATCH_H
#define DDP_GPUWATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "topo/topo.h"

struct ddp_gpuwatch_event {
    int gpu;                    /* topology GPU index */
    const char *busid;          /* its PCI bus id (owned by the topology) */
    unsigned long long type;    /* DDP_NVML_EV_XID, DDP_NVML_EV_ECC_DBE, DDP_NVML_EV_CLOCK */
    unsigned long long data;    /* the Xid, or the clock-event reason bits */
    bool fault;                 /* the judge leaves the GPU out after it (fitness.h: a double-bit ECC error, an Xid
                                   the catalog says is the GPU's own failure) */
    unsigned long long repeats; /* the same (GPU, type, data) this many times more since it was last handed on */
    char text[256];             /* what happened, in words ("Xid 79: GPU has fallen off the bus (...)") */
};
typedef void ddp_gpuwatch_fn(void *arg, const struct ddp_gpuwatch_event *ev);

/* ev on a GPU of the job, in words, for the console: "GPU 1 (0000:..) of rank 3: Xid 79: ... (2 more times in the
 * last minute)"; rank -1: no rank on it (running: an attempt runs, so the GPU was left out or is beyond a downsized
 * attempt; else it is between attempts). Caller frees. */
char *ddp_gpuwatch_event_text(const struct ddp_gpuwatch_event *ev, int rank, bool running);
/* The gpu_event record of ev (ddplaunch(1), EVENTS): attempt, gpu, busid, rank, kind, data, fault, repeats, text. */
json_t *ddp_gpuwatch_event_json(const struct ddp_gpuwatch_event *ev, int attempt, int rank, const char *text);

struct ddp_gpuwatch;
/* Watch every GPU of topo that NVML listed (nothing when topo is NULL or NVML was not read); fn(arg, ev) runs
 * in loop's thread. Never fails (NULL when there is nothing to watch). Caller owns; ddp_gpuwatch_close() then
 * ddp_gpuwatch_free(); topo must outlive it. */
struct ddp_gpuwatch *ddp_gpuwatch_start(uv_loop_t *loop, const struct ddp_topo *topo, ddp_gpuwatch_fn *fn, void *arg);
/* Stop: no callback after this; the thread ends at its next wake-up (at most 250 ms) without being waited for. */
void ddp_gpuwatch_close(struct ddp_gpuwatch *w);
void ddp_gpuwatch_free(struct ddp_gpuwatch *w); /* after the loop ran the close; NULL is a no-op */

/* The rate limit of events, per (GPU, type, data): the first is handed on at once, the same again within
 * DDP_GPUWATCH_REPEAT_MS is counted and handed on as one event with repeats once that time has passed (an Xid
 * storm made 448,000 lines). Pure; zero-initialise. */
#define DDP_GPUWATCH_REPEAT_MS 60000
#define DDP_GPUWATCH_KEYS 64
struct ddp_gpuwatch_limit {
    struct {
        int gpu;
        unsigned long long type, data, folded;
        long long last_ms; /* when it was last handed on */
    } k[DDP_GPUWATCH_KEYS];
    size_t n;
    unsigned long long overflow; /* events of keys beyond DDP_GPUWATCH_KEYS, not handed on */
};
/* An event at now_ms: true to hand it on now with *repeats (the ones counted before it), false when counted. */
bool ddp_gpuwatch_limit_event(struct ddp_gpuwatch_limit *l, int gpu, unsigned long long type, unsigned long long data,
                              long long now_ms, unsigned long long *repeats);
/* A count that is due at now_ms (repeats counted, DDP_GPUWATCH_REPEAT_MS since the key was last handed on):
 * true with the key and *repeats, the count then starts again; false when none is due. */
bool ddp_gpuwatch_limit_due(struct ddp_gpuwatch_limit *l, long long now_ms, int *gpu, unsigned long long *type,
                            unsigned long long *data, unsigned long long *repeats);

/* The words for one NVML event (pure): "Xid 79: GPU has fallen off the bus (...)", "double-bit ECC error",
 * "hardware clock slowdown: HW thermal slowdown"; *fault as above. Returns buf. */
const char *ddp_gpuwatch_describe(unsigned long long type, unsigned long long data, bool *fault, char *buf,
                                  size_t size);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_gpuwatch_source;

#endif
