/* hang: see hang.h. */
#include "watch/hang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- stalls */

bool ddp_hang_state_stuck(char state)
{
    return state == 'T' || state == 't' || state == 'Z';
}

/* A stall was found: when some but not all running ranks are stopped or zombies, or all that still run are (the
 * others ended), blame those. */
static void blame_stuck(const struct ddp_hang_rank *r, size_t n, bool *stalled, struct ddp_hang_check *out)
{
    size_t nrunning = 0, nstuck = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        nrunning += r[i].running;
        if (r[i].running && ddp_hang_state_stuck(r[i].state) && nstuck++ == 0)
            first = i;
    }
    if (nstuck == 0 || (nstuck == nrunning && nrunning == n)) /* every rank stopped: nobody is singled out */
        return;
    for (size_t i = 0; i < n; i++)
        stalled[i] = r[i].running && ddp_hang_state_stuck(r[i].state);
    out->alone = nstuck == nrunning;
    out->kind = DDP_HANG_STALL;
    out->first = first;
    out->nstalled = nstuck;
    out->blame_gpus = true;
    out->stuck = true;
}

void ddp_hang_check(const struct ddp_hang_limits *lim, const struct ddp_hang_rank *r, size_t n, long long now,
                    bool any_output, long long last_output_ms, bool paused, bool *stalled, struct ddp_hang_check *out)
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
    enum ddp_heartbeat measure = lim->heartbeat;
    if (measure == DDP_HEARTBEAT_FILE) {
        out->on_output = true;
        for (size_t i = 0; i < n; i++)
            if (r[i].has_heartbeat && !r[i].untouched)
                out->on_output = false;
        if (out->on_output)
            measure = DDP_HEARTBEAT_OUTPUT;
    }
    if (measure == DDP_HEARTBEAT_FILE) {
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
    } else if (measure == DDP_HEARTBEAT_OUTPUT) {
        if (paused || (lim->init_ms > 0 && !any_output))
            return;
        if (now - last_output_ms >= lim->stall_ms)
            out->kind = DDP_HANG_SILENT;
    }
    if (out->kind != DDP_HANG_NONE)
        blame_stuck(r, n, stalled, out);
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

/* "train.py:42 in load_batch" (the file's base name) into out[0..cap). */
static void frame_text(const struct frame *f, char *out, size_t cap)
{
    const char *base = f->file;
    for (size_t i = 0; i < f->file_len; i++)
        if (f->file[i] == '/')
            base = f->file + i + 1;
    snprintf(out, cap, "%.*s:%ld in %.*s", (int)(f->file_len - (size_t)(base - f->file)), base, f->line,
             (int)f->func_len, f->func);
    ddp_printable(out); /* the program's own text, maybe cut mid-character */
}

static void block_frame(const struct block *b, char out[DDP_HANG_FRAME])
{
    const struct frame *f = &b->f[0];
    for (size_t i = 0; i < b->n; i++)
        if (!library_file(&b->f[i])) {
            f = &b->f[i];
            break;
        }
    frame_text(f, out, DDP_HANG_FRAME);
}

/* The block's innermost DDP_HANG_TOP frames, " < " between them. */
static void block_top(const struct block *b, char out[DDP_HANG_TOP * DDP_HANG_FRAME])
{
    size_t len = 0, cap = DDP_HANG_TOP * DDP_HANG_FRAME;
    out[0] = '\0';
    for (size_t i = 0; i < b->n && i < DDP_HANG_TOP; i++) {
        char one[DDP_HANG_FRAME];
        frame_text(&b->f[i], one, sizeof(one));
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " < " : "", one);
        if (len >= cap)
            break;
    }
}

/* torch 2.x prefixes each line of an uncaught exception's traceback with "[rank3]: ": its length, or 0. */
static size_t rank_prefix(const char *l, size_t n)
{
    size_t i = 6;
    if (n < 8 || memcmp(l, "[rank", 5) != 0 || l[5] < '0' || l[5] > '9')
        return 0;
    while (i < n && l[i] >= '0' && l[i] <= '9')
        i++;
    if (n - i < 2 || l[i] != ']' || l[i + 1] != ':')
        return 0;
    i += 2;
    return i < n && l[i] == ' ' ? i + 1 : i;
}

/* The idle thread of ddplaunch's sitecustomize that takes the sampling signal (sample.c): never the answer. */
static bool sampler_thread(const struct block *b)
{
    size_t n = strlen(DDP_HANG_SAMPLER_FUNC);
    for (size_t i = 0; i < b->n; i++)
        if (b->f[i].func_len == n && memcmp(b->f[i].func, DDP_HANG_SAMPLER_FUNC, n) == 0)
            return true;
    return false;
}

/* FNV-1a over the block's frames. */
static unsigned long long block_hash(const struct block *b)
{
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < b->n; i++) {
        const struct frame *f = &b->f[i];
        char line[24];
        int k = snprintf(line, sizeof(line), ":%ld:", f->line);
        const char *parts[] = {f->file, line, f->func};
        size_t lens[] = {f->file_len, (size_t)k, f->func_len};
        for (size_t p = 0; p < 3; p++)
            for (size_t j = 0; j < lens[p]; j++)
                h = (h ^ (unsigned char)parts[p][j]) * 1099511628211ULL;
    }
    return h;
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
        p += rank_prefix(p, (size_t)(le - p));
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
        if (ends && in_block && cur.n > 0 && !cut && !sampler_thread(&cur)) {
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
        block_top(&best, out->top);
        out->where = block_hash(&best);
    }
    free(best.f);
    free(cur.f);
}

/* ---------------------------------------------------------------- timeout lines */

/* The position of needle in s[0..n), or NULL. */
static const char *find(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

/* The decimal number right after needle, or -1. */
static long long number_after(const char *s, size_t n, const char *needle)
{
    const char *p = find(s, n, needle), *end = s + n;
    long long v = 0;
    if (!p)
        return -1;
    p += strlen(needle);
    while (p < end && *p == ' ')
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return -1;
    while (p < end && *p >= '0' && *p <= '9' && v < 1000000000000LL)
        v = v * 10 + (*p++ - '0');
    return v;
}

void ddp_hang_op_name(const char *optype, size_t len, char out[DDP_HANG_OP])
{
    static const struct {
        const char *prefix, *name;
    } names[] = {
        {"allreduce", "all_reduce"},
        {"allgather", "all_gather"},
        {"reducescatter", "reduce_scatter"},
        {"alltoall", "all_to_all"},
    };
    char key[DDP_HANG_OP];
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < sizeof(key); i++)
        if (optype[i] != '_')
            key[k++] = (char)(optype[i] >= 'A' && optype[i] <= 'Z' ? optype[i] - 'A' + 'a' : optype[i]);
    key[k] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(key, names[i].prefix, strlen(names[i].prefix)) == 0) {
            snprintf(out, DDP_HANG_OP, "%s", names[i].name);
            return;
        }
    snprintf(out, DDP_HANG_OP, "%s", key);
}

bool ddp_hang_parse_timeout(const char *line, size_t len, struct ddp_hang_timeout *t)
{
    long long seq = -1;
    if (find(line, len, "Watchdog caught collective operation timeout")) {
        const char *op = find(line, len, "OpType="), *end = line + len;
        seq = number_after(line, len, "SeqNum=");
        if (op && !t->op[0]) {
            const char *e = op += 7;
            while (e < end && *e != ',' && *e != ')' && *e != ' ')
                e++;
            if (e > op)
                ddp_hang_op_name(op, (size_t)(e - op), t->op);
        }
    } else if (find(line, len, "failure detected by watchdog at work sequence id")) {
        seq = number_after(line, len, "work sequence id:");
    } else if (find(line, len, "Timeout at NCCL work")) {
        seq = number_after(line, len, "Timeout at NCCL work:");
    } else if (find(line, len, "monitoredBarrier")) {
        if (!find(line, len, "failed to pass monitoredBarrier") && !find(line, len, "timed out in monitoredBarrier"))
            return false;
        if (!t->op[0])
            snprintf(t->op, sizeof(t->op), "monitored_barrier");
    } else if (!(find(line, len, "Timed out waiting ") && find(line, len, " operation to complete"))) {
        return false;
    }
    t->waiting = true;
    if (t->seq < 0)
        t->seq = seq;
    return true;
}

/* ---------------------------------------------------------------- culprits */

const char *ddp_hang_confidence_name(enum ddp_hang_confidence c)
{
    switch (c) {
    case DDP_HANG_HIGH:
        return "high";
    case DDP_HANG_MEDIUM:
        return "medium";
    case DDP_HANG_LOW:
        return "low";
    case DDP_HANG_UNKNOWN:
        break;
    }
    return "unknown";
}

static bool has_stack(const struct ddp_hang_input *x)
{
    return x->view && x->view->nframes > 0;
}

const char *ddp_hang_input_op(const struct ddp_hang_input *x)
{
    if (x->timeout && x->timeout->op[0])
        return x->timeout->op;
    return has_stack(x) ? x->view->op : "";
}

enum place { UNKNOWN_PLACE, IN_COLLECTIVE, OUTSIDE };

static enum place place_of(const struct ddp_hang_input *x)
{
    if ((x->timeout && x->timeout->waiting) || ddp_hang_input_op(x)[0])
        return IN_COLLECTIVE;
    return has_stack(x) ? OUTSIDE : UNKNOWN_PLACE;
}

static long long seq_of(const struct ddp_hang_input *x)
{
    return x->timeout ? x->timeout->seq : -1;
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

/* "rank 0 in all_reduce #3 (at t.py:33 in <module>), rank 1 in broadcast #3" for the selected ranks. */
static void list_places(char *b, size_t cap, const struct ddp_hang_input *in, size_t n, const bool *sel)
{
    size_t len = 0;
    b[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++) {
        if (!sel[i])
            continue;
        const char *op = ddp_hang_input_op(&in[i]);
        len += (size_t)snprintf(b + len, cap - len, "%srank %d in %s", len ? ", " : "", in[i].rank,
                                op[0] ? op : "a collective");
        if (len < cap && seq_of(&in[i]) >= 0)
            len += (size_t)snprintf(b + len, cap - len, " #%lld", seq_of(&in[i]));
        if (len < cap && has_stack(&in[i]))
            len += (size_t)snprintf(b + len, cap - len, " (at %.120s)", in[i].view->frame);
    }
}

/* The collective most ranks in a collective are in: its index, and whether no other has as many. */
static size_t majority_op(const struct ddp_hang_input *in, size_t n, const bool *sel, bool *strict, size_t *nops)
{
    size_t best = (size_t)-1, best_count = 0;
    *strict = false;
    *nops = 0;
    for (size_t i = 0; i < n; i++) {
        const char *op = ddp_hang_input_op(&in[i]);
        if (!sel[i] || !op[0])
            continue;
        size_t count = 0;
        bool first = true;
        for (size_t j = 0; j < n; j++)
            if (sel[j] && strcmp(ddp_hang_input_op(&in[j]), op) == 0) {
                count++;
                first &= j >= i;
            }
        *nops += first;
        if (count > best_count) {
            best = i;
            best_count = count;
            *strict = true;
        } else if (count == best_count && strcmp(ddp_hang_input_op(&in[best]), op) != 0) {
            *strict = false;
        }
    }
    return best;
}

/* What the rules of ddp_hang_decide share: the ranks, the verdict being written, and what was counted. */
struct decide {
    const struct ddp_hang_input *in;
    size_t n;
    bool *culprit;
    bool *in_op; /* in a collective (the minority rule narrows it to the majority collective) */
    struct ddp_hang_verdict *v;
    size_t nin, nout;
    long long lowest_seq;          /* rule 2: the lowest sequence number of a rank in a collective */
    enum ddp_hang_confidence sure; /* HIGH when every rank's place is known */
    const char *op;                /* the majority collective, or "a collective" */
    char wait[600];                /* the ranks in a collective, as text */
    char who[200];                 /* the culprits, as text */
};

/* Mark every rank for which pick() holds a culprit; returns the first one, (size_t)-1 if none. */
static size_t mark(struct decide *d, bool (*pick)(const struct decide *, size_t))
{
    size_t first = (size_t)-1;
    for (size_t i = 0; i < d->n; i++)
        if (pick(d, i)) {
            d->culprit[i] = true;
            d->v->nculprits++;
            first = first == (size_t)-1 ? i : first;
        }
    list_ranks(d->who, sizeof(d->who), d->in, d->n, d->culprit);
    return first;
}

static bool is_outside(const struct decide *d, size_t i)
{
    return place_of(&d->in[i]) == OUTSIDE;
}

/* Rule 1: some ranks wait in a collective, others are outside any: the outside ones. */
static void blame_outside(struct decide *d)
{
    const struct ddp_hang_input *in = d->in;
    struct ddp_hang_verdict *v = d->v;
    size_t first = mark(d, is_outside);
    v->confidence = d->sure;
    if (v->nculprits == 1)
        snprintf(v->why, sizeof(v->why), "%s wait%s in %s; rank %d is not in a collective (at %.200s)", d->wait,
                 d->nin == 1 ? "s" : "", d->op, in[first].rank, in[first].view->frame);
    else
        snprintf(v->why, sizeof(v->why), "%s wait%s in %s; %s are not in a collective", d->wait, d->nin == 1 ? "s" : "",
                 d->op, d->who);
}

static bool lags(const struct decide *d, size_t i)
{
    return d->in_op[i] && seq_of(&d->in[i]) == d->lowest_seq;
}

/* Rule 2: the ranks in collectives are at different sequence numbers: those at the lowest one. */
static void blame_lagging(struct decide *d, long long lo)
{
    d->lowest_seq = lo;
    mark(d, lags);
    d->v->confidence = d->sure;
    list_places(d->wait, sizeof(d->wait), d->in, d->n, d->in_op);
    snprintf(d->v->why, sizeof(d->v->why), "%s lag%s: %s (collective sequence numbers)", d->who,
             d->v->nculprits == 1 ? "s" : "", d->wait);
}

static bool in_other_op(const struct decide *d, size_t i)
{
    return place_of(&d->in[i]) == IN_COLLECTIVE && ddp_hang_input_op(&d->in[i])[0] &&
           strcmp(ddp_hang_input_op(&d->in[i]), d->v->op) != 0;
}

/* Rule 3a: different collectives with a strict majority: the ranks in the other collectives. */
static void blame_minority(struct decide *d)
{
    const struct ddp_hang_input *in = d->in;
    struct ddp_hang_verdict *v = d->v;
    size_t first = mark(d, in_other_op);
    for (size_t i = 0; i < d->n; i++)
        d->in_op[i] = d->in_op[i] && strcmp(ddp_hang_input_op(&in[i]), v->op) == 0;
    list_ranks(d->wait, sizeof(d->wait), in, d->n, d->in_op);
    v->confidence = d->sure;
    if (v->nculprits == 1)
        snprintf(v->why, sizeof(v->why), "%s wait in %s; rank %d is in another collective: %s%s%.200s", d->wait, d->op,
                 in[first].rank, ddp_hang_input_op(&in[first]), has_stack(&in[first]) ? " at " : "",
                 has_stack(&in[first]) ? in[first].view->frame : "");
    else
        snprintf(v->why, sizeof(v->why), "%s wait in %s; %s are in other collectives", d->wait, d->op, d->who);
}

/* Rule 3b: different collectives, no majority (2 ranks, one each): name the mismatch, blame nobody. */
static void name_mismatch(struct decide *d)
{
    struct ddp_hang_verdict *v = d->v;
    v->mismatch = true;
    v->confidence = DDP_HANG_LOW;
    v->op[0] = '\0';
    list_places(d->wait, sizeof(d->wait), d->in, d->n, d->in_op);
    snprintf(v->why, sizeof(v->why),
             "collective mismatch: %s; no majority says which is wrong, so no culprit is named (the rank "
             "whose program took the other branch is; compare the stacks)",
             d->wait);
}

static bool unknown_place(const struct decide *d, size_t i)
{
    return place_of(&d->in[i]) == UNKNOWN_PLACE;
}

/* Rule 4: all known ranks wait in the same collective: the ranks nothing is known of are suspects. */
static void blame_unknown(struct decide *d)
{
    struct ddp_hang_verdict *v = d->v;
    mark(d, unknown_place);
    if (v->nculprits) {
        v->confidence = DDP_HANG_LOW;
        snprintf(v->why, sizeof(v->why), "%s wait%s in %s; nothing known of %s", d->wait, d->nin == 1 ? "s" : "", d->op,
                 d->who);
    } else {
        snprintf(v->why, sizeof(v->why), "every rank waits in %s: no rank stands out", d->op);
    }
}

/* Rules 1-4, when some rank is in a collective. */
static void decide_collectives(struct decide *d)
{
    bool strict;
    size_t nops, maj = majority_op(d->in, d->n, d->in_op, &strict, &nops);
    long long lo = -1, hi = -1;
    for (size_t i = 0; i < d->n; i++) {
        long long q = seq_of(&d->in[i]);
        if (!d->in_op[i] || q < 0)
            continue;
        lo = lo < 0 || q < lo ? q : lo;
        hi = q > hi ? q : hi;
    }
    if (maj != (size_t)-1)
        snprintf(d->v->op, sizeof(d->v->op), "%s", ddp_hang_input_op(&d->in[maj]));
    d->op = d->v->op[0] ? d->v->op : "a collective";
    list_ranks(d->wait, sizeof(d->wait), d->in, d->n, d->in_op);
    if (d->nout > 0)
        blame_outside(d);
    else if (lo >= 0 && lo < hi)
        blame_lagging(d, lo);
    else if (nops > 1 && strict)
        blame_minority(d);
    else if (nops > 1)
        name_mismatch(d);
    else
        blame_unknown(d);
}

/* Rule 5, no collective seen: the running rank without progress longest, when it lags the next by >= 1 s. */
static void blame_no_progress(struct decide *d)
{
    const struct ddp_hang_input *in = d->in;
    size_t oldest = (size_t)-1;
    long long next = 0;
    for (size_t i = 0; i < d->n; i++)
        if (in[i].running && (oldest == (size_t)-1 || in[i].last_progress_ms < in[oldest].last_progress_ms))
            oldest = i;
    if (oldest == (size_t)-1)
        return;
    bool others = false;
    for (size_t i = 0; i < d->n; i++)
        if (i != oldest && in[i].running && (!others || in[i].last_progress_ms < next)) {
            next = in[i].last_progress_ms;
            others = true;
        }
    if (others && next - in[oldest].last_progress_ms >= 1000) {
        d->culprit[oldest] = true;
        d->v->nculprits = 1;
        d->v->confidence = DDP_HANG_LOW;
        snprintf(d->v->why, sizeof(d->v->why),
                 "no rank is inside a collective; rank %d made no progress for %lld ms longer than the others",
                 in[oldest].rank, next - in[oldest].last_progress_ms);
    }
}

/* Rule 0: ranks stopped (SIGSTOP, a debugger) or zombies while others run, or when the others ended, cannot be
 * waited out. */
static bool blame_stopped(const struct ddp_hang_input *in, size_t n, bool *culprit, struct ddp_hang_verdict *v)
{
    size_t nrunning = 0, nstuck = 0, len = 0;
    for (size_t i = 0; i < n; i++) {
        nrunning += in[i].running;
        nstuck += in[i].running && ddp_hang_state_stuck(in[i].state);
    }
    if (nstuck == 0 || (nstuck == nrunning && nrunning == n)) /* every rank stopped: nobody is singled out */
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!in[i].running || !ddp_hang_state_stuck(in[i].state))
            continue;
        culprit[i] = true;
        int m = snprintf(v->why + len, sizeof(v->why) - len, "%srank %d is %s", v->nculprits ? ", " : "", in[i].rank,
                         in[i].state == 'Z' ? "a zombie" : "stopped (SIGSTOP or a debugger)");
        if (m > 0 && (size_t)m < sizeof(v->why) - len)
            len += (size_t)m;
        v->nculprits++;
    }
    if (len < sizeof(v->why))
        snprintf(v->why + len, sizeof(v->why) - len, "%s",
                 nstuck == nrunning ? " and the others ended" : " while the others wait");
    v->confidence = DDP_HANG_HIGH;
    return true;
}

static void decide(const struct ddp_hang_input *in, size_t n, bool *culprit, struct ddp_hang_verdict *v)
{
    struct decide d = {.in = in, .n = n, .culprit = culprit, .v = v};
    size_t nunknown = 0;
    memset(v, 0, sizeof(*v));
    memset(culprit, 0, n * sizeof(*culprit));
    if (blame_stopped(in, n, culprit, v))
        return;
    d.in_op = calloc(n ? n : 1, sizeof(*d.in_op));
    if (!d.in_op)
        abort();
    for (size_t i = 0; i < n; i++) {
        enum place p = place_of(&in[i]);
        d.in_op[i] = p == IN_COLLECTIVE;
        d.nin += p == IN_COLLECTIVE;
        d.nout += p == OUTSIDE;
        nunknown += p == UNKNOWN_PLACE;
    }
    d.sure = nunknown == 0 ? DDP_HANG_HIGH : DDP_HANG_MEDIUM;
    if (d.nin > 0)
        decide_collectives(&d);
    else
        blame_no_progress(&d);
    free(d.in_op);
    if (v->mismatch)
        return;
    if (v->nculprits == n || v->nculprits == 0) {
        bool everyone = v->nculprits > 0;
        memset(culprit, 0, n * sizeof(*culprit));
        v->nculprits = 0;
        v->confidence = DDP_HANG_UNKNOWN;
        if (everyone)
            snprintf(v->why, sizeof(v->why), "the evidence blames every rank: no single culprit");
        else if (!v->why[0])
            snprintf(v->why, sizeof(v->why), "%s",
                     d.nout ? "no rank is inside a collective and none lags in progress"
                            : "no stack, no timeout report and no progress difference to go by");
    }
}

void ddp_hang_decide(const struct ddp_hang_input *in, size_t n, bool *culprit, struct ddp_hang_verdict *v)
{
    decide(in, n, culprit, v);
    ddp_printable(v->why); /* frames and ops cut to fit ("%.200s") may end mid-character */
}
