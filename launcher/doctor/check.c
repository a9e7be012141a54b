/* check: doctor's checks, each a pure function of the facts passed in (check.h): the report, GPUs, leases, CPUs,
 * open files. The network checks are in check_net.c, the driver and library checks in check_host.c. */
#include "doctor/check.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "base/exit.h"
#include "spec/nccl.h"
#include "topo/fitness.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* ---- report ---- */

const char *ddp_check_status_name(enum ddp_check_status s)
{
    static const char *const n[] = {"ok", "skip", "warn", "fail"};

    return (unsigned)s < 4 ? n[s] : "?";
}

void ddp_check_add(struct ddp_check_report *r, enum ddp_check_status st, const char *check, const char *todo,
                   const char *fmt, ...)
{
    struct ddp_check_result *res;
    va_list ap;
    char *found = NULL;

    va_start(ap, fmt);
    if (vasprintf(&found, fmt, ap) < 0)
        abort();
    va_end(ap);
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        r->v = ddp_xrealloc(r->v, r->cap * sizeof *r->v);
    }
    res = &r->v[r->n++];
    memset(res, 0, sizeof *res);
    res->status = st;
    snprintf(res->check, sizeof res->check, "%s", check);
    res->found = found;
    res->todo = todo ? ddp_xstrdup(todo) : NULL;
}

void ddp_check_report_free(struct ddp_check_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].found);
        free(r->v[i].todo);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

static enum ddp_check_status worst(const struct ddp_check_report *r)
{
    enum ddp_check_status w = DDP_CHECK_OK;

    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].status > w)
            w = r->v[i].status;
    return w;
}

int ddp_check_exit_status(const struct ddp_check_report *r)
{
    enum ddp_check_status w = worst(r);

    return w == DDP_CHECK_FAIL ? DDP_EXIT_DOCTOR_FAIL : w == DDP_CHECK_WARN ? DDP_EXIT_DOCTOR_WARN : DDP_EXIT_OK;
}

void ddp_check_print(const struct ddp_check_report *r, bool json, FILE *out)
{
    struct ddp_buf b = {0};

    if (!json) {
        for (size_t i = 0; i < r->n; i++) {
            const struct ddp_check_result *x = &r->v[i];

            ddp_buf_printf(&b, "%-5s %-11s %s%s%s\n", ddp_check_status_name(x->status), x->check, x->found,
                           x->todo ? "; " : "", x->todo ? x->todo : "");
        }
    } else {
        size_t count[4] = {0};

        for (size_t i = 0; i < r->n; i++)
            count[r->v[i].status]++;
        ddp_buf_printf(&b,
                       "{\"status\":\"%s\",\"exit_status\":%d,\"counts\":{\"ok\":%zu,\"skip\":%zu,\"warn\":%zu,"
                       "\"fail\":%zu},\"checks\":[",
                       ddp_check_status_name(worst(r)), ddp_check_exit_status(r), count[0], count[1], count[2],
                       count[3]);
        for (size_t i = 0; i < r->n; i++) {
            const struct ddp_check_result *x = &r->v[i];

            ddp_buf_puts(&b, i ? ",{\"check\":" : "{\"check\":");
            ddp_buf_json_str(&b, x->check);
            ddp_buf_printf(&b, ",\"status\":\"%s\",\"found\":", ddp_check_status_name(x->status));
            ddp_buf_json_str(&b, x->found);
            ddp_buf_puts(&b, ",\"todo\":");
            ddp_buf_json_str(&b, x->todo);
            ddp_buf_puts(&b, "}");
        }
        ddp_buf_puts(&b, "]}\n");
    }
    if (b.data)
        fputs(b.data, out);
    ddp_buf_free(&b);
}

/* ---- small pure helpers ---- */

/* A CPU/node list "0-3,8" as a bit array; returns the count, -1 when malformed. *bits (may be NULL) gets a
 * calloc'd array of *nbits bytes (0/1). */
static int list_parse(const char *s, unsigned char **bits, int *nbits)
{
    unsigned char *set = NULL;
    int cap = 0, count = 0;

    if (bits)
        *bits = NULL;
    if (nbits)
        *nbits = 0;
    if (!s)
        return -EINVAL;
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;

        if (end == s || lo < 0 || lo > 1 << 20)
            goto bad;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo || hi > 1 << 20)
                goto bad;
            s = end;
        }
        if (hi >= cap) {
            int ncap = (int)hi + 64;

            set = ddp_xrealloc(set, (size_t)ncap);
            memset(set + cap, 0, (size_t)(ncap - cap));
            cap = ncap;
        }
        for (long i = lo; i <= hi; i++)
            if (!set[i])
                set[i] = 1, count++;
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            goto bad;
    }
    if (bits)
        *bits = set;
    else
        free(set);
    if (nbits)
        *nbits = cap;
    return count;
bad:
    free(set);
    return -EINVAL;
}

int ddp_check_list_count(const char *list)
{
    return list_parse(list, NULL, NULL);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* Distinct values >= 0 of vals[0..n) into a sorted "0,1" string and count. Caller frees *s. */
static int distinct(const int *vals, size_t n, char **s)
{
    int *v = ddp_xcalloc(n + 1, sizeof *v), k = 0;
    struct ddp_buf b = {0};

    for (size_t i = 0; i < n; i++) {
        bool seen = vals[i] < 0;

        for (int j = 0; j < k && !seen; j++)
            seen = v[j] == vals[i];
        if (!seen)
            v[k++] = vals[i];
    }
    qsort(v, (size_t)k, sizeof *v, cmp_int);
    for (int j = 0; j < k; j++)
        ddp_buf_printf(&b, j ? ",%d" : "%d", v[j]);
    ddp_buf_puts(&b, "");
    *s = b.data;
    free(v);
    return k;
}

static char *busids_of(const struct ddp_check_gpus *g, const int *idx, size_t n)
{
    struct ddp_buf b = {0};

    for (size_t i = 0; i < n; i++)
        if (idx[i] >= 0 && (size_t)idx[i] < g->nall)
            ddp_buf_printf(&b, "%s%s", b.len ? "," : "", g->all[idx[i]].busid);
    ddp_buf_puts(&b, "");
    return b.data;
}

/* ---- GPUs ---- */

void ddp_check_gpus(struct ddp_check_report *r, const struct ddp_check_gpus *g)
{
    if (!g->have_topo) {
        ddp_check_add(r, DDP_CHECK_WARN, "gpus", "run 'ddplaunch topo' to see why (hwloc)",
                      "topology unavailable: no GPU can be picked and workers would run unbound");
        return;
    }
    if (!g->want_gpus) {
        if (g->nall == 0)
            ddp_check_add(r, DDP_CHECK_OK, "gpus", NULL, "no GPUs visible; %d CPU worker%s", g->nproc,
                          g->nproc == 1 ? "" : "s");
        else
            ddp_check_add(r, DDP_CHECK_OK, "gpus", NULL,
                          "%zu GPU%s visible, none used: %d CPU worker%s (nproc_per_node = cpu or [gpus] select = "
                          "none)",
                          g->nall, g->nall == 1 ? "" : "s", g->nproc, g->nproc == 1 ? "" : "s");
        return;
    }
    if (!g->picked || g->error) {
        char *todo = g->nusable > 0 && !g->share
                         ? ddp_xasprintf("use nproc_per_node = %d, or --share-gpus ([gpus] share = yes), or free "
                                         "or add GPUs",
                                         g->nusable)
                     : g->nusable > 0 ? ddp_xstrdup("free or add GPUs")
                                      : ddp_xstrdup("check [gpus] select/exclude, CUDA_VISIBLE_DEVICES and "
                                                    "Slurm's GPUs ('ddplaunch topo' lists them)");

        ddp_check_add(r, DDP_CHECK_FAIL, "gpus", todo, "%zu GPU%s visible, %d usable, %d wanted: %s", g->nall,
                      g->nall == 1 ? "" : "s", g->nusable, g->nproc, g->error ? g->error : "no GPU picked");
        free(todo);
        return;
    }
    char *ids = busids_of(g, g->picked, g->npicked);

    if (g->unfit)
        ddp_check_add(r, DDP_CHECK_WARN, "gpus",
                      "have the GPU reset or serviced; until then a launch and a restart "
                      "leave it out",
                      "%zu GPU%s visible (%d usable; unfit: %s); would pick %s (%s)", g->nall, g->nall == 1 ? "" : "s",
                      g->nusable, g->unfit, ids, g->reason ? g->reason : "");
    else
        ddp_check_add(r, DDP_CHECK_OK, "gpus", NULL, "%zu GPU%s visible (%d usable); would pick %s (%s)", g->nall,
                      g->nall == 1 ? "" : "s", g->nusable, ids, g->reason ? g->reason : "");
    free(ids);
}

/* numa/package values of a set of GPUs. */
static void span_of(const struct ddp_check_gpus *g, const int *idx, size_t n, char **nodes, int *nnodes, char **pkgs,
                    int *npkgs, int *unknown)
{
    int *nv = ddp_xcalloc(n + 1, sizeof *nv), *pv = ddp_xcalloc(n + 1, sizeof *pv);

    *unknown = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ddp_check_gpu *x = &g->all[idx[i]];

        nv[i] = x->numa;
        pv[i] = x->numa >= 0 ? x->package : -1;
        *unknown += x->numa < 0;
    }
    *nnodes = distinct(nv, n, nodes);
    *npkgs = distinct(pv, n, pkgs);
    free(nv);
    free(pv);
}

void ddp_check_numa(struct ddp_check_report *r, const struct ddp_check_gpus *g)
{
    char *nodes, *pkgs;
    int nn, np, unknown;

    if (!g->have_topo || !g->want_gpus || !g->picked || g->npicked == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "numa", NULL, "no GPU picked");
        return;
    }
    span_of(g, g->picked, g->npicked, &nodes, &nn, &pkgs, &np, &unknown);
    if (nn == 0) {
        ddp_check_add(r, DDP_CHECK_OK, "numa", NULL,
                      "NUMA locality of the picked GPUs is unknown (firmware or VM gives none): treated as local "
                      "to every node");
    } else if (nn == 1) {
        ddp_check_add(r, DDP_CHECK_OK, "numa", NULL, "picked GPU%s NUMA node %s%s",
                      g->npicked == 1 ? " is on" : "s share", nodes, unknown ? " (some of unknown locality)" : "");
    } else {
        char *bnodes = NULL, *bpkgs = NULL, *span;
        int bn = 0, bp = 0, bunk = 0;

        span = np > 1 ? ddp_xasprintf("NUMA nodes %s, across sockets %s", nodes, pkgs)
                      : ddp_xasprintf("NUMA nodes %s", nodes);
        if (g->nvlink) {
            ddp_check_add(r, DDP_CHECK_OK, "numa", NULL,
                          "picked GPUs span %s, but every pair is joined by NVLink/XGMI: GPU traffic does not "
                          "cross the %s link",
                          span, np > 1 ? "socket" : "inter-node");
            free(span);
            goto out;
        }
        if (g->better && g->nbetter == g->npicked)
            span_of(g, g->better, g->nbetter, &bnodes, &bn, &bpkgs, &bp, &bunk);
        if (g->better && g->nbetter == g->npicked && bn < nn) {
            char *ids = busids_of(g, g->better, g->nbetter);
            char *todo = ddp_xasprintf("pick those: [gpus] select = %s (or drop select/exclude and keep policy = "
                                       "same-numa)",
                                       ids);

            ddp_check_add(r, DDP_CHECK_WARN, "numa", todo, "picked GPUs span %s; %s on NUMA node%s %s would not", span,
                          ids, bn > 1 ? "s" : "", bnodes);
            free(todo);
            free(ids);
        } else {
            /* most GPUs that share a node */
            int best = 0;

            for (size_t i = 0; i < g->nall; i++) {
                int c = 0;

                for (size_t j = 0; j < g->nall && g->all[i].numa >= 0; j++)
                    c += g->all[j].numa == g->all[i].numa;
                best = c > best ? c : best;
            }
            char *todo = best > 1 ? ddp_xasprintf("no better set here: at most %d GPUs share a NUMA node; "
                                                  "nproc_per_node = %d keeps traffic on one node",
                                                  best, best)
                                  : ddp_xstrdup("no better set here");
            ddp_check_add(r, DDP_CHECK_WARN, "numa", todo,
                          "picked GPUs span %s: their traffic crosses the %s link (slower all-reduce)", span,
                          np > 1 ? "socket" : "inter-node");
            free(todo);
        }
        free(bnodes);
        free(bpkgs);
        free(span);
    }
out:
    free(nodes);
    free(pkgs);
}

void ddp_check_gpu_busy(struct ddp_check_report *r, const struct ddp_check_gpus *g)
{
    struct ddp_buf b = {0};
    enum ddp_check_status st = DDP_CHECK_OK;
    long long max_used = -1;
    int max_util = -1;
    bool any_nvidia = false;

    if (!g->have_topo || !g->want_gpus || !g->picked || g->npicked == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "gpu-busy", NULL, "no GPU picked");
        return;
    }
    for (size_t i = 0; i < g->npicked; i++)
        any_nvidia |= g->all[g->picked[i]].vendor == 0x10de;
    if (!g->nvml) {
        ddp_check_add(r, DDP_CHECK_SKIP, "gpu-busy", NULL, "memory in use unknown: %s",
                      !any_nvidia      ? "no NVIDIA GPU picked (NVML only)"
                      : g->nvml_status ? g->nvml_status
                                       : "NVML not available");
        return;
    }
    for (size_t i = 0; i < g->npicked; i++) {
        const struct ddp_check_gpu *x = &g->all[g->picked[i]];
        double pct = x->mem_total > 0 && x->mem_used >= 0 ? 100.0 * (double)x->mem_used / (double)x->mem_total : 0;
        enum ddp_fitness_load load = ddp_fitness_load(x->mem_used, x->mem_total, x->util); /* the judge's rule */
        bool full = load == DDP_FIT_LOAD_FULL;
        bool busy = load != DDP_FIT_LOAD_IDLE;

        if (x->mem_used > max_used)
            max_used = x->mem_used;
        if (x->util > max_util)
            max_util = x->util;
        if (!busy)
            continue;
        if (full)
            st = DDP_CHECK_FAIL;
        else if (st < DDP_CHECK_WARN)
            st = DDP_CHECK_WARN;
        ddp_buf_printf(&b, "%s%s: %.1f of %.1f GiB in use (%.0f%%)", b.len ? "; " : "", x->busid,
                       (double)x->mem_used / GIB, (double)x->mem_total / GIB, pct);
        if (x->util >= 0)
            ddp_buf_printf(&b, ", %d%% busy", x->util);
        ddp_buf_printf(&b, ", by %s", x->users[0] ? x->users : "processes not visible here");
    }
    if (st == DDP_CHECK_OK) {
        char util[32] = "";

        if (max_util >= 0)
            snprintf(util, sizeof util, ", %d%% busy", max_util);
        ddp_check_add(r, DDP_CHECK_OK, "gpu-busy", NULL, "picked GPU%s idle: at most %.0f MiB in use%s",
                      g->npicked == 1 ? " is" : "s are", max_used >= 0 ? (double)max_used / MIB : 0.0, util);
    } else {
        ddp_check_add(r, st, "gpu-busy",
                      st == DDP_CHECK_FAIL ? "the job would run out of GPU memory: stop those processes, or "
                                             "set [gpus] max_memory_used = 10% to skip busy GPUs"
                                           : "sharing a GPU slows both jobs and can exhaust its memory: set "
                                             "[gpus] max_memory_used = 10% to skip busy GPUs",
                      "%s", b.data);
    }
    ddp_buf_free(&b);
}

/* ---- leases ---- */

void ddp_check_leases(struct ddp_check_report *r, const struct ddp_lease_info *leases, size_t n, pid_t self,
                      int lease_rc)
{
    struct ddp_buf b = {0};
    size_t k = 0;

    if (lease_rc < 0) {
        ddp_check_add(r, DDP_CHECK_WARN, "leases", "see the state-dir check",
                      "cannot read the GPU leases of other ddplaunch jobs: %s", strerror(-lease_rc));
        return;
    }
    size_t foreign = 0;
    for (size_t i = 0; i < n; i++) {
        if (leases[i].pid == self)
            continue;
        /* a lock held by something that is no ddplaunch job (a bare bind, a squatter) blocks the GPU as well:
         * named as the kernel reports it, and a warning */
        foreign += !leases[i].ddplaunch;
        ddp_buf_printf(&b, "%s%s by %s '%s' (pid %d, user %s, command %s)", k++ ? "; " : "", leases[i].busid,
                       leases[i].ddplaunch ? "job" : "a process that is no ddplaunch job, job",
                       leases[i].job[0] ? leases[i].job : "?", (int)leases[i].pid,
                       leases[i].user[0] ? leases[i].user : "?", leases[i].comm[0] ? leases[i].comm : "?");
    }
    if (k == 0)
        ddp_check_add(r, DDP_CHECK_OK, "leases", NULL, "no GPU leased by another ddplaunch job on this host");
    else
        ddp_check_add(r, foreign ? DDP_CHECK_WARN : DDP_CHECK_OK, "leases",
                      foreign ? "ask its user, or root, to end it (CONTAINMENT in ddplaunch(1))" : NULL,
                      "%zu GPU%s leased, left out of the pick: %s", k, k == 1 ? "" : "s", b.data);
    ddp_buf_free(&b);
}

char *ddp_check_join(const char *const *v, size_t n)
{
    struct ddp_buf b = {0};

    for (size_t i = 0; i < n; i++)
        ddp_buf_printf(&b, "%s%s", i ? ", " : "", v[i]);
    ddp_buf_puts(&b, "");
    return b.data;
}

/* ---- CPUs and memory nodes ---- */

static const char *bind_name(enum ddp_bind b)
{
    static const char *const n[] = {"node", "socket", "exclusive", "core-complex", "none"};

    return (unsigned)b < 5 ? n[b] : "?";
}

/* Whether every member of list is in allowed (bits/nbits): 1 or 0, or -EINVAL when list is malformed. */
static int subset(const char *list, const unsigned char *bits, int nbits)
{
    unsigned char *s;
    int n, cnt = list_parse(list, &s, &n), ok = 1;

    if (cnt < 0)
        return cnt;
    for (int i = 0; i < n; i++)
        if (s[i] && (i >= nbits || !bits[i]))
            ok = 0;
    free(s);
    return ok;
}

void ddp_check_cpus(struct ddp_check_report *r, const struct ddp_check_cpus *c)
{
    unsigned char *cbits = NULL, *mbits = NULL;
    int ncb = 0, nmb = 0;
    int ncpus = list_parse(c->cpus_allowed, &cbits, &ncb);
    int nmems = c->mems_allowed ? list_parse(c->mems_allowed, &mbits, &nmb) : -1;
    struct ddp_buf b = {0};
    enum ddp_check_status st = DDP_CHECK_OK;
    const char *todo = NULL;

    if (ncpus <= 0) {
        ddp_check_add(r, DDP_CHECK_WARN, "cpus", NULL, "cannot tell which CPUs this process may use ('%s')",
                      c->cpus_allowed ? c->cpus_allowed : "");
        goto out;
    }
    for (size_t i = 0; i < c->nranks && c->rank_cpus; i++) {
        const char *rc = c->rank_cpus[i];

        if (!rc)
            continue;
        if (!*rc || list_parse(rc, NULL, NULL) <= 0) {
            ddp_buf_printf(&b, "%srank %zu gets no CPU", b.len ? "; " : "", i);
            st = DDP_CHECK_FAIL;
            todo = "allow more CPUs (cgroup / Slurm --cpus-per-task) or [numa] bind = none";
        } else if (subset(rc, cbits, ncb) == 0) {
            ddp_buf_printf(&b, "%srank %zu is bound to CPUs %s outside the allowed %s", b.len ? "; " : "", i, rc,
                           c->cpus_allowed);
            st = DDP_CHECK_FAIL;
            todo = "the binding cannot be applied: [numa] bind = none, or allow those CPUs";
        }
        if (c->bind == DDP_BIND_EXCLUSIVE)
            for (size_t j = i + 1; j < c->nranks; j++) {
                const char *o = c->rank_cpus[j];
                unsigned char *ob;
                int on;

                if (!o || list_parse(o, &ob, &on) <= 0)
                    continue;
                unsigned char *rb;
                int rn;
                bool overlap = false;

                if (list_parse(rc, &rb, &rn) > 0) {
                    for (int k = 0; k < rn && k < on; k++)
                        overlap |= rb[k] && ob[k];
                    free(rb);
                }
                free(ob);
                if (overlap) {
                    ddp_buf_printf(&b, "%sexclusive binding, but ranks %zu and %zu share CPUs", b.len ? "; " : "", i,
                                   j);
                    if (st < DDP_CHECK_WARN)
                        st = DDP_CHECK_WARN, todo = "more ranks than cores per node: use [numa] bind = node";
                }
            }
    }
    for (size_t i = 0; i < c->nranks && c->rank_mems && nmems > 0; i++)
        if (c->rank_mems[i] && *c->rank_mems[i] && subset(c->rank_mems[i], mbits, nmb) == 0) {
            ddp_buf_printf(&b, "%srank %zu binds memory to node %s, but only %s may be used", b.len ? "; " : "", i,
                           c->rank_mems[i], c->mems_allowed);
            if (st < DDP_CHECK_WARN)
                st = DDP_CHECK_WARN, todo = "[numa] memory = none, or allow those memory nodes";
        }
    if (st == DDP_CHECK_OK && c->nproc > ncpus) {
        ddp_buf_printf(&b, "%d workers share %d allowed CPU%s (%s)", c->nproc, ncpus, ncpus == 1 ? "" : "s",
                       c->cpus_allowed);
        st = DDP_CHECK_WARN;
        todo = "fewer workers, or more CPUs (cgroup / Slurm --cpus-per-task)";
    }
    if (st == DDP_CHECK_OK)
        ddp_check_add(r, DDP_CHECK_OK, "cpus", NULL, "%d CPU%s allowed (%s)%s%s; %d worker%s, bind = %s", ncpus,
                      ncpus == 1 ? "" : "s", c->cpus_allowed, nmems > 0 ? ", memory nodes " : "",
                      nmems > 0 ? c->mems_allowed : "", c->nproc, c->nproc == 1 ? "" : "s", bind_name(c->bind));
    else
        ddp_check_add(r, st, "cpus", todo, "%s", b.data);
out:
    ddp_buf_free(&b);
    free(cbits);
    free(mbits);
}

/* ---- open files ---- */

static void fmt_lim(char *buf, size_t len, unsigned long long v)
{
    if (v == (unsigned long long)RLIM_INFINITY)
        snprintf(buf, len, "unlimited");
    else
        snprintf(buf, len, "%llu", v);
}

void ddp_check_nofile(struct ddp_check_report *r, unsigned long long soft, unsigned long long hard, int nproc)
{
    unsigned long long need = ddp_nofile_need(nproc);
    char s[32], h[32], todo[256];

    fmt_lim(s, sizeof s, soft);
    fmt_lim(h, sizeof h, hard);
    if (soft >= hard && hard < DDP_CHECK_NOFILE_WANT)
        snprintf(todo, sizeof todo,
                 "the hard limit is %s too: raise it (limits.conf, systemd LimitNOFILE=, "
                 "docker --ulimit nofile=65536:65536)",
                 h);
    else
        snprintf(todo, sizeof todo, "raise it before starting: ulimit -n %llu", hard < 65536ULL ? hard : 65536ULL);
    if (soft < need)
        ddp_check_add(r, DDP_CHECK_FAIL, "nofile", todo,
                      "open files limit %s (hard %s) is below the %llu the launcher needs for %d workers", s, h, need,
                      nproc);
    else if (soft < DDP_CHECK_NOFILE_WANT)
        ddp_check_add(r, DDP_CHECK_WARN, "nofile", todo,
                      "open files limit %s (hard %s): workers inherit it, and torch DataLoader workers and NCCL "
                      "sockets often need more than %llu (\"Too many open files\")",
                      s, h, DDP_CHECK_NOFILE_WANT);
    else
        ddp_check_add(r, DDP_CHECK_OK, "nofile", NULL, "open files limit %s (hard %s); launcher needs %llu", s, h,
                      need);
}
