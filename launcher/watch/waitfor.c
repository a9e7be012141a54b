/* waitfor: fr.h's ddp_fr_decide, the hang verdict across process groups. Reads the wait-for graph of the ranks'
 * flight recorders (waitgraph.h: a rank -> the collective it waits in -> the members of that group that have not
 * enqueued it), follows it to its ends and says the chain in words. Does not parse (fr.c), build the graph
 * (waitgraph.c) nor act (progress.c, capture.c). Pure: no files, no clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "records/jsonlog.h"
#include "watch/fr.h"
#include "watch/waitgraph.h"

/* src cut to fit cap bytes */
static void copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = 0;
}

/* ---------------------------------------------------------------- words */

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* The ranks of the k indices idx[] as "3", "0, 1, 3", "0-5, 9" (runs of three or more as a range) */
static void list(char *dst, size_t cap, const struct graph *G, const size_t *idx, size_t k)
{
    long long *r = ddp_xcalloc(k + 1, sizeof(*r));
    size_t len = 0;
    for (size_t j = 0; j < k; j++)
        r[j] = G->in[idx[j]].rank;
    qsort(r, k, sizeof(*r), cmp_ll);
    dst[0] = 0;
    for (size_t a = 0; a < k && len + 1 < cap;) {
        size_t b = a;
        while (b + 1 < k && r[b + 1] == r[b] + 1)
            b++;
        int w = b >= a + 2 ? snprintf(dst + len, cap - len, "%s%lld-%lld", len ? ", " : "", r[a], r[b])
                           : snprintf(dst + len, cap - len, "%s%lld", len ? ", " : "", r[a]);
        if (w < 0 || (size_t)w >= cap - len) {
            snprintf(dst + len, cap - len, "%s", len + 6 < cap ? ", ..." : "");
            break;
        }
        len += (size_t)w;
        a = b >= a + 2 ? b + 1 : a + 1;
    }
    free(r);
}

static void who(struct ddp_buf *b, const char *text, size_t k)
{
    ddp_buf_printf(b, "%s %s", k == 1 ? "rank" : "ranks", text);
}

/* A group's members: its reporters' member list, else the ranks that report it */
static void members(char *dst, size_t cap, const struct graph *G, size_t k)
{
    const struct grp *x = &G->grp[k];
    if (x->ranks_i != NONE) {
        copy(dst, cap, ddp_fr_group(G->in[x->ranks_i].fr, x->name)->ranks);
        return;
    }
    long long *r = ddp_xcalloc(x->count + 1, sizeof(*r));
    for (size_t j = 0; j < x->count; j++)
        r[j] = G->in[G->rec[G->order[x->first + j]].i].rank;
    qsort(r, x->count, sizeof(*r), cmp_ll);
    ddp_fr_ranks_text(dst, cap, r, x->count);
    free(r);
}

/* the op at node c, from the entries of the ranks waiting in it */
static const char *op_at(const struct graph *G, const struct node *c)
{
    for (size_t j = 0; j < c->nwait; j++) {
        size_t i = G->waiters[c->wfirst + j];
        const struct ddp_fr_entry *e = ddp_waitgraph_entry_at(G->rec[G->pend_rec[i]].g, c->seq);
        if (e && e->op[0])
            return e->op;
    }
    return "";
}

static long long enq_of(const struct graph *G, size_t i, size_t k)
{
    const struct ddp_fr_group *g = ddp_fr_group(G->in[i].fr, G->grp[k].name);
    return g && g->enqueued > 0 ? g->enqueued : 0;
}

/* Node c as a link of the chain: into *h, and into v's hops while there is room */
static void hop_of(const struct graph *G, size_t c, struct ddp_fr_verdict *v, struct ddp_fr_hop *h)
{
    const struct node *x = &G->node[c];
    memset(h, 0, sizeof(*h));
    list(h->waiting, sizeof(h->waiting), G, G->waiters + x->wfirst, x->nwait);
    copy(h->group, sizeof(h->group), G->grp[x->grp].name);
    members(h->ranks, sizeof(h->ranks), G, x->grp);
    h->seq = x->seq;
    copy(h->op, sizeof(h->op), op_at(G, x));
    list(h->on, sizeof(h->on), G, G->behind + x->first, x->nbeh);
    h->last = x->nbeh ? enq_of(G, G->behind[x->first], x->grp) : -1;
    for (size_t b = 1; b < x->nbeh; b++)
        if (enq_of(G, G->behind[x->first + b], x->grp) != h->last)
            h->last = -1;
    if (v->nhops < DDP_FR_HOPS)
        v->hop[v->nhops++] = *h;
}

/* "gloo:all_reduce #4 of group 2 (ranks 2-3" */
static void coll(struct ddp_buf *b, const struct ddp_fr_hop *h)
{
    ddp_buf_printf(b, "%s #%lld of group %s", h->op[0] ? h->op : "collective", h->seq, h->group);
    if (h->ranks[0])
        ddp_buf_printf(b, " (ranks %s", h->ranks);
    else
        ddp_buf_puts(b, " (members unknown");
}

/* The culprits' own lasts in hop h's group */
static void lasts(struct ddp_buf *b, const struct graph *G, const struct node *x, const struct ddp_fr_hop *h)
{
    if (h->last > 0) {
        ddp_buf_printf(b, "; %s last there is #%lld)", x->nbeh == 1 ? "its" : "their", h->last);
        return;
    }
    if (h->last == 0) {
        ddp_buf_printf(b, "; %s entered none there)", x->nbeh == 1 ? "it" : "they");
        return;
    }
    for (size_t j = 0; j < x->nbeh && j < 4; j++) {
        size_t i = G->behind[x->first + j];
        ddp_buf_printf(b, "%s rank %d's last there is #%lld", j ? "," : ";", G->in[i].rank, enq_of(G, i, x->grp));
    }
    ddp_buf_puts(b, x->nbeh > 4 ? ", ...)" : ")");
}

static void link_text(struct ddp_buf *b, const struct graph *G, size_t c, const struct ddp_fr_hop *h)
{
    const struct node *x = &G->node[c];
    ddp_buf_puts(b, "; ");
    who(b, h->waiting, x->nwait);
    ddp_buf_printf(b, " %s in group %s's #%lld for ", x->nwait == 1 ? "waits" : "wait", h->group, h->seq);
    who(b, h->on, x->nbeh);
}

/* Walk the graph backwards from the ranks start[] (seen[] marks them): every node with a behind member among the
 * ranks reached is a hop (its waiters are reached in turn); the first `direct` hops are told as "never entered" by
 * the caller. Returns how many ranks were reached. */
static size_t chain(const struct graph *G, size_t *queue, size_t nstart, bool *seen, bool *told,
                    struct ddp_fr_verdict *v, struct ddp_buf *b, bool words, const struct node *skip)
{
    size_t head = 0, tail = nstart;
    while (head < tail) {
        size_t y = queue[head++];
        for (size_t k = G->rin_first[y]; k < G->rin_first[y + 1]; k++) {
            size_t c = G->rin[k];
            const struct node *x = &G->node[c];
            if (told[c] || x == skip)
                continue;
            told[c] = true;
            if (words) {
                struct ddp_fr_hop h;
                hop_of(G, c, v, &h);
                link_text(b, G, c, &h);
            }
            for (size_t j = 0; j < x->nwait; j++) {
                size_t i = G->waiters[x->wfirst + j];
                if (!seen[i]) {
                    seen[i] = true;
                    queue[tail++] = i;
                }
            }
        }
    }
    return tail;
}

/* ---------------------------------------------------------------- findings */

struct finding {
    enum ddp_fr_kind kind;
    size_t comp;  /* the terminal component (NONE: all sinks together) */
    size_t reach; /* ranks that wait on it */
    size_t node;  /* OP/SHAPE: the node; ORDER: one node of the cycle */
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The value most of val[0 .. n) hold (NULL ones left out) and how many hold it: sorted, then counted by runs. */
static const char *majority(const char *const *val, size_t n, size_t *count)
{
    const char **v = ddp_xcalloc(n + 1, sizeof(*v)), *best = NULL;
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        if (val[j])
            v[k++] = val[j];
    qsort(v, k, sizeof(*v), cmp_str);
    *count = 0;
    for (size_t a = 0, b; a < k; a = b) {
        for (b = a; b < k && strcmp(v[a], v[b]) == 0; b++)
            ;
        if (b - a > *count) {
            *count = b - a;
            best = v[a];
        }
    }
    free(v);
    return best;
}

/* The majority of the values at node c (ops in pass 0, shapes in pass 1): culprit[] the others; false when all
 * that is known there agrees. */
static bool compare(const struct graph *G, size_t c, bool *culprit, struct ddp_fr_verdict *v, struct ddp_buf *b)
{
    const struct node *x = &G->node[c];
    const struct grp *gr = &G->grp[x->grp];
    const char **val = ddp_xcalloc(gr->count + 1, sizeof(*val));
    size_t *most_i = ddp_xcalloc(gr->count + 1, sizeof(*most_i)), *rest_i = ddp_xcalloc(gr->count + 1, sizeof(*rest_i));
    bool found = false;
    for (int pass = 0; pass < 2 && !found; pass++) {
        size_t known = 0, best_n = 0, nm = 0, nr = 0;
        const char *most = NULL, *other = NULL;
        for (size_t j = 0; j < gr->count; j++) {
            const struct ddp_fr_entry *e = ddp_waitgraph_entry_at(G->rec[G->order[gr->first + j]].g, x->seq);
            val[j] = e ? (pass == 0 ? e->op : e->shape) : NULL;
            known += val[j] != NULL;
        }
        if (known < 2)
            break;
        most = majority(val, gr->count, &best_n);
        for (size_t j = 0; j < gr->count; j++) {
            if (!val[j])
                continue;
            size_t i = G->rec[G->order[gr->first + j]].i;
            if (strcmp(val[j], most) == 0)
                most_i[nm++] = i;
            else {
                rest_i[nr++] = i;
                other = other ? other : val[j];
            }
        }
        if (!nr)
            continue;
        found = true;
        bool strict = best_n * 2 > known;
        v->kind = pass == 0 ? DDP_FR_OP : DDP_FR_SHAPE;
        for (size_t j = 0; strict && j < nr; j++) {
            culprit[rest_i[j]] = true;
            v->nculprits++;
        }
        const struct ddp_fr_entry *e0 = ddp_waitgraph_entry_at(ddp_fr_group(G->in[most_i[0]].fr, gr->name), x->seq);
        copy(v->op, sizeof(v->op), e0 ? e0->op : "");
        copy(v->other, sizeof(v->other), other);
        copy(v->shape, sizeof(v->shape), pass == 1 ? most : "");
        char lead[DDP_FR_RANKS], late[DDP_FR_RANKS];
        list(lead, sizeof(lead), G, most_i, nm);
        list(late, sizeof(late), G, rest_i, nr);
        struct ddp_fr_hop h = {0};
        copy(h.op, sizeof(h.op), v->op);
        h.seq = x->seq;
        copy(h.group, sizeof(h.group), gr->name);
        members(h.ranks, sizeof(h.ranks), G, x->grp);
        ddp_buf_printf(b, "%s mismatch at ", pass == 0 ? "op" : "shape");
        coll(b, &h);
        ddp_buf_puts(b, "): ");
        who(b, late, nr);
        if (pass == 0)
            ddp_buf_printf(b, " %s in %s, ", nr == 1 ? "is" : "are", other);
        else
            ddp_buf_printf(b, " %s %s, ", nr == 1 ? "has" : "have", other);
        who(b, lead, nm);
        ddp_buf_printf(b, pass == 0 ? " in %s" : " %s %s", pass == 0 ? most : nm == 1 ? "has" : "have", most);
        if (!strict)
            ddp_buf_puts(b, "; no majority: only the program says which side is wrong");
    }
    free(val);
    free(most_i);
    free(rest_i);
    return found;
}

/* Does rank i's own history say it should have entered group gy (where it is awaited) before group gx (where it
 * waits now)? Its last entries of both groups in the order it made them: the group that followed the longest earlier
 * run like the one before its wait. 1 yes, 0 no, -1 not known. */
static int left_order(const struct ddp_fr_state *fr, const char *gx, const char *gy)
{
    const struct ddp_fr_group *a = ddp_fr_group(fr, gx), *b = ddp_fr_group(fr, gy);
    if (!a || !b || !a->nentries || !b->nentries)
        return -1;
    long long from = a->e[0].created_ns > b->e[0].created_ns ? a->e[0].created_ns : b->e[0].created_ns;
    int seq[2 * DDP_FR_PER_GROUP];
    size_t k = 0, ia = 0, ib = 0;
    while (ia < a->nentries || ib < b->nentries) {
        bool take_a = ib == b->nentries || (ia < a->nentries && a->e[ia].created_ns <= b->e[ib].created_ns);
        const struct ddp_fr_entry *e = take_a ? &a->e[ia++] : &b->e[ib++];
        if (!e->created_ns)
            return -1;
        if (e->created_ns >= from && !e->p2p)
            seq[k++] = take_a ? 0 : 1;
    }
    if (k < 3 || seq[k - 1] != 0)
        return -1;
    size_t end = k - 2, best = 0, best_j = 0; /* the prefix seq[0 .. end]; what follows the best match of its end */
    for (size_t j = 0; j < end; j++) {
        size_t m = 0;
        while (m <= j && seq[j - m] == seq[end - m])
            m++;
        if (m && m >= best) {
            best = m;
            best_j = j;
        }
    }
    return best ? seq[best_j + 1] == 1 : -1;
}

/* ---------------------------------------------------------------- the verdict */

static void frames(struct ddp_buf *b, const struct ddp_fr_input *in, size_t n, const bool *culprit)
{
    for (size_t i = 0; i < n; i++)
        if (culprit[i] && in[i].frame && in[i].frame[0])
            ddp_buf_printf(b, "; rank %d is at %s", in[i].rank, in[i].frame);
}

static void disagreements(struct ddp_buf *b, const struct graph *G, const struct ddp_fr_verdict *v)
{
    for (size_t k = 0; k < G->ngrp; k++) {
        const struct grp *x = &G->grp[k];
        bool used = false;
        for (size_t h = 0; h < v->nhops && !used; h++)
            used = strcmp(v->hop[h].group, x->name) == 0;
        if (!used)
            continue;
        if (x->other_i != NONE)
            ddp_buf_printf(b, "; ranks disagree about group %s's members: rank %d says %s, rank %d says %s", x->name,
                           G->in[x->ranks_i].rank, ddp_fr_group(G->in[x->ranks_i].fr, x->name)->ranks,
                           G->in[x->other_i].rank, ddp_fr_group(G->in[x->other_i].fr, x->name)->ranks);
        if (x->desc_i != NONE)
            ddp_buf_printf(b, "; ranks disagree about group %s's desc: rank %d says %s, rank %d says %s", x->name,
                           G->in[G->rec[G->order[x->first]].i].rank, G->rec[G->order[x->first]].g->desc,
                           G->in[x->desc_i].rank, ddp_fr_group(G->in[x->desc_i].fr, x->name)->desc);
    }
}

static void waited(struct ddp_fr_verdict *v, const struct graph *G, const bool *seen)
{
    v->waited_ms = -1;
    for (size_t i = 0; i < G->n; i++)
        if (seen[i] && G->pend[i] != NONE && (v->waited_ms < 0 || G->in[i].still_ms < v->waited_ms))
            v->waited_ms = G->in[i].still_ms;
}

/* BEHIND: culprit[] ranks never entered the nodes that wait on them; the chain outwards from there. */
static void tell_behind(const struct graph *G, const bool *culprit, size_t *queue, bool *seen, bool *told,
                        struct ddp_fr_verdict *v, struct ddp_buf *b)
{
    size_t k = 0;
    for (size_t i = 0; i < G->n; i++)
        if (culprit[i]) {
            queue[k++] = i;
            seen[i] = true;
        }
    v->kind = DDP_FR_BEHIND;
    v->nculprits = k;
    /* the nodes the culprits are behind in, told first: those where only culprits are behind ("never entered"),
     * then the others */
    size_t ncul = k;
    for (int pass = 0; pass < 2; pass++)
        for (size_t q = 0; q < ncul; q++)
            for (size_t e = G->rin_first[queue[q]]; e < G->rin_first[queue[q] + 1]; e++) {
                size_t c = G->rin[e];
                const struct node *x = &G->node[c];
                bool only = true;
                for (size_t j = 0; j < x->nbeh && only; j++)
                    only = culprit[G->behind[x->first + j]];
                if (told[c] || only != (pass == 0))
                    continue;
                told[c] = true;
                struct ddp_fr_hop hop, *h = &hop;
                hop_of(G, c, v, h);
                if (!v->group[0]) {
                    copy(v->group, sizeof(v->group), h->group);
                    copy(v->ranks, sizeof(v->ranks), h->ranks);
                    copy(v->op, sizeof(v->op), h->op);
                    v->seq = h->seq;
                    ddp_buf_puts(b, b->len ? "; " : "");
                    who(b, h->on, x->nbeh);
                    ddp_buf_puts(b, " never entered ");
                    coll(b, h);
                    lasts(b, G, x, h);
                    ddp_buf_puts(b, ", where ");
                    who(b, h->waiting, x->nwait);
                    ddp_buf_puts(b, x->nwait == 1 ? " waits" : " wait");
                } else
                    link_text(b, G, c, h);
                for (size_t j = 0; j < x->nwait; j++) {
                    size_t i = G->waiters[x->wfirst + j];
                    if (!seen[i]) {
                        seen[i] = true;
                        queue[k++] = i;
                    }
                }
            }
    chain(G, queue, k, seen, told, v, b, true, NULL);
}

/* The cycle of component comp, walked from its first rank: the ranks, their nodes; returns its length. */
static size_t cycle(const struct graph *G, const size_t *comp, size_t cc, size_t *ranks, size_t *nodes, size_t max)
{
    size_t start = NONE, len = 0;
    for (size_t i = 0; i < G->n && start == NONE; i++)
        if (comp[i] == cc)
            start = i;
    for (size_t y = start; y != NONE && len < max;) {
        size_t c = G->pend[y], next = NONE;
        ranks[len] = y;
        nodes[len++] = c;
        for (size_t b = 0; b < G->node[c].nbeh && next == NONE; b++)
            if (comp[G->behind[G->node[c].first + b]] == cc)
                next = G->behind[G->node[c].first + b];
        for (size_t j = 0; j < len && next != NONE; j++)
            if (ranks[j] == next) { /* the cycle is from there on */
                memmove(ranks, ranks + j, (len - j) * sizeof(*ranks));
                memmove(nodes, nodes + j, (len - j) * sizeof(*nodes));
                return len - j;
            }
        y = next;
    }
    return len;
}

/* The graph's strongly connected components, their sizes and whether an edge leaves each, and the scratch the
 * walks share. */
struct walk {
    size_t V, ncomp;
    size_t *comp, *csize, *queue;
    bool *cout, *seen, *told;
};

/* What reaches the most ranks: the sinks (ranks waited on that wait on nothing) together, or a terminal
 * component (a collective all entered that disagrees: a mismatch; a cycle: an ordering deadlock). */
static struct finding find_best(const struct graph *G, size_t n, struct walk *w)
{
    struct finding best = {DDP_FR_NONE, NONE, 0, NONE};
    struct ddp_fr_verdict scratch;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (G->pend[i] == NONE && G->rin_first[i + 1] > G->rin_first[i]) {
            w->queue[k++] = i;
            w->seen[i] = true;
        }
    if (k) {
        memset(&scratch, 0, sizeof(scratch));
        best = (struct finding){DDP_FR_BEHIND, NONE,
                                chain(G, w->queue, k, w->seen, w->told, &scratch, NULL, false, NULL), NONE};
    }
    for (size_t cc = 0; cc < w->ncomp; cc++) {
        if (w->cout[cc])
            continue;
        size_t c = NONE, r = NONE;
        for (size_t u = 0; u < w->V && (c == NONE || r == NONE) && w->csize[cc] > 1; u++)
            if (w->comp[u] == cc)
                *(u < n ? &r : &c) = u < n ? u : u - n;
        if (w->csize[cc] == 1) {
            for (size_t u = n; u < w->V && c == NONE; u++)
                if (w->comp[u] == cc)
                    c = u - n;
            if (c == NONE)
                continue; /* a rank: a sink (above) or idle */
        }
        memset(w->seen, 0, n * sizeof(*w->seen));
        memset(w->told, 0, G->nnode * sizeof(*w->told));
        k = 0;
        for (size_t i = 0; i < n; i++)
            if (w->comp[i] == cc || (G->pend[i] != NONE && w->comp[n + G->pend[i]] == cc && w->csize[cc] == 1)) {
                w->queue[k++] = i;
                w->seen[i] = true;
            }
        memset(&scratch, 0, sizeof(scratch));
        bool *scratch_c = ddp_xcalloc(n + 1, sizeof(bool));
        struct ddp_buf nob = {0};
        bool mism = w->csize[cc] == 1 && compare(G, c, scratch_c, &scratch, &nob);
        free(scratch_c);
        ddp_buf_free(&nob);
        if (w->csize[cc] == 1 && !mism)
            continue; /* all in it and agreeing: in flight, nobody to name */
        size_t reach = chain(G, w->queue, k, w->seen, w->told, &scratch, NULL, false, NULL);
        if (reach > best.reach)
            best = (struct finding){w->csize[cc] == 1 ? scratch.kind : DDP_FR_ORDER, cc, reach, c};
    }
    return best;
}

/* OP or SHAPE: the ranks that differ at the node, and who waits on it. */
static void tell_mismatch(const struct graph *G, const struct finding *best, bool *culprit, struct walk *w,
                          struct ddp_fr_verdict *v, struct ddp_buf *b)
{
    const struct node *x = &G->node[best->node];
    compare(G, best->node, culprit, v, b);
    copy(v->group, sizeof(v->group), G->grp[x->grp].name);
    members(v->ranks, sizeof(v->ranks), G, x->grp);
    v->seq = x->seq;
    w->told[best->node] = true;
    struct ddp_fr_hop h;
    hop_of(G, best->node, v, &h);
    size_t k = 0;
    for (size_t j = 0; j < x->nwait; j++) {
        w->queue[k++] = G->waiters[x->wfirst + j];
        w->seen[w->queue[k - 1]] = true;
    }
    chain(G, w->queue, k, w->seen, w->told, v, b, true, NULL);
}

/* ORDER, a deadlock of len ranks cr[] waiting in nodes cn[] (each awaited in the one before): told as a cycle. */
static void tell_cycle(const struct graph *G, const struct ddp_fr_input *in, const size_t *cr, const size_t *cn,
                       size_t len, struct walk *w, struct ddp_fr_verdict *v, struct ddp_buf *b)
{
    v->kind = DDP_FR_ORDER;
    ddp_buf_puts(b, "ordering deadlock: ");
    for (size_t j = 0; j < len; j++) {
        struct ddp_fr_hop h;
        hop_of(G, cn[j], v, &h);
        w->told[cn[j]] = true;
        w->seen[cr[j]] = true;
        w->queue[j] = cr[j];
        if (j)
            ddp_buf_puts(b, ", which waits in ");
        else
            ddp_buf_printf(b, "rank %d waits in ", in[cr[j]].rank);
        coll(b, &h);
        ddp_buf_printf(b, ") for rank %d", in[cr[(j + 1) % len]].rank);
    }
    const struct node *a = &G->node[cn[0]], *z = &G->node[cn[len > 1 ? 1 : 0]];
    copy(v->group, sizeof(v->group), G->grp[a->grp].name);
    copy(v->group2, sizeof(v->group2), G->grp[z->grp].name);
    members(v->ranks, sizeof(v->ranks), G, a->grp);
    copy(v->op, sizeof(v->op), op_at(G, a));
    v->seq = a->seq;
    ddp_buf_puts(b, ": the ranks entered the groups in different orders (");
    for (size_t j = 0; j < len; j++) {
        const struct node *mine = &G->node[cn[j]], *theirs = &G->node[cn[(j + len - 1) % len]];
        ddp_buf_printf(b, "%srank %d group %s's #%lld before group %s's #%lld", j ? ", " : "", in[cr[j]].rank,
                       G->grp[mine->grp].name, mine->seq, G->grp[theirs->grp].name, theirs->seq);
    }
    ddp_buf_puts(b, ")");
    chain(G, w->queue, len, w->seen, w->told, v, b, true, NULL);
}

/* ORDER: the rank(s) that left the order their earlier steps show are behind; with none, the cycle itself. */
static void tell_order(const struct graph *G, const struct ddp_fr_input *in, const struct finding *best, bool *culprit,
                       struct walk *w, struct ddp_fr_verdict *v, struct ddp_buf *b)
{
    size_t cr[DDP_FR_HOPS], cn[DDP_FR_HOPS];
    size_t len = cycle(G, w->comp, best->comp, cr, cn, DDP_FR_HOPS);
    int left[DDP_FR_HOPS];
    size_t nleft = 0, nknown = 0;
    for (size_t j = 0; j < len; j++) { /* rank cr[j] waits in cn[j], and is awaited in cn[j - 1] */
        const struct node *mine = &G->node[cn[j]], *theirs = &G->node[cn[(j + len - 1) % len]];
        left[j] = left_order(in[cr[j]].fr, G->grp[mine->grp].name, G->grp[theirs->grp].name);
        nleft += left[j] == 1;
        nknown += left[j] >= 0;
    }
    if (!(nleft && nleft < len && nknown == len)) {
        tell_cycle(G, in, cr, cn, len, w, v, b);
        return;
    }
    for (size_t j = 0; j < len; j++)
        culprit[cr[j]] = left[j] == 1;
    tell_behind(G, culprit, w->queue, w->seen, w->told, v, b);
    for (size_t j = 0; j < len; j++)
        if (left[j] == 1)
            ddp_buf_printf(b, "; rank %d went on to group %s's #%lld first, unlike its earlier steps", in[cr[j]].rank,
                           G->grp[G->node[cn[j]].grp].name, G->node[cn[j]].seq);
}

void ddp_fr_decide(const struct ddp_fr_input *in, size_t n, bool *culprit, struct ddp_fr_verdict *v)
{
    struct graph G;
    struct walk w;
    memset(v, 0, sizeof(*v));
    memset(culprit, 0, n * sizeof(*culprit));
    ddp_waitgraph_build(&G, in, n);
    w.V = n + G.nnode;
    w.comp = ddp_xcalloc(w.V + 1, sizeof(*w.comp));
    w.ncomp = ddp_waitgraph_components(&G, w.comp);
    w.csize = ddp_xcalloc(w.ncomp + 1, sizeof(*w.csize));
    w.cout = ddp_xcalloc(w.ncomp + 1, sizeof(*w.cout));
    for (size_t u = 0; u < w.V; u++) {
        w.csize[w.comp[u]]++;
        for (size_t k = 0; k < ddp_waitgraph_out_deg(&G, u); k++)
            w.cout[w.comp[u]] |= w.comp[ddp_waitgraph_out_at(&G, u, k)] != w.comp[u];
    }
    w.queue = ddp_xcalloc(n + 1, sizeof(*w.queue));
    w.seen = ddp_xcalloc(n + 1, sizeof(*w.seen));
    w.told = ddp_xcalloc(G.nnode + 1, sizeof(*w.told));
    struct finding best = find_best(&G, n, &w);
    struct ddp_buf b = {0};
    memset(w.seen, 0, n * sizeof(*w.seen));
    memset(w.told, 0, G.nnode * sizeof(*w.told));
    if (best.kind == DDP_FR_BEHIND && best.comp == NONE) {
        for (size_t i = 0; i < n; i++)
            culprit[i] = G.pend[i] == NONE && G.rin_first[i + 1] > G.rin_first[i];
        tell_behind(&G, culprit, w.queue, w.seen, w.told, v, &b);
    } else if (best.kind == DDP_FR_OP || best.kind == DDP_FR_SHAPE) {
        tell_mismatch(&G, &best, culprit, &w, v, &b);
    } else if (best.kind == DDP_FR_ORDER) {
        tell_order(&G, in, &best, culprit, &w, v, &b);
    }
    if (v->kind != DDP_FR_NONE) {
        waited(v, &G, w.seen);
        if (v->waited_ms >= 0)
            ddp_buf_printf(&b, "; no progress in the recorders for %lld s", v->waited_ms / 1000);
        disagreements(&b, &G, v);
        frames(&b, in, n, culprit);
        copy(v->why, sizeof(v->why), b.data);
    }
    ddp_buf_free(&b);
    free(w.queue);
    free(w.seen);
    free(w.told);
    free(w.comp);
    free(w.csize);
    free(w.cout);
    ddp_waitgraph_release(&G);
}

/* INSIDE: a rank with a pending collective that no member of that group is past; OUTSIDE: the others with a
 * recorder (behind, or waiting in nothing); NONE: no recorder. */
bool ddp_fr_places(const struct ddp_fr_state *const *fr, size_t n, enum ddp_suspect_place *place)
{
    struct ddp_fr_input *in = ddp_xcalloc(n + 1, sizeof(*in));
    struct graph G;
    size_t have = 0;
    for (size_t i = 0; i < n; i++)
        in[i].fr = fr[i];
    ddp_waitgraph_build(&G, in, n);
    for (size_t i = 0; i < n; i++)
        have += G.rbeg[i + 1] > G.rbeg[i];
    for (size_t i = 0; have >= 2 && i < n; i++) {
        size_t c = G.pend[i]; /* it waits: in a collective nobody of its group is past, for someone or in flight */
        const struct ddp_fr_group *g = c != NONE ? G.rec[G.pend_rec[i]].g : NULL;
        bool waits = g && g->enqueued == G.grp[G.node[c].grp].max_enq && (g->completed >= 0 || G.node[c].nbeh > 0);
        place[i] = G.rbeg[i + 1] == G.rbeg[i] ? DDP_SUSPECT_NONE : waits ? DDP_SUSPECT_INSIDE : DDP_SUSPECT_OUTSIDE;
    }
    ddp_waitgraph_release(&G);
    free(in);
    return have >= 2;
}

json_t *ddp_fr_chain_json(const struct ddp_fr_verdict *v)
{
    json_t *a = json_array();
    for (size_t h = 0; h < v->nhops && h < DDP_FR_HOPS; h++) {
        const struct ddp_fr_hop *x = &v->hop[h];
        json_array_append_new(a, ddp_jsonlog_pack("{s:s, s:s, s:s?, s:I, s:s?, s:s, s:o?}", "waiting", x->waiting,
                                                  "group", x->group, "ranks", x->ranks[0] ? x->ranks : NULL, "seq",
                                                  (json_int_t)x->seq, "op", x->op[0] ? x->op : NULL, "on", x->on,
                                                  "last", x->last >= 0 ? json_integer(x->last) : NULL));
    }
    return a;
}

json_t *ddp_fr_verdict_json(const struct ddp_fr_verdict *v)
{
    return ddp_jsonlog_pack("{s:s, s:s, s:s?, s:s?, s:I, s:s?, s:s?, s:s?, s:I, s:o}", "verdict",
                            ddp_fr_kind_name(v->kind), "pg", v->group, "pg2", v->group2[0] ? v->group2 : NULL, "ranks",
                            v->ranks[0] ? v->ranks : NULL, "seq", (json_int_t)v->seq, "op", v->op[0] ? v->op : NULL,
                            "other", v->other[0] ? v->other : NULL, "shape", v->shape[0] ? v->shape : NULL, "waited_ms",
                            (json_int_t)v->waited_ms, "chain", ddp_fr_chain_json(v));
}
