/* gpus: the job's GPUs as NVML sees them now, at launch and before a restart: who else holds memory on them
 * ([gpus] busy: warn, skip, fail) and the hardware faults (a row remapping failure or one waiting for a reset,
 * uncorrectable ECC errors, a critical Xid seen during the run) that leave a GPU out of the next attempt.
 * It does not choose GPUs (select.h does, and leaves held GPUs out for busy = skip) nor read NVML's event set
 * (gpuwatch.h). */
#ifndef DDP_GPUS_H
#define DDP_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/util.h"
#include "run/plan.h"
#include "topo/topo.h"

/* At launch, for attempt a (built, nothing started): a GPU of a that a process holds more than
 * DDP_GPU_BUSY_THRESHOLD on gets one warning line on f (busy = warn or skip; f NULL: none), or (busy = fail)
 * -EBUSY with err saying which GPU, who and how much. *held (when not NULL) gets, per topology GPU, that
 * holder ("pid N (user, command, X GiB)") or NULL: the verdict's evidence. Caller frees *held with
 * ddp_gpus_held_free(). */
int ddp_gpus_launch_check(const struct ddp_topo *topo, const struct ddp_spec *spec, const struct ddp_attempt *a,
                          FILE *f, char ***held, struct ddp_err *err);
void ddp_gpus_held_free(char **held, size_t n);

/* Why GPU busid (topology GPU g) must be left out of the next attempt, from NVML's state now (nv; NULL or not
 * found: nothing known, no reason) and what the launch saw (held_at_launch[g], may be NULL): a hardware fault
 * (ddp_nvml_health_fault) or a process holding more than DDP_GPU_BUSY_THRESHOLD that was not there at launch.
 * Writes the reason into buf (size bytes) and returns true, or false when the GPU may be used. Pure. */
bool ddp_gpus_unfit(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch, char *buf, size_t size);

#endif
