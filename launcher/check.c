/* check: doctor's checks, each a pure function of the facts passed in (check.h). */
#include "check.h"

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

#include "exit.h"
#include "nccl.h"

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
        char *todo = g->nusable > 0 ? ddp_xasprintf("use nproc_per_node = %d, or free or add GPUs", g->nusable)
                                    : ddp_xstrdup("check [gpus] select/exclude, CUDA_VISIBLE_DEVICES and "
                                                  "Slurm's GPUs ('ddplaunch topo' lists them)");

        ddp_check_add(r, DDP_CHECK_FAIL, "gpus", todo, "%zu GPU%s visible, %d usable, %d wanted: %s", g->nall,
                      g->nall == 1 ? "" : "s", g->nusable, g->nproc, g->error ? g->error : "no GPU picked");
        free(todo);
        return;
    }
    char *ids = busids_of(g, g->picked, g->npicked);

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
        bool full = pct >= 80.0;
        bool busy = full || (x->mem_used >= 0 && (x->mem_used >= (long long)GIB || pct >= 10.0)) || x->util >= 10;

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

/* ---- master port ---- */

/* The header and the LISTEN (0A) lines of a /proc/net/tcp text: a busy host has thousands of connections, and
 * the auto range asks about hundreds of ports. Caller frees. */
static char *listen_lines(const char *text)
{
    struct ddp_buf b = {0};
    bool header = true;

    for (const char *l = text; l && *l;) {
        size_t len = strcspn(l, "\n");
        char st[4] = "";

        if (header || (sscanf(l, "%*s %*s %*s %3s", st) == 1 && strcmp(st, "0A") == 0)) {
            ddp_buf_add(&b, l, len);
            ddp_buf_puts(&b, "\n");
        }
        header = false;
        l += len + (l[len] == '\n');
    }
    ddp_buf_puts(&b, "");
    return b.data;
}

static int listeners_on(const char *tcp, const char *tcp6, int port, struct ddp_port_listener *first)
{
    int n = 0;
    struct ddp_port_listener ls[1];

    if (tcp) {
        int k = ddp_port_parse_listeners(tcp, false, port, ls, 1);

        if (k > 0 && first && n == 0)
            *first = ls[0];
        n += k > 0 ? k : 0;
    }
    if (tcp6) {
        int k = ddp_port_parse_listeners(tcp6, true, port, ls, 1);

        if (k > 0 && first && n == 0)
            *first = ls[0];
        n += k > 0 ? k : 0;
    }
    return n;
}

void ddp_check_port(struct ddp_check_report *r, const struct ddp_check_port *p)
{
    const char *host = p->master_addr && *p->master_addr ? p->master_addr : "localhost";
    char *tcp = NULL, *tcp6 = NULL;

    if (p->node_rank != 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "master-port", NULL,
                      "node_rank %d: the master port is opened on node 0 (%s); run doctor there", p->node_rank, host);
        return;
    }
    tcp = p->tcp ? listen_lines(p->tcp) : NULL;
    tcp6 = p->tcp6 ? listen_lines(p->tcp6) : NULL;
    if (p->spec.is_auto) {
        int lo = p->spec.lo, hi = p->spec.hi, nfree = 0, first = 0;

        if (lo == 0 && hi == 0)
            ddp_port_default_range(p->ephemeral, &lo, &hi);
        for (int port = lo; port <= hi; port++)
            if (listeners_on(tcp, tcp6, port, NULL) == 0 && nfree++ == 0)
                first = port;
        if (nfree == 0)
            ddp_check_add(r, DDP_CHECK_FAIL, "master-port", "widen it: master_port = auto:LO-HI",
                          "auto: every port in %d-%d is in use", lo, hi);
        else if (ddp_port_range_overlaps_ephemeral(p->ephemeral, lo, hi))
            ddp_check_add(r, DDP_CHECK_WARN, "master-port",
                          "use a range below the kernel's ephemeral ports (/proc/sys/net/ipv4/ip_local_port_range)",
                          "auto: %d of %d ports in %d-%d free (first %d), but the range overlaps the ephemeral "
                          "range %.*s: an outgoing connection can take the port before the workers bind it",
                          nfree, hi - lo + 1, lo, hi, first, (int)strcspn(p->ephemeral, "\n"), p->ephemeral);
        else
            ddp_check_add(r, DDP_CHECK_OK, "master-port", NULL,
                          "auto: %d of %d ports in %d-%d free now (first %d); reserved host-wide at start", nfree,
                          hi - lo + 1, lo, hi, first);
        goto out;
    }

    int port = p->spec.port;
    struct ddp_port_listener first = {0};
    int nl = listeners_on(tcp, tcp6, port, &first);

    if (nl > 0 || p->probe_rc == -EADDRINUSE) {
        const struct ddp_port_holder *h = p->holder;
        char who[512];

        if (h && h->pid > 0)
            snprintf(who, sizeof who, "pid %d (%s, user %s%s%.80s)", (int)h->pid, h->comm, h->user,
                     h->cmdline[0] ? ": " : "", h->cmdline);
        else if (h && h->user[0])
            snprintf(who, sizeof who, "a process of %s not visible to this user", h->user);
        else if (nl > 0)
            snprintf(who, sizeof who, "a process not visible here (uid %u, listening on %s)", first.uid, first.addr);
        else
            snprintf(who, sizeof who, "a socket that holds it without listening");
        ddp_check_add(r, DDP_CHECK_FAIL, "master-port", "use master_port = auto", "%d is in use by %s", port, who);
    } else if (p->lock_holder) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-port", "use master_port = auto",
                      "%d is reserved by another process: %s", port, p->lock_holder);
    } else if (p->probe_rc < 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-port",
                      port < 1024 ? "use a port above 1023, or master_port = auto" : "use master_port = auto",
                      "%d cannot be bound: %s", port, strerror(-p->probe_rc));
    } else if (ddp_port_range_overlaps_ephemeral(p->ephemeral, port, port)) {
        ddp_check_add(r, DDP_CHECK_WARN, "master-port", "use master_port = auto",
                      "%d is free now, but in the kernel's ephemeral range %.*s: an outgoing connection can take it "
                      "before the workers bind it",
                      port, (int)strcspn(p->ephemeral, "\n"), p->ephemeral);
    } else {
        ddp_check_add(r, DDP_CHECK_OK, "master-port", NULL, "%d is free", port);
    }
out:
    free(tcp);
    free(tcp6);
}

/* ---- master address and interfaces ---- */

void ddp_check_addr(struct ddp_check_report *r, const struct ddp_check_addr *a)
{
    if (!a->addr || !*a->addr) {
        ddp_check_add(r, DDP_CHECK_SKIP, "master-addr", NULL, "no master_addr set");
        return;
    }
    if (a->gai_rc != 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-addr", "fix master_addr (or DNS, /etc/hosts)",
                      "%s does not resolve: %s", a->addr, a->gai_error ? a->gai_error : "unknown error");
        return;
    }
    if (a->loopback && a->nnodes > 1) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-addr", "set master_addr to node 0's host name or address",
                      "%s is a loopback address (%s), but nnodes = %d: the other nodes cannot reach it", a->addr,
                      a->resolved ? a->resolved : "?", a->nnodes);
        return;
    }
    if (a->route_errno != 0) {
        char *todo = ddp_xasprintf("check the network: ip route get %s", a->resolved ? a->resolved : a->addr);

        ddp_check_add(r, DDP_CHECK_FAIL, "master-addr", todo, "%s (%s) cannot be reached from here: %s", a->addr,
                      a->resolved ? a->resolved : "?", strerror(a->route_errno));
        free(todo);
        return;
    }
    if (a->resolved && strcmp(a->addr, a->resolved) != 0)
        ddp_check_add(r, DDP_CHECK_OK, "master-addr", NULL, "%s resolves to %s, reached through %s (source %s)",
                      a->addr, a->resolved, a->ifname ? a->ifname : "?", a->src_ip ? a->src_ip : "?");
    else
        ddp_check_add(r, DDP_CHECK_OK, "master-addr", NULL, "%s reached through %s (source %s)", a->addr,
                      a->ifname ? a->ifname : "?", a->src_ip ? a->src_ip : "?");
}

/* One entry of an NCCL interface list, without a ":port" suffix, in buf. */
static const char *next_entry(const char *s, char *buf, size_t len)
{
    size_t n = strcspn(s, ",");
    size_t k = strcspn(s, ":,");

    if (k > n)
        k = n;
    snprintf(buf, len, "%.*s", (int)k, s);
    return s[n] == ',' ? s + n + 1 : s + n;
}

bool ddp_check_ifname_match(const char *spec, const char *ifname)
{
    bool neg = false, exact = false, hit = false;
    char entry[IF_NAMESIZE + 16];

    if (!spec)
        return true;
    if (*spec == '^')
        neg = true, spec++;
    if (*spec == '=')
        exact = true, spec++;
    while (*spec) {
        spec = next_entry(spec, entry, sizeof entry);
        if (!*entry)
            continue;
        if (exact ? strcmp(ifname, entry) == 0 : strncmp(ifname, entry, strlen(entry)) == 0)
            hit = true;
    }
    return hit != neg;
}

static char *join(const char *const *v, size_t n)
{
    struct ddp_buf b = {0};

    for (size_t i = 0; i < n; i++)
        ddp_buf_printf(&b, "%s%s", i ? ", " : "", v[i]);
    ddp_buf_puts(&b, "");
    return b.data;
}

void ddp_check_ifname(struct ddp_check_report *r, const char *var, const char *value, bool gloo,
                      const char *const *ifnames, size_t nifs, const char *route_if)
{
    const char *check = gloo ? "gloo-ifname" : "nccl-ifname";
    char *all = join(ifnames, nifs);
    struct ddp_buf sel = {0}, missing = {0};
    char entry[IF_NAMESIZE + 16];
    size_t nsel = 0;
    bool route_ok = !route_if;

    if (!value || !*value) {
        ddp_check_add(r, DDP_CHECK_OK, check, NULL, "%s unset: %s", var,
                      gloo ? "gloo uses the interface of this host's name"
                           : "NCCL picks ib* first, then any interface but lo and docker*");
        free(all);
        return;
    }
    if (gloo) {
        for (const char *s = value; *s;) {
            bool found = false;

            s = next_entry(s, entry, sizeof entry);
            for (size_t i = 0; i < nifs && !found; i++)
                found = strcmp(ifnames[i], entry) == 0;
            if (!found)
                ddp_buf_printf(&missing, "%s%s", missing.len ? ", " : "", entry);
            else
                ddp_buf_printf(&sel, "%s%s", nsel++ ? ", " : "", entry);
            route_ok |= found && route_if && strcmp(entry, route_if) == 0;
        }
    } else {
        bool neg = value[0] == '^', exact = value[neg] == '=';

        for (size_t i = 0; i < nifs; i++)
            if (ddp_check_ifname_match(value, ifnames[i])) {
                ddp_buf_printf(&sel, "%s%s", nsel++ ? ", " : "", ifnames[i]);
                route_ok |= route_if && strcmp(ifnames[i], route_if) == 0;
            }
        for (const char *s = value + neg + exact; *s && !neg;) {
            bool found = false;

            s = next_entry(s, entry, sizeof entry);
            for (size_t i = 0; i < nifs && !found && *entry; i++)
                found = exact ? strcmp(ifnames[i], entry) == 0 : strncmp(ifnames[i], entry, strlen(entry)) == 0;
            if (!found && *entry)
                ddp_buf_printf(&missing, "%s%s", missing.len ? ", " : "", entry);
        }
    }
    if (nsel == 0) {
        char *todo = ddp_xasprintf("set %s to one of the interfaces here, or unset it", var);

        ddp_check_add(r, DDP_CHECK_FAIL, check, todo, "%s=%s matches no interface here (%s): %s", var, value, all,
                      gloo ? "gloo fails to start" : "NCCL fails at init (no socket interface found)");
        free(todo);
    } else if (missing.len) {
        ddp_check_add(r, DDP_CHECK_WARN, check, "remove the names that do not exist",
                      "%s=%s: %s match%s no interface here (interfaces: %s); selected: %s", var, value, missing.data,
                      strchr(missing.data, ',') ? "" : "es", all, sel.data);
    } else if (!route_ok) {
        char *todo = ddp_xasprintf("add %s to %s", route_if, var);

        ddp_check_add(r, DDP_CHECK_WARN, check, todo, "%s=%s selects %s, but master_addr is reached through %s", var,
                      value, sel.data, route_if);
        free(todo);
    } else {
        ddp_check_add(r, DDP_CHECK_OK, check, NULL, "%s=%s selects %s", var, value, sel.data);
    }
    ddp_buf_free(&sel);
    ddp_buf_free(&missing);
    free(all);
}

/* ---- NCCL / torch variables ---- */

static bool nccl_var(const char *e)
{
    return strncmp(e, "NCCL_", 5) == 0 || strncmp(e, "TORCH_NCCL_", 11) == 0 || strncmp(e, "TORCH_FR_", 9) == 0 ||
           strncmp(e, "TORCH_DISTRIBUTED_DEBUG=", 24) == 0 || strncmp(e, "TORCH_CPP_LOG_LEVEL=", 20) == 0;
}

void ddp_check_nccl_env(struct ddp_check_report *r, const struct ddp_kvlist *nccl, char *const *envp)
{
    struct ddp_strv warnings = {0};
    struct ddp_err err = {0};
    size_t nvars = nccl ? nccl->n : 0;
    int rc = ddp_nccl_validate(nccl, envp, &warnings, &err);

    for (char *const *e = envp; e && *e; e++)
        if (nccl_var(*e)) {
            size_t len = strcspn(*e, "=");
            char name[128];

            snprintf(name, sizeof name, "%.*s", (int)len, *e);
            nvars += !(nccl && ddp_kvlist_get(nccl, name));
        }
    if (rc < 0)
        ddp_check_add(r, DDP_CHECK_FAIL, "nccl-env", "fix or remove it (nothing would start)", "%s", err.msg);
    for (size_t i = 0; i < warnings.n; i++)
        ddp_check_add(r, DDP_CHECK_WARN, "nccl-env", NULL, "%s", warnings.v[i]);
    if (rc == 0 && warnings.n == 0 && nvars == 0)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-env", NULL, "no NCCL/torch variable set");
    else if (rc == 0 && warnings.n == 0)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-env", NULL, "%zu NCCL/torch variable%s valid", nvars,
                      nvars == 1 ? "" : "s");
    ddp_strv_clear(&warnings);
}

/* ---- driver and devices ---- */

void ddp_check_driver(struct ddp_check_report *r, const struct ddp_check_driver *d)
{
    char cuda[64];

    if (d->xml || d->n_nvidia == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "driver", NULL, "%s",
                      d->xml ? "XML topology (another machine): this machine's driver is not checked"
                             : "no NVIDIA GPU in the topology");
        return;
    }
    if (d->cuda_version >= 0)
        snprintf(cuda, sizeof cuda, "CUDA driver API %d.%d", d->cuda_version / 1000, d->cuda_version % 1000 / 10);
    if (!d->nvml_found && d->cuda_version < 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "driver",
                      "install the NVIDIA driver; in a container, run it with the NVIDIA container toolkit "
                      "(--gpus all)",
                      "%zu NVIDIA GPU%s, but no driver library: %s; libcuda.so.1: %s", d->n_nvidia,
                      d->n_nvidia == 1 ? "" : "s", d->nvml_status ? d->nvml_status : "NVML not found",
                      d->cuda_error ? d->cuda_error : "not found");
    } else if (d->cuda_version < 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "driver",
                      "the driver's CUDA library is missing (container without the NVIDIA toolkit's libraries?)",
                      "driver %s, but libcuda.so.1 does not load: %s", d->driver ? d->driver : "?",
                      d->cuda_error ? d->cuda_error : "?");
    } else if (!d->nvml_found) {
        ddp_check_add(r, DDP_CHECK_WARN, "driver", "install libnvidia-ml.so.1 (part of the driver)",
                      "%s, but NVML does not load (%s): no memory-in-use or NVLink facts", cuda,
                      d->nvml_status ? d->nvml_status : "?");
    } else {
        ddp_check_add(r, DDP_CHECK_OK, "driver", NULL, "NVIDIA driver %s, %s", d->driver ? d->driver : "?", cuda);
    }
}

void ddp_check_devices(struct ddp_check_report *r, const struct ddp_check_driver *d)
{
    bool ctl = false, uvm = false;
    size_t ngpu = 0;
    char *all = join(d->devs, d->ndevs);

    if (d->xml || d->n_nvidia == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "devices", NULL, "%s",
                      d->xml ? "XML topology (another machine): /dev/nvidia* not checked"
                             : "no NVIDIA GPU in the topology");
        free(all);
        return;
    }
    for (size_t i = 0; i < d->ndevs; i++) {
        const char *n = d->devs[i];

        ctl |= strcmp(n, "nvidiactl") == 0;
        uvm |= strcmp(n, "nvidia-uvm") == 0;
        if (strncmp(n, "nvidia", 6) == 0 && n[6] >= '0' && n[6] <= '9')
            ngpu++;
    }
    if (!ctl || ngpu == 0)
        ddp_check_add(r, DDP_CHECK_FAIL, "devices",
                      "load the driver (nvidia-smi creates them); in a container pass the devices (--gpus all)",
                      "%s missing (found: %s)", !ctl ? "/dev/nvidiactl" : "/dev/nvidia0..N",
                      d->ndevs ? all : "no /dev/nvidia*");
    else if (!uvm)
        ddp_check_add(r, DDP_CHECK_WARN, "devices",
                      "CUDA creates it on first use through nvidia-modprobe; in a container pass /dev/nvidia-uvm",
                      "/dev/nvidia-uvm missing (found: %s)", all);
    else
        ddp_check_add(r, DDP_CHECK_OK, "devices", NULL,
                      "/dev/nvidiactl, /dev/nvidia-uvm and %zu of %zu "
                      "/dev/nvidiaN present",
                      ngpu, d->n_nvidia);
    free(all);
}

/* ---- libnccl ---- */

size_t ddp_check_ldcache_find(const char *data, size_t len, const char *name_prefix, struct ddp_strv *out)
{
    size_t added = 0, plen = strlen(name_prefix);

    for (size_t i = 0; i < len; i++) {
        if (data[i] != '/' || (i > 0 && data[i - 1] != '\0'))
            continue;
        const char *s = data + i, *end = memchr(s, '\0', len - i);

        if (!end)
            break;
        const char *base = strrchr(s, '/') + 1;
        bool dup = false;

        if (strncmp(base, name_prefix, plen) == 0) {
            for (size_t k = 0; k < out->n && !dup; k++)
                dup = strcmp(out->v[k], s) == 0;
            if (!dup) {
                ddp_strv_push(out, s);
                added++;
            }
        }
        i = (size_t)(end - data);
    }
    return added;
}

void ddp_check_nccl_lib(struct ddp_check_report *r, const struct ddp_check_nccl_lib *l)
{
    char torch[PATH_MAX + 64] = "";

    if (l->torch_dir)
        snprintf(torch, sizeof torch, "torch at %s is a %s build", l->torch_dir,
                 l->torch_cuda == 1   ? "CUDA"
                 : l->torch_cuda == 0 ? "CPU-only"
                                      : "?");
    if (l->xml || l->n_nvidia == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "nccl-lib", NULL, "%s%s%s",
                      l->xml ? "XML topology (another machine): libnccl not checked"
                             : "no NVIDIA GPU: NCCL not needed here",
                      torch[0] ? "; " : "", torch);
        return;
    }
    if (l->torch_dir && l->torch_cuda == 0) {
        ddp_check_add(r, DDP_CHECK_WARN, "nccl-lib", "install a CUDA build of torch for these GPUs",
                      "%s (no libtorch_cuda.so): it cannot use the GPUs or NCCL", torch);
        return;
    }
    if (l->nbundled)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-lib", NULL, "%s (torch's pip dependency)%s%s", l->bundled[0],
                      torch[0] ? "; " : "", torch);
    else if (l->nsystem)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-lib", NULL, "%s%s%s", l->system[0], torch[0] ? "; " : "", torch);
    else
        ddp_check_add(r, DDP_CHECK_WARN, "nccl-lib",
                      "check with: python3 -c 'import torch; print(torch.cuda.nccl.version())'",
                      "libnccl.so not found in ld.so.cache, LD_LIBRARY_PATH or site-packages/nvidia/nccl/lib "
                      "(torch may carry it linked in)%s%s",
                      torch[0] ? "; " : "", torch);
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
