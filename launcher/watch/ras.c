/* ras: see ras.h. */
#include "watch/ras.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static const char *const ops[DDP_RAS_OPS] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

const char *ddp_ras_op_name(int op)
{
    return op >= 0 && op < DDP_RAS_OPS ? ops[op] : "?";
}

void ddp_ras_free(struct ddp_ras *ras)
{
    for (size_t i = 0; ras && i < ras->ncomms; i++)
        free(ras->c[i].r);
    if (ras)
        free(ras->c);
}

static long long jnum(const json_t *o, const char *key, long long dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static void rank_from(struct ddp_ras_rank *r, const json_t *j, bool missing)
{
    const json_t *st = json_object_get(j, "status"), *cc = json_object_get(j, "collective_counts");
    memset(r, 0, sizeof(*r));
    r->rank = json_is_integer(j) ? (int)json_integer_value(j) : (int)jnum(j, "rank", -1);
    r->pid = (long)jnum(j, "pid", -1);
    ddp_text_copy(r->host, sizeof(r->host), json_string_value(json_object_get(j, "host")));
    r->missing = missing;
    r->async_error = (int)jnum(st, "async_error", 0);
    r->error = r->async_error != 0 || json_is_true(json_object_get(st, "abort_flag"));
    for (int op = 0; op < DDP_RAS_OPS; op++)
        r->count[op] = missing ? -1 : jnum(cc, ops[op], -1);
}

static int from_json(const json_t *doc, struct ddp_ras *out)
{
    const json_t *comms = json_object_get(doc, "communicators"), *c;
    size_t i;
    if (!json_is_object(doc) || !json_is_array(comms))
        return -EINVAL;
    out->json = true;
    ddp_text_copy(out->version, sizeof(out->version), json_string_value(json_object_get(doc, "nccl_version")));
    out->ncomms = json_array_size(comms);
    out->c = ddp_xcalloc(out->ncomms ? out->ncomms : 1, sizeof(*out->c));
    json_array_foreach(comms, i, c)
    {
        struct ddp_ras_comm *m = &out->c[i];
        const json_t *ranks = json_object_get(c, "ranks"), *missing = json_object_get(c, "missing_ranks"), *r;
        size_t j;
        ddp_text_copy(m->hash, sizeof(m->hash), json_string_value(json_object_get(c, "hash")));
        m->size = (int)jnum(c, "size", -1);
        m->missing_count = (int)jnum(c, "missing_ranks_count", 0);
        m->r = ddp_xcalloc(json_array_size(ranks) + json_array_size(missing) + 1, sizeof(*m->r));
        json_array_foreach(ranks, j, r) rank_from(&m->r[m->nranks++], r, false);
        json_array_foreach(missing, j, r) rank_from(&m->r[m->nranks++], r, true);
    }
    return 0;
}

/* The text form: "NCCL version X" and the communicators' table, one row per group of alike communicators:
 * "    0         1         1         1         1         1   RUNNING      OK". */
static int from_text(const char *text, size_t len, struct ddp_ras *out)
{
    char *s = ddp_xstrndup(text, len), *save = NULL;
    bool table = false;
    size_t cap = 0;
    for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int g, comms, nodes, per_node, per_comm, in_group, used = 0;
        char status[16], errors[16];
        if (sscanf(line, "NCCL version %31s", out->version) == 1)
            continue;
        if (strncmp(line, "Group ", 6) == 0 && strstr(line, "Status")) {
            table = true;
            continue;
        }
        if (!table)
            continue;
        if (sscanf(line, " %d %d %d %d %d %d %15s %15s%n", &g, &comms, &nodes, &per_node, &per_comm, &in_group, status,
                   errors, &used) != 8) {
            if (strncmp(line, "Errors", 6) == 0)
                break;
            continue;
        }
        if (out->ncomms == cap) {
            cap = cap ? 2 * cap : 4;
            out->c = ddp_xrealloc(out->c, cap * sizeof(*out->c));
        }
        struct ddp_ras_comm *m = &out->c[out->ncomms++];
        memset(m, 0, sizeof(*m));
        snprintf(m->hash, sizeof(m->hash), "group %d", g);
        m->size = per_comm;
        ddp_text_copy(m->status, sizeof(m->status), status);
        ddp_text_copy(m->errors, sizeof(m->errors), errors);
    }
    free(s);
    return table ? 0 : -ENOENT;
}

int ddp_ras_parse(const char *text, size_t len, struct ddp_ras *out)
{
    memset(out, 0, sizeof(*out));
    const char *brace = memchr(text, '{', len);
    if (brace) {
        json_t *doc = json_loadb(brace, len - (size_t)(brace - text), JSON_DISABLE_EOF_CHECK, NULL);
        if (!doc)
            return -EINVAL;
        int rc = from_json(doc, out);
        json_decref(doc);
        if (rc < 0)
            ddp_ras_free(out);
        return rc;
    }
    int rc = from_text(text, len, out);
    if (rc < 0)
        ddp_ras_free(out);
    return rc;
}

/* The job's rank of RAS's rank r (by its pid), else RAS's own number; *idx the job's index or -1. */
static int job_rank(const struct ddp_ras_rank *r, const pid_t *pid, const int *rank, size_t n, long *idx)
{
    *idx = -1;
    for (size_t i = 0; i < n && r->pid > 0; i++)
        if (pid[i] == (pid_t)r->pid) {
            *idx = (long)i;
            return rank[i];
        }
    return r->rank;
}

size_t ddp_ras_judge(const struct ddp_ras *ras, const pid_t *pid, const int *rank, size_t n, bool *culprit, char *why,
                     size_t cap)
{
    struct ddp_buf b = {0};
    size_t named = 0;
    for (size_t c = 0; c < ras->ncomms; c++) {
        const struct ddp_ras_comm *m = &ras->c[c];
        struct ddp_buf cb = {0}; /* what is said of this communicator */
        long long top[DDP_RAS_OPS];
        size_t top_at[DDP_RAS_OPS];
        for (int op = 0; op < DDP_RAS_OPS; op++) {
            top[op] = -1;
            top_at[op] = 0;
            for (size_t i = 0; i < m->nranks; i++)
                if (m->r[i].count[op] > top[op]) {
                    top[op] = m->r[i].count[op];
                    top_at[op] = i;
                }
        }
        for (size_t i = 0; i < m->nranks; i++) {
            const struct ddp_ras_rank *r = &m->r[i];
            long idx, idx2;
            int jr = job_rank(r, pid, rank, n, &idx);
            int behind = -1;
            for (int op = 0; op < DDP_RAS_OPS && behind < 0; op++)
                if (r->count[op] >= 0 && r->count[op] < top[op])
                    behind = op;
            if (behind < 0 && !r->missing && !r->error)
                continue;
            ddp_buf_printf(&cb, "%srank %d (pid %ld%s%s)", cb.len ? "; " : "", jr, r->pid,
                           r->missing && r->host[0] ? ", " : "", r->missing ? r->host : "");
            if (r->missing)
                ddp_buf_puts(&cb, " is missing");
            else if (behind >= 0)
                ddp_buf_printf(&cb, " is behind: %s %lld where rank %d has %lld", ops[behind], r->count[behind],
                               job_rank(&m->r[top_at[behind]], pid, rank, n, &idx2), top[behind]);
            else
                ddp_buf_printf(&cb, " reports an error (async_error %d)", r->async_error);
            if (idx < 0 || !culprit[idx])
                named++;
            if (idx >= 0)
                culprit[idx] = true;
        }
        if (!ras->json && m->errors[0] && strcmp(m->errors, "OK") != 0)
            ddp_buf_printf(&cb, "%s%s, %s", cb.len ? "; " : "", m->status, m->errors);
        if (cb.len)
            ddp_buf_printf(&b, "%s%s%s (%d ranks): %s", b.len ? "; " : "NCCL RAS: ", ras->json ? "communicator " : "",
                           m->hash, m->size, cb.data);
        ddp_buf_free(&cb);
    }
    ddp_text_copy(why, cap, b.data ? b.data : "");
    ddp_buf_free(&b);
    return named;
}
