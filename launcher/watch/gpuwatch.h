/* gpuwatch: NVML's event set for the job's GPUs (Xid critical errors, double-bit ECC errors, hardware clock-event
 * reasons), read by a thread of its own because nvmlEventSetWait_v2 blocks; each event reaches the loop through
 * a uv_async_t and is handed to the caller's callback there. It decides nothing about the job (supervise.c does)
 * and never blocks the loop. When NVML or its event calls are missing, it watches nothing (said at debug level). */
#ifndef DDP_GPUWATCH_H
#define DDP_GPUWATCH_H

#include <stdbool.h>
#include <uv.h>

#include "topo/topo.h"

struct ddp_gpuwatch_event {
    int gpu;                 /* topology GPU index */
    const char *busid;       /* its PCI bus id (owned by the topology) */
    unsigned long long type; /* DDP_NVML_EV_XID, DDP_NVML_EV_ECC_DBE, DDP_NVML_EV_CLOCK */
    unsigned long long data; /* the Xid, or the clock-event reason bits */
    bool fault;              /* the GPU itself failed (a double-bit ECC error, an Xid the catalog says so of) */
    char text[256];          /* what happened, in words ("Xid 79: GPU has fallen off the bus (...)") */
};
typedef void ddp_gpuwatch_fn(void *arg, const struct ddp_gpuwatch_event *ev);

struct ddp_gpuwatch;
/* Watch every GPU of topo that NVML listed (nothing when topo is NULL or NVML was not read); fn(arg, ev) runs
 * in loop's thread. Never fails (NULL when there is nothing to watch). Caller owns; ddp_gpuwatch_close() then
 * ddp_gpuwatch_free(); topo must outlive it. */
struct ddp_gpuwatch *ddp_gpuwatch_start(uv_loop_t *loop, const struct ddp_topo *topo, ddp_gpuwatch_fn *fn, void *arg);
/* Stop: no callback after this; the thread ends at its next wake-up (at most 250 ms) without being waited for. */
void ddp_gpuwatch_close(struct ddp_gpuwatch *w);
void ddp_gpuwatch_free(struct ddp_gpuwatch *w); /* after the loop ran the close; NULL is a no-op */

/* The words for one NVML event (pure): "Xid 79: GPU has fallen off the bus (...)", "double-bit ECC error",
 * "hardware clock slowdown: HW thermal slowdown"; *fault as above. Returns buf. */
const char *ddp_gpuwatch_describe(unsigned long long type, unsigned long long data, bool *fault, char *buf,
                                  size_t size);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_gpuwatch_source;

#endif
