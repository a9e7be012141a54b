/* fitness: the one judge of a GPU: may the job use it now, and if not, why; and what each caller does with a
 * verdict under [gpus] busy. From what its callers know of it: NVML's answer (memory held by other processes and
 * who holds it, hardware faults, NVML's recovery action, a GPU NVML lost, an NVML event), /proc's "no other
 * process holds an NVIDIA device" (holders.h), the holder the launch saw, and another job's lease. Its reasons
 * are the rows of one table (fitness.c): the pick (select.c), the launch's busy check (gpus.h), plan, doctor
 * (check_gpu.c, the "gpus" check), the check before a restart, the spares leased for a restart (gpuset.h) and
 * the events seen during a run (gpuwatch.h) all act on every verdict it gives; doctor's gpu-busy check asks it
 * how loaded a GPU is (ddp_fitness_load). Pure: it reads nothing (NVML is read by nvml.c only) and acts on
 * nothing. */
#ifndef DDP_FITNESS_H
#define DDP_FITNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "spec/spec.h"
#include "topo/nvml.h"

/* What is known of one GPU now. */
struct ddp_fitness_in {
    const char *busid;
    const struct ddp_nvml *nv;      /* NVML's answer now (memory and processes; health when read), or NULL */
    const struct ddp_nvml_gpu *gpu; /* NVML's answer for this GPU when the caller found it (else looked up in nv) */
    bool unheld;                    /* /proc says no other process holds an NVIDIA device (NVML not read) */
    long long threshold;            /* bytes another process may hold before it counts (0: DDP_GPU_BUSY_THRESHOLD) */
    bool restart;                   /* before a restart: the GPU was this job's; a holder the launch saw is no
                                       reason, nor is a GPU NVML no longer lists when nothing at all is known */
    const char *held_at_launch;     /* restart: the holder the launch saw on it ("pid N (...)"), or NULL */
    const char *leased_by;          /* another job's lease of it ("job J (pid N, ...)"), or NULL */
};

/* The verdicts, in the order the judge asks (the first reason that holds is the verdict). */
enum ddp_fitness {
    DDP_FIT_OK,      /* may be used */
    DDP_FIT_UNKNOWN, /* nothing known of its holders (no NVML answer, no /proc answer): may be used */
    DDP_FIT_HELD,    /* another process holds more than the threshold (at a restart: one the launch did not see) */
    DDP_FIT_LEASED,  /* another job leases it */
    DDP_FIT_FAULT,   /* a hardware fault, NVML's recovery action (ddp_nvml_health_fault) or a fault event */
    DDP_FIT_LOST,    /* NVML says it is lost, or (restart) no longer lists it */
};

struct ddp_fitness_verdict {
    enum ddp_fitness fit;
    long long held_bytes;               /* the largest other process's memory on it: 0 none, -1 unknown */
    const struct ddp_nvml_proc *holder; /* that process when above the threshold (owned by in->nv), or NULL */
    char why[384];                      /* one line when fit is not OK or UNKNOWN, else "" */
};

/* Judge the GPU in (reasons in the order lost, fault, lease, holder). Pure. */
void ddp_fitness_judge(const struct ddp_fitness_in *in, struct ddp_fitness_verdict *out);

/* The verdict before a restart on GPU busid, which the job held, from NVML's answer nv (NULL: nothing known) and
 * the holder the launch saw there (NULL: none), with the busy threshold (DDP_GPU_BUSY_THRESHOLD). Pure. */
void ddp_fitness_judge_restart(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch,
                               struct ddp_fitness_verdict *out);

/* The verdict on a GPU after NVML's event type (DDP_NVML_EV_*) with data (the Xid): FAULT for a double-bit ECC
 * error or an Xid NVIDIA's catalog says is the GPU's own failure (ddp_nvml_xid_meaning), why = text; else OK. */
void ddp_fitness_judge_event(unsigned long long type, unsigned long long data, const char *text,
                             struct ddp_fitness_verdict *out);

/* Whether a verdict lets the job use the GPU (OK or UNKNOWN). */
bool ddp_fitness_usable(const struct ddp_fitness_verdict *v);

/* What a caller does with a verdict under [gpus] busy:
 * - the pick leaves the GPU out (ddp_fitness_leaves_out): every unusable verdict but HELD, and HELD with
 *   busy = skip;
 * - a launch refuses to start on it (ddp_fitness_refuses): every unusable verdict but HELD (a launch never runs
 *   on a lost, faulty or leased GPU, whatever busy says), and HELD with busy = fail; HELD with busy = warn (or
 *   skip, when the GPU was chosen anyway) warns. */
bool ddp_fitness_leaves_out(const struct ddp_fitness_verdict *v, enum ddp_gpu_busy busy);
bool ddp_fitness_refuses(const struct ddp_fitness_verdict *v, enum ddp_gpu_busy busy);

/* How loaded a GPU is by NVML's totals, whoever loads it (doctor's gpu-busy check: a process NVML cannot list, of
 * another container, counts too): FULL from 80% of its memory in use (a job there would run out of it), SHARED
 * from DDP_GPU_BUSY_THRESHOLD or 10% of its memory in use or 10% utilisation (sharing slows both jobs), else IDLE.
 * mem_used or util < 0: unknown, not counted. Pure. */
enum ddp_fitness_load { DDP_FIT_LOAD_IDLE, DDP_FIT_LOAD_SHARED, DDP_FIT_LOAD_FULL };
enum ddp_fitness_load ddp_fitness_load(long long mem_used, long long mem_total, int util);

#endif
