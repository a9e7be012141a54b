/* check_host: doctor's checks of this host's GPU software: NVIDIA driver and CUDA driver API, /dev/nvidia* device
 * nodes, libnccl (system and torch's bundled copy). Each a pure function of the facts passed in (doctor.c
 * gathers them); it loads no library itself. */
#ifndef DDP_CHECK_HOST_H
#define DDP_CHECK_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/util.h"
#include "doctor/check.h"

/* ---- driver, CUDA, device nodes (checks "driver", "devices") ---- */
struct ddp_check_driver {
    bool xml;        /* the topology is an XML file describing another machine: nothing to check here */
    size_t n_nvidia; /* NVIDIA GPUs in the topology */
    bool nvml_found;
    const char *nvml_status;
    const char *driver;      /* NVIDIA driver version from NVML, or NULL */
    int cuda_version;        /* cuDriverGetVersion(): 12040 = 12.4, -1 = libcuda.so.1 not loaded */
    const char *cuda_error;  /* why not, when cuda_version < 0 */
    const char *const *devs; /* /dev/nvidia* names present ("nvidiactl", "nvidia0", "nvidia-uvm", ...) */
    size_t ndevs;
};
void ddp_check_driver(struct ddp_check_report *r, const struct ddp_check_driver *d);
void ddp_check_devices(struct ddp_check_report *r, const struct ddp_check_driver *d);

/* ---- libnccl (check "nccl-lib") ---- */
struct ddp_check_nccl_lib {
    bool xml;                  /* as for ddp_check_driver */
    size_t n_nvidia;           /* NVIDIA GPUs in the topology */
    const char *const *system; /* libnccl.so* paths from ld.so.cache and LD_LIBRARY_PATH */
    size_t nsystem;
    const char *const *bundled; /* .../site-packages/nvidia/nccl/lib/libnccl.so* (torch's pip dependency) */
    size_t nbundled;
    const char *torch_dir; /* a torch package directory found, or NULL */
    int torch_cuda;        /* 1: torch/lib has libtorch_cuda.so, 0: CPU build, -1 unknown */
};
void ddp_check_nccl_lib(struct ddp_check_report *r, const struct ddp_check_nccl_lib *l);
/* Library paths in the text of /etc/ld.so.cache (bytes data[0..len)) whose file name starts with name_prefix
 * ("libnccl.so"), appended to out (no duplicates). Returns how many were appended. Pure. */
size_t ddp_check_ldcache_find(const char *data, size_t len, const char *name_prefix, struct ddp_strv *out);

/* ---- the workers' Python (check "python") ----
 * Rule: a job that runs a Python script or module needs its interpreter to import torch: fail when it cannot,
 * naming another python that can (other) as PYTHON_EXEC. */
struct ddp_check_python {
    bool runs_python;   /* false: a --no-python program (nothing to check) */
    const char *python; /* the workers' interpreter (plan's choice) */
    const char *why;    /* why that one (ddp_plan_python's phrase) */
    const char *torch;  /* torch's version as that interpreter imported it, or NULL when it could not */
    const char *error;  /* the import's last line of error when it could not ("ModuleNotFoundError: ..."), or NULL */
    const char *other;  /* another interpreter that imports torch, or NULL when none was found */
    const char *other_torch; /* its torch version */
};
void ddp_check_python(struct ddp_check_report *r, const struct ddp_check_python *p);

#endif
