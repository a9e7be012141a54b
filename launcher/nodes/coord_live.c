/* coord_live: whether the peers of the control channel are alive, told apart from busy. Any frame from a peer
 * shows it is alive; after heartbeat_ms without one a side sends PING (again every heartbeat_ms while unanswered),
 * which the peer answers with PONG as soon as it reads it, on every role.
 * - A peer whose process ends is noticed at once (EOF or reset, coord.c).
 * - A peer whose host or network vanished stops acknowledging our PINGs: the kernel gives up on the connection
 *   after lost_after_ms of unacknowledged data (TCP_USER_TIMEOUT), which coord.c sees as a read error.
 * - A peer whose host acknowledges but whose agent does not answer is busy (a serving agent starved of CPU
 *   during a join storm) or hung: it is lost after BUSY_FACTOR x lost_after_ms of the time it had to answer,
 *   counted from our first PING and only as far as our own loop ran (each tick adds at most two periods), so a
 *   stall of this agent is never charged to its peer.
 * Connections in their handshake get handshake_ms, counted the same way. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "nodes/coord_internal.h"

#define BUSY_FACTOR 4

void ddp_coord_live_socket(struct ddp_coord_conn *k)
{
    uv_os_fd_t fd;
    unsigned ms = (unsigned)k->c->cfg.lost_after_ms;
    if (uv_fileno((uv_handle_t *)&k->tcp, &fd) == 0 &&
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms) < 0)
        ddp_debug("coord: TCP_USER_TIMEOUT on %s: %s", k->peer, strerror(errno));
}

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

/* An authenticated connection: PING after heartbeat_ms of silence and every heartbeat_ms after it while unanswered
 * (data the peer's kernel must acknowledge: see TCP_USER_TIMEOUT); lost after BUSY_FACTOR x lost_after_ms of its
 * time without an answer. */
static void keep_alive(struct ddp_coord_conn *k, long long now, long long dt)
{
    struct ddp_coord *c = k->c;
    if (k->ping_out) {
        long long before = k->owed_ms;
        k->owed_ms += dt;
        if (k->owed_ms > BUSY_FACTOR * c->cfg.lost_after_ms)
            lost(k, now);
        else if (k->owed_ms / c->cfg.heartbeat_ms > before / c->cfg.heartbeat_ms)
            ddp_coord_conn_send(k, "PING");
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
        /* JOIN sent: node 0 answers or closes the connection (its own handshake limit); giving up here would leave
         * a JOIN that a busy node 0 (a connection flood) still reads and registers, calls lost a moment later, and
         * the retry finds the rank taken. A dead node 0 still ends it (TCP_USER_TIMEOUT, the join deadline). */
        if (live->state == DDP_COORD_WELCOME_WAIT)
            return;
        live->owed_ms += dt; /* connecting or waiting for the greeting: node 0 owes us an answer */
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
        c->connect_due = true;
}

void ddp_coord_live_joined(struct ddp_coord *c)
{
    long long t = c->cfg.heartbeat_ms / 5;
    if (t > 1000)
        t = 1000;
    if (t <= c->tick_ms || c->closing)
        return;
    c->tick_ms = t;
    uv_timer_set_repeat(&c->timer, (uint64_t)t); /* the callback stays coord.c's */
    uv_timer_again(&c->timer);
}

bool ddp_coord_live_tick(struct ddp_coord *c)
{
    long long now = ddp_now_ms();
    long long dt = answer_time(c, now);
    if (c->closing)
        return false;
    c->connect_due = false;
    if (c->server)
        server_tick(c, now, dt);
    else if (!c->dead)
        client_tick(c, now, dt);
    return c->connect_due && !c->closing && !c->dead;
}
