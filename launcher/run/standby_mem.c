/* standby_mem: the warm restart's memory rule (standby.h): the standbys may take no more than half the room left
 * under each limit the job runs in: the host's MemAvailable, its cgroup's memory.max (v2) or limit_in_bytes (v1),
 * and Slurm's allocation. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "run/standby.h"

/* One number from a file (its first), or -1: "max" and v1's "no limit" (close to LLONG_MAX) are -1 too. */
static long long read_num(const char *path)
{
    FILE *f = fopen(path, "re");
    long long v = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%lld", &v) != 1 || v < 0 || v >= LLONG_MAX / 2)
        v = -1;
    fclose(f);
    return v;
}

/* The least limit - usage (bytes) from dir up to root, file names lim and use; -1 where no level has a limit. */
static long long room_up(const char *root, const char *rel, const char *lim, const char *use)
{
    char dir[4096], path[4200];
    long long best = -1;
    snprintf(dir, sizeof dir, "%s%s", root, strcmp(rel, "/") == 0 ? "" : rel);
    for (;;) {
        snprintf(path, sizeof path, "%s/%s", dir, lim);
        long long max = read_num(path);
        snprintf(path, sizeof path, "%s/%s", dir, use);
        long long cur = read_num(path);
        if (max >= 0 && cur >= 0) {
            long long room = max > cur ? max - cur : 0;
            if (best < 0 || room < best)
                best = room;
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= strlen(root) || !slash)
            break;
        *slash = '\0';
    }
    return best < 0 ? -1 : best / 1024;
}

long long ddp_standby_cgroup_room_kib(const char *proc_cgroup, const char *root)
{
    FILE *f = fopen(proc_cgroup, "re");
    char line[4096], sub[4200];
    long long best = -1;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c1 = *c2 = '\0';
        long long room = -1;
        if (strcmp(line, "0") == 0 && c1[1] == '\0') { /* "0::/path": v2 */
            room = room_up(root, c2 + 1, "memory.max", "memory.current");
        } else { /* "N:memory,other:/path": v1, below root/memory */
            char ctl[512];
            snprintf(ctl, sizeof ctl, ",%s,", c1 + 1);
            if (!strstr(ctl, ",memory,"))
                continue;
            snprintf(sub, sizeof sub, "%s/memory", root);
            room = room_up(sub, c2 + 1, "memory.limit_in_bytes", "memory.usage_in_bytes");
        }
        if (room >= 0 && (best < 0 || room < best))
            best = room;
    }
    if (f)
        fclose(f);
    return best;
}

static long long mem_available_kib(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

struct proc {
    int pid, ppid;
    long long rss_kib;
    signed char in; /* below this process: 1, not: 0, not known yet: -1 */
};

static int by_pid(const void *a, const void *b)
{
    const struct proc *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Whether ps[i] is this process or below it: up its parents (found by bsearch), remembered on the way. */
static bool below_me(struct proc *ps, size_t n, size_t i, int me)
{
    struct proc *chain[128];
    size_t depth = 0;
    struct proc *q = &ps[i];
    int in = 0;
    while (q && depth < 128) {
        if (q->in >= 0 || q->pid == me) {
            in = q->pid == me ? 1 : q->in;
            break;
        }
        chain[depth++] = q;
        struct proc key = {.pid = q->ppid};
        q = q->ppid > 1 ? bsearch(&key, ps, n, sizeof *ps, by_pid) : NULL;
    }
    while (depth)
        chain[--depth]->in = (signed char)in;
    return in == 1;
}

/* The resident memory of this process and every process below it, in KiB. */
static long long tree_kib(void)
{
    size_t n = 0, cap = 0;
    struct proc *ps = NULL;
    DIR *d = opendir("/proc");
    struct dirent *e;
    long page = sysconf(_SC_PAGESIZE) / 1024;
    while (d && (e = readdir(d))) {
        char path[300], buf[1024];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *p = strrchr(buf, ')');
        long long r = 0;
        int pp = 0;
        /* after ")": state ppid ... rss is the 22nd field after the state */
        if (!p ||
            sscanf(p + 2, "%*c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lld",
                   &pp, &r) != 2)
            continue;
        if (n == cap)
            ps = ddp_xrealloc(ps, (cap = cap ? 2 * cap : 256) * sizeof *ps);
        ps[n++] = (struct proc){.pid = atoi(e->d_name), .ppid = pp, .rss_kib = r * page, .in = -1};
    }
    if (d)
        closedir(d);
    if (n)
        qsort(ps, n, sizeof *ps, by_pid);
    long long sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += below_me(ps, n, i, (int)getpid()) ? ps[i].rss_kib : 0;
    free(ps);
    return sum;
}

void ddp_standby_mem_read(struct ddp_standby_mem *m, long long sched_kib)
{
    m->avail_kib = mem_available_kib();
    m->cgroup_room_kib = ddp_standby_cgroup_room_kib("/proc/self/cgroup", "/sys/fs/cgroup");
    m->sched_kib = sched_kib > 0 ? sched_kib : -1;
    m->tree_kib = m->sched_kib >= 0 ? tree_kib() : -1;
}

long long ddp_standby_mem_room(const struct ddp_standby_mem *m, const char **which)
{
    long long best = -1;
    *which = "MemAvailable";
    if (m->avail_kib >= 0)
        best = m->avail_kib;
    if (m->cgroup_room_kib >= 0 && (best < 0 || m->cgroup_room_kib < best)) {
        best = m->cgroup_room_kib;
        *which = "the job's cgroup memory.max leaves";
    }
    if (m->sched_kib >= 0) {
        long long room = m->sched_kib > m->tree_kib ? m->sched_kib - (m->tree_kib > 0 ? m->tree_kib : 0) : 0;
        if (best < 0 || room < best) {
            best = room;
            *which = "Slurm's allocation leaves";
        }
    }
    return best;
}
