/* place: GPUs and CPU/memory bindings for the ranks of one attempt (place.h). */
#include "topo/place.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topo/select.h"
#include "topo/topo_internal.h"

/* The cpuset of the j-th of R equal shares of `set`, in units of `type` objects (cores, L3 caches); PUs when
 * the topology has no such objects, single CPUs when it has no PUs either (a stripped XML). With one_unit,
 * rank j gets only unit j (core-complex: one L3 per rank, as torch does), shared when there are fewer. */
static hwloc_bitmap_t share_of(const struct ddp_topo *topo, hwloc_obj_type_t type, hwloc_const_bitmap_t set, int j,
                               int R, bool one_unit)
{
    hwloc_bitmap_t res = ddp_topo_bitmap();
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
        u = ddp_topo_bitmap();
        hwloc_bitmap_and(u, o->cpuset, set);
        units[C++] = u;
    }
    if (C == 0) { /* no objects at all: one CPU per unit */
        unsigned cpu;

        hwloc_bitmap_foreach_begin(cpu, set)
        {
            units[C] = ddp_topo_bitmap();
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

        cpus = ddp_topo_bitmap();
        if (pkg && pkg->cpuset) {
            hwloc_bitmap_and(cpus, pkg->cpuset, topo->allowed);
            mems = ddp_topo_list(pkg->nodeset);
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
        cpus = ddp_topo_bitmap();
        hwloc_bitmap_copy(cpus, node->cpus);
    }
    if (hwloc_bitmap_iszero(cpus)) {
        char *allowed = ddp_topo_list(topo->allowed);

        ddp_buf_printf(notes, "; rank %d: NUMA node %d has none of the CPUs this process may use (%s): not bound", rank,
                       node->os_index, allowed);
        free(allowed);
        free(mems);
        hwloc_bitmap_free(cpus);
        return;
    }
    r->cpus = ddp_topo_list(cpus);
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
        .busy = req->busy,
        .inherited_cvd = req->inherited_cvd,
        .sched_gpus = req->sched_gpus,
        .holders = req->holders,
    };
}

int ddp_place_count_usable(const struct ddp_topo *topo, const struct ddp_place_req *req)
{
    struct ddp_sel_topo st;
    struct ddp_sel_req sr;

    ddp_topo_sel(topo, &st);
    sel_req(req, 0, &sr);
    return ddp_select_usable(&st, &sr, NULL, NULL, NULL, NULL);
}

int ddp_place_count_gpus(const struct ddp_topo *topo, const struct ddp_place_req *req)
{
    struct ddp_place_req all = *req;

    if (!req->share)
        return req->nproc;
    all.holders = NULL; /* GPUs other jobs hold are waited for, not shared */
    int usable = ddp_place_count_usable(topo, &all);
    return usable > 0 && usable < req->nproc ? usable : req->nproc;
}

/* After "only K of the N GPUs here are usable": the setting that would start the ranks on those K. */
static void share_hint(const struct ddp_topo *topo, const struct ddp_place_req *req, struct ddp_err *err)
{
    struct ddp_place_req all = *req;
    size_t len = strlen(err->msg);

    all.holders = NULL;
    all.share = true;
    if (req->share || ddp_place_count_gpus(topo, &all) >= req->nproc)
        return;
    snprintf(err->msg + len, sizeof err->msg - len,
             "; to start %d workers on fewer GPUs, sharing them as torchrun does: --share-gpus ([gpus] share = yes)",
             req->nproc);
}

/* The reason line of a placement without GPUs: "4 CPU workers on NUMA nodes 0,1, no GPUs". Caller owns. */
static char *cpu_reason(const struct ddp_topo *topo, const int *node, int n, const int *eligible, int K)
{
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
    return b.data;
}

/* Rank i's GPU (gpu[i], -1 none): its bus id, UUID and CUDA_VISIBLE_DEVICES, from the names cvdname gives the
 * ngpus picked GPUs. */
static void rank_gpu(const struct ddp_topo *topo, const struct ddp_place_req *req, const int *gpu, int ngpus,
                     char *const *cvdname, int i, struct ddp_place_rank *r)
{
    r->gpu = gpu[i];
    if (gpu[i] >= 0) {
        const struct topo_gpu *g = &topo->gpus[gpu[i]];

        r->busid = ddp_xstrdup(g->busid);
        r->uuid = g->uuid[0] ? ddp_xstrdup(g->uuid) : NULL;
        if (req->visible != DDP_VISIBLE_PER_JOB) {
            r->cvd = ddp_xstrdup(cvdname[gpu[i]]);
        } else {
            struct ddp_buf b = {0};

            for (int k = 0; k < ngpus; k++) /* each picked GPU once */
                ddp_buf_printf(&b, "%s%s", k ? "," : "", cvdname[gpu[k]]);
            r->cvd = b.data;
        }
    } else if (topo->ngpus > 0 || (req->inherited_cvd && *req->inherited_cvd)) {
        r->cvd = ddp_xstrdup(""); /* CPU workers on a GPU machine: no GPU by accident */
    }
}

int ddp_place_ranks(const struct ddp_topo *topo, const struct ddp_place_req *req, struct ddp_placement *out,
                    struct ddp_err *err)
{
    int n = req->nproc, ngpus = n, rc = 0, *gpu, *node, *eligible, K = 0, R_u = 0, j = 0;
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

        ddp_topo_sel(topo, &st);
        sel_req(req, n, &sr);
        sr.n = ngpus = ddp_place_count_gpus(topo, req);
        cvdname = ddp_xcalloc(topo->ngpus + 1, sizeof *cvdname);
        rc = ddp_select_choose(&st, &sr, gpu, &reason, cvdname, err);
        if (rc == -ENODEV && err)
            share_hint(topo, req, err);
        if (rc < 0)
            goto out;
        if (ngpus < n) { /* sharing: round-robin over the picked GPUs */
            char *shared = ddp_xasprintf("%s; %d workers share %s, round-robin ([gpus] share)", reason, n,
                                         ngpus > 1 ? "them" : "it");

            for (int i = ngpus; i < n; i++)
                gpu[i] = gpu[i % ngpus];
            free(reason);
            reason = shared;
        }
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

        r->numa_node = node[i] >= 0 ? topo->nodes[node[i]].os_index : -1;
        rank_gpu(topo, req, gpu, ngpus, cvdname, i, r);
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
    if (!req->want_gpus)
        reason = cpu_reason(topo, node, n, eligible, K);
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

void ddp_place_free(struct ddp_placement *p)
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
