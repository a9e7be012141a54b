/* spec_file: see spec.h (ddp_spec_load_file, ddp_spec_load_string): an INI job spec or site config read with
 * inih, line by line, with the checks inih cannot make (line length, UTF-8, indented keys), each key set through
 * ddp_spec_set_key with its file and line. It does not parse values (spec_value.c). */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "spec/spec.h"
#include "spec/spec_internal.h"

/* ---- files ---- */

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
    int rc;
    int nkeys;
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
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *c = user;
    if (c->rc < 0)
        return 1;
    if (value[0] == '\001') {
        long long k;
        if (ddp_parse_int(value + 1, 0, (long long)c->long_values.n - 1, &k) == 0)
            value = c->long_values.v[k];
    }
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
                c->rc = ddp_errf(c->err, -EINVAL,
                                 "%s: indented key '%s' would continue the value of '%s' (write keys at the start "
                                 "of the line; only continuation lines are indented)",
                                 where, word, name);
                return 0;
            }
        }
        if (i < 0 || (ddp_spec_keys[i].type != DDP_T_ARGV && ddp_spec_keys[i].type != DDP_T_LIST)) {
            c->rc = ddp_errf(c->err, -EINVAL,
                             "%s: indented line continues '%s', which takes one line (only command, args and lists "
                             "may continue)",
                             where, name);
            return 0;
        }
        char *prev = ddp_spec_format(c->spec, (size_t)i);
        char *joined = ddp_xasprintf("%s %s", prev, value);
        free(prev);
        int rc = ddp_spec_parse_value(c->spec, &ddp_spec_keys[i], joined, c->err);
        free(joined);
        if (rc < 0) {
            char msg[sizeof c->err->msg];
            snprintf(msg, sizeof msg, "%s", c->err->msg);
            c->rc = ddp_errf(c->err, rc, "%s: %s.%s: %s", where, section, name, msg);
            return 0;
        }
        return 1;
    }
    snprintf(c->prev_section, sizeof c->prev_section, "%s", section);
    snprintf(c->prev_key, sizeof c->prev_key, "%s", name);
    if (!*section) {
        c->rc = ddp_errf(c->err, -EINVAL, "%s: key '%s' before any [section] (expected e.g. [job] first)", where, name);
        return 0;
    }
    c->nkeys++;
    int rc = ddp_spec_set_key(c->spec, section, name, value, c->origin, c->name, c->line, where, c->err);
    if (rc < 0) {
        c->rc = rc;
        return 0;
    }
    return 1;
}

/* Checks inih cannot make: line length (its fixed buffer would split a long line silently), UTF-8,
 * section names (inih reports keys, not empty sections). */
static int prescan(const char *name, const char *text, size_t len, struct ddp_err *err)
{
    int line = 1;
    size_t col = 0, line_start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            line++;
            col = 0;
            line_start = i + 1;
            continue;
        }
        if (ch == '\0')
            return ddp_errf(err, -EINVAL, "%s:%d: NUL byte in the file (expected text)", name, line);
        if (++col == INI_MAX_LINE - 1) {
            const char *ls = text + line_start, *nl = memchr(ls, '\n', len - line_start);
            if (!long_line_eq(ls, nl ? (size_t)(nl - ls) : len - line_start))
                return ddp_errf(err, -EINVAL,
                                "%s:%d: line too long (only 'key = value' lines may be longer than "
                                "%d characters; continue a long command on indented lines)",
                                name, line, INI_MAX_LINE - 2);
        }
        if (col > SPEC_LONG_LINE_MAX)
            return ddp_errf(err, -EINVAL, "%s:%d: line too long (the limit is %d characters)", name, line,
                            SPEC_LONG_LINE_MAX);
        if (ch < 0x80)
            continue;
        /* UTF-8 sequence */
        int extra = (ch & 0xe0) == 0xc0 ? 1 : (ch & 0xf0) == 0xe0 ? 2 : (ch & 0xf8) == 0xf0 ? 3 : -1;
        if (ch == 0xc0 || ch == 0xc1 || ch > 0xf4)
            extra = -1;
        for (int k = 1; extra > 0 && k <= extra; k++)
            if (i + (size_t)k >= len || ((unsigned char)text[i + (size_t)k] & 0xc0) != 0x80)
                extra = -1;
        if (extra < 0)
            return ddp_errf(err, -EINVAL, "%s:%d: invalid UTF-8 byte 0x%02x in column %zu (expected UTF-8 text)", name,
                            line, ch, col);
        i += (size_t)extra;
    }
    /* Section headers */
    line = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        line++;
        const char *s = p;
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        if (s < eol && *s == '[') {
            const char *close = memchr(s, ']', (size_t)(eol - s));
            if (!close)
                return ddp_errf(err, -EINVAL, "%s:%d: expected ']' to close the section name", name, line);
            char sec[64];
            size_t n = (size_t)(close - s - 1);
            if (n >= sizeof sec)
                n = sizeof sec - 1;
            memcpy(sec, s + 1, n);
            sec[n] = '\0';
            if (!ddp_spec_is_section(sec)) {
                const char *dym = ddp_did_you_mean(sec, ddp_spec_sections);
                return dym ? ddp_errf(err, -EINVAL, "%s:%d: unknown section [%s] (did you mean [%s]?)", name, line, sec,
                                      dym)
                           : ddp_errf(err, -EINVAL,
                                      "%s:%d: unknown section [%s] (expected job, gpus, numa, restart, "
                                      "timeout, nccl, env or slurm)",
                                      name, line, sec);
            }
        }
        p = eol + 1;
    }
    return 0;
}

int ddp_spec_load_string(struct ddp_spec *spec, const char *name, const char *text, size_t len, enum ddp_origin origin,
                         struct ddp_err *err)
{
    int rc = prescan(name, text, len, err);
    if (rc < 0)
        return rc;
    struct load_ctx c = {.spec = spec, .name = name, .origin = origin, .text = text, .len = len, .err = err};
    int line = ini_parse_stream(reader, &c, handler, &c);
    ddp_strv_clear(&c.long_values);
    if (c.rc < 0)
        return c.rc;
    if (line > 0)
        return ddp_errf(err, -EINVAL, "%s:%d: expected 'key = value', '[section]' or a comment", name, line);
    if (line < 0)
        return ddp_errf(err, -ENOMEM, "%s: the INI parser failed", name);
    if (origin == DDP_ORIGIN_SPEC && c.nkeys == 0)
        return ddp_errf(err, -EINVAL,
                        "%s: empty job spec (expected at least [job] with command, script, module "
                        "or program)",
                        name);
    return 0;
}

/* A job spec's script, log_dir and a program given as a path (with a '/') are relative to the spec file's own
 * directory, wherever ddplaunch runs (ddplaunch.ini(5)); a bare program name is looked up on PATH. Only values this
 * file set are changed. */
static void relative_to_file(struct ddp_spec *spec, const char *path)
{
    static const char *const keys[] = {"script", "log_dir", "program", NULL};
    const char *slash = strrchr(path, '/');
    if (!slash)
        return; /* the spec is in the current directory: relative paths are right as they are */
    for (const char *const *k = keys; *k; k++) {
        int i = ddp_spec_key_find("job", *k);
        char **v = (char **)((char *)spec + ddp_spec_keys[i].offset);
        if (!*v || !**v || **v == '/' || spec->origin[i] != DDP_ORIGIN_SPEC || !spec->set_file[i] ||
            strcmp(spec->set_file[i], path) != 0 || (strcmp(*k, "program") == 0 && !strchr(*v, '/')))
            continue;
        char *abs = ddp_xasprintf("%.*s/%s", (int)(slash - path), slash == path ? "/" : path, *v);
        free(*v);
        *v = abs;
    }
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
