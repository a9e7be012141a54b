/* hang: see hang.h. */
#include "hang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- stalls */

void ddp_hang_check(const struct ddp_hang_limits *lim, const struct ddp_hang_rank *r, size_t n, long long now,
                    bool any_output, long long last_output_ms, bool paused, bool *stalled,
                    struct ddp_hang_check *out)
{
    memset(out, 0, sizeof(*out));
    memset(stalled, 0, n * sizeof(*stalled));
    if (lim->init_ms > 0) {
        for (size_t i = 0; i < n; i++) {
            if (!r[i].running || r[i].alive || now - r[i].start_ms < lim->init_ms)
                continue;
            if (out->nstalled++ == 0)
                out->first = i;
            stalled[i] = true;
        }
        if (out->nstalled) {
            out->kind = DDP_HANG_INIT;
            out->blame_gpus = true;
            return;
        }
    }
    if (lim->stall_ms <= 0)
        return;
    if (lim->heartbeat == DDP_HEARTBEAT_FILE) {
        for (size_t i = 0; i < n; i++) {
            if (!r[i].running || !r[i].has_heartbeat)
                continue;
            if (lim->init_ms > 0 && !r[i].alive)
                continue; /* init covers the start */
            if (now - r[i].last_progress_ms < lim->stall_ms)
                continue;
            if (out->nstalled++ == 0)
                out->first = i;
            stalled[i] = true;
        }
        if (out->nstalled) {
            out->kind = DDP_HANG_STALL;
            out->blame_gpus = out->nstalled < n;
        }
    } else if (lim->heartbeat == DDP_HEARTBEAT_OUTPUT) {
        if (paused || (lim->init_ms > 0 && !any_output))
            return;
        if (now - last_output_ms >= lim->stall_ms)
            out->kind = DDP_HANG_SILENT;
    }
}

/* ---------------------------------------------------------------- stacks */

struct frame {
    const char *file, *func;
    size_t file_len, func_len;
    long line;
};

/* One thread (or traceback) block, frames innermost first. */
struct block {
    struct frame *f;
    size_t n, cap;
    bool current;
};

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool contains(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return true;
    return false;
}

/* '  File "x.py", line 3 in f' (faulthandler) or '  File "x.py", line 3, in f' (traceback). */
static bool parse_frame(const char *l, size_t n, struct frame *f)
{
    size_t i = 0;
    while (i < n && l[i] == ' ')
        i++;
    if (i == 0 || n - i < 7 || memcmp(l + i, "File \"", 6) != 0)
        return false;
    i += 6;
    const char *file = l + i;
    while (i < n && l[i] != '"')
        i++;
    if (i >= n)
        return false;
    f->file = file;
    f->file_len = (size_t)(l + i - file);
    i++;
    if (n - i < 7 || memcmp(l + i, ", line ", 7) != 0)
        return false;
    i += 7;
    f->line = 0;
    while (i < n && l[i] >= '0' && l[i] <= '9' && f->line < 100000000)
        f->line = f->line * 10 + (l[i++] - '0');
    if (i < n && l[i] == ',')
        i++;
    if (n - i < 4 || memcmp(l + i, " in ", 4) != 0)
        return false;
    i += 4;
    f->func = l + i;
    f->func_len = n - i;
    while (f->func_len && (f->func[f->func_len - 1] == ' ' || f->func[f->func_len - 1] == '\r'))
        f->func_len--;
    return f->func_len > 0;
}

static void block_push(struct block *b, const struct frame *f, bool innermost_first)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 16;
        b->f = realloc(b->f, b->cap * sizeof(*b->f));
        if (!b->f)
            abort();
    }
    if (innermost_first) {
        b->f[b->n++] = *f;
    } else { /* traceback: outermost first, so each new frame is the innermost so far */
        memmove(b->f + 1, b->f, b->n * sizeof(*b->f));
        b->f[0] = *f;
        b->n++;
    }
}

static void copy_field(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* The collective a block is inside, or "". */
static void block_op(const struct block *b, char op[DDP_HANG_OP])
{
    op[0] = '\0';
    for (size_t i = 0; i < b->n; i++)
        if (ends_with(b->f[i].file, b->f[i].file_len, "distributed_c10d.py")) {
            copy_field(op, DDP_HANG_OP, b->f[i].func, b->f[i].func_len);
            return;
        }
    for (size_t i = 0; i < b->n; i++)
        if (ends_with(b->f[i].file, b->f[i].file_len, "torch/nn/parallel/distributed.py")) {
            snprintf(op, DDP_HANG_OP, "ddp:%.*s", (int)b->f[i].func_len, b->f[i].func);
            return;
        }
    for (size_t i = 0; i < b->n; i++)
        if (contains(b->f[i].file, b->f[i].file_len, "torch/autograd/") && b->f[i].func_len == 8 &&
            memcmp(b->f[i].func, "backward", 8) == 0) {
            strcpy(op, "backward");
            return;
        }
}

static bool library_file(const struct frame *f)
{
    static const char *const lib[] = {"/torch/", "/lib/python3", "site-packages", "dist-packages", "<frozen"};
    for (size_t i = 0; i < sizeof(lib) / sizeof(lib[0]); i++)
        if (contains(f->file, f->file_len, lib[i]))
            return true;
    return false;
}

static void block_frame(const struct block *b, char out[DDP_HANG_FRAME])
{
    const struct frame *f = &b->f[0];
    for (size_t i = 0; i < b->n; i++)
        if (!library_file(&b->f[i])) {
            f = &b->f[i];
            break;
        }
    const char *base = f->file;
    for (size_t i = 0; i < f->file_len; i++)
        if (f->file[i] == '/')
            base = f->file + i + 1;
    snprintf(out, DDP_HANG_FRAME, "%.*s:%ld in %.*s", (int)(f->file_len - (size_t)(base - f->file)), base, f->line,
             (int)f->func_len, f->func);
}

void ddp_hang_parse_stack(const char *text, size_t len, struct ddp_hang_view *out)
{
    struct block cur = {0}, best = {0};
    int best_rank = 0; /* 3: inside a collective, 2: current thread, 1: any */
    char best_op[DDP_HANG_OP] = "";
    bool in_block = false, innermost_first = true;
    const char *p = text, *end = text + len;
    memset(out, 0, sizeof(*out));
    for (;;) {
        const char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        struct frame f;
        bool header_fh = (n > 7 && memcmp(p, "Thread ", 7) == 0 && contains(p, n, "most recent call first")) ||
                         (n > 15 && memcmp(p, "Current thread ", 15) == 0);
        bool header_tb = n >= 9 && memcmp(p, "Traceback", 9) == 0 && contains(p, n, "most recent call last");
        bool is_frame = in_block && parse_frame(p, n, &f);
        bool ends = p >= end || header_fh || header_tb || (in_block && !is_frame && n > 0 && p[0] != ' ');
        /* a traceback is whole only when its exception line follows; one cut by a fault handler dump (the rank
         * got SIGABRT while printing it) or by the end of the text says nothing reliable */
        bool fatal = n >= 18 && memcmp(p, "Fatal Python error", 18) == 0;
        bool cut = !innermost_first && (p >= end || header_fh || header_tb || fatal);
        if (ends && in_block && cur.n > 0 && !cut) {
            char op[DDP_HANG_OP];
            block_op(&cur, op);
            int rank = op[0] ? 3 : cur.current ? 2 : 1;
            if (rank >= best_rank) { /* later blocks win ties: the main thread is listed last */
                free(best.f);
                best = cur;
                best_rank = rank;
                memcpy(best_op, op, sizeof(op));
                cur = (struct block){0};
            }
        }
        if (ends) {
            cur.n = 0;
            in_block = false;
        }
        if (header_fh || header_tb) {
            in_block = true;
            innermost_first = header_fh;
            cur.current = n > 15 && memcmp(p, "Current thread ", 15) == 0;
        } else if (is_frame) {
            block_push(&cur, &f, innermost_first);
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    if (best.n > 0) {
        out->nframes = (int)best.n;
        memcpy(out->op, best_op, sizeof(out->op));
        block_frame(&best, out->frame);
    }
    free(best.f);
    free(cur.f);
}

/* ---------------------------------------------------------------- culprits */

const char *ddp_hang_confidence_name(enum ddp_hang_confidence c)
{
    switch (c) {
    case DDP_HANG_HIGH: return "high";
    case DDP_HANG_MEDIUM: return "medium";
    case DDP_HANG_LOW: return "low";
    case DDP_HANG_UNKNOWN: break;
    }
    return "unknown";
}

static bool has_stack(const struct ddp_hang_input *x)
{
    return x->view && x->view->nframes > 0;
}

/* "ranks 0, 1 and 3" into b. */
static void list_ranks(char *b, size_t cap, const struct ddp_hang_input *in, size_t n, const bool *sel)
{
    size_t k = 0, total = 0, len = 0;
    for (size_t i = 0; i < n; i++)
        total += sel[i];
    b[0] = '\0';
    len += (size_t)snprintf(b + len, cap - len, "rank%s ", total == 1 ? "" : "s");
    for (size_t i = 0; i < n && len < cap; i++) {
        if (!sel[i])
            continue;
        k++;
        len += (size_t)snprintf(b + len, cap - len, "%s%d", k == 1 ? "" : k == total ? " and " : ", ", in[i].rank);
    }
}

void ddp_hang_decide(const struct ddp_hang_input *in, size_t n, bool *culprit, struct ddp_hang_verdict *v)
{
    size_t best = (size_t)-1, best_count = 0, nstack = 0;
    bool best_reported = false;
    memset(v, 0, sizeof(*v));
    memset(culprit, 0, n * sizeof(*culprit));
    for (size_t i = 0; i < n; i++)
        nstack += has_stack(&in[i]);
    /* the collective most ranks are in */
    for (size_t i = 0; i < n; i++) {
        if (!has_stack(&in[i]) || !in[i].view->op[0])
            continue;
        size_t count = 0;
        bool reported = false;
        for (size_t j = 0; j < n; j++)
            if (has_stack(&in[j]) && strcmp(in[j].view->op, in[i].view->op) == 0) {
                count++;
                reported |= in[j].reported_timeout;
            }
        if (count > best_count || (count == best_count && reported && !best_reported)) {
            best = i;
            best_count = count;
            best_reported = reported;
        }
    }
    if (best != (size_t)-1) {
        const char *op = in[best].view->op;
        char who[200], wait[200];
        bool *in_op = calloc(n ? n : 1, sizeof(*in_op));
        if (!in_op)
            abort();
        copy_field(v->op, sizeof(v->op), op, strlen(op));
        for (size_t i = 0; i < n; i++) {
            in_op[i] = has_stack(&in[i]) && strcmp(in[i].view->op, op) == 0;
            culprit[i] = has_stack(&in[i]) && !in_op[i];
            v->nculprits += culprit[i];
        }
        list_ranks(wait, sizeof(wait), in, n, in_op);
        if (v->nculprits) {
            size_t first = 0;
            while (!culprit[first])
                first++;
            list_ranks(who, sizeof(who), in, n, culprit);
            v->confidence = nstack == n ? DDP_HANG_HIGH : DDP_HANG_MEDIUM;
            if (v->nculprits == 1)
                snprintf(v->why, sizeof(v->why), "%s wait%s in %s; rank %d is %s%s (at %.200s)", wait,
                         best_count == 1 ? "s" : "", op, in[first].rank,
                         in[first].view->op[0] ? "in another collective: " : "not in it",
                         in[first].view->op, in[first].view->frame);
            else
                snprintf(v->why, sizeof(v->why), "%s wait%s in %s; %s are not in it", wait, best_count == 1 ? "s" : "",
                         op, who);
        } else {
            for (size_t i = 0; i < n; i++) {
                culprit[i] = !has_stack(&in[i]);
                v->nculprits += culprit[i];
            }
            if (v->nculprits) {
                list_ranks(who, sizeof(who), in, n, culprit);
                v->confidence = DDP_HANG_LOW;
                snprintf(v->why, sizeof(v->why), "%s wait%s in %s; no stack from %s", wait,
                         best_count == 1 ? "s" : "", op, who);
            }
        }
        free(in_op);
    } else {
        /* no collective seen: the running rank without progress longest, if it clearly lags */
        size_t oldest = (size_t)-1;
        long long next = 0;
        for (size_t i = 0; i < n; i++)
            if (in[i].running && (oldest == (size_t)-1 || in[i].last_progress_ms < in[oldest].last_progress_ms))
                oldest = i;
        if (oldest != (size_t)-1) {
            bool others = false;
            for (size_t i = 0; i < n; i++)
                if (i != oldest && in[i].running && (!others || in[i].last_progress_ms < next)) {
                    next = in[i].last_progress_ms;
                    others = true;
                }
            if (others && next - in[oldest].last_progress_ms >= 1000) {
                culprit[oldest] = true;
                v->nculprits = 1;
                v->confidence = DDP_HANG_LOW;
                snprintf(v->why, sizeof(v->why),
                         "no rank is inside a collective; rank %d made no progress for %lld ms longer than the others",
                         in[oldest].rank, next - in[oldest].last_progress_ms);
            }
        }
    }
    if (v->nculprits == n || v->nculprits == 0) {
        bool everyone = v->nculprits > 0;
        memset(culprit, 0, n * sizeof(*culprit));
        v->nculprits = 0;
        v->confidence = DDP_HANG_UNKNOWN;
        if (everyone)
            snprintf(v->why, sizeof(v->why), "the evidence blames every rank: no single culprit");
        else if (!v->why[0])
            snprintf(v->why, sizeof(v->why), "%s", nstack ? "every rank with a stack is in the same place"
                                                          : "no stack and no progress difference to go by");
    }
}
