/* cgroup: see cgroup.h. */
#include "host/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "host/klock.h"

static char *read_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct ddp_buf b = {0};
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        ddp_buf_add(&b, chunk, (size_t)n);
    close(fd);
    ddp_buf_add(&b, "", 1);
    return b.data;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? -errno : 0;
    close(fd);
    return e;
}

int ddp_cgroup_parse_self(const char *proc_cgroup, const char *mountinfo, char **dir_out)
{
    char line[4096], rel[4096] = "", mnt[4096] = "";
    bool have_rel = false;
    for (const char *p = proc_cgroup; p && *p;) {
        p = ddp_line_next(p, line, sizeof line);
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(rel, sizeof rel, "%s", line + 3);
            have_rel = true;
        }
    }
    /* mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPEROPTS" */
    for (const char *p = mountinfo; p && *p && !mnt[0];) {
        p = ddp_line_next(p, line, sizeof line);
        char *dash = strstr(line, " - ");
        char root[1024], point[1024], fstype[64];
        if (!dash || sscanf(dash + 3, "%63s", fstype) != 1 || strcmp(fstype, "cgroup2") != 0)
            continue;
        if (sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) == 2 && strcmp(root, "/") == 0)
            snprintf(mnt, sizeof mnt, "%s", point);
    }
    if (!have_rel || !mnt[0] || rel[0] != '/' || strstr(rel, "/..") || strstr(rel, " (deleted)"))
        return -ENOENT;
    *dir_out = strcmp(rel, "/") == 0 ? ddp_xstrdup(mnt) : ddp_xasprintf("%s%s", mnt, rel);
    return 0;
}

int ddp_cgroup_base(char **dir_out)
{
    char *cg = read_text("/proc/self/cgroup"), *mi = read_text("/proc/self/mountinfo");
    char *dir = NULL;
    int rc = cg && mi ? ddp_cgroup_parse_self(cg, mi, &dir) : -ENOENT;
    free(cg);
    free(mi);
    if (rc < 0)
        return rc;
    char *procs = ddp_xasprintf("%s/cgroup.procs", dir), *sub = ddp_xasprintf("%s/cgroup.subtree_control", dir);
    char *ctl = read_text(sub);
    /* we stay in this cgroup: children may only take processes while it enables no controllers below */
    if (access(dir, W_OK) != 0 || access(procs, W_OK) != 0)
        rc = -EACCES;
    else if (!ctl || ctl[strspn(ctl, " \n")] != '\0')
        rc = -EBUSY;
    free(ctl);
    free(procs);
    free(sub);
    if (rc < 0) {
        free(dir);
        return rc;
    }
    *dir_out = dir;
    return 0;
}

/* The boot time in seconds since the epoch (/proc/stat's btime), read once: it does not change. -1 unknown. */
static double boot_time(void)
{
    static double btime = -2;
    if (btime == -2) {
        char *bt = read_text("/proc/stat");
        const char *b = bt ? strstr(bt, "\nbtime ") : NULL;
        btime = b ? atof(b + 7) : -1;
        free(bt);
    }
    return btime;
}

/* Seconds since the epoch at which pid started (its /proc stat start time and the boot time), -1 when it does not
 * exist. */
static double started_at(long long pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%lld/stat", pid);
    char *st = read_text(p);
    const char *rp = st ? strrchr(st, ')') : NULL;
    unsigned long long ticks = 0;
    double at = -1, boot = boot_time();
    /* after the comm: state is field 3, starttime field 22 */
    if (rp && boot >= 0 &&
        sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &ticks) == 1)
        at = boot + (double)ticks / (double)sysconf(_SC_CLK_TCK);
    free(st);
    return at;
}

/* Whether the launcher that made the attempt cgroup at path (named for pid) may still be alive: pid exists and
 * started before the cgroup was made (1 s for the boot time's rounding). Not its name: a launcher run under
 * valgrind, or installed under another name, is alive too; a pid taken again by a later process is not. */
static bool maybe_live_launcher(long long pid, const struct stat *cg)
{
    double at = started_at(pid);
    return at >= 0 && at <= (double)cg->st_ctime + 1.0;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The pids that hold a launcher's ps lock ("ddplaunch.../job-PID", jobs.c, any lock namespace) in this network
 * namespace, sorted: live launchers, from one read of /proc/net/unix rather than two /proc reads per cgroup (a
 * thousand agents on one host). Only ever a reason to keep a cgroup (a launcher that took the pid of a killed one
 * keeps its leftovers until it ends); a pid not here is asked of /proc. */
static long long *ps_lock_pids(size_t *n)
{
    struct ddp_strv names = {0};
    long long *pids = NULL;
    *n = 0;
    if (ddp_klock_list("ddplaunch", &names) == 0 && names.n)
        pids = ddp_xcalloc(names.n, sizeof *pids);
    for (size_t i = 0; pids && i < names.n; i++) {
        const char *slash = strrchr(names.v[i], '/');
        long long pid;
        char rest[2];
        if (slash && sscanf(slash, "/job-%lld%1s", &pid, rest) == 1 && pid > 0)
            pids[(*n)++] = pid;
    }
    ddp_strv_clear(&names);
    if (*n)
        qsort(pids, *n, sizeof *pids, cmp_ll);
    return pids;
}

/* The launcher pid that a cgroup of ours is named for ("ddplaunch-PID-attempt-N", "ddplaunch-PID-standby"),
 * or 0 for any other name. */
static long long named_pid(const char *name)
{
    long long pid, attempt;
    char rest[8];
    if (sscanf(name, "ddplaunch-%lld-attempt-%lld%7s", &pid, &attempt, rest) == 2 && pid > 0)
        return pid;
    if (sscanf(name, "ddplaunch-%lld-standb%7s", &pid, rest) == 2 && strcmp(rest, "y") == 0 && pid > 0)
        return pid;
    return 0;
}

/* Whether some attempt cgroup in base is named for a pid that no process has: only then is there anything to
 * sweep, and only then are the launchers' locks read (/proc/net/unix, whole, by each of a thousand agents). */
static bool some_launcher_gone(const char *base)
{
    DIR *d = opendir(base);
    struct dirent *e;
    bool gone = false;
    while (d && !gone && (e = readdir(d)) != NULL) {
        long long pid = named_pid(e->d_name);
        if (pid > 0 && pid != (long long)getpid())
            gone = kill((pid_t)pid, 0) < 0 && errno == ESRCH;
    }
    if (d)
        closedir(d);
    return gone;
}

int ddp_cgroup_sweep(const char *base)
{
    if (!some_launcher_gone(base))
        return 0;
    DIR *d = opendir(base);
    struct dirent *e;
    int removed = 0;
    size_t nlocked = 0;
    long long *locked = d ? ps_lock_pids(&nlocked) : NULL;
    while (d && (e = readdir(d)) != NULL) {
        long long pid = named_pid(e->d_name);
        if (pid <= 0 || pid == (long long)getpid() || (nlocked && bsearch(&pid, locked, nlocked, sizeof pid, cmp_ll)))
            continue;
        char *path = ddp_xasprintf("%s/%s", base, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && !maybe_live_launcher(pid, &st)) {
            ddp_cgroup_kill_remove(path);
            removed += access(path, F_OK) != 0;
        }
        free(path);
    }
    if (d)
        closedir(d);
    free(locked);
    return removed;
}

int ddp_cgroup_create(const char *base, const char *name, char **path_out)
{
    char *path = ddp_xasprintf("%s/%s", base, name);
    rmdir(path); /* a stale one of a killed launcher whose pid came back: removable only when empty */
    if (mkdir(path, 0755) < 0) {
        int e = -errno;
        free(path);
        return e;
    }
    *path_out = path;
    return 0;
}

int ddp_cgroup_join(const char *path)
{
    char *procs = ddp_xasprintf("%s/cgroup.procs", path);
    int rc = write_text(procs, "0");
    free(procs);
    return rc;
}

long ddp_cgroup_fork_into(int cgfd)
{
#if defined(SYS_clone3) && defined(CLONE_INTO_CGROUP)
    struct clone_args a;
    memset(&a, 0, sizeof a);
    a.flags = CLONE_INTO_CGROUP;
    a.exit_signal = SIGCHLD;
    a.cgroup = (uint64_t)cgfd;
    long pid = syscall(SYS_clone3, &a, sizeof a);
    return pid < 0 ? -errno : pid;
#else
    (void)cgfd;
    return -ENOSYS;
#endif
}

int ddp_cgroup_move(const char *path, int pid)
{
    char *procs = ddp_xasprintf("%s/cgroup.procs", path), num[24];
    snprintf(num, sizeof num, "%d", pid);
    int rc = write_text(procs, num);
    free(procs);
    return rc;
}

static long long field(const char *text, const char *key)
{
    char line[256];
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        p = ddp_line_next(p, line, sizeof line);
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
            return atoll(line + kl + 1);
    }
    return -1;
}

int ddp_cgroup_stats(const char *path, long long *cpu_usec, long long *mem_peak)
{
    char *p = ddp_xasprintf("%s/cpu.stat", path);
    char *t = read_text(p);
    free(p);
    if (!t)
        return -EIO;
    *cpu_usec = field(t, "usage_usec");
    free(t);
    p = ddp_xasprintf("%s/memory.peak", path);
    t = read_text(p);
    free(p);
    *mem_peak = t && t[0] >= '0' && t[0] <= '9' ? atoll(t) : -1;
    free(t);
    return *cpu_usec >= 0 ? 0 : -EIO;
}

/* pids in path/cgroup.procs */
static int count_procs(const char *path, bool kill_them)
{
    char *p = ddp_xasprintf("%s/cgroup.procs", path);
    char *t = read_text(p);
    free(p);
    int n = 0;
    char line[64];
    for (const char *q = t; q && *q;) {
        q = ddp_line_next(q, line, sizeof line);
        long long pid;
        if (ddp_parse_int(line, 1, 1LL << 31, &pid) == 0) {
            n++;
            if (kill_them)
                kill((pid_t)pid, SIGKILL);
        }
    }
    free(t);
    return n;
}

int ddp_cgroup_kill_remove(const char *path)
{
    int left = count_procs(path, false);
    if (left > 0) {
        char *k = ddp_xasprintf("%s/cgroup.kill", path);
        if (write_text(k, "1") < 0)
            count_procs(path, true);
        free(k);
        for (int i = 0; i < 200 && count_procs(path, false) > 0; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    rmdir(path);
    return left;
}
