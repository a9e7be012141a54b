/* coord_internal: the control channel's state, shared by its files only, lowest first: a connection's own calls
 * (coord_conn.c), liveness (coord_live.c), the handshake and who may join (coord_join.c), frames in and the public
 * calls (coord.c). A file calls only the ones before it. Everything else uses coord.h. */
#ifndef DDP_COORD_INTERNAL_H
#define DDP_COORD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "base/util.h"
#include "nodes/coord.h"
#include "nodes/frame.h"

#define DDP_COORD_MAX_PENDING 64   /* connections in their handshake, from all sources (at least; see join) */
#define DDP_COORD_MAX_PER_SOURCE 8 /* ... from one source address (at least) */
#define DDP_COORD_RETRY_MS 200

enum ddp_coord_conn_state { DDP_COORD_HELLO_WAIT, DDP_COORD_JOIN_WAIT, DDP_COORD_WELCOME_WAIT, DDP_COORD_AUTHED };

struct ddp_coord_conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    struct ddp_coord *c;
    struct ddp_coord_conn *next, *prev; /* c->conns: freed only in the close callback, unlinked in O(1) there */
    enum ddp_coord_conn_state state;
    bool closing, connected;
    int node;
    char peer[64];                     /* address:port */
    char source[48];                   /* address only: what the per-source limit counts */
    char host[DDP_FRAME_HOST_MAX + 1]; /* server: the host name its JOIN gave */
    char snonce[DDP_FRAME_NONCE_HEX + 1], cnonce[DDP_FRAME_NONCE_HEX + 1];
    uint8_t key[32];
    uint64_t seq_in, seq_out;
    long long opened_ms, last_seen_ms; /* connected; last frame from the peer */
    bool ping_out;                     /* a PING of ours is not answered yet (no frame since) */
    long long owed_ms;                 /* how long the peer has had to answer it (coord_live.c) */
    uint8_t *in;
    size_t inlen, incap;
};

struct ddp_coord {
    uv_loop_t *loop;
    struct ddp_coord_config cfg;
    char *addr, *secret, *job, *host;
    ddp_coord_cb cb;
    void *data;
    bool server;
    uv_tcp_t listener;
    uv_timer_t timer;
    long long tick_ms, last_tick_ms; /* the timer's period; when it last ran */
    struct ddp_coord_conn *conns;
    struct ddp_coord_conn **by_node; /* server: the joined connection of each node rank (nnodes entries), or NULL */
    int free_from;                   /* server: every node rank in 1..free_from-1 is taken (free_rank starts here) */
    int handshaking, joined;         /* conns not closing: in their handshake; authenticated (coord_conn.c keeps
                                        both, so that a join costs no walk over a thousand connections) */
    int handles;
    bool closing, dead;
    void (*done)(void *);
    void *done_data;
    struct sockaddr_storage target;
    int port;
    long long join_deadline_ms, next_retry_ms;
    char last_error[200];
    bool connect_due;                /* set by coord_live.c's tick: another attempt to reach node 0 is due */
    struct ddp_ratelimit warn_limit; /* warnings about peers that did not join */
};

/* coord_conn.c: a connection's own calls */
void ddp_coord_peer_warn(struct ddp_coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ddp_coord_emit(struct ddp_coord *c, struct ddp_coord_event *ev);
struct ddp_coord_conn *ddp_coord_node_conn(const struct ddp_coord *c, int node);
/* k (conn_new counted it as handshaking) finished its handshake: authenticated. */
void ddp_coord_conn_authed(struct ddp_coord_conn *k);
/* Close k; with flush, what was written is sent first. */
void ddp_coord_conn_close(struct ddp_coord_conn *k, bool flush);
/* Send text on k, MACed once the connection is authenticated. */
void ddp_coord_conn_send(struct ddp_coord_conn *k, const char *text);
/* The peer left or broke the protocol: close, and tell the caller when it matters. */
void ddp_coord_conn_lost(struct ddp_coord_conn *k, const char *why);
/* Close callback of the channel's own handles (listener, timer): frees it once the last one closed. */
void ddp_coord_handle_closed(uv_handle_t *h);

/* coord_join.c: the handshake (k's state says which step), and room for one more connection in its handshake */
void ddp_coord_join_handshake(struct ddp_coord_conn *k, const struct ddp_frame_msg *m);
void ddp_coord_join_make_room(struct ddp_coord *c, const char *source);

/* coord_live.c: a frame arrived from k's peer (it is alive; a PING is answered at once); a connected socket's
 * kernel-side liveness (TCP_USER_TIMEOUT); the timer's tick */
void ddp_coord_live_socket(struct ddp_coord_conn *k);
void ddp_coord_live_heard(struct ddp_coord_conn *k, const struct ddp_frame_msg *m);
/* A node that joined: tick at most once a second from now on (heartbeat_ms / 5), not ten times, so that a
 * thousand idle agents on one host do not keep its CPUs awake. */
void ddp_coord_live_joined(struct ddp_coord *c);
/* The timer's tick; true when another attempt to reach node 0 is due (coord.c makes it). */
bool ddp_coord_live_tick(struct ddp_coord *c);

#endif
