/* gpuset: the job's GPUs from attempt to attempt: those left out of the next attempt (a stalled rank's, which may
 * come back, and a faulty one's, which never does, with why), those an attempt ran on (the job holds them), who
 * held them at launch, the GPUs leased for restarts in place of faulty ones, and before a restart the judge's
 * verdict (fitness.h) on each GPU the job holds, then the next attempt fitted to the GPUs left. It reads no NVML
 * (gpus.h reads it for its caller) and starts nothing; besides the line of a GPU it leases for a restart, its
 * caller (supervise.c) says and records what it reports. */
#ifndef DDP_GPUSET_H
#define DDP_GPUSET_H

#include <stdbool.h>
#include <stddef.h>

#include "run/plan.h"
#include "topo/nvml.h"

struct ddp_gpuset;

/* For the job (its spec and topology) and the GPUs it may take (the other jobs' leases per GPU, which it copies
 * as its own to change, the processes that held GPUs at launch, its lease directory); both outlive g. Caller
 * owns; ddp_gpuset_free() (releases the leases taken for restarts). */
struct ddp_gpuset *ddp_gpuset_new(const struct ddp_plan_job *job, const struct ddp_plan_gpus *gpus);
void ddp_gpuset_free(struct ddp_gpuset *g);
/* The other jobs' leases per topology GPU as this job sees them now (a GPU it leased for a restart is no longer
 * another's), for the attempt's plan context (its GPU part's holders); NULL when gpus had none. Owned by g. */
const char *const *ddp_gpuset_holders(const struct ddp_gpuset *g);

/* A stalled rank's GPU: left out of the next attempt, which may take it back when it cannot be built without. */
void ddp_gpuset_exclude(struct ddp_gpuset *g, int gpu);
/* The GPUs to leave out of the next attempt: all of them (*n), or with faulted_only those left out for their own
 * faults (the attempt could not be built without the stalled ranks' GPUs). Owned by g. */
const int *ddp_gpuset_excluded(const struct ddp_gpuset *g, bool faulted_only, size_t *n);
/* Attempt a was built: the job holds its GPUs from now on. */
void ddp_gpuset_ran(struct ddp_gpuset *g, const struct ddp_attempt *a);
/* Whether the job holds topology GPU gpu: an attempt of it ran there (between attempts too). */
bool ddp_gpuset_holds(const struct ddp_gpuset *g, int gpu);
/* The holders the busy check beside the spawn found (gpus.h; per topology GPU, or NULL): g owns them now. */
void ddp_gpuset_set_held(struct ddp_gpuset *g, char **held);

/* GPU gpu failed on its own (an NVML event, the restart check): it stays out of every later attempt. Returns the
 * line to say and record ("GPU 0 (0000:18:00.0) is left out of a restart: WHY"; caller frees), or NULL when it was
 * already out. */
char *ddp_gpuset_left_out(struct ddp_gpuset *g, int gpu, const char *busid, const char *why);

/* Before a restart: the judge's restart verdict (fitness.h) on every GPU the job holds, from NVML's answer nv
 * (NULL or not found: nothing to judge), and its verdict on every other GPU as a spare (ddp_gpuset_fit leases
 * none the judge finds unfit). held(arg, gpu, who) is called for each GPU another process holds now
 * (the records' evidence), unfit(arg, gpu, busid, why) for each GPU that became unfit (the caller leaves it out:
 * ddp_gpuset_left_out). */
typedef void ddp_gpuset_held_fn(void *arg, int gpu, const char *who);
typedef void ddp_gpuset_unfit_fn(void *arg, int gpu, const char *busid, const char *why);
void ddp_gpuset_recheck(struct ddp_gpuset *g, const struct ddp_nvml *nv, ddp_gpuset_held_fn *held,
                        ddp_gpuset_unfit_fn *unfit, void *arg);

/* After GPUs were left out for their faults: the GPUs an attempt of nproc workers (placed with agpus, the
 * attempt's GPU part, whose holders are ddp_gpuset_holders) may use now, leasing a free GPU (no other job's
 * lease, nobody holding it at launch, one the placement takes, fit by the judge at the last ddp_gpuset_recheck)
 * in place of each that failed (each lease said on stderr). nproc
 * when nothing was left out since the last call or enough GPUs are left; fewer; or 0 with why naming each faulty
 * GPU when none is left. What follows (downsize, or end the job) is the policy's (policy.h, GPUS_LEFT). One node
 * only, and not with shared GPUs: the caller asks only then. */
int ddp_gpuset_fit(struct ddp_gpuset *g, const struct ddp_plan_gpus *agpus, int nproc, char *why, size_t size);

#endif
