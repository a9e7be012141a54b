/* check_gpu: doctor's health check of the picked GPUs (check "gpu-health"): ECC mode and uncorrectable error
 * counts, retired pages and remapped rows, persistence mode, MIG, and the clock-event (throttle) reasons now,
 * as NVML answered them (check.h's ddp_check_gpu.health). A fact NVML does not give (NOT_SUPPORTED, an older
 * NVML) is not a failure. Reads nothing; doctor.c gathers. */
#ifndef DDP_CHECK_GPU_H
#define DDP_CHECK_GPU_H

#include "doctor/check.h"

/* fail: the judge finds a picked GPU unfit (fitness.h: NVML lost it, its recovery action, a row remapping failed
 * or waits for a reset, a page retirement waits for a reset, uncorrectable ECC errors since the driver loaded:
 * a launch and a restart leave it out); warn: a degraded PCIe link, ECC mode changes at the next reset, MIG is on, the
 * clocks are slowed down for a hardware or thermal reason now; ok otherwise (persistence off is said, not warned: only
 * the first CUDA call of each job is slower). skip without NVML. */
void ddp_check_gpu_health(struct ddp_check_report *r, const struct ddp_check_gpus *g);

#endif
