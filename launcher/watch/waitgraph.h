/* waitgraph: the wait-for graph of the ranks' flight recorders (fr.h's input), for waitfor.c's verdict only:
 * its representation, building and walking it. Does not judge nor say anything in words (waitfor.c). */
#ifndef DDP_WAITGRAPH_H
#define DDP_WAITGRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "watch/fr.h"

#define NONE ((size_t)-1)

/* One rank's view of one named group. */
struct rec {
    size_t i; /* the rank's index in in[] */
    const struct ddp_fr_group *g;
};

/* One group, known by its name across ranks. */
struct grp {
    const char *name;
    size_t first, count; /* its reporters: the recs order[first .. first + count) */
    long long min_enq;   /* the lowest last enqueued collective among them */
    long long max_enq;   /* the highest */
    size_t ranks_i;      /* the reporter whose member list is used (NONE: none said; then the reporters) */
    size_t other_i;      /* a reporter that names other members (NONE: all agree) */
    size_t desc_i;       /* a reporter whose desc differs from the first's (NONE: all agree) */
    size_t nodes;        /* its first collective node, NONE */
};

/* One collective (group, N) that some rank waits in. */
struct node {
    size_t grp;
    long long seq;
    size_t next;          /* the group's next node, NONE */
    size_t first, nbeh;   /* the members behind it (not enqueued N): behind[first .. first + nbeh) */
    size_t wfirst, nwait; /* the ranks that wait in it: waiters[wfirst .. ] (filled after all nodes are made) */
};

struct graph {
    const struct ddp_fr_input *in;
    size_t n, nrec, ngrp, nnode;
    struct rec *rec;
    size_t *rbeg;   /* rank i's recs: rec[rbeg[i] .. rbeg[i + 1]) */
    size_t *grp_of; /* rec -> its group */
    size_t *order;  /* recs by group */
    struct grp *grp;
    struct node *node;
    size_t *pend; /* rank -> the node it waits in, NONE */
    size_t *pend_rec;
    size_t *behind, nbehind, cap_behind;
    size_t *waiters;         /* by node: the ranks pending in it */
    size_t *rin_first, *rin; /* rank -> the nodes it is behind in (reverse edges) */
    size_t *idx_of, nidx;    /* global rank -> its index in in[] (NONE: not there) */
};

/* The graph of the n ranks' recorders in[] (borrowed while G lives). Free with ddp_waitgraph_release(). Aborts on
 * ENOMEM. */
void ddp_waitgraph_build(struct graph *G, const struct ddp_fr_input *in, size_t n);
void ddp_waitgraph_release(struct graph *G);
/* Vertices: ranks 0 .. n-1, nodes n .. n+m-1. The number of edges out of v, and its k-th edge's head. */
size_t ddp_waitgraph_out_deg(const struct graph *G, size_t v);
size_t ddp_waitgraph_out_at(const struct graph *G, size_t v, size_t k);
/* Strongly connected components (Tarjan, iterative): comp[v] (room for n + nnode); returns their number. */
size_t ddp_waitgraph_components(const struct graph *G, size_t *comp);
/* Group g's entry of collective seq (not p2p), or NULL. */
const struct ddp_fr_entry *ddp_waitgraph_entry_at(const struct ddp_fr_group *g, long long seq);

#endif
