/* rdzv_etcd: joining through etcd, holding the lease, watching the job's keys, following the decision key and,
 * when elected, writing it. See rdzv_etcd.h; the pure rules are rdzv_etcd_plan.c's. */
#include "nodes/rdzv_etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "nodes/etcd.h"
#include "nodes/rdzv_etcd_internal.h"

#define TIMEOUT_MS 3000L       /* one request to one member */
#define CLOSE_TIMEOUT_MS 1000L /* leaving: one request to one member */
#define RETRY_MS 1000          /* a request that found no member able to serve is tried again this much later */
#define FULL_GAP_MS 250        /* the decision-maker reads every key of the job at most this often */
#define CANDIDATES 4           /* a node that does not decide reads this many of the election's first candidates */

enum phase { PH_GRANT, PH_CLAIM, PH_JOINED, PH_GONE };

struct ddp_rdzv_etcd {
    uv_loop_t *loop;
    struct ddp_rdzv_etcd_config cfg;
    char *endpoints, *conf, *secret, *job, *host, *prefix, *owned;
    struct ddp_etcd *e;
    ddp_coord_cb cb;
    void *data;
    enum phase phase;
    long long lease;
    int ttl_s;
    int node; /* -1 before claimed */
    int claim_try;
    uv_timer_t tick, retry, reread;
    unsigned ticks;
    long long join_rev; /* the store's revision of this agent's join */
    long long start_ms, last_keepalive_ms, min_since_ms, last_full_ms;
    bool keepalive_inflight;
    struct ddp_etcd_req *watch, *range;
    bool resync_again;
    bool watch_full;   /* the watch covers the whole prefix (the decision-maker's), else the decision key only */
    bool range_full;   /* the read on its way covers the whole prefix */
    bool next_in_line; /* the candidate after the decision-maker: reads at every tick, to take over in time */
    struct ddp_re_view view;
    /* following the decision */
    int started; /* the attempt last started here, -1 none */
    int stopped; /* the attempt last stopped here, -1 none */
    bool exited, waiting_said;
    char master[64];
    long long seen_rev;          /* the decision's mod_revision last applied */
    bool deciding;               /* this decider's write is on its way */
    long long forged_rev;        /* the mod_revision of the forged value last said */
    struct ddp_re_decision good; /* the last decision whose signature held */
    /* a report that waits for quorum */
    char *report_key, *report_value;
    long long report_since_ms;
    bool report_said, report_inflight;
    int report_seq, report_sent_seq; /* the report now, the one on its way */
    bool closing;
};

static void emit(struct ddp_rdzv_etcd *r, struct ddp_coord_event *ev)
{
    if (r->closing || r->phase == PH_GONE)
        return;
    if (!ev->reason)
        ev->reason = "";
    if (!ev->host)
        ev->host = "";
    if (ev->kind == DDP_COORD_LOST || ev->kind == DDP_COORD_EXIT)
        r->phase = PH_GONE;
    r->cb(NULL, ev, r->data);
}

static void lost(struct ddp_rdzv_etcd *r, const char *why)
{
    struct ddp_coord_event ev = {.kind = DDP_COORD_LOST, .node = r->node, .reason = why};
    emit(r, &ev);
}

static char *b64s(const char *s)
{
    return ddp_etcd_b64(s, strlen(s));
}

/* The key just past every key that starts with prefix (etcd's range_end of a prefix). */
static char *prefix_end(const char *prefix)
{
    char *end = ddp_xstrdup(prefix);
    end[strlen(end) - 1]++;
    return end;
}

static json_t *range_body(const char *prefix)
{
    char *end = prefix_end(prefix), *kb = b64s(prefix), *eb = b64s(end);
    json_t *b = json_pack("{s:s,s:s}", "key", kb, "range_end", eb);
    free(end);
    free(kb);
    free(eb);
    return b;
}

static json_t *put_op(struct ddp_rdzv_etcd *r, const char *rel, const char *payload, bool leased)
{
    char *key = ddp_xasprintf("%s%s", r->prefix, rel);
    char *value = ddp_re_sign(r->secret, r->job, key, payload);
    char *kb = b64s(key), *vb = b64s(value);
    json_t *put = json_pack("{s:s,s:s}", "key", kb, "value", vb);
    if (leased)
        json_object_set_new(put, "lease", json_sprintf("%lld", r->lease));
    free(key);
    free(value);
    free(kb);
    free(vb);
    return put;
}

static void step(struct ddp_rdzv_etcd *r);
static void resync(struct ddp_rdzv_etcd *r);
static void watch_start(struct ddp_rdzv_etcd *r);

static void on_retry(uv_timer_t *t)
{
    step(t->data);
}

/* A join step found no member able to serve: again a moment later, within the join timeout. */
static void retry_later(struct ddp_rdzv_etcd *r, const char *error)
{
    if (ddp_now_ms() - r->start_ms > r->cfg.join_timeout_ms) {
        char why[600];
        snprintf(why, sizeof why, "no etcd member could serve within the join timeout (%llds): %s",
                 r->cfg.join_timeout_ms / 1000, error ? error : "?");
        return lost(r, why);
    }
    if (!r->waiting_said && error) {
        ddp_warn("etcd: %s; trying again for up to %llds", error, r->cfg.join_timeout_ms / 1000);
        r->waiting_said = true;
    }
    uv_timer_start(&r->retry, on_retry, RETRY_MS, 0);
}

static void on_granted(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    long long id = reply ? ddp_etcd_int(reply, "ID") : 0;
    if (!id)
        return retry_later(r, error ? error : "lease grant: no lease in the answer");
    r->lease = id;
    r->phase = PH_CLAIM;
    r->claim_try = 0;
    step(r);
}

/* The node ranks held now (the keys-only read of node/ in a lost compare-and-swap's failure branch): the next
 * try is a free one, at random, so that a thousand agents that lost the same compare-and-swap do not all try the
 * same rank again. */
static void joined(struct ddp_rdzv_etcd *r);

static void pick_free(struct ddp_rdzv_etcd *r, json_t *reply)
{
    int max = r->cfg.max_nodes, nfree = 0, mine = -1;
    bool *taken = ddp_xcalloc((size_t)max, sizeof *taken);
    size_t i, plen = strlen(r->prefix) + 5; /* PREFIX "node/" */
    json_t *kv;
    json_t *held = json_object_get(
        json_object_get(json_array_get(json_object_get(reply, "responses"), 0), "response_range"), "kvs");
    json_array_foreach(held, i, kv)
    {
        char *key = ddp_etcd_unb64(json_string_value(json_object_get(kv, "key")), NULL);
        int k = key && strlen(key) > plen ? atoi(key + plen) : -1;
        if (k >= 0 && k < max)
            taken[k] = true;
        if (k >= 0 && k < max && ddp_etcd_int(kv, "lease") == r->lease)
            mine = k; /* an earlier try whose answer timed out did take it */
        free(key);
    }
    if (mine >= 0) {
        free(taken);
        r->node = mine;
        r->join_rev = ddp_etcd_int(json_object_get(reply, "header"), "revision");
        return joined(r);
    }
    for (int k = 0; k < max; k++)
        nfree += !taken[k];
    uint32_t pick = 0;
    ddp_crypto_random(&pick, sizeof pick);
    pick = nfree ? pick % (uint32_t)nfree : 0;
    for (int k = 0; k < max && nfree; k++)
        if (!taken[k] && pick-- == 0) {
            r->claim_try = k;
            break;
        }
    free(taken);
    if (!nfree) /* every node rank is held: one may be freed by a lease that expires */
        return retry_later(r, "every node rank of the job is held by another agent");
    step(r);
}

/* In: a node rank and a candidacy in the election (one transaction). */
static void joined(struct ddp_rdzv_etcd *r)
{
    r->phase = PH_JOINED;
    r->waiting_said = false;
    ddp_info("etcd: joined as node %d (lease %llx, %ds; member %s)", r->node, r->lease, r->ttl_s,
             ddp_etcd_member(r->e));
    struct ddp_coord_event ev = {.kind = DDP_COORD_JOINED, .node = r->node};
    emit(r, &ev);
    watch_start(r);
    resync(r);
}

static void on_claimed(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    if (!reply && error && strstr(error, "lease not found")) {
        ddp_debug("etcd: the lease expired before a node rank was taken: another one");
        r->phase = PH_GRANT;
        r->lease = 0;
    }
    if (!reply)
        return retry_later(r, error);
    if (json_is_true(json_object_get(reply, "succeeded"))) {
        r->node = r->claim_try;
        r->join_rev = ddp_etcd_int(json_object_get(reply, "header"), "revision");
        return joined(r);
    }
    pick_free(r, reply);
}

/* The join: a lease, then node rank 0 or else a free one (compare-and-swap) with a candidacy in the election. */
static void step(struct ddp_rdzv_etcd *r)
{
    if (r->closing || r->phase == PH_GONE)
        return;
    if (r->phase == PH_GRANT) {
        ddp_etcd_post(r->e, "/v3/lease/grant", json_pack("{s:i}", "TTL", r->ttl_s), TIMEOUT_MS, on_granted, r);
    } else if (r->phase == PH_CLAIM) {
        char rel[32], *payload;
        snprintf(rel, sizeof rel, "node/%d", r->claim_try);
        payload = ddp_xasprintf("nproc=%d port=%d addr=%s host=%s", r->cfg.nproc, r->cfg.master_port,
                                ddp_etcd_local_ip(r->e)[0] ? ddp_etcd_local_ip(r->e) : "127.0.0.1", r->host);
        char *key = ddp_xasprintf("%s%s", r->prefix, rel), *kb = b64s(key), elect[64], who[32];
        snprintf(elect, sizeof elect, "elect/%016llx", r->lease);
        snprintf(who, sizeof who, "node=%d", r->claim_try);
        char *nodes = ddp_xasprintf("%snode/", r->prefix);
        json_t *held = range_body(nodes); /* lost: the ranks held, in the same round trip */
        json_object_set_new(held, "keys_only", json_true());
        json_t *txn = json_pack("{s:[{s:s,s:s,s:s,s:s}],s:[{s:o},{s:o}],s:[{s:o}]}", "compare", "key", kb, "target",
                                "CREATE", "result", "EQUAL", "create_revision", "0", "success", "request_put",
                                put_op(r, rel, payload, true), "request_put", put_op(r, elect, who, true), "failure",
                                "request_range", held);
        free(nodes);
        ddp_etcd_post(r->e, "/v3/kv/txn", txn, TIMEOUT_MS, on_claimed, r);
        free(key);
        free(kb);
        free(payload);
    } else if (r->phase == PH_JOINED) {
        resync(r);
    }
}

/* This node's part of the decision: START, STOP or EXIT, each once. */
static void follow(struct ddp_rdzv_etcd *r)
{
    const struct ddp_re_decision *d = &r->view.d;
    if (d->state == DDP_RE_NONE || d->mod_rev == r->seen_rev || r->exited)
        return;
    r->seen_rev = d->mod_rev;
    struct ddp_coord_event ev = {.node = r->node, .attempt = d->attempt, .reason = d->reason};
    if (d->state == DDP_RE_EXIT) {
        r->exited = true;
        ev.kind = DDP_COORD_EXIT;
        ev.status = d->status;
        if (d->reason[0])
            ddp_info("etcd: the job's decision: exit %d (%s)", d->status, d->reason);
        return emit(r, &ev);
    }
    if (d->state == DDP_RE_STOP && d->attempt == r->started && r->stopped != d->attempt) {
        r->stopped = d->attempt;
        ev.kind = DDP_COORD_STOP;
        return emit(r, &ev);
    }
    if (d->state != DDP_RE_START || d->attempt <= r->started)
        return;
    int base = 0, gr = -1;
    for (int i = 0; i < d->n && gr < 0; i++) {
        if (d->node[i] == r->node)
            gr = i;
        else
            base += d->nproc[i];
    }
    int world = 0;
    for (int i = 0; i < d->n; i++)
        world += d->nproc[i];
    if (gr < 0) {
        ddp_info("etcd: node %d: attempt %d runs on %d other nodes; waiting for the next one", r->node, d->attempt,
                 d->n);
        return;
    }
    r->started = d->attempt;
    snprintf(r->master, sizeof r->master, "%s", d->master);
    ev.kind = DDP_COORD_START;
    ev.world_size = world;
    ev.group_world_size = d->n;
    ev.master_port = d->port;
    ev.nproc = d->nproc[gr];
    ev.rank_base = base;
    ev.group_rank = gr;
    ev.host = r->master;
    emit(r, &ev);
}

static void on_decided(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    r->deciding = false;
    if (!reply)
        ddp_debug("etcd: writing the decision: %s", error); /* the next resync tries again */
    else if (json_is_true(json_object_get(reply, "succeeded")))
        resync(r);
}

/* The elected decision-maker: the next decision, written only over the one it read (compare mod_revision). */
static void decide(struct ddp_rdzv_etcd *r)
{
    long long now = ddp_now_ms();
    int up = 0;
    for (int k = 0; k < r->view.max; k++)
        up += r->view.members[k].up;
    if (up < r->cfg.min_nodes)
        r->min_since_ms = 0;
    else if (!r->min_since_ms)
        r->min_since_ms = now;
    struct ddp_re_params p = {
        .min_nodes = r->cfg.min_nodes,
        .max_nodes = r->cfg.max_nodes,
        .max_restarts = r->cfg.max_restarts,
        .last_call_over = r->min_since_ms && now - r->min_since_ms >= r->cfg.last_call_ms,
        .join_over = now - r->start_ms >= r->cfg.join_timeout_ms,
    };
    struct ddp_re_decision next;
    if (r->deciding || !ddp_re_decide(&r->view, &p, &next))
        return;
    char *text = ddp_re_decision_text(&next);
    ddp_info("etcd: node %d decides: %s", r->node, text);
    char *key = ddp_xasprintf("%sdecision", r->prefix), *kb = b64s(key);
    json_t *txn =
        json_pack("{s:[{s:s,s:s,s:s,s:s}],s:[{s:o}],s:[]}", "compare", "key", kb, "target", "MOD", "result", "EQUAL",
                  "mod_revision", "", "success", "request_put", put_op(r, "decision", text, false), "failure");
    json_object_set_new(json_array_get(json_object_get(txn, "compare"), 0), "mod_revision",
                        json_sprintf("%lld", r->view.decision_rev));
    r->deciding = true;
    ddp_etcd_post(r->e, "/v3/kv/txn", txn, TIMEOUT_MS, on_decided, r);
    free(key);
    free(kb);
    free(text);
    ddp_re_decision_free(&next);
}

/* A node that does not decide read the decision key and the election's first candidates (a transaction of two
 * ranges): their keys as one range's answer (caller decrefs); next_in_line when this agent is the second signed
 * candidate. */
static json_t *follower_answer(struct ddp_rdzv_etcd *r, json_t *reply)
{
    json_t *kvs = json_array(), *resp, *kv;
    size_t i, j;
    int signed_seen = 0;
    r->next_in_line = false;
    json_array_foreach(json_object_get(reply, "responses"), i, resp)
    {
        json_array_foreach(json_object_get(json_object_get(resp, "response_range"), "kvs"), j, kv)
        {
            json_array_append(kvs, kv);
            if (i != 1)
                continue;
            char *key = ddp_etcd_unb64(json_string_value(json_object_get(kv, "key")) ?: "", NULL);
            char *value = ddp_etcd_unb64(json_string_value(json_object_get(kv, "value")) ?: "", NULL);
            if (key && value && ddp_re_verify(r->secret, r->job, key, value) && signed_seen++ == 1)
                r->next_in_line = ddp_etcd_int(kv, "lease") == r->lease;
            free(key);
            free(value);
        }
    }
    return json_pack("{s:O,s:o}", "header", json_object_get(reply, "header"), "kvs", kvs);
}

static void on_range(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    r->range = NULL;
    if (!reply) {
        ddp_debug("etcd: reading the job's keys: %s", error);
        return;
    }
    json_t *answer = r->range_full ? json_incref(reply) : follower_answer(r, reply);
    /* a decision key that another client overwrote without the job's secret is not the job's decision: the last
     * signed one still is (and a write of the decision-maker compares the key's real mod_revision) */
    ddp_re_view_read(&r->view, r->prefix, r->secret, r->job, answer, &r->good);
    json_decref(answer);
    if (r->view.d.state != DDP_RE_NONE)
        ddp_re_decision_copy(&r->good, &r->view.d);
    if (r->view.forged && r->view.forged_rev != r->forged_rev) {
        r->forged_rev = r->view.forged_rev;
        ddp_warn("etcd: %d value%s under %s not signed with this job's secret (first: %s): refused", r->view.forged,
                 r->view.forged == 1 ? "" : "s", r->prefix, r->view.forged_key);
    }
    follow(r);
    bool decider = r->view.decider == r->lease;
    if (!r->closing && r->phase == PH_JOINED && decider && r->range_full)
        decide(r);
    else if (decider)
        r->resync_again = true; /* just elected: every key of the job first */
    if (r->watch && r->watch_full != decider) {
        ddp_etcd_cancel(r->watch); /* the decision-maker watches every key, the others the decision */
        r->watch = NULL;
        watch_start(r);
    }
    if (r->resync_again) {
        r->resync_again = false;
        resync(r);
    }
}

/* The decision-maker reads every key of the job (one range); the others the decision key and the election's
 * first candidates (one read-only transaction), so that what a thousand nodes read does not grow with the nodes.
 * Serializable: any member answers, quorum or not. One read at a time, another after it when asked meanwhile. */
static void on_reread(uv_timer_t *t)
{
    resync(t->data);
}

static void resync(struct ddp_rdzv_etcd *r)
{
    if (r->closing || r->phase != PH_JOINED)
        return;
    if (r->range) {
        r->resync_again = true;
        return;
    }
    r->range_full = r->view.decider == r->lease;
    long long now = ddp_now_ms();
    if (r->range_full && now - r->last_full_ms < FULL_GAP_MS) {
        /* a thousand joins, each a change, would have it read 2N keys a thousand times: at most one a gap */
        if (!uv_is_active((uv_handle_t *)&r->reread))
            uv_timer_start(&r->reread, on_reread, (uint64_t)(FULL_GAP_MS - (now - r->last_full_ms)), 0);
        return;
    }
    if (r->range_full) {
        r->last_full_ms = now;
        json_t *b = range_body(r->prefix);
        json_object_set_new(b, "serializable", json_true());
        r->range = ddp_etcd_post(r->e, "/v3/kv/range", b, TIMEOUT_MS, on_range, r);
        return;
    }
    char *dkey = ddp_xasprintf("%sdecision", r->prefix), *db = b64s(dkey);
    char *elect = ddp_xasprintf("%select/", r->prefix);
    json_t *cands = range_body(elect);
    json_object_set_new(cands, "sort_order", json_string("ASCEND"));
    json_object_set_new(cands, "sort_target", json_string("CREATE"));
    json_object_set_new(cands, "limit", json_integer(CANDIDATES));
    json_object_set_new(cands, "serializable", json_true());
    json_t *txn = json_pack("{s:[],s:[{s:{s:s,s:b}},{s:o}],s:[]}", "compare", "success", "request_range", "key", db,
                            "serializable", 1, "request_range", cands, "failure");
    r->range = ddp_etcd_post(r->e, "/v3/kv/txn", txn, TIMEOUT_MS, on_range, r);
    free(dkey);
    free(db);
    free(elect);
}

static void on_watch(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    if (!reply) {
        r->watch = NULL; /* the member went away: the next tick watches through another one */
        ddp_debug("etcd: watch: %s", error ? error : "ended");
        return;
    }
    /* the decision-maker watches every key of the job and reads again on any change; the others watch the
     * decision key only (a thousand agents told of a thousand joins would cost the square) */
    if (json_is_true(json_object_get(json_object_get(reply, "result"), "canceled"))) {
        ddp_etcd_cancel(r->watch); /* compacted past our revision, say: the next tick reads and watches again */
        r->watch = NULL;
        return;
    }
    json_t *ev;
    size_t i, plen = strlen(r->prefix);
    bool decider = r->view.decider == r->lease, matters = false;
    json_array_foreach(json_object_get(json_object_get(reply, "result"), "events"), i, ev)
    {
        char *key = ddp_etcd_unb64(json_string_value(json_object_get(json_object_get(ev, "kv"), "key")) ?: "", NULL);
        matters = matters || decider ||
                  (key && strlen(key) > plen &&
                   (strcmp(key + plen, "decision") == 0 || strncmp(key + plen, "elect/", 6) == 0));
        free(key);
    }
    if (matters)
        resync(r);
}

static void watch_start(struct ddp_rdzv_etcd *r)
{
    if (r->watch || r->closing || r->phase != PH_JOINED)
        return;
    r->watch_full = r->view.decider == r->lease;
    json_t *cr;
    if (r->watch_full) {
        cr = range_body(r->prefix);
    } else {
        char *key = ddp_xasprintf("%sdecision", r->prefix), *kb = b64s(key);
        cr = json_pack("{s:s}", "key", kb);
        free(key);
        free(kb);
    }
    /* from just after what this agent read last (or its join), so that no change falls between read and watch */
    long long from = (r->view.revision > r->join_rev ? r->view.revision : r->join_rev) + 1;
    json_object_set_new(cr, "start_revision", json_sprintf("%lld", from));
    json_t *body = json_pack("{s:o}", "create_request", cr);
    r->watch = ddp_etcd_watch(r->e, body, on_watch, r);
}

static void on_keepalive(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    json_t *res = reply ? json_object_get(reply, "result") : NULL;
    r->keepalive_inflight = false;
    if (!reply) {
        ddp_debug("etcd: lease keepalive: %s", error);
        r->last_keepalive_ms = 0; /* again at the next tick, not a third of the TTL later */
        return;
    }
    if (!res || json_object_get(reply, "error")) {
        /* a stream's error comes in its answer (the gateway says 200): etcd busy or without a leader, not the
         * lease's end; an expired lease is a result with no TTL */
        char *text = json_dumps(reply, JSON_COMPACT);
        ddp_debug("etcd: lease keepalive: %s", text ? text : "?");
        free(text);
        r->last_keepalive_ms = 0;
        return;
    }
    if (ddp_etcd_int(res, "TTL") <= 0 && r->phase == PH_JOINED)
        lost(r, "this node's etcd lease expired: the other nodes count it lost");
}

static void report_send(struct ddp_rdzv_etcd *r);

/* Every third of the lease's TTL: keep it alive; read the job's keys again (a watch may have missed an event,
 * or had no member); watch again; send a report that waits. */
static void on_tick(uv_timer_t *t)
{
    struct ddp_rdzv_etcd *r = t->data;
    if (r->closing || r->phase == PH_GONE)
        return;
    long long now = ddp_now_ms();
    if (r->lease && !r->keepalive_inflight && now - r->last_keepalive_ms >= r->ttl_s * 1000LL / 3) {
        r->last_keepalive_ms = now;
        r->keepalive_inflight = true;
        ddp_etcd_post(r->e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", json_sprintf("%lld", r->lease)), TIMEOUT_MS,
                      on_keepalive, r);
    }
    watch_start(r);
    /* the decision-maker reads the job's keys at every tick, and so does the next in line (to take over within a
     * tick of the lease's end); the others follow the watch, and read at every tenth tick (an event the watch
     * missed) or while they have no watch (one whose member lost quorum hears nothing) */
    if (r->view.decider == r->lease || r->next_in_line || !r->watch || ++r->ticks % 10 == 0)
        resync(r);
    if (r->report_key)
        report_send(r);
}

static void on_reported(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    r->report_inflight = false;
    if (reply && r->report_sent_seq != r->report_seq)
        return; /* a newer report waits: the next tick sends it */
    if (reply) {
        if (r->report_said)
            ddp_info("etcd: quorum is back: the end of this node's attempt is reported");
        free(r->report_key);
        free(r->report_value);
        r->report_key = r->report_value = NULL;
        r->report_said = false;
        return;
    }
    if (ddp_now_ms() - r->report_since_ms > r->cfg.join_timeout_ms) {
        char why[600];
        snprintf(why, sizeof why, "etcd had no quorum for the join timeout (%llds): %s", r->cfg.join_timeout_ms / 1000,
                 error ? error : "?");
        return lost(r, why);
    }
    if (!r->report_said) {
        ddp_warn("etcd has no quorum (%s): waiting up to %llds for it to report how this node's attempt ended",
                 error ? error : "?", r->cfg.join_timeout_ms / 1000);
        r->report_said = true;
    }
}

static void report_send(struct ddp_rdzv_etcd *r)
{
    if (r->report_inflight)
        return;
    r->report_inflight = true;
    r->report_sent_seq = r->report_seq;
    char *kb = b64s(r->report_key), *vb = b64s(r->report_value);
    json_t *put = json_pack("{s:s,s:s,s:o}", "key", kb, "value", vb, "lease", json_sprintf("%lld", r->lease));
    ddp_etcd_post(r->e, "/v3/kv/put", put, TIMEOUT_MS, on_reported, r);
    free(kb);
    free(vb);
}

void ddp_rdzv_etcd_report(struct ddp_rdzv_etcd *r, int attempt, int status, const char *why)
{
    if (!r || r->closing || r->phase != PH_JOINED)
        return;
    free(r->report_key);
    free(r->report_value);
    r->report_key = ddp_xasprintf("%sreport/%d/%d", r->prefix, attempt, r->node);
    char *payload = ddp_xasprintf("status=%d reason=%s", status, why ? why : "");
    r->report_value = ddp_re_sign(r->secret, r->job, r->report_key, payload);
    free(payload);
    r->report_since_ms = ddp_now_ms();
    r->report_said = false;
    r->report_seq++;
    report_send(r);
}

int ddp_rdzv_etcd_tls(const char *conf, struct ddp_etcd_config *cfg, char **owned, struct ddp_err *err)
{
    *owned = ddp_xstrdup(conf ? conf : "");
    char *save = NULL;
    for (char *kv = strtok_r(*owned, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            continue; /* ddp_rdzv_conf_seconds says what is malformed */
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp(kv, "protocol") == 0) {
            if (strcmp(v, "https") != 0 && strcmp(v, "http") != 0)
                return ddp_errf(err, -EINVAL, "rdzv_conf: protocol=%s: expected http or https", v);
            cfg->https = strcmp(v, "https") == 0;
        } else if (strcmp(kv, "cacert") == 0) {
            cfg->cacert = v;
        } else if (strcmp(kv, "cert") == 0) {
            cfg->cert = v;
        } else if (strcmp(kv, "key") == 0) {
            cfg->key = v;
        }
    }
    return 0;
}

int ddp_rdzv_etcd_start(uv_loop_t *loop, const struct ddp_rdzv_etcd_config *cfg, ddp_coord_cb cb, void *data,
                        struct ddp_rdzv_etcd **out, struct ddp_err *err)
{
    struct ddp_rdzv_etcd *r = ddp_xcalloc(1, sizeof *r);
    *out = r;
    r->loop = loop;
    r->cfg = *cfg;
    r->cb = cb;
    r->data = data;
    r->secret = ddp_xstrdup(cfg->secret);
    r->job = ddp_xstrdup(cfg->job ? cfg->job : "");
    r->host = ddp_xstrdup(cfg->host ? cfg->host : "?");
    r->prefix = ddp_xasprintf("/ddplaunch/%s/", cfg->id && *cfg->id ? cfg->id : "none");
    r->node = r->started = r->stopped = -1;
    r->ttl_s = (int)((cfg->lost_after_ms + 999) / 1000);
    if (r->ttl_s < 2)
        r->ttl_s = 2;
    r->start_ms = ddp_now_ms();
    ddp_re_view_init(&r->view, cfg->max_nodes);
    uv_timer_init(loop, &r->tick); /* first: ddp_rdzv_etcd_close closes them whatever failed below */
    uv_timer_init(loop, &r->retry);
    uv_timer_init(loop, &r->reread);
    r->tick.data = r->retry.data = r->reread.data = r;
    struct ddp_etcd_config ec = {.endpoints = cfg->endpoints};
    int rc = ddp_rdzv_etcd_tls(cfg->conf, &ec, &r->owned, err);
    if (rc == 0)
        rc = ddp_etcd_new(loop, &ec, &r->e, err);
    if (rc < 0)
        return rc;
    long long period = r->ttl_s * 1000LL / 3 < 1000 ? r->ttl_s * 1000LL / 3 : 1000;
    uv_timer_start(&r->tick, on_tick, (uint64_t)period, (uint64_t)period);
    ddp_info("etcd: joining the rendezvous %s at %s (nodes %d..%d, lease %ds)", r->prefix, cfg->endpoints,
             cfg->min_nodes, cfg->max_nodes, r->ttl_s);
    step(r);
    return 0;
}

int ddp_rdzv_etcd_node(const struct ddp_rdzv_etcd *r)
{
    return r ? r->node : -1;
}

const char *ddp_rdzv_etcd_master_addr(const struct ddp_rdzv_etcd *r)
{
    return r ? r->master : "";
}

/* Leaving: the lease goes (and its keys); the last node to go removes the job's prefix. */
static void on_deleted(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    (void)reply;
    (void)error;
    ddp_etcd_close(r->e);
}

static void on_left_count(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    (void)error;
    if (reply && ddp_etcd_int(reply, "count") == 0)
        ddp_etcd_post(r->e, "/v3/kv/deleterange", range_body(r->prefix), CLOSE_TIMEOUT_MS, on_deleted, r);
    else
        ddp_etcd_close(r->e);
}

static void on_revoked(void *data, json_t *reply, const char *error)
{
    struct ddp_rdzv_etcd *r = data;
    (void)reply;
    (void)error;
    char *nodes = ddp_xasprintf("%snode/", r->prefix);
    json_t *b = range_body(nodes);
    json_object_set_new(b, "count_only", json_true());
    ddp_etcd_post(r->e, "/v3/kv/range", b, CLOSE_TIMEOUT_MS, on_left_count, r);
    free(nodes);
}

void ddp_rdzv_etcd_close(struct ddp_rdzv_etcd *r)
{
    if (!r || r->closing)
        return;
    r->closing = true;
    ddp_etcd_cancel(r->watch);
    ddp_etcd_cancel(r->range);
    r->watch = r->range = NULL;
    uv_close((uv_handle_t *)&r->tick, NULL);
    uv_close((uv_handle_t *)&r->retry, NULL);
    uv_close((uv_handle_t *)&r->reread, NULL);
    if (!r->e)
        return;
    if (!r->lease) {
        ddp_etcd_close(r->e);
        return;
    }
    ddp_etcd_post(r->e, "/v3/lease/revoke", json_pack("{s:o}", "ID", json_sprintf("%lld", r->lease)), CLOSE_TIMEOUT_MS,
                  on_revoked, r);
}

void ddp_rdzv_etcd_free(struct ddp_rdzv_etcd *r)
{
    if (!r)
        return;
    ddp_re_view_free(&r->view);
    ddp_re_decision_free(&r->good);
    free(r->secret);
    free(r->job);
    free(r->host);
    free(r->prefix);
    free(r->owned);
    free(r->report_key);
    free(r->report_value);
    free(r);
}
