/* topo: the node's topology from hwloc (live machine or an XML export): NUMA nodes with their CPUs, PCI
 * GPUs sorted by bus id with NUMA locality and pairwise links, optional NVML facts (dlopen at run time).
 * It does not choose GPUs (select.h), place ranks (place.h), print it (topo_print.h) or bind processes (bind.h). */
#ifndef DDP_TOPO_H
#define DDP_TOPO_H

#include <stdbool.h>
#include <stdio.h>

#include "base/util.h"
#include "spec/spec.h"
#include "topo/nvml.h"

struct ddp_topo;

/* How to load the topology (ddp_topo_load_opts). */
struct ddp_topo_opts {
    const char *xml_path;  /* an hwloc XML export; NULL = the live machine */
    char *const *envp;     /* live machine: use the topology cache (topo_cache.h) from this environment; NULL = no
                              cache */
    bool refresh;          /* discover now even when the cache matches (and rewrite it); read NVML in full */
    bool gpu_usage;        /* NVML's memory in use and compute processes of the NVIDIA GPUs are needed */
    bool xml_nvml;         /* an XML topology: read NVML too (tests pair a fixture with a fake NVML) */
    bool no_nvml;          /* a job that uses no GPU: NVML is never loaded (the cache's facts only); not with refresh */
    bool holders_first;    /* with gpu_usage: only who holds a GPU is needed, not memory in use: when /proc shows
                              that no other process holds an NVIDIA device (holders.h), NVML is not read */
    const char *proc_root; /* the /proc holders_first reads (NULL: "/proc"); a tests' tree also makes it apply to an
                              XML topology, which otherwise never reads this host's /proc */
};

/* Load the topology: xml_path or, when NULL, the live machine, restricted to the CPUs this process may use.
 * The live machine comes from the cache when its key matches (and refresh is off), else from hwloc's discovery,
 * which then rewrites the cache. NVML is read in full (health included) with refresh; its facts that do not change
 * are read for a discovery that finds NVIDIA GPUs, else come from the cache; with gpu_usage, memory in use and the
 * compute processes are read too (else memory in use is -1), unless holders_first and /proc says no other process
 * holds an NVIDIA device (then the GPUs are unheld: ddp_topo_gpu_facts). With no_nvml the library is never loaded: a
 * discovery then caches the topology without NVML's facts, and the next launch that uses GPUs reads them.
 * 0 or negative errno with err. Caller owns; free with ddp_topo_destroy(). */
int ddp_topo_load_opts(const struct ddp_topo_opts *opts, struct ddp_topo **out, struct ddp_err *err);
/* ddp_topo_load_opts() without the cache, NVML read in full. */
int ddp_topo_load(const char *xml_path, struct ddp_topo **out, struct ddp_err *err);
void ddp_topo_destroy(struct ddp_topo *topo);

size_t ddp_topo_ngpus(const struct ddp_topo *topo);
/* The CPUs this process may use, as a list string ("0-7"). Caller owns; free(). */
char *ddp_topo_allowed_cpus(const struct ddp_topo *topo);

/* Number of CPUs this process may use (for nproc_per_node=cpu|auto without GPUs). */
int ddp_topo_ncpus(const struct ddp_topo *topo);

/* Index of the topology GPU with PCI bus id busid (any case), or -1. */
int ddp_topo_gpu_find(const struct ddp_topo *topo, const char *busid);

/* PCI bus id ("0000:18:00.0") of topology GPU i (bus order), or NULL when out of range. Owned by topo. */
const char *ddp_topo_gpu_busid(const struct ddp_topo *topo, size_t i);

/* What topo knows of GPU i (PCI bus order), for `doctor`. Pointers are owned by topo. */
struct ddp_topo_gpu_facts {
    const char *busid;
    unsigned vendor;                 /* PCI vendor: 0x10de NVIDIA, 0x1002 AMD */
    int numa_node;                   /* OS index of its NUMA node, -1 unknown */
    int package;                     /* OS index of that node's package (socket), -1 unknown */
    long long mem_used, mem_total;   /* bytes, -1 unknown */
    const struct ddp_nvml_gpu *nvml; /* NVML's view of it (utilisation, processes), or NULL */
    bool unheld; /* no other process holds an NVIDIA device: /proc says so (holders.h), NVML's memory not read */
};
/* 0 with out filled, or -EINVAL when there is no GPU i. */
int ddp_topo_gpu_facts(const struct ddp_topo *topo, size_t i, struct ddp_topo_gpu_facts *out);
/* NVML as the topology read it (found, status, driver); never read for an XML topology. Owned by topo. */
const struct ddp_nvml *ddp_topo_nvml(const struct ddp_topo *topo);
/* Why NVML's memory and processes were not read (holders_first: "no process holds /dev/nvidia* (/proc)"), or
 * why /proc could not tell and NVML was read; "" when no scan ran. Owned by topo. */
const char *ddp_topo_holders_why(const struct ddp_topo *topo);
/* Whether the live machine's topology came from the cache (topo_cache.h). */
bool ddp_topo_cached(const struct ddp_topo *topo);
/* Whether the topology came from an XML file (it may describe another machine). */
bool ddp_topo_from_xml(const struct ddp_topo *topo);

#endif
