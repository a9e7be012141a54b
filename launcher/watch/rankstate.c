/* rankstate: see rankstate.h. */
#include "watch/rankstate.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define MAX_THREADS 64

/* The text of PROC/PID[/task/TID]/NAME into b (at most 4 KiB); 0 or a negative errno. */
static int read_proc(struct ddp_buf *b, const char *proc, pid_t pid, const char *tid, const char *name)
{
    char path[512];
    if (tid)
        snprintf(path, sizeof(path), "%s/%d/task/%s/%s", proc, (int)pid, tid, name);
    else
        snprintf(path, sizeof(path), "%s/%d/%s", proc, (int)pid, name);
    b->len = 0;
    int rc = ddp_read_regular(path, 4096, b);
    return rc < 0 ? rc : b->len ? 0 : -ENODATA;
}

/* One thread's stat: its state and utime + stime. 0 or -EINVAL. */
static int parse_stat(const char *text, char *state, unsigned long long *ticks)
{
    const char *p = strrchr(text, ')'); /* the command may hold spaces and parentheses */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", state, &ut, &st) != 3)
        return -EINVAL;
    *ticks = ut + st;
    return 0;
}

static unsigned long long field_value(const char *text, const char *key)
{
    const char *p = text;
    size_t klen = strlen(key);
    while ((p = strstr(p, key)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[klen] == ':')
            return strtoull(p + klen + 1, NULL, 10);
        p += klen;
    }
    return 0;
}

static void read_threads(const char *proc, pid_t pid, struct ddp_rankstate_sample *out, struct ddp_buf *b)
{
    char dir[512], me[16];
    snprintf(dir, sizeof(dir), "%s/%d/task", proc, (int)pid);
    snprintf(me, sizeof(me), "%d", (int)pid);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && out->nthreads < MAX_THREADS) {
        char state = 0;
        unsigned long long ticks = 0;
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || read_proc(b, proc, pid, e->d_name, "stat") < 0 ||
            parse_stat(b->data, &state, &ticks) < 0)
            continue;
        out->nthreads++;
        out->nrunning += state == 'R';
        out->ndisk += state == 'D';
        out->cpu_ticks += ticks;
        if (strcmp(e->d_name, me) == 0) {
            out->main_state = state;
            out->main_ticks = ticks;
        }
    }
    if (d)
        closedir(d);
}

int ddp_rankstate_read(const char *proc, pid_t pid, long long at_ms, long clk_tck, struct ddp_rankstate_sample *out)
{
    struct ddp_buf b = {0};
    char me[16];
    memset(out, 0, sizeof(*out));
    out->at_ms = at_ms;
    out->clk_tck = clk_tck;
    if (pid <= 0)
        return -ESRCH;
    read_threads(proc, pid, out, &b);
    if (out->nthreads == 0) {
        ddp_buf_free(&b);
        return -ENOENT;
    }
    snprintf(me, sizeof(me), "%d", (int)pid);
    if (read_proc(&b, proc, pid, me, "wchan") >= 0) {
        b.data[strcspn(b.data, "\n")] = '\0';
        ddp_text_copy(out->wchan, sizeof(out->wchan), b.data);
    }
    if (read_proc(&b, proc, pid, me, "status") >= 0)
        out->vol_switches = field_value(b.data, "voluntary_ctxt_switches");
    if (read_proc(&b, proc, pid, NULL, "io") >= 0) {
        out->has_io = true;
        out->rchar = field_value(b.data, "rchar");
        out->wchar = field_value(b.data, "wchar");
        out->rbytes = field_value(b.data, "read_bytes");
        out->wbytes = field_value(b.data, "write_bytes");
    }
    ddp_buf_free(&b);
    out->ok = true;
    return 0;
}

/* "38 MB/s", "120 KB/s" */
static void rate_words(char *out, size_t size, double bps)
{
    if (bps >= 1e6)
        snprintf(out, size, "%.0f MB/s", bps / 1e6);
    else
        snprintf(out, size, "%.0f KB/s", bps / 1e3);
}

static void busy_words(struct ddp_rankstate_verdict *v)
{
    char r[32], w[32];
    rate_words(r, sizeof(r), v->read_Bps);
    rate_words(w, sizeof(w), v->write_Bps);
    snprintf(v->words, sizeof(v->words), "CPU %.0f%%%s%s%s%s%s", v->cpu_pct,
             v->write_Bps >= DDP_RANKSTATE_BUSY_IO ? ", " : "", v->write_Bps >= DDP_RANKSTATE_BUSY_IO ? w : "",
             v->write_Bps >= DDP_RANKSTATE_BUSY_IO ? " written" : "", v->read_Bps >= DDP_RANKSTATE_BUSY_IO ? ", " : "",
             v->read_Bps >= DDP_RANKSTATE_BUSY_IO ? r : "");
    if (v->read_Bps >= DDP_RANKSTATE_BUSY_IO)
        snprintf(v->words + strlen(v->words), sizeof(v->words) - strlen(v->words), " read");
}

/* The rates over the window; false when there is no usable window. */
static bool rates(const struct ddp_rankstate_sample *a, const struct ddp_rankstate_sample *b,
                  struct ddp_rankstate_verdict *v)
{
    long tck = b->clk_tck > 0 ? b->clk_tck : 100;
    v->window_ms = b->at_ms - a->at_ms;
    if (!a->ok || !b->ok || v->window_ms < DDP_RANKSTATE_MIN_WINDOW_MS)
        return false;
    double secs = (double)v->window_ms / 1000.0;
    unsigned long long cpu = b->cpu_ticks >= a->cpu_ticks ? b->cpu_ticks - a->cpu_ticks : 0;
    v->cpu_pct = 100.0 * ((double)cpu / (double)tck) / secs;
    if (a->has_io && b->has_io) {
        v->read_Bps = (double)(b->rchar >= a->rchar ? b->rchar - a->rchar : 0) / secs;
        v->write_Bps = (double)(b->wchar >= a->wchar ? b->wchar - a->wchar : 0) / secs;
    }
    v->switches_ps = (double)(b->vol_switches >= a->vol_switches ? b->vol_switches - a->vol_switches : 0) / secs;
    return true;
}

void ddp_rankstate_classify(const struct ddp_rankstate_sample *a, const struct ddp_rankstate_sample *b,
                            const struct ddp_rankstate_evidence *ev, struct ddp_rankstate_verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->main_state = b->main_state;
    ddp_text_copy(v->wchan, sizeof(v->wchan), b->wchan);
    bool usable = rates(a, b, v);
    long long secs = v->window_ms / 1000;
    if (ev->in_gpu_wait) {
        v->state = ev->culprit ? DDP_RANKSTATE_STUCK : DDP_RANKSTATE_WAITING;
        snprintf(v->words, sizeof(v->words), "%s in a GPU wait%s",
                 usable && v->cpu_pct >= DDP_RANKSTATE_BUSY_CPU ? "spins" : "waits",
                 ev->culprit ? " that does not end" : "");
        return;
    }
    if (ev->in_collective) {
        v->state = DDP_RANKSTATE_WAITING;
        snprintf(v->words, sizeof(v->words), "waits in a collective");
        return;
    }
    if (!usable) {
        snprintf(v->words, sizeof(v->words), "no reading of its process");
        return;
    }
    bool io_busy = v->read_Bps >= DDP_RANKSTATE_BUSY_IO || v->write_Bps >= DDP_RANKSTATE_BUSY_IO;
    bool io_idle = v->read_Bps < DDP_RANKSTATE_IDLE_IO && v->write_Bps < DDP_RANKSTATE_IDLE_IO;
    bool runs = v->cpu_pct >= DDP_RANKSTATE_IDLE_CPU && a->nrunning > 0 && b->nrunning > 0; /* a shared CPU */
    if (v->cpu_pct >= DDP_RANKSTATE_BUSY_CPU || io_busy || runs) {
        v->state = DDP_RANKSTATE_BUSY;
        busy_words(v);
    } else if (v->cpu_pct < DDP_RANKSTATE_IDLE_CPU && io_idle && v->switches_ps < DDP_RANKSTATE_POLL_SWITCHES) {
        v->state = DDP_RANKSTATE_STUCK;
        snprintf(v->words, sizeof(v->words), "no CPU, no I/O for %lld s%s%s%s", secs,
                 b->main_state == 'D' ? ", in state D" : "",
                 v->wchan[0] && strcmp(v->wchan, "0") ? ", sleeping in " : "",
                 v->wchan[0] && strcmp(v->wchan, "0") ? v->wchan : "");
    } else {
        snprintf(v->words, sizeof(v->words), "CPU %.0f%%, %.0f wake-ups/s: neither clearly working nor stuck",
                 v->cpu_pct, v->switches_ps);
    }
}

bool ddp_rankstate_gpu_wait_frame(const char *func, const char *file)
{
    static const char *const waits[] = {"synchronize", "item", "wait_stream", "wait_event", "_cuda_synchronize", NULL};
    (void)file;
    for (const char *const *w = waits; *w && func; w++)
        if (strcmp(func, *w) == 0)
            return true;
    return false;
}

/* Is the rank's innermost frame, or its program's, a GPU sync ("x.py:3 in synchronize")? */
bool ddp_rankstate_view_in_gpu_wait(const struct ddp_hang_view *v)
{
    char first[DDP_HANG_FRAME];
    const char *frames[2] = {v->frame, first}, *in;
    ddp_text_copy(first, sizeof(first), v->top);
    first[strcspn(first, "<")] = '\0';
    for (size_t f = 0; f < 2; f++) {
        char fn[DDP_HANG_FRAME];
        if (!(in = strstr(frames[f], " in ")))
            continue;
        ddp_text_copy(fn, sizeof(fn), in + 4);
        fn[strcspn(fn, " ")] = '\0';
        if (ddp_rankstate_gpu_wait_frame(fn, frames[f]))
            return true;
    }
    return false;
}

const char *ddp_rankstate_name(enum ddp_rankstate s)
{
    static const char *const names[] = {"unknown", "stuck", "busy", "waiting"};
    return (unsigned)s < 4 ? names[s] : "unknown";
}
