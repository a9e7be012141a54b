/* layout: node 0's pure decisions over the nodes. See layout.h. */
#include "nodes/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

struct order {
    const struct ddp_layout_node *nodes;
    bool by_host;
};

/* Is node a before node b in group-rank order? Node 0 first. */
static bool before(const struct order *o, int a, int b)
{
    if (a == 0 || b == 0)
        return a == 0;
    if (o->by_host) {
        const char *ha = o->nodes[a].host ? o->nodes[a].host : "", *hb = o->nodes[b].host ? o->nodes[b].host : "";
        int c = strcmp(ha, hb);
        if (c != 0)
            return c < 0;
    }
    return a < b;
}

int ddp_layout_nodes(int nnodes, const struct ddp_layout_node *nodes, bool order_by_host, int min_nodes,
                     struct ddp_layout_assign *assign, int *world_size)
{
    if (nnodes < 1 || !nodes[0].up || nodes[0].nproc <= 0)
        return -ENODEV;
    int *idx = ddp_xcalloc((size_t)nnodes, sizeof *idx);
    int taking = 0;
    struct order o = {nodes, order_by_host};
    for (int i = 0; i < nnodes; i++) {
        assign[i] = (struct ddp_layout_assign){0, 0, 0};
        if (!nodes[i].up || nodes[i].nproc <= 0)
            continue;
        int j = taking++; /* insertion sort: stable, fine for the node counts we meet */
        while (j > 0 && before(&o, i, idx[j - 1])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    int ranks = 0;
    for (int g = 0; g < taking; g++) {
        int i = idx[g];
        assign[i] = (struct ddp_layout_assign){nodes[i].nproc, ranks, g};
        ranks += nodes[i].nproc;
    }
    free(idx);
    if (taking < min_nodes)
        return -ENODEV;
    *world_size = ranks;
    return taking;
}

int ddp_layout_scale(int own, int full, int now)
{
    if (full <= 0 || now >= full)
        return own;
    long long v = (long long)own * now / full;
    return v < 1 ? 1 : (int)v;
}

void ddp_layout_round_begin(struct ddp_layout_round *r, int nnodes, int attempt, const struct ddp_layout_assign *assign)
{
    if (!r->state || r->nnodes != nnodes) {
        free(r->state);
        r->state = ddp_xcalloc((size_t)nnodes, 1);
    }
    r->nnodes = nnodes;
    r->attempt = attempt;
    r->running = 0;
    r->failed_node = -1;
    r->failed_status = 0;
    r->failed_reason[0] = '\0';
    for (int i = 0; i < nnodes; i++) {
        r->state[i] = assign[i].nproc > 0 ? 1 : 0;
        r->running += r->state[i];
    }
}

bool ddp_layout_round_end(struct ddp_layout_round *r, int attempt, int node, int status, const char *reason)
{
    if (attempt != r->attempt || node < 0 || node >= r->nnodes || r->state[node] != 1)
        return false;
    r->running--;
    r->state[node] = status == 0 ? 2 : 3;
    if (status == 0 || r->failed_node >= 0)
        return false;
    r->failed_node = node;
    r->failed_status = status;
    snprintf(r->failed_reason, sizeof r->failed_reason, "%s", reason ? reason : "");
    return true;
}

bool ddp_layout_round_done(const struct ddp_layout_round *r)
{
    return r->state && r->running == 0;
}

void ddp_layout_round_free(struct ddp_layout_round *r)
{
    free(r->state);
    memset(r, 0, sizeof *r);
}
