/* check_gpu: doctor's health check of the picked GPUs (check "gpu-health"): ECC mode and uncorrectable error
 * counts, retired pages and remapped rows, persistence mode, MIG, and the clock-event (throttle) reasons now,
 * as NVML answered them (check.h's ddp_check_gpu.health). A fact NVML does not give (NOT_SUPPORTED, an older
 * NVML) is not a failure. Pure; doctor.c gathers. */
#ifndef DDP_CHECK_GPU_H
#define DDP_CHECK_GPU_H

#include "doctor/check.h"

/* fail: a row remapping failed, or uncorrectable ECC errors since the driver loaded; warn: a remapping or page
 * retirement waits for a reset, ECC mode changes at the next reset, MIG is on, the clocks are slowed down for
 * a hardware or thermal reason now; ok otherwise (persistence off is said, not warned: only the first CUDA call
 * of each job is slower). skip without NVML. */
void ddp_check_gpu_health(struct ddp_check_report *r, const struct ddp_check_gpus *g);

#endif
