/* fitness: the one judge of a GPU: may the job use it now, and if not, why. From what its callers know of it:
 * NVML's answer (memory held by other processes and who holds it, hardware faults, NVML's recovery action,
 * a GPU NVML lost), /proc's "no other process holds an NVIDIA device" (holders.h), the holder the launch saw,
 * and another job's lease. Pure: it reads nothing and decides nothing for its callers (the launch warns, skips
 * or fails; the restart check leaves the GPU out; doctor reports), and NVML is read by nvml.c only. */
#ifndef DDP_FITNESS_H
#define DDP_FITNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "topo/nvml.h"

/* What is known of one GPU now. */
struct ddp_fitness_in {
    const char *busid;
    const struct ddp_nvml *nv;  /* NVML's answer now (memory and processes; health when read), or NULL */
    bool unheld;                /* /proc says no other process holds an NVIDIA device (NVML not read) */
    long long threshold;        /* bytes another process may hold before it counts (DDP_GPU_BUSY_THRESHOLD) */
    bool restart;               /* before a restart: the GPU was this job's; a holder the launch saw is no reason,
                                   nor is a GPU NVML no longer lists when nothing at all is known */
    const char *held_at_launch; /* restart: the holder the launch saw on it ("pid N (...)"), or NULL */
    const char *leased_by;      /* another job's lease of it ("job J (pid N, ...)"), or NULL */
};

enum ddp_fitness {
    DDP_FIT_OK,      /* may be used */
    DDP_FIT_UNKNOWN, /* nothing known of its holders (no NVML answer, no /proc answer): may be used */
    DDP_FIT_HELD,    /* another process holds more than the threshold (at a restart: one the launch did not see) */
    DDP_FIT_LEASED,  /* another job leases it */
    DDP_FIT_FAULT,   /* a hardware fault or NVML's recovery action (ddp_nvml_health_fault) */
    DDP_FIT_LOST,    /* NVML says it is lost, or (restart) no longer lists it */
};

struct ddp_fitness_verdict {
    enum ddp_fitness fit;
    long long held_bytes;               /* the largest other process's memory on it: 0 none, -1 unknown */
    const struct ddp_nvml_proc *holder; /* that process when above the threshold (owned by in->nv), or NULL */
    char why[384];                      /* one line when fit is not OK or UNKNOWN, else "" */
};

/* Judge the GPU in (see the enum for the order of the reasons: lost, fault, lease, holder). Pure. */
void ddp_fitness_judge(const struct ddp_fitness_in *in, struct ddp_fitness_verdict *out);

/* The verdict before a restart on GPU busid, which the job held, from NVML's answer nv (NULL: nothing known) and
 * the holder the launch saw there (NULL: none), with the busy threshold (DDP_GPU_BUSY_THRESHOLD). Pure. */
void ddp_fitness_judge_restart(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch,
                               struct ddp_fitness_verdict *out);

/* Whether a verdict lets the job use the GPU (OK or UNKNOWN). */
bool ddp_fitness_usable(const struct ddp_fitness_verdict *v);

#endif
