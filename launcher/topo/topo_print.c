/* topo_print: `ddplaunch topo` (topo_print.h). */
#include "topo/topo_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/exit.h"
#include "topo/place.h"
#include "topo/topo_internal.h"

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

static void req_from_spec(const struct ddp_spec *spec, char *const *envp, const char *sched_gpus,
                          struct ddp_place_req *req)
{
    *req = (struct ddp_place_req){
        .policy = DDP_POLICY_SAME_NUMA,
        .visible = DDP_VISIBLE_PER_JOB,
        .bind = DDP_BIND_NODE,
        .mem = DDP_MEM_LOCAL,
        .inherited_cvd = ddp_env_get(envp, "CUDA_VISIBLE_DEVICES"),
        .sched_gpus = sched_gpus,
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

/* The nvidia-smi style link matrix with CPU and NUMA affinity, and its legend. */
static void print_matrix(const struct ddp_topo *topo, FILE *f)
{
    size_t n = topo->ngpus, aff_w = 14;

    for (size_t i = 0; i < n; i++) {
        char *c = ddp_topo_list(topo->gpus[i].cpus);

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
        char h[32], *c = ddp_topo_list(topo->gpus[a].cpus), *numa = gpu_numa_label(topo, &topo->gpus[a]);

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
}

/* One line per GPU: bus id, PCI ids, NUMA node, model, UUID, memory, holder. */
static void print_gpus(const struct ddp_topo *topo, const struct ddp_place_req *base, FILE *f)
{
    size_t n = topo->ngpus;

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

/* What placement would pick for 1, 2, 4 and 8 workers under base. */
static void print_picks(const struct ddp_topo *topo, const struct ddp_place_req *base, FILE *f)
{
    static const int picks[] = {1, 2, 4, 8};

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
        if (ddp_place_ranks(topo, &req, &pl, &err) < 0) {
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
        ddp_place_free(&pl);
    }
}

static void print_text(const struct ddp_topo *topo, const struct ddp_place_req *base, FILE *f)
{
    size_t n = topo->ngpus;
    char *allowed = ddp_topo_list(topo->allowed);

    fprintf(f, "Topology: %s (hwloc %s)\n", topo->source, HWLOC_VERSION);
    if (n == 0) {
        fprintf(f, "No GPUs found (no NVIDIA or AMD PCI display device in the topology): CPU workers only.\n");
    } else {
        print_matrix(topo, f);
        print_gpus(topo, base, f);
    }
    fprintf(f, "\nNUMA nodes (CPUs this process may use: %s):\n", allowed);
    for (size_t k = 0; k < topo->nnodes; k++) {
        const struct topo_node *nd = &topo->nodes[k];
        char *c = ddp_topo_list(nd->cpus);
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
    print_picks(topo, base, f);
    free(allowed);
}

/* The picks array of `topo --json`: what placement would pick for 1, 2, 4 and 8 workers under base. */
static void json_picks(const struct ddp_topo *topo, const struct ddp_place_req *base, struct ddp_buf *out)
{
    static const int picks[] = {1, 2, 4, 8};
    struct ddp_buf b = *out;

    for (size_t p = 0; p < sizeof picks / sizeof picks[0]; p++) {
        struct ddp_place_req req = *base;
        struct ddp_placement pl;
        struct ddp_err err = {0};

        req.nproc = picks[p];
        req.want_gpus = base->want_gpus;
        ddp_buf_printf(&b, "%s{\"nproc\":%d,", p ? "," : "", picks[p]);
        if (ddp_place_ranks(topo, &req, &pl, &err) < 0) {
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
        ddp_place_free(&pl);
    }
    *out = b;
}

static void print_json(const struct ddp_topo *topo, const struct ddp_place_req *base, FILE *f)
{
    struct ddp_buf b = {0};
    size_t n = topo->ngpus;
    char *allowed = ddp_topo_list(topo->allowed);

    ddp_buf_puts(&b, "{\"source\":");
    ddp_buf_json_str(&b, topo->source);
    ddp_buf_printf(&b, ",\"from_xml\":%s,\"hwloc_version\":\"%s\",\"allowed_cpus\":", topo->from_xml ? "true" : "false",
                   HWLOC_VERSION);
    ddp_buf_json_str(&b, allowed);
    ddp_buf_printf(&b, ",\"ncpus\":%d,\"nvml\":{\"found\":%s,\"status\":", ddp_topo_ncpus(topo),
                   topo->nvml.found ? "true" : "false");
    ddp_buf_json_str(&b, topo->nvml.status);
    ddp_buf_puts(&b, ",\"driver\":");
    ddp_buf_json_str(&b, topo->nvml.found ? topo->nvml.driver : NULL);
    ddp_buf_puts(&b, "},\"numa_nodes\":[");
    for (size_t k = 0; k < topo->nnodes; k++) {
        const struct topo_node *nd = &topo->nodes[k];
        char *c = ddp_topo_list(nd->cpus);
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
        char *c = ddp_topo_list(g->cpus);

        ddp_buf_printf(&b,
                       "%s{\"index\":%zu,\"busid\":\"%s\",\"vendor\":\"%04x\",\"device\":\"%04x\",\"class\":\"%04x\","
                       "\"model\":",
                       i ? "," : "", i, g->busid, g->vendor, g->device, g->class_id);
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
    ddp_buf_printf(&b, ",\"policy\":\"%s\",\"binding\":\"%s\",\"memory\":\"%s\",\"picks\":[", policy_name(base->policy),
                   bind_name(base->bind), mem_name(base->mem));
    json_picks(topo, base, &b);
    ddp_buf_puts(&b, "]}\n");
    fputs(b.data, f);
    ddp_buf_free(&b);
    free(allowed);
}

int ddp_topo_print(const struct ddp_topo *topo, const struct ddp_spec *spec, char *const *envp, const char *sched_gpus,
                   const char *const *holders, bool json, FILE *out)
{
    struct ddp_place_req req;

    req_from_spec(spec, envp, sched_gpus, &req);
    req.holders = holders;
    req.want_gpus = picks_want_gpus(topo, spec, &req);
    if (json)
        print_json(topo, &req, out);
    else
        print_text(topo, &req, out);
    return fflush(out) == 0 && !ferror(out) ? DDP_EXIT_OK : DDP_EXIT_LAUNCHER;
}
