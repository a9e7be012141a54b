/* coord: the authenticated TCP control channel between the agents of a job on several nodes. One agent serves
 * (node 0: the one on the rendezvous endpoint's host, or node rank 0 of a static rendezvous); every other agent
 * joins it, with a node rank of its own or one handed out at join, and says how many workers it runs and on
 * which host. Node 0 sends "start attempt N with world size W on port P", "stop", "exit"; nodes report how their
 * attempt ended; a node whose agent dies is reported lost at once (EOF), one that does not answer a heartbeat
 * within lost_after_ms of the time it had is reported lost then (coord_live.c: a busy peer is not a lost one).
 * The wire format and its MACs are frame.h's; the primitives crypto.h's (libsodium). Against peers without the
 * secret, the server bounds what they can hold: a handshake deadline, a cap on pending connections per source
 * address and in all (the oldest is evicted for a newcomer), and rate-limited warnings.
 * It runs on the caller's libuv loop and decides nothing: the restart/downsize policy and the layout stay with
 * its caller (supervise.c, layout.h). */
#ifndef DDP_COORD_H
#define DDP_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/util.h"
#include "nodes/layout.h"

struct ddp_coord;

#define DDP_COORD_ANY_RANK (-1) /* joining without a node rank: node 0 hands one out */
/* torchrun's keep-alive defaults (c10d rendezvous: keep_alive_interval 5 s, keep_alive_max_attempt 3) */
#define DDP_COORD_HEARTBEAT_MS 5000
#define DDP_COORD_LOST_AFTER_MS 15000

enum ddp_coord_event_kind {
    DDP_COORD_JOINED, /* node 0: node ev->node (ev->nproc workers on ev->host) authenticated and joined.
                         Other nodes: we joined node 0 as node ev->node. */
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
    DDP_COORD_FR,     /* node 0: node ev->node's rank ev->rank in attempt ev->attempt: its flight-recorder summary
                         (ev->reason: the JSON of watch/fr_remote.h, unchecked), standing still for ev->still_ms */
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
    int rank;           /* FR */
    long long still_ms; /* FR */
    const char *host;   /* JOINED on node 0: the node's host name; else "" */
    const char *reason; /* never NULL; valid during the callback only */
};

typedef void (*ddp_coord_cb)(struct ddp_coord *c, const struct ddp_coord_event *ev, void *data);

struct ddp_coord_config {
    int node_rank;             /* 0 = serve; > 0 = join as this rank; DDP_COORD_ANY_RANK = join, get a rank */
    int nnodes;                /* most nodes the job can have (nnodes MAX); node ranks 1..nnodes-1 may join */
    const char *addr;          /* node 0: address to listen on (ignored with listen_fd); others: node 0's host */
    int port;                  /* control port; node 0 may give 0 for an ephemeral one (see ddp_coord_port) */
    int listen_fd;             /* node 0: a listening socket from ddp_coord_listen (coord listens on a copy; the
                                  caller still owns and closes it), or -1 = listen on addr:port here */
    const char *secret;        /* the per-job secret (>= 16 bytes; see token.h) */
    const char *job;           /* the job's identity, bound into the handshake: agents of another job (another
                                  rendezvous id or command) cannot join. NULL = "" */
    int nproc;                 /* others: this node's worker count, sent when joining (0 = 1) */
    const char *host;          /* others: this node's host name, sent when joining (NULL = "?") */
    long long heartbeat_ms;    /* a side that heard nothing from its peer this long sends PING; 0 = lost_after_ms / 3,
                                  at most DDP_COORD_HEARTBEAT_MS */
    long long lost_after_ms;   /* a peer that had this long to answer a PING and did not is lost (time counted only
                                  while our own loop ran); 0 = DDP_COORD_LOST_AFTER_MS */
    long long join_timeout_ms; /* other nodes: keep trying to reach node 0 this long; 0 = 600000 */
    long long handshake_ms;    /* node 0: a connection must finish its handshake this fast; 0 = 5000 */
};

/* Listen on addr:port for the control channel: the address the agents are told to reach (an address of this
 * host), never every address, except that a host name resolving to a loopback address (Debian's 127.0.1.1 for
 * the own host name) listens on every address of that family so that other hosts can reach it. IPv4 and IPv6.
 * 0 and *fd (close-on-exec; the caller passes it to ddp_coord_start or closes it), -EADDRINUSE (taken: maybe by
 * the agent already serving this job on this host), -EADDRNOTAVAIL (not an address of this host), or another
 * negative errno, with err. */
int ddp_coord_listen(const char *addr, int port, int *fd, struct ddp_err *err);

/* Start serving (node 0) or joining (others) on loop. Events go to cb(c, ev, data). 0 and *out, or a negative
 * errno with err ("coord: cannot listen on ADDR:PORT: address already in use"). Caller owns *out; release
 * with ddp_coord_close(). Joining is asynchronous: failures arrive as DDP_COORD_LOST. */
int ddp_coord_start(uv_loop_t *loop, const struct ddp_coord_config *cfg, ddp_coord_cb cb, void *data,
                    struct ddp_coord **out, struct ddp_err *err);

/* Node 0: the port it listens on (useful with port 0). */
int ddp_coord_port(const struct ddp_coord *c);
/* Node 0: how many other nodes are joined now. */
int ddp_coord_joined(const struct ddp_coord *c);
/* Node 0: connections that have not finished their handshake (for tests and the bench). */
int ddp_coord_pending(const struct ddp_coord *c);

/* Node 0 -> every joined node n with assign[n].nproc > 0 (assign has nnodes entries, by node rank; entry 0 is
 * node 0's own and is not sent). Returns the number of nodes sent to, or -EINVAL when called on another node. */
int ddp_coord_send_start(struct ddp_coord *c, int attempt, int world_size, int group_world_size, int master_port,
                         const struct ddp_layout_assign *assign);
int ddp_coord_send_stop(struct ddp_coord *c, int attempt, const char *reason);
int ddp_coord_send_exit(struct ddp_coord *c, int status);
/* Other nodes -> node 0: how attempt ended here (0 = success). 0, or -ENOTCONN when not joined, -EINVAL on
 * node 0. */
int ddp_coord_report(struct ddp_coord *c, int attempt, int status, const char *reason);

/* Other nodes -> node 0: rank's flight-recorder summary json (one line, at most DDP_FRAME_FR_MAX bytes) in
 * attempt. 0, -ENOTCONN when not joined, -EINVAL on node 0 or for a json that FR cannot carry. */
int ddp_coord_send_fr(struct ddp_coord *c, int attempt, int rank, long long still_ms, const char *json);

/* Flush what was sent, close every connection and free c once the handles are closed (then done(data) runs,
 * if given, on the loop). No events after this call. */
void ddp_coord_close(struct ddp_coord *c, void (*done)(void *data), void *data);

#endif
