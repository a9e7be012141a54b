/* place: where the ranks of one attempt go: which GPUs (through select.h, with the request's select/exclude,
 * CUDA_VISIBLE_DEVICES, Slurm's list, memory limit, GPUs other jobs hold) and which CPUs and memory nodes each
 * binds to, on a topology (topo.h). Pure: it reads no file and binds nothing (bind.h does). */
#ifndef DDP_PLACE_H
#define DDP_PLACE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/util.h"
#include "spec/spec.h"
#include "topo/topo.h"

/* What plan.c asks of placement for one attempt. */
struct ddp_place_req {
    int nproc;                      /* local workers */
    bool want_gpus;                 /* false: CPU workers (nproc_per_node=cpu or [gpus] select = none) */
    const struct ddp_strv *select;  /* [gpus] select: indices, PCI bus ids or UUIDs; empty = auto */
    const struct ddp_strv *exclude; /* [gpus] exclude, same forms */
    const int *exclude_idx;         /* topology GPU indices left out (downsizing), may be NULL */
    size_t nexclude_idx;
    enum ddp_gpu_policy policy;
    enum ddp_visible visible;
    bool share; /* [gpus] share: more ranks than usable GPUs share them, round-robin */
    enum ddp_bind bind;
    enum ddp_membind mem;
    struct ddp_mem_limit max_memory_used;
    enum ddp_gpu_busy busy;     /* [gpus] busy (select.h) */
    const char *inherited_cvd;  /* the launcher's CUDA_VISIBLE_DEVICES, or NULL */
    const char *sched_gpus;     /* the scheduler's GPUs (global indices), or NULL */
    const char *const *holders; /* per topology GPU: held by another job (who), or NULL; the array may be NULL */
};

/* Per local rank. Strings owned by the placement. */
struct ddp_place_rank {
    int gpu;       /* topology GPU index, or -1 */
    char *busid;   /* or NULL */
    char *uuid;    /* or NULL (no NVML) */
    char *cvd;     /* CUDA_VISIBLE_DEVICES value for this rank ("" for CPU workers on a GPU machine) */
    int numa_node; /* OS index, or -1 */
    char *cpus;    /* list string, or NULL = no CPU binding */
    char *mems;    /* list string, or NULL = no memory binding */
};

struct ddp_placement {
    struct ddp_place_rank *ranks; /* nproc entries */
    size_t nranks;
    char *reason; /* one line: "2 GPUs on NUMA node 0 (NODE)" */
};

/* Choose GPUs and bindings for req->nproc ranks. nproc_per_node=gpu|auto is resolved by the caller with
 * ddp_place_count_usable(). One GPU per rank; with req->share and fewer GPUs usable than ranks (other jobs'
 * leases not counted: those are waited for, not shared), the ranks go round-robin over the usable ones (rank i
 * on the (i mod k)-th picked GPU), each bound to its GPU's NUMA node, and per-job CUDA_VISIBLE_DEVICES names
 * each picked GPU once. 0, or -ENODEV/-EINVAL with err saying how many were asked, how many are usable and why
 * the others were left out (and, when sharing would start the ranks, the setting that does). Caller owns out;
 * free with ddp_place_free(). */
int ddp_place_ranks(const struct ddp_topo *topo, const struct ddp_place_req *req, struct ddp_placement *out,
                    struct ddp_err *err);
void ddp_place_free(struct ddp_placement *p);
/* How many GPUs req could use (select/exclude/CVD/Slurm/memory applied); req->nproc is ignored. */
int ddp_place_count_usable(const struct ddp_topo *topo, const struct ddp_place_req *req);
/* How many distinct GPUs ddp_place_ranks() picks for req: req->nproc, or with req->share the usable GPUs when
 * they are fewer (at least one; other jobs' leases not counted). */
int ddp_place_count_gpus(const struct ddp_topo *topo, const struct ddp_place_req *req);

#endif
