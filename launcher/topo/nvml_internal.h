/* nvml_internal: what nvml.c and nvml_events.c share: NVML's entry points with their documented ABI (the library
 * is loaded with dlopen, so nothing here comes from NVIDIA's headers), the library once loaded, and nvmlInit.
 * Included from topo/ only. */
#ifndef DDP_NVML_INTERNAL_H
#define DDP_NVML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

typedef int nvml_return;
#define NVML_ERROR_GPU_IS_LOST 15
typedef void *nvml_device;
/* nvmlPciInfo_t (v3 layout) */
struct nvml_pci {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_utilization {
    unsigned gpu, memory;
};
/* nvmlProcessInfo_t as the _v2/_v3 calls fill it; usedGpuMemory is ~0ULL when unavailable */
struct nvml_process {
    unsigned pid;
    unsigned long long used;
    unsigned gpu_instance, compute_instance;
};

/* nvmlEventData_t */
struct nvml_event_data {
    nvml_device device;
    unsigned long long type, data;
    unsigned gpu_instance, compute_instance;
};
typedef void *nvml_event_set;

/* nvmlFieldValue_t: the value is a union of 8 bytes; valueType 1 is unsigned int */
struct nvml_field_value {
    unsigned field_id, scope_id;
    long long timestamp, latency_us;
    int value_type;
    nvml_return ret;
    union {
        double d;
        unsigned ui;
        unsigned long ul;
        unsigned long long ull;
        long long sll;
        int si;
        unsigned short us;
    } value;
};
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230

struct nvml_fns {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*driver_version)(char *, unsigned);
    nvml_return (*count)(unsigned *);
    nvml_return (*handle)(unsigned, nvml_device *);
    nvml_return (*pci)(nvml_device, struct nvml_pci *);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*memory)(nvml_device, struct nvml_memory *);
    nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
    nvml_return (*processes)(nvml_device, unsigned *, struct nvml_process *);
    nvml_return (*link_state)(nvml_device, unsigned, int *);
    nvml_return (*link_remote_pci)(nvml_device, unsigned, struct nvml_pci *);
    nvml_return (*link_remote_type)(nvml_device, unsigned, int *); /* may be missing (old drivers) */
    /* health: each may be missing in an older NVML (then that fact is unknown) */
    nvml_return (*persistence)(nvml_device, int *);
    nvml_return (*mig)(nvml_device, unsigned *, unsigned *);
    nvml_return (*ecc_mode)(nvml_device, int *, int *);
    nvml_return (*ecc_total)(nvml_device, int, int, unsigned long long *);
    nvml_return (*remapped)(nvml_device, unsigned *, unsigned *, unsigned *, unsigned *);
    nvml_return (*retired_pending)(nvml_device, int *);
    nvml_return (*clocks_event)(nvml_device, unsigned long long *);
    nvml_return (*temperature)(nvml_device, int, unsigned *);
    nvml_return (*field_values)(nvml_device, int, struct nvml_field_value *);
    nvml_return (*pcie_gen)(nvml_device, unsigned *);
    nvml_return (*pcie_gen_max)(nvml_device, unsigned *);
    nvml_return (*pcie_width)(nvml_device, unsigned *);
    nvml_return (*pcie_width_max)(nvml_device, unsigned *);
    /* events */
    nvml_return (*set_create)(nvml_event_set *);
    nvml_return (*set_free)(nvml_event_set);
    nvml_return (*supported_events)(nvml_device, unsigned long long *);
    nvml_return (*register_events)(nvml_device, unsigned long long, nvml_event_set);
    nvml_return (*set_wait)(nvml_event_set, struct nvml_event_data *, unsigned);
};

/* libnvidia-ml.so.1's entry points, loaded once per process (never closed); NULL with *why when it is missing or
 * lacks the calls every reader needs. */
const struct nvml_fns *ddp_nvml_lib_get(const char **why);
/* nvmlInit; NVML counts them, so one held for the process (keep) makes every later one cheap. 0, or the NVML
 * error with status set. */
nvml_return ddp_nvml_init_lib(const struct nvml_fns *f, bool keep, char *status, size_t size);
/* The device count, or -EIO with status set when NVML fails it or answers a count no machine has. */
int ddp_nvml_device_count(const struct nvml_fns *f, unsigned *n, char *status, size_t size);
/* An event set is being opened (delta 1) or was (-1): the library may be loading (ddp_nvml_stuck). */
void ddp_nvml_opening(int delta);

#endif
