/* waitgraph: the wait-for graph of the ranks' flight recorders that waitfor.c reads into the hang verdict: a
 * rank -> the collective it waits in -> the members of that group that have not enqueued it, and its strongly
 * connected components. Builds and walks; says nothing in words (waitfor.c). Pure: no files, no clock. */
#include "watch/waitgraph.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

const struct ddp_fr_entry *ddp_waitgraph_entry_at(const struct ddp_fr_group *g, long long seq)
{
    for (size_t i = g->nentries; i-- > 0;)
        if (!g->e[i].p2p && g->e[i].seq == seq)
            return &g->e[i];
    return NULL;
}

/* ---------------------------------------------------------------- the graph */

static void groups(struct graph *G)
{
    size_t cap = 16;
    while (cap < 2 * G->nrec)
        cap *= 2;
    size_t *slot = ddp_xcalloc(cap, sizeof(*slot)); /* group index + 1 */
    size_t *count = ddp_xcalloc(G->nrec + 1, sizeof(*count));
    G->grp = ddp_xcalloc(G->nrec + 1, sizeof(*G->grp));
    G->grp_of = ddp_xcalloc(G->nrec + 1, sizeof(*G->grp_of));
    for (size_t r = 0; r < G->nrec; r++) {
        const char *name = G->rec[r].g->id;
        size_t h = (size_t)hash(name) & (cap - 1);
        while (slot[h] && strcmp(G->grp[slot[h] - 1].name, name) != 0)
            h = (h + 1) & (cap - 1);
        if (!slot[h]) {
            struct grp *x = &G->grp[G->ngrp];
            x->name = name;
            x->ranks_i = x->other_i = x->desc_i = x->nodes = NONE;
            x->min_enq = INT64_MAX;
            x->max_enq = -1;
            slot[h] = ++G->ngrp;
        }
        G->grp_of[r] = slot[h] - 1;
        count[slot[h] - 1]++;
    }
    size_t at = 0;
    for (size_t k = 0; k < G->ngrp; k++) {
        G->grp[k].first = at;
        at += count[k];
    }
    G->order = ddp_xcalloc(G->nrec + 1, sizeof(*G->order));
    for (size_t r = 0; r < G->nrec; r++) {
        struct grp *x = &G->grp[G->grp_of[r]];
        const struct ddp_fr_group *g = G->rec[r].g;
        const struct ddp_fr_group *said = x->ranks_i != NONE ? ddp_fr_group(G->in[x->ranks_i].fr, x->name) : NULL;
        const struct ddp_fr_group *first = x->count ? G->rec[G->order[x->first]].g : NULL;
        G->order[x->first + x->count++] = r;
        if (g->enqueued < x->min_enq)
            x->min_enq = g->enqueued;
        if (g->enqueued > x->max_enq)
            x->max_enq = g->enqueued;
        if (g->ranks[0] && !said)
            x->ranks_i = G->rec[r].i;
        else if (g->ranks[0] && strcmp(said->ranks, g->ranks) != 0 && x->other_i == NONE)
            x->other_i = G->rec[r].i;
        if (first && g->desc[0] && first->desc[0] && strcmp(first->desc, g->desc) != 0 && x->desc_i == NONE)
            x->desc_i = G->rec[r].i;
    }
    free(slot);
    free(count);
}

static void push_behind(struct graph *G, struct node *c, size_t i)
{
    if (G->nbehind == G->cap_behind) {
        G->cap_behind = G->cap_behind ? 2 * G->cap_behind : 64;
        G->behind = ddp_xrealloc(G->behind, G->cap_behind * sizeof(*G->behind));
    }
    G->behind[G->nbehind++] = i;
    c->nbeh++;
}

/* Does rank i's recorder show no group that it could not name? (Then a group it does not report, it never used.) */
static bool all_named(const struct ddp_fr_state *fr)
{
    for (size_t k = 0; k < fr->ngroups; k++)
        if (!fr->g[k].id[0] && fr->g[k].enqueued > 0)
            return false;
    return true;
}

/* The members a group's member list names that have a recorder but do not report the group: they never entered
 * any of its collectives (a rank reports a group from its first collective there), so they are behind c. */
static void unreported(struct graph *G, struct node *c)
{
    const struct grp *x = &G->grp[c->grp];
    if (x->ranks_i == NONE || c->seq < 1)
        return;
    const char *s = ddp_fr_group(G->in[x->ranks_i].fr, x->name)->ranks;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s)
            break;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        for (long r = a; r <= b && r >= 0 && (size_t)r < G->nidx; r++) {
            size_t i = G->idx_of[r];
            if (i != NONE && G->in[i].fr && !ddp_fr_group(G->in[i].fr, x->name) && all_named(G->in[i].fr))
                push_behind(G, c, i);
        }
        s = *end == ',' ? end + 1 : end;
    }
}

/* The node (group k, seq), made when new with the members behind it. */
static size_t node_at(struct graph *G, size_t k, long long seq)
{
    struct grp *x = &G->grp[k];
    for (size_t c = x->nodes; c != NONE; c = G->node[c].next)
        if (G->node[c].seq == seq)
            return c;
    struct node *c = &G->node[G->nnode];
    *c = (struct node){k, seq, x->nodes, G->nbehind, 0, 0, 0};
    x->nodes = G->nnode;
    for (size_t j = 0; x->min_enq < seq && j < x->count; j++) {
        const struct rec *r = &G->rec[G->order[x->first + j]];
        if (r->g->enqueued >= seq)
            continue;
        push_behind(G, c, r->i);
    }
    unreported(G, c);
    return G->nnode++;
}

/* Each rank's oldest pending collective: where its last completed is behind its last enqueued (N = completed + 1),
 * or where completion is not known and a member is behind (N = enqueued). Several: the one enqueued first, else one
 * where a member is behind. */
static void pending(struct graph *G)
{
    G->pend = ddp_xcalloc(G->n + 1, sizeof(*G->pend));
    G->pend_rec = ddp_xcalloc(G->n + 1, sizeof(*G->pend_rec));
    G->node = ddp_xcalloc(G->n + 1, sizeof(*G->node));
    for (size_t i = 0; i < G->n; i++) {
        size_t best = NONE;
        long long best_seq = -1, best_ns = 0;
        bool best_beh = false;
        for (size_t r = G->rbeg[i]; r < G->rbeg[i + 1]; r++) {
            const struct ddp_fr_group *g = G->rec[r].g;
            long long seq = g->completed >= 0 ? (g->completed < g->enqueued ? g->completed + 1 : -1)
                                              : (g->enqueued > 0 ? g->enqueued : -1);
            if (seq < 0)
                continue;
            bool beh = G->grp[G->grp_of[r]].min_enq < seq;
            const struct ddp_fr_entry *e = ddp_waitgraph_entry_at(g, seq);
            long long ns = e ? e->created_ns : 0;
            bool better = best == NONE || (ns && best_ns ? ns < best_ns : beh && !best_beh);
            if (better) {
                best = r;
                best_seq = seq;
                best_ns = ns;
                best_beh = beh;
            }
        }
        G->pend_rec[i] = best;
        G->pend[i] = best == NONE ? NONE : node_at(G, G->grp_of[best], best_seq);
    }
    /* reverse edges: the ranks waiting in each node, the nodes each rank is behind in */
    size_t *cnt = ddp_xcalloc(G->nnode + 1, sizeof(*cnt));
    for (size_t i = 0; i < G->n; i++)
        if (G->pend[i] != NONE)
            cnt[G->pend[i]]++;
    G->waiters = ddp_xcalloc(G->n + 1, sizeof(*G->waiters));
    for (size_t c = 0, at = 0; c < G->nnode; c++) {
        G->node[c].wfirst = at;
        at += cnt[c];
    }
    for (size_t i = 0; i < G->n; i++)
        if (G->pend[i] != NONE) {
            struct node *c = &G->node[G->pend[i]];
            G->waiters[c->wfirst + c->nwait++] = i;
        }
    G->rin_first = ddp_xcalloc(G->n + 2, sizeof(*G->rin_first));
    G->rin = ddp_xcalloc(G->nbehind + 1, sizeof(*G->rin));
    for (size_t b = 0; b < G->nbehind; b++)
        G->rin_first[G->behind[b] + 2]++;
    for (size_t i = 2; i < G->n + 2; i++)
        G->rin_first[i] += G->rin_first[i - 1];
    for (size_t c = 0; c < G->nnode; c++)
        for (size_t b = 0; b < G->node[c].nbeh; b++)
            G->rin[G->rin_first[G->behind[G->node[c].first + b] + 1]++] = c;
    free(cnt);
}

/* The graph of the n ranks' recorders in[] (free with release) */
void ddp_waitgraph_build(struct graph *G, const struct ddp_fr_input *in, size_t n)
{
    memset(G, 0, sizeof(*G));
    G->in = in;
    G->n = n;
    G->rbeg = ddp_xcalloc(n + 2, sizeof(*G->rbeg));
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; in[i].fr && k < in[i].fr->ngroups; k++)
            G->nrec += in[i].fr->g[k].id[0] != 0;
    G->rec = ddp_xcalloc(G->nrec + 1, sizeof(*G->rec));
    G->nrec = 0;
    for (size_t i = 0; i < n; i++) {
        G->rbeg[i] = G->nrec;
        for (size_t k = 0; in[i].fr && k < in[i].fr->ngroups; k++)
            if (in[i].fr->g[k].id[0])
                G->rec[G->nrec++] = (struct rec){i, &in[i].fr->g[k]};
    }
    G->rbeg[n] = G->nrec;
    for (size_t i = 0; i < n; i++)
        if (in[i].rank >= 0 && (size_t)in[i].rank + 1 > G->nidx && in[i].rank < (1 << 22))
            G->nidx = (size_t)in[i].rank + 1;
    G->idx_of = ddp_xcalloc(G->nidx + 1, sizeof(*G->idx_of));
    for (size_t r = 0; r < G->nidx; r++)
        G->idx_of[r] = NONE;
    for (size_t i = 0; i < n; i++)
        if (in[i].rank >= 0 && (size_t)in[i].rank < G->nidx)
            G->idx_of[in[i].rank] = i;
    groups(G);
    pending(G);
}

void ddp_waitgraph_release(struct graph *G)
{
    free(G->rbeg);
    free(G->rec);
    free(G->grp);
    free(G->grp_of);
    free(G->order);
    free(G->node);
    free(G->pend);
    free(G->pend_rec);
    free(G->behind);
    free(G->waiters);
    free(G->rin_first);
    free(G->rin);
    free(G->idx_of);
}

/* vertices: ranks 0 .. n-1, nodes n .. n+m-1 */
size_t ddp_waitgraph_out_deg(const struct graph *G, size_t v)
{
    return v < G->n ? G->pend[v] != NONE : G->node[v - G->n].nbeh;
}

size_t ddp_waitgraph_out_at(const struct graph *G, size_t v, size_t k)
{
    return v < G->n ? G->n + G->pend[v] : G->behind[G->node[v - G->n].first + k];
}

/* Strongly connected components (Tarjan, iterative): comp[v]; returns their number. */
size_t ddp_waitgraph_components(const struct graph *G, size_t *comp)
{
    size_t V = G->n + G->nnode, idx = 0, ncomp = 0, sp = 0, cp = 0;
    size_t *index = ddp_xcalloc(V + 1, sizeof(*index)), *low = ddp_xcalloc(V + 1, sizeof(*low));
    size_t *stack = ddp_xcalloc(V + 1, sizeof(*stack)), *call = ddp_xcalloc(V + 1, sizeof(*call));
    size_t *edge = ddp_xcalloc(V + 1, sizeof(*edge));
    bool *on = ddp_xcalloc(V + 1, sizeof(*on));
    for (size_t v = 0; v < V; v++)
        index[v] = NONE;
    for (size_t s = 0; s < V; s++) {
        if (index[s] != NONE)
            continue;
        call[cp++] = s;
        index[s] = low[s] = idx++;
        stack[sp++] = s;
        on[s] = true;
        edge[s] = 0;
        while (cp) {
            size_t v = call[cp - 1];
            if (edge[v] < ddp_waitgraph_out_deg(G, v)) {
                size_t w = ddp_waitgraph_out_at(G, v, edge[v]++);
                if (index[w] == NONE) {
                    index[w] = low[w] = idx++;
                    stack[sp++] = w;
                    on[w] = true;
                    edge[w] = 0;
                    call[cp++] = w;
                } else if (on[w] && index[w] < low[v])
                    low[v] = index[w];
                continue;
            }
            if (low[v] == index[v]) {
                size_t w;
                do {
                    w = stack[--sp];
                    on[w] = false;
                    comp[w] = ncomp;
                } while (w != v);
                ncomp++;
            }
            cp--;
            if (cp && low[v] < low[call[cp - 1]])
                low[call[cp - 1]] = low[v];
        }
    }
    free(index);
    free(low);
    free(stack);
    free(call);
    free(edge);
    free(on);
    return ncomp;
}
