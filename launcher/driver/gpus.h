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
#include <uv.h>

#include "base/util.h"
#include "run/plan.h"
#include "topo/topo.h"

/* At launch, for attempt a (built, nothing started; busy = skip and fail, and plan: the topology read NVML's
 * memory and processes of its GPUs, which costs an nvmlInit before anything starts): a GPU of a that a process holds
 * more than DDP_GPU_BUSY_THRESHOLD on gets one warning line on f (busy = warn or skip; f NULL: none), or (busy = fail)
 * -EBUSY with err saying which GPU, who and how much. *held (when not NULL) gets, per topology GPU, that
 * holder ("pid N (user, command, X GiB)") or NULL: the verdict's evidence. Caller frees *held with
 * ddp_gpus_held_free(). */
int ddp_gpus_launch_check(const struct ddp_topo *topo, const struct ddp_spec *spec, const struct ddp_attempt *a,
                          FILE *f, char ***held, struct ddp_err *err);
void ddp_gpus_held_free(char **held, size_t n);
/* ddp_gpus_launch_check() against nv (NVML's memory and processes of a's GPUs, read by the caller) instead of
 * the topology's. When nv is late (NVML did not answer within its deadline): one line saying the GPUs were not
 * checked (busy = warn), or -EBUSY ([gpus] busy = fail refuses: it cannot tell). */
int ddp_gpus_check_with(const struct ddp_topo *topo, const struct ddp_nvml *nv, const struct ddp_spec *spec,
                        const struct ddp_attempt *a, FILE *f, char ***held, struct ddp_err *err);

/* ---- NVML read off the loop ----
 * One NVML read in a thread of its own (ddp_nvml_reader_start), its answer handed to fn in the loop; when NVML's
 * deadline (ddp_nvml_deadline_ms) passes first, fn gets nv with found false, late true and a status "NVML: did not
 * answer in N s", and the thread is let go. fn runs once, then the read closes its handles and frees itself. */
struct ddp_gpus_read;
typedef void ddp_gpus_read_fn(void *arg, const struct ddp_nvml *nv);
/* Start reading what (DDP_NVML_*) or, with base, the memory and processes of busids into a copy of base. NULL
 * when no thread could be started (nothing was read; the caller goes on unchecked). */
struct ddp_gpus_read *ddp_gpus_read_start(uv_loop_t *loop, unsigned what, const struct ddp_nvml *base,
                                          const char *const *busids, size_t nbusids, ddp_gpus_read_fn *fn, void *arg);
/* Wait for the answer up to ms (blocking the loop: only where it must come before the next step, bounded),
 * then hand it to fn at once if it came. NULL is a no-op. */
void ddp_gpus_read_settle(struct ddp_gpus_read *rd, int ms);
/* Give up (NULL is a no-op): fn is not called; the handles close with the loop. */
void ddp_gpus_read_close(struct ddp_gpus_read *rd);

/* busy = warn, a run: the check of attempt a's GPUs beside the spawn (the attempt's workers started): a read of
 * their memory and processes off the loop; its warnings, the same lines as ddp_gpus_launch_check()'s, come a few
 * milliseconds after the workers start, and fn(arg, held) gets the holders per topology GPU (then owned by fn's
 * caller; ddp_gpus_held_free(held, ngpus)). NULL when a has no GPU worker or NVML is not known here. */
typedef void ddp_gpus_check_fn(void *arg, char **held);
struct ddp_gpus_read *ddp_gpus_check_start(uv_loop_t *loop, const struct ddp_topo *topo, const struct ddp_spec *spec,
                                           const struct ddp_attempt *a, ddp_gpus_check_fn *fn, void *arg);

/* Why GPU busid (topology GPU g) must be left out of the next attempt, from NVML's state now (nv; NULL or not
 * found: nothing known, no reason) and what the launch saw (held_at_launch[g], may be NULL): the judge's restart
 * verdict (fitness.h: lost, a hardware fault, a process holding more than DDP_GPU_BUSY_THRESHOLD that was not
 * there at launch). Writes the reason into buf (size bytes) and returns true, or false when the GPU may be used.
 * Pure. */
bool ddp_gpus_unfit(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch, char *buf, size_t size);

#endif
