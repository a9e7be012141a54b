/* rundir: see rundir.h. */
#include "host/rundir.h"

#include "host/klock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *ddp_rundir_lock_dir(char *const *envp)
{
    static char canon[PATH_MAX];
    const char *v = ddp_env_get(envp, "DDPLAUNCH_LOCK_DIR");
    if (!v || !*v) {
        struct stat st;
        return lstat("/run/lock", &st) == 0 && S_ISDIR(st.st_mode) ? DDP_RUNDIR_LOCK_DIR : DDP_RUNDIR_LOCK_DIR_FALLBACK;
    }
    /* One directory, one namespace: "/x/locks", "/x/locks/", "/x//locks" and "/x/./locks" (and a symlink to
     * the same lock names (klock.h keys them on this string). Lexical only: a symlink is not resolved here, and
     * ddp_rundir_open_shared refuses one. */
    char *abs = v[0] == '/' ? ddp_xstrdup(v) : NULL;
    if (!abs) {
        char cwd[PATH_MAX];
        abs = ddp_xasprintf("%s/%s", getcwd(cwd, sizeof cwd) ? cwd : "/", v);
    }
    char *norm = ddp_path_normalize(abs);
    snprintf(canon, sizeof canon, "%s", norm);
    free(norm);
    free(abs);
    return canon;
}

static void mode_str(mode_t m, char *buf, size_t n)
{
    snprintf(buf, n, "%04o", (unsigned)(m & 07777));
}

bool ddp_rundir_path_trusted(const char *path)
{
    if (!path || path[0] != '/')
        return false;
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    const char *p = path;
    bool ok = fd >= 0;
    while (ok) {
        struct stat st;
        ok = fstat(fd, &st) == 0 && (st.st_uid == 0 || st.st_uid == geteuid()) &&
             (!(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX));
        p += strspn(p, "/");
        size_t n = strcspn(p, "/");
        if (!ok || n == 0)
            break;
        char *comp = ddp_xstrndup(p, n);
        int nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        free(comp);
        close(fd);
        fd = nfd;
        ok = fd >= 0;
        p += n;
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Where run directories go: the parent and the name prefix (without XDG_RUNTIME_DIR, the fresh name itself
 * carries the user id). An XDG_RUNTIME_DIR that another user could change (kept by a plain `su`: the other
 * user's /run/user/UID) is not used: /tmp instead. Caller frees both. */
static void run_location(char *const *envp, uid_t uid, char **parent, char **prefix)
{
    const char *xdg = ddp_env_get(envp, "XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/' && (ddp_rundir_path_trusted(xdg) || access(xdg, F_OK) != 0)) {
        *parent = ddp_xasprintf("%s/ddplaunch", xdg);
        *prefix = ddp_xstrdup("run-");
    } else {
        *parent = ddp_xstrdup("/tmp");
        *prefix = ddp_xasprintf("ddplaunch-%u-", (unsigned)uid);
    }
}

/* open a directory path without following a symlink in its last component */
static int open_dir_nofollow(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int refuse_symlink(const char *path, int code, struct ddp_err *err)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return ddp_errf(err, -ELOOP, "%s is a symlink (owner uid %u); refusing to follow it: remove it", path,
                        (unsigned)st.st_uid);
    if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode))
        return ddp_errf(err, -ENOTDIR, "%s exists and is not a directory", path);
    return ddp_errf(err, code, "cannot open directory %s: %s", path, strerror(-code));
}

int ddp_rundir_open_shared(const char *path, int *dirfd_out, struct ddp_err *err)
{
    bool created = false;
    if (mkdir(path, 01777) == 0)
        created = true;
    else if (errno != EEXIST)
        return ddp_errf(err, -errno, "cannot create the shared lock directory %s: %s", path, strerror(errno));
    int fd = open_dir_nofollow(path);
    if (fd < 0)
        return refuse_symlink(path, fd, err);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return ddp_errf(err, e, "cannot stat %s: %s", path, strerror(-e));
    }
    uid_t me = geteuid();
    if (created && st.st_uid == me && (st.st_mode & 07777) != 01777) {
        /* the umask stripped bits: other users must be able to create their lock files here */
        if (fchmod(fd, 01777) == 0)
            st.st_mode = (st.st_mode & ~07777u) | 01777;
    }
    char m[8];
    mode_str(st.st_mode, m, sizeof m);
    /* Another user's directory is accepted only in the shared form (1777), as when that user's job happened to
     * create it first: they could remove lock files (spoiling exclusion against their own jobs, no worse than
     * binding the ports themselves), but O_NOFOLLOW and the link count checks keep them from redirecting us. */
    if (st.st_uid != 0 && st.st_uid != me && (st.st_mode & 07777) != 01777) {
        close(fd);
        return ddp_errf(err, -EPERM,
                        "the shared lock directory %s is owned by uid %u with mode %s (expected root or uid %u, "
                        "or mode 1777); remove it or set DDPLAUNCH_LOCK_DIR",
                        path, (unsigned)st.st_uid, m, (unsigned)me);
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        close(fd);
        return ddp_errf(err, -EPERM,
                        "the shared lock directory %s has mode %s: writable by others without the "
                        "sticky bit (expected 1777); fix with chmod 1777 %s",
                        path, m, path);
    }
    *dirfd_out = fd;
    return 0;
}

/* a regular file with one link: not a device, fifo, or a hard link to someone's file */
static int check_plain(int fd, const char *what, const char *name, struct ddp_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return ddp_errf(err, -errno, "cannot stat %s %s: %s", what, name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ddp_errf(err, -EINVAL, "%s %s is not a regular file; refusing it", what, name);
    if (st.st_nlink != 1)
        return ddp_errf(err, -EPERM, "%s %s has %lu hard links (expected 1); refusing it", what, name,
                        (unsigned long)st.st_nlink);
    return 0;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int ddp_rundir_open_owned(int dirfd, const char *name, int *fd_out, struct ddp_err *err)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            return ddp_errf(err, -ELOOP, "%s is a symlink; refusing to follow it", name);
        return ddp_errf(err, -e, "cannot open %s: %s", name, strerror(e));
    }
    int rc = check_plain(fd, "file", name, err);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) == 0 && st.st_uid != geteuid())
        rc =
            ddp_errf(err, -EPERM, "%s is owned by uid %u, not by this user; not writing it", name, (unsigned)st.st_uid);
    if (rc == 0 && fchmod(fd, 0644) < 0)
        rc = ddp_errf(err, -errno, "cannot rewrite %s: %s", name, strerror(errno));
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

int ddp_rundir_rewrite(int fd, const char *text)
{
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, text + done, n - done, (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        done += (size_t)w;
    }
    return ftruncate(fd, (off_t)n) < 0 ? -errno : 0;
}

int ddp_rundir_write_owned(int dirfd, const char *name, const char *text, struct ddp_err *err)
{
    int fd = -1;
    int rc = ddp_rundir_open_owned(dirfd, name, &fd, err);
    if (rc < 0)
        return rc;
    if (ftruncate(fd, 0) < 0)
        rc = ddp_errf(err, -errno, "cannot rewrite %s: %s", name, strerror(errno));
    if (rc == 0 && (rc = write_all(fd, text, strlen(text))) < 0)
        ddp_errf(err, rc, "cannot write %s: %s", name, strerror(-rc));
    close(fd);
    return rc;
}

int ddp_rundir_read_small(int dirfd, const char *name, size_t max, char **text_out)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    char *buf = ddp_xmalloc(max + 1);
    size_t len = 0;
    while (len < max) {
        ssize_t r = read(fd, buf + len, max - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    *text_out = buf;
    return 0;
}

char *ddp_rundir_private_path(char *const *envp, uid_t uid)
{
    char *parent, *prefix;
    run_location(envp, uid, &parent, &prefix);
    free(prefix);
    return parent;
}

static int verify_private_fd(int fd, const char *path, struct ddp_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return ddp_errf(err, -errno, "cannot stat %s: %s", path, strerror(errno));
    char m[8];
    mode_str(st.st_mode, m, sizeof m);
    if (st.st_uid != geteuid())
        return ddp_errf(err, -EPERM,
                        "private directory %s is owned by uid %u, not by this user (uid %u); "
                        "refusing to use it: remove it",
                        path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 077)
        return ddp_errf(err, -EPERM,
                        "private directory %s has mode %s (expected 0700): others could read or "
                        "replace files there; fix with chmod 700 %s",
                        path, m, path);
    return 0;
}

int ddp_rundir_make_private(const char *path, int *dirfd_out, struct ddp_err *err)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return ddp_errf(err, -errno, "cannot create private directory %s: %s", path, strerror(errno));
    int fd = open_dir_nofollow(path);
    if (fd < 0)
        return refuse_symlink(path, fd, err);
    int rc = verify_private_fd(fd, path, err);
    if (rc < 0 || !dirfd_out)
        close(fd);
    else
        *dirfd_out = fd;
    return rc;
}

int ddp_rundir_proc_identity(pid_t pid, char *comm, size_t comm_len, char *user, size_t user_len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    char line[256];
    unsigned uid = (unsigned)-1;
    if (comm && comm_len)
        comm[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        if (comm && comm_len && strncmp(line, "Name:", 5) == 0) {
            const char *s = line + 5;
            while (*s == ' ' || *s == '\t')
                s++;
            snprintf(comm, comm_len, "%.*s", (int)strcspn(s, "\n"), s);
            ddp_printable(comm); /* another user's process may name itself with escape sequences */
        } else if (strncmp(line, "Uid:", 4) == 0) {
            sscanf(line + 4, "%u", &uid);
        }
    }
    fclose(f);
    if (user && user_len) {
        struct passwd pw, *res = NULL;
        char pwbuf[1024];
        if (uid != (unsigned)-1 && getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
            snprintf(user, user_len, "%s", res->pw_name);
        else
            snprintf(user, user_len, "uid %u", uid);
    }
    return 0;
}

static int verify_private_fd(int fd, const char *path, struct ddp_err *err);

int ddp_rundir_run_create(char *const *envp, uid_t uid, char **path_out, int *lock_fd_out, struct ddp_err *err)
{
    char *parent, *prefix;
    int rc = 0;
    run_location(envp, uid, &parent, &prefix);
    if (strcmp(parent, "/tmp") != 0)
        rc = ddp_rundir_make_private(parent, NULL, err);
    char *tmpl = ddp_xasprintf("%s/%sXXXXXX", parent, prefix);
    free(parent);
    free(prefix);
    if (rc == 0 && !mkdtemp(tmpl))
        rc = ddp_errf(err, -errno, "cannot create a run directory %s: %s", tmpl, strerror(errno));
    int fd = rc == 0 ? open_dir_nofollow(tmpl) : -1;
    if (rc == 0 && fd < 0)
        rc = ddp_errf(err, fd, "cannot open the run directory %s: %s", tmpl, strerror(-fd));
    if (rc == 0)
        rc = verify_private_fd(fd, tmpl, err);
    if (rc == 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
        rc = ddp_errf(err, -errno, "cannot lock the run directory %s: %s", tmpl, strerror(errno));
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        free(tmpl);
        return rc;
    }
    *path_out = tmpl;
    *lock_fd_out = fd;
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void ddp_rundir_run_remove(const char *path, int lock_fd)
{
    if (path)
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    if (lock_fd >= 0)
        close(lock_fd);
}

/* The leftovers sweeps read whole directories, one entry per live launch of this user on this host: a thousand
 * launches starting together would make a million reads. A stamp beside the run directories says how many the
 * last sweep saw (its size) and when (its mtime). A launch sweeps when the last sweep saw few (every launch
 * sweeps, as it always did) or ran SWEEP_EVERY_S ago; one that sweeps many stamps first, so that the launches
 * right after it skip. A stamp that is not ours (another user's file in /tmp, a symlink) is not trusted: every
 * launch then sweeps, and none writes it. */
enum { SWEEP_SMALL = 64, SWEEP_EVERY_S = 5 };

struct sweep_stamp {
    int fd;     /* open for writing once claimed, else -1 */
    off_t last; /* what the last sweep saw; -1: the stamp is not ours */
};

static int stamp_open(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static bool stamp_due(int dirfd, const char *name, time_t now, struct sweep_stamp *s)
{
    struct stat st;
    *s = (struct sweep_stamp){.fd = -1};
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return true;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        s->last = -1;
        return true;
    }
    s->last = st.st_size;
    if (st.st_size <= SWEEP_SMALL)
        return true;
    if (st.st_mtime <= now && now - st.st_mtime < SWEEP_EVERY_S)
        return false;
    s->fd = stamp_open(dirfd, name);
    if (s->fd >= 0)
        futimens(s->fd, NULL);
    return true;
}

static void stamp_done(int dirfd, const char *name, struct sweep_stamp *s, size_t seen)
{
    if (s->fd < 0 && s->last >= 0 && (seen > SWEEP_SMALL || s->last > SWEEP_SMALL))
        s->fd = stamp_open(dirfd, name);
    if (s->fd >= 0 && ftruncate(s->fd, (off_t)seen) == 0)
        futimens(s->fd, NULL);
    if (s->fd >= 0)
        close(s->fd);
}

int ddp_rundir_sweep(char *const *envp, uid_t uid, long long min_age_s)
{
    char *parent, *prefix;
    int removed = 0;
    run_location(envp, uid, &parent, &prefix);
    DIR *d = opendir(parent);
    size_t plen = strlen(prefix), seen = 0;
    struct dirent *de;
    struct sweep_stamp stamp = {.fd = -1};
    time_t now = time(NULL);
    char *stamp_name = ddp_xasprintf("%ssweep", prefix); /* not a run directory's name: 5 characters, not 6 */
    if (d && !stamp_due(dirfd(d), stamp_name, now, &stamp))
        removed = -EALREADY;
    while (d && removed >= 0 && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, plen) != 0 || strlen(de->d_name) != plen + 6)
            continue;
        seen++;
        /* the live launches' directories (a thousand agents on one host) are young or not ours: one fstatat
         * each, not an open, fstat and close */
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid ||
            (long long)(now - st.st_mtime) < min_age_s)
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* ours, private, not just made (a launch locks its directory right after mkdtemp), and not locked */
        if (fstat(fd, &st) == 0 && st.st_uid == uid && (st.st_mode & 07777) == 0700 &&
            (long long)(now - st.st_mtime) >= min_age_s && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            char *path = ddp_xasprintf("%s/%s", parent, de->d_name);
            ddp_rundir_run_remove(path, -1);
            free(path);
            removed++;
        }
        close(fd);
    }
    if (d && removed >= 0)
        stamp_done(dirfd(d), stamp_name, &stamp, seen);
    if (d)
        closedir(d);
    free(stamp_name);
    free(parent);
    free(prefix);
    return removed;
}

int ddp_rundir_sweep_stale(int dirfd, const char *ns, int (*map)(const char *file, char *what, size_t cap))
{
    char prefix[DDP_KLOCK_NAME_MAX + 1];
    struct ddp_strv held = {0};
    ddp_klock_name(ns, "", prefix);
    int rc = ddp_klock_list(prefix, &held);
    if (rc < 0)
        return rc;
    int dfd = dup(dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *e;
    int removed = 0;
    uid_t me = geteuid();
    if (d)
        rewinddir(d); /* a dup shares dirfd's offset, wherever an earlier reader left it */
    while (d && (e = readdir(d)) != NULL) {
        char what[64], lname[DDP_KLOCK_NAME_MAX + 1];
        struct stat st;
        if (map(e->d_name, what, sizeof what) != 1)
            continue;
        ddp_klock_name(ns, what, lname);
        if (ddp_klock_listed(&held, lname)) /* live: a thousand agents' files cost n log n */
            continue;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || (me != 0 && st.st_uid != me))
            continue;
        if (unlinkat(dirfd, e->d_name, 0) == 0)
            removed++;
    }
    if (d)
        closedir(d);
    else if (dfd >= 0)
        close(dfd);
    ddp_strv_clear(&held);
    return removed;
}
