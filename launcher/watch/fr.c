/* fr: see fr.h. */
#include "watch/fr.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "records/jsonlog.h"

static const char tag[] = "ddplaunch-fr ";

/* A number torch writes as a string ("20", "-1") or an integer. */
static long long num(const json_t *j, long long dflt)
{
    if (json_is_integer(j))
        return (long long)json_integer_value(j);
    if (json_is_string(j)) {
        char *end;
        long long v = strtoll(json_string_value(j), &end, 10);
        return end != json_string_value(j) && !*end ? v : dflt;
    }
    return dflt;
}

static void copy(char *dst, size_t cap, const char *src)
{
    ddp_text_copy(dst, cap, src);
}

void ddp_fr_ranks_text(char *dst, size_t cap, const long long *r, size_t n)
{
    size_t len = 0;
    dst[0] = 0;
    for (size_t i = 0; i < n && len + 1 < cap;) {
        size_t j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        int w = j > i ? snprintf(dst + len, cap - len, "%s%lld-%lld", len ? "," : "", r[i], r[j])
                      : snprintf(dst + len, cap - len, "%s%lld", len ? "," : "", r[i]);
        if (w < 0 || (size_t)w >= cap - len) {
            dst[len] = 0;
            break;
        }
        len += (size_t)w;
        i = j + 1;
    }
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* ranks from a JSON array of integers or torch's "[0, 1, 2]" string */
static void ranks_from(char *dst, size_t cap, const json_t *j)
{
    long long r[1024];
    size_t n = 0;
    if (json_is_array(j)) {
        size_t i;
        const json_t *x;
        json_array_foreach(j, i, x) if (json_is_integer(x) && n < 1024) r[n++] = (long long)json_integer_value(x);
    } else if (json_is_string(j)) {
        const char *s = json_string_value(j);
        while (*s && n < 1024) {
            char *end;
            if (*s >= '0' && *s <= '9') {
                r[n++] = strtoll(s, &end, 10);
                s = end;
            } else
                s++;
        }
    }
    qsort(r, n, sizeof(*r), cmp_ll);
    ddp_fr_ranks_text(dst, cap, r, n);
}

/* "[[2], [3, 4]] Float,Half" from input_sizes and input_dtypes */
static void shape_of(char *dst, size_t cap, const json_t *e)
{
    char *sizes = json_dumps(json_object_get(e, "input_sizes"), JSON_COMPACT | JSON_ENCODE_ANY);
    const json_t *dt = json_object_get(e, "input_dtypes");
    char types[64] = "";
    size_t i, len = 0;
    const json_t *x;
    if (json_is_array(dt))
        json_array_foreach(dt, i, x)
        {
            int w = snprintf(types + len, sizeof(types) - len, "%s%s", len ? "," : "",
                             json_is_string(x) ? json_string_value(x) : "?");
            if (w < 0 || (size_t)w >= sizeof(types) - len)
                break;
            len += (size_t)w;
        }
    snprintf(dst, cap, "%s %s", sizes ? sizes : "[]", types);
    ddp_printable(dst); /* a dtype cut mid-character shows as ?, never as half a character */
    free(sizes);
}

/* The group named name (or, unnamed, this rank's key), made when new (enqueued -1); NULL when full. */
static struct ddp_fr_group *group_add(struct ddp_fr_state *st, const char *name, const char *key)
{
    for (size_t i = 0; i < st->ngroups; i++)
        if (name[0] ? strcmp(st->g[i].id, name) == 0 : !st->g[i].id[0] && strcmp(st->g[i].key, key) == 0)
            return &st->g[i];
    if (st->ngroups >= DDP_FR_GROUPS)
        return NULL;
    struct ddp_fr_group *g = &st->g[st->ngroups++];
    memset(g, 0, sizeof(*g));
    copy(g->id, sizeof(g->id), name);
    copy(g->key, sizeof(g->key), key);
    g->enqueued = g->started = g->completed = -1;
    return g;
}

/* An entry's group: its name and desc (process_group), and this rank's key for it (pg_id). */
static bool entry_group(const json_t *e, char *name, char *key, char *desc)
{
    const json_t *pg = json_object_get(e, "process_group"), *id = json_object_get(e, "pg_id");
    name[0] = key[0] = desc[0] = 0;
    if (json_is_integer(id))
        snprintf(key, DDP_FR_ID, "%lld", (long long)json_integer_value(id));
    if (json_is_array(pg) && json_is_string(json_array_get(pg, 0))) {
        copy(name, DDP_FR_ID, json_string_value(json_array_get(pg, 0)));
        copy(desc, DDP_FR_ID, json_string_value(json_array_get(pg, 1)));
    }
    return name[0] || key[0];
}

static void entry_add(struct ddp_fr_state *st, const json_t *e)
{
    char name[DDP_FR_ID], key[DDP_FR_ID], desc[DDP_FR_ID];
    if (!entry_group(e, name, key, desc))
        return;
    struct ddp_fr_group *g = group_add(st, name, key);
    if (!g)
        return;
    if (g->nentries == DDP_FR_PER_GROUP) {
        memmove(&g->e[0], &g->e[1], sizeof(g->e[0]) * (DDP_FR_PER_GROUP - 1));
        g->nentries--;
    }
    struct ddp_fr_entry *x = &g->e[g->nentries++];
    memset(x, 0, sizeof(*x));
    x->seq = num(json_object_get(e, "collective_seq_id"), -1);
    x->p2p_seq = num(json_object_get(e, "p2p_seq_id"), -1);
    x->p2p = json_is_true(json_object_get(e, "is_p2p"));
    copy(x->op, sizeof(x->op), json_string_value(json_object_get(e, "profiling_name")));
    shape_of(x->shape, sizeof(x->shape), e);
    x->created_ns = num(json_object_get(e, "time_created_ns"), 0);
}

/* The name and desc of this rank's pg_status key: from its entries (pg_id -> process_group), else the sampler's
 * ddp_pgmap (the same join, made in the rank), else "0" for key "0" (every process's first backend is the default
 * group); "" unknown. torch keys pg_status by the process's own backend counter, so the key itself means different
 * groups on different ranks. */
static void key_name(const json_t *doc, const char *key, char *name, char *desc)
{
    const json_t *entries = json_object_get(doc, "entries"), *map = json_object_get(doc, "ddp_pgmap"), *v;
    char n[DDP_FR_ID], k[DDP_FR_ID], d[DDP_FR_ID];
    size_t i;
    name[0] = desc[0] = 0;
    json_array_foreach(entries, i, v) if (entry_group(v, n, k, d) && n[0] && strcmp(k, key) == 0)
    {
        copy(name, DDP_FR_ID, n);
        copy(desc, DDP_FR_ID, d);
        return;
    }
    v = json_object_get(map, key);
    if (json_is_array(v) && json_is_string(json_array_get(v, 0)) && json_string_length(json_array_get(v, 0))) {
        copy(name, DDP_FR_ID, json_string_value(json_array_get(v, 0)));
        copy(desc, DDP_FR_ID, json_string_value(json_array_get(v, 1)));
    } else if (strcmp(key, "0") == 0)
        copy(name, DDP_FR_ID, "0");
}

static int from_doc(const json_t *doc, struct ddp_fr_state *st)
{
    const json_t *status = json_object_get(doc, "pg_status");
    const json_t *config = json_object_get(doc, "pg_config");
    const json_t *groups = json_object_get(doc, "ddp_groups");
    const json_t *entries = json_object_get(doc, "entries");
    const char *key;
    const json_t *v;
    memset(st, 0, sizeof(*st));
    if (!json_is_object(doc) || !json_is_object(status))
        return -EINVAL;
    json_object_foreach((json_t *)status, key, v)
    {
        char name[DDP_FR_ID], desc[DDP_FR_ID];
        key_name(doc, key, name, desc);
        struct ddp_fr_group *g = group_add(st, name, key);
        long long enq = num(json_object_get(v, "last_enqueued_collective"), -1);
        if (!g)
            break;
        if (enq < g->enqueued) /* two backends of one group (cpu:gloo,cuda:nccl): the one further on */
            continue;
        copy(g->desc, sizeof(g->desc), desc);
        g->enqueued = enq;
        g->started = num(json_object_get(v, "last_started_collective"), -1);
        g->completed = num(json_object_get(v, "last_completed_collective"), -1);
    }
    if (json_is_array(entries)) {
        size_t i;
        json_array_foreach(entries, i, v) entry_add(st, v);
        st->has_entries = true;
    }
    for (size_t i = 0; i < st->ngroups; i++) {
        struct ddp_fr_group *g = &st->g[i];
        const json_t *c = g->id[0] ? json_object_get(config, g->id) : NULL;
        const json_t *r = g->id[0] ? json_object_get(groups, g->id) : NULL;
        if (!r && c)
            r = json_object_get(c, "ranks");
        if (!g->desc[0] && c)
            copy(g->desc, sizeof(g->desc), json_string_value(json_object_get(c, "desc")));
        if (!r && st->ngroups == 1 && json_object_size(config) == 1) { /* gloo names its one group "" */
            json_object_foreach((json_t *)config, key, v) r = json_object_get(v, "ranks");
        }
        ranks_from(g->ranks, sizeof(g->ranks), r);
    }
    return 0;
}

int ddp_fr_parse(const char *text, size_t len, struct ddp_fr_state *st)
{
    const char *line = NULL, *end = text + len;
    for (const char *p = text; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if ((size_t)(stop - p) > sizeof(tag) - 1 && memcmp(p, tag, sizeof(tag) - 1) == 0)
            line = p;
        p = stop + 1;
    }
    const char *from = text;
    size_t n = len;
    if (line) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        from = line + sizeof(tag) - 1;
        n = (size_t)((nl ? nl : end) - from);
    } else {
        size_t i = 0;
        while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t'))
            i++;
        if (i == len || text[i] != '{')
            return -ENOENT;
    }
    json_t *doc = json_loadb(from, n, 0, NULL);
    if (!doc)
        return -EINVAL;
    int rc = from_doc(doc, st);
    json_decref(doc);
    return rc;
}

const struct ddp_fr_group *ddp_fr_group(const struct ddp_fr_state *st, const char *id)
{
    for (size_t i = 0; st && id[0] && i < st->ngroups; i++)
        if (strcmp(st->g[i].id, id) == 0)
            return &st->g[i];
    return NULL;
}

bool ddp_fr_moved(const struct ddp_fr_state *a, const struct ddp_fr_state *b)
{
    for (size_t i = 0; i < b->ngroups; i++) {
        const struct ddp_fr_group *x = NULL;
        for (size_t k = 0; k < a->ngroups && !x; k++)
            if (strcmp(a->g[k].id, b->g[i].id) == 0 && strcmp(a->g[k].key, b->g[i].key) == 0)
                x = &a->g[k];
        if (!x || x->enqueued != b->g[i].enqueued || x->completed != b->g[i].completed)
            return true;
    }
    return false;
}

const char *ddp_fr_kind_name(enum ddp_fr_kind k)
{
    return k == DDP_FR_BEHIND  ? "behind"
           : k == DDP_FR_OP    ? "op_mismatch"
           : k == DDP_FR_SHAPE ? "shape_mismatch"
           : k == DDP_FR_ORDER ? "order_deadlock"
                               : "none";
}

/* Each process group's last collective as one rank's recorder shows it: [{"pg", "ranks", "last_enqueued",
 * "last_completed", "op", "shape"}] */
json_t *ddp_fr_summary_json(const struct ddp_fr_state *fr)
{
    json_t *a = json_array();
    for (size_t g = 0; g < fr->ngroups; g++) {
        const struct ddp_fr_group *x = &fr->g[g];
        const struct ddp_fr_entry *e = NULL;
        for (size_t j = x->nentries; j-- > 0 && !e;)
            if (!x->e[j].p2p && x->e[j].seq == x->enqueued)
                e = &x->e[j];
        json_array_append_new(a, ddp_jsonlog_pack("{s:s, s:s?, s:I, s:I, s:s?, s:s?}", "pg", x->id, "ranks",
                                                  x->ranks[0] ? x->ranks : NULL, "last_enqueued",
                                                  (json_int_t)x->enqueued, "last_completed", (json_int_t)x->completed,
                                                  "op", e ? e->op : NULL, "shape", e ? e->shape : NULL));
    }
    return a;
}
