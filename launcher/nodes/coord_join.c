/* coord_join: the control channel's handshake (HELLO, JOIN, WELCOME or DENIED: frame.h) and who may join: node
 * ranks, and the bound on connections still in their handshake (coord.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "base/crypto.h"
#include "nodes/coord_internal.h"

static void client_refused(struct ddp_coord_conn *k, const char *why)
{
    struct ddp_coord *c = k->c;
    ddp_coord_conn_close(k, false);
    char msg[400];
    snprintf(msg, sizeof msg, "node 0 at %s:%d refused this node: %s", c->addr, c->cfg.port, why);
    struct ddp_coord_event ev = {.kind = DDP_COORD_LOST, .node = 0, .reason = msg};
    ddp_coord_emit(c, &ev);
}

static void server_deny(struct ddp_coord_conn *k, const char *why)
{
    char msg[300];
    snprintf(msg, sizeof msg, "DDPC2 DENIED %s", why[0] ? why : "refused");
    ddp_coord_peer_warn(k->c, "refused a node from %s: %s", k->peer, why);
    ddp_coord_conn_send(k, msg);
    ddp_coord_conn_close(k, true);
}

/* The peer of k closed its end (EOF or a reset is waiting to be read): what a node whose handshake timed out on
 * its side leaves behind, after node 0 read its JOIN late. */
static bool peer_gone(struct ddp_coord_conn *k)
{
    uv_os_fd_t fd;
    char b;
    if (uv_fileno((uv_handle_t *)&k->tcp, &fd) != 0)
        return true;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* node's joined connection when a new authenticated JOIN from host and source is that node trying again: the old
 * connection's peer is gone and never sent a frame after its JOIN (seq_in 0: it never saw our WELCOME, so it
 * never took part in anything). NULL when the rank is free or held by a live or a once-working connection. */
static struct ddp_coord_conn *stale_join(struct ddp_coord *c, int node, const char *host, const char *source)
{
    struct ddp_coord_conn *old = ddp_coord_node_conn(c, node);
    return old && old->seq_in == 0 && strcmp(old->host, host) == 0 && strcmp(old->source, source) == 0 && peer_gone(old)
               ? old
               : NULL;
}

/* Give node's rank to a retry of the same node: the stale connection goes without a "lost" (it never started). */
static void retire_stale(struct ddp_coord_conn *old)
{
    ddp_debug("coord: node %d joins again from %s; its earlier connection (%s) was closed by that node", old->node,
              old->source, old->peer);
    ddp_coord_conn_close(old, false);
}

/* A free node rank for a node joining without one: the lowest not joined now, else the rank of this node's own
 * earlier join whose connection it closed (stale_join), or -1 when the job is full. */
static int free_rank(struct ddp_coord *c, const char *host, const char *source)
{
    for (int n = c->free_from; n < c->cfg.nnodes; n++)
        if (!ddp_coord_node_conn(c, n))
            return c->free_from = n;
    c->free_from = c->cfg.nnodes;
    for (int n = 1; n < c->cfg.nnodes; n++) {
        struct ddp_coord_conn *old = stale_join(c, n, host, source);
        if (old) {
            retire_stale(old);
            return n;
        }
    }
    return -1;
}

void ddp_coord_join_handshake(struct ddp_coord_conn *k, const struct ddp_frame_msg *m)
{
    struct ddp_coord *c = k->c;
    char tail[160], want[65], msg[200];
    switch (k->state) {
    case DDP_COORD_HELLO_WAIT: { /* node */
        if (m->kind != DDP_FRAME_HELLO)
            return ddp_coord_conn_lost(k, "not a ddplaunch coordinator (bad greeting)");
        memcpy(k->snonce, m->nonce, sizeof k->snonce);
        uint8_t raw[DDP_FRAME_NONCE_HEX / 2];
        ddp_crypto_random(raw, sizeof raw);
        ddp_crypto_hex(raw, sizeof raw, k->cnonce);
        snprintf(tail, sizeof tail, "%d\n%d\n%s", c->cfg.node_rank, c->cfg.nproc, c->host);
        ddp_frame_handshake_mac(c->secret, "join", c->job, k->snonce, k->cnonce, tail, want);
        snprintf(msg, sizeof msg, "DDPC2 JOIN %d %d %s %s %s", c->cfg.node_rank, c->cfg.nproc, c->host, k->cnonce,
                 want);
        ddp_coord_conn_send(k, msg);
        k->state = DDP_COORD_WELCOME_WAIT;
        return;
    }
    case DDP_COORD_WELCOME_WAIT: { /* node */
        if (m->kind == DDP_FRAME_DENIED)
            return client_refused(k, m->text);
        bool ok = m->kind == DDP_FRAME_WELCOME &&
                  (c->cfg.node_rank == DDP_COORD_ANY_RANK || m->node == c->cfg.node_rank) && m->node < c->cfg.nnodes;
        if (ok) {
            snprintf(tail, sizeof tail, "%d", m->node);
            ddp_frame_handshake_mac(c->secret, "welcome", c->job, k->snonce, k->cnonce, tail, want);
            ok = ddp_crypto_equal(want, m->mac, 64);
        }
        if (!ok)
            return client_refused(k, "its answer failed authentication (is the job secret the same on every "
                                     "node?)");
        ddp_frame_session_key(c->secret, c->job, k->snonce, k->cnonce, k->key);
        ddp_coord_conn_authed(k);
        k->node = 0;
        ddp_coord_live_joined(c);
        struct ddp_coord_event ev = {.kind = DDP_COORD_JOINED, .node = m->node};
        ddp_coord_emit(c, &ev);
        return;
    }
    case DDP_COORD_JOIN_WAIT: { /* server */
        if (m->kind != DDP_FRAME_JOIN)
            return ddp_coord_conn_lost(k, "bad join message");
        memcpy(k->cnonce, m->nonce, sizeof k->cnonce);
        snprintf(tail, sizeof tail, "%d\n%d\n%s", m->node, m->nproc, m->host);
        ddp_frame_handshake_mac(c->secret, "join", c->job, k->snonce, k->cnonce, tail, want);
        if (!ddp_crypto_equal(want, m->mac, 64))
            return server_deny(k, "authentication failed (is the job secret the same on every node, and the "
                                  "rendezvous id and command?)");
        /* Read late (a flood kept us busy) from a node that gave up on it and closed: registering it now would
         * call that node lost a moment later, and its retry would find the rank taken. */
        if (peer_gone(k))
            return ddp_coord_conn_lost(k, "closed by the node before its JOIN was read");
        int node = m->node;
        char why[100];
        struct ddp_coord_conn *old;
        if (node == DDP_COORD_ANY_RANK) {
            node = free_rank(c, m->host, k->source);
            if (node < 0) {
                snprintf(why, sizeof why, "the job is full (%d nodes)", c->cfg.nnodes);
                return server_deny(k, why);
            }
        } else if (node < 1 || node >= c->cfg.nnodes) {
            snprintf(why, sizeof why, "node rank %d is not in 1..%d", node, c->cfg.nnodes - 1);
            return server_deny(k, why);
        } else if ((old = stale_join(c, node, m->host, k->source))) {
            retire_stale(old);
        } else if (ddp_coord_node_conn(c, node)) {
            snprintf(why, sizeof why, "node %d has already joined", node);
            return server_deny(k, why);
        }
        k->node = node;
        snprintf(k->host, sizeof k->host, "%s", m->host);
        c->by_node[node] = k;
        snprintf(tail, sizeof tail, "%d", node);
        ddp_frame_handshake_mac(c->secret, "welcome", c->job, k->snonce, k->cnonce, tail, want);
        snprintf(msg, sizeof msg, "DDPC2 WELCOME %d %s", node, want);
        ddp_coord_conn_send(k, msg);
        ddp_frame_session_key(c->secret, c->job, k->snonce, k->cnonce, k->key);
        ddp_coord_conn_authed(k);
        struct ddp_coord_event ev = {.kind = DDP_COORD_JOINED, .node = node, .nproc = m->nproc, .host = m->host};
        ddp_coord_emit(c, &ev);
        return;
    }
    case DDP_COORD_AUTHED:
        break;
    }
}

/* Bytes of k's peer not read yet: its JOIN may be there, waiting for the loop to come round to it. */
static bool has_waiting(struct ddp_coord_conn *k)
{
    uv_os_fd_t fd;
    int n = 0;
    return uv_fileno((uv_handle_t *)&k->tcp, &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* Which of a and b goes first to make room: one with nothing waiting to be read before one whose answer (a
 * JOIN) is there, then the older. A flood of connections that say nothing then never evicts a node that
 * answered our HELLO while the loop was busy accepting the flood. */
static bool goes_before(struct ddp_coord_conn *a, bool a_waiting, struct ddp_coord_conn *b, bool b_waiting)
{
    if (!b)
        return true;
    if (a_waiting != b_waiting)
        return !a_waiting;
    return a->opened_ms <= b->opened_ms;
}

static int by_source(const void *a, const void *b)
{
    const struct ddp_coord_conn *x = *(struct ddp_coord_conn *const *)a, *y = *(struct ddp_coord_conn *const *)b;
    return strcmp(x->source, y->source);
}

/* Of the n connections in their handshake, the one to go when there are too many in all: of the source holding
 * the most, the first by goes_before. Sorted by source, so that a flood of n connections costs n log n per
 * newcomer, not n x n (a thousand-node job allows a thousand pending connections). */
static struct ddp_coord_conn *most_held_oldest(struct ddp_coord *c, int n)
{
    struct ddp_coord_conn **v = ddp_xcalloc((size_t)n, sizeof *v), *victim = NULL;
    int m = 0, most = 0;
    for (struct ddp_coord_conn *k = c->conns; k && m < n; k = k->next)
        if (!k->closing && k->state != DDP_COORD_AUTHED)
            v[m++] = k;
    qsort(v, (size_t)m, sizeof *v, by_source);
    bool victim_waiting = false;
    for (int i = 0, j; i < m; i = j) { /* v[i..j) share a source */
        for (j = i + 1; j < m && strcmp(v[j]->source, v[i]->source) == 0; j++)
            ;
        if (j - i < most)
            continue;
        if (j - i > most)
            most = j - i, victim = NULL;
        for (int x = i; x < j; x++) {
            bool w = has_waiting(v[x]);
            if (goes_before(v[x], w, victim, victim_waiting))
                victim = v[x], victim_waiting = w;
        }
    }
    free(v);
    return victim;
}

/* Make room for one more connection in its handshake from source: past the per-source cap one of the source's
 * goes; past the total cap one of the source holding the most goes: the oldest of those with nothing waiting to
 * be read (goes_before). A newcomer is never refused, so that idle connections cannot keep a real node out; the
 * real node's handshake takes one round trip. */
void ddp_coord_join_make_room(struct ddp_coord *c, const char *source)
{
    /* a job of N nodes may see N of them join at once, all from one address when they share a host */
    int per_source = c->cfg.nnodes > DDP_COORD_MAX_PER_SOURCE ? c->cfg.nnodes : DDP_COORD_MAX_PER_SOURCE;
    int in_all = c->cfg.nnodes > DDP_COORD_MAX_PENDING ? c->cfg.nnodes : DDP_COORD_MAX_PENDING;
    if (c->handshaking < (per_source < in_all ? per_source : in_all))
        return; /* neither cap reached (mine <= total = handshaking): no walk over the connections */
    int total = 0, mine = 0;
    struct ddp_coord_conn *my_oldest = NULL;
    bool my_oldest_waiting = false;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next) {
        if (k->closing || k->state == DDP_COORD_AUTHED)
            continue;
        total++;
        if (strcmp(k->source, source) == 0) {
            mine++;
            bool w = has_waiting(k);
            if (goes_before(k, w, my_oldest, my_oldest_waiting))
                my_oldest = k, my_oldest_waiting = w;
        }
    }
    struct ddp_coord_conn *victim = NULL;
    if (mine >= per_source) {
        victim = my_oldest;
    } else if (total >= in_all) {
        victim = most_held_oldest(c, total);
    }
    if (victim) {
        ddp_coord_peer_warn(c,
                            "too many connections in their handshake (%d from %s, %d in all): closing the oldest, "
                            "from %s",
                            mine, source, total, victim->peer);
        ddp_coord_conn_close(victim, false);
    }
}
