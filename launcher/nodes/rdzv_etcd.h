/* rdzv_etcd: the agents of a job on several nodes meet and decide through etcd (etcd.h's client), so that no
 * node must survive: each agent holds a lease whose TTL is lost_after; it takes a node rank under the job's
 * prefix by compare-and-swap (0 when free, else a free one at random); the decision-maker is elected (the lowest
 * create_revision under the election prefix; when its lease goes, the next one decides); every attempt's decision
 * (MASTER_ADDR and PORT, world size, the nodes' rank blocks), and "stop attempt N" and "exit with S", is one key every
 * agent watches. Every value it writes is signed with the job secret's HMAC; a value that is not is refused with one
 * line. It speaks to its caller in coord.h's events, as a node that is not node 0 (JOINED, START, STOP, EXIT, LOST):
 * the node agent (roles.c) runs them as it runs node 0's word. It holds no worker and no policy of its own
 * beyond the decision-maker's: restart while max_restarts allows and MIN nodes are up, else exit.
 *
 * Keys under /ddplaunch/<rdzv id>/: node/<k> (leased: nproc, MASTER_PORT, address, host), elect/<lease>
 * (leased), decision (not leased: it outlives any agent), report/<attempt>/<k> (leased: how node k's part of the
 * attempt ended). The last agent to leave removes the prefix. */
#ifndef DDP_RDZV_ETCD_H
#define DDP_RDZV_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "base/util.h"
#include "nodes/coord.h"

struct ddp_rdzv_etcd;

struct ddp_rdzv_etcd_config {
    const char *endpoints; /* HOST:PORT[,HOST:PORT...] */
    const char *conf;      /* rdzv_conf: protocol=https, cacert=, cert=, key= (torchrun's names) */
    const char *id;        /* the rendezvous id: the job's prefix */
    const char *secret;    /* the job secret: the HMAC key of every value */
    const char *job;       /* the job's identity (rdzv.h), signed into every value */
    int min_nodes, max_nodes;
    int nproc;        /* this node's workers */
    const char *host; /* this node's host name */
    int master_port;  /* the MASTER_PORT this node reserved, for an attempt whose group rank 0 it is */
    int max_restarts; /* the decision-maker restarts while attempt < max_restarts */
    long long lost_after_ms, join_timeout_ms, last_call_ms;
};

/* Join through etcd on loop; events go to cb(NULL, ev, data). 0 and *out (ddp_rdzv_etcd_close, then
 * ddp_rdzv_etcd_free after the loop), or -EINVAL with err (endpoints or rdzv_conf not understood). Joining is
 * asynchronous: a failure arrives as DDP_COORD_LOST. */
int ddp_rdzv_etcd_start(uv_loop_t *loop, const struct ddp_rdzv_etcd_config *cfg, ddp_coord_cb cb, void *data,
                        struct ddp_rdzv_etcd **out, struct ddp_err *err);
/* How this node's part of attempt ended (0 = its workers succeeded). Retried while etcd has no quorum (one
 * line says so), up to join_timeout; then DDP_COORD_LOST. */
void ddp_rdzv_etcd_report(struct ddp_rdzv_etcd *r, int attempt, int status, const char *why);
/* The node rank this agent holds (-1 before it joined), and MASTER_ADDR of the attempt last started here. */
int ddp_rdzv_etcd_node(const struct ddp_rdzv_etcd *r);
const char *ddp_rdzv_etcd_master_addr(const struct ddp_rdzv_etcd *r);
/* Leave: revoke the lease (its keys go), remove the job's prefix when no node is left. No events after. */
void ddp_rdzv_etcd_close(struct ddp_rdzv_etcd *r);
void ddp_rdzv_etcd_free(struct ddp_rdzv_etcd *r);

/* rdzv_conf's TLS keys into cfg (pure): protocol=http|https, cacert, cert, key. Strings point into *owned
 * (caller frees). 0, or -EINVAL with err for another protocol. */
struct ddp_etcd_config;
int ddp_rdzv_etcd_tls(const char *conf, struct ddp_etcd_config *cfg, char **owned, struct ddp_err *err);

#endif
