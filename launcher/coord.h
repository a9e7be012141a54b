/* coord: the authenticated TCP control channel between the agents of a multi-node job. Node 0 listens; every
 * other node joins it (HMAC-SHA256 challenge over a per-job secret, then every message MACed with a sequence
 * number), and node 0 sends "start attempt N with world size W on port P", "stop", "exit"; nodes report how
 * their attempt ended; a node whose agent dies or goes silent is reported lost within lost_after_ms.
 * It runs on the caller's libuv loop and decides nothing: the restart/downsize policy stays with its caller. */
#ifndef DDP_COORD_H
#define DDP_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util.h"

struct ddp_coord;

enum ddp_coord_event_kind {
    DDP_COORD_JOINED, /* node 0: node ev->node authenticated and joined. Other nodes: we joined node 0. */
    DDP_COORD_LOST,   /* node 0: node ev->node's agent went away (EOF, reset, or silent for lost_after_ms).
                         Other nodes: node 0 is gone, refused us, or could not be reached within join_timeout_ms
                         (ev->reason says which); the caller should stop its workers. No more events follow. */
    DDP_COORD_START,  /* other nodes: start attempt ev->attempt: ev->world_size ranks in all on
                         ev->group_world_size nodes, MASTER_PORT ev->master_port, ev->nproc workers here with
                         global ranks ev->rank_base.., GROUP_RANK ev->group_rank */
    DDP_COORD_STOP,   /* other nodes: stop attempt ev->attempt now; ev->reason says why */
    DDP_COORD_REPORT, /* node 0: node ev->node says attempt ev->attempt ended with ev->status (0 = all its workers
                         succeeded, else the root cause's exit status), ev->reason */
    DDP_COORD_EXIT,   /* other nodes: the job is over; exit with ev->status. No more events follow. */
};

struct ddp_coord_event {
    enum ddp_coord_event_kind kind;
    int node;
    int attempt;
    int world_size;
    int master_port;
    int nproc;
    int rank_base;
    int group_rank;
    int group_world_size;
    int status;
    const char *reason; /* never NULL; valid during the callback only */
};

typedef void (*ddp_coord_cb)(struct ddp_coord *c, const struct ddp_coord_event *ev, void *data);

struct ddp_coord_config {
    int node_rank;            /* 0 = listen, else join */
    int nnodes;               /* most nodes the job can have (nnodes MAX); node ranks 1..nnodes-1 may join */
    const char *addr;         /* node 0: address to listen on (NULL or "" = all); others: node 0's host */
    int port;                 /* control port; node 0 may give 0 for an ephemeral one (see ddp_coord_port) */
    const char *secret;       /* the per-job secret (>= 16 bytes; see ddp_coord_secret) */
    const char *run_id;       /* bound into the handshake: an agent of another run cannot join */
    long long heartbeat_ms;   /* node 0 pings every node this often; 0 = 1000 */
    long long lost_after_ms;  /* a peer silent this long is lost; 0 = 5000 */
    long long join_timeout_ms;/* other nodes: keep trying to reach node 0 this long; 0 = 60000 */
};

/* Start listening (node 0) or joining (others) on loop. Events go to cb(c, ev, data). 0 and *out, or a negative
 * errno with err ("coord: cannot listen on ADDR:PORT: address already in use"). Caller owns *out; release
 * with ddp_coord_close(). Joining is asynchronous: failures arrive as DDP_COORD_LOST. */
int ddp_coord_start(uv_loop_t *loop, const struct ddp_coord_config *cfg, ddp_coord_cb cb, void *data,
                    struct ddp_coord **out, struct ddp_err *err);

/* Node 0: the port it listens on (useful with port 0). */
int ddp_coord_port(const struct ddp_coord *c);
/* Node 0: how many other nodes are joined now, and whether node n is. */
int ddp_coord_joined(const struct ddp_coord *c);
bool ddp_coord_node_joined(const struct ddp_coord *c, int node);

/* What one node runs in an attempt. */
struct ddp_coord_assign {
    int nproc;      /* its workers; 0 = the node takes no part in the attempt (it is sent no START) */
    int rank_base;  /* global rank of its local rank 0 */
    int group_rank; /* its GROUP_RANK: its index among the nodes that take part */
};

/* Node 0 -> every joined node n with assign[n].nproc > 0 (assign has nnodes entries, by node rank; entry 0 is
 * node 0's own and is not sent). Returns the number of nodes sent to, or -EINVAL when called on another node. */
int ddp_coord_send_start(struct ddp_coord *c, int attempt, int world_size, int group_world_size, int master_port,
                         const struct ddp_coord_assign *assign);
int ddp_coord_send_stop(struct ddp_coord *c, int attempt, const char *reason);
int ddp_coord_send_exit(struct ddp_coord *c, int status);
/* Other nodes -> node 0: how attempt ended here (0 = success). 0, or -ENOTCONN when not joined, -EINVAL on
 * node 0. */
int ddp_coord_report(struct ddp_coord *c, int attempt, int status, const char *reason);

/* Pure helpers for node 0's decisions (no loop, no sockets). */

/* Lay an attempt out over the nodes that are up (up[i] for node rank i; node 0 must be up) with nproc[i]
 * workers each: consecutive group ranks and global rank blocks in node-rank order. Fills assign[0..nnodes-1]
 * (0 workers for nodes that are down) and *world_size; returns the number of nodes taking part, or -ENODEV
 * when node 0 is down or fewer than min_nodes nodes are up (nnodes MIN:MAX). */
int ddp_coord_layout(int nnodes, const bool *up, const int *nproc, int min_nodes, struct ddp_coord_assign *assign,
                     int *world_size);

/* How one attempt ends across the nodes, as node 0 sees it (its own workers count as node 0). */
struct ddp_coord_round {
    int attempt;
    int nnodes;
    unsigned char *state; /* per node: 0 takes no part, 1 running, 2 ended well, 3 failed or lost */
    int running;          /* nodes still running */
    int failed_node;      /* the first node whose attempt failed (the root cause), or -1 */
    int failed_status;
    char failed_reason[512];
};
/* Begin attempt `attempt` with the nodes that have assign[n].nproc > 0. The first call allocates; free with
 * ddp_coord_round_free(). */
void ddp_coord_round_begin(struct ddp_coord_round *r, int nnodes, int attempt, const struct ddp_coord_assign *assign);
/* Node `node` says attempt `attempt` ended with status (0 = its workers all succeeded; a lost node is a failure,
 * e.g. status 1 and reason "node 2 lost: ..."). Returns true when this is the attempt's first failure: node 0 then
 * stops its own workers and sends STOP to the others. Reports for another attempt, from a node that takes no part
 * or that already ended are ignored (false). */
bool ddp_coord_round_end(struct ddp_coord_round *r, int attempt, int node, int status, const char *reason);
/* Every node taking part has ended: node 0 can decide (restart, downsize, exit) and send START or EXIT. */
bool ddp_coord_round_done(const struct ddp_coord_round *r);
void ddp_coord_round_free(struct ddp_coord_round *r);

/* Flush what was sent, close every connection and free c once the handles are closed (then done(data) runs,
 * if given, on the loop). No events after this call. */
void ddp_coord_close(struct ddp_coord *c, void (*done)(void *data), void *data);

/* The job secret: job_secret when given (at least 16 characters), else hex(HMAC-SHA256(token, "ddplaunch job "
 * + job_id)) where token is read from token_path: the file must be a regular file owned by this user with no
 * group/other permissions (not a symlink); when missing it is created (0600, 32 random bytes, atomically, so
 * nodes sharing a home directory agree). 0 and *out (caller frees), or a negative errno with err. */
int ddp_coord_secret(const char *job_secret, const char *token_path, const char *job_id, char **out,
                     struct ddp_err *err);

/* HMAC-SHA256 (RFC 2104 over FIPS 180-4), exposed for tests. */
void ddp_coord_hmac(const void *key, size_t keylen, const void *msg, size_t msglen, uint8_t mac[32]);

#endif
