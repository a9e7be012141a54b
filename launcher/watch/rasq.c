/* rasq: see rasq.h. */
#include "watch/rasq.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

struct ddp_rasq {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    uv_timer_t timer;
    int open; /* handles not yet closed */
    bool answered;
    int early; /* a failure before the connection: said when the timer fires at once */
    struct ddp_buf in;
    void (*done)(void *arg, int rc, const struct ddp_ras *ras);
    void *arg;
};

static const char ask[] = "CLIENT PROTOCOL 2\nSET FORMAT json\nSTATUS\n";

int ddp_rasq_port(const char *addr)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon)
        return 0;
    size_t hl = (size_t)(colon - addr);
    if (!((hl == 9 && strncmp(addr, "localhost", 9) == 0) || (hl == 9 && strncmp(addr, "127.0.0.1", 9) == 0)))
        return 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return *end || port <= 0 || port > 65535 ? 0 : (int)port;
}

static void on_closed(uv_handle_t *h)
{
    struct ddp_rasq *q = h->data;
    if (--q->open > 0)
        return;
    ddp_buf_free(&q->in);
    free(q);
}

/* Say rc (once) and close everything. */
static void finish(struct ddp_rasq *q, int rc, const struct ddp_ras *ras)
{
    if (q->answered)
        return;
    q->answered = true;
    if (q->done)
        q->done(q->arg, rc, ras);
    uv_close((uv_handle_t *)&q->tcp, on_closed);
    uv_close((uv_handle_t *)&q->timer, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    static char space[65536];
    *buf = uv_buf_init(space, sizeof(space));
}

/* The connection ended (EOF) or the deadline came without a JSON document: an NCCL before 2.28.7 knows no SET
 * FORMAT json and answers STATUS in text, which ddp_ras_parse reads too; else rc. */
static void settle(struct ddp_rasq *q, int rc)
{
    struct ddp_ras ras;
    if (q->in.len && ddp_ras_parse(q->in.data, q->in.len, &ras) == 0) {
        finish(q, 0, &ras);
        ddp_ras_free(&ras);
        return;
    }
    finish(q, rc, NULL);
}

/* The answer so far: whole once its JSON document parses (or, in text, at EOF or the deadline: settle). */
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct ddp_rasq *q = s->data;
    if (q->answered)
        return;
    if (n < 0) {
        settle(q, n == UV_EOF ? -EINVAL : (int)n);
        return;
    }
    ddp_buf_add(&q->in, buf->base, (size_t)n);
    const char *brace = q->in.len ? memchr(q->in.data, '{', q->in.len) : NULL;
    if (q->in.len > DDP_RASQ_MAX) {
        finish(q, -EMSGSIZE, NULL);
        return;
    }
    if (!brace)
        return;
    json_t *doc = json_loadb(brace, q->in.len - (size_t)(brace - q->in.data), JSON_DISABLE_EOF_CHECK, NULL);
    if (!doc)
        return; /* not whole yet */
    json_decref(doc);
    struct ddp_ras ras;
    int rc = ddp_ras_parse(q->in.data, q->in.len, &ras);
    finish(q, rc, rc == 0 ? &ras : NULL);
    if (rc == 0)
        ddp_ras_free(&ras);
}

static void on_written(uv_write_t *w, int status)
{
    struct ddp_rasq *q = w->data;
    if (status < 0)
        finish(q, status, NULL);
}

static void on_connect(uv_connect_t *c, int status)
{
    struct ddp_rasq *q = c->data;
    if (q->answered)
        return;
    if (status < 0) {
        finish(q, status, NULL);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)ask, sizeof(ask) - 1);
    q->wr.data = q;
    int rc = uv_write(&q->wr, (uv_stream_t *)&q->tcp, &b, 1, on_written);
    if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&q->tcp, on_alloc, on_read);
    if (rc < 0)
        finish(q, rc, NULL);
}

static void on_deadline(uv_timer_t *t)
{
    struct ddp_rasq *q = t->data;
    settle(q, q->early ? q->early : -ETIMEDOUT);
}

void ddp_rasq_cancel(struct ddp_rasq *q)
{
    if (!q)
        return;
    q->done = NULL;
    finish(q, -ECANCELED, NULL);
}

struct ddp_rasq *ddp_rasq_start(uv_loop_t *loop, int port, long long deadline_ms,
                                void (*done)(void *arg, int rc, const struct ddp_ras *ras), void *arg)
{
    struct ddp_rasq *q = ddp_xcalloc(1, sizeof(*q));
    struct sockaddr_in sa;
    q->done = done;
    q->arg = arg;
    uv_tcp_init(loop, &q->tcp);
    uv_timer_init(loop, &q->timer);
    q->tcp.data = q->timer.data = q->conn.data = q;
    q->open = 2;
    uv_timer_start(&q->timer, on_deadline, (uint64_t)(deadline_ms > 0 ? deadline_ms : 0), 0);
    int rc = uv_ip4_addr("127.0.0.1", port, &sa);
    if (rc == 0)
        rc = uv_tcp_connect(&q->conn, &q->tcp, (const struct sockaddr *)&sa, on_connect);
    if (rc < 0) { /* said from the loop, as every other answer */
        q->early = rc;
        uv_timer_start(&q->timer, on_deadline, 0, 0);
    }
    return q;
}
