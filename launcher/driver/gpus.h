/* gpus: the job's GPUs as NVML sees them now, at launch and before a restart: NVML read off the loop, and the
 * launch's busy check, which acts on the judge's verdict on each GPU of the attempt (fitness.h: held by another
 * process, [gpus] busy = warn, skip, fail; lost, faulty or leased: never started on). It judges nothing itself,
 * does not choose GPUs (select.h does, leaving out what the judge says) nor read NVML's event set (gpuwatch.h). */
#ifndef DDP_GPUS_H
#define DDP_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "base/util.h"
#include "run/plan.h"
#include "topo/topo.h"

/* When the launch's busy check runs: beside the spawn (true: a run with busy = warn and no [gpus]
 * max_memory_used, whose topology reads no NVML memory, so that nothing waits for NVML before the workers start;
 * supervise.c starts ddp_gpus_check_start), else before anything starts (ddp_gpus_launch_check). run: the
 * command runs workers (not plan or doctor). Pure. */
bool ddp_gpus_check_beside(const struct ddp_spec *spec, bool run);

/* At launch, for attempt a (built, nothing started; busy = skip and fail, and plan: the topology read NVML's
 * memory and processes of its GPUs, which costs an nvmlInit before anything starts): a GPU of a that a process holds
 * more than DDP_GPU_BUSY_THRESHOLD on gets one warning line on f (busy = warn or skip; f NULL: none), or (busy = fail)
 * -EBUSY with err saying which GPU, who and how much; a GPU of a the judge calls lost or faulty is -EBUSY
 * whatever busy says. *held (when not NULL) gets, per topology GPU, that holder ("pid N (user, command, X GiB)")
 * or NULL: the verdict's evidence. Nothing is checked (0, *held NULL) without a topology or when the check runs
 * beside the spawn (ddp_gpus_check_beside). Caller frees *held with ddp_gpus_held_free(). */
int ddp_gpus_launch_check(const struct ddp_topo *topo, const struct ddp_spec *spec, bool run,
                          const struct ddp_attempt *a, FILE *f, char ***held, struct ddp_err *err);
void ddp_gpus_held_free(char **held, size_t n);
/* What the busy check found, per topology GPU (NULL where nothing): held[g] the holder of a GPU the judge calls
 * HELD ("pid N (user, command, X GiB)"), unfit[g] why a GPU the workers started on is lost or faulty. Caller
 * frees each with ddp_gpus_held_free(x, ngpus). */
struct ddp_gpus_found {
    char **held;
    char **unfit;
};
/* ddp_gpus_launch_check() against nv (NVML's memory and processes of a's GPUs, read by the caller) instead of
 * the topology's; started: the workers run already (the check beside the spawn): a lost or faulty GPU gets a
 * warning line and found->unfit, not a refusal. When nv is late (NVML did not answer within its deadline): one
 * line saying the GPUs were not checked (busy = warn), or -EBUSY ([gpus] busy = fail refuses: it cannot tell).
 * found may be NULL. */
int ddp_gpus_check_with(const struct ddp_topo *topo, const struct ddp_nvml *nv, const struct ddp_spec *spec,
                        const struct ddp_attempt *a, FILE *f, bool started, struct ddp_gpus_found *found,
                        struct ddp_err *err);

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
 * milliseconds after the workers start, and fn(arg, found) gets what it found (then owned by fn's caller). NULL
 * when a has no GPU worker or NVML is not known here. */
typedef void ddp_gpus_check_fn(void *arg, struct ddp_gpus_found *found);
struct ddp_gpus_read *ddp_gpus_check_start(uv_loop_t *loop, const struct ddp_topo *topo, const struct ddp_spec *spec,
                                           const struct ddp_attempt *a, ddp_gpus_check_fn *fn, void *arg);

#endif
