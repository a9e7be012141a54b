/* layout: node 0's pure decisions for a job on several nodes: which nodes take part in an attempt, with how many
 * workers each, which global ranks and group ranks they get; and how an attempt ends across the nodes (the first
 * failure is the root cause; the attempt is over when every node that took part ended). No loop, no sockets. */
#ifndef DDP_LAYOUT_H
#define DDP_LAYOUT_H

#include <stdbool.h>

/* What one node runs in an attempt. */
struct ddp_layout_assign {
    int nproc;      /* its workers; 0 = the node takes no part in the attempt (it is sent no START) */
    int rank_base;  /* global rank of its local rank 0 */
    int group_rank; /* its GROUP_RANK: its index among the nodes that take part */
};

/* One node as node 0 knows it. */
struct ddp_layout_node {
    bool up;          /* joined (node 0 itself is always up) */
    int nproc;        /* workers it runs in this attempt (its own count, after any downsizing) */
    const char *host; /* its host name (NULL or "" = unknown), for the order of group ranks */
};

/* Lay an attempt out over nodes[0..nnodes-1] (by node rank). Node 0 (the agent serving the rendezvous) gets
 * group rank 0; with order_by_host the other nodes follow in the order of their host names (node rank breaks
 * ties), so that the same hosts get the same ranks whatever order they joined in; otherwise in node-rank order.
 * Global ranks are consecutive blocks in group-rank order, each node's block as large as its own nproc. Fills
 * assign[0..nnodes-1] (0 workers for nodes that are down) and *world_size; returns the number of nodes taking
 * part, or -ENODEV when node 0 is down or has no workers, or fewer than min_nodes nodes are up (nnodes MIN:MAX). */
int ddp_layout_nodes(int nnodes, const struct ddp_layout_node *nodes, bool order_by_host, int min_nodes,
                     struct ddp_layout_assign *assign, int *world_size);

/* A node's worker count after downsizing: node 0 went from full to now workers; every node keeps the same share
 * of its own count (rounded down, at least 1). */
int ddp_layout_scale(int own, int full, int now);

/* How one attempt ends across the nodes, as node 0 sees it (its own workers count as node 0). */
struct ddp_layout_round {
    int attempt;
    int nnodes;
    unsigned char *state; /* per node: 0 takes no part, 1 running, 2 ended well, 3 failed or lost */
    int running;          /* nodes still running */
    int failed_node;      /* the first node whose attempt failed (the root cause), or -1 */
    int failed_status;
    char failed_reason[512];
};
/* Begin attempt `attempt` with the nodes that have assign[n].nproc > 0. The first call allocates; free with
 * ddp_layout_round_free(). */
void ddp_layout_round_begin(struct ddp_layout_round *r, int nnodes, int attempt,
                            const struct ddp_layout_assign *assign);
/* Node `node` says attempt `attempt` ended with status (0 = its workers all succeeded; a lost node is a failure,
 * e.g. status 1 and reason "node 2 lost: ..."). Returns true when this is the attempt's first failure: node 0 then
 * stops its own workers and sends STOP to the others. Reports for another attempt, from a node that takes no part
 * or that already ended are ignored (false). */
bool ddp_layout_round_end(struct ddp_layout_round *r, int attempt, int node, int status, const char *reason);
/* Every node taking part has ended: node 0 can decide (restart, downsize, exit) and send START or EXIT. */
bool ddp_layout_round_done(const struct ddp_layout_round *r);
void ddp_layout_round_free(struct ddp_layout_round *r);

#endif
