/* doctor: preflight checks. The checks (ddp_doctor_check_*) are pure functions of the facts passed in; the second
 * half of this file gathers those facts from the live machine (topology, NVML, libcuda, /proc, /dev, sockets). */
#include "doctor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl.h"
#include "rundir.h"
#include "topo.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* ---- report ---- */

const char *ddp_doctor_status_name(enum ddp_doctor_status s)
{
    static const char *const n[] = {"ok", "skip", "warn", "fail"};

    return (unsigned)s < 4 ? n[s] : "?";
}

void ddp_doctor_add(struct ddp_doctor_report *r, enum ddp_doctor_status st, const char *check, const char *todo,
                    const char *fmt, ...)
{
    struct ddp_doctor_result *res;
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

void ddp_doctor_report_free(struct ddp_doctor_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].found);
        free(r->v[i].todo);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

static enum ddp_doctor_status worst(const struct ddp_doctor_report *r)
{
    enum ddp_doctor_status w = DDP_DOCTOR_OK;

    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].status > w)
            w = r->v[i].status;
    return w;
}

int ddp_doctor_exit_status(const struct ddp_doctor_report *r)
{
    enum ddp_doctor_status w = worst(r);

    return w == DDP_DOCTOR_FAIL ? 2 : w == DDP_DOCTOR_WARN ? 1 : 0;
}

void ddp_doctor_print(const struct ddp_doctor_report *r, bool json, FILE *out)
{
    struct ddp_buf b = {0};

    if (!json) {
        for (size_t i = 0; i < r->n; i++) {
            const struct ddp_doctor_result *x = &r->v[i];

            ddp_buf_printf(&b, "%-5s %-11s %s%s%s\n", ddp_doctor_status_name(x->status), x->check, x->found,
                           x->todo ? "; " : "", x->todo ? x->todo : "");
        }
    } else {
        size_t count[4] = {0};

        for (size_t i = 0; i < r->n; i++)
            count[r->v[i].status]++;
        ddp_buf_printf(&b, "{\"status\":\"%s\",\"exit_status\":%d,\"counts\":{\"ok\":%zu,\"skip\":%zu,\"warn\":%zu,"
                           "\"fail\":%zu},\"checks\":[",
                       ddp_doctor_status_name(worst(r)), ddp_doctor_exit_status(r), count[0], count[1], count[2],
                       count[3]);
        for (size_t i = 0; i < r->n; i++) {
            const struct ddp_doctor_result *x = &r->v[i];

            ddp_buf_puts(&b, i ? ",{\"check\":" : "{\"check\":");
            ddp_buf_json_str(&b, x->check);
            ddp_buf_printf(&b, ",\"status\":\"%s\",\"found\":", ddp_doctor_status_name(x->status));
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
        return -1;
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
    return -1;
}

int ddp_doctor_list_count(const char *list)
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

static char *busids_of(const struct ddp_doctor_gpus *g, const int *idx, size_t n)
{
    struct ddp_buf b = {0};

    for (size_t i = 0; i < n; i++)
        if (idx[i] >= 0 && (size_t)idx[i] < g->nall)
            ddp_buf_printf(&b, "%s%s", b.len ? "," : "", g->all[idx[i]].busid);
    ddp_buf_puts(&b, "");
    return b.data;
}

/* ---- GPUs ---- */

void ddp_doctor_check_gpus(struct ddp_doctor_report *r, const struct ddp_doctor_gpus *g)
{
    if (!g->have_topo) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "gpus", "run 'ddplaunch topo' to see why (hwloc)",
                       "topology unavailable: no GPU can be picked and workers would run unbound");
        return;
    }
    if (!g->want_gpus) {
        if (g->nall == 0)
            ddp_doctor_add(r, DDP_DOCTOR_OK, "gpus", NULL, "no GPUs visible; %d CPU worker%s", g->nproc,
                           g->nproc == 1 ? "" : "s");
        else
            ddp_doctor_add(r, DDP_DOCTOR_OK, "gpus", NULL,
                           "%zu GPU%s visible, none used: %d CPU worker%s (nproc_per_node = cpu or [gpus] select = "
                           "none)",
                           g->nall, g->nall == 1 ? "" : "s", g->nproc, g->nproc == 1 ? "" : "s");
        return;
    }
    if (!g->picked || g->error) {
        char *todo = g->nusable > 0 ? ddp_xasprintf("use nproc_per_node = %d, or free or add GPUs", g->nusable)
                                    : ddp_xstrdup("check [gpus] select/exclude, CUDA_VISIBLE_DEVICES and "
                                                  "Slurm's GPUs ('ddplaunch topo' lists them)");

        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "gpus", todo, "%zu GPU%s visible, %d usable, %d wanted: %s", g->nall,
                       g->nall == 1 ? "" : "s", g->nusable, g->nproc, g->error ? g->error : "no GPU picked");
        free(todo);
        return;
    }
    char *ids = busids_of(g, g->picked, g->npicked);

    ddp_doctor_add(r, DDP_DOCTOR_OK, "gpus", NULL, "%zu GPU%s visible (%d usable); would pick %s (%s)", g->nall,
                   g->nall == 1 ? "" : "s", g->nusable, ids, g->reason ? g->reason : "");
    free(ids);
}

/* numa/package values of a set of GPUs. */
static void span_of(const struct ddp_doctor_gpus *g, const int *idx, size_t n, char **nodes, int *nnodes,
                    char **pkgs, int *npkgs, int *unknown)
{
    int *nv = ddp_xcalloc(n + 1, sizeof *nv), *pv = ddp_xcalloc(n + 1, sizeof *pv);

    *unknown = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ddp_doctor_gpu *x = &g->all[idx[i]];

        nv[i] = x->numa;
        pv[i] = x->numa >= 0 ? x->package : -1;
        *unknown += x->numa < 0;
    }
    *nnodes = distinct(nv, n, nodes);
    *npkgs = distinct(pv, n, pkgs);
    free(nv);
    free(pv);
}

void ddp_doctor_check_numa(struct ddp_doctor_report *r, const struct ddp_doctor_gpus *g)
{
    char *nodes, *pkgs;
    int nn, np, unknown;

    if (!g->have_topo || !g->want_gpus || !g->picked || g->npicked == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "numa", NULL, "no GPU picked");
        return;
    }
    span_of(g, g->picked, g->npicked, &nodes, &nn, &pkgs, &np, &unknown);
    if (nn == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_OK, "numa", NULL,
                       "NUMA locality of the picked GPUs is unknown (firmware or VM gives none): treated as local "
                       "to every node");
    } else if (nn == 1) {
        ddp_doctor_add(r, DDP_DOCTOR_OK, "numa", NULL, "picked GPU%s NUMA node %s%s",
                       g->npicked == 1 ? " is on" : "s share", nodes, unknown ? " (some of unknown locality)" : "");
    } else {
        char *bnodes = NULL, *bpkgs = NULL, *span;
        int bn = 0, bp = 0, bunk = 0;

        span = np > 1 ? ddp_xasprintf("NUMA nodes %s, across sockets %s", nodes, pkgs)
                      : ddp_xasprintf("NUMA nodes %s", nodes);
        if (g->nvlink) {
            ddp_doctor_add(r, DDP_DOCTOR_OK, "numa", NULL,
                           "picked GPUs span %s, but every pair is joined by NVLink/XGMI: GPU traffic does not "
                           "cross the %s link", span, np > 1 ? "socket" : "inter-node");
            free(span);
            goto out;
        }
        if (g->better && g->nbetter == g->npicked)
            span_of(g, g->better, g->nbetter, &bnodes, &bn, &bpkgs, &bp, &bunk);
        if (g->better && g->nbetter == g->npicked && bn < nn) {
            char *ids = busids_of(g, g->better, g->nbetter);
            char *todo = ddp_xasprintf("pick those: [gpus] select = %s (or drop select/exclude and keep policy = "
                                       "same-numa)", ids);

            ddp_doctor_add(r, DDP_DOCTOR_WARN, "numa", todo,
                           "picked GPUs span %s; %s on NUMA node%s %s would not", span, ids, bn > 1 ? "s" : "",
                           bnodes);
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
                                                  "nproc_per_node = %d keeps traffic on one node", best, best)
                                  : ddp_xstrdup("no better set here");
            ddp_doctor_add(r, DDP_DOCTOR_WARN, "numa", todo,
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

void ddp_doctor_check_gpu_busy(struct ddp_doctor_report *r, const struct ddp_doctor_gpus *g)
{
    struct ddp_buf b = {0};
    enum ddp_doctor_status st = DDP_DOCTOR_OK;
    long long max_used = -1;
    int max_util = -1;
    bool any_nvidia = false;

    if (!g->have_topo || !g->want_gpus || !g->picked || g->npicked == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "gpu-busy", NULL, "no GPU picked");
        return;
    }
    for (size_t i = 0; i < g->npicked; i++)
        any_nvidia |= g->all[g->picked[i]].vendor == 0x10de;
    if (!g->nvml) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "gpu-busy", NULL, "memory in use unknown: %s",
                       !any_nvidia ? "no NVIDIA GPU picked (NVML only)"
                       : g->nvml_status ? g->nvml_status : "NVML not available");
        return;
    }
    for (size_t i = 0; i < g->npicked; i++) {
        const struct ddp_doctor_gpu *x = &g->all[g->picked[i]];
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
            st = DDP_DOCTOR_FAIL;
        else if (st < DDP_DOCTOR_WARN)
            st = DDP_DOCTOR_WARN;
        ddp_buf_printf(&b, "%s%s: %.1f of %.1f GiB in use (%.0f%%)", b.len ? "; " : "", x->busid,
                       (double)x->mem_used / GIB, (double)x->mem_total / GIB, pct);
        if (x->util >= 0)
            ddp_buf_printf(&b, ", %d%% busy", x->util);
        ddp_buf_printf(&b, ", by %s", x->users[0] ? x->users : "processes not visible here");
    }
    if (st == DDP_DOCTOR_OK) {
        char util[32] = "";

        if (max_util >= 0)
            snprintf(util, sizeof util, ", %d%% busy", max_util);
        ddp_doctor_add(r, DDP_DOCTOR_OK, "gpu-busy", NULL, "picked GPU%s idle: at most %.0f MiB in use%s",
                       g->npicked == 1 ? " is" : "s are", max_used >= 0 ? (double)max_used / MIB : 0.0, util);
    } else {
        ddp_doctor_add(r, st, "gpu-busy",
                       st == DDP_DOCTOR_FAIL ? "the job would run out of GPU memory: stop those processes, or "
                                               "set [gpus] max_memory_used = 10% to skip busy GPUs"
                                             : "sharing a GPU slows both jobs and can exhaust its memory: set "
                                               "[gpus] max_memory_used = 10% to skip busy GPUs",
                       "%s", b.data);
    }
    ddp_buf_free(&b);
}

/* ---- leases ---- */

void ddp_doctor_check_leases(struct ddp_doctor_report *r, const struct ddp_lease_info *leases, size_t n,
                             pid_t self, int lease_rc)
{
    struct ddp_buf b = {0};
    size_t k = 0;

    if (lease_rc < 0) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "leases", "see the state-dir check",
                       "cannot read the GPU leases of other ddplaunch jobs: %s", strerror(-lease_rc));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (leases[i].pid == self)
            continue;
        ddp_buf_printf(&b, "%s%s by job '%s' (pid %d, user %s)", k++ ? "; " : "", leases[i].busid,
                       leases[i].job[0] ? leases[i].job : "?", (int)leases[i].pid,
                       leases[i].user[0] ? leases[i].user : "?");
    }
    if (k == 0)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "leases", NULL, "no GPU leased by another ddplaunch job on this host");
    else
        ddp_doctor_add(r, DDP_DOCTOR_OK, "leases", NULL, "%zu GPU%s leased, left out of the pick: %s", k,
                       k == 1 ? "" : "s", b.data);
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

void ddp_doctor_check_port(struct ddp_doctor_report *r, const struct ddp_doctor_port *p)
{
    const char *host = p->master_addr && *p->master_addr ? p->master_addr : "localhost";
    char *tcp = NULL, *tcp6 = NULL;

    if (p->node_rank != 0) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "master-port", NULL,
                       "node_rank %d: the master port is opened on node 0 (%s); run doctor there", p->node_rank,
                       host);
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
            ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-port", "widen it: master_port = auto:LO-HI",
                           "auto: every port in %d-%d is in use", lo, hi);
        else if (ddp_port_range_overlaps_ephemeral(p->ephemeral, lo, hi))
            ddp_doctor_add(r, DDP_DOCTOR_WARN, "master-port",
                           "use a range below the kernel's ephemeral ports (/proc/sys/net/ipv4/ip_local_port_range)",
                           "auto: %d of %d ports in %d-%d free (first %d), but the range overlaps the ephemeral "
                           "range %.*s: an outgoing connection can take the port before the workers bind it",
                           nfree, hi - lo + 1, lo, hi, first, (int)strcspn(p->ephemeral, "\n"), p->ephemeral);
        else
            ddp_doctor_add(r, DDP_DOCTOR_OK, "master-port", NULL,
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
            snprintf(who, sizeof who, "a process not visible here (uid %u, listening on %s)", first.uid,
                     first.addr);
        else
            snprintf(who, sizeof who, "a socket that holds it without listening");
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-port", "use master_port = auto", "%d is in use by %s", port, who);
    } else if (p->lock_holder) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-port", "use master_port = auto",
                       "%d is reserved by another ddplaunch job: %s", port, p->lock_holder);
    } else if (p->probe_rc < 0) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-port",
                       port < 1024 ? "use a port above 1023, or master_port = auto" : "use master_port = auto",
                       "%d cannot be bound: %s", port, strerror(-p->probe_rc));
    } else if (ddp_port_range_overlaps_ephemeral(p->ephemeral, port, port)) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "master-port", "use master_port = auto",
                       "%d is free now, but in the kernel's ephemeral range %.*s: an outgoing connection can take it "
                       "before the workers bind it",
                       port, (int)strcspn(p->ephemeral, "\n"), p->ephemeral);
    } else {
        ddp_doctor_add(r, DDP_DOCTOR_OK, "master-port", NULL, "%d is free", port);
    }
out:
    free(tcp);
    free(tcp6);
}

/* ---- master address and interfaces ---- */

void ddp_doctor_check_addr(struct ddp_doctor_report *r, const struct ddp_doctor_addr *a)
{
    if (!a->addr || !*a->addr) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "master-addr", NULL, "no master_addr set");
        return;
    }
    if (a->gai_rc != 0) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-addr", "fix master_addr (or DNS, /etc/hosts)",
                       "%s does not resolve: %s", a->addr, a->gai_error ? a->gai_error : "unknown error");
        return;
    }
    if (a->loopback && a->nnodes > 1) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-addr", "set master_addr to node 0's host name or address",
                       "%s is a loopback address (%s), but nnodes = %d: the other nodes cannot reach it", a->addr,
                       a->resolved ? a->resolved : "?", a->nnodes);
        return;
    }
    if (a->route_errno != 0) {
        char *todo = ddp_xasprintf("check the network: ip route get %s", a->resolved ? a->resolved : a->addr);

        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "master-addr", todo, "%s (%s) cannot be reached from here: %s", a->addr,
                       a->resolved ? a->resolved : "?", strerror(a->route_errno));
        free(todo);
        return;
    }
    if (a->resolved && strcmp(a->addr, a->resolved) != 0)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "master-addr", NULL, "%s resolves to %s, reached through %s (source %s)",
                       a->addr, a->resolved, a->ifname ? a->ifname : "?", a->src_ip ? a->src_ip : "?");
    else
        ddp_doctor_add(r, DDP_DOCTOR_OK, "master-addr", NULL, "%s reached through %s (source %s)", a->addr,
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

bool ddp_doctor_ifname_match(const char *spec, const char *ifname)
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

void ddp_doctor_check_ifname(struct ddp_doctor_report *r, const char *var, const char *value, bool gloo,
                             const char *const *ifnames, size_t nifs, const char *route_if)
{
    const char *check = gloo ? "gloo-ifname" : "nccl-ifname";
    char *all = join(ifnames, nifs);
    struct ddp_buf sel = {0}, missing = {0};
    char entry[IF_NAMESIZE + 16];
    size_t nsel = 0;
    bool route_ok = !route_if;

    if (!value || !*value) {
        ddp_doctor_add(r, DDP_DOCTOR_OK, check, NULL, "%s unset: %s", var,
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
            if (ddp_doctor_ifname_match(value, ifnames[i])) {
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

        ddp_doctor_add(r, DDP_DOCTOR_FAIL, check, todo, "%s=%s matches no interface here (%s): %s", var, value,
                       all, gloo ? "gloo fails to start" : "NCCL fails at init (no socket interface found)");
        free(todo);
    } else if (missing.len) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, check, "remove the names that do not exist",
                       "%s=%s: %s match%s no interface here (interfaces: %s); selected: %s", var, value,
                       missing.data, strchr(missing.data, ',') ? "" : "es", all, sel.data);
    } else if (!route_ok) {
        char *todo = ddp_xasprintf("add %s to %s", route_if, var);

        ddp_doctor_add(r, DDP_DOCTOR_WARN, check, todo,
                       "%s=%s selects %s, but master_addr is reached through %s", var, value, sel.data, route_if);
        free(todo);
    } else {
        ddp_doctor_add(r, DDP_DOCTOR_OK, check, NULL, "%s=%s selects %s", var, value, sel.data);
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

void ddp_doctor_check_nccl_env(struct ddp_doctor_report *r, const struct ddp_kvlist *nccl, char *const *envp)
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
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "nccl-env", "fix or remove it (nothing would start)", "%s", err.msg);
    for (size_t i = 0; i < warnings.n; i++)
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "nccl-env", NULL, "%s", warnings.v[i]);
    if (rc == 0 && warnings.n == 0 && nvars == 0)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "nccl-env", NULL, "no NCCL/torch variable set");
    else if (rc == 0 && warnings.n == 0)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "nccl-env", NULL, "%zu NCCL/torch variable%s valid", nvars,
                       nvars == 1 ? "" : "s");
    ddp_strv_clear(&warnings);
}

/* ---- driver and devices ---- */

void ddp_doctor_check_driver(struct ddp_doctor_report *r, const struct ddp_doctor_driver *d)
{
    char cuda[64];

    if (d->xml || d->n_nvidia == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "driver", NULL, "%s",
                       d->xml ? "XML topology (another machine): this machine's driver is not checked"
                              : "no NVIDIA GPU in the topology");
        return;
    }
    if (d->cuda_version >= 0)
        snprintf(cuda, sizeof cuda, "CUDA driver API %d.%d", d->cuda_version / 1000, d->cuda_version % 1000 / 10);
    if (!d->nvml_found && d->cuda_version < 0) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "driver",
                       "install the NVIDIA driver; in a container, run it with the NVIDIA container toolkit "
                       "(--gpus all)",
                       "%zu NVIDIA GPU%s, but no driver library: %s; libcuda.so.1: %s", d->n_nvidia,
                       d->n_nvidia == 1 ? "" : "s", d->nvml_status ? d->nvml_status : "NVML not found",
                       d->cuda_error ? d->cuda_error : "not found");
    } else if (d->cuda_version < 0) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "driver",
                       "the driver's CUDA library is missing (container without the NVIDIA toolkit's libraries?)",
                       "driver %s, but libcuda.so.1 does not load: %s", d->driver ? d->driver : "?",
                       d->cuda_error ? d->cuda_error : "?");
    } else if (!d->nvml_found) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "driver", "install libnvidia-ml.so.1 (part of the driver)",
                       "%s, but NVML does not load (%s): no memory-in-use or NVLink facts", cuda,
                       d->nvml_status ? d->nvml_status : "?");
    } else {
        ddp_doctor_add(r, DDP_DOCTOR_OK, "driver", NULL, "NVIDIA driver %s, %s", d->driver ? d->driver : "?", cuda);
    }
}

void ddp_doctor_check_devices(struct ddp_doctor_report *r, const struct ddp_doctor_driver *d)
{
    bool ctl = false, uvm = false;
    size_t ngpu = 0;
    char *all = join(d->devs, d->ndevs);

    if (d->xml || d->n_nvidia == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "devices", NULL, "%s",
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
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "devices",
                       "load the driver (nvidia-smi creates them); in a container pass the devices (--gpus all)",
                       "%s missing (found: %s)", !ctl ? "/dev/nvidiactl" : "/dev/nvidia0..N",
                       d->ndevs ? all : "no /dev/nvidia*");
    else if (!uvm)
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "devices",
                       "CUDA creates it on first use through nvidia-modprobe; in a container pass /dev/nvidia-uvm",
                       "/dev/nvidia-uvm missing (found: %s)", all);
    else
        ddp_doctor_add(r, DDP_DOCTOR_OK, "devices", NULL, "/dev/nvidiactl, /dev/nvidia-uvm and %zu of %zu "
                       "/dev/nvidiaN present", ngpu, d->n_nvidia);
    free(all);
}

/* ---- libnccl ---- */

size_t ddp_doctor_ldcache_find(const char *data, size_t len, const char *name_prefix, struct ddp_strv *out)
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

void ddp_doctor_check_nccl_lib(struct ddp_doctor_report *r, const struct ddp_doctor_nccl_lib *l)
{
    char torch[PATH_MAX + 64] = "";

    if (l->torch_dir)
        snprintf(torch, sizeof torch, "torch at %s is a %s build", l->torch_dir,
                 l->torch_cuda == 1 ? "CUDA" : l->torch_cuda == 0 ? "CPU-only" : "?");
    if (l->xml || l->n_nvidia == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_SKIP, "nccl-lib", NULL, "%s%s%s",
                       l->xml ? "XML topology (another machine): libnccl not checked"
                              : "no NVIDIA GPU: NCCL not needed here",
                       torch[0] ? "; " : "", torch);
        return;
    }
    if (l->torch_dir && l->torch_cuda == 0) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "nccl-lib", "install a CUDA build of torch for these GPUs",
                       "%s (no libtorch_cuda.so): it cannot use the GPUs or NCCL", torch);
        return;
    }
    if (l->nbundled)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "nccl-lib", NULL, "%s (torch's pip dependency)%s%s", l->bundled[0],
                       torch[0] ? "; " : "", torch);
    else if (l->nsystem)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "nccl-lib", NULL, "%s%s%s", l->system[0], torch[0] ? "; " : "", torch);
    else
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "nccl-lib",
                       "check with: python3 -c 'import torch; print(torch.cuda.nccl.version())'",
                       "libnccl.so not found in ld.so.cache, LD_LIBRARY_PATH or site-packages/nvidia/nccl/lib "
                       "(torch may carry it linked in)%s%s", torch[0] ? "; " : "", torch);
}

/* ---- CPUs and memory nodes ---- */

static const char *bind_name(enum ddp_bind b)
{
    static const char *const n[] = {"node", "socket", "exclusive", "core-complex", "none"};

    return (unsigned)b < 5 ? n[b] : "?";
}

/* Whether every member of list is in allowed (bits/nbits). -1 malformed. */
static int subset(const char *list, const unsigned char *bits, int nbits)
{
    unsigned char *s;
    int n, cnt = list_parse(list, &s, &n), ok = 1;

    if (cnt < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s[i] && (i >= nbits || !bits[i]))
            ok = 0;
    free(s);
    return ok;
}

void ddp_doctor_check_cpus(struct ddp_doctor_report *r, const struct ddp_doctor_cpus *c)
{
    unsigned char *cbits = NULL, *mbits = NULL;
    int ncb = 0, nmb = 0;
    int ncpus = list_parse(c->cpus_allowed, &cbits, &ncb);
    int nmems = c->mems_allowed ? list_parse(c->mems_allowed, &mbits, &nmb) : -1;
    struct ddp_buf b = {0};
    enum ddp_doctor_status st = DDP_DOCTOR_OK;
    const char *todo = NULL;

    if (ncpus <= 0) {
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "cpus", NULL, "cannot tell which CPUs this process may use ('%s')",
                       c->cpus_allowed ? c->cpus_allowed : "");
        goto out;
    }
    for (size_t i = 0; i < c->nranks && c->rank_cpus; i++) {
        const char *rc = c->rank_cpus[i];

        if (!rc)
            continue;
        if (!*rc || list_parse(rc, NULL, NULL) <= 0) {
            ddp_buf_printf(&b, "%srank %zu gets no CPU", b.len ? "; " : "", i);
            st = DDP_DOCTOR_FAIL;
            todo = "allow more CPUs (cgroup / Slurm --cpus-per-task) or [numa] bind = none";
        } else if (subset(rc, cbits, ncb) == 0) {
            ddp_buf_printf(&b, "%srank %zu is bound to CPUs %s outside the allowed %s", b.len ? "; " : "", i, rc,
                           c->cpus_allowed);
            st = DDP_DOCTOR_FAIL;
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
                    if (st < DDP_DOCTOR_WARN)
                        st = DDP_DOCTOR_WARN, todo = "more ranks than cores per node: use [numa] bind = node";
                }
            }
    }
    for (size_t i = 0; i < c->nranks && c->rank_mems && nmems > 0; i++)
        if (c->rank_mems[i] && *c->rank_mems[i] && subset(c->rank_mems[i], mbits, nmb) == 0) {
            ddp_buf_printf(&b, "%srank %zu binds memory to node %s, but only %s may be used", b.len ? "; " : "", i,
                           c->rank_mems[i], c->mems_allowed);
            if (st < DDP_DOCTOR_WARN)
                st = DDP_DOCTOR_WARN, todo = "[numa] memory = none, or allow those memory nodes";
        }
    if (st == DDP_DOCTOR_OK && c->nproc > ncpus) {
        ddp_buf_printf(&b, "%d workers share %d allowed CPU%s (%s)", c->nproc, ncpus, ncpus == 1 ? "" : "s",
                       c->cpus_allowed);
        st = DDP_DOCTOR_WARN;
        todo = "fewer workers, or more CPUs (cgroup / Slurm --cpus-per-task)";
    }
    if (st == DDP_DOCTOR_OK)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "cpus", NULL, "%d CPU%s allowed (%s)%s%s; %d worker%s, bind = %s", ncpus,
                       ncpus == 1 ? "" : "s", c->cpus_allowed, nmems > 0 ? ", memory nodes " : "",
                       nmems > 0 ? c->mems_allowed : "", c->nproc, c->nproc == 1 ? "" : "s", bind_name(c->bind));
    else
        ddp_doctor_add(r, st, "cpus", todo, "%s", b.data);
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

void ddp_doctor_check_nofile(struct ddp_doctor_report *r, unsigned long long soft, unsigned long long hard, int nproc)
{
    unsigned long long need = 32 + 6ULL * (unsigned long long)(nproc > 0 ? nproc : 1);
    char s[32], h[32], todo[256];

    fmt_lim(s, sizeof s, soft);
    fmt_lim(h, sizeof h, hard);
    if (soft >= hard && hard < DDP_DOCTOR_NOFILE_WANT)
        snprintf(todo, sizeof todo, "the hard limit is %s too: raise it (limits.conf, systemd LimitNOFILE=, "
                                    "docker --ulimit nofile=65536:65536)", h);
    else
        snprintf(todo, sizeof todo, "raise it before starting: ulimit -n %llu",
                 hard < 65536ULL ? hard : 65536ULL);
    if (soft < need)
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "nofile", todo,
                       "open files limit %s (hard %s) is below the %llu the launcher needs for %d workers", s, h,
                       need, nproc);
    else if (soft < DDP_DOCTOR_NOFILE_WANT)
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "nofile", todo,
                       "open files limit %s (hard %s): workers inherit it, and torch DataLoader workers and NCCL "
                       "sockets often need more than %llu (\"Too many open files\")", s, h,
                       DDP_DOCTOR_NOFILE_WANT);
    else
        ddp_doctor_add(r, DDP_DOCTOR_OK, "nofile", NULL, "open files limit %s (hard %s); launcher needs %llu", s, h,
                       need);
}

/* ---- state directories ---- */

void ddp_doctor_check_state_dirs(struct ddp_doctor_report *r, char *const *envp, uid_t uid)
{
    const char *lock = ddp_rundir_lock_dir(envp);
    char *priv = ddp_rundir_private_path(envp, uid);
    struct ddp_err err = {0};
    int fd = -1, rc;

    rc = ddp_rundir_open_shared(lock, &fd, &err);
    if (rc < 0) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "state-dir",
                       "fix its owner/mode (root or you, 1777), or point DDPLAUNCH_LOCK_DIR elsewhere", "%s",
                       err.msg);
        goto priv;
    }
    if (faccessat(fd, ".", W_OK, AT_EACCESS) != 0) {
        /* read-only: ddplaunch can still lock existing files read-only, but cannot create new ones */
        ddp_doctor_add(r, DDP_DOCTOR_WARN, "state-dir", "make it writable for every user (mode 1777)",
                       "lock directory %s is not writable by this user (%s): new ports and GPUs cannot be reserved",
                       lock, strerror(errno));
        rc = -1;
    }
    close(fd);
priv:
    fd = -1;
    if (ddp_rundir_make_private(priv, &fd, &err) < 0) {
        ddp_doctor_add(r, DDP_DOCTOR_FAIL, "state-dir", "fix it (mode 0700, owned by you) or set XDG_RUNTIME_DIR",
                       "%s", err.msg);
        rc = -1;
    } else {
        if (faccessat(fd, ".", W_OK, AT_EACCESS) != 0) {
            ddp_doctor_add(r, DDP_DOCTOR_FAIL, "state-dir", "fix its mode (0700)",
                           "private directory %s is not writable: %s", priv, strerror(errno));
            rc = -1;
        }
        close(fd);
    }
    if (rc == 0)
        ddp_doctor_add(r, DDP_DOCTOR_OK, "state-dir", NULL,
                       "lock directory %s (shared, sticky) and private directory %s (0700) usable", lock, priv);
    free(priv);
}

/* ==== gathering live facts (effects) ==== */

/* A minimal JSON reader for the document `ddplaunch topo --json` prints (ddp_topo_command), the public
 * description of the topology: GPUs with vendor, NUMA node and holder, NUMA nodes with their package. */
enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
struct jv {
    enum jtype t;
    bool b;
    double num;
    char *str;
    struct jv *items; /* J_ARR, J_OBJ values */
    char **keys;      /* J_OBJ */
    size_t n;
};

static void jfree(struct jv *v)
{
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

static void jws(const char **p)
{
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')
        (*p)++;
}

static int jstring(const char **p, char **out)
{
    struct ddp_buf b = {0};
    const char *s = *p + 1;

    while (*s && *s != '"') {
        if (*s == '\\') {
            s++;
            char c = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s == 'r' ? '\r' : *s == 'b' ? '\b' : *s == 'f' ? '\f' : *s;

            if (*s == 'u') {
                unsigned u = 0;

                if (sscanf(s + 1, "%4x", &u) != 1)
                    goto bad;
                c = u < 0x80 ? (char)u : '?';
                s += 4;
            } else if (!*s) {
                goto bad;
            }
            ddp_buf_add(&b, &c, 1);
            s++;
        } else {
            ddp_buf_add(&b, s++, 1);
        }
    }
    if (*s != '"')
        goto bad;
    ddp_buf_puts(&b, "");
    *out = b.data;
    *p = s + 1;
    return 0;
bad:
    ddp_buf_free(&b);
    return -1;
}

static int jparse(const char **p, struct jv *v, int depth)
{
    memset(v, 0, sizeof *v);
    jws(p);
    if (depth > 32)
        return -1;
    if (**p == '{' || **p == '[') {
        bool obj = **p == '{';
        size_t cap = 0;

        v->t = obj ? J_OBJ : J_ARR;
        (*p)++;
        jws(p);
        if (**p == (obj ? '}' : ']')) {
            (*p)++;
            return 0;
        }
        for (;;) {
            char *key = NULL;

            jws(p);
            if (obj) {
                if (**p != '"' || jstring(p, &key) < 0)
                    return -1;
                jws(p);
                if (**p != ':') {
                    free(key);
                    return -1;
                }
                (*p)++;
            }
            if (v->n == cap) {
                cap = cap ? 2 * cap : 8;
                v->items = ddp_xrealloc(v->items, cap * sizeof *v->items);
                if (obj)
                    v->keys = ddp_xrealloc(v->keys, cap * sizeof *v->keys);
            }
            if (obj)
                v->keys[v->n] = key;
            if (jparse(p, &v->items[v->n], depth + 1) < 0) {
                jfree(&v->items[v->n]);
                free(key);
                return -1;
            }
            v->n++;
            jws(p);
            if (**p == ',') {
                (*p)++;
                continue;
            }
            if (**p == (obj ? '}' : ']')) {
                (*p)++;
                return 0;
            }
            return -1;
        }
    }
    if (**p == '"') {
        v->t = J_STR;
        return jstring(p, &v->str);
    }
    if (strncmp(*p, "true", 4) == 0 || strncmp(*p, "false", 5) == 0) {
        v->t = J_BOOL;
        v->b = **p == 't';
        *p += v->b ? 4 : 5;
        return 0;
    }
    if (strncmp(*p, "null", 4) == 0) {
        *p += 4;
        return 0;
    }
    char *end;

    v->t = J_NUM;
    v->num = strtod(*p, &end);
    if (end == *p)
        return -1;
    *p = end;
    return 0;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
    if (!o || o->t != J_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

static long long jnum(const struct jv *o, const char *key, long long dflt)
{
    const struct jv *v = jget(o, key);

    return v && v->t == J_NUM ? (long long)v->num : dflt;
}

static const char *jstr(const struct jv *o, const char *key)
{
    const struct jv *v = jget(o, key);

    return v && v->t == J_STR ? v->str : NULL;
}

/* Facts from the topology. */
struct topo_facts {
    struct ddp_doctor_gpu *gpus;
    size_t ngpus;
    size_t n_nvidia;
    bool from_xml;
    bool nvml_found;
    char nvml_status[256];
    char driver[80];
};

static void topo_facts_read(struct ddp_topo *topo, const struct ddp_spec *spec, char *const *envp,
                            const char *const *holders, struct topo_facts *tf)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct jv doc;
    const char *p;

    memset(tf, 0, sizeof *tf);
    if (!f)
        return;
    ddp_topo_command(topo, spec, envp, holders, true, f);
    fclose(f);
    p = text;
    if (!text || jparse(&p, &doc, 0) < 0) {
        jfree(&doc);
        free(text);
        return;
    }
    const struct jv *gpus = jget(&doc, "gpus"), *nodes = jget(&doc, "numa_nodes"), *nv = jget(&doc, "nvml");
    const struct jv *x = jget(&doc, "from_xml");

    tf->from_xml = x && x->t == J_BOOL && x->b;
    x = jget(nv, "found");
    tf->nvml_found = x && x->t == J_BOOL && x->b;
    snprintf(tf->nvml_status, sizeof tf->nvml_status, "%s", jstr(nv, "status") ? jstr(nv, "status") : "");
    snprintf(tf->driver, sizeof tf->driver, "%s", jstr(nv, "driver") ? jstr(nv, "driver") : "");
    if (gpus && gpus->t == J_ARR) {
        tf->gpus = ddp_xcalloc(gpus->n + 1, sizeof *tf->gpus);
        for (size_t i = 0; i < gpus->n; i++) {
            const struct jv *g = &gpus->items[i];
            struct ddp_doctor_gpu *d = &tf->gpus[tf->ngpus++];
            const char *vendor = jstr(g, "vendor");

            snprintf(d->busid, sizeof d->busid, "%s", jstr(g, "busid") ? jstr(g, "busid") : "?");
            d->vendor = vendor ? (unsigned)strtoul(vendor, NULL, 16) : 0;
            d->numa = (int)jnum(g, "numa_node", -1);
            d->package = -1;
            d->mem_used = jnum(g, "memory_used", -1);
            d->mem_total = jnum(g, "memory_total", -1);
            d->util = -1;
            snprintf(d->holder, sizeof d->holder, "%s", jstr(g, "holder") ? jstr(g, "holder") : "");
            tf->n_nvidia += d->vendor == 0x10de;
            for (size_t k = 0; nodes && nodes->t == J_ARR && k < nodes->n; k++)
                if (jnum(&nodes->items[k], "os_index", -2) == d->numa && d->numa >= 0)
                    d->package = (int)jnum(&nodes->items[k], "package", -1);
        }
    }
    jfree(&doc);
    free(text);
}

/* NVML, for utilisation and the processes using a GPU (nvml.h reads memory and links, not these). */
struct nvml_util { unsigned gpu, memory; };
struct nvml_mem { unsigned long long total, free, used; };
struct nvml_proc { unsigned pid; unsigned long long used; unsigned gi, ci; };

static bool nvml_extras(struct ddp_doctor_gpu *gpus, const int *picked, size_t npicked, char *status, size_t slen)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(void), (*shut)(void), (*by_bus)(const char *, void **), (*util)(void *, struct nvml_util *);
    int (*mem)(void *, struct nvml_mem *), (*procs)(void *, unsigned *, struct nvml_proc *);

    if (!h) {
        snprintf(status, slen, "NVML: not found (%s)", dlerror());
        return false;
    }
    *(void **)&init = dlsym(h, "nvmlInit_v2");
    *(void **)&shut = dlsym(h, "nvmlShutdown");
    *(void **)&by_bus = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&util = dlsym(h, "nvmlDeviceGetUtilizationRates");
    *(void **)&mem = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&procs = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!procs)
        *(void **)&procs = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    if (!init || !shut || !by_bus || !mem || init() != 0) {
        snprintf(status, slen, "NVML: libnvidia-ml.so.1 loaded but did not initialise");
        dlclose(h);
        return false;
    }
    for (size_t i = 0; i < npicked; i++) {
        struct ddp_doctor_gpu *g = &gpus[picked[i]];
        void *dev = NULL;
        struct nvml_util u;
        struct nvml_mem m;
        struct nvml_proc pr[64];
        unsigned n = 64;
        struct ddp_buf b = {0};

        if (g->vendor != 0x10de || by_bus(g->busid, &dev) != 0)
            continue;
        if (mem(dev, &m) == 0)
            g->mem_used = (long long)m.used, g->mem_total = (long long)m.total;
        if (util && util(dev, &u) == 0)
            g->util = (int)u.gpu;
        if (procs && procs(dev, &n, pr) == 0)
            for (unsigned k = 0; k < n && k < 64; k++) {
                char comm[64] = "";

                if (ddp_rundir_proc_identity((pid_t)pr[k].pid, comm, sizeof comm, NULL, 0) < 0)
                    snprintf(comm, sizeof comm, "not visible here");
                if (pr[k].used != ~0ULL)
                    ddp_buf_printf(&b, "%spid %u (%s, %.1f GiB)", b.len ? ", " : "", pr[k].pid, comm,
                                   (double)pr[k].used / GIB);
                else
                    ddp_buf_printf(&b, "%spid %u (%s)", b.len ? ", " : "", pr[k].pid, comm);
            }
        if (b.data)
            snprintf(g->users, sizeof g->users, "%s", b.data);
        ddp_buf_free(&b);
    }
    shut();
    dlclose(h);
    return true;
}

static int cuda_driver_version(char *error, size_t len)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*get)(int *), v = -1;

    if (!h) {
        snprintf(error, len, "%s", dlerror());
        return -1;
    }
    *(void **)&get = dlsym(h, "cuDriverGetVersion");
    if (!get || get(&v) != 0) {
        snprintf(error, len, "cuDriverGetVersion failed");
        v = -1;
    }
    dlclose(h);
    return v;
}

static char *read_file(const char *path, size_t max, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0, cap = 4096;
    char *buf;

    if (fd < 0)
        return NULL;
    buf = ddp_xmalloc(cap + 1);
    for (;;) {
        ssize_t k;

        if (len == cap) {
            if (cap >= max)
                break;
            cap *= 2;
            buf = ddp_xrealloc(buf, cap + 1);
        }
        k = read(fd, buf + len, cap - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    buf[len] = '\0';
    if (len_out)
        *len_out = len;
    return buf;
}

/* The value of "Key:\t..." in /proc/self/status text, as a new string, or NULL. */
static char *status_field(const char *text, const char *key)
{
    size_t kl = strlen(key);

    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ':') {
            const char *v = l + kl + 1;

            v += strspn(v, " \t");
            return ddp_xstrndup(v, strcspn(v, "\n"));
        }
    return NULL;
}

static void glob_push(const char *pattern, struct ddp_strv *out)
{
    glob_t g;

    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) {
            bool dup = false;

            for (size_t k = 0; k < out->n && !dup; k++)
                dup = strcmp(out->v[k], g.gl_pathv[i]) == 0;
            if (!dup)
                ddp_strv_push(out, g.gl_pathv[i]);
        }
    globfree(&g);
}

/* Python library directories to search, in the order the interpreter most likely uses them. */
static void python_dirs(const struct ddp_plan_ctx *ctx, char *const *envp, struct ddp_strv *dirs)
{
    const char *py = ctx->python, *venv = ddp_env_get(envp, "VIRTUAL_ENV"), *conda = ddp_env_get(envp, "CONDA_PREFIX");
    const char *home = ddp_env_get(envp, "HOME"), *path = ddp_env_get(envp, "PATH");
    char buf[PATH_MAX + 64], found[PATH_MAX];

    /* the interpreter's prefix: PREFIX/bin/python3 -> PREFIX/lib/python3.X/site-packages (a venv's bin/python3
     * is a symlink to the base interpreter: the venv's own prefix is what counts, so no realpath) */
    if (py && !strchr(py, '/'))
        for (const char *s = path; s && *s;) {
            size_t n = strcspn(s, ":");

            snprintf(found, sizeof found, "%.*s/%s", (int)n, s, py);
            if (n && found[0] == '/' && access(found, X_OK) == 0) {
                py = found;
                break;
            }
            s += n + (s[n] == ':');
        }
    if (py && py[0] == '/') {
        char *prefix = ddp_xstrdup(py), *s = strrchr(prefix, '/');

        if (s)
            *s = '\0';
        s = strrchr(prefix, '/');
        if (s && strcmp(s, "/bin") == 0) {
            *s = '\0';
            snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", *prefix ? prefix : "");
            glob_push(buf, dirs);
            if (strcmp(prefix, "/usr") == 0)
                glob_push("/usr/lib/python3/dist-packages", dirs);
        }
        free(prefix);
    }
    if (venv && *venv) {
        snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", venv);
        glob_push(buf, dirs);
    }
    if (conda && *conda) {
        snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", conda);
        glob_push(buf, dirs);
    }
    if (home && *home) {
        snprintf(buf, sizeof buf, "%s/.local/lib/python3*/site-packages", home);
        glob_push(buf, dirs);
    }
    glob_push("/usr/local/lib/python3*/dist-packages", dirs);
    glob_push("/usr/local/lib/python3*/site-packages", dirs);
    glob_push("/usr/lib/python3/dist-packages", dirs);
    glob_push("/usr/lib/python3*/dist-packages", dirs);
    glob_push("/usr/lib/python3*/site-packages", dirs);
    glob_push("/opt/conda/lib/python3*/site-packages", dirs);
}

static void nccl_lib_facts(const struct ddp_plan_ctx *ctx, char *const *envp, struct ddp_strv *system,
                           struct ddp_strv *bundled, char **torch_dir, int *torch_cuda)
{
    struct ddp_strv dirs = {0};
    size_t len = 0;
    char *cache = read_file("/etc/ld.so.cache", 16u << 20, &len);
    const char *llp = ddp_env_get(envp, "LD_LIBRARY_PATH");
    char buf[PATH_MAX + 64];

    if (cache)
        ddp_doctor_ldcache_find(cache, len, "libnccl.so", system);
    free(cache);
    for (const char *s = llp; s && *s;) {
        size_t n = strcspn(s, ":");

        if (n) {
            snprintf(buf, sizeof buf, "%.*s/libnccl.so*", (int)n, s);
            glob_push(buf, system);
        }
        s += n + (s[n] == ':');
    }
    glob_push("/usr/local/cuda/lib64/libnccl.so*", system);
    python_dirs(ctx, envp, &dirs);
    *torch_dir = NULL;
    *torch_cuda = -1;
    for (size_t i = 0; i < dirs.n; i++) {
        struct stat st;

        snprintf(buf, sizeof buf, "%s/nvidia/nccl/lib/libnccl.so*", dirs.v[i]);
        glob_push(buf, bundled);
        snprintf(buf, sizeof buf, "%s/torch/__init__.py", dirs.v[i]);
        if (!*torch_dir && stat(buf, &st) == 0) {
            struct ddp_strv cuda = {0};

            *torch_dir = ddp_xasprintf("%s/torch", dirs.v[i]);
            snprintf(buf, sizeof buf, "%s/torch/lib/libtorch_cuda*.so", dirs.v[i]);
            glob_push(buf, &cuda);
            snprintf(buf, sizeof buf, "%s/torch/lib/libtorch_hip*.so", dirs.v[i]);
            glob_push(buf, &cuda);
            *torch_cuda = cuda.n > 0;
            ddp_strv_clear(&cuda);
        }
    }
    ddp_strv_clear(&dirs);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dev_nodes(struct ddp_strv *devs)
{
    DIR *d = opendir("/dev");
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "nvidia", 6) == 0)
            ddp_strv_push(devs, e->d_name);
    closedir(d);
    if (devs->n > 1)
        qsort(devs->v, devs->n, sizeof *devs->v, cmp_str);
}

/* Resolve master_addr and find the interface that routes to it (a UDP connect() sends nothing). */
static void addr_facts(const char *addr, struct ddp_doctor_addr *a, char *resolved, char *src, char *ifn,
                       char *gai_err, size_t len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_ADDRCONFIG}, *res = NULL;
    int rc;

    a->addr = addr;
    if (!addr || !*addr)
        return;
    rc = getaddrinfo(addr, "9", &hints, &res);
    if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_ADDRFAMILY) { /* AI_ADDRCONFIG hides lo-only hosts */
        hints.ai_flags = 0;
        rc = getaddrinfo(addr, "9", &hints, &res);
    }
    a->gai_rc = rc;
    if (rc != 0) {
        snprintf(gai_err, len, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        a->gai_error = gai_err;
        return;
    }
    getnameinfo(res->ai_addr, res->ai_addrlen, resolved, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
    a->resolved = resolved;
    if (res->ai_family == AF_INET)
        a->loopback = (ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    else if (res->ai_family == AF_INET6)
        a->loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr);
    int s = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (s < 0 || connect(s, res->ai_addr, res->ai_addrlen) < 0) {
        a->route_errno = errno ? errno : EHOSTUNREACH;
    } else {
        struct sockaddr_storage me;
        socklen_t ml = sizeof me;
        struct ifaddrs *ifs = NULL;

        if (getsockname(s, (struct sockaddr *)&me, &ml) == 0) {
            getnameinfo((struct sockaddr *)&me, ml, src, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
            a->src_ip = src;
            if (getifaddrs(&ifs) == 0) {
                for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
                    char h[NI_MAXHOST];

                    if (!i->ifa_addr || i->ifa_addr->sa_family != me.ss_family)
                        continue;
                    if (getnameinfo(i->ifa_addr, me.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                         : sizeof(struct sockaddr_in6),
                                    h, sizeof h, NULL, 0, NI_NUMERICHOST) == 0 &&
                        strcmp(h, src) == 0) {
                        snprintf(ifn, len, "%s", i->ifa_name);
                        a->ifname = ifn;
                        break;
                    }
                }
                freeifaddrs(ifs);
            }
        }
    }
    if (s >= 0)
        close(s);
    freeaddrinfo(res);
}

/* Names of the interfaces that are up, each once. */
static void interfaces_up(struct ddp_strv *out)
{
    struct ifaddrs *ifs = NULL;

    if (getifaddrs(&ifs) < 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        bool dup = false;

        if (!(i->ifa_flags & IFF_UP))
            continue;
        for (size_t k = 0; k < out->n && !dup; k++)
            dup = strcmp(out->v[k], i->ifa_name) == 0;
        if (!dup)
            ddp_strv_push(out, i->ifa_name);
    }
    freeifaddrs(ifs);
}

/* A variable as the workers would see it: [nccl] key first, then the environment. */
static const char *nccl_value(const struct ddp_spec *spec, char *const *envp, const char *name)
{
    const struct ddp_kv *kv = spec ? ddp_kvlist_get(&spec->nccl, name) : NULL;

    if (kv)
        return kv->value;
    kv = spec ? ddp_kvlist_get(&spec->env, name) : NULL;
    return kv ? kv->value : ddp_env_get(envp, name);
}

void ddp_doctor_collect(const struct ddp_plan_ctx *ctx, struct ddp_doctor_report *r)
{
    extern char **environ;
    char *const *envp = ctx->base_env ? ctx->base_env : environ;
    const struct ddp_spec *spec = ctx->spec;
    const char *lock_dir = ddp_rundir_lock_dir(envp);
    struct topo_facts tf = {0};
    struct ddp_placement pl = {0}, better = {0};
    struct ddp_err perr = {0};
    struct ddp_lease_info *leases = NULL;
    size_t nleases = 0;
    int lease_rc = ddp_lease_list(lock_dir, &leases, &nleases);
    int *picked = NULL, *bidx = NULL, *excl = NULL;
    size_t nexcl = 0;
    char nvml_status[256] = "";
    bool nvml = false, placed = false;
    struct ddp_doctor_gpus g = {.nproc = ctx->nproc};

    /* ---- GPUs ---- */
    if (ctx->topo) {
        struct ddp_place_req req;

        topo_facts_read(ctx->topo, spec, envp, ctx->gpu_holders, &tf);
        /* leave out GPUs other jobs hold, as the job would */
        excl = ddp_xcalloc(tf.ngpus + 1, sizeof *excl);
        for (size_t i = 0; i < tf.ngpus; i++)
            for (size_t k = 0; lease_rc == 0 && k < nleases; k++)
                if (leases[k].pid != getpid() && strcasecmp(leases[k].busid, tf.gpus[i].busid) == 0) {
                    excl[nexcl++] = (int)i;
                    snprintf(tf.gpus[i].holder, sizeof tf.gpus[i].holder, "job '%s' (pid %d)", leases[k].job,
                             (int)leases[k].pid);
                }
        ddp_plan_place_req(ctx, ctx->nproc, &req);
        req.exclude_idx = excl;
        req.nexclude_idx = nexcl;
        g.have_topo = true;
        g.all = tf.gpus;
        g.nall = tf.ngpus;
        g.want_gpus = req.want_gpus;
        g.nusable = req.want_gpus ? ddp_place_count_usable(ctx->topo, &req) : 0;
        if (ctx->nproc > 0 && ddp_place(ctx->topo, &req, &pl, &perr) == 0) {
            placed = true;
            g.reason = pl.reason;
            g.nvlink = pl.reason && (strstr(pl.reason, ", NVLink (NV") || strstr(pl.reason, ", XGMI links"));
            if (req.want_gpus) {
                picked = ddp_xcalloc(pl.nranks + 1, sizeof *picked);
                for (size_t i = 0; i < pl.nranks; i++)
                    picked[g.npicked++] = pl.ranks[i].gpu;
                g.picked = picked;
            }
            if (req.want_gpus) {
                static const struct ddp_strv none;
                struct ddp_place_req alt = req;
                struct ddp_err e2 = {0};

                alt.select = &none;
                alt.policy = DDP_POLICY_SAME_NUMA;
                if (ddp_place(ctx->topo, &alt, &better, &e2) == 0) {
                    bidx = ddp_xcalloc(better.nranks + 1, sizeof *bidx);
                    for (size_t i = 0; i < better.nranks; i++)
                        bidx[g.nbetter++] = better.ranks[i].gpu;
                    g.better = bidx;
                }
            }
        } else if (req.want_gpus) {
            g.error = perr.msg[0] ? perr.msg : "placement failed";
        }
        if (g.npicked && tf.n_nvidia && !tf.from_xml)
            nvml = nvml_extras(tf.gpus, picked, g.npicked, nvml_status, sizeof nvml_status);
        g.nvml = nvml;
        g.nvml_status = nvml_status[0] ? nvml_status : tf.nvml_status;
    }
    ddp_doctor_check_gpus(r, &g);
    ddp_doctor_check_numa(r, &g);
    ddp_doctor_check_gpu_busy(r, &g);
    ddp_doctor_check_leases(r, leases, nleases, getpid(), lease_rc);

    /* ---- driver, devices, libnccl ---- */
    {
        struct ddp_strv devs = {0}, sys = {0}, bun = {0};
        char cuda_err[256] = "";
        char *torch_dir = NULL;
        int torch_cuda = -1;
        struct ddp_doctor_driver d = {.n_nvidia = tf.n_nvidia, .nvml_found = tf.nvml_found,
                                      .nvml_status = tf.nvml_status, .driver = tf.driver[0] ? tf.driver : NULL,
                                      .cuda_version = -1};

        if (tf.n_nvidia && !tf.from_xml) {
            d.cuda_version = cuda_driver_version(cuda_err, sizeof cuda_err);
            d.cuda_error = cuda_err;
            dev_nodes(&devs);
        }
        d.xml = tf.from_xml && tf.n_nvidia; /* describes another machine: its driver is not ours to check */
        d.devs = (const char *const *)devs.v;
        d.ndevs = devs.n;
        ddp_doctor_check_driver(r, &d);
        ddp_doctor_check_devices(r, &d);
        nccl_lib_facts(ctx, envp, &sys, &bun, &torch_dir, &torch_cuda);
        struct ddp_doctor_nccl_lib l = {.xml = d.xml, .n_nvidia = d.n_nvidia, .system = (const char *const *)sys.v,
                                        .nsystem = sys.n, .bundled = (const char *const *)bun.v, .nbundled = bun.n,
                                        .torch_dir = torch_dir, .torch_cuda = torch_cuda};
        ddp_doctor_check_nccl_lib(r, &l);
        free(torch_dir);
        ddp_strv_clear(&devs);
        ddp_strv_clear(&sys);
        ddp_strv_clear(&bun);
    }

    /* ---- NCCL variables ---- */
    ddp_doctor_check_nccl_env(r, spec ? &spec->nccl : NULL, envp);

    /* ---- master port ---- */
    {
        char *tcp = read_file("/proc/net/tcp", 8u << 20, NULL), *tcp6 = read_file("/proc/net/tcp6", 8u << 20, NULL);
        char *eph = ddp_port_ephemeral_range();
        struct ddp_port_holder holder;
        char lock_holder[256];
        struct ddp_doctor_port p = {.spec = spec->master_port, .node_rank = ctx->node_rank,
                                    .master_addr = ctx->master_addr, .tcp = tcp, .tcp6 = tcp6, .ephemeral = eph};

        if (!p.spec.is_auto && ctx->node_rank == 0) {
            if (ddp_port_holder(p.spec.port, &holder) == 0)
                p.holder = &holder;
            if (ddp_port_lock_holder(lock_dir, p.spec.port, lock_holder, sizeof lock_holder) == 0)
                p.lock_holder = lock_holder;
            p.probe_rc = ddp_port_probe(p.spec.port);
        }
        ddp_doctor_check_port(r, &p);
        free(tcp);
        free(tcp6);
        free(eph);
    }

    /* ---- master address, interfaces ---- */
    {
        char resolved[NI_MAXHOST] = "", src[NI_MAXHOST] = "", ifn[NI_MAXHOST] = "", gai[NI_MAXHOST] = "";
        struct ddp_doctor_addr a = {.nnodes = ctx->nnodes};
        struct ddp_strv ifs = {0};
        const char *addr = ctx->master_addr ? ctx->master_addr : spec->master_addr;

        addr_facts(addr, &a, resolved, src, ifn, gai, sizeof resolved);
        ddp_doctor_check_addr(r, &a);
        interfaces_up(&ifs);
        ddp_doctor_check_ifname(r, "NCCL_SOCKET_IFNAME", nccl_value(spec, envp, "NCCL_SOCKET_IFNAME"), false,
                                (const char *const *)ifs.v, ifs.n, ctx->nnodes > 1 && !a.loopback ? a.ifname : NULL);
        ddp_doctor_check_ifname(r, "GLOO_SOCKET_IFNAME", nccl_value(spec, envp, "GLOO_SOCKET_IFNAME"), true,
                                (const char *const *)ifs.v, ifs.n, ctx->nnodes > 1 && !a.loopback ? a.ifname : NULL);
        ddp_strv_clear(&ifs);
    }

    /* ---- CPUs, memory nodes ---- */
    {
        char *status = read_file("/proc/self/status", 1u << 20, NULL);
        char *cpus = ctx->topo ? ddp_topo_allowed_cpus(ctx->topo) : NULL;
        char *mems = NULL;
        const char **rc = NULL, **rm = NULL;

        if (!cpus && status)
            cpus = status_field(status, "Cpus_allowed_list");
        if (status && !tf.from_xml)
            mems = status_field(status, "Mems_allowed_list");
        if (placed) {
            rc = ddp_xcalloc(pl.nranks + 1, sizeof *rc);
            rm = ddp_xcalloc(pl.nranks + 1, sizeof *rm);
            for (size_t i = 0; i < pl.nranks; i++)
                rc[i] = pl.ranks[i].cpus, rm[i] = pl.ranks[i].mems;
        }
        struct ddp_doctor_cpus c = {.cpus_allowed = cpus, .mems_allowed = mems, .nproc = ctx->nproc,
                                    .bind = spec->numa_bind, .rank_cpus = rc, .rank_mems = rm,
                                    .nranks = placed ? pl.nranks : 0};
        ddp_doctor_check_cpus(r, &c);
        free(rc);
        free(rm);
        free(cpus);
        free(mems);
        free(status);
    }

    /* ---- open files ---- */
    {
        struct rlimit rl = {0};

        getrlimit(RLIMIT_NOFILE, &rl);
        ddp_doctor_check_nofile(r, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, ctx->nproc);
    }

    /* ---- state directories ---- */
    ddp_doctor_check_state_dirs(r, envp, getuid());

    ddp_placement_free(&pl);
    ddp_placement_free(&better);
    free(picked);
    free(bidx);
    free(excl);
    free(leases);
    free(tf.gpus);
}

int ddp_doctor_run(const struct ddp_plan_ctx *ctx, bool json, FILE *out)
{
    struct ddp_doctor_report r = {0};
    int status;

    ddp_doctor_collect(ctx, &r);
    ddp_doctor_print(&r, json, out);
    status = ddp_doctor_exit_status(&r);
    ddp_doctor_report_free(&r);
    if (fflush(out) != 0 || ferror(out))
        return 2;
    return status;
}
