/* sample: see sample.h. */
#include "watch/sample.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/rundir.h"
/* The Python the workers run first: generated from watch/sitecustomize.py (Makefile): sitecustomize_py[], its _len */
#include <sitecustomize_py.h>

int ddp_sample_signal(void)
{
    return SIGRTMIN + DDP_SAMPLE_SIGNAL_OFFSET;
}

const char *ddp_sample_sitecustomize(void)
{
    return (const char *)sitecustomize_py;
}

int ddp_sample_install(const char *dir, char **pydir_out, struct ddp_err *err)
{
    char *pydir = ddp_xasprintf("%s/" DDP_SAMPLE_PYDIR, dir);
    int dfd = -1, rc = ddp_rundir_make_private(pydir, &dfd, err);
    if (rc < 0) {
        free(pydir);
        return rc;
    }
    int fd = openat(dfd, "sitecustomize.py", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, sitecustomize_py, sitecustomize_py_len) != (ssize_t)sitecustomize_py_len) {
        rc = ddp_errf(err, -errno, "%s/sitecustomize.py: %s", pydir, strerror(errno));
        free(pydir);
        pydir = NULL;
    }
    if (fd >= 0)
        close(fd);
    close(dfd);
    *pydir_out = pydir;
    return rc < 0 ? rc : 0;
}

/* "name=" then digits at *i (at most max), moved past them. */
static bool field(const char *text, size_t end, size_t *i, const char *name, unsigned long long max,
                  unsigned long long *out)
{
    size_t k = strlen(name), d0;
    unsigned long long v = 0;
    if (end - *i < k || memcmp(text + *i, name, k) != 0)
        return false;
    *i += k;
    d0 = *i;
    while (*i < end && text[*i] >= '0' && text[*i] <= '9' && v <= max)
        v = v * 10 + (unsigned long long)(text[(*i)++] - '0');
    *out = v;
    return *i > d0 && v <= max;
}

bool ddp_sample_parse_header(const char *text, size_t len, struct ddp_sample_head *h)
{
    const char *nl = memchr(text, '\n', len);
    unsigned long long pid, sig, start, tid, err;
    size_t i = 0;
    if (!nl)
        return false;
    size_t end = (size_t)(nl - text);
    if (!field(text, end, &i, "ddplaunch-stacks pid=", 1u << 30, &pid) ||
        !field(text, end, &i, " signal=", 1u << 16, &sig) || !field(text, end, &i, " start=", 1ull << 62, &start) ||
        !field(text, end, &i, " tid=", 1u << 30, &tid) || !field(text, end, &i, " err=", 999, &err) || i != end ||
        pid <= 1 || tid <= 1)
        return false;
    *h = (struct ddp_sample_head){(pid_t)pid, (pid_t)tid, (int)sig, (int)err, start};
    return true;
}

void ddp_sample_file_init(struct ddp_sample_file *f, const char *path)
{
    memset(f, 0, sizeof(*f));
    f->path = ddp_xstrdup(path);
    f->fd = -1;
}

void ddp_sample_file_free(struct ddp_sample_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    memset(f, 0, sizeof(*f));
    f->fd = -1;
}

/* A /proc file (path), at most max bytes: 0 with *text (caller frees), -errno, or -ESRCH when empty. */
static int read_proc(const char *path, size_t max, char **text)
{
    int rc = ddp_rundir_read_small(AT_FDCWD, path, max, text);
    if (rc == 0 && !**text) {
        free(*text);
        rc = -ESRCH;
    }
    return rc;
}

/* Its state, process group, parent and start time (/proc/PID/stat). 0 or -errno. */
static int proc_stat(pid_t pid, char *state, pid_t *pgid, unsigned long long *start)
{
    char path[64], *buf;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int rc = read_proc(path, 1023, &buf);
    if (rc < 0)
        return rc;
    char *p = strrchr(buf, ')');
    int pg = 0;
    /* after the name: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime
     * cstime priority nice num_threads itrealvalue starttime */
    if (!p || sscanf(p + 1, " %c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", state,
                     &pg, start) != 3)
        rc = -ESRCH;
    free(buf);
    if (rc < 0)
        return rc;
    *pgid = pg;
    return 0;
}

/* The masks of one thread's /proc status: SigPnd, ShdPnd, SigBlk. 0 or -errno. */
static int task_masks(const char *path, unsigned long long *pnd, unsigned long long *shd, unsigned long long *blk)
{
    char *buf;
    int rc = read_proc(path, 4095, &buf);
    if (rc < 0)
        return rc;
    const char *a = strstr(buf, "\nSigPnd:"), *b = strstr(buf, "\nShdPnd:"), *c = strstr(buf, "\nSigBlk:");
    if (a && b && c) {
        *pnd = strtoull(a + 8, NULL, 16);
        *shd = strtoull(b + 8, NULL, 16);
        *blk = strtoull(c + 8, NULL, 16);
    } else
        rc = -EIO;
    free(buf);
    return rc;
}

/* Every thread of PID but the sampler (SAMPLER: in sigwait, the kernel shows the signal unblocked) blocks SIG (a
 * thread that does not would die of it), checked for the first 64 threads (and the main one, first); *pending:
 * the signal is still queued. 0, or -ENOENT (gone), -EINVAL (a thread does not block it; *tid_out is that one). */
static int check_masks(pid_t pid, pid_t sampler, int sig, bool *pending, pid_t *tid_out)
{
    char path[96];
    unsigned long long bit = 1ull << (sig - 1), pnd, shd, blk;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    int rc = task_masks(path, &pnd, &shd, &blk);
    if (rc < 0)
        return -ENOENT;
    *pending = (pnd | shd) & bit;
    *tid_out = pid;
    if (!(blk & bit) && pid != sampler)
        return -EINVAL;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -ENOENT;
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d)) && seen < 64) {
        long tid = strtol(e->d_name, NULL, 10);
        if (tid <= 0 || tid == pid || tid == sampler)
            continue;
        seen++;
        snprintf(path, sizeof(path), "/proc/%d/task/%ld/status", (int)pid, tid);
        if (task_masks(path, &pnd, &shd, &blk) == 0 && !(blk & bit)) {
            *tid_out = (pid_t)tid;
            rc = -EINVAL;
            break;
        }
    }
    closedir(d);
    return rc;
}

/* Stop sampling this registration; the caller says why once. */
static int stop(struct ddp_sample_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int stop(struct ddp_sample_file *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof(f->why), fmt, ap);
    va_end(ap);
    return -ECANCELED;
}

/* (Re)open the file by its path when the one held is no longer the one there (replaced, or not opened yet). */
static int open_file(struct ddp_sample_file *f)
{
    struct stat a, b;
    if (lstat(f->path, &a) != 0)
        return errno == ENOENT ? -EAGAIN : -errno;
    if (!S_ISREG(a.st_mode))
        return -EAGAIN;
    if (f->fd >= 0 && fstat(f->fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return 0;
    if (f->fd >= 0)
        close(f->fd);
    f->fd = open(f->path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (f->fd < 0)
        return errno == ENOENT ? -EAGAIN : -errno;
    if (fstat(f->fd, &b) != 0 || !S_ISREG(b.st_mode)) {
        close(f->fd);
        f->fd = -1;
        return -EAGAIN;
    }
    return 0;
}

/* Read the registration; a new one replaces the one in use (and what was said about it). */
static int announce(struct ddp_sample_file *f)
{
    char head[DDP_SAMPLE_HEAD_LEN];
    struct ddp_sample_head h;
    int rc = open_file(f);
    if (rc < 0)
        return rc;
    ssize_t n = pread(f->fd, head, sizeof(head), 0);
    if (n != (ssize_t)sizeof(head) || !ddp_sample_parse_header(head, (size_t)n, &h))
        return f->pid ? 0 : -EAGAIN; /* being rewritten: keep the one in use */
    if (f->pid && memcmp(head, f->head, sizeof(head)) == 0)
        return 0;
    if (f->pid && h.pid == f->h.pid && h.tid == f->h.tid && h.start == f->h.start) {
        f->h.err = h.err; /* the same sampler, now with its error */
        memcpy(f->head, head, sizeof(head));
        return 0;
    }
    memcpy(f->head, head, sizeof(head));
    f->h = h;
    f->pid = h.pid;
    f->busy = 0;
    f->no_thread = false;
    f->why[0] = 0;
    f->told = false;
    if (h.signo != ddp_sample_signal())
        return stop(f, "pid %d registered for signal %d, not %d: never signalled", (int)h.pid, h.signo,
                    ddp_sample_signal());
    return 0;
}

int ddp_sample_poke(struct ddp_sample_file *f, const pid_t *groups, size_t n, long long now_ms)
{
    bool ours = false, pending = false;
    char state = 0;
    pid_t g = 0, tid = 0;
    unsigned long long start = 0;
    char task[96];
    int sig = ddp_sample_signal();
    int rc = announce(f);
    if (rc < 0)
        return rc;
    if (f->why[0])
        return -ECANCELED;
    if (f->h.err)
        return stop(f, "pid %d cannot write its stacks file (%s)", (int)f->pid, strerror(f->h.err));
    if (proc_stat(f->pid, &state, &g, &start) != 0 || start != f->h.start || state == 'Z' || state == 'X')
        return -ESRCH; /* gone, or its pid is another process's now: only a new registration is signalled */
    if (n > 0 && groups[0] > 0 && (f->pid == groups[0] || g == groups[0]))
        return stop(f, "its stacks file names pid %d, the exec shim's process group: never signalled", (int)f->pid);
    for (size_t i = 1; i < n && g > 0; i++)
        ours |= groups[i] > 0 && groups[i] == g;
    if (!ours)
        return -ESRCH;
    snprintf(task, sizeof(task), "/proc/%d/task/%d", (int)f->pid, (int)f->h.tid);
    if (access(task, F_OK) != 0) { /* an exec, or Python's exit ending its threads just before the process ends */
        if (!f->no_thread) {
            f->no_thread = true;
            return -ESRCH;
        }
        return stop(f, "the sampler thread of pid %d is gone (it exec'd another program)", (int)f->pid);
    }
    f->no_thread = false;
    rc = check_masks(f->pid, f->h.tid, sig, &pending, &tid);
    if (rc == -ENOENT)
        return -ESRCH;
    if (rc == -EINVAL)
        return stop(f, "pid %d (thread %d) does not block signal %d (its signal mask was reset, or it exec'd)",
                    (int)f->pid, (int)tid, sig);
    if (pending) {
        if (++f->busy >= DDP_SAMPLE_BUSY_MAX)
            return stop(f, "pid %d did not take signal %d for %d samples: its sampler stopped answering", (int)f->pid,
                        sig, f->busy);
        return -EBUSY;
    }
    f->busy = 0;
    struct stat st;
    if (fstat(f->fd, &st) == 0 && st.st_size > DDP_SAMPLE_HEAD_LEN && ftruncate(f->fd, DDP_SAMPLE_HEAD_LEN) != 0)
        return -errno;
    if (f->want_fr ? sigqueue(f->pid, sig, (union sigval){.sival_int = 1}) != 0 : kill(f->pid, sig) != 0)
        return -errno;
    f->want_fr = false;
    f->pending = true;
    f->poked_ms = now_ms;
    return 0;
}

long ddp_sample_take(struct ddp_sample_file *f, struct ddp_buf *out)
{
    char buf[16384];
    long total = 0;
    off_t off = DDP_SAMPLE_HEAD_LEN;
    f->pending = false;
    if (f->fd < 0)
        return 0;
    if (pread(f->fd, buf, DDP_SAMPLE_HEAD_LEN, 0) != DDP_SAMPLE_HEAD_LEN || memcmp(buf, f->head, DDP_SAMPLE_HEAD_LEN))
        return 0; /* another registration, or its writing failed: not this sample */
    for (;;) {
        ssize_t n = pread(f->fd, buf, sizeof(buf), off);
        if (n < 0)
            return -errno;
        if (n == 0 || total > (4L << 20))
            break;
        ddp_buf_add(out, buf, (size_t)n);
        off += n;
        total += n;
    }
    return total;
}
