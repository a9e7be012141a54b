/* fr_remote: see fr_remote.h. */
#include "watch/fr_remote.h"

#include "records/jsonlog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the JSON */

static json_t *encode(const struct ddp_fr_state *st, const struct ddp_fr_remote_rank *where, size_t per_group,
                      size_t ngroups)
{
    json_t *g = json_array();
    for (size_t i = 0; i < ngroups && i < st->ngroups; i++) {
        const struct ddp_fr_group *x = &st->g[i];
        json_t *e = json_array();
        size_t from = x->nentries > per_group ? x->nentries - per_group : 0;
        for (size_t k = from; k < x->nentries; k++)
            json_array_append_new(e,
                                  ddp_jsonlog_pack("{s:I, s:I, s:b, s:s, s:s, s:I}", "n", (json_int_t)x->e[k].seq, "p",
                                                   (json_int_t)x->e[k].p2p_seq, "pp", x->e[k].p2p, "o", x->e[k].op,
                                                   "sh", x->e[k].shape, "t", (json_int_t)x->e[k].created_ns));
        json_array_append_new(g, ddp_jsonlog_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "id", x->id, "k", x->key,
                                                  "d", x->desc, "r", x->ranks, "q", (json_int_t)x->enqueued, "s",
                                                  (json_int_t)x->started, "c", (json_int_t)x->completed, "e", e));
    }
    return ddp_jsonlog_pack("{s:i, s:i, s:i, s:s, s:b, s:o}", "v", 2, "lr", where ? where->local_rank : -1, "gpu",
                            where ? where->gpu : -1, "bus", where ? where->busid : "", "he", st->has_entries, "g", g);
}

int ddp_fr_remote_encode(const struct ddp_fr_state *st, const struct ddp_fr_remote_rank *where, char *out, size_t cap)
{
    /* fewer entries per group first (the oldest go), then fewer groups (the last go) */
    for (size_t ng = st->ngroups; ng >= 1 || st->ngroups == 0; ng--) {
        for (size_t per = DDP_FR_PER_GROUP + 1; per-- > 0;) {
            json_t *doc = encode(st, where, per, ng);
            char *s = json_dumps(doc, JSON_COMPACT);
            json_decref(doc);
            size_t len = s ? strlen(s) : 0;
            if (s && len < cap) {
                memcpy(out, s, len + 1);
                free(s);
                return (int)len;
            }
            free(s);
        }
        if (st->ngroups == 0)
            break;
    }
    return -ENOSPC;
}

/* a string that fits dst (cap bytes) */
static bool str_in(const char *src, char *dst, size_t cap, bool nonempty)
{
    size_t n = strlen(src);
    if (n >= cap || (nonempty && n == 0))
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

int ddp_fr_remote_decode(const char *json, struct ddp_fr_state *st, struct ddp_fr_remote_rank *where)
{
    json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, NULL), *g = NULL;
    int v = 0, lr = 0, gpu = 0, he = 0;
    const char *bus = NULL;
    int rc = -EINVAL;
    memset(st, 0, sizeof(*st));
    memset(where, 0, sizeof(*where));
    if (!doc || json_unpack(doc, "{s:i, s:i, s:i, s:s, s:b, s:o !}", "v", &v, "lr", &lr, "gpu", &gpu, "bus", &bus, "he",
                            &he, "g", &g) != 0)
        goto out;
    if (v != 2 || lr < -1 || gpu < -1 || !json_is_array(g) || json_array_size(g) > DDP_FR_GROUPS ||
        !str_in(bus, where->busid, sizeof(where->busid), false))
        goto out;
    where->local_rank = lr;
    where->gpu = gpu;
    st->has_entries = he;
    size_t i;
    json_t *x;
    json_array_foreach(g, i, x)
    {
        struct ddp_fr_group *gr = &st->g[st->ngroups++];
        const char *id, *key, *desc, *ranks;
        json_int_t q, s, c;
        json_t *e;
        if (json_unpack(x, "{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o !}", "id", &id, "k", &key, "d", &desc, "r", &ranks,
                        "q", &q, "s", &s, "c", &c, "e", &e) != 0 ||
            !str_in(id, gr->id, sizeof(gr->id), false) || !str_in(key, gr->key, sizeof(gr->key), false) ||
            !str_in(desc, gr->desc, sizeof(gr->desc), false) || (!id[0] && !key[0]) ||
            !str_in(ranks, gr->ranks, sizeof(gr->ranks), false) || !json_is_array(e) ||
            json_array_size(e) > DDP_FR_PER_GROUP || q < -1 || s < -1 || c < -1)
            goto out;
        for (size_t j = 0; j < i; j++)
            if (gr->id[0] ? strcmp(st->g[j].id, gr->id) == 0 : !st->g[j].id[0] && strcmp(st->g[j].key, gr->key) == 0)
                goto out; /* one group twice */
        gr->enqueued = q;
        gr->started = s;
        gr->completed = c;
        size_t k;
        json_t *y;
        json_array_foreach(e, k, y)
        {
            struct ddp_fr_entry *en = &gr->e[gr->nentries++];
            json_int_t n, p, t;
            int pp;
            const char *o, *sh;
            if (json_unpack(y, "{s:I, s:I, s:b, s:s, s:s, s:I !}", "n", &n, "p", &p, "pp", &pp, "o", &o, "sh", &sh, "t",
                            &t) != 0 ||
                !str_in(o, en->op, sizeof(en->op), false) || !str_in(sh, en->shape, sizeof(en->shape), false))
                goto out;
            en->seq = n;
            en->p2p_seq = p;
            en->p2p = pp;
            en->created_ns = t;
        }
    }
    rc = 0;
out:
    if (rc < 0) {
        memset(st, 0, sizeof(*st));
        memset(where, 0, sizeof(*where));
    }
    json_decref(doc);
    return rc;
}

/* ---------------------------------------------------------------- the store */

struct remote_rank {
    int rank, node;
    char host[72];
    struct ddp_fr_state fr;
    struct ddp_fr_remote_rank where;
    long long still_ms, recv_ms; /* as sent; when received */
};

#define MAX_RANK (1 << 22) /* a rank number beyond any job's */

struct ddp_fr_remote {
    int attempt; /* of what it holds, -1 nothing */
    struct remote_rank *r;
    size_t n, cap;
    int *slot;    /* slot[rank]: its index in r + 1, 0 none (a thousand nodes' ranks: no linear search) */
    size_t nslot; /* ranks slot covers */
};

struct ddp_fr_remote *ddp_fr_remote_new(void)
{
    struct ddp_fr_remote *r = ddp_xcalloc(1, sizeof(*r));
    r->attempt = -1;
    return r;
}

void ddp_fr_remote_free(struct ddp_fr_remote *r)
{
    if (r) {
        free(r->r);
        free(r->slot);
    }
    free(r);
}

void ddp_fr_remote_clear(struct ddp_fr_remote *r)
{
    if (r->nslot)
        memset(r->slot, 0, r->nslot * sizeof(*r->slot));
    r->n = 0;
    r->attempt = -1;
}

int ddp_fr_remote_put(struct ddp_fr_remote *r, int attempt, int node, const char *host, int rank, long long still_ms,
                      const char *json, long long now, json_t *recorder)
{
    struct remote_rank x = {.rank = rank, .node = node, .still_ms = still_ms < 0 ? 0 : still_ms, .recv_ms = now};
    if (attempt < r->attempt)
        return -ESTALE;
    if (rank < 0 || rank >= MAX_RANK)
        return -EINVAL;
    if (ddp_fr_remote_decode(json, &x.fr, &x.where) < 0)
        return -EINVAL;
    snprintf(x.host, sizeof(x.host), "%s", host && host[0] ? host : "?");
    if (attempt > r->attempt) {
        ddp_fr_remote_clear(r);
        r->attempt = attempt;
    }
    if ((size_t)rank >= r->nslot) {
        size_t want = r->nslot ? r->nslot : 64;
        while (want <= (size_t)rank)
            want *= 2;
        r->slot = ddp_xrealloc(r->slot, want * sizeof(*r->slot));
        memset(r->slot + r->nslot, 0, (want - r->nslot) * sizeof(*r->slot));
        r->nslot = want;
    }
    size_t i = r->slot[rank] ? (size_t)r->slot[rank] - 1 : r->n;
    if (i == r->n) {
        r->slot[rank] = (int)r->n + 1;
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 8;
            r->r = ddp_xrealloc(r->r, r->cap * sizeof(*r->r));
        }
        r->n++;
    }
    r->r[i] = x;
    if (recorder) {
        json_t *ranks = json_object_get(recorder, "ranks");
        char key[16];
        if (!json_is_object(ranks) || json_integer_value(json_object_get(recorder, "attempt")) != attempt) {
            json_object_set_new(recorder, "attempt", json_integer(attempt));
            json_object_set_new(recorder, "ranks", ranks = json_object());
        }
        snprintf(key, sizeof(key), "%d", rank);
        json_object_set_new(ranks, key, ddp_fr_summary_json(&x.fr));
    }
    return 0;
}

size_t ddp_fr_remote_count(const struct ddp_fr_remote *r, int attempt)
{
    return r && r->attempt == attempt ? r->n : 0;
}

/* ---------------------------------------------------------------- the verdict */

void ddp_fr_remote_decide(const struct ddp_fr_remote *r, int attempt, long long now, const struct ddp_fr_input *in,
                          size_t n, bool *culprit, struct ddp_fr_verdict *v, struct ddp_fr_remote_named *named)
{
    size_t m = ddp_fr_remote_count(r, attempt), all = n;
    struct ddp_fr_input *x = ddp_xcalloc(n + m ? n + m : 1, sizeof(*x));
    bool *c = ddp_xcalloc(n + m ? n + m : 1, sizeof(*c));
    const struct remote_rank **from = ddp_xcalloc(n + m ? n + m : 1, sizeof(*from));
    memset(named, 0, sizeof(*named));
    named->culprits = json_array();
    if (n)
        memcpy(x, in, n * sizeof(*x));
    for (size_t j = 0; j < m; j++) {
        const struct remote_rank *k = &r->r[j];
        bool local = false;
        for (size_t i = 0; i < n && !local; i++)
            local = in[i].rank == k->rank;
        if (local)
            continue;
        long long still = k->still_ms + (now > k->recv_ms ? now - k->recv_ms : 0);
        from[all] = k;
        x[all++] = (struct ddp_fr_input){k->rank, &k->fr, still, NULL};
    }
    ddp_fr_decide(x, all, c, v);
    if (n)
        memcpy(culprit, c, n * sizeof(*culprit));
    struct ddp_buf where = {0};
    /* the collective a remote culprit is in: its own op at a mismatch; none known when it is behind */
    const char *coll = v->kind == DDP_FR_OP ? v->other : v->kind == DDP_FR_SHAPE ? v->op : "";
    for (size_t i = n; i < all; i++) {
        if (!c[i])
            continue;
        const struct remote_rank *k = from[i];
        char gpu[48];
        snprintf(gpu, sizeof(gpu), "%s", k->where.busid[0] ? k->where.busid : "none");
        ddp_buf_printf(&named->text, "%srank %d on node %d (local %d, host %s, GPU %s)", named->n ? "; " : "", k->rank,
                       k->node, k->where.local_rank, k->host, gpu);
        ddp_buf_printf(&where, "; rank %d is on node %d (%s)", k->rank, k->node, k->host);
        json_t *j = ddp_jsonlog_pack("{s:i, s:i, s:s, s:i, s:s?, s:n, s:s?, s:n, s:i}", "rank", k->rank, "local_rank",
                                     k->where.local_rank, "host", k->host, "gpu", k->where.gpu, "gpu_busid",
                                     k->where.busid[0] ? k->where.busid : NULL, "pid", "collective",
                                     coll[0] ? coll : NULL, "frame", "node", k->node);
        json_array_append_new(named->culprits, j);
        named->n++;
    }
    if (where.len) {
        size_t len = strlen(v->why);
        snprintf(v->why + len, sizeof(v->why) - len, "%s", where.data);
    }
    ddp_buf_free(&where);
    free(x);
    free(c);
    free(from);
}

void ddp_fr_remote_named_take(struct ddp_fr_remote_named *named, struct ddp_buf *b, json_t *culprits)
{
    if (named->n) {
        ddp_buf_printf(b, "%s%s", b->len ? "; " : "", named->text.data);
        if (culprits)
            json_array_extend(culprits, named->culprits);
    }
    ddp_fr_remote_named_free(named);
}

void ddp_fr_remote_named_free(struct ddp_fr_remote_named *named)
{
    ddp_buf_free(&named->text);
    json_decref(named->culprits);
    memset(named, 0, sizeof(*named));
}
