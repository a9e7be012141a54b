/* mismatch: see mismatch.h. */
#include "watch/mismatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "records/jsonlog.h"

/* One rank's entry at (group, N). */
struct seen {
    size_t i;
    const struct ddp_fr_entry *e;
    int side; /* index of its (op, shape) among the values seen */
};

static const struct ddp_fr_entry *entry_at(const struct ddp_fr_group *g, long long seq)
{
    for (size_t j = 0; j < g->nentries; j++)
        if (!g->e[j].p2p && g->e[j].seq == seq)
            return &g->e[j];
    return NULL;
}

static bool same(const struct ddp_fr_entry *a, const struct ddp_fr_entry *b)
{
    return strcmp(a->op, b->op) == 0 && strcmp(a->shape, b->shape) == 0;
}

/* "1", "0, 2" from the ranks of in[] on side s (sorted as in[] is; a rank once) */
static size_t side_ranks(char *dst, size_t cap, const struct ddp_mismatch_input *in, const struct seen *sn, size_t k,
                         int s)
{
    size_t len = 0, count = 0;
    dst[0] = 0;
    for (size_t j = 0; j < k; j++) {
        if (sn[j].side != s)
            continue;
        int w = snprintf(dst + len, cap - len, "%s%d", count ? ", " : "", in[sn[j].i].rank);
        if (w < 0 || (size_t)w >= cap - len)
            break;
        len += (size_t)w;
        count++;
    }
    return count;
}

/* Does in[i] belong to the group named id: it reports it, or a reporter's member list holds its rank. */
static bool member(const struct ddp_mismatch_input *in, size_t n, size_t i, const char *id)
{
    if (ddp_fr_group(in[i].fr, id))
        return true;
    for (size_t j = 0; j < n; j++) {
        const struct ddp_fr_group *g = ddp_fr_group(in[j].fr, id);
        if (!g || !g->ranks[0])
            continue;
        long long a, b;
        for (const char *p = g->ranks; *p;) { /* "0-2,5" */
            char *end;
            a = b = strtoll(p, &end, 10);
            if (*end == '-')
                b = strtoll(end + 1, &end, 10);
            if (in[i].rank >= a && in[i].rank <= b)
                return true;
            p = *end ? end + 1 : end;
        }
    }
    return false;
}

/* The (op, shape) sides at (id, seq) across the ranks; returns how many ranks recorded it. */
static size_t sides_at(const struct ddp_mismatch_input *in, size_t n, const char *id, long long seq, struct seen *sn,
                       int *nsides)
{
    size_t k = 0;
    *nsides = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ddp_fr_group *g = ddp_fr_group(in[i].fr, id);
        const struct ddp_fr_entry *e = g ? entry_at(g, seq) : NULL;
        if (!e)
            continue;
        sn[k] = (struct seen){i, e, -1};
        for (size_t j = 0; j < k && sn[k].side < 0; j++)
            if (same(sn[j].e, e))
                sn[k].side = sn[j].side;
        if (sn[k].side < 0)
            sn[k].side = (*nsides)++;
        k++;
    }
    return k;
}

static void describe(const struct ddp_fr_entry *e, bool with_op, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s%s%s", with_op ? e->op : "", with_op ? " " : "", e->shape);
}

/* The group (a group of the failed rank wins) and the first N in it where two ranks recorded different entries;
 * NULL when there is none. */
static const char *first_difference(const struct ddp_mismatch_input *in, size_t n, struct seen *sn, long long *seq)
{
    const char *best_id = NULL;
    bool best_has_failed = false;
    for (size_t i = 0; i < n; i++) {
        for (size_t gi = 0; in[i].fr && gi < in[i].fr->ngroups; gi++) {
            const struct ddp_fr_group *g = &in[i].fr->g[gi];
            bool seen_before = false;
            for (size_t j = 0; j < i && !seen_before; j++)
                seen_before = ddp_fr_group(in[j].fr, g->id) != NULL;
            if (!g->id[0] || seen_before)
                continue;
            bool has_failed = false;
            for (size_t j = 0; j < n; j++)
                has_failed |= in[j].failed && member(in, n, j, g->id);
            /* the seqs this group's entries hold, on any rank, oldest first */
            long long first = -1;
            for (size_t j = 0; j < n; j++) {
                const struct ddp_fr_group *h = ddp_fr_group(in[j].fr, g->id);
                for (size_t e = 0; h && e < h->nentries; e++) {
                    long long s = h->e[e].seq;
                    int nsides;
                    if (h->e[e].p2p || s <= 0 || (first >= 0 && s >= first))
                        continue;
                    if (sides_at(in, n, g->id, s, sn, &nsides) >= 2 && nsides >= 2)
                        first = s;
                }
            }
            if (first >= 0 && (!best_id || (has_failed && !best_has_failed))) {
                best_id = g->id;
                *seq = first;
                best_has_failed = has_failed;
            }
        }
    }
    return best_id;
}

/* Of the k sides in sn: the one not blamed (a strict majority, else the failed rank's; -1: nobody is), the
 * culprits marked, *ke an entry of the kept side (side 0 when none) and *ce one of another side. */
static int blame(const struct ddp_mismatch_input *in, const struct seen *sn, size_t k, int nsides, bool *culprit,
                 struct ddp_mismatch *m, const struct ddp_fr_entry **ke, const struct ddp_fr_entry **ce)
{
    size_t *count = ddp_xcalloc((size_t)nsides, sizeof(*count));
    int failed_side = -1, major = 0;
    for (size_t j = 0; j < k; j++) {
        count[sn[j].side]++;
        if (in[sn[j].i].failed)
            failed_side = sn[j].side;
    }
    for (int s = 1; s < nsides; s++)
        if (count[s] > count[major])
            major = s;
    bool strict = true;
    for (int s = 0; s < nsides; s++)
        strict &= s == major || count[s] < count[major];
    free(count);
    int keep = strict ? major : failed_side;
    *ke = *ce = NULL;
    for (size_t j = 0; j < k; j++) {
        if (keep >= 0 && sn[j].side != keep) {
            culprit[sn[j].i] = true;
            m->nculprits++;
        }
        if (sn[j].side == (keep >= 0 ? keep : 0) && !*ke)
            *ke = sn[j].e;
        if (sn[j].side != (keep >= 0 ? keep : 0) && !*ce)
            *ce = sn[j].e;
    }
    return keep;
}

/* m's culprits, others and why, once the sides are known. */
static void mismatch_words(const struct ddp_mismatch_input *in, const struct seen *sn, size_t k, int nsides, int keep,
                           const struct ddp_fr_entry *ke, const struct ddp_fr_entry *ce, struct ddp_mismatch *m)
{
    int kside = keep >= 0 ? keep : 0, cside = -1;
    for (size_t j = 0; j < k && cside < 0; j++)
        if (sn[j].side != kside)
            cside = sn[j].side;
    /* the culprits: every side but the one kept; named side by side when nobody is blamed */
    size_t nc = 0, len = 0;
    for (int s = 0; s < nsides; s++) {
        char part[DDP_FR_RANKS];
        if (s == kside || (keep < 0 && s != cside))
            continue;
        nc += side_ranks(part, sizeof(part), in, sn, k, s);
        int w = snprintf(m->culprits + len, sizeof(m->culprits) - len, "%s%s", len ? ", " : "", part);
        if (w > 0 && (size_t)w < sizeof(m->culprits) - len)
            len += (size_t)w;
    }
    size_t no = side_ranks(m->others, sizeof(m->others), in, sn, k, kside);
    bool ops_differ = strcmp(ke->op, ce->op) != 0;
    char mine[DDP_FR_OPLEN + DDP_FR_SHAPELEN + 2], theirs[DDP_FR_OPLEN + DDP_FR_SHAPELEN + 2];
    struct ddp_buf b = {0};
    describe(ce, ops_differ, mine, sizeof(mine));
    describe(ke, ops_differ, theirs, sizeof(theirs));
    ddp_buf_printf(&b, "%s%s %s sent %s where %s %s sent %s in ", keep < 0 ? "collective mismatch: " : "",
                   nc == 1 ? "rank" : "ranks", m->culprits, mine, no == 1 ? "rank" : "ranks", m->others, theirs);
    if (!ops_differ)
        ddp_buf_printf(&b, "%s ", ke->op);
    ddp_buf_printf(&b, "#%lld of group %s", m->seq, m->group);
    if (m->ranks[0])
        ddp_buf_printf(&b, " (ranks %s)", m->ranks);
    if (keep < 0)
        ddp_buf_puts(&b, " (no majority: the program says which side is wrong)");
    ddp_text_copy(m->why, sizeof(m->why), b.data);
    ddp_buf_free(&b);
}

void ddp_mismatch_decide(const struct ddp_mismatch_input *in, size_t n, bool *culprit, struct ddp_mismatch *m)
{
    struct seen *sn = ddp_xcalloc(n ? n : 1, sizeof(*sn));
    long long best_seq = 0;
    memset(m, 0, sizeof(*m));
    memset(culprit, 0, n * sizeof(*culprit));
    const char *best_id = first_difference(in, n, sn, &best_seq);
    if (!best_id) {
        free(sn);
        return;
    }
    int nsides;
    size_t k = sides_at(in, n, best_id, best_seq, sn, &nsides);
    const struct ddp_fr_entry *ke, *ce;
    int keep = blame(in, sn, k, nsides, culprit, m, &ke, &ce);
    m->found = true;
    snprintf(m->group, sizeof(m->group), "%s", best_id);
    for (size_t i = 0; i < n && !m->ranks[0]; i++) {
        const struct ddp_fr_group *g = ddp_fr_group(in[i].fr, best_id);
        if (g && g->ranks[0])
            snprintf(m->ranks, sizeof(m->ranks), "%s", g->ranks);
    }
    m->seq = best_seq;
    snprintf(m->op, sizeof(m->op), "%s", ke->op);
    snprintf(m->shape, sizeof(m->shape), "%s", ke->shape);
    snprintf(m->other_op, sizeof(m->other_op), "%s", ce->op);
    snprintf(m->other_shape, sizeof(m->other_shape), "%s", ce->shape);
    mismatch_words(in, sn, k, nsides, keep, ke, ce, m);
    if (keep < 0) {
        m->nculprits = 0;
        m->culprits[0] = 0;
    }
    free(sn);
}

json_t *ddp_mismatch_json(const struct ddp_mismatch *m)
{
    return ddp_jsonlog_pack("{s:s, s:s?, s:I, s:s, s:s, s:s?, s:s, s:s, s:s, s:s}", "pg", m->group, "ranks",
                            m->ranks[0] ? m->ranks : NULL, "seq", (json_int_t)m->seq, "op", m->op, "shape", m->shape,
                            "culprits", m->culprits[0] ? m->culprits : NULL, "culprit_op", m->other_op, "culprit_shape",
                            m->other_shape, "others", m->others, "why", m->why);
}
