/* coord: authenticated TCP control channel between node agents: frames in, connecting and listening, the public
 * calls. See coord.h (behaviour) and frame.h (wire). The files below it: the handshake coord_join.c, liveness
 * coord_live.c, and a connection's own calls (send, close, lost) coord_conn.c; none of them calls back up here. */
#include "nodes/coord.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/crypto.h"
#include "nodes/coord_internal.h"

/* One frame body from k. */
static void on_frame(struct ddp_coord_conn *k, const uint8_t *body, size_t len)
{
    struct ddp_coord *c = k->c;
    char text[DDP_FRAME_MAX_BODY + 1];
    bool authed = k->state == DDP_COORD_AUTHED;
    struct ddp_frame_msg m;
    if (ddp_frame_open(authed ? k->key : NULL, c->server ? 'C' : 'S', k->seq_in, body, len, text, sizeof text) < 0) {
        if (authed)
            ddp_warn("coord: bad message authentication from %s (node %d): connection closed", k->peer, k->node);
        else if (c->server)
            ddp_coord_peer_warn(c, "a connection from %s sent a malformed handshake: closed", k->peer);
        return ddp_coord_conn_lost(k, authed ? "a message failed authentication" : "malformed handshake");
    }
    if (authed)
        k->seq_in++;
    if (ddp_frame_parse(text, !authed, &m) < 0) {
        if (!authed && c->server)
            ddp_coord_peer_warn(c, "a connection from %s sent a malformed handshake: closed", k->peer);
        return ddp_coord_conn_lost(k, authed                             ? "unknown message"
                                      : k->state == DDP_COORD_HELLO_WAIT ? "not a ddplaunch coordinator (bad greeting)"
                                                                         : "malformed handshake");
    }
    ddp_coord_live_heard(k, authed ? &m : NULL); /* answers a PING at once */
    if (!authed)
        return ddp_coord_join_handshake(k, &m);
    if (m.kind == DDP_FRAME_PING || m.kind == DDP_FRAME_PONG)
        return;

    struct ddp_coord_event ev = {.node = k->node, .attempt = m.attempt, .status = m.status, .reason = m.text};
    if (c->server) {
        if (m.kind == DDP_FRAME_REPORT) {
            ev.kind = DDP_COORD_REPORT;
            return ddp_coord_emit(c, &ev);
        }
        if (m.kind == DDP_FRAME_FR) {
            ev.kind = DDP_COORD_FR;
            ev.rank = m.rank;
            ev.still_ms = m.still_ms;
            return ddp_coord_emit(c, &ev);
        }
    } else {
        switch (m.kind) {
        case DDP_FRAME_START:
            ev.kind = DDP_COORD_START;
            ev.world_size = m.world_size;
            ev.group_world_size = m.group_world_size;
            ev.master_port = m.master_port;
            ev.nproc = m.nproc;
            ev.rank_base = m.rank_base;
            ev.group_rank = m.group_rank;
            return ddp_coord_emit(c, &ev);
        case DDP_FRAME_STOP:
            ev.kind = DDP_COORD_STOP;
            return ddp_coord_emit(c, &ev);
        case DDP_FRAME_EXIT:
            ev.kind = DDP_COORD_EXIT;
            ddp_coord_emit(c, &ev);
            return ddp_coord_conn_close(k, false);
        default:
            break;
        }
    }
    ddp_coord_conn_lost(k, "unknown message");
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct ddp_coord_conn *k = h->data;
    size_t want = 4 + DDP_FRAME_MAX_BODY;
    if (k->incap - k->inlen < want) {
        k->incap = k->inlen + want;
        k->in = ddp_xrealloc(k->in, k->incap);
    }
    *buf = uv_buf_init((char *)k->in + k->inlen, (unsigned)(k->incap - k->inlen));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct ddp_coord_conn *k = s->data;
    if (nread < 0) {
        char why[200];
        snprintf(why, sizeof why, "%s", nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
        ddp_coord_conn_lost(k, why);
        return;
    }
    k->inlen += (size_t)nread;
    size_t off = 0;
    while (!k->closing) {
        size_t blen = 0;
        ssize_t used = ddp_frame_split(k->in + off, k->inlen - off, &blen);
        if (used == 0)
            break;
        if (used < 0) {
            if (k->state != DDP_COORD_AUTHED && k->c->server)
                ddp_coord_peer_warn(k->c, "a connection from %s sent an oversized frame: closed", k->peer);
            ddp_coord_conn_lost(k, "oversized frame");
            return;
        }
        on_frame(k, k->in + off + 4, blen);
        off += (size_t)used;
    }
    if (k->closing)
        return;
    memmove(k->in, k->in + off, k->inlen - off);
    k->inlen -= off;
}

static struct ddp_coord_conn *conn_new(struct ddp_coord *c)
{
    struct ddp_coord_conn *k = ddp_xcalloc(1, sizeof *k);
    k->c = c;
    k->node = -1;
    k->state = DDP_COORD_HELLO_WAIT;
    c->handshaking++;
    k->opened_ms = k->last_seen_ms = ddp_now_ms();
    uv_tcp_init(c->loop, &k->tcp);
    k->tcp.data = k;
    c->handles++;
    k->next = c->conns;
    if (c->conns)
        c->conns->prev = k;
    c->conns = k;
    return k;
}

static void peer_name(struct ddp_coord_conn *k)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    snprintf(k->peer, sizeof k->peer, "?");
    snprintf(k->source, sizeof k->source, "?");
    if (uv_tcp_getpeername(&k->tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof host);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof host);
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    snprintf(k->source, sizeof k->source, "%s", host);
    snprintf(k->peer, sizeof k->peer, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct ddp_coord *c = server->data;
    if (status < 0 || c->closing)
        return;
    struct ddp_coord_conn *k = conn_new(c);
    if (uv_accept(server, (uv_stream_t *)&k->tcp) != 0) {
        ddp_coord_conn_close(k, false);
        return;
    }
    k->connected = true;
    peer_name(k);
    ddp_coord_join_make_room(c, k->source);
    uv_tcp_nodelay(&k->tcp, 1);
    ddp_coord_live_socket(k);
    k->state = DDP_COORD_JOIN_WAIT;
    uint8_t raw[DDP_FRAME_NONCE_HEX / 2];
    ddp_crypto_random(raw, sizeof raw);
    ddp_crypto_hex(raw, sizeof raw, k->snonce);
    char msg[64];
    snprintf(msg, sizeof msg, "DDPC2 HELLO %s", k->snonce);
    ddp_coord_conn_send(k, msg);
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct ddp_coord_conn *k = req->data;
    if (k->closing)
        return;
    if (status < 0) {
        ddp_coord_conn_lost(k, uv_strerror(status));
        return;
    }
    k->connected = true;
    peer_name(k);
    uv_tcp_nodelay(&k->tcp, 1);
    ddp_coord_live_socket(k);
    k->state = DDP_COORD_HELLO_WAIT;
    k->last_seen_ms = ddp_now_ms();
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

/* Other nodes: one more attempt to reach node 0. */
static void client_connect(struct ddp_coord *c)
{
    struct ddp_coord_conn *k = conn_new(c);
    k->state = DDP_COORD_HELLO_WAIT;
    k->connect_req.data = k;
    int rc = uv_tcp_connect(&k->connect_req, &k->tcp, (struct sockaddr *)&c->target, on_connect);
    if (rc < 0)
        ddp_coord_conn_lost(k, uv_strerror(rc));
}

/* The timer: liveness (coord_live.c), then, on a node that has not joined yet, the next attempt when it is due. */
static void on_tick(uv_timer_t *t)
{
    struct ddp_coord *c = t->data;
    if (ddp_coord_live_tick(c))
        client_connect(c);
}

static int resolve(const char *host, int port, bool passive, struct sockaddr_storage *out, socklen_t *outlen,
                   bool *loopback_name, struct ddp_err *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (host && !*host)
        host = NULL;
    if (passive && !host)
        hints.ai_family = AF_INET;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        return ddp_errf(err, -EHOSTUNREACH, "coord: cannot resolve '%s': %s", host ? host : "*", gai_strerror(rc));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *outlen = res->ai_addrlen;
    freeaddrinfo(res);
    if (loopback_name) {
        struct in6_addr any6;
        bool numeric = host && (inet_pton(AF_INET, host, &any6) == 1 || inet_pton(AF_INET6, host, &any6) == 1);
        bool loop = out->ss_family == AF_INET ? (ntohl(((struct sockaddr_in *)out)->sin_addr.s_addr) >> 24) == 127
                                              : IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)out)->sin6_addr);
        *loopback_name = host && !numeric && loop;
    }
    return 0;
}

int ddp_coord_listen(const char *addr, int port, int *fd, struct ddp_err *err)
{
    struct sockaddr_storage ss;
    socklen_t len;
    bool loopback_name = false;
    int rc = resolve(addr, port, true, &ss, &len, &loopback_name, err);
    if (rc < 0)
        return rc;
    if (loopback_name) { /* the own host name on 127.0.1.1: others reach it by its real address */
        if (ss.ss_family == AF_INET)
            ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_ANY);
        else
            ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_any;
    }
    int s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return ddp_errf(err, -errno, "coord: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6)
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&ss, len) < 0 || listen(s, SOMAXCONN) < 0) {
        int e = errno;
        close(s);
        return ddp_errf(err, -e, "coord: cannot listen on %s:%d: %s", addr && *addr ? addr : "*", port, strerror(e));
    }
    *fd = s;
    return 0;
}

/* Node 0 holds a connection per node and up to MAX_PENDING more: raise the soft descriptor limit toward the hard
 * one when a large job needs it (1024 is a common default). */
static void raise_fd_limit(int nnodes)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)2 * (rlim_t)nnodes + DDP_COORD_MAX_PENDING + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
        ddp_warn("coord: %d nodes need about %llu descriptors, the limit is %llu (ulimit -n)", nnodes,
                 (unsigned long long)want, (unsigned long long)rl.rlim_cur);
}

/* A coordinator with its own copy of cfg (strings owned), host its name, the defaults filled in. */
static struct ddp_coord *coord_new(const struct ddp_coord_config *cfg, const char *host)
{
    struct ddp_coord *c = ddp_xcalloc(1, sizeof *c);
    c->cfg = *cfg;
    c->addr = ddp_xstrdup(cfg->addr ? cfg->addr : "");
    c->secret = ddp_xstrdup(cfg->secret);
    c->job = ddp_xstrdup(cfg->job ? cfg->job : "");
    c->host = ddp_xstrdup(host);
    c->cfg.addr = c->addr;
    c->cfg.secret = c->secret;
    c->cfg.job = c->job;
    c->cfg.host = c->host;
    if (c->cfg.nproc <= 0)
        c->cfg.nproc = 1;
    if (c->cfg.lost_after_ms <= 0)
        c->cfg.lost_after_ms = DDP_COORD_LOST_AFTER_MS;
    if (c->cfg.heartbeat_ms <= 0) /* torchrun's keep-alive: every 5 s, three missed = lost */
        c->cfg.heartbeat_ms =
            c->cfg.lost_after_ms / 3 < DDP_COORD_HEARTBEAT_MS ? c->cfg.lost_after_ms / 3 : DDP_COORD_HEARTBEAT_MS;
    if (c->cfg.join_timeout_ms <= 0)
        c->cfg.join_timeout_ms = 600000;
    if (c->cfg.handshake_ms <= 0)
        c->cfg.handshake_ms = 5000;
    return c;
}

int ddp_coord_start(uv_loop_t *loop, const struct ddp_coord_config *cfg, ddp_coord_cb cb, void *data,
                    struct ddp_coord **out, struct ddp_err *err)
{
    bool server = cfg->node_rank == 0;
    int rc;
    if (!cfg->secret || strlen(cfg->secret) < 16)
        return ddp_errf(err, -EINVAL, "coord: the job secret must have at least 16 characters");
    if (cfg->nnodes < 2 || cfg->node_rank < DDP_COORD_ANY_RANK || cfg->node_rank >= cfg->nnodes)
        return ddp_errf(err, -EINVAL, "coord: node rank %d with %d nodes", cfg->node_rank, cfg->nnodes);
    if (cfg->port < 0 || cfg->port > 65535 || (!server && cfg->port == 0))
        return ddp_errf(err, -EINVAL, "coord: control port %d is not in 1..65535", cfg->port);
    if (!server && (!cfg->addr || !*cfg->addr))
        return ddp_errf(err, -EINVAL, "coord: node %d needs node 0's address", cfg->node_rank);
    const char *host = cfg->host && *cfg->host ? cfg->host : "?";
    if (!ddp_frame_host_ok(host))
        return ddp_errf(err, -EINVAL,
                        "coord: host name '%s' cannot be sent (printable, no spaces, at most %d "
                        "characters)",
                        host, DDP_FRAME_HOST_MAX);
    int lfd = -1;
    if (server && cfg->listen_fd >= 0) {
        lfd = fcntl(cfg->listen_fd, F_DUPFD_CLOEXEC, 0); /* our own copy: the caller keeps theirs */
        if (lfd < 0)
            return ddp_errf(err, -errno, "coord: dup: %s", strerror(errno));
    } else if (server) {
        rc = ddp_coord_listen(cfg->addr, cfg->port, &lfd, err);
        if (rc < 0)
            return rc;
    }
    struct ddp_coord *c = coord_new(cfg, host);
    c->loop = loop;
    c->cb = cb;
    c->data = data;
    c->server = server;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->handles++;
    if (server) {
        c->by_node = ddp_xcalloc((size_t)cfg->nnodes, sizeof *c->by_node);
        c->free_from = 1;
        raise_fd_limit(cfg->nnodes);
        uv_tcp_init(loop, &c->listener);
        c->listener.data = c;
        c->handles++;
        rc = uv_tcp_open(&c->listener, lfd);
        if (rc == 0)
            /* a thousand agents may connect within a second: a short backlog drops their SYNs, and each dropped one
             * waits out TCP's retransmission timeout (1 s, then 3 s); the kernel caps this at net.core.somaxconn */
            rc = uv_listen((uv_stream_t *)&c->listener, SOMAXCONN, on_connection);
        if (rc < 0) {
            ddp_errf(err, rc, "coord: cannot listen on %s:%d: %s", *c->addr ? c->addr : "*", cfg->port,
                     uv_strerror(rc));
            c->closing = true;
            uv_close((uv_handle_t *)&c->listener, ddp_coord_handle_closed);
            uv_close((uv_handle_t *)&c->timer, ddp_coord_handle_closed);
            return rc;
        }
        struct sockaddr_storage ss;
        int len = sizeof ss;
        uv_tcp_getsockname(&c->listener, (struct sockaddr *)&ss, &len);
        c->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
        c->tick_ms = c->cfg.heartbeat_ms < c->cfg.handshake_ms ? c->cfg.heartbeat_ms : c->cfg.handshake_ms;
        if (c->tick_ms > 250)
            c->tick_ms = 250;
        uv_timer_start(&c->timer, on_tick, (uint64_t)c->tick_ms, (uint64_t)c->tick_ms);
    } else {
        socklen_t len;
        rc = resolve(c->addr, cfg->port, false, &c->target, &len, NULL, err);
        if (rc < 0) {
            c->closing = true;
            uv_close((uv_handle_t *)&c->timer, ddp_coord_handle_closed);
            return rc;
        }
        c->port = cfg->port;
        c->join_deadline_ms = ddp_now_ms() + c->cfg.join_timeout_ms;
        c->tick_ms = c->cfg.heartbeat_ms < 100 ? c->cfg.heartbeat_ms : 100;
        uv_timer_start(&c->timer, on_tick, (uint64_t)c->tick_ms, (uint64_t)c->tick_ms);
        client_connect(c);
    }
    *out = c;
    return 0;
}

int ddp_coord_port(const struct ddp_coord *c)
{
    return c->port;
}

int ddp_coord_joined(const struct ddp_coord *c)
{
    return c->joined;
}

int ddp_coord_pending(const struct ddp_coord *c)
{
    return c->handshaking;
}

int ddp_coord_send_start(struct ddp_coord *c, int attempt, int world_size, int group_world_size, int master_port,
                         const struct ddp_layout_assign *assign)
{
    if (!c->server)
        return -EINVAL;
    int sent = 0;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next) {
        if (k->closing || k->state != DDP_COORD_AUTHED || k->node >= c->cfg.nnodes)
            continue;
        const struct ddp_layout_assign *a = &assign[k->node];
        if (a->nproc <= 0)
            continue;
        char msg[160];
        snprintf(msg, sizeof msg, "START %d %d %d %d %d %d %d", attempt, world_size, group_world_size, master_port,
                 a->nproc, a->rank_base, a->group_rank);
        ddp_coord_conn_send(k, msg);
        sent++;
    }
    return sent;
}

/* Printable, single-line copy of a reason. */
static void clean(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? ' ' : src[i];
    dst[i] = '\0';
}

static int broadcast(struct ddp_coord *c, const char *msg)
{
    int sent = 0;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == DDP_COORD_AUTHED) {
            ddp_coord_conn_send(k, msg);
            sent++;
        }
    return sent;
}

int ddp_coord_send_stop(struct ddp_coord *c, int attempt, const char *reason)
{
    if (!c->server)
        return -EINVAL;
    char why[1024], msg[1100];
    clean(why, sizeof why, reason);
    snprintf(msg, sizeof msg, why[0] ? "STOP %d %s" : "STOP %d", attempt, why);
    return broadcast(c, msg);
}

int ddp_coord_send_exit(struct ddp_coord *c, int status)
{
    if (!c->server)
        return -EINVAL;
    char msg[32];
    snprintf(msg, sizeof msg, "EXIT %d", status & 255);
    return broadcast(c, msg);
}

int ddp_coord_report(struct ddp_coord *c, int attempt, int status, const char *reason)
{
    if (c->server)
        return -EINVAL;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == DDP_COORD_AUTHED) {
            char why[1024], msg[1100];
            clean(why, sizeof why, reason);
            if (why[0])
                snprintf(msg, sizeof msg, "REPORT %d %d %s", attempt, status, why);
            else
                snprintf(msg, sizeof msg, "REPORT %d %d", attempt, status);
            ddp_coord_conn_send(k, msg);
            return 0;
        }
    return -ENOTCONN;
}

int ddp_coord_send_fr(struct ddp_coord *c, int attempt, int rank, long long still_ms, const char *json)
{
    if (c->server || attempt < 0 || rank < 0 || !json || json[0] != '{' || strlen(json) > DDP_FRAME_FR_MAX)
        return -EINVAL;
    for (const char *p = json; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return -EINVAL;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == DDP_COORD_AUTHED) {
            char *msg = ddp_xasprintf("FR %d %d %lld %s", attempt, rank,
                                      still_ms < 0         ? 0
                                      : still_ms > INT_MAX ? (long long)INT_MAX
                                                           : still_ms,
                                      json);
            ddp_coord_conn_send(k, msg);
            free(msg);
            return 0;
        }
    return -ENOTCONN;
}

void ddp_coord_close(struct ddp_coord *c, void (*done)(void *data), void *data)
{
    if (c->closing)
        return;
    c->closing = true;
    c->done = done;
    c->done_data = data;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next)
        ddp_coord_conn_close(k, true);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, ddp_coord_handle_closed);
    if (c->server)
        uv_close((uv_handle_t *)&c->listener, ddp_coord_handle_closed);
}
