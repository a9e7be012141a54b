/* rdzv_etcd_plan: the pure half of rdzv_etcd: signed values, reading the job's keys into a view, and the
 * decision-maker's rule. See rdzv_etcd_internal.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/util.h"
#include "nodes/etcd.h"
#include "nodes/rdzv_etcd_internal.h"

static void mac_hex(const char *secret, const char *job, const char *key, const char *payload, char hex[65])
{
    const void *parts[] = {job, key, payload};
    size_t lens[] = {strlen(job) + 1, strlen(key) + 1, strlen(payload)};
    uint8_t mac[DDP_CRYPTO_MAC_LEN];
    ddp_crypto_hmac(secret, strlen(secret), parts, lens, 3, mac);
    ddp_crypto_hex(mac, sizeof mac, hex);
}

char *ddp_re_sign(const char *secret, const char *job, const char *key, const char *payload)
{
    char hex[65];
    mac_hex(secret, job, key, payload, hex);
    return ddp_xasprintf("%s %s", hex, payload);
}

const char *ddp_re_verify(const char *secret, const char *job, const char *key, const char *value)
{
    if (strlen(value) < 65 || value[64] != ' ')
        return NULL;
    char hex[65];
    mac_hex(secret, job, key, value + 65, hex);
    return ddp_crypto_equal(hex, value, 64) ? value + 65 : NULL;
}

bool ddp_re_field(const char *payload, const char *name, char *buf, size_t size)
{
    size_t n = strlen(name);
    for (const char *p = payload; p && *p; p = strchr(p, ' '), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) != 0 || p[n] != '=')
            continue;
        const char *v = p + n + 1;
        size_t len = strcmp(name, "reason") == 0 ? strlen(v) : strcspn(v, " ");
        snprintf(buf, size, "%.*s", (int)len, v);
        return true;
    }
    return false;
}

int ddp_re_field_int(const char *payload, const char *name, int dflt)
{
    char buf[32], *end = NULL;
    if (!ddp_re_field(payload, name, buf, sizeof buf))
        return dflt;
    long v = strtol(buf, &end, 10);
    return *end || end == buf ? dflt : (int)v;
}

void ddp_re_view_init(struct ddp_re_view *v, int max)
{
    memset(v, 0, sizeof *v);
    v->max = max;
    v->members = ddp_xcalloc((size_t)max, sizeof *v->members);
    v->report = ddp_xcalloc((size_t)max, sizeof *v->report);
    for (int i = 0; i < max; i++)
        v->report[i] = DDP_RE_NO_REPORT;
}

void ddp_re_decision_free(struct ddp_re_decision *d)
{
    free(d->node);
    free(d->nproc);
    memset(d, 0, sizeof *d);
}

void ddp_re_view_free(struct ddp_re_view *v)
{
    free(v->members);
    free(v->report);
    ddp_re_decision_free(&v->d);
    memset(v, 0, sizeof *v);
}

int ddp_re_decision_parse(const char *payload, struct ddp_re_decision *d)
{
    char state[16] = "", nodes[8192] = "", master[100] = "";
    memset(d, 0, sizeof *d);
    ddp_re_field(payload, "state", state, sizeof state);
    d->state = strcmp(state, "start") == 0  ? DDP_RE_START
               : strcmp(state, "stop") == 0 ? DDP_RE_STOP
               : strcmp(state, "exit") == 0 ? DDP_RE_EXIT
                                            : DDP_RE_NONE;
    d->attempt = ddp_re_field_int(payload, "attempt", -1);
    d->status = ddp_re_field_int(payload, "status", 0);
    ddp_re_field(payload, "reason", d->reason, sizeof d->reason);
    if (d->state == DDP_RE_NONE || d->attempt < 0)
        return -EINVAL;
    if (ddp_re_field(payload, "master", master, sizeof master)) {
        char *colon = strrchr(master, ':');
        if (!colon)
            return -EINVAL;
        *colon = '\0';
        snprintf(d->master, sizeof d->master, "%s", master);
        d->port = atoi(colon + 1);
    }
    ddp_re_field(payload, "nodes", nodes, sizeof nodes);
    for (char *save = NULL, *t = strtok_r(nodes, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = -1, np = 0;
        if (sscanf(t, "%d:%d", &k, &np) != 2 || k < 0 || k >= DDP_RE_MAX_NODES || np <= 0 || d->n >= 4096)
            return -EINVAL;
        d->node = ddp_xrealloc(d->node, (size_t)(d->n + 1) * sizeof *d->node);
        d->nproc = ddp_xrealloc(d->nproc, (size_t)(d->n + 1) * sizeof *d->nproc);
        d->node[d->n] = k;
        d->nproc[d->n++] = np;
    }
    return d->state == DDP_RE_EXIT || d->n > 0 ? 0 : -EINVAL;
}

char *ddp_re_decision_text(const struct ddp_re_decision *d)
{
    static const char *names[] = {"none", "start", "stop", "exit"};
    size_t cap = 256 + (size_t)d->n * 24 + strlen(d->reason), len = 0;
    char *s = ddp_xmalloc(cap);
    len += (size_t)snprintf(s, cap, "attempt=%d state=%s status=%d", d->attempt, names[d->state], d->status);
    if (d->n > 0) {
        len += (size_t)snprintf(s + len, cap - len, " master=%s:%d nodes=", d->master, d->port);
        for (int i = 0; i < d->n; i++)
            len += (size_t)snprintf(s + len, cap - len, "%s%d:%d", i ? "," : "", d->node[i], d->nproc[i]);
    }
    if (d->reason[0])
        snprintf(s + len, cap - len, " reason=%s", d->reason);
    return s;
}

/* One key of the prefix into v. */
static void view_key(struct ddp_re_view *v, const char *rel, const char *payload, json_t *kv, long long *elect_rev)
{
    int k = -1;
    char extra;
    if (sscanf(rel, "node/%d%c", &k, &extra) == 1 && k >= 0 && k < v->max) {
        struct ddp_re_member *m = &v->members[k];
        m->up = true;
        m->nproc = ddp_re_field_int(payload, "nproc", 1);
        m->port = ddp_re_field_int(payload, "port", 0);
        m->lease = ddp_etcd_int(kv, "lease");
        ddp_re_field(payload, "addr", m->addr, sizeof m->addr);
        ddp_re_field(payload, "host", m->host, sizeof m->host);
    } else if (strncmp(rel, "elect/", 6) == 0) {
        long long rev = ddp_etcd_int(kv, "create_revision");
        if (*elect_rev == 0 || rev < *elect_rev) {
            *elect_rev = rev;
            v->decider = ddp_etcd_int(kv, "lease");
        }
    } else if (strcmp(rel, "decision") == 0) {
        struct ddp_re_decision d;
        if (ddp_re_decision_parse(payload, &d) == 0) {
            ddp_re_decision_free(&v->d);
            v->d = d;
            v->d.mod_rev = ddp_etcd_int(kv, "mod_revision");
        } else {
            ddp_re_decision_free(&d);
        }
    }
}

void ddp_re_decision_copy(struct ddp_re_decision *to, const struct ddp_re_decision *from)
{
    if (to == from)
        return;
    ddp_re_decision_free(to);
    *to = *from;
    to->node = ddp_xmalloc((size_t)(from->n + 1) * sizeof *to->node);
    to->nproc = ddp_xmalloc((size_t)(from->n + 1) * sizeof *to->nproc);
    if (from->n > 0) {
        memcpy(to->node, from->node, (size_t)from->n * sizeof *to->node);
        memcpy(to->nproc, from->nproc, (size_t)from->n * sizeof *to->nproc);
    }
}

void ddp_re_view_read(struct ddp_re_view *v, const char *prefix, const char *secret, const char *job, json_t *answer,
                      const struct ddp_re_decision *fallback)
{
    int max = v->max;
    ddp_re_view_free(v);
    ddp_re_view_init(v, max);
    v->revision = ddp_etcd_int(json_object_get(answer, "header"), "revision");
    json_t *kvs = json_object_get(answer, "kvs"), *kv;
    size_t i, plen = strlen(prefix);
    long long elect_rev = 0;
    json_t *reports = json_array();
    json_array_foreach(kvs, i, kv)
    {
        char *key = ddp_etcd_unb64(json_string_value(json_object_get(kv, "key")) ?: "", NULL);
        const char *vb = json_string_value(json_object_get(kv, "value"));
        char *value = ddp_etcd_unb64(vb ? vb : "", NULL);
        const char *payload = key && value ? ddp_re_verify(secret, job, key, value) : NULL;
        if (!key || strncmp(key, prefix, plen) != 0) { /* not the job's: a range over the prefix has none */
            free(key);
            free(value);
            continue;
        }
        if (strcmp(key + plen, "decision") == 0)
            v->decision_rev = ddp_etcd_int(kv, "mod_revision");
        if (!payload) {
            if (v->forged++ == 0) {
                snprintf(v->forged_key, sizeof v->forged_key, "%s", key);
                v->forged_rev = ddp_etcd_int(kv, "mod_revision");
            }
        } else if (payload && strncmp(key + plen, "report/", 7) == 0) {
            json_array_append_new(reports, json_pack("{s:s,s:s}", "k", key + plen, "p", payload));
        } else if (payload) {
            view_key(v, key + plen, payload, kv, &elect_rev);
        }
        free(key);
        free(value);
    }
    if (v->d.state == DDP_RE_NONE && v->decision_rev && fallback && fallback->state != DDP_RE_NONE)
        ddp_re_decision_copy(&v->d, fallback);
    /* reports count for the decision's attempt only */
    json_array_foreach(reports, i, kv)
    {
        int a = -1, k = -1;
        const char *p = json_string_value(json_object_get(kv, "p"));
        if (sscanf(json_string_value(json_object_get(kv, "k")), "report/%d/%d", &a, &k) == 2 && k >= 0 && k < v->max &&
            a == v->d.attempt)
            v->report[k] = ddp_re_field_int(p, "status", 1);
    }
    json_decref(reports);
}

/* A new START of attempt over the members that are up (by node rank, at most max_nodes). */
static bool start_on_up(const struct ddp_re_view *v, const struct ddp_re_params *p, int attempt,
                        struct ddp_re_decision *next)
{
    memset(next, 0, sizeof *next);
    next->state = DDP_RE_START;
    next->attempt = attempt;
    next->node = ddp_xcalloc((size_t)v->max, sizeof *next->node);
    next->nproc = ddp_xcalloc((size_t)v->max, sizeof *next->nproc);
    for (int k = 0; k < v->max && next->n < p->max_nodes; k++) {
        if (!v->members[k].up)
            continue;
        if (next->n == 0) {
            snprintf(next->master, sizeof next->master, "%s", v->members[k].addr);
            next->port = v->members[k].port;
        }
        next->node[next->n] = k;
        next->nproc[next->n++] = v->members[k].nproc;
    }
    return true;
}

static int up_count(const struct ddp_re_view *v)
{
    int n = 0;
    for (int k = 0; k < v->max; k++)
        n += v->members[k].up;
    return n;
}

/* Attempt d ended on every node of it: exit 0, restart on the nodes up, or exit with the first failure. */
static bool after_attempt(const struct ddp_re_view *v, const struct ddp_re_params *p, int first_status, const char *why,
                          struct ddp_re_decision *next)
{
    const struct ddp_re_decision *d = &v->d;
    int up = up_count(v);
    if (first_status != 0 && d->attempt < p->max_restarts && up >= p->min_nodes)
        return start_on_up(v, p, d->attempt + 1, next);
    memset(next, 0, sizeof *next);
    next->state = DDP_RE_EXIT;
    next->attempt = d->attempt;
    next->status = first_status;
    if (first_status != 0)
        snprintf(next->reason, sizeof next->reason, "%s%s", why,
                 d->attempt >= p->max_restarts ? "; no restarts left"
                 : up < p->min_nodes           ? "; too few nodes up"
                                               : "");
    return true;
}

bool ddp_re_decide(const struct ddp_re_view *v, const struct ddp_re_params *p, struct ddp_re_decision *next)
{
    const struct ddp_re_decision *d = &v->d;
    int up = up_count(v);
    if (d->state == DDP_RE_NONE) {
        if (up >= p->max_nodes || (up >= p->min_nodes && (p->last_call_over || p->join_over)))
            return start_on_up(v, p, 0, next);
        if (!p->join_over)
            return false;
        memset(next, 0, sizeof *next);
        next->state = DDP_RE_EXIT;
        next->status = 75;
        snprintf(next->reason, sizeof next->reason, "%d of at least %d nodes joined by the join timeout", up,
                 p->min_nodes);
        return true;
    }
    if (d->state == DDP_RE_EXIT)
        return false;
    int ended = 0, first_status = 0;
    char why[200] = "";
    for (int i = 0; i < d->n; i++) {
        int k = d->node[i];
        bool in = k >= 0 && k < v->max; /* a node rank past this agent's nnodes: never up here */
        bool reported = in && v->report[k] != DDP_RE_NO_REPORT, up_k = in && v->members[k].up;
        ended += reported || !up_k;
        int st = reported ? v->report[k] : up_k ? 0 : 1;
        if (st != 0 && first_status == 0) {
            first_status = st;
            if (reported)
                snprintf(why, sizeof why, "node %d failed (exit status %d)", k, st);
            else
                snprintf(why, sizeof why, "node %d lost (its etcd lease expired)", k);
        }
    }
    if (ended == d->n)
        return after_attempt(v, p, first_status, why, next);
    if (first_status == 0 || d->state == DDP_RE_STOP)
        return false;
    memset(next, 0, sizeof *next);
    *next = *d;
    next->node = ddp_xmalloc((size_t)d->n * sizeof *d->node);
    next->nproc = ddp_xmalloc((size_t)d->n * sizeof *d->nproc);
    memcpy(next->node, d->node, (size_t)d->n * sizeof *d->node);
    memcpy(next->nproc, d->nproc, (size_t)d->n * sizeof *d->nproc);
    next->state = DDP_RE_STOP;
    snprintf(next->reason, sizeof next->reason, "%s", why);
    return true;
}
