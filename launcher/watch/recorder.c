/* recorder: see recorder.h. */
#include "watch/recorder.h"

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

/* A sorted list of ranks as "0-2,5" */
static void ranks_text(char *dst, size_t cap, const long long *r, size_t n)
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
    ranks_text(dst, cap, r, n);
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

static struct ddp_fr_group *group_add(struct ddp_fr_state *st, const char *id)
{
    for (size_t i = 0; i < st->ngroups; i++)
        if (strcmp(st->g[i].id, id) == 0)
            return &st->g[i];
    if (st->ngroups >= DDP_FR_GROUPS)
        return NULL;
    struct ddp_fr_group *g = &st->g[st->ngroups++];
    memset(g, 0, sizeof(*g));
    copy(g->id, sizeof(g->id), id);
    g->enqueued = g->started = g->completed = -1;
    return g;
}

static void entry_add(struct ddp_fr_state *st, const json_t *e)
{
    const json_t *pg = json_object_get(e, "process_group");
    char id[DDP_FR_ID];
    if (json_is_array(pg) && json_is_string(json_array_get(pg, 0)))
        copy(id, sizeof(id), json_string_value(json_array_get(pg, 0)));
    else if (json_is_integer(json_object_get(e, "pg_id")))
        snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(e, "pg_id")));
    else
        return;
    struct ddp_fr_group *g = group_add(st, id);
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
        struct ddp_fr_group *g = group_add(st, key);
        if (!g)
            break;
        g->enqueued = num(json_object_get(v, "last_enqueued_collective"), -1);
        g->started = num(json_object_get(v, "last_started_collective"), -1);
        g->completed = num(json_object_get(v, "last_completed_collective"), -1);
    }
    for (size_t i = 0; i < st->ngroups; i++) {
        struct ddp_fr_group *g = &st->g[i];
        const json_t *r = json_object_get(groups, g->id);
        const json_t *c = json_object_get(config, g->id);
        if (!r && c)
            r = json_object_get(c, "ranks");
        if (!r && st->ngroups == 1 && json_object_size(config) == 1) { /* gloo names its one group "" */
            json_object_foreach((json_t *)config, key, v) r = json_object_get(v, "ranks");
        }
        ranks_from(g->ranks, sizeof(g->ranks), r);
    }
    if (json_is_array(entries)) {
        size_t i;
        json_array_foreach(entries, i, v) entry_add(st, v);
        st->has_entries = true;
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
    for (size_t i = 0; st && i < st->ngroups; i++)
        if (strcmp(st->g[i].id, id) == 0)
            return &st->g[i];
    return NULL;
}

bool ddp_fr_moved(const struct ddp_fr_state *a, const struct ddp_fr_state *b)
{
    for (size_t i = 0; i < b->ngroups; i++) {
        const struct ddp_fr_group *x = ddp_fr_group(a, b->g[i].id);
        if (!x || x->enqueued != b->g[i].enqueued || x->completed != b->g[i].completed)
            return true;
    }
    return false;
}

/* ---------------------------------------------------------------- the verdict */

static const struct ddp_fr_entry *entry_at(const struct ddp_fr_group *g, long long seq)
{
    for (size_t i = g->nentries; i-- > 0;)
        if (!g->e[i].p2p && g->e[i].seq == seq)
            return &g->e[i];
    return NULL;
}

/* "rank 2" or "ranks 0-1" for the members i of in[] where set[i] */
static void who(char *dst, size_t cap, const struct ddp_fr_input *in, size_t n, const bool *set)
{
    long long r[1024];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 1024; i++)
        if (set[i])
            r[k++] = in[i].rank;
    qsort(r, k, sizeof(*r), cmp_ll);
    char list[DDP_FR_RANKS];
    ranks_text(list, sizeof(list), r, k);
    snprintf(dst, cap, "%s %s", k == 1 ? "rank" : "ranks", list);
}

struct finding {
    struct ddp_fr_verdict v;
    bool *culprit;
    long long first_ns; /* when the waiting ranks enqueued N (earliest), 0 unknown */
};

/* the value (an op or a shape) of most members, and whether it is a strict majority */
static const char *majority(const char *const *val, size_t n, bool *strict)
{
    const char *best = NULL;
    size_t best_n = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!val[i])
            continue;
        total++;
        size_t c = 0;
        for (size_t j = 0; j < n; j++)
            c += val[j] && strcmp(val[i], val[j]) == 0;
        if (c > best_n) {
            best_n = c;
            best = val[i];
        }
    }
    *strict = best_n * 2 > total;
    return best;
}

static void where_of(struct ddp_buf *b, const struct ddp_fr_input *in, size_t n, const bool *culprit)
{
    for (size_t i = 0; i < n; i++)
        if (culprit[i] && in[i].frame && in[i].frame[0])
            ddp_buf_printf(b, "; rank %d is at %s", in[i].rank, in[i].frame);
}

/* At collective seq of a group, different ops (pass 0) or shapes (pass 1) across its members: the minority are the
 * culprits (none without a strict majority). Fills f and b; false when all that is known there agrees. */
static bool compare_at(const struct ddp_fr_input *in, size_t n, const struct ddp_fr_group *const *g, long long seq,
                       const char *grp, struct finding *f, struct ddp_buf *b)
{
    const char **val = ddp_xcalloc(n, sizeof(*val));
    bool *mine = ddp_xcalloc(n, sizeof(*mine)), *rest = ddp_xcalloc(n, sizeof(*rest));
    bool found = false;
    char lead[128], late[128];
    for (int pass = 0; pass < 2 && !found; pass++) {
        size_t known = 0, differ = 0;
        for (size_t i = 0; i < n; i++) {
            const struct ddp_fr_entry *e = g[i] ? entry_at(g[i], seq) : NULL;
            val[i] = e ? (pass == 0 ? e->op : e->shape) : NULL;
            known += val[i] != NULL;
        }
        if (known < 2)
            break;
        bool strict;
        const char *most = majority(val, n, &strict), *other = NULL;
        for (size_t i = 0; i < n; i++)
            differ += val[i] && strcmp(val[i], most) != 0;
        if (!differ)
            continue;
        found = true;
        memset(f->culprit, 0, n * sizeof(*f->culprit));
        f->v.nculprits = 0;
        f->v.kind = pass == 0 ? DDP_FR_OP : DDP_FR_SHAPE;
        f->v.seq = seq;
        const struct ddp_fr_entry *e0 = NULL;
        for (size_t i = 0; i < n; i++) {
            mine[i] = val[i] && strcmp(val[i], most) == 0;
            rest[i] = val[i] && !mine[i];
            if (mine[i] && !e0)
                e0 = entry_at(g[i], seq);
            if (rest[i] && !other)
                other = val[i];
            if (rest[i] && strict) {
                f->culprit[i] = true;
                f->v.nculprits++;
            }
        }
        copy(f->v.op, sizeof(f->v.op), e0 ? e0->op : "");
        copy(f->v.other, sizeof(f->v.other), other);
        copy(f->v.shape, sizeof(f->v.shape), pass == 1 ? most : "");
        f->first_ns = e0 ? e0->created_ns : 0;
        who(lead, sizeof(lead), in, n, mine);
        who(late, sizeof(late), in, n, rest);
        bool many = strncmp(late, "ranks", 5) == 0, lmany = strncmp(lead, "ranks", 5) == 0;
        if (pass == 0)
            ddp_buf_printf(b, "op mismatch at #%lld %s: %s %s in %s, %s in %s", seq, grp, late, many ? "are" : "is",
                           other, lead, most);
        else
            ddp_buf_printf(b, "shape mismatch at %s #%lld %s: %s %s %s, %s %s %s", f->v.op, seq, grp, late,
                           many ? "have" : "has", other, lead, lmany ? "have" : "has", most);
        if (!strict)
            ddp_buf_puts(b, "; no majority: only the program says which side is wrong");
        where_of(b, in, n, f->culprit);
    }
    free(val);
    free(mine);
    free(rest);
    return found;
}

/* One group's finding, or false */
static bool decide_group(const struct ddp_fr_input *in, size_t n, const char *id, struct finding *f)
{
    const struct ddp_fr_group **g = ddp_xcalloc(n, sizeof(*g));
    bool *leaders = ddp_xcalloc(n, sizeof(*leaders));
    size_t nmem = 0;
    long long top = -1, behind_last = -1;
    bool pending = false, found = false, same = true;
    struct ddp_buf b = {0};
    char lead[128], late[128], grp[160];
    for (size_t i = 0; i < n; i++) {
        g[i] = in[i].fr ? ddp_fr_group(in[i].fr, id) : NULL;
        nmem += g[i] != NULL;
        if (g[i] && g[i]->enqueued > top)
            top = g[i]->enqueued;
    }
    memset(&f->v, 0, sizeof(f->v));
    memset(f->culprit, 0, n * sizeof(*f->culprit));
    f->first_ns = 0;
    for (size_t i = 0; i < n; i++)
        if (g[i] && g[i]->enqueued == top && (g[i]->completed < 0 || g[i]->completed < top))
            pending = true;
    if (nmem < 2 || top < 0 || !pending)
        goto out;
    copy(f->v.group, sizeof(f->v.group), id);
    f->v.seq = top;
    f->v.waited_ms = -1;
    for (size_t i = 0; i < n; i++) {
        if (!g[i])
            continue;
        if (!f->v.ranks[0] && g[i]->ranks[0])
            copy(f->v.ranks, sizeof(f->v.ranks), g[i]->ranks);
        if (g[i]->enqueued < top) {
            f->culprit[i] = true;
            f->v.nculprits++;
            same &= behind_last < 0 || g[i]->enqueued == behind_last;
            if (g[i]->enqueued > behind_last)
                behind_last = g[i]->enqueued;
            continue;
        }
        leaders[i] = true;
        const struct ddp_fr_entry *e = entry_at(g[i], top);
        if (e && (!f->first_ns || (e->created_ns && e->created_ns < f->first_ns)))
            f->first_ns = e->created_ns;
        if (e && !f->v.op[0])
            copy(f->v.op, sizeof(f->v.op), e->op);
        if (f->v.waited_ms < 0 || in[i].still_ms < f->v.waited_ms)
            f->v.waited_ms = in[i].still_ms;
    }
    snprintf(grp, sizeof(grp), "(pg %s%s%s)", id, f->v.ranks[0] ? ", ranks " : "", f->v.ranks);
    if (!f->v.nculprits) { /* all at the same N: what differs there */
        found = compare_at(in, n, g, top, grp, f, &b);
        goto out;
    }
    /* the ranks behind all stopped at one collective that the others got through: a mismatch there (gloo lets
     * the larger side of a shape mismatch through) is the cause, else they never reached N */
    struct finding at = *f;
    at.culprit = ddp_xcalloc(n, sizeof(bool));
    if (same && compare_at(in, n, g, behind_last, grp, &at, &b)) {
        memcpy(f->culprit, at.culprit, n * sizeof(bool));
        f->v = at.v;
        f->first_ns = at.first_ns;
        free(at.culprit);
        found = true;
        goto out;
    }
    free(at.culprit);
    f->v.kind = DDP_FR_BEHIND;
    who(lead, sizeof(lead), in, n, leaders);
    who(late, sizeof(late), in, n, f->culprit);
    ddp_buf_printf(&b, "%s %s in %s #%lld %s", lead, strncmp(lead, "ranks", 5) == 0 ? "wait" : "waits",
                   f->v.op[0] ? f->v.op : "collective", top, grp);
    if (f->v.waited_ms >= 0)
        ddp_buf_printf(&b, " for %lld s", f->v.waited_ms / 1000);
    if (same)
        ddp_buf_printf(&b, "; %s%s last is #%lld", late, f->v.nculprits == 1 ? "'s" : "'", behind_last);
    else
        for (size_t i = 0; i < n; i++)
            if (f->culprit[i])
                ddp_buf_printf(&b, "; rank %d's last is #%lld", in[i].rank, g[i]->enqueued);
    where_of(&b, in, n, f->culprit);
    found = true;
out:
    if (found)
        copy(f->v.why, sizeof(f->v.why), b.data);
    ddp_buf_free(&b);
    free(g);
    free(leaders);
    return found;
}

void ddp_fr_decide(const struct ddp_fr_input *in, size_t n, bool *culprit, struct ddp_fr_verdict *v)
{
    struct finding best = {0}, cur = {0};
    bool have = false;
    memset(v, 0, sizeof(*v));
    memset(culprit, 0, n * sizeof(*culprit));
    best.culprit = ddp_xcalloc(n ? n : 1, sizeof(bool));
    cur.culprit = ddp_xcalloc(n ? n : 1, sizeof(bool));
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; in[i].fr && k < in[i].fr->ngroups; k++) {
            const char *id = in[i].fr->g[k].id;
            bool seen = false; /* decide each group once: at the first rank that has it */
            for (size_t j = 0; j < i && !seen; j++)
                seen = in[j].fr && ddp_fr_group(in[j].fr, id);
            if (seen || !decide_group(in, n, id, &cur))
                continue;
            bool better = !have;
            if (have && cur.first_ns && best.first_ns)
                better = cur.first_ns < best.first_ns;
            else if (have)
                better = cur.v.nculprits && (!best.v.nculprits || cur.v.nculprits < best.v.nculprits);
            if (better) {
                bool *keep = best.culprit;
                best = cur;
                cur.culprit = keep;
                have = true;
            }
        }
    }
    if (have) {
        *v = best.v;
        memcpy(culprit, best.culprit, n * sizeof(*culprit));
    }
    free(best.culprit);
    free(cur.culprit);
}

bool ddp_fr_places(const struct ddp_fr_state *const *fr, size_t n, enum ddp_suspect_place *place)
{
    const char *id = NULL;
    long long top = -1;
    size_t have = 0;
    for (size_t i = 0; i < n && !id; i++)
        if (fr[i] && fr[i]->ngroups)
            id = fr[i]->g[0].id;
    for (size_t i = 0; id && i < n; i++) {
        const struct ddp_fr_group *g = fr[i] ? ddp_fr_group(fr[i], id) : NULL;
        have += g != NULL;
        if (g && g->enqueued > top)
            top = g->enqueued;
    }
    if (have < 2)
        return false;
    for (size_t i = 0; i < n; i++) {
        const struct ddp_fr_group *g = fr[i] ? ddp_fr_group(fr[i], id) : NULL;
        place[i] = !g                                                               ? DDP_SUSPECT_NONE
                   : g->enqueued == top && (g->completed < 0 || g->completed < top) ? DDP_SUSPECT_INSIDE
                                                                                    : DDP_SUSPECT_OUTSIDE;
    }
    return true;
}

const char *ddp_fr_kind_name(enum ddp_fr_kind k)
{
    return k == DDP_FR_BEHIND  ? "behind"
           : k == DDP_FR_OP    ? "op_mismatch"
           : k == DDP_FR_SHAPE ? "shape_mismatch"
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
