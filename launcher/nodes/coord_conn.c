/* coord_conn: one connection's own calls, used by every file of the control channel: send a frame, close, give up
 * on a lost peer, tell the caller, warn about peers; and freeing the channel once its last handle closed. It calls
 * nothing above it (coord.c, coord_join.c, coord_live.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "nodes/coord_internal.h"

#define WARN_WINDOW_MS 10000
#define WARN_PER_WINDOW 3

struct write_req {
    uv_write_t req;
    uv_buf_t buf;
};

/* Warnings caused by peers (which a hostile peer can cause at will): a few per window, then a count. */
void ddp_coord_peer_warn(struct ddp_coord *c, const char *fmt, ...)
{
    unsigned dropped = 0;
    if (!ddp_ratelimit_allow(&c->warn_limit, ddp_now_ms(), WARN_PER_WINDOW, WARN_WINDOW_MS, &dropped))
        return;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (dropped)
        ddp_warn("coord: %s (%u more such warnings were suppressed)", msg, dropped);
    else
        ddp_warn("coord: %s", msg);
}

static void maybe_free(struct ddp_coord *c)
{
    if (!c->closing || c->handles > 0)
        return;
    void (*done)(void *) = c->done;
    void *done_data = c->done_data;
    ddp_crypto_wipe(c->secret, strlen(c->secret));
    free(c->addr);
    free(c->secret);
    free(c->job);
    free(c->host);
    free(c->by_node);
    free(c);
    if (done)
        done(done_data);
}

void ddp_coord_handle_closed(uv_handle_t *h)
{
    struct ddp_coord *c = h->data;
    c->handles--;
    maybe_free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct ddp_coord_conn *k = h->data;
    struct ddp_coord *c = k->c;
    if (k->prev)
        k->prev->next = k->next;
    else
        c->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    ddp_crypto_wipe(k->key, sizeof k->key);
    free(k->in);
    free(k);
    c->handles--;
    maybe_free(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    uv_handle_t *h = (uv_handle_t *)req->handle;
    free(req);
    uv_close(h, on_conn_closed);
}

void ddp_coord_conn_close(struct ddp_coord_conn *k, bool flush)
{
    if (k->closing)
        return;
    k->closing = true;
    struct ddp_coord *c = k->c;
    if (k->state == DDP_COORD_AUTHED)
        c->joined--;
    else
        c->handshaking--;
    if (c->by_node && k->node >= 0 && k->node < c->cfg.nnodes && c->by_node[k->node] == k) {
        c->by_node[k->node] = NULL;
        if (k->node < c->free_from)
            c->free_from = k->node;
    }
    uv_read_stop((uv_stream_t *)&k->tcp);
    if (flush && k->connected) {
        uv_shutdown_t *req = ddp_xmalloc(sizeof *req);
        if (uv_shutdown(req, (uv_stream_t *)&k->tcp, on_shutdown) == 0)
            return;
        free(req);
    }
    uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
}

void ddp_coord_conn_authed(struct ddp_coord_conn *k)
{
    if (k->closing || k->state == DDP_COORD_AUTHED)
        return;
    k->state = DDP_COORD_AUTHED;
    k->c->handshaking--;
    k->c->joined++;
}

static void on_write(uv_write_t *req, int status)
{
    (void)status; /* a broken connection shows up on the read side */
    struct write_req *w = (struct write_req *)req;
    free(w->buf.base);
    free(w);
}

void ddp_coord_conn_send(struct ddp_coord_conn *k, const char *text)
{
    if (k->closing || !k->connected)
        return;
    bool mac = k->state == DDP_COORD_AUTHED;
    size_t cap = 4 + DDP_FRAME_MAX_BODY;
    uint8_t *buf = ddp_xmalloc(cap);
    size_t n = ddp_frame_seal(mac ? k->key : NULL, k->c->server ? 'S' : 'C', k->seq_out, text, buf, cap);
    if (n == 0) {
        free(buf);
        return;
    }
    if (mac)
        k->seq_out++;
    struct write_req *w = ddp_xmalloc(sizeof *w);
    w->buf = uv_buf_init((char *)buf, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&k->tcp, &w->buf, 1, on_write) != 0) {
        free(buf);
        free(w);
    }
}

void ddp_coord_emit(struct ddp_coord *c, struct ddp_coord_event *ev)
{
    if (c->closing || c->dead)
        return;
    if (!ev->reason)
        ev->reason = "";
    if (!ev->host)
        ev->host = "";
    if (!c->server && (ev->kind == DDP_COORD_LOST || ev->kind == DDP_COORD_EXIT))
        c->dead = true;
    c->cb(c, ev, c->data);
}

struct ddp_coord_conn *ddp_coord_node_conn(const struct ddp_coord *c, int node)
{
    if (c->by_node) /* server: O(1), so that joining stays linear in the node count */
        return node >= 0 && node < c->cfg.nnodes ? c->by_node[node] : NULL;
    for (struct ddp_coord_conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == DDP_COORD_AUTHED && k->node == node)
            return k;
    return NULL;
}

void ddp_coord_conn_lost(struct ddp_coord_conn *k, const char *why)
{
    struct ddp_coord *c = k->c;
    bool authed = k->state == DDP_COORD_AUTHED;
    int node = k->node;
    ddp_coord_conn_close(k, false);
    if (c->closing || c->dead)
        return;
    if (c->server) {
        if (authed) {
            struct ddp_coord_event ev = {.kind = DDP_COORD_LOST, .node = node, .reason = why};
            ddp_coord_emit(c, &ev);
        } else {
            ddp_debug("coord: connection from %s ended before it joined: %s", k->peer, why);
        }
        return;
    }
    if (authed) {
        char msg[400];
        snprintf(msg, sizeof msg, "lost node 0 at %s:%d: %s", c->addr, c->cfg.port, why);
        struct ddp_coord_event ev = {.kind = DDP_COORD_LOST, .node = 0, .reason = msg};
        ddp_coord_emit(c, &ev);
        return;
    }
    /* Not joined yet: try again until the join deadline. */
    snprintf(c->last_error, sizeof c->last_error, "%s", why);
    c->next_retry_ms = ddp_now_ms() + DDP_COORD_RETRY_MS;
}
