/* hostlist: Slurm hostlist expressions, expanded. See hostlist.h. */
#include "nodes/hostlist.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 18 /* 10^18 - 1 fits an unsigned long long with room to add 1 */

/* One item of a bracket group: LO-HI (or N as N-N), printed with at least width digits. */
struct item {
    unsigned long long lo, hi;
    int width;
};

/* A token is a sequence of parts: literal text, or a bracket group. */
struct part {
    const char *lit; /* literal: points into the expression; NULL for a group */
    size_t litlen;
    struct item *items;
    size_t nitems, cap;
    size_t maxlen; /* longest string an item of the group prints */
};

struct token {
    struct part *parts;
    size_t n, cap;
};

static void token_free(struct token *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->parts[i].items);
    free(t->parts);
    t->parts = NULL;
    t->n = t->cap = 0;
}

static struct part *token_add(struct token *t)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->parts = ddp_xrealloc(t->parts, t->cap * sizeof *t->parts);
    }
    struct part *p = &t->parts[t->n++];
    memset(p, 0, sizeof *p);
    return p;
}

static bool is_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int ndigits(unsigned long long v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

#define ERR_AT(err, code, expr, pos, ...) hl_err((err), (code), (expr), (pos), __VA_ARGS__)

static int hl_err(struct ddp_err *err, int code, const char *expr, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int hl_err(struct ddp_err *err, int code, const char *expr, size_t pos, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t len = strlen(expr);
    return ddp_errf(err, code, "hostlist '%.120s%s': column %zu: %s", expr, len > 120 ? "..." : "", pos + 1, what);
}

/* Parse a decimal number of 1..MAX_DIGITS digits at expr[*pos]. */
static int parse_num(const char *expr, size_t *pos, unsigned long long *v, int *width, struct ddp_err *err)
{
    size_t start = *pos, i = start;
    unsigned long long x = 0;
    while (is_digit(expr[i])) {
        if (i - start >= MAX_DIGITS)
            return ERR_AT(err, -EINVAL, expr, start, "number longer than %d digits", MAX_DIGITS);
        x = x * 10 + (unsigned long long)(expr[i] - '0');
        i++;
    }
    if (i == start) {
        if (expr[i] == '\0')
            return ERR_AT(err, -EINVAL, expr, i, "missing ']' (expected a number)");
        return ERR_AT(err, -EINVAL, expr, i, "expected a number in brackets, got '%c'", expr[i]);
    }
    *v = x;
    *width = (int)(i - start);
    *pos = i;
    return 0;
}

/* Parse the bracket group starting at expr[*pos] == '['; leaves *pos after ']'. */
static int parse_group(const char *expr, size_t *pos, struct part *g, struct ddp_err *err)
{
    size_t open = *pos, i = open + 1;
    if (expr[i] == ']')
        return ERR_AT(err, -EINVAL, expr, open, "empty brackets '[]'");
    for (;;) {
        unsigned long long lo, hi;
        int wlo, whi;
        size_t item_at = i;
        int rc = parse_num(expr, &i, &lo, &wlo, err);
        if (rc < 0)
            return rc;
        hi = lo;
        if (expr[i] == '-') {
            i++;
            rc = parse_num(expr, &i, &hi, &whi, err);
            if (rc < 0)
                return rc;
            if (hi < lo)
                return ERR_AT(err, -EINVAL, expr, item_at, "range %llu-%llu goes down (expected LO <= HI)", lo, hi);
        }
        if (g->nitems == g->cap) {
            g->cap = g->cap ? g->cap * 2 : 4;
            g->items = ddp_xrealloc(g->items, g->cap * sizeof *g->items);
        }
        g->items[g->nitems++] = (struct item){lo, hi, wlo};
        size_t len = (size_t)(ndigits(hi) > wlo ? ndigits(hi) : wlo);
        if (len > g->maxlen)
            g->maxlen = len;
        if (expr[i] == ']') {
            *pos = i + 1;
            return 0;
        }
        if (expr[i] == ',') {
            i++;
            continue;
        }
        if (expr[i] == '\0')
            return ERR_AT(err, -EINVAL, expr, open, "'[' without a matching ']'");
        return ERR_AT(err, -EINVAL, expr, i, "unexpected '%c' in brackets (expected ',', '-' or ']')", expr[i]);
    }
}

/* Parse one token starting at expr[*pos] (not a separator), up to the next separator outside brackets. */
static int parse_token(const char *expr, size_t *pos, struct token *t, struct ddp_err *err)
{
    size_t i = *pos;
    while (expr[i] && !is_sep(expr[i])) {
        unsigned char c = (unsigned char)expr[i];
        if (c == '[') {
            struct part *g = token_add(t);
            int rc = parse_group(expr, &i, g, err);
            if (rc < 0)
                return rc;
            continue;
        }
        if (c == ']')
            return ERR_AT(err, -EINVAL, expr, i, "']' without a matching '['");
        if (c < 0x20 || c == 0x7f)
            return ERR_AT(err, -EINVAL, expr, i, "control character 0x%02x in a host name", c);
        size_t start = i;
        while (expr[i] && !is_sep(expr[i]) && expr[i] != '[' && expr[i] != ']' && (unsigned char)expr[i] >= 0x20 &&
               expr[i] != 0x7f)
            i++;
        struct part *l = token_add(t);
        l->lit = expr + start;
        l->litlen = i - start;
    }
    *pos = i;
    return 0;
}

/* Write every name of the token into out, odometer style (rightmost group fastest). */
static void token_emit(const struct token *t, struct ddp_strv *out)
{
    size_t *item = ddp_xcalloc(t->n ? t->n : 1, sizeof *item);
    unsigned long long *val = ddp_xcalloc(t->n ? t->n : 1, sizeof *val);
    for (size_t k = 0; k < t->n; k++)
        if (!t->parts[k].lit)
            val[k] = t->parts[k].items[0].lo;
    char name[DDP_HOSTLIST_NAME_MAX + 1];
    for (;;) {
        size_t len = 0;
        for (size_t k = 0; k < t->n; k++) {
            const struct part *p = &t->parts[k];
            if (p->lit) {
                memcpy(name + len, p->lit, p->litlen);
                len += p->litlen;
            } else {
                len += (size_t)snprintf(name + len, sizeof name - len, "%0*llu", p->items[item[k]].width, val[k]);
            }
        }
        name[len] = '\0';
        ddp_strv_push(out, name);
        /* Advance the rightmost group; carry to the left. */
        size_t k = t->n;
        for (;;) {
            if (k == 0)
                goto done;
            k--;
            const struct part *p = &t->parts[k];
            if (p->lit)
                continue;
            if (val[k] < p->items[item[k]].hi) {
                val[k]++;
                break;
            }
            if (item[k] + 1 < p->nitems) {
                item[k]++;
                val[k] = p->items[item[k]].lo;
                break;
            }
            item[k] = 0;
            val[k] = p->items[0].lo;
        }
    }
done:
    free(item);
    free(val);
}

int ddp_hostlist_expand(const char *expr, struct ddp_strv *out, struct ddp_err *err)
{
    struct ddp_strv hosts = {0};
    size_t total = 0, i = 0;
    int rc = 0;
    if (!expr)
        return ddp_errf(err, -EINVAL, "hostlist: no expression");
    for (;;) {
        while (is_sep(expr[i]))
            i++;
        if (!expr[i])
            break;
        size_t start = i;
        struct token t = {0};
        rc = parse_token(expr, &i, &t, err);
        if (rc < 0) {
            token_free(&t);
            goto fail;
        }
        /* Size the token before producing anything: count (saturating) and name length. */
        unsigned long long count = 1;
        size_t namelen = 0;
        for (size_t k = 0; k < t.n; k++) {
            const struct part *p = &t.parts[k];
            if (p->lit) {
                namelen += p->litlen;
                continue;
            }
            namelen += p->maxlen;
            unsigned long long n = 0;
            for (size_t j = 0; j < p->nitems && n <= DDP_HOSTLIST_MAX_HOSTS; j++)
                n += p->items[j].hi - p->items[j].lo + 1; /* <= 10^18 each: no overflow before the check */
            if (n > DDP_HOSTLIST_MAX_HOSTS || count * n > DDP_HOSTLIST_MAX_HOSTS)
                count = DDP_HOSTLIST_MAX_HOSTS + 1ULL;
            else
                count *= n;
        }
        if (namelen > DDP_HOSTLIST_NAME_MAX) {
            token_free(&t);
            rc = ERR_AT(err, -E2BIG, expr, start, "host name longer than %d characters", DDP_HOSTLIST_NAME_MAX);
            goto fail;
        }
        if (count > DDP_HOSTLIST_MAX_HOSTS - total) {
            token_free(&t);
            rc = ERR_AT(err, -E2BIG, expr, start, "expands to more than %d hosts", DDP_HOSTLIST_MAX_HOSTS);
            goto fail;
        }
        total += (size_t)count;
        token_emit(&t, &hosts);
        token_free(&t);
    }
    if (total == 0) {
        rc = ddp_errf(err, -EINVAL, "hostlist '%.120s': empty (expected host names like 'n[1-4]')", expr);
        goto fail;
    }
    for (size_t k = 0; k < hosts.n; k++)
        ddp_strv_push_own(out, hosts.v[k]);
    free(hosts.v);
    return (int)total;
fail:
    ddp_strv_clear(&hosts);
    return rc;
}
