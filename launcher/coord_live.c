/* coord_live: whether the peers of the control channel are alive. Any frame from a peer shows it is; after
 * heartbeat_ms without one a side sends PING, which the peer answers with PONG as soon as it reads it (before
 * anything else in that frame batch, and on every role: node 0 answers its nodes too). A peer is lost when it has
 * had lost_after_ms to answer and did not: time counts only from our PING, and only as far as our own loop ran
 * (each tick adds at most two periods), so a stall of this agent is never charged to its peer. A peer whose
 * process ends is noticed at once (EOF, coord.c); silence is for hosts and networks that vanish.
 * Connections in their handshake get handshake_ms, counted the same way. */
#include <stdio.h>

#include "coord_internal.h"

void ddp_coord_live_heard(struct ddp_coord_conn *k, const struct ddp_frame_msg *m)
{
    k->last_seen_ms = ddp_now_ms();
    k->ping_out = false;
    k->owed_ms = 0;
    if (m && m->kind == DDP_FRAME_PING)
        ddp_coord_conn_send(k, "PONG");
}

/* The time since the last tick that counts as the peers' to answer in: at most two periods. */
static long long answer_time(struct ddp_coord *c, long long now)
{
    long long dt = c->last_tick_ms > 0 ? now - c->last_tick_ms : c->tick_ms;
    c->last_tick_ms = now;
    if (dt < 0)
        dt = 0;
    return dt > 2 * c->tick_ms ? 2 * c->tick_ms : dt;
}

static void lost(struct ddp_coord_conn *k, long long now)
{
    char why[160];
    snprintf(why, sizeof why, "silent for %lld ms (%lld ms of them to answer)", now - k->last_seen_ms, k->owed_ms);
    ddp_coord_conn_lost(k, why); /* may run the callback, which may close c */
}

/* An authenticated connection: PING after heartbeat_ms of silence; lost after lost_after_ms without an answer. */
static void keep_alive(struct ddp_coord_conn *k, long long now, long long dt)
{
    struct ddp_coord *c = k->c;
    if (k->ping_out) {
        k->owed_ms += dt;
        if (k->owed_ms > c->cfg.lost_after_ms)
            lost(k, now);
    } else if (now - k->last_seen_ms >= c->cfg.heartbeat_ms) {
        ddp_coord_conn_send(k, "PING");
        k->ping_out = true;
        k->owed_ms = 0;
    }
}

static void server_tick(struct ddp_coord *c, long long now, long long dt)
{
    /* conns are freed only in their close callbacks: next stays valid whatever the callbacks close */
    for (struct ddp_coord_conn *k = c->conns, *next; k && !c->closing; k = next) {
        next = k->next;
        if (k->closing)
            continue;
        if (k->state == DDP_COORD_AUTHED) {
            keep_alive(k, now, dt);
            continue;
        }
        k->owed_ms += dt;
        if (k->owed_ms > c->cfg.handshake_ms) {
            ddp_coord_peer_warn(c, "a connection from %s did not finish its handshake within %lld ms: closed", k->peer,
                                c->cfg.handshake_ms);
            ddp_coord_conn_close(k, false);
        }
    }
}

static void client_tick(struct ddp_coord *c, long long now, long long dt)
{
    struct ddp_coord_conn *live = NULL;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next)
        if (!k->closing)
            live = k;
    if (live && live->state == DDP_COORD_AUTHED)
        return keep_alive(live, now, dt);
    if (live && now < c->join_deadline_ms) {
        live->owed_ms += dt; /* connecting or in the handshake: node 0 owes us an answer */
        if (live->owed_ms > c->cfg.handshake_ms)
            lost(live, now);
        return;
    }
    if (live) /* still connecting or in its handshake at the join deadline */
        ddp_coord_conn_close(live, false);
    if (now >= c->join_deadline_ms) {
        char msg[400];
        snprintf(msg, sizeof msg, "could not join node 0 at %s:%d within %lld ms: %s", c->addr, c->cfg.port,
                 c->cfg.join_timeout_ms, c->last_error[0] ? c->last_error : "no answer");
        struct ddp_coord_event ev = {.kind = DDP_COORD_LOST, .node = 0, .reason = msg};
        ddp_coord_emit(c, &ev);
        return;
    }
    if (now >= c->next_retry_ms)
        ddp_coord_client_connect(c);
}

void ddp_coord_live_tick(uv_timer_t *t)
{
    struct ddp_coord *c = t->data;
    long long now = ddp_now_ms();
    long long dt = answer_time(c, now);
    if (c->closing)
        return;
    if (c->server)
        server_tick(c, now, dt);
    else if (!c->dead)
        client_tick(c, now, dt);
}
