/* topo: hwloc discovery (NUMA nodes, PCI GPUs, links), NVML facts, placement of ranks, `ddplaunch topo`. */
#include "topo.h"

#include <errno.h>
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nvml.h"
#include "select.h"

struct topo_node {
    int os_index;
    hwloc_obj_t obj;
    hwloc_bitmap_t cpus; /* the node's CPUs this process may use */
    unsigned long long memory;
    int package;         /* OS index of its package, or -1 */
};

struct topo_gpu {
    hwloc_obj_t obj;
    char busid[16];
    unsigned vendor, device, class_id;
    char *model;
    int node;           /* position in nodes[], or -1 */
    bool no_locality;   /* attached to the Machine (sysfs numa_node = -1) */
    hwloc_bitmap_t cpus; /* CPU affinity: the CPUs of its first non-I/O ancestor that we may use */
    char uuid[96];
    long long mem_used, mem_total;
};

struct ddp_topo {
    hwloc_topology_t t;
    char *source; /* "live machine" or the XML path */
    bool from_xml;
    hwloc_bitmap_t allowed;
    struct topo_node *nodes;
    size_t nnodes;
    struct topo_gpu *gpus;
    size_t ngpus;
    enum ddp_link *link; /* ngpus x ngpus */
    int *nvlinks;
    char *link_src;      /* where NV links came from: "NVML", "hwloc NVLinkBandwidth", ... or NULL */
    int *node_os;
    int *node_dist;
    struct ddp_sel_gpu *sel;
    struct ddp_nvml nvml;
};

static char *list_of(hwloc_const_bitmap_t set)
{
    char *s = NULL;

    if (hwloc_bitmap_iszero(set))
        return ddp_xstrdup("");
    if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s)
        abort();
    return s;
}

static hwloc_bitmap_t bitmap_new(void)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();

    if (!b)
        abort();
    return b;
}

static bool is_gpu(hwloc_obj_t o)
{
    unsigned v = o->attr->pcidev.vendor_id, c = o->attr->pcidev.class_id;

    return (v == 0x10de || v == 0x1002) && (c == 0x0300 || c == 0x0302 || c == 0x0380 || c == 0x1200);
}

static int cmp_gpu(const void *a, const void *b)
{
    const struct hwloc_pcidev_attr_s *x = &((const struct topo_gpu *)a)->obj->attr->pcidev;
    const struct hwloc_pcidev_attr_s *y = &((const struct topo_gpu *)b)->obj->attr->pcidev;

    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->bus != y->bus)
        return x->bus < y->bus ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return (x->func > y->func) - (x->func < y->func);
}

static int cmp_node(const void *a, const void *b)
{
    int x = ((const struct topo_node *)a)->os_index, y = ((const struct topo_node *)b)->os_index;

    return (x > y) - (x < y);
}

static int node_pos(const struct ddp_topo *topo, unsigned os)
{
    for (size_t i = 0; i < topo->nnodes; i++)
        if ((unsigned)topo->nodes[i].os_index == os)
            return (int)i;
    return -1;
}

static void load_nodes(struct ddp_topo *topo)
{
    int n = hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_NUMANODE);

    topo->nodes = ddp_xcalloc(n > 0 ? (size_t)n : 1, sizeof *topo->nodes);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo->t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo->t, HWLOC_OBJ_PACKAGE, o);
        struct topo_node *nd = &topo->nodes[topo->nnodes++];

        nd->os_index = (int)o->os_index;
        nd->obj = o;
        nd->cpus = bitmap_new();
        if (o->cpuset)
            hwloc_bitmap_and(nd->cpus, o->cpuset, topo->allowed);
        nd->memory = o->attr->numanode.local_memory;
        nd->package = pkg ? (int)pkg->os_index : -1;
    }
    qsort(topo->nodes, topo->nnodes, sizeof *topo->nodes, cmp_node);
}

/* NUMA distances (from the OS/XML when present, else 10 local / 11 same package / 21 other package). */
static void load_distances(struct ddp_topo *topo)
{
    size_t nn = topo->nnodes;
    struct hwloc_distances_s *d = NULL;
    unsigned nr = 1;

    topo->node_os = ddp_xcalloc(nn + 1, sizeof *topo->node_os);
    topo->node_dist = ddp_xcalloc(nn * nn + 1, sizeof *topo->node_dist);
    for (size_t i = 0; i < nn; i++) {
        topo->node_os[i] = topo->nodes[i].os_index;
        for (size_t j = 0; j < nn; j++)
            topo->node_dist[i * nn + j] = i == j ? 10
                                          : topo->nodes[i].package == topo->nodes[j].package ? 11
                                                                                              : 21;
    }
    if (hwloc_distances_get_by_type(topo->t, HWLOC_OBJ_NUMANODE, &nr, &d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) < 0 ||
        nr < 1)
        return;
    for (unsigned a = 0; a < d->nbobjs; a++)
        for (unsigned b = 0; b < d->nbobjs; b++) {
            int pa = node_pos(topo, d->objs[a]->os_index), pb = node_pos(topo, d->objs[b]->os_index);

            if (pa >= 0 && pb >= 0 && d->values[a * d->nbobjs + b] > 0)
                topo->node_dist[(size_t)pa * nn + pb] = (int)d->values[a * d->nbobjs + b];
        }
    hwloc_distances_release(topo->t, d);
}

static void load_gpus(struct ddp_topo *topo)
{
    hwloc_obj_t o = NULL, root = hwloc_get_root_obj(topo->t);
    size_t cap = 8;

    topo->gpus = ddp_xcalloc(cap, sizeof *topo->gpus);
    while ((o = hwloc_get_next_pcidev(topo->t, o))) {
        struct topo_gpu *g;
        hwloc_obj_t anc;
        const char *model;
        bool dup = false;

        if (!is_gpu(o))
            continue;
        for (size_t i = 0; i < topo->ngpus; i++)
            dup |= topo->gpus[i].obj->attr->pcidev.domain == o->attr->pcidev.domain &&
                   topo->gpus[i].obj->attr->pcidev.bus == o->attr->pcidev.bus &&
                   topo->gpus[i].obj->attr->pcidev.dev == o->attr->pcidev.dev &&
                   topo->gpus[i].obj->attr->pcidev.func == o->attr->pcidev.func;
        if (dup)
            continue;
        if (topo->ngpus == cap)
            topo->gpus = ddp_xrealloc(topo->gpus, (cap *= 2) * sizeof *topo->gpus);
        g = &topo->gpus[topo->ngpus++];
        memset(g, 0, sizeof *g);
        g->obj = o;
        snprintf(g->busid, sizeof g->busid, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus,
                 o->attr->pcidev.dev, o->attr->pcidev.func);
        g->vendor = o->attr->pcidev.vendor_id;
        g->device = o->attr->pcidev.device_id;
        g->class_id = o->attr->pcidev.class_id;
        model = hwloc_obj_get_info_by_name(o, "PCIDevice");
        g->model = model ? ddp_xstrdup(model) : NULL;
        g->mem_used = g->mem_total = -1;
        g->cpus = bitmap_new();
        g->node = -1;
        anc = hwloc_get_non_io_ancestor_obj(topo->t, o);
        /* CPU affinity as nvidia-smi shows it: the CPUs of its NUMA node (set below), else of its ancestor */
        if (anc && anc->cpuset)
            hwloc_bitmap_and(g->cpus, anc->cpuset, topo->allowed);
        if (!anc || anc == root || !anc->nodeset) {
            g->no_locality = true;
        } else {
            /* the first node of its local nodeset that has CPUs (else the first at all) */
            unsigned os;

            hwloc_bitmap_foreach_begin(os, anc->nodeset)
            {
                int p = node_pos(topo, os);

                if (p >= 0 && (g->node < 0 || (hwloc_bitmap_iszero(topo->nodes[g->node].obj->cpuset) &&
                                               !hwloc_bitmap_iszero(topo->nodes[p].obj->cpuset))))
                    g->node = p;
            }
            hwloc_bitmap_foreach_end();
            if (hwloc_bitmap_isequal(anc->nodeset, root->nodeset) && topo->nnodes > 1)
                g->no_locality = true, g->node = -1;
            if (g->node >= 0 && !hwloc_bitmap_iszero(topo->nodes[g->node].cpus))
                hwloc_bitmap_copy(g->cpus, topo->nodes[g->node].cpus);
        }
    }
    qsort(topo->gpus, topo->ngpus, sizeof *topo->gpus, cmp_gpu);
}

static int bridges_between(hwloc_obj_t from, hwloc_obj_t anc)
{
    int k = 0;

    for (hwloc_obj_t p = from->parent; p && p != anc; p = p->parent)
        k += p->type == HWLOC_OBJ_BRIDGE;
    return k;
}

/* hwloc_get_common_ancestor_obj() compares depths, which are special negative values for I/O objects
 * (all bridges share one): walk parents instead. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t p = a; p; p = p->parent)
        for (hwloc_obj_t q = b; q; q = q->parent)
            if (p == q)
                return p;
    return NULL;
}

static enum ddp_link pcie_link(const struct ddp_topo *topo, size_t a, size_t b)
{
    const struct topo_gpu *ga = &topo->gpus[a], *gb = &topo->gpus[b];
    hwloc_obj_t anc = common_ancestor(ga->obj, gb->obj);
    hwloc_obj_t na, nb;

    if (!anc)
        return DDP_LINK_SYS;
    if (anc->type == HWLOC_OBJ_BRIDGE) {
        int da, db;

        if (anc->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
            return DDP_LINK_PHB;
        da = bridges_between(ga->obj, anc), db = bridges_between(gb->obj, anc);
        return (da > db ? da : db) <= 1 ? DDP_LINK_PIX : DDP_LINK_PXB;
    }
    if (hwloc_obj_type_is_io(anc->type))
        return DDP_LINK_PIX;
    na = hwloc_get_non_io_ancestor_obj(topo->t, ga->obj);
    nb = hwloc_get_non_io_ancestor_obj(topo->t, gb->obj);
    if (ga->no_locality || gb->no_locality)
        return DDP_LINK_NODE; /* unknown: do not claim a socket crossing we cannot see */
    if (na && nb && na->nodeset && nb->nodeset && hwloc_bitmap_intersects(na->nodeset, nb->nodeset))
        return DDP_LINK_NODE;
    return DDP_LINK_SYS;
}

/* The GPU a distances object stands for: an OS device (nvml0, rsmi0) under the GPU's PCI device, or the
 * PCI device itself. -1 for anything else (an NVSwitch). */
static int gpu_of_obj(const struct ddp_topo *topo, hwloc_obj_t o)
{
    for (hwloc_obj_t p = o; p; p = p->parent) {
        if (p->type == HWLOC_OBJ_PCI_DEVICE) {
            for (size_t i = 0; i < topo->ngpus; i++)
                if (topo->gpus[i].obj == p)
                    return (int)i;
            return -1;
        }
        if (p->type != HWLOC_OBJ_OS_DEVICE)
            return -1;
    }
    return -1;
}

/* NV# from an hwloc bandwidth matrix (XML exported with the NVML or RSMI backend). Direct GPU-GPU bandwidth
 * counts as links of 25 GB/s (hwloc's per-link figure for NVLink 2-4); GPUs that reach the same NVSwitches
 * count one link per shared switch. XGMI matrices give DDP_LINK_NV with 0 links (printed XGMI). */
static void links_from_hwloc(struct ddp_topo *topo)
{
    static const char *const names[] = {"NVLinkBandwidth", "XGMIBandwidth"};
    size_t n = topo->ngpus;

    for (int k = 0; k < 2; k++) {
        struct hwloc_distances_s *d = NULL;
        unsigned nr = 1;
        int *map;

        if (hwloc_distances_get_by_name(topo->t, names[k], &nr, &d, 0) < 0 || nr < 1)
            continue;
        map = ddp_xcalloc(d->nbobjs, sizeof *map);
        for (unsigned i = 0; i < d->nbobjs; i++)
            map[i] = gpu_of_obj(topo, d->objs[i]);
        for (unsigned i = 0; i < d->nbobjs; i++)
            for (unsigned j = 0; j < d->nbobjs; j++) {
                int a = map[i], b = map[j];
                unsigned long long bw = d->values[i * d->nbobjs + j];
                int links = 0;

                if (a < 0 || b < 0 || a == b)
                    continue;
                if (k == 0) {
                    links = bw ? (int)((bw + 12500) / 25000) : 0;
                    if (bw && !links)
                        links = 1;
                    for (unsigned s = 0; s < d->nbobjs; s++)
                        links += map[s] < 0 && d->values[i * d->nbobjs + s] && d->values[j * d->nbobjs + s];
                    if (!links)
                        continue;
                } else if (!bw) {
                    continue;
                }
                topo->link[(size_t)a * n + b] = DDP_LINK_NV;
                topo->nvlinks[(size_t)a * n + b] = links;
                if (!topo->link_src)
                    topo->link_src = ddp_xstrdup(k == 0 ? "hwloc NVLinkBandwidth" : "hwloc XGMIBandwidth");
            }
        free(map);
        hwloc_distances_release(topo->t, d);
        if (topo->link_src)
            return;
    }
}

/* NV# from NVML (nvml.c counts direct links and shared NVSwitch fabric). */
static void links_from_nvml(struct ddp_topo *topo)
{
    size_t n = topo->ngpus;

    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            int links = i == j ? 0 : ddp_nvml_links(&topo->nvml, topo->gpus[i].busid, topo->gpus[j].busid);

            if (!links)
                continue;
            topo->link[i * n + j] = DDP_LINK_NV;
            topo->nvlinks[i * n + j] = links;
            if (!topo->link_src)
                topo->link_src = ddp_xstrdup("NVML");
        }
}

static void load_links(struct ddp_topo *topo)
{
    size_t n = topo->ngpus;

    topo->link = ddp_xcalloc(n * n + 1, sizeof *topo->link);
    topo->nvlinks = ddp_xcalloc(n * n + 1, sizeof *topo->nvlinks);
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            topo->link[a * n + b] = a == b ? DDP_LINK_SELF : pcie_link(topo, a, b);
    if (topo->nvml.found)
        links_from_nvml(topo);
    if (!topo->link_src)
        links_from_hwloc(topo);
}

static void apply_nvml(struct ddp_topo *topo)
{
    for (size_t i = 0; i < topo->ngpus; i++)
        for (size_t k = 0; k < topo->nvml.ngpus; k++) {
            const struct ddp_nvml_gpu *ng = &topo->nvml.gpus[k];

            if (strcasecmp(ng->busid, topo->gpus[i].busid))
                continue;
            snprintf(topo->gpus[i].uuid, sizeof topo->gpus[i].uuid, "%s", ng->uuid);
            topo->gpus[i].mem_used = ng->mem_used;
            topo->gpus[i].mem_total = ng->mem_total;
            if (!topo->gpus[i].model && ng->name[0])
                topo->gpus[i].model = ddp_xstrdup(ng->name);
        }
}

static void build_sel(struct ddp_topo *topo)
{
    free(topo->sel);
    topo->sel = ddp_xcalloc(topo->ngpus + 1, sizeof *topo->sel);
    for (size_t i = 0; i < topo->ngpus; i++) {
        const struct topo_gpu *g = &topo->gpus[i];

        topo->sel[i] = (struct ddp_sel_gpu){
            .index = (int)i,
            .busid = g->busid,
            .uuid = g->uuid[0] ? g->uuid : NULL,
            .node = g->no_locality ? -1 : g->node,
            .mem_used = g->mem_used,
            .mem_total = g->mem_total,
        };
    }
}

static void sel_topo(const struct ddp_topo *topo, struct ddp_sel_topo *st)
{
    *st = (struct ddp_sel_topo){
        .gpus = topo->sel,
        .ngpus = topo->ngpus,
        .link = topo->link,
        .nvlinks = topo->nvlinks,
        .nnodes = topo->nnodes,
        .node_os = topo->node_os,
        .node_dist = topo->node_dist,
    };
}

int ddp_topo_load(const char *xml_path, struct ddp_topo **out, struct ddp_err *err)
{
    static const char *const gpu_plugins[] = {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"};
    struct ddp_topo *topo;
    unsigned api = hwloc_get_api_version();
    int rc;

    *out = NULL;
    if ((api >> 16) != (HWLOC_API_VERSION >> 16))
        return ddp_errf(err, -ENOTSUP, "hwloc: the library is version %u.%u but ddplaunch was built for %u.x",
                        api >> 16, (api >> 8) & 0xff, HWLOC_API_VERSION >> 16);
    topo = ddp_xcalloc(1, sizeof *topo);
    if (hwloc_topology_init(&topo->t) < 0) {
        rc = -errno;
        free(topo);
        return ddp_errf(err, rc, "hwloc_topology_init: %s", strerror(-rc));
    }
    /* Keep PCI GPUs and the bridges above them (hwloc drops I/O objects by default). */
    hwloc_topology_set_io_types_filter(topo->t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* Not the plugins that start GPU runtimes (OpenCL/CUDA init is slow and may create contexts on the GPUs),
     * nor the libpciaccess one (it leaks ~1 KiB per process, which fails sanitizer builds): the linux
     * component reads the same PCI facts from sysfs, and NVML facts come from our own nvml.c. */
    for (size_t i = 0; i < sizeof gpu_plugins / sizeof gpu_plugins[0]; i++)
        hwloc_topology_set_components(topo->t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, gpu_plugins[i]);
    if (xml_path) {
        topo->from_xml = true;
        topo->source = ddp_xstrdup(xml_path);
        if (hwloc_topology_set_xml(topo->t, xml_path) < 0) {
            rc = errno ? -errno : -EINVAL;
            hwloc_topology_destroy(topo->t);
            free(topo->source);
            free(topo);
            return ddp_errf(err, rc, "%s: cannot read this hwloc XML topology: %s", xml_path, strerror(-rc));
        }
    } else {
        topo->source = ddp_xstrdup("live machine");
    }
    if (hwloc_topology_load(topo->t) < 0) {
        rc = errno ? -errno : -EINVAL;
        hwloc_topology_destroy(topo->t);
        free(topo->source);
        free(topo);
        return ddp_errf(err, rc, "%s: hwloc could not load the topology: %s",
                        xml_path ? xml_path : "live machine", strerror(-rc));
    }
    /* What we may use: the allowed cpuset (cgroup, Slurm cpuset); on the live machine also our own CPU
     * affinity (taskset, an outer numactl). An XML topology describes another machine: take it whole. */
    topo->allowed = bitmap_new();
    hwloc_bitmap_copy(topo->allowed, hwloc_topology_get_allowed_cpuset(topo->t));
    if (hwloc_bitmap_iszero(topo->allowed))
        hwloc_bitmap_copy(topo->allowed, hwloc_topology_get_topology_cpuset(topo->t));
    if (!xml_path) {
        hwloc_bitmap_t mine = bitmap_new();

        if (hwloc_get_cpubind(topo->t, mine, HWLOC_CPUBIND_PROCESS) == 0 && hwloc_bitmap_intersects(mine, topo->allowed))
            hwloc_bitmap_and(topo->allowed, topo->allowed, mine);
        hwloc_bitmap_free(mine);
    }
    load_nodes(topo);
    load_distances(topo);
    load_gpus(topo);
    if (!xml_path)
        ddp_nvml_read(&topo->nvml);
    else
        snprintf(topo->nvml.status, sizeof topo->nvml.status, "NVML: not used (XML topology)");
    apply_nvml(topo);
    load_links(topo);
    build_sel(topo);
    *out = topo;
    return 0;
}

void ddp_topo_destroy(struct ddp_topo *topo)
{
    if (!topo)
        return;
    for (size_t i = 0; i < topo->nnodes; i++)
        hwloc_bitmap_free(topo->nodes[i].cpus);
    for (size_t i = 0; i < topo->ngpus; i++) {
        free(topo->gpus[i].model);
        hwloc_bitmap_free(topo->gpus[i].cpus);
    }
    free(topo->nodes);
    free(topo->gpus);
    free(topo->link);
    free(topo->nvlinks);
    free(topo->link_src);
    free(topo->node_os);
    free(topo->node_dist);
    free(topo->sel);
    free(topo->source);
    ddp_nvml_free(&topo->nvml);
    hwloc_bitmap_free(topo->allowed);
    hwloc_topology_destroy(topo->t);
    free(topo);
}

size_t ddp_topo_ngpus(const struct ddp_topo *topo)
{
    return topo ? topo->ngpus : 0;
}

char *ddp_topo_allowed_cpus(const struct ddp_topo *topo)
{
    return list_of(topo->allowed);
}

int ddp_topo_ncpus(const struct ddp_topo *topo)
{
    int w = hwloc_bitmap_weight(topo->allowed);

    return w > 0 ? w : 1;
}

int ddp_topo_gpu_find(const struct ddp_topo *topo, const char *busid)
{
    for (size_t i = 0; busid && i < topo->ngpus; i++)
        if (strcasecmp(topo->gpus[i].busid, busid) == 0)
            return (int)i;
    return -1;
}

/* ---- placement ---- */

/* The cpuset of the j-th of R equal shares of `set`, in units of `type` objects (cores, L3 caches); PUs when
 * the topology has no such objects, single CPUs when it has no PUs either (a stripped XML). With one_unit,
 * rank j gets only unit j (core-complex: one L3 per rank, as torch does), shared when there are fewer. */
static hwloc_bitmap_t share_of(const struct ddp_topo *topo, hwloc_obj_type_t type, hwloc_const_bitmap_t set, int j,
                               int R, bool one_unit)
{
    hwloc_bitmap_t res = bitmap_new();
    hwloc_bitmap_t *units;
    int n = hwloc_get_nbobjs_by_type(topo->t, type), C = 0, start, end;

    if (n <= 0 && type != HWLOC_OBJ_PU) /* no L3 objects: split cores; no cores: split PUs */
        return hwloc_bitmap_free(res),
               share_of(topo, type == HWLOC_OBJ_L3CACHE ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU, set, j, R, false);
    units = ddp_xcalloc((size_t)(n > 0 ? n : 0) + (size_t)hwloc_bitmap_weight(set) + 1, sizeof *units);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo->t, type, (unsigned)i);
        hwloc_bitmap_t u;

        if (!o->cpuset || !hwloc_bitmap_intersects(o->cpuset, set))
            continue;
        u = bitmap_new();
        hwloc_bitmap_and(u, o->cpuset, set);
        units[C++] = u;
    }
    if (C == 0) { /* no objects at all: one CPU per unit */
        unsigned cpu;

        hwloc_bitmap_foreach_begin(cpu, set)
        {
            units[C] = bitmap_new();
            hwloc_bitmap_set(units[C++], cpu);
        }
        hwloc_bitmap_foreach_end();
    }
    if (C > 0) {
        start = (int)((long long)j * C / R);
        end = (int)((long long)(j + 1) * C / R);
        if (end <= start)
            end = start + 1; /* fewer units than ranks: ranks share */
        if (one_unit && C >= R)
            start = j, end = j + 1;
        else if (one_unit)
            end = start + 1;
        for (int i = start; i < end && i < C; i++)
            hwloc_bitmap_or(res, res, units[i]);
    }
    for (int i = 0; i < C; i++)
        hwloc_bitmap_free(units[i]);
    free(units);
    return res;
}

static void bind_rank(const struct ddp_topo *topo, const struct ddp_place_req *req, int nd, int j, int R,
                      struct ddp_place_rank *r, struct ddp_buf *notes, int rank)
{
    const struct topo_node *node = &topo->nodes[nd];
    hwloc_bitmap_t cpus = NULL;
    char *mems = NULL;

    switch (req->bind) {
    case DDP_BIND_NONE:
        return;
    case DDP_BIND_SOCKET: {
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo->t, HWLOC_OBJ_PACKAGE, node->obj);

        cpus = bitmap_new();
        if (pkg && pkg->cpuset) {
            hwloc_bitmap_and(cpus, pkg->cpuset, topo->allowed);
            mems = list_of(pkg->nodeset);
        } else {
            hwloc_bitmap_copy(cpus, node->cpus);
        }
        break;
    }
    case DDP_BIND_EXCLUSIVE:
        cpus = share_of(topo, HWLOC_OBJ_CORE, node->cpus, j, R, false);
        break;
    case DDP_BIND_CORE_COMPLEX:
        cpus = share_of(topo, HWLOC_OBJ_L3CACHE, node->cpus, j, R, true);
        break;
    default:
        cpus = bitmap_new();
        hwloc_bitmap_copy(cpus, node->cpus);
    }
    if (hwloc_bitmap_iszero(cpus)) {
        char *allowed = list_of(topo->allowed);

        ddp_buf_printf(notes, "; rank %d: NUMA node %d has none of the CPUs this process may use (%s): not bound",
                       rank, node->os_index, allowed);
        free(allowed);
        free(mems);
        hwloc_bitmap_free(cpus);
        return;
    }
    r->cpus = list_of(cpus);
    hwloc_bitmap_free(cpus);
    if (req->mem == DDP_MEM_NONE)
        free(mems);
    else
        r->mems = mems ? mems : ddp_xasprintf("%d", node->os_index);
}

static void sel_req(const struct ddp_place_req *req, int n, struct ddp_sel_req *sr)
{
    *sr = (struct ddp_sel_req){
        .n = n,
        .select = req->select,
        .exclude = req->exclude,
        .exclude_idx = req->exclude_idx,
        .nexclude_idx = req->nexclude_idx,
        .policy = req->policy,
        .max_memory_used = req->max_memory_used,
        .inherited_cvd = req->inherited_cvd,
        .slurm_gpus = req->slurm_gpus,
        .holders = req->holders,
    };
}

int ddp_place_count_usable(const struct ddp_topo *topo, const struct ddp_place_req *req)
{
    struct ddp_sel_topo st;
    struct ddp_sel_req sr;

    sel_topo(topo, &st);
    sel_req(req, 0, &sr);
    return ddp_select_usable(&st, &sr, NULL, NULL, NULL, NULL);
}

int ddp_place(const struct ddp_topo *topo, const struct ddp_place_req *req, struct ddp_placement *out,
              struct ddp_err *err)
{
    int n = req->nproc, rc = 0, *gpu, *node, *eligible, K = 0, R_u = 0, j = 0;
    char **cvdname = NULL, *reason = NULL;
    struct ddp_buf notes = {0};

    memset(out, 0, sizeof *out);
    if (n <= 0)
        return ddp_errf(err, -EINVAL, "placement: %d local workers asked for (expected at least 1)", n);
    gpu = ddp_xcalloc((size_t)n, sizeof *gpu);
    node = ddp_xcalloc((size_t)n, sizeof *node);
    eligible = ddp_xcalloc(topo->nnodes + 1, sizeof *eligible);
    for (int i = 0; i < n; i++)
        gpu[i] = node[i] = -1;
    if (req->want_gpus) {
        struct ddp_sel_topo st;
        struct ddp_sel_req sr;

        sel_topo(topo, &st);
        sel_req(req, n, &sr);
        cvdname = ddp_xcalloc(topo->ngpus + 1, sizeof *cvdname);
        rc = ddp_select_choose(&st, &sr, gpu, &reason, cvdname, err);
        if (rc < 0)
            goto out;
        for (int i = 0; i < n; i++)
            node[i] = topo->gpus[gpu[i]].no_locality ? -1 : topo->gpus[gpu[i]].node;
    }
    /* Ranks without a known node (CPU workers, GPUs of unknown locality) go over the nodes that have CPUs
     * we may use, evenly, in contiguous blocks. */
    for (size_t k = 0; k < topo->nnodes; k++)
        if (!hwloc_bitmap_iszero(topo->nodes[k].cpus))
            eligible[K++] = (int)k;
    for (int i = 0; i < n; i++)
        R_u += node[i] < 0;
    for (int i = 0; i < n && K > 0; i++)
        if (node[i] < 0)
            node[i] = eligible[(long long)j++ * K / R_u];

    out->nranks = (size_t)n;
    out->ranks = ddp_xcalloc((size_t)n, sizeof *out->ranks);
    for (int i = 0; i < n; i++) {
        struct ddp_place_rank *r = &out->ranks[i];
        int ordinal = 0, on_node = 0;

        r->gpu = gpu[i];
        r->numa_node = node[i] >= 0 ? topo->nodes[node[i]].os_index : -1;
        if (gpu[i] >= 0) {
            const struct topo_gpu *g = &topo->gpus[gpu[i]];

            r->busid = ddp_xstrdup(g->busid);
            r->uuid = g->uuid[0] ? ddp_xstrdup(g->uuid) : NULL;
            if (req->visible == DDP_VISIBLE_PER_RANK) {
                r->cvd = ddp_xstrdup(cvdname[gpu[i]]);
            } else {
                struct ddp_buf b = {0};

                for (int k = 0; k < n; k++)
                    ddp_buf_printf(&b, "%s%s", k ? "," : "", cvdname[gpu[k]]);
                r->cvd = b.data;
            }
        } else if (topo->ngpus > 0 || (req->inherited_cvd && *req->inherited_cvd)) {
            r->cvd = ddp_xstrdup(""); /* CPU workers on a GPU machine: no GPU by accident */
        }
        if (node[i] < 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (node[k] != node[i])
                continue;
            on_node++;
            ordinal += k < i;
        }
        bind_rank(topo, req, node[i], ordinal, on_node, r, &notes, i);
    }
    if (!req->want_gpus) {
        struct ddp_buf b = {0};
        bool first = true;

        ddp_buf_printf(&b, "%d CPU worker%s", n, n > 1 ? "s" : "");
        if (K > 0) {
            ddp_buf_printf(&b, " on NUMA node%s ", K > 1 && n > 1 ? "s" : "");
            for (int k = 0; k < K; k++) {
                bool used = false;

                for (int i = 0; i < n; i++)
                    used |= node[i] == eligible[k];
                if (used)
                    ddp_buf_printf(&b, first ? "%d" : ",%d", topo->nodes[eligible[k]].os_index), first = false;
            }
        }
        ddp_buf_puts(&b, topo->ngpus ? ", no GPUs (CUDA_VISIBLE_DEVICES empty)" : ", no GPUs");
        reason = b.data;
    }
    if (notes.len) {
        char *r2 = ddp_xasprintf("%s%s", reason, notes.data);

        free(reason);
        reason = r2;
    }
    out->reason = reason;
    reason = NULL;
out:
    if (cvdname)
        for (size_t i = 0; i < topo->ngpus; i++)
            free(cvdname[i]);
    free(cvdname);
    free(reason);
    ddp_buf_free(&notes);
    free(eligible);
    free(node);
    free(gpu);
    return rc;
}

void ddp_placement_free(struct ddp_placement *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nranks; i++) {
        free(p->ranks[i].busid);
        free(p->ranks[i].uuid);
        free(p->ranks[i].cvd);
        free(p->ranks[i].cpus);
        free(p->ranks[i].mems);
    }
    free(p->ranks);
    free(p->reason);
    memset(p, 0, sizeof *p);
}

/* ---- `ddplaunch topo` ---- */

static const char *policy_name(enum ddp_gpu_policy p)
{
    static const char *const n[] = {"same-numa", "pack", "spread", "any"};

    return (unsigned)p < 4 ? n[p] : "?";
}

static const char *bind_name(enum ddp_bind b)
{
    static const char *const n[] = {"node", "socket", "exclusive", "core-complex", "none"};

    return (unsigned)b < 5 ? n[b] : "?";
}

static const char *mem_name(enum ddp_membind m)
{
    static const char *const n[] = {"local", "interleave", "none"};

    return (unsigned)m < 3 ? n[m] : "?";
}

static char *link_label(const struct ddp_topo *topo, size_t a, size_t b)
{
    enum ddp_link l = topo->link[a * topo->ngpus + b];

    if (l == DDP_LINK_NV)
        return topo->nvlinks[a * topo->ngpus + b] ? ddp_xasprintf("NV%d", topo->nvlinks[a * topo->ngpus + b])
                                                  : ddp_xstrdup("XGMI");
    return ddp_xstrdup(ddp_link_name(l));
}

static char *gpu_numa_label(const struct ddp_topo *topo, const struct topo_gpu *g)
{
    (void)topo;
    if (g->no_locality || g->node < 0)
        return ddp_xstrdup("N/A");
    return ddp_xasprintf("%d", topo->nodes[g->node].os_index);
}

static void req_from_spec(const struct ddp_spec *spec, char *const *envp, struct ddp_place_req *req)
{
    const char *slurm = ddp_env_get(envp, "SLURM_STEP_GPUS");

    if (!slurm)
        slurm = ddp_env_get(envp, "SLURM_JOB_GPUS");
    *req = (struct ddp_place_req){
        .policy = DDP_POLICY_SAME_NUMA,
        .visible = DDP_VISIBLE_PER_JOB,
        .bind = DDP_BIND_NODE,
        .mem = DDP_MEM_LOCAL,
        .inherited_cvd = ddp_env_get(envp, "CUDA_VISIBLE_DEVICES"),
        .slurm_gpus = slurm,
    };
    if (spec) {
        req->select = &spec->gpus_select;
        req->exclude = &spec->gpus_exclude;
        req->policy = spec->gpus_policy;
        req->visible = spec->gpus_visible;
        req->bind = spec->numa_bind;
        req->mem = spec->numa_memory;
        req->max_memory_used = spec->gpus_max_memory_used;
    }
    req->want_gpus = true;
}

static bool select_none(const struct ddp_place_req *req)
{
    return req->select && req->select->n == 1 && !strcasecmp(req->select->v[0], "none");
}

/* CPU workers when there are no GPUs, [gpus] select = none, or nproc_per_node = cpu. */
static bool picks_want_gpus(const struct ddp_topo *topo, const struct ddp_spec *spec, const struct ddp_place_req *req)
{
    return topo->ngpus > 0 && !select_none(req) && !(spec && spec->nproc_per_node.kind == DDP_NPROC_CPU);
}

static void print_text(const struct ddp_topo *topo, const struct ddp_place_req *base, FILE *f)
{
    size_t n = topo->ngpus, aff_w = 14;
    char *allowed = list_of(topo->allowed);
    static const int picks[] = {1, 2, 4, 8};

    fprintf(f, "Topology: %s (hwloc %s)\n", topo->source, HWLOC_VERSION);
    if (n == 0) {
        fprintf(f, "No GPUs found (no NVIDIA or AMD PCI display device in the topology): CPU workers only.\n");
    } else {
        for (size_t i = 0; i < n; i++) {
            char *c = list_of(topo->gpus[i].cpus);

            if (strlen(c) + 2 > aff_w)
                aff_w = strlen(c) + 2;
            free(c);
        }
        fprintf(f, "\n%-7s", "");
        for (size_t i = 0; i < n; i++) {
            char h[32];

            snprintf(h, sizeof h, "GPU%zu", i);
            fprintf(f, "%-7s", h);
        }
        fprintf(f, "%-*s%s\n", (int)aff_w, "CPU Affinity", "NUMA Affinity");
        for (size_t a = 0; a < n; a++) {
            char h[32], *c = list_of(topo->gpus[a].cpus), *numa = gpu_numa_label(topo, &topo->gpus[a]);

            snprintf(h, sizeof h, "GPU%zu", a);
            fprintf(f, "%-7s", h);
            for (size_t b = 0; b < n; b++) {
                char *l = link_label(topo, a, b);

                fprintf(f, a == b ? " %-6s" : "%-7s", l);
                free(l);
            }
            fprintf(f, "%-*s%s\n", (int)aff_w, *c ? c : "-", numa);
            free(c);
            free(numa);
        }
        fprintf(f, "\nLegend:\n\n"
                   "  X    = Self\n"
                   "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
                   "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges"
                   " within a NUMA node\n"
                   "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
                   "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
                   "  PIX  = Connection traversing at most a single PCIe bridge\n"
                   "  NV#  = Connection traversing a bonded set of # NVLinks\n"
                   "  XGMI = AMD Infinity Fabric link between GPUs\n"
                   "  N/A  = the GPU has no NUMA locality (firmware/VM gives none): treated as local to every"
                   " node\n");
        if (topo->link_src)
            fprintf(f, "  (NVLink/XGMI pairs from %s)\n", topo->link_src);
        fprintf(f, "\nGPUs (PCI bus order = CUDA_DEVICE_ORDER=PCI_BUS_ID):\n");
        for (size_t i = 0; i < n; i++) {
            const struct topo_gpu *g = &topo->gpus[i];
            char *numa = gpu_numa_label(topo, g);

            fprintf(f, "  GPU%-3zu %s  %04x:%04x  NUMA %-4s %s", i, g->busid, g->vendor, g->device, numa,
                    g->model ? g->model : "-");
            if (g->uuid[0])
                fprintf(f, "  %s", g->uuid);
            if (g->mem_total > 0)
                fprintf(f, "  %.1f/%.1f GiB used", g->mem_used / 1073741824.0, g->mem_total / 1073741824.0);
            if (base->holders && base->holders[i])
                fprintf(f, "  in use by %s", base->holders[i]);
            fputc('\n', f);
            free(numa);
        }
    }
    fprintf(f, "\nNUMA nodes (CPUs this process may use: %s):\n", allowed);
    for (size_t k = 0; k < topo->nnodes; k++) {
        const struct topo_node *nd = &topo->nodes[k];
        char *c = list_of(nd->cpus);
        bool first = true;

        fprintf(f, "  node %-3d CPUs %-16s %7.1f GiB", nd->os_index, *c ? c : "(none)", nd->memory / 1073741824.0);
        for (size_t i = 0; i < n; i++)
            if (topo->gpus[i].node == (int)k && !topo->gpus[i].no_locality) {
                fprintf(f, first ? "  GPUs %zu" : ",%zu", i);
                first = false;
            }
        fputc('\n', f);
        free(c);
    }
    fprintf(f, "\n%s\n", topo->nvml.status);
    fprintf(f, "\nPicks (policy %s, binding %s, memory %s):\n", policy_name(base->policy), bind_name(base->bind),
            mem_name(base->mem));
    for (size_t p = 0; p < sizeof picks / sizeof picks[0]; p++) {
        struct ddp_place_req req = *base;
        struct ddp_placement pl;
        struct ddp_err err = {0};
        char label[32];

        req.nproc = picks[p];
        req.want_gpus = base->want_gpus;
        snprintf(label, sizeof label, "%d worker%s:", picks[p], picks[p] > 1 ? "s" : "");
        if (ddp_place(topo, &req, &pl, &err) < 0) {
            fprintf(f, "  %-11s cannot: %s\n", label, err.msg);
            continue;
        }
        if (req.want_gpus) {
            fprintf(f, "  %-11s GPU%s ", label, picks[p] > 1 ? "s" : "");
            for (size_t i = 0; i < pl.nranks; i++)
                fprintf(f, i ? ",%d" : "%d", pl.ranks[i].gpu);
            fprintf(f, "  (%s)", pl.reason);
        } else {
            fprintf(f, "  %-11s %s", label, pl.reason);
        }
        fprintf(f, "; CPUs");
        for (size_t i = 0; i < pl.nranks; i++)
            fprintf(f, "%s%s", i ? " | " : " ", pl.ranks[i].cpus ? pl.ranks[i].cpus : "-");
        fputc('\n', f);
        ddp_placement_free(&pl);
    }
    free(allowed);
}

static void print_json(const struct ddp_topo *topo, const struct ddp_place_req *base, FILE *f)
{
    struct ddp_buf b = {0};
    size_t n = topo->ngpus;
    char *allowed = list_of(topo->allowed);
    static const int picks[] = {1, 2, 4, 8};

    ddp_buf_puts(&b, "{\"source\":");
    ddp_buf_json_str(&b, topo->source);
    ddp_buf_printf(&b, ",\"from_xml\":%s,\"hwloc_version\":\"%s\",\"allowed_cpus\":",
                   topo->from_xml ? "true" : "false", HWLOC_VERSION);
    ddp_buf_json_str(&b, allowed);
    ddp_buf_printf(&b, ",\"ncpus\":%d,\"nvml\":{\"found\":%s,\"status\":", ddp_topo_ncpus(topo),
                   topo->nvml.found ? "true" : "false");
    ddp_buf_json_str(&b, topo->nvml.status);
    ddp_buf_puts(&b, ",\"driver\":");
    ddp_buf_json_str(&b, topo->nvml.found ? topo->nvml.driver : NULL);
    ddp_buf_puts(&b, "},\"numa_nodes\":[");
    for (size_t k = 0; k < topo->nnodes; k++) {
        const struct topo_node *nd = &topo->nodes[k];
        char *c = list_of(nd->cpus);
        bool first = true;

        ddp_buf_printf(&b, "%s{\"os_index\":%d,\"cpus\":", k ? "," : "", nd->os_index);
        ddp_buf_json_str(&b, c);
        ddp_buf_printf(&b, ",\"memory_bytes\":%llu,\"package\":%d,\"gpus\":[", nd->memory, nd->package);
        for (size_t i = 0; i < n; i++)
            if (topo->gpus[i].node == (int)k && !topo->gpus[i].no_locality)
                ddp_buf_printf(&b, first ? "%zu" : ",%zu", i), first = false;
        ddp_buf_puts(&b, "],\"distances\":[");
        for (size_t j = 0; j < topo->nnodes; j++)
            ddp_buf_printf(&b, j ? ",%d" : "%d", topo->node_dist[k * topo->nnodes + j]);
        ddp_buf_puts(&b, "]}");
        free(c);
    }
    ddp_buf_puts(&b, "],\"gpus\":[");
    for (size_t i = 0; i < n; i++) {
        const struct topo_gpu *g = &topo->gpus[i];
        char *c = list_of(g->cpus);

        ddp_buf_printf(&b, "%s{\"index\":%zu,\"busid\":\"%s\",\"vendor\":\"%04x\",\"device\":\"%04x\",\"class\":\"%04x\","
                           "\"model\":", i ? "," : "", i, g->busid, g->vendor, g->device, g->class_id);
        ddp_buf_json_str(&b, g->model);
        ddp_buf_printf(&b, ",\"numa_node\":%d,\"locality_known\":%s,\"cpus\":",
                       g->no_locality || g->node < 0 ? -1 : topo->nodes[g->node].os_index,
                       g->no_locality ? "false" : "true");
        ddp_buf_json_str(&b, c);
        ddp_buf_puts(&b, ",\"uuid\":");
        ddp_buf_json_str(&b, g->uuid[0] ? g->uuid : NULL);
        if (g->mem_total > 0)
            ddp_buf_printf(&b, ",\"memory_used\":%lld,\"memory_total\":%lld", g->mem_used, g->mem_total);
        else
            ddp_buf_puts(&b, ",\"memory_used\":null,\"memory_total\":null");
        ddp_buf_puts(&b, ",\"holder\":");
        ddp_buf_json_str(&b, base->holders ? base->holders[i] : NULL);
        ddp_buf_puts(&b, "}");
        free(c);
    }
    ddp_buf_puts(&b, "],\"links\":[");
    for (size_t a = 0; a < n; a++) {
        ddp_buf_puts(&b, a ? ",[" : "[");
        for (size_t c = 0; c < n; c++) {
            char *l = link_label(topo, a, c);

            ddp_buf_printf(&b, "%s\"%s\"", c ? "," : "", l);
            free(l);
        }
        ddp_buf_puts(&b, "]");
    }
    ddp_buf_printf(&b, "],\"link_source\":");
    ddp_buf_json_str(&b, topo->link_src);
    ddp_buf_printf(&b, ",\"policy\":\"%s\",\"binding\":\"%s\",\"memory\":\"%s\",\"picks\":[",
                   policy_name(base->policy), bind_name(base->bind), mem_name(base->mem));
    for (size_t p = 0; p < sizeof picks / sizeof picks[0]; p++) {
        struct ddp_place_req req = *base;
        struct ddp_placement pl;
        struct ddp_err err = {0};

        req.nproc = picks[p];
        req.want_gpus = base->want_gpus;
        ddp_buf_printf(&b, "%s{\"nproc\":%d,", p ? "," : "", picks[p]);
        if (ddp_place(topo, &req, &pl, &err) < 0) {
            ddp_buf_puts(&b, "\"ok\":false,\"error\":");
            ddp_buf_json_str(&b, err.msg);
            ddp_buf_puts(&b, "}");
            continue;
        }
        ddp_buf_puts(&b, "\"ok\":true,\"reason\":");
        ddp_buf_json_str(&b, pl.reason);
        ddp_buf_puts(&b, ",\"ranks\":[");
        for (size_t i = 0; i < pl.nranks; i++) {
            const struct ddp_place_rank *r = &pl.ranks[i];

            ddp_buf_printf(&b, "%s{\"gpu\":%d,\"busid\":", i ? "," : "", r->gpu);
            ddp_buf_json_str(&b, r->busid);
            ddp_buf_puts(&b, ",\"cuda_visible_devices\":");
            ddp_buf_json_str(&b, r->cvd);
            ddp_buf_printf(&b, ",\"numa_node\":%d,\"cpus\":", r->numa_node);
            ddp_buf_json_str(&b, r->cpus);
            ddp_buf_puts(&b, ",\"mems\":");
            ddp_buf_json_str(&b, r->mems);
            ddp_buf_puts(&b, "}");
        }
        ddp_buf_puts(&b, "]}");
        ddp_placement_free(&pl);
    }
    ddp_buf_puts(&b, "]}\n");
    fputs(b.data, f);
    ddp_buf_free(&b);
    free(allowed);
}

int ddp_topo_command(const struct ddp_topo *topo, const struct ddp_spec *spec, char *const *envp,
                     const char *const *holders, bool json, FILE *out)
{
    struct ddp_place_req req;

    req_from_spec(spec, envp, &req);
    req.holders = holders;
    req.want_gpus = picks_want_gpus(topo, spec, &req);
    if (json)
        print_json(topo, &req, out);
    else
        print_text(topo, &req, out);
    return fflush(out) == 0 && !ferror(out) ? 0 : 1;
}

const char *ddp_topo_gpu_busid(const struct ddp_topo *topo, size_t i)
{
    return i < topo->ngpus ? topo->gpus[i].busid : NULL;
}

int ddp_topo_gpu_facts(const struct ddp_topo *topo, size_t i, struct ddp_topo_gpu_facts *out)
{
    if (i >= topo->ngpus)
        return -EINVAL;
    const struct topo_gpu *g = &topo->gpus[i];
    bool local = !g->no_locality && g->node >= 0;
    *out = (struct ddp_topo_gpu_facts){
        .busid = g->busid,
        .vendor = g->vendor,
        .numa_node = local ? topo->nodes[g->node].os_index : -1,
        .package = local ? topo->nodes[g->node].package : -1,
        .mem_used = g->mem_total > 0 ? g->mem_used : -1,
        .mem_total = g->mem_total > 0 ? g->mem_total : -1,
    };
    for (size_t k = 0; k < topo->nvml.ngpus && !out->nvml; k++)
        if (!strcasecmp(topo->nvml.gpus[k].busid, g->busid))
            out->nvml = &topo->nvml.gpus[k];
    return 0;
}

const struct ddp_nvml *ddp_topo_nvml(const struct ddp_topo *topo)
{
    return &topo->nvml;
}

bool ddp_topo_from_xml(const struct ddp_topo *topo)
{
    return topo->from_xml;
}
