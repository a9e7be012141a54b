/* topo: the node's topology from hwloc (live machine or an XML export): NUMA nodes with their CPUs, PCI
 * GPUs sorted by bus id with NUMA locality and pairwise links, optional NVML facts (dlopen at run time).
 * It does not choose GPUs (select.h) and does not bind processes (bind.h).
 * (Owned by the topology work; the declarations here are the contract plan.c and launch.c rely on.) */
#ifndef DDP_TOPO_H
#define DDP_TOPO_H

#include <stdbool.h>
#include <stdio.h>

#include "nvml.h"
#include "spec.h"
#include "util.h"

struct ddp_topo;

/* Load the topology: xml_path (an hwloc XML export) or, when NULL, the live machine, restricted to the
 * CPUs this process may use. 0 or negative errno with err. Caller owns; free with ddp_topo_destroy(). */
int ddp_topo_load(const char *xml_path, struct ddp_topo **out, struct ddp_err *err);
void ddp_topo_destroy(struct ddp_topo *topo);

size_t ddp_topo_ngpus(const struct ddp_topo *topo);
/* The CPUs this process may use, as a list string ("0-7"). Caller owns; free(). */
char *ddp_topo_allowed_cpus(const struct ddp_topo *topo);

/* What plan.c asks of placement for one attempt. */
struct ddp_place_req {
    int nproc;                  /* local workers */
    bool want_gpus;             /* false: CPU workers (nproc_per_node=cpu or [gpus] select = none) */
    const struct ddp_strv *select;  /* [gpus] select: indices, PCI bus ids or UUIDs; empty = auto */
    const struct ddp_strv *exclude; /* [gpus] exclude, same forms */
    const int *exclude_idx;     /* topology GPU indices left out (downsizing), may be NULL */
    size_t nexclude_idx;
    enum ddp_gpu_policy policy;
    enum ddp_visible visible;
    enum ddp_bind bind;
    enum ddp_membind mem;
    struct ddp_mem_limit max_memory_used;
    const char *inherited_cvd;  /* the launcher's CUDA_VISIBLE_DEVICES, or NULL */
    const char *slurm_gpus;     /* Slurm's GPU list (global indices), or NULL */
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
    char *reason;                 /* one line: "2 GPUs on NUMA node 0 (NODE)" */
};

/* Choose GPUs and bindings for req->nproc ranks. nproc_per_node=gpu|auto is resolved by the caller with
 * ddp_place_count_usable(). 0, or -ENODEV/-EINVAL with err saying how many were asked, how many are
 * usable and why the others were left out. Caller owns out; free with ddp_placement_free(). */
int ddp_place(const struct ddp_topo *topo, const struct ddp_place_req *req, struct ddp_placement *out,
              struct ddp_err *err);
void ddp_placement_free(struct ddp_placement *p);
/* How many GPUs req could use (select/exclude/CVD/Slurm/memory applied); req->nproc is ignored. */
int ddp_place_count_usable(const struct ddp_topo *topo, const struct ddp_place_req *req);
/* Number of CPUs this process may use (for nproc_per_node=cpu|auto without GPUs). */
int ddp_topo_ncpus(const struct ddp_topo *topo);

/* `ddplaunch topo`: print the link matrix, NUMA nodes and picks, as text or one JSON document. The picks
 * read CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS/SLURM_JOB_GPUS from envp; spec may be NULL (defaults);
 * holders (per topology GPU, may be NULL) name the GPUs other jobs hold. Exit status 0, or 1 when writing
 * failed. */
int ddp_topo_command(const struct ddp_topo *topo, const struct ddp_spec *spec, char *const *envp,
                     const char *const *holders, bool json, FILE *out);

/* Index of the topology GPU with PCI bus id busid (any case), or -1. */
int ddp_topo_gpu_find(const struct ddp_topo *topo, const char *busid);

/* PCI bus id ("0000:18:00.0") of topology GPU i (bus order), or NULL when out of range. Owned by topo. */
const char *ddp_topo_gpu_busid(const struct ddp_topo *topo, size_t i);

/* What topo knows of GPU i (PCI bus order), for `doctor`. Pointers are owned by topo. */
struct ddp_topo_gpu_facts {
    const char *busid;
    unsigned vendor;                /* PCI vendor: 0x10de NVIDIA, 0x1002 AMD */
    int numa_node;                  /* OS index of its NUMA node, -1 unknown */
    int package;                    /* OS index of that node's package (socket), -1 unknown */
    long long mem_used, mem_total;  /* bytes, -1 unknown */
    const struct ddp_nvml_gpu *nvml; /* NVML's view of it (utilisation, processes), or NULL */
};
/* 0 with out filled, or -EINVAL when there is no GPU i. */
int ddp_topo_gpu_facts(const struct ddp_topo *topo, size_t i, struct ddp_topo_gpu_facts *out);
/* NVML as the topology read it (found, status, driver); never read for an XML topology. Owned by topo. */
const struct ddp_nvml *ddp_topo_nvml(const struct ddp_topo *topo);
/* Whether the topology came from an XML file (it may describe another machine). */
bool ddp_topo_from_xml(const struct ddp_topo *topo);

#endif
