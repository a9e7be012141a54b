/* select: candidates (CUDA_VISIBLE_DEVICES, the scheduler's GPUs, select/exclude, the judge) and the choice of N GPUs.
 */
#include "topo/select.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo/fitness.h"

const char *ddp_link_name(enum ddp_link l)
{
    static const char *const names[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"};

    return (unsigned)l < sizeof names / sizeof names[0] ? names[l] : "?";
}

/* Why a GPU is not usable; the first that applies wins. */
enum leftout { OK, NOT_CVD, NOT_SCHED, NOT_SELECT, EXCLUDED, DOWNSIZED, UNFIT, LEASED, BUSY, HELD, NREASONS };

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* "18:00.0", "0000:18:00.0" or NVML's "00000000:18:00.0" against "0000:18:00.0". */
static bool busid_eq(const char *want, const char *have)
{
    size_t lw, lh;

    if (!have)
        return false;
    lw = strlen(want), lh = strlen(have);
    /* Compare from the end: bus:dev.fn must match; a domain, when given, must match numerically. */
    if (lw < 7 || lh < 7 || strcasecmp(want + lw - 7, have + lh - 7) != 0)
        return false;
    if (lw == 7)
        return true;
    if (want[lw - 8] != ':')
        return false;
    return strtoul(want, NULL, 16) == strtoul(have, NULL, 16);
}

/* Topology index of the GPU named by s (index, bus id or UUID prefix), -1 none, -2 ambiguous. */
static int find_gpu(const struct ddp_sel_topo *t, const char *s)
{
    int found = -1;

    if (all_digits(s)) {
        long v = strtol(s, NULL, 10);

        return v >= 0 && (size_t)v < t->ngpus ? (int)v : -1;
    }
    for (size_t i = 0; i < t->ngpus; i++) {
        bool hit;

        if (!strncasecmp(s, "GPU-", 4))
            hit = t->gpus[i].uuid && !strncasecmp(t->gpus[i].uuid, s, strlen(s));
        else
            hit = strchr(s, ':') && busid_eq(s, t->gpus[i].busid);
        if (hit) {
            if (found >= 0)
                return -2;
            found = (int)i;
        }
    }
    return found;
}

static int name_error(const struct ddp_sel_topo *t, const char *what, const char *s, int r, struct ddp_err *err)
{
    if (r == -2)
        return ddp_errf(err, -EINVAL, "[gpus] %s: '%s' matches more than one GPU (give more of the UUID)", what, s);
    if (!strncasecmp(s, "GPU-", 4) && (t->ngpus == 0 || !t->gpus[0].uuid))
        return ddp_errf(err, -EINVAL,
                        "[gpus] %s: '%s': GPU UUIDs need NVML (libnvidia-ml.so.1), which was not found;"
                        " use an index or a PCI bus id",
                        what, s);
    if (t->ngpus == 0)
        return ddp_errf(err, -EINVAL,
                        "[gpus] %s: '%s' is not a GPU of this machine, which has none (leave [gpus] %s unset and "
                        "run CPU workers: nproc_per_node = cpu, auto or a number; see `ddplaunch topo`)",
                        what, s, what);
    return ddp_errf(err, -EINVAL,
                    "[gpus] %s: '%s' is not a GPU of this machine (%zu GPUs: give an index 0-%zd, a PCI"
                    " bus id or a UUID; see `ddplaunch topo`)",
                    what, s, t->ngpus, (ssize_t)t->ngpus - 1);
}

/* Parse "0,2,4-7" into in[] (size n). Entries past n are ignored. 0 or -EINVAL. */
static int parse_index_list(const char *s, bool *in, size_t n)
{
    const char *p = s;

    while (*p) {
        char *end;
        long a, b;

        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        a = b = strtol(p, &end, 10);
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char)p[1]))
                return -EINVAL;
            b = strtol(p + 1, &end, 10);
            p = end;
        }
        if (*p && *p != ',')
            return -EINVAL;
        for (long i = a; i <= b && i < (long)n; i++)
            if (i >= 0)
                in[i] = true;
    }
    return 0;
}

/* Append "0-3,5" for the members of set (size n). */
static void add_ranges(struct ddp_buf *b, const bool *set, size_t n)
{
    bool first = true;

    for (size_t i = 0; i < n; i++) {
        size_t j = i;

        if (!set[i])
            continue;
        while (j + 1 < n && set[j + 1])
            j++;
        ddp_buf_printf(b, first ? "%zu" : ",%zu", i);
        if (j > i)
            ddp_buf_printf(b, "%s%zu", j == i + 1 ? "," : "-", j);
        first = false;
        i = j;
    }
}

/* An explicit select list: not empty and not the word auto. */
static bool explicit_select(const struct ddp_sel_req *req)
{
    return req->select && req->select->n && !(req->select->n == 1 && !strcasecmp(req->select->v[0], "auto"));
}

static bool select_none(const struct ddp_sel_req *req)
{
    return req->select && req->select->n == 1 && !strcasecmp(req->select->v[0], "none");
}

/* CUDA_VISIBLE_DEVICES as CUDA reads it: entries up to the first one that names no device. The GPUs it names
 * keep their entry as their name (in[] marks them); the others are left out as NOT_CVD. */
static void leave_out_cvd(const struct ddp_sel_topo *t, const char *inherited_cvd, bool *in, char **name,
                          enum leftout *reason)
{
    char *copy = ddp_xstrdup(inherited_cvd), *save = NULL;

    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int g;

        while (isspace((unsigned char)*tok))
            tok++;
        for (size_t l = strlen(tok); l && isspace((unsigned char)tok[l - 1]); l--)
            tok[l - 1] = '\0';
        if (!all_digits(tok) && strncasecmp(tok, "GPU-", 4))
            break; /* MIG-..., -1, garbage: CUDA stops here */
        g = find_gpu(t, tok);
        if (g < 0)
            break;
        if (in[g])
            continue;
        in[g] = true;
        free(name[g]);
        name[g] = ddp_xstrdup(tok);
    }
    free(copy);
    for (size_t i = 0; i < t->ngpus; i++)
        if (!in[i])
            reason[i] = NOT_CVD;
}

/* One line saying why GPUs were left out, grouped by reason ("" when none was), with the judge's verdicts v
 * (fitness.h). in[] is scratch (ngpus). Caller owns; free(). */
static char *describe_left_out(const struct ddp_sel_topo *t, const struct ddp_sel_req *req, const enum leftout *reason,
                               const struct ddp_fitness_verdict *v, bool *in)
{
    size_t n = t->ngpus;
    static const char *const text[NREASONS] = {
        [NOT_CVD] = "not in CUDA_VISIBLE_DEVICES",
        [NOT_SCHED] = "not in the scheduler's GPU list",
        [NOT_SELECT] = "not in [gpus] select",
        [EXCLUDED] = "excluded by [gpus] exclude",
        [DOWNSIZED] = "left out after failures (downsizing)",
        [UNFIT] = "unfit",
        [LEASED] = "in use by another ddplaunch job",
        [BUSY] = "over [gpus] max_memory_used",
        [HELD] = "held by another process ([gpus] busy = skip)",
    };
    struct ddp_buf b = {0};

    ddp_buf_puts(&b, "");
    for (int r = NOT_CVD; r < NREASONS; r++) {
        int k = 0;

        for (size_t i = 0; i < n; i++)
            k += (in[i] = reason[i] == (enum leftout)r);
        if (!k)
            continue;
        ddp_buf_printf(&b, "%sGPU%s ", b.len ? "; " : "", k > 1 ? "s" : "");
        add_ranges(&b, in, n);
        ddp_buf_printf(&b, " %s", text[r]);
        if (r == NOT_CVD)
            ddp_buf_printf(&b, "='%s'", req->inherited_cvd);
        else if (r == NOT_SCHED)
            ddp_buf_printf(&b, " (%s)", req->sched_gpus);
        else if (r == UNFIT || r == LEASED || r == BUSY || r == HELD)
            for (size_t i = 0; i < n; i++) {
                if (!in[i])
                    continue;
                if (r == UNFIT)
                    ddp_buf_printf(&b, " (GPU %zu: %s)", i, v[i].why);
                else if (r == LEASED)
                    ddp_buf_printf(&b, " (GPU %zu: %s)", i, req->holders[i]);
                else if (r == HELD)
                    ddp_buf_printf(&b, " (GPU %zu: %.1f GiB)", i, v[i].held_bytes / 1073741824.0);
                else
                    ddp_buf_printf(&b, " (GPU %zu: %.1f of %.1f GiB in use)", i, t->gpus[i].mem_used / 1073741824.0,
                                   t->gpus[i].mem_total / 1073741824.0);
            }
    }
    return b.data;
}

/* The GPUs still in: the judge's verdict v[i] on each (fitness.h: lost, faulty, leased, held with busy = skip),
 * then [gpus] max_memory_used. */
static void leave_out_unfit(const struct ddp_sel_topo *t, const struct ddp_sel_req *req, enum leftout *reason,
                            struct ddp_fitness_verdict *v)
{
    size_t n = t->ngpus;

    for (size_t i = 0; i < n; i++) { /* the judge's verdict (fitness.h), then [gpus] max_memory_used */
        const struct ddp_sel_gpu *g = &t->gpus[i];
        const struct ddp_mem_limit *lim = &req->max_memory_used;

        if (reason[i] != OK)
            continue;
        ddp_fitness_judge(&(struct ddp_fitness_in){.busid = g->busid,
                                                   .gpu = g->nvml,
                                                   .unheld = g->unheld,
                                                   .leased_by = req->holders ? req->holders[i] : NULL},
                          &v[i]);
        bool out = ddp_fitness_leaves_out(&v[i], req->busy);
        if (out && v[i].fit != DDP_FIT_HELD)
            reason[i] = v[i].fit == DDP_FIT_LEASED ? LEASED : UNFIT;
        else if (g->mem_used >= 0 && g->mem_total > 0 &&
                 ((lim->percent > 0 && g->mem_used * 100 > (long long)lim->percent * g->mem_total) ||
                  (lim->bytes > 0 && (unsigned long long)g->mem_used > lim->bytes)))
            reason[i] = BUSY;
        else if (out)
            reason[i] = HELD;
    }
}

int ddp_select_usable(const struct ddp_sel_topo *t, const struct ddp_sel_req *req, bool *usable, char **cvd, char **why,
                      struct ddp_err *err)
{
    size_t n = t->ngpus;
    enum leftout *reason = ddp_xcalloc(n ? n : 1, sizeof *reason);
    bool *in = ddp_xcalloc(n ? n : 1, sizeof *in);
    char **name = ddp_xcalloc(n ? n : 1, sizeof *name);
    struct ddp_fitness_verdict *v = ddp_xcalloc(n ? n : 1, sizeof *v);
    int rc = 0, count = 0;

    if (cvd)
        memset(cvd, 0, n * sizeof *cvd);
    for (size_t i = 0; i < n; i++)
        name[i] = ddp_xasprintf("%zu", i);

    if (req->inherited_cvd)
        leave_out_cvd(t, req->inherited_cvd, in, name, reason);
    if (req->sched_gpus) {
        memset(in, 0, n * sizeof *in);
        if (parse_index_list(req->sched_gpus, in, n) < 0) {
            rc = ddp_errf(err, -EINVAL, "the scheduler's GPU list '%s': expected indices like 0,1 or 0-3",
                          req->sched_gpus);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (!in[i] && reason[i] == OK)
                reason[i] = NOT_SCHED;
    }
    if (select_none(req)) {
        for (size_t i = 0; i < n; i++)
            if (reason[i] == OK)
                reason[i] = NOT_SELECT;
    } else if (explicit_select(req)) {
        memset(in, 0, n * sizeof *in);
        for (size_t k = 0; k < req->select->n; k++) {
            int g = find_gpu(t, req->select->v[k]);

            if (g < 0) {
                rc = name_error(t, "select", req->select->v[k], g, err);
                goto out;
            }
            in[g] = true;
        }
        for (size_t i = 0; i < n; i++)
            if (!in[i] && reason[i] == OK)
                reason[i] = NOT_SELECT;
    }
    if (req->exclude)
        for (size_t k = 0; k < req->exclude->n; k++) {
            int g = find_gpu(t, req->exclude->v[k]);

            if (g < 0) {
                rc = name_error(t, "exclude", req->exclude->v[k], g, err);
                goto out;
            }
            if (reason[g] == OK)
                reason[g] = EXCLUDED;
        }
    for (size_t k = 0; k < req->nexclude_idx; k++) {
        int g = req->exclude_idx[k];

        if (g >= 0 && (size_t)g < n && reason[g] == OK)
            reason[g] = DOWNSIZED;
    }
    leave_out_unfit(t, req, reason, v);

    for (size_t i = 0; i < n; i++) {
        if (usable)
            usable[i] = reason[i] == OK;
        count += reason[i] == OK;
    }
    if (why)
        *why = describe_left_out(t, req, reason, v, in);
    if (cvd)
        for (size_t i = 0; i < n; i++) {
            cvd[i] = name[i];
            name[i] = NULL;
        }
    rc = count;
out:
    for (size_t i = 0; i < n; i++)
        free(name[i]);
    free(name);
    free(v);
    free(in);
    free(reason);
    return rc;
}

/* ---- choosing ---- */

#define NKEYS 5
#define ENUM_LIMIT 200000.0

struct chooser {
    const struct ddp_sel_topo *t;
    enum ddp_gpu_policy policy;
    int *seen; /* per node, scratch */
};

static long long link_cost(const struct ddp_sel_topo *t, int a, int b)
{
    enum ddp_link l = t->link[(size_t)a * t->ngpus + b];
    long long c = (long long)l * 100;

    if (l == DDP_LINK_NV && t->nvlinks) {
        int k = t->nvlinks[(size_t)a * t->ngpus + b];

        c -= k > 99 ? 99 : k;
    }
    return c;
}

/* Lexicographic keys, lower is better. */
static void score(struct chooser *c, const int *set, int n, long long *key)
{
    const struct ddp_sel_topo *t = c->t;
    long long span = 0, maxdist = 0, maxper = 0, worst = 0, sum = 0, unknown = 0;

    memset(c->seen, 0, (t->nnodes ? t->nnodes : 1) * sizeof *c->seen);
    for (int i = 0; i < n; i++) {
        int nd = t->gpus[set[i]].node;

        if (nd < 0) {
            unknown++;
            continue;
        }
        if (!c->seen[nd]++)
            span++;
        if (c->seen[nd] > maxper)
            maxper = c->seen[nd];
        for (int j = 0; j < i; j++) {
            int od = t->gpus[set[j]].node;
            long long d;

            if (od < 0 || od == nd)
                continue;
            d = t->node_dist ? t->node_dist[(size_t)nd * t->nnodes + od] : 20;
            if (d > maxdist)
                maxdist = d;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            long long lc = link_cost(t, set[i], set[j]);

            sum += lc;
            if (lc > worst)
                worst = lc;
        }
    /* GPUs of unknown locality fit any node; among equal choices prefer GPUs whose node is known. */
    if (span == 0 && n > 0)
        span = 1;
    key[4] = unknown;
    switch (c->policy) {
    case DDP_POLICY_PACK:
        key[0] = worst, key[1] = sum, key[2] = span, key[3] = maxdist;
        break;
    case DDP_POLICY_SPREAD:
        key[0] = -span, key[1] = maxper, key[2] = worst, key[3] = sum;
        break;
    case DDP_POLICY_ANY:
        key[0] = key[1] = key[2] = key[3] = 0;
        break;
    default:
        key[0] = span, key[1] = maxdist, key[2] = worst, key[3] = sum;
    }
}

static bool better(const long long *a, const long long *b)
{
    for (int k = 0; k < NKEYS; k++)
        if (a[k] != b[k])
            return a[k] < b[k];
    return false; /* ties keep the earlier set: lower bus ids */
}

static double binomial(int n, int k)
{
    double r = 1;

    for (int i = 1; i <= k; i++)
        r = r * (n - k + i) / i;
    return r;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* Too many combinations: fill nodes with the most candidates first (same-numa, pack), or round-robin over
 * nodes (spread). cand is in bus order. */
static void choose_greedy(struct chooser *c, const int *cand, int ncand, int n, int *out)
{
    const struct ddp_sel_topo *t = c->t;
    size_t nn = t->nnodes;
    int *count = ddp_xcalloc(nn + 1, sizeof *count), k = 0;
    bool *taken = ddp_xcalloc((size_t)ncand, sizeof *taken);

    for (int i = 0; i < ncand; i++) {
        int nd = t->gpus[cand[i]].node;

        count[nd < 0 ? nn : (size_t)nd]++;
    }
    if (c->policy == DDP_POLICY_SPREAD) {
        while (k < n)
            for (size_t nd = 0; nd <= nn && k < n; nd++)
                for (int i = 0; i < ncand; i++) {
                    int gnd = t->gpus[cand[i]].node;

                    if (!taken[i] && (gnd < 0 ? nn : (size_t)gnd) == nd) {
                        taken[i] = true, out[k++] = cand[i];
                        break;
                    }
                }
    } else {
        while (k < n) {
            size_t best = nn;

            for (size_t nd = 0; nd < nn; nd++)
                if (count[nd] > (best == nn ? 0 : count[best]))
                    best = nd;
            for (int i = 0; i < ncand && k < n; i++) {
                int gnd = t->gpus[cand[i]].node;

                if (!taken[i] && (gnd < 0 ? nn : (size_t)gnd) == best)
                    taken[i] = true, out[k++] = cand[i];
            }
            if (best < nn)
                count[best] = 0;
            else
                for (int i = 0; i < ncand && k < n; i++)
                    if (!taken[i])
                        taken[i] = true, out[k++] = cand[i];
        }
    }
    free(taken);
    free(count);
}

static void choose_best(struct chooser *c, const int *cand, int ncand, int n, int *out)
{
    int *pos = ddp_xcalloc((size_t)n, sizeof *pos), *set = ddp_xcalloc((size_t)n, sizeof *set);
    long long key[NKEYS], best[NKEYS];
    bool have = false;

    for (int i = 0; i < n; i++)
        pos[i] = i;
    for (;;) {
        int i;

        for (i = 0; i < n; i++)
            set[i] = cand[pos[i]];
        score(c, set, n, key);
        if (!have || better(key, best)) {
            memcpy(best, key, sizeof best);
            memcpy(out, set, (size_t)n * sizeof *out);
            have = true;
        }
        /* next combination in lexicographic order */
        for (i = n - 1; i >= 0 && pos[i] == ncand - n + i; i--)
            ;
        if (i < 0)
            break;
        pos[i]++;
        for (int j = i + 1; j < n; j++)
            pos[j] = pos[j - 1] + 1;
    }
    free(pos);
    free(set);
}

static void describe(const struct ddp_sel_topo *t, const int *set, int n, bool explicit_sel, enum ddp_gpu_policy policy,
                     struct ddp_buf *b)
{
    static const char *const link_text[] = {
        [DDP_LINK_PIX] = "same PCIe switch (PIX)",
        [DDP_LINK_PXB] = "across PCIe switches (PXB)",
        [DDP_LINK_PHB] = "same PCIe host bridge (PHB)",
        [DDP_LINK_NODE] = "across PCIe host bridges of one NUMA node (NODE)",
        [DDP_LINK_SYS] = "across NUMA nodes (SYS)",
    };
    bool *node_in = ddp_xcalloc(t->nnodes + 1, sizeof *node_in);
    int span = 0, unknown = 0, worst_a = -1, worst_b = -1;
    long long worst = -1;

    if (explicit_sel)
        ddp_buf_puts(b, "selected by [gpus] select: ");
    ddp_buf_printf(b, "%d GPU%s", n, n > 1 ? "s" : "");
    for (int i = 0; i < n; i++) {
        int nd = t->gpus[set[i]].node;

        if (nd < 0)
            unknown++;
        else if (!node_in[nd])
            node_in[nd] = true, span++;
    }
    if (span) {
        bool first = true;

        ddp_buf_printf(b, " on NUMA node%s ", span > 1 ? "s" : "");
        for (size_t nd = 0; nd < t->nnodes; nd++)
            if (node_in[nd]) {
                ddp_buf_printf(b, first ? "%d" : ",%d", t->node_os[nd]);
                first = false;
            }
        if (unknown)
            ddp_buf_printf(b, " (%d of unknown NUMA locality)", unknown);
    } else {
        ddp_buf_puts(b, " of unknown NUMA locality (local to every node)");
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            long long lc = link_cost(t, set[i], set[j]);

            if (lc > worst)
                worst = lc, worst_a = set[i], worst_b = set[j];
        }
    if (worst_a >= 0) {
        enum ddp_link l = t->link[(size_t)worst_a * t->ngpus + worst_b];

        int k = t->nvlinks ? t->nvlinks[(size_t)worst_a * t->ngpus + worst_b] : 1;

        if (l == DDP_LINK_NV && k > 0)
            ddp_buf_printf(b, ", NVLink (NV%d)", k);
        else if (l == DDP_LINK_NV)
            ddp_buf_puts(b, ", XGMI links");
        else if (l > DDP_LINK_NV && l <= DDP_LINK_SYS)
            ddp_buf_printf(b, ", %s", link_text[l]);
    }
    if (!explicit_sel && policy != DDP_POLICY_SAME_NUMA)
        ddp_buf_printf(b, " (policy %s)",
                       policy == DDP_POLICY_PACK     ? "pack"
                       : policy == DDP_POLICY_SPREAD ? "spread"
                                                     : "any");
    free(node_in);
}

int ddp_select_choose(const struct ddp_sel_topo *t, const struct ddp_sel_req *req, int *out, char **reason, char **cvd,
                      struct ddp_err *err)
{
    bool *usable = ddp_xcalloc(t->ngpus + 1, sizeof *usable);
    char *why = NULL;
    int *cand = NULL, ncand = 0, rc;
    bool explicit_sel = explicit_select(req) && !select_none(req);
    struct ddp_buf b = {0};

    if (reason)
        *reason = NULL;
    rc = ddp_select_usable(t, req, usable, cvd, &why, err);
    if (rc < 0)
        goto out;
    if (req->n <= 0) {
        rc = ddp_errf(err, -EINVAL, "asked for %d GPUs: expected at least 1", req->n);
        goto out;
    }
    if (t->ngpus == 0) {
        rc = ddp_errf(err, -ENODEV,
                      "asked for %d GPU%s, but this machine has none (no NVIDIA or AMD PCI display"
                      " device in the topology)",
                      req->n, req->n > 1 ? "s" : "");
        goto out;
    }
    if (rc < req->n) {
        rc = ddp_errf(err, -ENODEV, "asked for %d GPU%s, but only %d of the %zu GPUs here %s usable%s%s", req->n,
                      req->n > 1 ? "s" : "", rc, t->ngpus, rc == 1 ? "is" : "are", *why ? "; left out: " : "", why);
        goto out;
    }
    cand = ddp_xcalloc(t->ngpus, sizeof *cand);
    if (explicit_sel) {
        /* the user's order, each GPU once */
        for (size_t k = 0; k < req->select->n; k++) {
            int g = find_gpu(t, req->select->v[k]);

            if (g >= 0 && usable[g]) {
                usable[g] = false;
                cand[ncand++] = g;
            }
        }
        memcpy(out, cand, (size_t)req->n * sizeof *out);
    } else {
        struct chooser c = {t, req->policy, ddp_xcalloc(t->nnodes + 1, sizeof(int))};

        for (size_t i = 0; i < t->ngpus; i++)
            if (usable[i])
                cand[ncand++] = (int)i;
        if (req->policy == DDP_POLICY_ANY)
            memcpy(out, cand, (size_t)req->n * sizeof *out);
        else if (binomial(ncand, req->n) <= ENUM_LIMIT)
            choose_best(&c, cand, ncand, req->n, out);
        else
            choose_greedy(&c, cand, ncand, req->n, out);
        free(c.seen);
        qsort(out, (size_t)req->n, sizeof *out, cmp_int);
    }
    if (reason) {
        describe(t, out, req->n, explicit_sel, req->policy, &b);
        *reason = b.data;
    }
    rc = 0;
out:
    if (rc < 0 && cvd)
        for (size_t i = 0; i < t->ngpus; i++) {
            free(cvd[i]);
            cvd[i] = NULL;
        }
    free(cand);
    free(why);
    free(usable);
    return rc;
}
