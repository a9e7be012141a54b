/* select: which GPUs a job gets, as a pure function of a description of the GPUs (NUMA node, links, memory in
 * use, NVML's answer), the request (count, select/exclude, CUDA_VISIBLE_DEVICES, the scheduler's list, policy,
 * [gpus] busy, other jobs' leases) and the judge's verdict on each GPU (fitness.h). It does not read the machine
 * (topo.c builds the description) and does not bind anything. */
#ifndef DDP_SELECT_H
#define DDP_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/util.h"
#include "spec/spec.h"
#include "topo/nvml.h"

/* Link between two GPUs, tightest first, as `nvidia-smi topo -m` names them. */
enum ddp_link {
    DDP_LINK_SELF, /* X */
    DDP_LINK_NV,   /* NVLink (NV#, count in nvlinks) or AMD XGMI */
    DDP_LINK_PIX,  /* at most one PCIe bridge */
    DDP_LINK_PXB,  /* several PCIe bridges, no host bridge */
    DDP_LINK_PHB,  /* through a PCIe host bridge */
    DDP_LINK_NODE, /* between host bridges of one NUMA node */
    DDP_LINK_SYS   /* across the SMP interconnect between NUMA nodes */
};
/* "X", "NV" (without the count), "PIX", ... */
const char *ddp_link_name(enum ddp_link l);

struct ddp_sel_gpu {
    int index;          /* topology index (PCI bus order) */
    const char *busid;  /* "0000:18:00.0" */
    const char *uuid;   /* "GPU-...", or NULL (no NVML) */
    int node;           /* position in the node list of ddp_sel_topo, or -1: locality unknown = local to all */
    long long mem_used; /* bytes, -1 = unknown */
    long long mem_total;
    const struct ddp_nvml_gpu *nvml; /* NVML's answer for it (memory, processes, health, lost), or NULL */
    bool unheld;                     /* /proc says no other process holds an NVIDIA device (holders.h; NVML not read) */
};

struct ddp_sel_topo {
    const struct ddp_sel_gpu *gpus; /* in PCI bus order, gpus[i].index == i */
    size_t ngpus;
    const enum ddp_link *link; /* ngpus x ngpus, row-major */
    const int *nvlinks;        /* ngpus x ngpus NVLink counts for DDP_LINK_NV (may be NULL) */
    size_t nnodes;
    const int *node_os;   /* OS index of each node */
    const int *node_dist; /* nnodes x nnodes relative distances (10 = local), or NULL = unknown */
};

struct ddp_sel_req {
    int n;                          /* GPUs wanted (ignored by ddp_select_usable) */
    const struct ddp_strv *select;  /* explicit choice: indices, bus ids or UUIDs (NULL, empty or "auto" = auto;
                                       "none" = no GPU is usable) */
    const struct ddp_strv *exclude; /* same forms */
    const int *exclude_idx;         /* topology indices left out (downsizing) */
    size_t nexclude_idx;
    enum ddp_gpu_policy policy;
    struct ddp_mem_limit max_memory_used;
    enum ddp_gpu_busy busy;     /* [gpus] busy: what the judge's HELD verdict does (fitness.h) */
    const char *inherited_cvd;  /* the launcher's CUDA_VISIBLE_DEVICES (indices or GPU-UUIDs), or NULL */
    const char *sched_gpus;     /* the scheduler's GPU indices ("0,1" or "0-3"), or NULL */
    const char *const *holders; /* per GPU: leased by another job (who), or NULL; the array may be NULL */
};
/* Every GPU the judge leaves out (ddp_fitness_leaves_out: lost, faulty, leased, and held with busy = skip) is
 * unusable, with the judge's reason. */

/* Which GPUs req may use. usable[i] is set per topology GPU; cvd[i] (when cvd is not NULL) gets the value that
 * names GPU i in a worker's CUDA_VISIBLE_DEVICES: the inherited entry itself when the launcher got one (so the
 * choice composes with it), else the index. *why (when not NULL) gets one line saying why the others were left
 * out ("" when none was). Returns the number usable, or -EINVAL with err when select/exclude names a GPU that
 * does not exist. Caller owns cvd[i] and *why; free(). */
int ddp_select_usable(const struct ddp_sel_topo *t, const struct ddp_sel_req *req, bool *usable, char **cvd, char **why,
                      struct ddp_err *err);

/* Choose req->n GPUs: with an explicit select list, the first n usable in the order given; else by policy:
 * same-numa (fewest NUMA nodes, closest first, then tightest links, then lowest bus ids), pack (tightest links
 * first), spread (as many NUMA nodes as possible, evenly), any (lowest bus ids). out gets n topology indices in
 * rank order; *reason one line ("2 GPUs on NUMA node 0, same host bridge (PHB)"); cvd as for
 * ddp_select_usable (may be NULL). 0, or -ENODEV/-EINVAL with err saying how many were asked, how many are
 * usable and why the others were left out. Caller owns *reason and cvd[i]; free(). Deterministic. */
int ddp_select_choose(const struct ddp_sel_topo *t, const struct ddp_sel_req *req, int *out, char **reason, char **cvd,
                      struct ddp_err *err);

#endif
