/* spec_value: see spec_internal.h and spec.h: one value of the key table parsed from its text and formatted back
 * (ddp_spec_parse_value, ddp_spec_format, the argv and tee/redirects grammars), and the [nccl]/[env] kvlists.
 * It does not know where a value came from (spec.c) or read files (spec_file.c). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spec/spec.h"
#include "spec/spec_internal.h"

/* ---- values ---- */

static void *field(struct ddp_spec *spec, const struct ddp_key *k)
{
    return (char *)spec + k->offset;
}

static const void *cfield(const struct ddp_spec *spec, const struct ddp_key *k)
{
    return (const char *)spec + k->offset;
}

void ddp_spec_free_value(struct ddp_spec *spec, const struct ddp_key *k)
{
    void *f = field(spec, k);
    switch (k->type) {
    case DDP_T_STR:
    case DDP_T_STD:
        free(*(char **)f);
        *(char **)f = NULL;
        break;
    case DDP_T_LIST:
    case DDP_T_ARGV:
        ddp_strv_clear(f);
        break;
    default:
        break;
    }
}

int ddp_spec_split_argv(const char *s, struct ddp_strv *out, struct ddp_err *err)
{
    struct ddp_buf word = {0};
    bool in_word = false;
    ddp_strv_clear(out);
    for (const char *p = s;; p++) {
        char c = *p;
        if (c == '\0' || isspace((unsigned char)c)) {
            if (in_word) {
                ddp_strv_push(out, word.data ? word.data : "");
                ddp_buf_free(&word);
                in_word = false;
            }
            if (c == '\0')
                break;
            continue;
        }
        in_word = true;
        if (c == '\'') {
            const char *end = strchr(p + 1, '\'');
            if (!end)
                goto unterminated;
            ddp_buf_add(&word, p + 1, (size_t)(end - p - 1));
            p = end;
        } else if (c == '"') {
            for (p++; *p != '"'; p++) {
                if (*p == '\0')
                    goto unterminated;
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$' || p[1] == '`'))
                    p++;
                ddp_buf_add(&word, p, 1);
            }
        } else if (c == '\\') {
            if (p[1] == '\0') {
                ddp_buf_free(&word);
                ddp_strv_clear(out);
                return ddp_errf(err, -EINVAL, "a backslash at the end of '%s' escapes nothing", s);
            }
            p++;
            ddp_buf_add(&word, p, 1);
        } else {
            ddp_buf_add(&word, p, 1);
        }
    }
    return 0;
unterminated:
    ddp_buf_free(&word);
    ddp_strv_clear(out);
    return ddp_errf(err, -EINVAL, "unterminated quote in '%s'", s);
}

static void split_list(const char *s, struct ddp_strv *out)
{
    ddp_strv_clear(out);
    const char *p = s;
    while (*p) {
        while (*p && (*p == ',' || isspace((unsigned char)*p)))
            p++;
        const char *start = p;
        while (*p && *p != ',' && !isspace((unsigned char)*p))
            p++;
        if (p > start)
            ddp_strv_push_own(out, ddp_xstrndup(start, (size_t)(p - start)));
    }
}

static int parse_std(const char *v, struct ddp_err *err)
{
    long long n;
    if (ddp_parse_int(v, 0, 3, &n) == 0)
        return 0;
    /* per rank: "0:1,1:2" */
    const char *p = v;
    if (!*p)
        goto bad;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p))
            goto bad;
        strtol(p, &end, 10);
        if (*end != ':' || end[1] < '0' || end[1] > '3')
            goto bad;
        p = end + 2;
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    return 0;
bad:
    return ddp_errf(err, -EINVAL,
                    "expected 0-3 (0 none, 1 stdout, 2 stderr, 3 both) or per rank like 0:1,1:2, got '%s'", v);
}

int ddp_spec_std_for_rank(const char *value, int local_rank)
{
    if (!value || !*value)
        return 0;
    if (!strchr(value, ':')) {
        long v = strtol(value, NULL, 10);
        return v >= 0 && v <= 3 ? (int)v : 0;
    }
    /* Unvalidated input must not run past the end: "0:" or "0:1x" mean nothing. */
    for (const char *p = value; *p;) {
        char *end;
        long r = strtol(p, &end, 10);
        if (end == p || *end != ':' || end[1] < '0' || end[1] > '3')
            return 0;
        int v = end[1] - '0';
        if (r == local_rank)
            return v;
        p = end + 2;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return 0;
}

static int parse_mem(const char *v, struct ddp_mem_limit *m, struct ddp_err *err)
{
    memset(m, 0, sizeof *m);
    if (strcmp(v, "none") == 0 || strcmp(v, "0") == 0 || strcmp(v, "off") == 0)
        return 0;
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)v[0]))
        goto bad;
    double x = strtod(v, &end);
    if (errno || end == v || x <= 0)
        goto bad;
    if (strcmp(end, "%") == 0) {
        if (x > 100)
            goto bad;
        m->percent = (int)x;
        return 0;
    }
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},          {"B", 1},       {"K", 1024.0},    {"KiB", 1024.0},        {"M", 1 << 20},
                 {"MiB", 1 << 20}, {"G", 1 << 30}, {"GiB", 1 << 30}, {"T", 1099511627776.0}, {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0) {
            if (x * units[i].mult >= 1.8e19) /* would not fit: the conversion is undefined */
                goto bad;
            m->bytes = (unsigned long long)(x * units[i].mult);
            return 0;
        }
bad:
    return ddp_errf(err, -EINVAL, "expected a percentage like 10%% or a size like 2GiB or 512MiB, got '%s'", v);
}

static int parse_int_key(const struct ddp_key *k, const char *v, int *out, struct ddp_err *err)
{
    long long n;
    int rc = ddp_parse_int(v, k->min, k->max, &n);
    if (rc == -ERANGE && v[0] == '-' && k->min >= 0)
        return ddp_errf(err, rc, "expected a non-negative integer, got '%s'", v);
    if (rc < 0)
        return ddp_errf(err, -EINVAL, "expected an integer from %lld to %lld, got '%s'", k->min, k->max, v);
    *out = (int)n;
    return 0;
}

/* yes/no, true/false, on/off, 1/0, in any case (ddplaunch.ini(5)). */
static int parse_bool(const char *v, bool *out, struct ddp_err *err)
{
    static const char *const yes[] = {"yes", "true", "on", "1", NULL}, *const no[] = {"no", "false", "off", "0", NULL};
    for (int j = 0; yes[j]; j++)
        if (strcasecmp(v, yes[j]) == 0 || strcasecmp(v, no[j]) == 0) {
            *out = strcasecmp(v, yes[j]) == 0;
            return 0;
        }
    return ddp_errf(err, -EINVAL, "expected yes or no, got '%s'", v);
}

/* One of k->choices; a tristate's yes/no also in the other words and cases of parse_bool. */
static int parse_enum(const struct ddp_key *k, const char *v, int *out, struct ddp_err *err)
{
    for (int j = 0; k->choices[j]; j++)
        if (strcmp(v, k->choices[j]) == 0) {
            *out = j;
            return 0;
        }
    bool b;
    if (k->type == DDP_T_TRISTATE && (strcasecmp(v, "auto") == 0 || parse_bool(v, &b, NULL) == 0)) {
        *out = strcasecmp(v, "auto") == 0 ? DDP_AUTO : b ? DDP_YES : DDP_NO;
        return 0;
    }
    struct ddp_buf b2 = {0};
    for (int j = 0; k->choices[j]; j++)
        ddp_buf_printf(&b2, "%s%s", j ? (k->choices[j + 1] ? ", " : " or ") : "", k->choices[j]);
    const char *dym = ddp_did_you_mean(v, k->choices);
    int rc = dym ? ddp_errf(err, -EINVAL, "expected %s, got '%s' (did you mean '%s'?)", b2.data, v, dym)
                 : ddp_errf(err, -EINVAL, "expected %s, got '%s'", b2.data, v);
    ddp_buf_free(&b2);
    return rc;
}

static int parse_range(const char *v, struct ddp_range *out, struct ddp_err *err)
{
    const char *colon = strchr(v, ':');
    long long lo, hi;
    if (colon) {
        char *a = ddp_xstrndup(v, (size_t)(colon - v));
        int ra = ddp_parse_int(a, 1, 1 << 20, &lo), rb = ddp_parse_int(colon + 1, 1, 1 << 20, &hi);
        free(a);
        if (ra < 0 || rb < 0)
            return ddp_errf(err, -EINVAL, "expected N or MIN:MAX with positive integers, got '%s'", v);
        if (lo > hi)
            return ddp_errf(err, -EINVAL, "expected MIN:MAX with MIN <= MAX, got '%s'", v);
    } else {
        if (ddp_parse_int(v, 1, 1 << 20, &lo) < 0)
            return ddp_errf(err, -EINVAL, "expected N or MIN:MAX with positive integers, got '%s'", v);
        hi = lo;
    }
    out->min = (int)lo;
    out->max = (int)hi;
    return 0;
}

static int parse_argv_key(const char *v, struct ddp_strv *f, struct ddp_err *err)
{
    struct ddp_strv tmp = {0};
    int rc = ddp_spec_split_argv(v, &tmp, err);
    if (rc < 0)
        return rc;
    ddp_strv_clear(f);
    *f = tmp;
    return 0;
}

static int parse_nproc(const char *v, struct ddp_nproc *np, struct ddp_err *err)
{
    long long n;
    int rc;
    if (!strcmp(v, "gpu"))
        np->kind = DDP_NPROC_GPU;
    else if (!strcmp(v, "cpu"))
        np->kind = DDP_NPROC_CPU;
    else if (!strcmp(v, "auto"))
        np->kind = DDP_NPROC_AUTO;
    else if ((rc = ddp_parse_int(v, 1, 1 << 16, &n)) == 0) {
        np->kind = DDP_NPROC_INT;
        np->n = (int)n;
    } else if (rc == -ERANGE && v[0] != '-' && strspn(v, "0") != strlen(v)) {
        return ddp_errf(err, -ERANGE, "expected at most %d workers per node, got '%s'", 1 << 16, v);
    } else if (v[0] == '-' || !strcmp(v, "0"))
        return ddp_errf(err, -EINVAL, "expected a positive number of workers, gpu, cpu or auto, got '%s'", v);
    else {
        static const char *const words[] = {"gpu", "cpu", "auto", NULL};
        const char *dym = ddp_did_you_mean(v, words);
        return dym ? ddp_errf(err, -EINVAL, "expected a number, gpu, cpu or auto, got '%s' (did you mean '%s'?)", v,
                              dym)
                   : ddp_errf(err, -EINVAL, "expected a number, gpu, cpu or auto, got '%s'", v);
    }
    return 0;
}

static int parse_port(const char *v, struct ddp_port_spec *ps, struct ddp_err *err)
{
    long long n;
    if (!strcmp(v, "auto") || !strcmp(v, "0")) {
        ps->is_auto = true;
        ps->lo = ps->hi = 0; /* port.c's default range, clear of the kernel's ephemeral ports */
        return 0;
    }
    if (!strncmp(v, "auto:", 5)) {
        long long lo, hi;
        const char *dash = strchr(v + 5, '-');
        char *a = dash ? ddp_xstrndup(v + 5, (size_t)(dash - v - 5)) : NULL;
        int ok =
            dash && ddp_parse_int(a, 1, 65535, &lo) == 0 && ddp_parse_int(dash + 1, 1, 65535, &hi) == 0 && lo <= hi;
        free(a);
        if (!ok)
            return ddp_errf(err, -EINVAL, "expected auto:LO-HI with 1 <= LO <= HI <= 65535, got '%s'", v);
        ps->is_auto = true;
        ps->lo = (int)lo;
        ps->hi = (int)hi;
        return 0;
    }
    if (ddp_parse_int(v, 1, 65535, &n) < 0)
        return ddp_errf(err, -EINVAL, "expected a port from 1 to 65535, auto or auto:LO-HI, got '%s'", v);
    ps->is_auto = false;
    ps->port = (int)n;
    return 0;
}

static int parse_downsize(const char *v, struct ddp_downsize *d, struct ddp_err *err)
{
    long long n;
    if (!strcmp(v, "half")) {
        d->divisor = 2;
        d->size = 0;
        return 0;
    }
    if (ddp_parse_int(v, 1, 1 << 16, &n) < 0)
        return ddp_errf(err, -EINVAL, "expected half or a positive number of workers, got '%s'", v);
    d->divisor = 0;
    d->size = (int)n;
    return 0;
}

/* Parse v into key k's field of spec: one case per value type of the key table (DDP_T_*), each parsing into the
 * field's own C type; ddp_spec_format_key() writes them back case for case in the same order. Messages say only
 * what was expected; the caller adds where. */
int ddp_spec_parse_value(struct ddp_spec *spec, const struct ddp_key *k, const char *v, struct ddp_err *err)
{
    void *f = field(spec, k);
    int rc;

    switch (k->type) {
    case DDP_T_STR: {
        /* "..." keeps leading and trailing spaces, which inih strips from bare values. */
        size_t len = strlen(v);
        ddp_spec_free_value(spec, k);
        *(char **)f = len >= 2 && v[0] == '"' && v[len - 1] == '"' ? ddp_xstrndup(v + 1, len - 2) : ddp_xstrdup(v);
        return 0;
    }
    case DDP_T_STD:
        if ((rc = parse_std(v, err)) < 0)
            return rc;
        ddp_spec_free_value(spec, k);
        *(char **)f = ddp_xstrdup(v);
        return 0;
    case DDP_T_INT:
        return parse_int_key(k, v, f, err);
    case DDP_T_BOOL:
        return parse_bool(v, f, err);
    case DDP_T_ENUM:
    case DDP_T_TRISTATE:
        return parse_enum(k, v, f, err);
    case DDP_T_DURATION:
        return ddp_parse_duration(v, (long long *)f, err);
    case DDP_T_RANGE:
        return parse_range(v, f, err);
    case DDP_T_LIST:
        split_list(v, f);
        return 0;
    case DDP_T_ARGV:
        return parse_argv_key(v, f, err);
    case DDP_T_NPROC:
        return parse_nproc(v, f, err);
    case DDP_T_PORT:
        return parse_port(v, f, err);
    case DDP_T_MEM:
        return parse_mem(v, f, err);
    case DDP_T_DOWNSIZE:
        return parse_downsize(v, f, err);
    }
    return ddp_errf(err, -EINVAL, "internal: unknown key type");
}

static void format_str(struct ddp_buf *b, const char *v)
{
    v = v ? v : "";
    size_t len = strlen(v);
    bool quote = len && (isspace((unsigned char)v[0]) || isspace((unsigned char)v[len - 1]) ||
                         (len >= 2 && v[0] == '"' && v[len - 1] == '"'));
    ddp_buf_printf(b, quote ? "\"%s\"" : "%s", v); /* as it would be written in a file */
}

static void format_duration(struct ddp_buf *b, long long ms)
{
    if (ms == 0)
        ddp_buf_puts(b, "off");
    else if (ms % 3600000 == 0)
        ddp_buf_printf(b, "%lldh", ms / 3600000);
    else if (ms % 60000 == 0)
        ddp_buf_printf(b, "%lldm", ms / 60000);
    else if (ms % 1000 == 0)
        ddp_buf_printf(b, "%llds", ms / 1000);
    else
        ddp_buf_printf(b, "%lldms", ms);
}

/* A list joined by ','; an argv joined by ' ', each word quoted as the shell would need it. */
static void format_strv(struct ddp_buf *b, const struct ddp_strv *sv, bool argv)
{
    for (size_t j = 0; j < sv->n; j++) {
        if (j)
            ddp_buf_puts(b, argv ? " " : ",");
        if (!argv || (*sv->v[j] && !strpbrk(sv->v[j], " \t\n\v\f\r'\"\\"))) {
            ddp_buf_puts(b, sv->v[j]);
            continue;
        }
        ddp_buf_puts(b, "'");
        for (const char *p = sv->v[j]; *p; p++)
            if (*p == '\'')
                ddp_buf_puts(b, "'\\''");
            else
                ddp_buf_add(b, p, 1);
        ddp_buf_puts(b, "'");
    }
}

static void format_port(struct ddp_buf *b, const struct ddp_port_spec *ps)
{
    if (!ps->is_auto)
        ddp_buf_printf(b, "%d", ps->port);
    else if (ps->lo == 0 && ps->hi == 0)
        ddp_buf_puts(b, "auto");
    else
        ddp_buf_printf(b, "auto:%d-%d", ps->lo, ps->hi);
}

static void format_mem(struct ddp_buf *b, const struct ddp_mem_limit *m)
{
    if (m->percent) {
        ddp_buf_printf(b, "%d%%", m->percent);
    } else if (m->bytes) {
        /* the largest unit that keeps the value exact, so that it parses back the same */
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        unsigned long long v = m->bytes;
        int u = 0;
        while (u < 4 && v % 1024 == 0) {
            v /= 1024;
            u++;
        }
        ddp_buf_printf(b, "%llu%s", v, units[u]);
    } else {
        ddp_buf_puts(b, "none");
    }
}

/* The mirror of ddp_spec_parse_value(), one case per value type in the same order. */
char *ddp_spec_format_key(const struct ddp_spec *spec, const struct ddp_key *k)
{
    const void *f = cfield(spec, k);
    struct ddp_buf b = {0};
    switch (k->type) {
    case DDP_T_STR:
        format_str(&b, *(char *const *)f);
        break;
    case DDP_T_STD:
        ddp_buf_puts(&b, *(char *const *)f ? *(char *const *)f : "");
        break;
    case DDP_T_INT:
        ddp_buf_printf(&b, "%d", *(const int *)f);
        break;
    case DDP_T_BOOL:
        ddp_buf_puts(&b, *(const bool *)f ? "yes" : "no");
        break;
    case DDP_T_ENUM:
    case DDP_T_TRISTATE:
        ddp_buf_puts(&b, k->choices[*(const int *)f]);
        break;
    case DDP_T_DURATION:
        format_duration(&b, *(const long long *)f);
        break;
    case DDP_T_RANGE: {
        const struct ddp_range *r = f;
        if (r->min == r->max)
            ddp_buf_printf(&b, "%d", r->min);
        else
            ddp_buf_printf(&b, "%d:%d", r->min, r->max);
        break;
    }
    case DDP_T_LIST:
    case DDP_T_ARGV:
        format_strv(&b, f, k->type == DDP_T_ARGV);
        break;
    case DDP_T_NPROC: {
        const struct ddp_nproc *np = f;
        static const char *const kinds[] = {NULL, "gpu", "cpu", "auto"};
        if (np->kind == DDP_NPROC_INT)
            ddp_buf_printf(&b, "%d", np->n);
        else
            ddp_buf_puts(&b, kinds[np->kind]);
        break;
    }
    case DDP_T_PORT:
        format_port(&b, f);
        break;
    case DDP_T_MEM:
        format_mem(&b, f);
        break;
    case DDP_T_DOWNSIZE: {
        const struct ddp_downsize *d = f;
        if (d->divisor == 2)
            ddp_buf_puts(&b, "half");
        else
            ddp_buf_printf(&b, "%d", d->size);
        break;
    }
    }
    if (!b.data && k->type == DDP_T_LIST && k->def && strcmp(k->def, "auto") == 0)
        ddp_buf_puts(&b, "auto"); /* an empty [gpus] select means auto */
    if (!b.data)
        ddp_buf_puts(&b, "");
    return b.data;
}

/* ---- kv lists ---- */

static size_t key_hash(const char *key)
{
    size_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

/* The slot of key in l->idx: where it is, or the empty slot where it would go. l->idx_cap > 0. */
static size_t kv_slot(const struct ddp_kvlist *l, const char *key)
{
    size_t mask = l->idx_cap - 1, j = key_hash(key) & mask;
    while (l->idx[j] && strcmp(l->v[l->idx[j] - 1].key, key) != 0)
        j = (j + 1) & mask;
    return j;
}

static void kv_reindex(struct ddp_kvlist *l, size_t cap)
{
    free(l->idx);
    l->idx_cap = cap;
    l->idx = ddp_xcalloc(cap, sizeof *l->idx);
    for (size_t i = 0; i < l->n; i++)
        l->idx[kv_slot(l, l->v[i].key)] = i + 1;
}

void ddp_kvlist_set(struct ddp_kvlist *l, const char *key, const char *value, enum ddp_origin origin, const char *file,
                    int line)
{
    struct ddp_kv *kv = NULL;
    if (2 * (l->n + 1) > l->idx_cap)
        kv_reindex(l, l->idx_cap ? 2 * l->idx_cap : 16);
    size_t slot = kv_slot(l, key);
    if (l->idx[slot])
        kv = &l->v[l->idx[slot] - 1];
    if (!kv) {
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 8;
            l->v = ddp_xrealloc(l->v, l->cap * sizeof *l->v);
        }
        kv = &l->v[l->n++];
        kv->key = ddp_xstrdup(key);
        l->idx[slot] = l->n;
    } else {
        free(kv->value);
        free(kv->file);
    }
    kv->value = ddp_xstrdup(value);
    kv->origin = origin;
    kv->file = file ? ddp_xstrdup(file) : NULL;
    kv->line = line;
}

const struct ddp_kv *ddp_kvlist_get(const struct ddp_kvlist *l, const char *key)
{
    if (l->idx_cap) {
        size_t slot = kv_slot(l, key);
        return l->idx[slot] ? &l->v[l->idx[slot] - 1] : NULL;
    }
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0)
            return &l->v[i];
    return NULL;
}

void ddp_kvlist_remove(struct ddp_kvlist *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) {
            free(l->v[i].key);
            free(l->v[i].value);
            free(l->v[i].file);
            memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
            l->n--;
            if (l->idx_cap)
                kv_reindex(l, l->idx_cap);
            return;
        }
}

void ddp_kvlist_free(struct ddp_kvlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
        free(l->v[i].file);
    }
    free(l->v);
    free(l->idx);
    memset(l, 0, sizeof *l);
}
