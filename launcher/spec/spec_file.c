/* spec_file: see spec.h (ddp_spec_load_file, ddp_spec_load_string): an INI job spec or site config read with
 * inih, line by line, with the checks inih cannot make (line length, UTF-8, indented keys), each key set through
 * ddp_spec_set_key with its file and line. It does not parse values (spec_value.c). */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spec/spec.h"
#include "spec/spec_internal.h"

/* ---- files ---- */

/* The errors of one file: all of them are reported at once, in line order (ddplaunch.ini(5)). */
struct spec_err {
    int line;
    size_t seq; /* the order it was found in: errors of one line keep it */
    int code;
    char *msg; /* "FILE:LINE: what" */
};
struct spec_errs {
    struct spec_err *v;
    size_t n, cap;
};

static void errs_add(struct spec_errs *e, int line, int code, const char *msg)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 8;
        e->v = ddp_xrealloc(e->v, e->cap * sizeof *e->v);
    }
    e->v[e->n] = (struct spec_err){line, e->n, code, ddp_xstrdup(msg)};
    e->n++;
}

/* Record the error err holds (its message starts with where) for line. */
static void errs_take(struct spec_errs *e, int line, const struct ddp_err *err)
{
    errs_add(e, line, err->code < 0 ? err->code : -EINVAL, err->msg);
}

static int by_line(const void *a, const void *b)
{
    const struct spec_err *x = a, *y = b;
    return x->line != y->line ? (x->line > y->line) - (x->line < y->line) : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Every error of e in line order, one per line of err->msg (as many as fit, then how many more there are); the
 * first one's code. 0 when there is none. Frees e's contents. */
static int errs_report(struct spec_errs *e, const char *name, struct ddp_err *err)
{
    int rc = 0;
    if (e->n) {
        qsort(e->v, e->n, sizeof *e->v, by_line);
        struct ddp_buf b = {0};
        size_t shown = 0;
        for (; shown < e->n; shown++) {
            size_t len = strlen(e->v[shown].msg);
            if (shown && b.len + 1 + len > sizeof err->msg - 96)
                break;
            ddp_buf_printf(&b, "%s%s", shown ? "\n" : "", e->v[shown].msg);
        }
        if (shown < e->n)
            ddp_buf_printf(&b, "\n%s: %zu more errors after line %d", name, e->n - shown, e->v[shown - 1].line);
        rc = ddp_errf(err, e->v[0].code, "%s", b.data);
        ddp_buf_free(&b);
    }
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].msg);
    free(e->v);
    memset(e, 0, sizeof *e);
    return rc;
}

struct load_ctx {
    struct ddp_spec *spec;
    const char *name;
    enum ddp_origin origin;
    const char *text;
    size_t len;
    size_t pos;
    int line;            /* number of the line last handed to inih */
    const char *rawline; /* its start in text */
    struct ddp_err *err;
    struct spec_errs *errs; /* every error of the file, reported together */
    int nkeys;
    bool after_key; /* an indented line continues a value (inih's multi-line rule) */
    char prev_section[64];
    char prev_key[64];
    struct ddp_strv long_values; /* values of lines too long for inih, handed to it as "\001N" */
};

/* inih reads through this: one line per call, so ctx->line is the line the handler is looking at. */
/* The longest line ddp_spec_load_string accepts: a "key = value" line may pass inih's line limit (its value
 * goes around inih), up to what one environment string may hold (MAX_ARG_STRLEN). */
#define SPEC_LONG_LINE_MAX (128 * 1024)

/* A "key = value" line that starts at column 0 (not a section, comment or continuation), with the key in its
 * first 128 bytes: the only kind of line that may be longer than inih's limit. */
static const char *long_line_eq(const char *line, size_t n)
{
    if (n == 0 || isspace((unsigned char)line[0]) || line[0] == '[' || line[0] == ';' || line[0] == '#')
        return NULL;
    return memchr(line, '=', n < 128 ? n : 128);
}

/* The one comment rule of ddplaunch.ini(5): ';' or '#' starts a comment at the start of a line (inih's own
 * rule, after leading blanks) or after a space or tab anywhere in a line; with no blank before it, it is part of
 * the value ("--tag=a#b"). q points into a line or value that starts at start. */
static bool starts_comment(const char *q, const char *start)
{
    return (*q == ';' || *q == '#') && q > start && isspace((unsigned char)q[-1]);
}

/* A line inih will refuse ("just words"): into c->errs, so that every such line is reported, not only the first
 * one inih names. What inih takes: blanks, comments, [section], an indented line after a key (continuation),
 * and lines with '=' or ':'. */
static void check_syntax(struct load_ctx *c, const char *str)
{
    if (c->line == 1 && strncmp(str, "\xef\xbb\xbf", 3) == 0)
        str += 3; /* a UTF-8 byte order mark, which inih skips */
    const char *first = str + strspn(str, " \t\r\n");
    if (!*first || *first == ';' || *first == '#')
        return;
    if (*first == '[') {
        c->after_key = false;
        return;
    }
    if (first > str && c->after_key)
        return;
    if (strpbrk(first, "=:")) {
        c->after_key = true;
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s:%d: expected 'key = value', '[section]' or a comment", c->name, c->line);
    errs_add(c->errs, c->line, -EINVAL, msg);
}

/* inih reads through this: one line per call, so ctx->line is the line the handler is looking at. A line
 * too long for inih's buffer is a "key = value" line (prescan checked): inih gets "key = \001N" and the
 * handler takes value N from ctx->long_values, trimmed and inline comments removed as inih would. */
static char *reader(char *str, int num, void *stream)
{
    struct load_ctx *c = stream;
    if (c->pos >= c->len)
        return NULL;
    const char *start = c->text + c->pos;
    const char *nl = memchr(start, '\n', c->len - c->pos);
    size_t n = nl ? (size_t)(nl - start) + 1 : c->len - c->pos;
    c->line++;
    c->rawline = start;
    c->pos += n;
    if (n > (size_t)num - 1) {
        size_t content = nl ? n - 1 : n;
        const char *eq = long_line_eq(start, content);
        const char *v = eq ? eq + 1 : start + content, *end = start + content;
        while (v < end && isspace((unsigned char)*v))
            v++;
        for (const char *q = v; q < end; q++)
            if (starts_comment(q, v)) {
                end = q;
                break;
            }
        while (end > v && isspace((unsigned char)end[-1]))
            end--;
        ddp_strv_push_own(&c->long_values, ddp_xstrndup(v, (size_t)(end - v)));
        snprintf(str, (size_t)num, "%.*s= \001%zu\n", eq ? (int)(eq - start) : 0, start, c->long_values.n - 1);
        c->after_key = true;
        return str;
    }
    memcpy(str, start, n);
    str[n] = '\0';
    /* inih as Debian builds it ends a value only at ';', and not on a continuation line: the comment is cut here,
     * so the rule is one for every kind of line. A whole-line comment is left to inih. */
    char *first = str + strspn(str, " \t");
    if (*first != ';' && *first != '#')
        for (char *q = first; *q; q++)
            if (starts_comment(q, str)) {
                *q = '\0';
                break;
            }
    check_syntax(c, str);
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *c = user;
    if (value[0] == '\001') {
        long long k;
        if (ddp_parse_int(value + 1, 0, (long long)c->long_values.n - 1, &k) == 0)
            value = c->long_values.v[k];
    }
    if (*section && !ddp_spec_is_section(section))
        return 1; /* prescan reported the section */
    char where[512];
    snprintf(where, sizeof where, "%s:%d", c->name, c->line);
    bool continuation = isspace((unsigned char)c->rawline[0]) && strcmp(section, c->prev_section) == 0 &&
                        strcmp(name, c->prev_key) == 0;
    if (continuation) {
        /* inih's multi-line value: an indented line continues the previous key. Only list-like keys may
         * span lines; the pieces are joined with a space. */
        int i = ddp_spec_key_find(section, name);
        /* "  nproc_per_node = 4" under "args = ...": an indented key, which inih would silently make part of
         * the previous value. */
        const char *p = c->rawline, *end = c->text + c->len;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        size_t n = 0;
        while (p + n < end && n < 64 && (isalnum((unsigned char)p[n]) || p[n] == '_'))
            n++;
        const char *q = p + n;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if (n > 0 && n < 64 && q < end && *q == '=') {
            char word[64];
            memcpy(word, p, n);
            word[n] = '\0';
            if (ddp_spec_key_find(section, word) >= 0 || i < 0) {
                ddp_errf(c->err, -EINVAL,
                         "%s: indented key '%s' would continue the value of '%s' (write keys at the start "
                         "of the line; only continuation lines are indented)",
                         where, word, name);
                errs_take(c->errs, c->line, c->err);
                return 1;
            }
        }
        if (i < 0 || (ddp_spec_keys[i].type != DDP_T_ARGV && ddp_spec_keys[i].type != DDP_T_LIST)) {
            ddp_errf(c->err, -EINVAL,
                     "%s: indented line continues '%s', which takes one line (only command, args and lists "
                     "may continue)",
                     where, name);
            errs_take(c->errs, c->line, c->err);
            return 1;
        }
        char *prev = ddp_spec_format(c->spec, (size_t)i);
        char *joined = ddp_xasprintf("%s %s", prev, value);
        free(prev);
        int rc = ddp_spec_parse_value(c->spec, &ddp_spec_keys[i], joined, c->err);
        free(joined);
        if (rc < 0) {
            char msg[sizeof c->err->msg];
            snprintf(msg, sizeof msg, "%s", c->err->msg);
            ddp_errf(c->err, rc, "%s: %s.%s: %s", where, section, name, msg);
            errs_take(c->errs, c->line, c->err);
        }
        return 1;
    }
    snprintf(c->prev_section, sizeof c->prev_section, "%s", section);
    snprintf(c->prev_key, sizeof c->prev_key, "%s", name);
    if (!*section) {
        ddp_errf(c->err, -EINVAL, "%s: key '%s' before any [section] (expected e.g. [job] first)", where, name);
        errs_take(c->errs, c->line, c->err);
        return 1;
    }

    c->nkeys++;
    int rc = ddp_spec_set_key(c->spec, section, name, value, c->origin, c->name, c->line, where, c->err);
    if (rc < 0)
        errs_take(c->errs, c->line, c->err);
    return 1;
}

/* The error of byte ch of a line (col its column, ls the line's start): a NUL, a line too long for inih that is
 * no "key = value" line, invalid UTF-8. Adds it to e and returns the bytes to skip past ch (-1 = the rest of the
 * line is not looked at). */
static int check_byte(const char *name, int line, const char *text, size_t len, size_t i, size_t col, size_t ls,
                      struct spec_errs *e)
{
    unsigned char ch = (unsigned char)text[i];
    char msg[256];
    if (ch == '\0') {
        snprintf(msg, sizeof msg, "%s:%d: NUL byte in the file (expected text)", name, line);
        goto bad;
    }
    if (col == INI_MAX_LINE - 1) {
        const char *nl = memchr(text + ls, '\n', len - ls);
        if (!long_line_eq(text + ls, nl ? (size_t)(nl - text - ls) : len - ls)) {
            snprintf(msg, sizeof msg,
                     "%s:%d: line too long (only 'key = value' lines may be longer than %d characters; continue a "
                     "long command on indented lines)",
                     name, line, INI_MAX_LINE - 2);
            goto bad;
        }
    }
    if (col > SPEC_LONG_LINE_MAX) {
        snprintf(msg, sizeof msg, "%s:%d: line too long (the limit is %d characters)", name, line, SPEC_LONG_LINE_MAX);
        goto bad;
    }
    if (ch < 0x80)
        return 0;
    /* UTF-8 sequence */
    int extra = (ch & 0xe0) == 0xc0 ? 1 : (ch & 0xf0) == 0xe0 ? 2 : (ch & 0xf8) == 0xf0 ? 3 : -1;
    if (ch == 0xc0 || ch == 0xc1 || ch > 0xf4)
        extra = -1;
    for (int k = 1; extra > 0 && k <= extra; k++)
        if (i + (size_t)k >= len || ((unsigned char)text[i + (size_t)k] & 0xc0) != 0x80)
            extra = -1;
    if (extra >= 0)
        return extra;
    snprintf(msg, sizeof msg, "%s:%d: invalid UTF-8 byte 0x%02x in column %zu (expected UTF-8 text)", name, line, ch,
             col);
bad:
    errs_add(e, line, -EINVAL, msg);
    return -1;
}

/* An unknown section name on the line s..eol (a '[' line) into e. True when the section is not closed: what
 * follows would be read in the wrong section, so the text is not parsed. */
static bool check_section(const char *name, int line, const char *s, const char *eol, struct spec_errs *e)
{
    char msg[512];
    const char *close = memchr(s, ']', (size_t)(eol - s));
    if (!close) {
        snprintf(msg, sizeof msg, "%s:%d: expected ']' to close the section name", name, line);
        errs_add(e, line, -EINVAL, msg);
        return true;
    }
    char sec[64];
    size_t n = (size_t)(close - s - 1);
    if (n >= sizeof sec)
        n = sizeof sec - 1;
    memcpy(sec, s + 1, n);
    sec[n] = '\0';
    if (ddp_spec_is_section(sec))
        return false;
    const char *dym = ddp_did_you_mean(sec, ddp_spec_sections);
    if (dym)
        snprintf(msg, sizeof msg, "%s:%d: unknown section [%s] (did you mean [%s]?)", name, line, sec, dym);
    else
        snprintf(msg, sizeof msg,
                 "%s:%d: unknown section [%s] (expected job, gpus, numa, restart, timeout, nccl, env or slurm)", name,
                 line, sec);
    errs_add(e, line, -EINVAL, msg);
    return false;
}

/* Checks inih cannot make: line length (its fixed buffer would split a long line silently), UTF-8 (all of them
 * into e; true when there was one: the text is not handed to inih), section names (inih reports keys, not empty
 * sections; into e, and the text is parsed still, unless a section is not closed). */
static bool prescan(const char *name, const char *text, size_t len, struct spec_errs *e)
{
    int line = 1;
    size_t col = 0, line_start = 0, before = e->n;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n') {
            line++;
            col = 0;
            line_start = i + 1;
            continue;
        }
        int skip = check_byte(name, line, text, len, i, ++col, line_start, e);
        if (skip >= 0) {
            i += (size_t)skip;
            continue;
        }
        const char *nl = memchr(text + i, '\n', len - i);
        i = nl ? (size_t)(nl - text) - 1 : len;
    }
    if (e->n > before)
        return true;
    /* Section headers */
    bool unclosed = false;
    line = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        line++;
        const char *s = p;
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        if (s < eol && *s == '[')
            unclosed |= check_section(name, line, s, eol, e);
        p = eol + 1;
    }
    return unclosed;
}

int ddp_spec_load_string(struct ddp_spec *spec, const char *name, const char *text, size_t len, enum ddp_origin origin,
                         struct ddp_err *err)
{
    struct spec_errs errs = {0};
    if (prescan(name, text, len, &errs))
        return errs_report(&errs, name, err);
    struct load_ctx c = {
        .spec = spec, .name = name, .origin = origin, .text = text, .len = len, .err = err, .errs = &errs};
    int line = ini_parse_stream(reader, &c, handler, &c);
    ddp_strv_clear(&c.long_values);
    if (line < 0) {
        errs_report(&errs, name, err);
        return ddp_errf(err, -ENOMEM, "%s: the INI parser failed", name);
    }
    /* inih names only its first line that is no "key = value", "[section]" or comment; the handler never fails */
    bool known = false;
    for (size_t i = 0; i < errs.n; i++)
        known |= errs.v[i].line == line;
    if (line > 0 && !known) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s:%d: expected 'key = value', '[section]' or a comment", name, line);
        errs_add(&errs, line, -EINVAL, msg);
    }
    if (errs.n)
        return errs_report(&errs, name, err);
    if (origin == DDP_ORIGIN_SPEC && c.nkeys == 0)
        return ddp_errf(err, -EINVAL,
                        "%s: empty job spec (expected at least [job] with command, script, module "
                        "or program)",
                        name);
    return 0;
}

/* One rule for a job spec's paths (ddplaunch.ini(5)): its script, log_dir, workdir and a program given as a path
 * (with a '/') are relative to the spec file's own directory, wherever ddplaunch runs, and the workers start in
 * that directory unless workdir says otherwise; a bare program name is looked up on PATH. Only values this file
 * set are changed; a workdir of a lower layer (site config) stays. */
static void relative_to_file(struct ddp_spec *spec, const char *path)
{
    static const char *const keys[] = {"script", "log_dir", "program", "workdir", NULL};
    const char *slash = strrchr(path, '/');
    if (!slash)
        return; /* the spec is in the current directory: relative paths are right as they are */
    char cwd[PATH_MAX];
    char *raw = path[0] == '/'
                    ? ddp_xasprintf("%.*s/", (int)(slash - path), path)
                    : ddp_xasprintf("%s/%.*s", getcwd(cwd, sizeof cwd) ? cwd : ".", (int)(slash - path), path);
    char *dir = ddp_path_normalize(raw); /* absolute: the workers start there, and these paths must hold there */
    free(raw);
    for (const char *const *k = keys; *k; k++) {
        int i = ddp_spec_key_find("job", *k);
        char **v = (char **)((char *)spec + ddp_spec_keys[i].offset);
        if (!*v || !**v || **v == '/' || spec->origin[i] != DDP_ORIGIN_SPEC || !spec->set_file[i] ||
            strcmp(spec->set_file[i], path) != 0 || (strcmp(*k, "program") == 0 && !strchr(*v, '/')))
            continue;
        char *joined = ddp_xasprintf("%s/%s", dir, *v);
        free(*v);
        *v = ddp_path_normalize(joined);
        free(joined);
    }
    if (!spec->workdir)
        ddp_spec_set(spec, "job", "workdir", dir, DDP_ORIGIN_SPEC, "the job spec's directory", NULL);
    free(dir);
}

int ddp_spec_load_file(struct ddp_spec *spec, const char *path, enum ddp_origin origin, struct ddp_err *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return ddp_errf(err, -errno, "%s: cannot read: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return ddp_errf(err, -EISDIR, "%s: cannot read: %s", path, strerror(EISDIR));
    }
    struct ddp_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        ddp_buf_add(&b, chunk, n);
        if (b.len > (16u << 20)) {
            fclose(f);
            ddp_buf_free(&b);
            return ddp_errf(err, -EFBIG, "%s: larger than 16 MiB (expected a job spec)", path);
        }
    }
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (rerr) {
        ddp_buf_free(&b);
        return ddp_errf(err, -rerr, "%s: cannot read: %s", path, strerror(rerr));
    }
    int rc = ddp_spec_load_string(spec, path, b.data ? b.data : "", b.len, origin, err);
    ddp_buf_free(&b);
    if (rc == 0 && origin == DDP_ORIGIN_SPEC) {
        free(spec->spec_path);
        spec->spec_path = ddp_xstrdup(path);
        relative_to_file(spec, path);
    }
    return rc;
}
