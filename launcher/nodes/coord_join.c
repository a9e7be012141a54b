/* coord_join: the control channel's handshake (HELLO, JOIN, WELCOME or DENIED: frame.h) and who may join: node
 * ranks, and the bound on connections still in their handshake (coord.h). */
#include <stdio.h>
#include <string.h>

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

/* A free node rank for a node joining without one: the lowest not joined now, or -1 when the job is full. */
static int free_rank(const struct ddp_coord *c)
{
    for (int n = 1; n < c->cfg.nnodes; n++)
        if (!ddp_coord_node_conn(c, n))
            return n;
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
        k->state = DDP_COORD_AUTHED;
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
        int node = m->node;
        char why[100];
        if (node == DDP_COORD_ANY_RANK) {
            node = free_rank(c);
            if (node < 0) {
                snprintf(why, sizeof why, "the job is full (%d nodes)", c->cfg.nnodes);
                return server_deny(k, why);
            }
        } else if (node < 1 || node >= c->cfg.nnodes) {
            snprintf(why, sizeof why, "node rank %d is not in 1..%d", node, c->cfg.nnodes - 1);
            return server_deny(k, why);
        } else if (ddp_coord_node_conn(c, node)) {
            snprintf(why, sizeof why, "node %d has already joined", node);
            return server_deny(k, why);
        }
        k->node = node;
        c->by_node[node] = k;
        snprintf(tail, sizeof tail, "%d", node);
        ddp_frame_handshake_mac(c->secret, "welcome", c->job, k->snonce, k->cnonce, tail, want);
        snprintf(msg, sizeof msg, "DDPC2 WELCOME %d %s", node, want);
        ddp_coord_conn_send(k, msg);
        ddp_frame_session_key(c->secret, c->job, k->snonce, k->cnonce, k->key);
        k->state = DDP_COORD_AUTHED;
        struct ddp_coord_event ev = {.kind = DDP_COORD_JOINED, .node = node, .nproc = m->nproc, .host = m->host};
        ddp_coord_emit(c, &ev);
        return;
    }
    case DDP_COORD_AUTHED:
        break;
    }
}

/* Make room for one more connection in its handshake from source: past the per-source cap the source's oldest
 * goes; past the total cap the oldest of the source holding the most goes. A newcomer is never refused, so that
 * idle connections cannot keep a real node out; the real node's handshake takes one round trip. */
void ddp_coord_join_make_room(struct ddp_coord *c, const char *source)
{
    /* a job of N nodes may see N of them join at once, all from one address when they share a host */
    int per_source = c->cfg.nnodes > DDP_COORD_MAX_PER_SOURCE ? c->cfg.nnodes : DDP_COORD_MAX_PER_SOURCE;
    int in_all = c->cfg.nnodes > DDP_COORD_MAX_PENDING ? c->cfg.nnodes : DDP_COORD_MAX_PENDING;
    int total = 0, mine = 0;
    struct ddp_coord_conn *my_oldest = NULL;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next) {
        if (k->closing || k->state == DDP_COORD_AUTHED)
            continue;
        total++;
        if (strcmp(k->source, source) == 0) {
            mine++;
            if (!my_oldest || k->opened_ms <= my_oldest->opened_ms)
                my_oldest = k;
        }
    }
    struct ddp_coord_conn *victim = NULL;
    if (mine >= per_source) {
        victim = my_oldest;
    } else if (total >= in_all) {
        int most = 0;
        for (struct ddp_coord_conn *k = c->conns; k; k = k->next) {
            if (k->closing || k->state == DDP_COORD_AUTHED)
                continue;
            int n = 0;
            for (struct ddp_coord_conn *j = c->conns; j; j = j->next)
                n += !j->closing && j->state != DDP_COORD_AUTHED && strcmp(j->source, k->source) == 0;
            if (n > most || (n == most && victim && k->opened_ms < victim->opened_ms)) {
                most = n;
                victim = k;
            }
        }
    }
    if (victim) {
        ddp_coord_peer_warn(c,
                            "too many connections in their handshake (%d from %s, %d in all): closing the oldest, "
                            "from %s",
                            mine, source, total, victim->peer);
        ddp_coord_conn_close(victim, false);
    }
}
