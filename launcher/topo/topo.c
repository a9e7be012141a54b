/* topo: hwloc discovery (NUMA nodes, PCI GPUs, links) and NVML facts (topo.h). Placement is place.c, the
 * `topo` printer topo_print.c. */
#include "topo/topo.h"
#include "topo/topo_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "topo/holders.h"
#include "topo/topo_cache.h"

char *ddp_topo_list(hwloc_const_bitmap_t set)
{
    char *s = NULL;

    if (hwloc_bitmap_iszero(set))
        return ddp_xstrdup("");
    if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s)
        abort();
    return s;
}

hwloc_bitmap_t ddp_topo_bitmap(void)
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
        nd->cpus = ddp_topo_bitmap();
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
            topo->node_dist[i * nn + j] = i == j ? 10 : topo->nodes[i].package == topo->nodes[j].package ? 11 : 21;
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
        g->cpus = ddp_topo_bitmap();
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
    for (size_t i = 0; i < topo->ngpus; i++) {
        const struct ddp_nvml_gpu *ng = ddp_nvml_find(&topo->nvml, topo->gpus[i].busid);

        if (!ng)
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
            .nvml = ddp_nvml_find(&topo->nvml, g->busid),
            .unheld = topo->unheld && g->vendor == 0x10de,
        };
    }
}

void ddp_topo_sel(const struct ddp_topo *topo, struct ddp_sel_topo *st)
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

/* hwloc's plugins that ddplaunch does not use: those that start GPU runtimes (OpenCL/CUDA init is slow and may
 * create contexts on the GPUs), and the libpciaccess one (it leaks ~1 KiB per process, which fails sanitizer builds:
 * the linux component reads the same PCI facts from sysfs, and NVML facts come from our own nvml.c). */
static const char *const unused_plugins[] = {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"};

/* The caches nothing here reads: placement splits a NUMA node by L3 caches, cores or PUs. */
static const hwloc_obj_type_t unused_caches[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE,  HWLOC_OBJ_L4CACHE,
                                                 HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2ICACHE,
                                                 HWLOC_OBJ_L3ICACHE};

/* hwloc_topology_init() dlopens every plugin it finds (X11, OpenCL, ICU among their libraries: most of a launch's
 * start-up), unless HWLOC_PLUGINS_BLACKLIST names it: set for the call when the user did not. The libxml2 one
 * (which loads ICU) too, except for a user's XML file: hwloc's own parser reads the cache, its own export, but
 * not every older file. */
static int init_hwloc(hwloc_topology_t *t, bool xml_file)
{
/* How long a launch that missed the cache waits for another that discovers now (ddp_topo_cache_lock) before it
 * discovers too: discovery takes tens of milliseconds, seconds when a thousand launches share two CPUs. */
#define DISCOVERY_WAIT_MS 5000

#define GPU_PLUGINS "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero"
    bool set = !getenv("HWLOC_PLUGINS_BLACKLIST") &&
               setenv("HWLOC_PLUGINS_BLACKLIST", xml_file ? GPU_PLUGINS : GPU_PLUGINS ",hwloc_xml_libxml", 1) == 0;
#undef GPU_PLUGINS
    int rc = hwloc_topology_init(t);
    int e = errno;
    if (set)
        unsetenv("HWLOC_PLUGINS_BLACKLIST");
    if (rc < 0)
        return -e;
    /* Keep PCI GPUs and the bridges above them (hwloc drops I/O objects by default). */
    hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* Of the caches, only L3 places ranks (place.c): the others are most of a many-core machine's objects, and
     * every launch parses the cache's XML (a 2-socket, 256-PU topology: 247 KB, 1.5 ms; 104 KB, 0.7 ms without). */
    for (size_t i = 0; i < sizeof unused_caches / sizeof unused_caches[0]; i++)
        hwloc_topology_set_type_filter(*t, unused_caches[i], HWLOC_TYPE_FILTER_KEEP_NONE);
    for (size_t i = 0; i < sizeof unused_plugins / sizeof unused_plugins[0]; i++)
        hwloc_topology_set_components(*t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused_plugins[i]);
    return 0;
}

static void free_partial(struct ddp_topo *topo)
{
    hwloc_topology_destroy(topo->t);
    free(topo->source);
    free(topo);
}

/* The live machine from the cache: 0 when the cache matched (topology set from its XML, NVML facts in topo). */
static int from_cache(struct ddp_topo *topo, const char *key, char *const *envp)
{
    char *buf = NULL;
    const char *nvml = NULL, *xml = NULL;
    size_t xml_len = 0;
    int rc = ddp_topo_cache_read(envp, key, &buf, &nvml, &xml, &xml_len);
    if (rc == 0 && (rc = ddp_nvml_static_parse(nvml, &topo->nvml)) == 0) {
        /* the machine we run on: binding and the process's own CPU set apply to it */
        if (hwloc_topology_set_xmlbuffer(topo->t, xml, (int)xml_len) < 0 ||
            hwloc_topology_set_flags(topo->t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM) < 0 ||
            hwloc_topology_load(topo->t) < 0) {
            ddp_nvml_free(&topo->nvml);
            rc = -ENOEXEC; /* hwloc refused it: topo->t must be made anew */
        }
    }
    free(buf);
    if (rc < 0 && rc != -ENOENT)
        ddp_debug("topology cache not used: %s", strerror(-rc));
    return rc;
}

/* After a discovery of the live machine: what it found, for the next launch. NVML facts are kept only when NVML
 * answered, was not read on purpose (a job without GPUs: the next GPU launch reads and caches them), or there is
 * no NVIDIA GPU for it to answer about (a failed read is tried again next time). */
static void to_cache(const struct ddp_topo *topo, const char *key, char *const *envp)
{
    bool nvidia = false;
    for (size_t i = 0; i < topo->ngpus; i++)
        nvidia |= topo->gpus[i].vendor == 0x10de;
    if (nvidia && !topo->nvml.found && !topo->nvml_skipped)
        return;
    char *xml = NULL;
    int len = 0;
    if (hwloc_topology_export_xmlbuffer(topo->t, &xml, &len, 0) < 0 || !xml || len <= 0)
        return;
    char *nvml = ddp_nvml_static_json(&topo->nvml);
    int rc = ddp_topo_cache_write(envp, key, nvml, xml, (size_t)len);
    if (rc < 0)
        ddp_debug("topology cache not written: %s", strerror(-rc));
    free(nvml);
    hwloc_free_xmlbuffer(topo->t, xml);
}

/* NVML for the live machine (or, with xml_nvml, the tests' fake one): everything for the full report (refresh);
 * nothing at all for a job without GPUs (no_nvml: the cache's facts or none, the library never loaded); else the
 * facts that do not change from the cache, or read now when a discovery found NVIDIA GPUs or the cache lacks
 * them (an XML topology reads them as a discovery would have cached them). Then, when the caller needs the live
 * state, only the memory and compute processes of the NVIDIA GPUs (ddp_nvml_read_memory): no NVLinks, no
 * health. Every read has NVML's deadline (ddp_nvml_deadline_ms): one that passes leaves NVML not found, late. */
static void load_nvml(struct ddp_topo *topo, const struct ddp_topo_opts *o)
{
    const char **busids = ddp_xcalloc(topo->ngpus + 1, sizeof *busids);
    size_t n = 0;
    for (size_t i = 0; i < topo->ngpus; i++)
        if (topo->gpus[i].vendor == 0x10de)
            busids[n++] = topo->gpus[i].busid;
    if (o->refresh) {
        ddp_nvml_free(&topo->nvml);
        ddp_nvml_read_deadline(&topo->nvml, DDP_NVML_STATIC | DDP_NVML_MEMORY | DDP_NVML_HEALTH);
        n = 0;
    } else if (o->no_nvml) {
        if (!topo->cached) {
            ddp_nvml_free(&topo->nvml);
            snprintf(topo->nvml.status, sizeof topo->nvml.status, "NVML: not read (no GPU used)");
            topo->nvml_skipped = n > 0;
        }
        n = 0;
    } else if (!topo->cached || (n && !topo->nvml.found)) {
        bool discovery = !topo->from_xml, recache = topo->cached;
        ddp_nvml_free(&topo->nvml);
        if (n)
            ddp_nvml_read_deadline(&topo->nvml, DDP_NVML_STATIC | (discovery && o->gpu_usage ? DDP_NVML_MEMORY : 0));
        else
            snprintf(topo->nvml.status, sizeof topo->nvml.status, "NVML: not read (no NVIDIA GPU)");
        topo->recache = recache && topo->nvml.found;
        if (discovery)
            n = 0; /* read above */
    }
    if (n && o->gpu_usage && topo->nvml.found && o->holders_first && (!topo->from_xml || o->proc_root)) {
        topo->unheld = ddp_holders_none(o->proc_root ? o->proc_root : "/proc", (int)getpid(), topo->holders_why,
                                        sizeof topo->holders_why);
        ddp_debug("GPU holders: %s%s", topo->holders_why, topo->unheld ? ", NVML not read" : ": reading NVML");
    }
    if (n && o->gpu_usage && topo->nvml.found && !topo->unheld)
        ddp_nvml_read_memory_deadline(&topo->nvml, busids, n);
    free(busids);
}

int ddp_topo_load_opts(const struct ddp_topo_opts *o, struct ddp_topo **out, struct ddp_err *err)
{
    const char *xml_path = o->xml_path;
    struct ddp_topo *topo;
    unsigned api = hwloc_get_api_version();
    char *key = NULL;
    int rc, cache_lock = -1;

    *out = NULL;
    if ((api >> 16) != (HWLOC_API_VERSION >> 16))
        return ddp_errf(err, -ENOTSUP, "hwloc: the library is version %u.%u but ddplaunch was built for %u.x",
                        api >> 16, (api >> 8) & 0xff, HWLOC_API_VERSION >> 16);
    topo = ddp_xcalloc(1, sizeof *topo);
    if ((rc = init_hwloc(&topo->t, xml_path != NULL)) < 0) {
        free(topo);
        return ddp_errf(err, rc, "hwloc_topology_init: %s", strerror(-rc));
    }
    topo->from_xml = xml_path != NULL;
    topo->source = ddp_xstrdup(xml_path ? xml_path : "live machine");
    if (xml_path) {
        if (hwloc_topology_set_xml(topo->t, xml_path) < 0) {
            rc = errno ? -errno : -EINVAL;
            free_partial(topo);
            return ddp_errf(err, rc, "%s: cannot read this hwloc XML topology: %s", xml_path, strerror(-rc));
        }
    } else if (o->envp && (key = ddp_topo_cache_key(o->envp)) != NULL && !o->refresh) {
        rc = from_cache(topo, key, o->envp);
        if (rc == -ENOENT || rc == -ESTALE) { /* a miss: the first to lock discovers, the others read its file */
            cache_lock = ddp_topo_cache_lock(o->envp);
            if (cache_lock >= 0 || ddp_topo_cache_wait(o->envp, DISCOVERY_WAIT_MS) == 0)
                rc = from_cache(topo, key, o->envp);
        }
        topo->cached = rc == 0;
        if (rc == -ENOEXEC) { /* a topology that failed to load from XML cannot be loaded again: start anew */
            hwloc_topology_destroy(topo->t);
            if ((rc = init_hwloc(&topo->t, false)) < 0) {
                free(topo->source);
                free(topo);
                free(key);
                if (cache_lock >= 0)
                    close(cache_lock);
                return ddp_errf(err, rc, "hwloc_topology_init: %s", strerror(-rc));
            }
        }
    }
    if (topo->cached && cache_lock >= 0) {
        close(cache_lock);
        cache_lock = -1;
    }
    if (!topo->cached && hwloc_topology_load(topo->t) < 0) {
        rc = errno ? -errno : -EINVAL;
        free_partial(topo);
        free(key);
        if (cache_lock >= 0)
            close(cache_lock);
        return ddp_errf(err, rc, "%s: hwloc could not load the topology: %s", xml_path ? xml_path : "live machine",
                        strerror(-rc));
    }
    /* What we may use: the allowed cpuset (cgroup, Slurm cpuset); on the live machine also our own CPU
     * affinity (taskset, an outer numactl). An XML topology describes another machine: take it whole. */
    topo->allowed = ddp_topo_bitmap();
    hwloc_bitmap_copy(topo->allowed, hwloc_topology_get_allowed_cpuset(topo->t));
    if (hwloc_bitmap_iszero(topo->allowed))
        hwloc_bitmap_copy(topo->allowed, hwloc_topology_get_topology_cpuset(topo->t));
    if (!xml_path) {
        hwloc_bitmap_t mine = ddp_topo_bitmap();

        /* the calling thread's, which the workers forked from it inherit (the whole process's would read
         * /proc/self/task twice) */
        if (hwloc_get_cpubind(topo->t, mine, HWLOC_CPUBIND_THREAD) == 0 && hwloc_bitmap_intersects(mine, topo->allowed))
            hwloc_bitmap_and(topo->allowed, topo->allowed, mine);
        hwloc_bitmap_free(mine);
    }
    load_nodes(topo);
    load_distances(topo);
    load_gpus(topo);
    if (!xml_path || o->xml_nvml)
        load_nvml(topo, o);
    else
        snprintf(topo->nvml.status, sizeof topo->nvml.status, "NVML: not used (XML topology)");
    apply_nvml(topo);
    load_links(topo);
    build_sel(topo);
    if (key && (!topo->cached || topo->recache))
        to_cache(topo, key, o->envp);
    if (cache_lock >= 0)
        close(cache_lock);
    free(key);
    *out = topo;
    return 0;
}

int ddp_topo_load(const char *xml_path, struct ddp_topo **out, struct ddp_err *err)
{
    struct ddp_topo_opts o = {.xml_path = xml_path, .refresh = true, .gpu_usage = true};
    return ddp_topo_load_opts(&o, out, err);
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
    return ddp_topo_list(topo->allowed);
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
    out->nvml = ddp_nvml_find(&topo->nvml, g->busid);
    out->unheld = topo->unheld && g->vendor == 0x10de;
    return 0;
}

const char *ddp_topo_holders_why(const struct ddp_topo *topo)
{
    return topo->holders_why;
}

const struct ddp_nvml *ddp_topo_nvml(const struct ddp_topo *topo)
{
    return &topo->nvml;
}

bool ddp_topo_cached(const struct ddp_topo *topo)
{
    return topo->cached;
}

bool ddp_topo_from_xml(const struct ddp_topo *topo)
{
    return topo->from_xml;
}
