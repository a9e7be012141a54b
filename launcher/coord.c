/* coord: authenticated TCP control channel between node agents. See coord.h.
 *
 * Wire format: every frame is a 4-byte big-endian length and a body of at most MAX_BODY bytes.
 * Handshake (plain text bodies):
 *   node 0 -> node: "DDPC1 HELLO <snonce>"
 *   node -> node 0: "DDPC1 JOIN <rank> <cnonce> <hex HMAC(secret, "join\n" run_id "\n" snonce "\n" cnonce "\n" rank)>"
 *   node 0 -> node: "DDPC1 WELCOME <hex HMAC(secret, "welcome\n" ...same...)>"  or  "DDPC1 DENIED <why>"
 * Then session key = HMAC(secret, "session\n" snonce "\n" cnonce), and every body is a 16-byte MAC
 * (HMAC(key, direction 'S'|'C', 8-byte sequence number, text), truncated) followed by the text:
 *   node 0 -> node: "PING", "START attempt world group_world port nproc rank_base group_rank", "STOP attempt why",
 *                   "EXIT status"
 *   node -> node 0: "PONG", "REPORT attempt status why"
 * A bad MAC, a bad frame or an unknown message closes the connection. */
#include "coord.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_BODY 4096
#define MAC_LEN 16
#define NONCE_HEX 32
#define MAX_PENDING 64
#define RETRY_MS 200

/* ---- SHA-256 and HMAC ---- */

struct sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
};

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha_block(struct sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6],
             h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

static void sha_init(struct sha256 *s)
{
    static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->n = 0;
}

static void sha_update(struct sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->len += len;
    while (len > 0) {
        size_t take = 64 - s->n < len ? 64 - s->n : len;
        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        len -= take;
        if (s->n == 64) {
            sha_block(s, s->buf);
            s->n = 0;
        }
    }
}

static void sha_final(struct sha256 *s, uint8_t out[32])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, lenb[8];
    sha_update(s, &pad, 1);
    while (s->n != 56)
        sha_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(s, lenb, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

/* HMAC over several pieces, so callers need not concatenate. */
static void hmac_parts(const void *key, size_t keylen, const void *const *parts, const size_t *lens, size_t n,
                       uint8_t mac[32])
{
    uint8_t k[64] = { 0 }, pad[64], inner[32];
    struct sha256 s;
    if (keylen > 64) {
        sha_init(&s);
        sha_update(&s, key, keylen);
        sha_final(&s, k);
    } else {
        memcpy(k, key, keylen);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha_init(&s);
    sha_update(&s, pad, 64);
    for (size_t i = 0; i < n; i++)
        sha_update(&s, parts[i], lens[i]);
    sha_final(&s, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha_init(&s);
    sha_update(&s, pad, 64);
    sha_update(&s, inner, 32);
    sha_final(&s, mac);
}

void ddp_coord_hmac(const void *key, size_t keylen, const void *msg, size_t msglen, uint8_t mac[32])
{
    const void *parts[1] = { msg };
    size_t lens[1] = { msglen };
    hmac_parts(key, keylen, parts, lens, 1, mac);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Constant-time comparison. */
static bool same(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

static void random_bytes(uint8_t *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ddp_error("coord: getrandom: %s", strerror(errno));
            abort();
        }
        got += (size_t)r;
    }
}

/* ---- connections ---- */

enum conn_state { ST_HELLO_WAIT, ST_JOIN_WAIT, ST_WELCOME_WAIT, ST_AUTHED };

struct conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    struct ddp_coord *c;
    struct conn *next;
    enum conn_state state;
    bool closing, connected;
    int node;
    char peer[64];
    char snonce[NONCE_HEX + 1], cnonce[NONCE_HEX + 1];
    uint8_t key[32];
    uint64_t seq_in, seq_out;
    long long opened_ms, last_seen_ms;
    uint8_t *in;
    size_t inlen, incap;
};

struct ddp_coord {
    uv_loop_t *loop;
    struct ddp_coord_config cfg;
    char *addr, *secret, *run_id;
    ddp_coord_cb cb;
    void *data;
    bool server;
    uv_tcp_t listener;
    uv_timer_t timer;
    struct conn *conns;
    int handles;
    bool closing, dead;
    void (*done)(void *);
    void *done_data;
    struct sockaddr_storage target;
    int port;
    long long join_deadline_ms, next_retry_ms;
    char last_error[200];
};

struct write_req {
    uv_write_t req;
    uv_buf_t buf;
};

static void maybe_free(struct ddp_coord *c)
{
    if (!c->closing || c->handles > 0)
        return;
    void (*done)(void *) = c->done;
    void *done_data = c->done_data;
    free(c->addr);
    free(c->secret);
    free(c->run_id);
    free(c);
    if (done)
        done(done_data);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct ddp_coord *c = h->data;
    c->handles--;
    maybe_free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *k = h->data;
    struct ddp_coord *c = k->c;
    struct conn **pp = &c->conns;
    while (*pp && *pp != k)
        pp = &(*pp)->next;
    if (*pp)
        *pp = k->next;
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

/* Close k; with flush, what was written is sent first. */
static void conn_close(struct conn *k, bool flush)
{
    if (k->closing)
        return;
    k->closing = true;
    uv_read_stop((uv_stream_t *)&k->tcp);
    if (flush && k->connected) {
        uv_shutdown_t *req = ddp_xmalloc(sizeof *req);
        if (uv_shutdown(req, (uv_stream_t *)&k->tcp, on_shutdown) == 0)
            return;
        free(req);
    }
    uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
}

static void on_write(uv_write_t *req, int status)
{
    (void)status; /* a broken connection shows up on the read side */
    struct write_req *w = (struct write_req *)req;
    free(w->buf.base);
    free(w);
}

/* Send text on k, MACed once the connection is authenticated. */
static void conn_send(struct conn *k, const char *text)
{
    if (k->closing || !k->connected)
        return;
    size_t tlen = strlen(text);
    bool mac = k->state == ST_AUTHED;
    size_t body = tlen + (mac ? MAC_LEN : 0);
    if (body > MAX_BODY)
        return;
    uint8_t *buf = ddp_xmalloc(4 + body);
    buf[0] = (uint8_t)(body >> 24);
    buf[1] = (uint8_t)(body >> 16);
    buf[2] = (uint8_t)(body >> 8);
    buf[3] = (uint8_t)body;
    if (mac) {
        uint8_t dir = k->c->server ? 'S' : 'C', seq[8], full[32];
        for (int i = 0; i < 8; i++)
            seq[i] = (uint8_t)(k->seq_out >> (56 - 8 * i));
        k->seq_out++;
        const void *parts[3] = { &dir, seq, text };
        size_t lens[3] = { 1, 8, tlen };
        hmac_parts(k->key, sizeof k->key, parts, lens, 3, full);
        memcpy(buf + 4, full, MAC_LEN);
    }
    memcpy(buf + 4 + (mac ? MAC_LEN : 0), text, tlen);
    struct write_req *w = ddp_xmalloc(sizeof *w);
    w->buf = uv_buf_init((char *)buf, (unsigned)(4 + body));
    if (uv_write(&w->req, (uv_stream_t *)&k->tcp, &w->buf, 1, on_write) != 0) {
        free(buf);
        free(w);
    }
}

static int emit(struct ddp_coord *c, struct ddp_coord_event *ev)
{
    if (c->closing || c->dead)
        return 0;
    if (!ev->reason)
        ev->reason = "";
    if (!c->server && (ev->kind == DDP_COORD_LOST || ev->kind == DDP_COORD_EXIT))
        c->dead = true;
    c->cb(c, ev, c->data);
    return 0;
}

static void handshake_mac(const struct conn *k, const char *what, int node, char out[65])
{
    char rank[16];
    snprintf(rank, sizeof rank, "%d", node);
    const char *run_id = k->c->run_id;
    const void *parts[9] = { what, "\n", run_id, "\n", k->snonce, "\n", k->cnonce, "\n", rank };
    size_t lens[9] = { strlen(what), 1, strlen(run_id), 1, NONCE_HEX, 1, NONCE_HEX, 1, strlen(rank) };
    uint8_t mac[32];
    hmac_parts(k->c->secret, strlen(k->c->secret), parts, lens, 9, mac);
    hex(mac, 32, out);
}

static void derive_key(struct conn *k)
{
    const void *parts[4] = { "session\n", k->snonce, "\n", k->cnonce };
    size_t lens[4] = { 8, NONCE_HEX, 1, NONCE_HEX };
    hmac_parts(k->c->secret, strlen(k->c->secret), parts, lens, 4, k->key);
}

static struct conn *node_conn(const struct ddp_coord *c, int node)
{
    for (struct conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == ST_AUTHED && k->node == node)
            return k;
    return NULL;
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0' || s[n] == ' ';
}

/* The peer left or broke the protocol: close, and tell the caller when it matters. */
static int conn_lost(struct conn *k, const char *why)
{
    struct ddp_coord *c = k->c;
    bool authed = k->state == ST_AUTHED;
    int node = k->node;
    conn_close(k, false);
    if (c->closing || c->dead)
        return 0;
    if (c->server) {
        if (authed) {
            struct ddp_coord_event ev = { .kind = DDP_COORD_LOST, .node = node, .reason = why };
            emit(c, &ev);
        } else {
            ddp_debug("coord: connection from %s ended before it joined: %s", k->peer, why);
        }
        return 0;
    }
    if (authed) {
        char msg[400];
        snprintf(msg, sizeof msg, "lost node 0 at %s:%d: %s", c->addr, c->cfg.port, why);
        struct ddp_coord_event ev = { .kind = DDP_COORD_LOST, .node = 0, .reason = msg };
        emit(c, &ev);
        return 0;
    }
    /* Not joined yet: try again until the join deadline. */
    snprintf(c->last_error, sizeof c->last_error, "%s", why);
    c->next_retry_ms = ddp_now_ms() + RETRY_MS;
    return 0;
}

static int client_refused(struct conn *k, const char *why)
{
    struct ddp_coord *c = k->c;
    conn_close(k, false);
    char msg[400];
    snprintf(msg, sizeof msg, "node 0 at %s:%d refused this node: %s", c->addr, c->cfg.port, why);
    struct ddp_coord_event ev = { .kind = DDP_COORD_LOST, .node = 0, .reason = msg };
    emit(c, &ev);
    return 0;
}

static int server_deny(struct conn *k, const char *why)
{
    char msg[300];
    snprintf(msg, sizeof msg, "DDPC1 DENIED %s", why);
    ddp_warn("coord: refused a node from %s: %s", k->peer, why);
    conn_send(k, msg);
    conn_close(k, true);
    return 0;
}

/* Handshake and messages, one frame body at a time. */
/* Returns 0 (an int so that handlers can end with "return conn_lost(...)"). */
static int on_frame(struct conn *k, uint8_t *body, size_t len)
{
    struct ddp_coord *c = k->c;
    char text[MAX_BODY + 1];
    if (k->state == ST_AUTHED) {
        if (len < MAC_LEN)
            return conn_lost(k, "short frame");
        uint8_t dir = c->server ? 'C' : 'S', seq[8], full[32];
        for (int i = 0; i < 8; i++)
            seq[i] = (uint8_t)(k->seq_in >> (56 - 8 * i));
        const void *parts[3] = { &dir, seq, body + MAC_LEN };
        size_t lens[3] = { 1, 8, len - MAC_LEN };
        hmac_parts(k->key, sizeof k->key, parts, lens, 3, full);
        if (!same(full, body, MAC_LEN)) {
            ddp_warn("coord: bad message authentication from %s (node %d): connection closed", k->peer, k->node);
            return conn_lost(k, "a message failed authentication");
        }
        k->seq_in++;
        body += MAC_LEN;
        len -= MAC_LEN;
    }
    memcpy(text, body, len);
    text[len] = '\0';
    if (strlen(text) != len)
        return conn_lost(k, "NUL byte in a message");
    k->last_seen_ms = ddp_now_ms();

    switch (k->state) {
    case ST_HELLO_WAIT: { /* client */
        if (strncmp(text, "DDPC1 HELLO ", 12) != 0 || strlen(text + 12) != NONCE_HEX || !is_hex(text + 12, NONCE_HEX))
            return conn_lost(k, "not a ddplaunch coordinator (bad greeting)");
        memcpy(k->snonce, text + 12, NONCE_HEX + 1);
        uint8_t raw[NONCE_HEX / 2];
        random_bytes(raw, sizeof raw);
        hex(raw, sizeof raw, k->cnonce);
        char mac[65], msg[200];
        handshake_mac(k, "join", c->cfg.node_rank, mac);
        snprintf(msg, sizeof msg, "DDPC1 JOIN %d %s %s", c->cfg.node_rank, k->cnonce, mac);
        conn_send(k, msg);
        k->state = ST_WELCOME_WAIT;
        return 0;
    }
    case ST_WELCOME_WAIT: { /* client */
        if (strncmp(text, "DDPC1 DENIED ", 13) == 0)
            return client_refused(k, text + 13);
        char want[65];
        handshake_mac(k, "welcome", c->cfg.node_rank, want);
        if (strncmp(text, "DDPC1 WELCOME ", 14) != 0 || strlen(text + 14) != 64 || !same(text + 14, want, 64))
            return client_refused(k, "its answer failed authentication (is the job secret the same on every "
                                     "node?)");
        derive_key(k);
        k->state = ST_AUTHED;
        k->node = 0;
        struct ddp_coord_event ev = { .kind = DDP_COORD_JOINED, .node = c->cfg.node_rank };
        emit(c, &ev);
        return 0;
    }
    case ST_JOIN_WAIT: { /* server */
        int node, n = 0;
        char cnonce[NONCE_HEX + 1], mac[65];
        if (sscanf(text, "DDPC1 JOIN %d %32s %64s%n", &node, cnonce, mac, &n) != 3 || text[n] != '\0' ||
            strlen(cnonce) != NONCE_HEX || !is_hex(cnonce, NONCE_HEX) || strlen(mac) != 64)
            return conn_lost(k, "bad join message");
        memcpy(k->cnonce, cnonce, sizeof cnonce);
        char want[65];
        handshake_mac(k, "join", node, want);
        if (!same(want, mac, 64))
            return server_deny(k, "authentication failed (is the job secret the same on every node?)");
        if (node < 1 || node >= c->cfg.nnodes) {
            char why[100];
            snprintf(why, sizeof why, "node rank %d is not in 1..%d", node, c->cfg.nnodes - 1);
            return server_deny(k, why);
        }
        if (node_conn(c, node)) {
            char why[100];
            snprintf(why, sizeof why, "node %d has already joined", node);
            return server_deny(k, why);
        }
        k->node = node;
        handshake_mac(k, "welcome", node, want);
        char msg[100];
        snprintf(msg, sizeof msg, "DDPC1 WELCOME %s", want);
        conn_send(k, msg);
        derive_key(k);
        k->state = ST_AUTHED;
        struct ddp_coord_event ev = { .kind = DDP_COORD_JOINED, .node = node };
        emit(c, &ev);
        return 0;
    }
    case ST_AUTHED:
        break;
    }

    int a, b, g, p, q, r, gr, n = 0;
    struct ddp_coord_event ev = { .node = k->node };
    if (c->server) {
        if (strcmp(text, "PONG") == 0)
            return 0;
        if (sscanf(text, "REPORT %d %d%n", &a, &b, &n) == 2 && (text[n] == '\0' || text[n] == ' ')) {
            ev.kind = DDP_COORD_REPORT;
            ev.attempt = a;
            ev.status = b;
            ev.reason = text[n] ? text + n + 1 : "";
            return emit(c, &ev);
        }
    } else {
        if (strcmp(text, "PING") == 0) {
            conn_send(k, "PONG");
            return 0;
        }
        if (sscanf(text, "START %d %d %d %d %d %d %d%n", &a, &b, &g, &p, &q, &r, &gr, &n) == 7 && text[n] == '\0') {
            ev.kind = DDP_COORD_START;
            ev.attempt = a;
            ev.world_size = b;
            ev.group_world_size = g;
            ev.master_port = p;
            ev.nproc = q;
            ev.rank_base = r;
            ev.group_rank = gr;
            return emit(c, &ev);
        }
        if (sscanf(text, "STOP %d%n", &a, &n) == 1 && (text[n] == '\0' || text[n] == ' ')) {
            ev.kind = DDP_COORD_STOP;
            ev.attempt = a;
            ev.reason = text[n] ? text + n + 1 : "";
            return emit(c, &ev);
        }
        if (sscanf(text, "EXIT %d%n", &a, &n) == 1 && text[n] == '\0') {
            ev.kind = DDP_COORD_EXIT;
            ev.status = a;
            emit(c, &ev);
            conn_close(k, false);
            return 0;
        }
    }
    conn_lost(k, "unknown message");
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct conn *k = h->data;
    size_t want = 4 + MAX_BODY;
    if (k->incap - k->inlen < want) {
        k->incap = k->inlen + want;
        k->in = ddp_xrealloc(k->in, k->incap);
    }
    *buf = uv_buf_init((char *)k->in + k->inlen, (unsigned)(k->incap - k->inlen));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct conn *k = s->data;
    if (nread < 0) {
        char why[200];
        snprintf(why, sizeof why, "%s", nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
        conn_lost(k, why);
        return;
    }
    k->inlen += (size_t)nread;
    size_t off = 0;
    while (!k->closing && k->inlen - off >= 4) {
        const uint8_t *p = k->in + off;
        size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        if (len > MAX_BODY) {
            conn_lost(k, "oversized frame");
            return;
        }
        if (k->inlen - off < 4 + len)
            break;
        on_frame(k, k->in + off + 4, len);
        off += 4 + len;
    }
    if (k->closing)
        return;
    memmove(k->in, k->in + off, k->inlen - off);
    k->inlen -= off;
}

static struct conn *conn_new(struct ddp_coord *c)
{
    struct conn *k = ddp_xcalloc(1, sizeof *k);
    k->c = c;
    k->node = -1;
    k->opened_ms = k->last_seen_ms = ddp_now_ms();
    uv_tcp_init(c->loop, &k->tcp);
    k->tcp.data = k;
    c->handles++;
    k->next = c->conns;
    c->conns = k;
    return k;
}

static void peer_name(struct conn *k)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    snprintf(k->peer, sizeof k->peer, "?");
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
    snprintf(k->peer, sizeof k->peer, "%s:%d", host, port);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct ddp_coord *c = server->data;
    if (status < 0 || c->closing)
        return;
    int pending = 0;
    for (struct conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state != ST_AUTHED)
            pending++;
    struct conn *k = conn_new(c);
    if (uv_accept(server, (uv_stream_t *)&k->tcp) != 0) {
        conn_close(k, false);
        return;
    }
    k->connected = true;
    peer_name(k);
    if (pending >= MAX_PENDING) {
        ddp_warn("coord: too many connections waiting to join; dropped %s", k->peer);
        conn_close(k, false);
        return;
    }
    k->state = ST_JOIN_WAIT;
    uint8_t raw[NONCE_HEX / 2];
    random_bytes(raw, sizeof raw);
    hex(raw, sizeof raw, k->snonce);
    char msg[64];
    snprintf(msg, sizeof msg, "DDPC1 HELLO %s", k->snonce);
    uv_tcp_nodelay(&k->tcp, 1);
    conn_send(k, msg);
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct conn *k = req->data;
    if (k->closing)
        return;
    if (status < 0) {
        conn_lost(k, uv_strerror(status));
        return;
    }
    k->connected = true;
    peer_name(k);
    uv_tcp_nodelay(&k->tcp, 1);
    k->state = ST_HELLO_WAIT;
    k->last_seen_ms = ddp_now_ms();
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

static void client_connect(struct ddp_coord *c)
{
    struct conn *k = conn_new(c);
    k->state = ST_HELLO_WAIT;
    k->connect_req.data = k;
    int rc = uv_tcp_connect(&k->connect_req, &k->tcp, (struct sockaddr *)&c->target, on_connect);
    if (rc < 0)
        conn_lost(k, uv_strerror(rc));
}

static void on_timer(uv_timer_t *t)
{
    struct ddp_coord *c = t->data;
    long long now = ddp_now_ms();
    if (c->closing)
        return;
    if (c->server) {
        for (struct conn *k = c->conns, *next; k; k = next) {
            next = k->next;
            if (k->closing)
                continue;
            if (now - k->last_seen_ms > c->cfg.lost_after_ms) {
                char why[100];
                snprintf(why, sizeof why, "silent for %lld ms", now - k->last_seen_ms);
                conn_lost(k, why); /* may run the callback, which may close c */
                if (c->closing)
                    return;
                next = c->conns; /* the list may have changed; closing entries are skipped */
                continue;
            }
            if (k->state == ST_AUTHED)
                conn_send(k, "PING");
        }
        return;
    }
    if (c->dead)
        return;
    struct conn *live = NULL;
    for (struct conn *k = c->conns; k; k = k->next)
        if (!k->closing)
            live = k;
    if (live) {
        if (now - live->last_seen_ms > c->cfg.lost_after_ms) {
            char why[100];
            snprintf(why, sizeof why, "silent for %lld ms", now - live->last_seen_ms);
            conn_lost(live, why);
        }
        return;
    }
    if (now >= c->join_deadline_ms) {
        char msg[400];
        snprintf(msg, sizeof msg, "could not join node 0 at %s:%d within %lld ms: %s", c->addr, c->cfg.port,
                 c->cfg.join_timeout_ms, c->last_error[0] ? c->last_error : "no answer");
        struct ddp_coord_event ev = { .kind = DDP_COORD_LOST, .node = 0, .reason = msg };
        emit(c, &ev);
        return;
    }
    if (now >= c->next_retry_ms)
        client_connect(c);
}

static int resolve(const char *host, int port, bool passive, struct sockaddr_storage *out, struct ddp_err *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = passive ? AI_PASSIVE : 0 };
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (passive && host && !*host)
        host = NULL;
    if (passive && !host)
        hints.ai_family = AF_INET;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        return ddp_errf(err, -EHOSTUNREACH, "coord: cannot resolve '%s': %s", host ? host : "*",
                        gai_strerror(rc));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

int ddp_coord_start(uv_loop_t *loop, const struct ddp_coord_config *cfg, ddp_coord_cb cb, void *data,
                    struct ddp_coord **out, struct ddp_err *err)
{
    if (!cfg->secret || strlen(cfg->secret) < 16)
        return ddp_errf(err, -EINVAL, "coord: the job secret must have at least 16 characters");
    if (cfg->nnodes < 2 || cfg->node_rank < 0 || cfg->node_rank >= cfg->nnodes)
        return ddp_errf(err, -EINVAL, "coord: node rank %d with %d nodes", cfg->node_rank,
                        cfg->nnodes);
    if (cfg->port < 0 || cfg->port > 65535 || (cfg->node_rank > 0 && cfg->port == 0))
        return ddp_errf(err, -EINVAL, "coord: control port %d is not in 1..65535", cfg->port);
    if (cfg->node_rank > 0 && (!cfg->addr || !*cfg->addr))
        return ddp_errf(err, -EINVAL, "coord: node %d needs node 0's address", cfg->node_rank);
    struct ddp_coord *c = ddp_xcalloc(1, sizeof *c);
    c->loop = loop;
    c->cfg = *cfg;
    c->addr = ddp_xstrdup(cfg->addr ? cfg->addr : "");
    c->secret = ddp_xstrdup(cfg->secret);
    c->run_id = ddp_xstrdup(cfg->run_id ? cfg->run_id : "");
    c->cfg.addr = c->addr;
    c->cfg.secret = c->secret;
    c->cfg.run_id = c->run_id;
    if (c->cfg.heartbeat_ms <= 0)
        c->cfg.heartbeat_ms = 1000;
    if (c->cfg.lost_after_ms <= 0)
        c->cfg.lost_after_ms = 5000;
    if (c->cfg.join_timeout_ms <= 0)
        c->cfg.join_timeout_ms = 60000;
    c->cb = cb;
    c->data = data;
    c->server = cfg->node_rank == 0;
    int rc = resolve(c->addr, cfg->port, c->server, &c->target, err);
    if (rc < 0)
        goto fail;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->handles++;
    if (c->server) {
        uv_tcp_init(loop, &c->listener);
        c->listener.data = c;
        c->handles++;
        rc = uv_tcp_bind(&c->listener, (struct sockaddr *)&c->target, 0);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&c->listener, 128, on_connection);
        if (rc < 0) {
            ddp_errf(err, rc, "coord: cannot listen on %s:%d: %s", *c->addr ? c->addr : "*", cfg->port,
                     uv_strerror(rc));
            c->closing = true;
            uv_close((uv_handle_t *)&c->listener, on_handle_closed);
            uv_close((uv_handle_t *)&c->timer, on_handle_closed);
            return rc;
        }
        struct sockaddr_storage ss;
        int len = sizeof ss;
        uv_tcp_getsockname(&c->listener, (struct sockaddr *)&ss, &len);
        c->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
        uv_timer_start(&c->timer, on_timer, (uint64_t)c->cfg.heartbeat_ms, (uint64_t)c->cfg.heartbeat_ms);
    } else {
        c->port = cfg->port;
        c->join_deadline_ms = ddp_now_ms() + c->cfg.join_timeout_ms;
        long long tick = c->cfg.heartbeat_ms < 100 ? c->cfg.heartbeat_ms : 100;
        uv_timer_start(&c->timer, on_timer, (uint64_t)tick, (uint64_t)tick);
        client_connect(c);
    }
    *out = c;
    return 0;
fail:
    free(c->addr);
    free(c->secret);
    free(c->run_id);
    free(c);
    return rc;
}

int ddp_coord_port(const struct ddp_coord *c)
{
    return c->port;
}

int ddp_coord_joined(const struct ddp_coord *c)
{
    int n = 0;
    for (const struct conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == ST_AUTHED)
            n++;
    return n;
}

bool ddp_coord_node_joined(const struct ddp_coord *c, int node)
{
    return node_conn(c, node) != NULL;
}

int ddp_coord_send_start(struct ddp_coord *c, int attempt, int world_size, int group_world_size, int master_port,
                         const struct ddp_coord_assign *assign)
{
    if (!c->server)
        return -EINVAL;
    int sent = 0;
    for (struct conn *k = c->conns; k; k = k->next) {
        if (k->closing || k->state != ST_AUTHED || k->node >= c->cfg.nnodes)
            continue;
        const struct ddp_coord_assign *a = &assign[k->node];
        if (a->nproc <= 0)
            continue;
        char msg[160];
        snprintf(msg, sizeof msg, "START %d %d %d %d %d %d %d", attempt, world_size, group_world_size,
                 master_port, a->nproc, a->rank_base, a->group_rank);
        conn_send(k, msg);
        sent++;
    }
    return sent;
}

int ddp_coord_layout(int nnodes, const bool *up, const int *nproc, int min_nodes, struct ddp_coord_assign *assign,
                     int *world_size)
{
    int nodes = 0, ranks = 0;
    for (int i = 0; i < nnodes; i++) {
        bool in = up[i] && nproc[i] > 0;
        assign[i] = (struct ddp_coord_assign){ in ? nproc[i] : 0, in ? ranks : 0, in ? nodes : 0 };
        if (in) {
            ranks += nproc[i];
            nodes++;
        }
    }
    if (nnodes < 1 || assign[0].nproc == 0 || nodes < min_nodes)
        return -ENODEV;
    *world_size = ranks;
    return nodes;
}

void ddp_coord_round_begin(struct ddp_coord_round *r, int nnodes, int attempt, const struct ddp_coord_assign *assign)
{
    if (!r->state || r->nnodes != nnodes) {
        free(r->state);
        r->state = ddp_xcalloc((size_t)nnodes, 1);
    }
    r->nnodes = nnodes;
    r->attempt = attempt;
    r->running = 0;
    r->failed_node = -1;
    r->failed_status = 0;
    r->failed_reason[0] = '\0';
    for (int i = 0; i < nnodes; i++) {
        r->state[i] = assign[i].nproc > 0 ? 1 : 0;
        r->running += r->state[i];
    }
}

bool ddp_coord_round_end(struct ddp_coord_round *r, int attempt, int node, int status, const char *reason)
{
    if (attempt != r->attempt || node < 0 || node >= r->nnodes || r->state[node] != 1)
        return false;
    r->running--;
    r->state[node] = status == 0 ? 2 : 3;
    if (status == 0 || r->failed_node >= 0)
        return false;
    r->failed_node = node;
    r->failed_status = status;
    snprintf(r->failed_reason, sizeof r->failed_reason, "%s", reason ? reason : "");
    return true;
}

bool ddp_coord_round_done(const struct ddp_coord_round *r)
{
    return r->state && r->running == 0;
}

void ddp_coord_round_free(struct ddp_coord_round *r)
{
    free(r->state);
    memset(r, 0, sizeof *r);
}

/* Printable, single-line copy of a reason. */
static void clean(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? ' ' : src[i];
    dst[i] = '\0';
}

int ddp_coord_send_stop(struct ddp_coord *c, int attempt, const char *reason)
{
    if (!c->server)
        return -EINVAL;
    char why[1024], msg[1100];
    clean(why, sizeof why, reason);
    snprintf(msg, sizeof msg, "STOP %d %s", attempt, why);
    int sent = 0;
    for (struct conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == ST_AUTHED) {
            conn_send(k, msg);
            sent++;
        }
    return sent;
}

int ddp_coord_send_exit(struct ddp_coord *c, int status)
{
    if (!c->server)
        return -EINVAL;
    char msg[32];
    snprintf(msg, sizeof msg, "EXIT %d", status);
    int sent = 0;
    for (struct conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == ST_AUTHED) {
            conn_send(k, msg);
            sent++;
        }
    return sent;
}

int ddp_coord_report(struct ddp_coord *c, int attempt, int status, const char *reason)
{
    if (c->server)
        return -EINVAL;
    for (struct conn *k = c->conns; k; k = k->next)
        if (!k->closing && k->state == ST_AUTHED) {
            char why[1024], msg[1100];
            clean(why, sizeof why, reason);
            snprintf(msg, sizeof msg, "REPORT %d %d %s", attempt, status, why);
            conn_send(k, msg);
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
    for (struct conn *k = c->conns; k; k = k->next)
        conn_close(k, true);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (c->server)
        uv_close((uv_handle_t *)&c->listener, on_handle_closed);
}

/* ---- the job secret ---- */

static int read_token(const char *path, char *buf, size_t cap, struct ddp_err *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = ddp_errf(err, -errno, "token file %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = ddp_errf(err, -EPERM, "token file %s is not a regular file", path);
    else if (st.st_uid != geteuid())
        rc = ddp_errf(err, -EPERM, "token file %s belongs to uid %u, not to this user (%u)", path,
                      (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        rc = ddp_errf(err, -EPERM, "token file %s has mode %03o; it must be private (chmod 600 %s)",
                      path, (unsigned)(st.st_mode & 0777), path);
    if (rc == 0) {
        ssize_t n = read(fd, buf, cap - 1);
        if (n < 0)
            rc = ddp_errf(err, -errno, "token file %s: %s", path, strerror(errno));
        else {
            while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
                n--;
            buf[n] = '\0';
            if (n < 16)
                rc = ddp_errf(err, -EINVAL, "token file %s holds fewer than 16 characters", path);
        }
    }
    close(fd);
    return rc;
}

static int create_token(const char *path, struct ddp_err *err)
{
    char *tmp = ddp_xasprintf("%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        int rc = ddp_errf(err, -e, "cannot create token file %s: %s", tmp, strerror(e));
        free(tmp);
        return rc;
    }
    uint8_t raw[32];
    char text[66];
    random_bytes(raw, sizeof raw);
    hex(raw, sizeof raw, text);
    strcat(text, "\n");
    ssize_t w = write(fd, text, strlen(text));
    int rc = 0;
    if (w != (ssize_t)strlen(text) || fsync(fd) < 0)
        rc = ddp_errf(err, -EIO, "cannot write token file %s", tmp);
    close(fd);
    /* link() is atomic and fails when another node (sharing this home directory) was first: use theirs. */
    if (rc == 0 && link(tmp, path) < 0 && errno != EEXIST)
        rc = ddp_errf(err, -errno, "cannot create token file %s: %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return rc;
}

int ddp_coord_secret(const char *job_secret, const char *token_path, const char *job_id, char **out,
                     struct ddp_err *err)
{
    if (job_secret && *job_secret) {
        if (strlen(job_secret) < 16)
            return ddp_errf(err, -EINVAL, "[job] secret must have at least 16 characters");
        *out = ddp_xstrdup(job_secret);
        return 0;
    }
    if (!token_path || !job_id || !*job_id)
        return ddp_errf(err, -EINVAL, "several nodes need a shared secret: set [job] secret (the same "
                                      "on every node), or run under Slurm with a token file");
    char token[4096];
    int rc = read_token(token_path, token, sizeof token, err);
    if (rc == -ENOENT) {
        rc = create_token(token_path, err);
        if (rc == 0)
            rc = read_token(token_path, token, sizeof token, err);
    }
    if (rc == -ENOENT || rc == -ELOOP)
        return ddp_errf(err, rc, "token file %s: %s", token_path, strerror(-rc));
    if (rc < 0)
        return rc;
    char *msg = ddp_xasprintf("ddplaunch job %s", job_id);
    uint8_t mac[32];
    ddp_coord_hmac(token, strlen(token), msg, strlen(msg), mac);
    free(msg);
    *out = ddp_xmalloc(65);
    hex(mac, 32, *out);
    return 0;
}
