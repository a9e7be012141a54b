/* nvml: optional NVIDIA facts (UUIDs, memory in use, utilisation, the processes using each GPU, NVLink pairs,
 * driver version) read through NVML, which is
 * loaded at run time with dlopen("libnvidia-ml.so.1"): no build-time dependency. It does not find GPUs (hwloc does). */
#ifndef DDP_NVML_H
#define DDP_NVML_H

#include <stdbool.h>
#include <stddef.h>

#define DDP_NVML_MAX_LINKS 18
#define DDP_NVML_MAX_PROCS 64

/* A compute process on a GPU. */
struct ddp_nvml_proc {
    unsigned pid;       /* in NVML's pid namespace: may not be visible here */
    long long mem_used; /* bytes, -1 unknown */
};

struct ddp_nvml_gpu {
    char busid[32]; /* "0000:18:00.0" (lower case, 4-digit domain) */
    char uuid[96];  /* "GPU-..." */
    char name[96];
    long long mem_used, mem_total; /* bytes, -1 unknown */
    int util;                      /* GPU utilisation percent over NVML's last sample period, -1 unknown */
    struct ddp_nvml_proc procs[DDP_NVML_MAX_PROCS]; /* compute processes using it */
    int nprocs;
    int nlinks;                              /* active NVLinks */
    char link_peer[DDP_NVML_MAX_LINKS][32];  /* bus id at the other end of each active link */
    bool link_to_switch[DDP_NVML_MAX_LINKS]; /* the other end is an NVSwitch (or not a GPU NVML knows) */
};

struct ddp_nvml {
    bool found;       /* the library loaded and nvmlInit succeeded */
    char status[256]; /* "NVML: not found (libnvidia-ml.so.1: cannot open ...)" or "NVML 12.535 driver ..." */
    char driver[80];
    struct ddp_nvml_gpu *gpus;
    size_t ngpus;
};

/* Load NVML and read every device; never fails: when NVML is missing or broken, found is false and status
 * says why. The library is closed again before returning. Caller owns; free with ddp_nvml_free(). */
void ddp_nvml_read(struct ddp_nvml *out);
void ddp_nvml_free(struct ddp_nvml *n);

/* The GPU with PCI bus id busid (any case), or NULL when NVML does not list it. Owned by n. */
const struct ddp_nvml_gpu *ddp_nvml_find(const struct ddp_nvml *n, const char *busid);

/* NVLinks between the GPUs with bus ids a and b, as nvidia-smi counts them (NV#): links from a straight to b,
 * plus, when both reach NVSwitches, the smaller of their switch link counts. 0 when not linked or unknown. */
int ddp_nvml_links(const struct ddp_nvml *n, const char *a, const char *b);

/* The facts of n that do not change while the machine runs (found, status, driver; per GPU bus id, UUID, name,
 * total memory, NVLinks), as one line of JSON for the topology cache (topo_cache.h). Memory in use,
 * utilisation and processes are live state and are left out. Caller owns; free(). */
char *ddp_nvml_static_json(const struct ddp_nvml *n);
/* The reverse: *out from such a line, with memory in use and utilisation unknown (-1) and no processes.
 * 0, or -EBADMSG (out zeroed) when text is not such a line. Caller owns *out; free with ddp_nvml_free(). */
int ddp_nvml_static_parse(const char *text, struct ddp_nvml *out);

/* Normalise a PCI bus id to "dddd:bb:dd.f" lower case (NVML writes an 8-digit domain). */
void ddp_nvml_busid_norm(const char *in, char *out, size_t outsz);

#endif
