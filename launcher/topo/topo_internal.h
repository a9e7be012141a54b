/* topo_internal: the topology's representation, shared by the files of the topology work only: discovery
 * (topo.c), placement (place.c) and the `topo` printer (topo_print.c). Every other module uses topo.h. */
#ifndef DDP_TOPO_INTERNAL_H
#define DDP_TOPO_INTERNAL_H

#include <hwloc.h>

#include "topo/nvml.h"
#include "topo/select.h"
#include "topo/topo.h"

struct topo_node {
    int os_index;
    hwloc_obj_t obj;
    hwloc_bitmap_t cpus; /* the node's CPUs this process may use */
    unsigned long long memory;
    int package; /* OS index of its package, or -1 */
};

struct topo_gpu {
    hwloc_obj_t obj;
    char busid[16];
    unsigned vendor, device, class_id;
    char *model;
    int node;            /* position in nodes[], or -1 */
    bool no_locality;    /* attached to the Machine (sysfs numa_node = -1) */
    hwloc_bitmap_t cpus; /* CPU affinity: the CPUs of its first non-I/O ancestor that we may use */
    char uuid[96];
    long long mem_used, mem_total;
};

struct ddp_topo {
    hwloc_topology_t t;
    char *source; /* "live machine" or the XML path */
    bool from_xml;
    bool cached;       /* the live machine, from the cache */
    bool nvml_skipped; /* no_nvml: NVML's facts were not read (the cache is written without them) */
    bool recache;      /* the cache lacked NVML's facts and they were read now: write it again */
    bool unheld;       /* holders_first: /proc showed no other process holding an NVIDIA device; NVML not read */
    char holders_why[256];
    hwloc_bitmap_t allowed;
    struct topo_node *nodes;
    size_t nnodes;
    struct topo_gpu *gpus;
    size_t ngpus;
    enum ddp_link *link; /* ngpus x ngpus */
    int *nvlinks;
    char *link_src; /* where NV links came from: "NVML", "hwloc NVLinkBandwidth", ... or NULL */
    int *node_os;
    int *node_dist;
    struct ddp_sel_gpu *sel;
    struct ddp_nvml nvml;
};

/* A CPU/node list string ("0-3,8", "" when empty) of set. Caller owns; free(). Aborts on ENOMEM. */
char *ddp_topo_list(hwloc_const_bitmap_t set);
/* A new empty bitmap; aborts on ENOMEM. Caller frees with hwloc_bitmap_free(). */
hwloc_bitmap_t ddp_topo_bitmap(void);
/* The description select.h chooses from (points into topo). */
void ddp_topo_sel(const struct ddp_topo *topo, struct ddp_sel_topo *st);

#endif
