/* lease: see lease.h. */
#include "host/lease.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host/klock.h"
#include "host/rundir.h"

struct ddp_lease {
    int dirfd; /* the info directory, -1 when it cannot be used */
    size_t n;
    int *fds;
    char **busids; /* canonical */
};

/* "0000:17:00.0", "00000000:17:00.0" (NVML), "17:00.0" -> "0000:17:00.0". 0 or -EINVAL. */
static int canon_busid(const char *s, char out[32])
{
    unsigned dom = 0, bus, dev, fn;
    char tail;
    if (!s || strlen(s) > 24 || s[strspn(s, "0123456789abcdefABCDEF:.")] != '\0')
        return -EINVAL;
    if (sscanf(s, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
        dom = 0;
        if (sscanf(s, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3)
            return -EINVAL;
    }
    if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
        return -EINVAL;
    snprintf(out, 32, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

bool ddp_lease_busid_ok(const char *s)
{
    char c[32];
    return canon_busid(s, c) == 0;
}

int ddp_lease_parse_info(const char *text, struct ddp_lease_info *info)
{
    bool have_pid = false;
    const char *line = text;
    info->pid = 0;
    info->job[0] = info->user[0] = '\0';
    info->start_unix = 0;
    while (line && *line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *eq = memchr(line, '=', len);
        if (eq) {
            size_t klen = (size_t)(eq - line);
            int vlen = (int)(len - klen - 1);
            const char *v = eq + 1;
            if (klen == 3 && strncmp(line, "pid", 3) == 0) {
                char num[24];
                snprintf(num, sizeof num, "%.*s", vlen, v);
                long long p;
                if (ddp_parse_int(num, 1, 0x7fffffff, &p) == 0) {
                    info->pid = (pid_t)p;
                    have_pid = true;
                }
            } else if (klen == 3 && strncmp(line, "job", 3) == 0) {
                snprintf(info->job, sizeof info->job, "%.*s", vlen, v);
            } else if (klen == 4 && strncmp(line, "user", 4) == 0) {
                snprintf(info->user, sizeof info->user, "%.*s", vlen, v);
            } else if (klen == 5 && strncmp(line, "start", 5) == 0) {
                char num[24];
                snprintf(num, sizeof num, "%.*s", vlen, v);
                long long t;
                if (ddp_parse_int(num, 0, 1LL << 40, &t) == 0)
                    info->start_unix = t;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return have_pid ? 0 : -EINVAL;
}

static void lock_name(const char *ns, const char *busid, char out[DDP_KLOCK_NAME_MAX + 1])
{
    char what[48];
    snprintf(what, sizeof what, "gpu-%s", busid);
    ddp_klock_name(ns, what, out);
}

/* Is busid (canonical) leased? 1 held, 0 free, negative errno. */
static int probe_one(const char *ns, const char *busid)
{
    char name[DDP_KLOCK_NAME_MAX + 1];
    lock_name(ns, busid, name);
    return ddp_klock_probe(name);
}

/* The info file "gpu-BUSID.UID.info" of user uid, trusted only when that user owns it (a regular file, not
 * a link) and it names pid: 0 with *cand, or a negative errno. */
static int read_info_of(int dirfd, const char *busid, uid_t uid, pid_t pid, struct ddp_lease_info *cand)
{
    char name[96], buf[4096];
    struct stat st;
    snprintf(name, sizeof name, "gpu-%s.%u.info", busid, (unsigned)uid);
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != uid || st.st_nlink != 1) {
        close(fd);
        return -EPERM;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return -EIO;
    buf[n] = '\0';
    if (ddp_lease_parse_info(buf, cand) < 0 || cand->pid != pid)
        return -ESRCH;
    return 0;
}

/* Fill info for a held GPU: pid and user from the kernel (the lock's SO_PEERCRED); job name and start time
 * from the holder's own info file when that user owns it and it names that pid. */
static void read_holder_info(const char *ns, int dirfd, const char *busid, struct ddp_lease_info *info)
{
    char name[DDP_KLOCK_NAME_MAX + 1];
    struct ddp_klock_holder h;
    memset(info, 0, sizeof *info);
    snprintf(info->busid, sizeof info->busid, "%s", busid);
    lock_name(ns, busid, name);
    if (ddp_klock_holder(name, &h) < 0 || !h.known)
        return;
    info->pid = h.pid;
    info->uid = h.uid;
    info->known = true;
    info->ddplaunch = h.answers && strcmp(h.comm, "ddplaunch") == 0;
    snprintf(info->comm, sizeof info->comm, "%s", h.comm);
    struct passwd pw, *res = NULL;
    char pwbuf[1024];
    if (getpwuid_r(h.uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
        snprintf(info->user, sizeof info->user, "%s", res->pw_name);
    else
        snprintf(info->user, sizeof info->user, "uid %u", (unsigned)h.uid);
    ddp_printable(info->user);
    struct ddp_lease_info cand;
    if (dirfd >= 0 && h.pid > 0 && read_info_of(dirfd, busid, h.uid, h.pid, &cand) == 0) {
        snprintf(info->job, sizeof info->job, "%s", cand.job);
        ddp_printable(info->job);
        info->start_unix = cand.start_unix;
    }
}

/* The info directory, or -1 when it cannot be used (missing, taken over by another user: then holders are
 * shown without job names). */
static int open_info_dir(const char *lock_dir)
{
    int fd = open(lock_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -1 : fd;
}

static void format_holder(struct ddp_buf *b, const struct ddp_lease_info *in)
{
    if (in->job[0])
        ddp_buf_printf(b, "job '%s' ", in->job);
    else if (in->ddplaunch)
        ddp_buf_puts(b, "a ddplaunch job ");
    else
        ddp_buf_puts(b, "a process that is no ddplaunch job ");
    ddp_buf_puts(b, "(");
    if (!in->known) {
        ddp_buf_puts(b, "holder unknown: the kernel does not say)");
        return;
    }
    if (in->pid > 0)
        ddp_buf_printf(b, "pid %d", (int)in->pid);
    else
        ddp_buf_puts(b, "pid not visible to this user");
    if (in->user[0])
        ddp_buf_printf(b, ", user %s", in->user);
    if (in->comm[0])
        ddp_buf_printf(b, ", command %s", in->comm);
    if (in->start_unix > 0) {
        time_t t = (time_t)in->start_unix;
        struct tm tm;
        char when[32];
        localtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        ddp_buf_printf(b, ", since %s", when);
    }
    ddp_buf_puts(b, ")");
}

/* "gpu A, B: job 'x' (pid 1, user u, since T); gpu C: ..." grouping the GPUs of one holder. */
static void format_infos(struct ddp_buf *b, const struct ddp_lease_info *v, size_t n)
{
    bool *done = ddp_xcalloc(n ? n : 1, sizeof *done);
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        if (b->len)
            ddp_buf_puts(b, "; ");
        ddp_buf_printf(b, "gpu %s", v[i].busid);
        for (size_t j = i + 1; j < n; j++) {
            if (!done[j] && v[j].pid == v[i].pid && strcmp(v[j].job, v[i].job) == 0) {
                ddp_buf_printf(b, ", %s", v[j].busid);
                done[j] = true;
            }
        }
        ddp_buf_puts(b, ": ");
        format_holder(b, &v[i]);
    }
    free(done);
}

static int canon_all(const char *const *busids, size_t n, char (*canon)[32], struct ddp_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (canon_busid(busids[i], canon[i]) < 0)
            return ddp_errf(err, -EINVAL, "gpu '%s': not a PCI bus id (expected DOMAIN:BUS:DEV.FN)",
                            busids[i] ? busids[i] : "(null)");
    return 0;
}

int ddp_lease_probe(const char *lock_dir, const char *const *busids, size_t n, bool *held, struct ddp_err *err)
{
    char(*canon)[32] = ddp_xcalloc(n ? n : 1, 32);
    int rc = canon_all(busids, n, canon, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int h = probe_one(lock_dir, canon[i]);
        if (h < 0)
            rc = ddp_errf(err, h, "gpu %s: cannot check its lease: %s", canon[i], strerror(-h));
        else
            held[i] = h == 1;
    }
    free(canon);
    return rc;
}

static int cmp_canon(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static char *describe_held(const char *ns, int dirfd, char (*canon)[32], size_t n)
{
    struct ddp_buf b = {0};
    struct ddp_lease_info *v = ddp_xcalloc(n ? n : 1, sizeof *v);
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (probe_one(ns, canon[i]) == 1)
            read_holder_info(ns, dirfd, canon[i], &v[cnt++]);
    format_infos(&b, v, cnt);
    free(v);
    ddp_buf_add(&b, "", 1);
    return b.data;
}

static void write_info(struct ddp_lease *l, const char *job_name)
{
    char user[64] = "";
    struct passwd pw, *res = NULL;
    char pwbuf[1024];
    if (getpwuid_r(geteuid(), &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
        snprintf(user, sizeof user, "%s", res->pw_name);
    else
        snprintf(user, sizeof user, "uid %u", (unsigned)geteuid());
    /* one line per field: a job name with a newline must not forge fields */
    char *job = ddp_xstrdup(job_name ? job_name : "");
    for (char *p = job; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    char *text = ddp_xasprintf("pid=%d\njob=%s\nuser=%s\nuid=%u\nstart=%lld\n", (int)getpid(), job, user,
                               (unsigned)geteuid(), (long long)time(NULL));
    free(job);
    for (size_t i = 0; l->dirfd >= 0 && i < l->n; i++) {
        char name[96];
        snprintf(name, sizeof name, "gpu-%s.%u.info", l->busids[i], (unsigned)geteuid());
        struct ddp_err e = {0};
        if (ddp_rundir_write_owned(l->dirfd, name, text, &e) < 0)
            ddp_debug("gpu %s: leased, but cannot record the job's name: %s", l->busids[i], e.msg);
    }
    free(text);
}

/* "gpu-BUSID.UID.info" -> "gpu-BUSID" */
static int info_file_lock(const char *file, char *what, size_t cap)
{
    size_t n = strlen(file);
    const char *dot;
    if (strncmp(file, "gpu-", 4) != 0 || n < 10 || strcmp(file + n - 5, ".info") != 0)
        return 0;
    dot = memrchr(file, '.', n - 5);
    if (!dot || dot == file + 4 || (size_t)(dot - file) >= cap)
        return 0;
    snprintf(what, cap, "%.*s", (int)(dot - file), file);
    return 1;
}

int ddp_lease_take(const char *lock_dir, const char *const *busids, size_t n, const char *job_name,
                   struct ddp_lease **out, struct ddp_err *err)
{
    char(*canon)[32] = ddp_xcalloc(n ? n : 1, 32);
    int rc = canon_all(busids, n, canon, err);
    if (rc < 0) {
        free(canon);
        return rc;
    }
    /* the info directory is for job names only: exclusion never depends on it */
    int dirfd = -1;
    struct ddp_err derr = {0};
    if (ddp_rundir_open_shared(lock_dir, &dirfd, &derr) < 0) {
        ddp_debug("%s: jobs will not see this job's name", derr.msg);
        dirfd = -1;
    } else if (ddp_rundir_sweep_stale(dirfd, lock_dir, info_file_lock) > 0) {
        ddp_debug("removed GPU lease info files of jobs that are gone");
    }
    /* the same order in every job: two jobs wanting overlapping sets collide on the first common GPU */
    qsort(canon, n, 32, cmp_canon);
    struct ddp_lease *l = ddp_xcalloc(1, sizeof *l);
    l->dirfd = dirfd;
    l->fds = ddp_xcalloc(n ? n : 1, sizeof *l->fds);
    l->busids = ddp_xcalloc(n ? n : 1, sizeof *l->busids);
    size_t busy_at = n;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i > 0 && strcmp(canon[i], canon[i - 1]) == 0)
            continue; /* listed twice */
        char name[DDP_KLOCK_NAME_MAX + 1];
        int fd = -1;
        lock_name(lock_dir, canon[i], name);
        /* a probe (holding the name for microseconds) may be in the way: retry briefly before calling it busy */
        int got = 0;
        for (int attempt = 0; attempt < 5 && got == 0; attempt++) {
            got = ddp_klock_take(name, &fd);
            if (got == 0) {
                struct timespec ts = {0, 2 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        if (got <= 0) {
            if (got == 0) {
                busy_at = i;
                rc = -EBUSY;
            } else {
                rc = ddp_errf(err, got, "gpu %s: cannot take its lease: %s", canon[i], strerror(-got));
            }
            break;
        }
        l->fds[l->n] = fd;
        l->busids[l->n] = ddp_xstrdup(canon[i]);
        l->n++;
    }
    if (rc < 0) {
        for (size_t i = 0; i < l->n; i++) {
            close(l->fds[i]);
            free(l->busids[i]);
        }
        l->n = 0;
        if (rc == -EBUSY) {
            char *who = describe_held(lock_dir, dirfd, canon + busy_at, n - busy_at);
            ddp_errf(err, -EBUSY, "GPUs leased by other jobs: %s", who[0] ? who : "(released meanwhile: try again)");
            free(who);
        }
        ddp_lease_release(l);
        free(canon);
        return rc;
    }
    free(canon);
    write_info(l, job_name);
    *out = l;
    return 0;
}

void ddp_lease_release(struct ddp_lease *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        /* remove our info file while still holding the lock: nobody else may have rewritten it */
        char name[96];
        snprintf(name, sizeof name, "gpu-%s.%u.info", l->busids[i], (unsigned)geteuid());
        if (l->dirfd >= 0)
            unlinkat(l->dirfd, name, 0);
        close(l->fds[i]);
        free(l->busids[i]);
    }
    if (l->dirfd >= 0)
        close(l->dirfd);
    free(l->fds);
    free(l->busids);
    free(l);
}

int ddp_lease_acquire(const char *lock_dir, const char *const *all_busids, size_t n, ddp_lease_choose_fn choose,
                      void *ctx, const char *job_name, long long wait_ms, struct ddp_lease **out,
                      struct ddp_strv *chosen_out, struct ddp_err *err)
{
    long long deadline = ddp_now_ms() + (wait_ms > 0 ? wait_ms : 0);
    bool *held = ddp_xcalloc(n ? n : 1, sizeof *held);
    const char **held_ids = ddp_xcalloc(n ? n : 1, sizeof *held_ids);
    long long start = ddp_now_ms(), next_log = start;
    size_t races = 0;
    int rc;
    for (;;) {
        rc = ddp_lease_probe(lock_dir, all_busids, n, held, err);
        if (rc < 0)
            break;
        size_t nheld = 0;
        for (size_t i = 0; i < n; i++)
            if (held[i])
                held_ids[nheld++] = all_busids[i];
        struct ddp_strv chosen = {0};
        rc = choose(ctx, held_ids, nheld, &chosen, err);
        if (rc == 0) {
            rc = ddp_lease_take(lock_dir, (const char *const *)chosen.v, chosen.n, job_name, out, err);
            if (rc == 0) {
                *chosen_out = chosen;
                break;
            }
        }
        bool lost_race = rc == -EBUSY && chosen.n > 0;
        ddp_strv_clear(&chosen);
        /* Another job took a GPU between our probe and our take: probe again at once, whatever the deadline,
         * since free GPUs may remain. Each lost race means some job got GPUs, so this ends. */
        if (lost_race && races++ < n + 1)
            continue;
        if (rc != -EBUSY && rc != -ENODEV)
            break;
        if (rc == -ENODEV && nheld == 0)
            break; /* not enough GPUs even with no leases: waiting cannot help */
        if (ddp_now_ms() >= deadline) {
            char *who = ddp_lease_describe(lock_dir, held_ids, nheld);
            if (rc == -ENODEV && who[0]) {
                struct ddp_err place = *err;
                ddp_errf(err, -EBUSY, "%s%s; GPUs leased by other jobs: %s%s", place.msg,
                         wait_ms > 0 ? " (after waiting for leases)" : "", who,
                         wait_ms > 0 ? "" : "; set [gpus] lease_wait to wait for them");
                rc = -EBUSY;
            }
            free(who);
            break;
        }
        if (nheld && ddp_now_ms() >= next_log) { /* say so every few seconds, not once */
            char *who = ddp_lease_describe(lock_dir, held_ids, nheld);
            ddp_info("waiting for GPUs leased by other jobs (%lld s of %lld s): %s", (ddp_now_ms() - start) / 1000,
                     (wait_ms + 999) / 1000, who);
            free(who);
            next_log = ddp_now_ms() + 5000;
        }
        long long left = deadline - ddp_now_ms();
        long long nap = left < 200 ? left : 200;
        struct timespec ts = {nap / 1000, (long)(nap % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    free(held);
    free(held_ids);
    return rc;
}

static int cmp_info(const void *a, const void *b)
{
    return strcmp(((const struct ddp_lease_info *)a)->busid, ((const struct ddp_lease_info *)b)->busid);
}

int ddp_lease_list(const char *lock_dir, struct ddp_lease_info **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char prefix[DDP_KLOCK_NAME_MAX + 1];
    struct ddp_strv names = {0};
    ddp_klock_name(lock_dir, "gpu-", prefix);
    int rc = ddp_klock_list(prefix, &names);
    if (rc < 0)
        return rc;
    int dirfd = open_info_dir(lock_dir);
    struct ddp_lease_info *v = ddp_xcalloc(names.n ? names.n : 1, sizeof *v);
    size_t cnt = 0;
    for (size_t i = 0; i < names.n; i++) {
        const char *busid = names.v[i] + strlen(prefix);
        char canon[32];
        if (canon_busid(busid, canon) < 0 || strcmp(canon, busid) != 0 || probe_one(lock_dir, canon) != 1)
            continue;
        read_holder_info(lock_dir, dirfd, canon, &v[cnt++]);
    }
    if (dirfd >= 0)
        close(dirfd);
    ddp_strv_clear(&names);
    if (cnt)
        qsort(v, cnt, sizeof *v, cmp_info);
    else {
        free(v);
        v = NULL;
    }
    *out = v;
    *n = cnt;
    return 0;
}

char *ddp_lease_describe(const char *lock_dir, const char *const *busids, size_t n)
{
    struct ddp_lease_info *v;
    size_t cnt;
    struct ddp_buf b = {0};
    if (ddp_lease_list(lock_dir, &v, &cnt) == 0) {
        size_t keep = 0;
        for (size_t i = 0; i < cnt; i++) {
            bool want = !busids;
            for (size_t j = 0; busids && j < n && !want; j++) {
                char c[32];
                want = canon_busid(busids[j], c) == 0 && strcmp(c, v[i].busid) == 0;
            }
            if (want)
                v[keep++] = v[i];
        }
        format_infos(&b, v, keep);
        free(v);
    }
    ddp_buf_add(&b, "", 1);
    return b.data;
}
