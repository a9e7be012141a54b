/* logdir: see logdir.h. */
#include "host/logdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_SYMLINKS 40 /* as the kernel's path walk */

struct ddp_logdir {
    int fd;     /* the run directory */
    char *path; /* LOG_DIR/<run_id>_XXXXXXXX */
};

int ddp_logdir_check(const char *log_dir, struct ddp_err *err)
{
    char cwd[PATH_MAX];
    char *p =
        log_dir[0] == '/' ? ddp_xstrdup(log_dir) : ddp_xasprintf("%s/%s", getcwd(cwd, sizeof cwd) ? cwd : ".", log_dir);
    char *missing = NULL; /* the first component that does not exist */
    struct stat st;
    int rc = 0;
    /* climb to the nearest existing ancestor */
    for (;;) {
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/')
            p[--n] = '\0';
        if (stat(p, &st) == 0 || n <= 1)
            break;
        char *slash = strrchr(p, '/');
        free(missing);
        missing = ddp_xstrdup(slash + 1);
        *(slash == p ? slash + 1 : slash) = '\0';
    }
    struct statfs fs;
    struct statvfs vfs;
    const char *why = NULL;
    char *comp = missing ? missing : p;
    if (!S_ISDIR(st.st_mode))
        rc = ddp_errf(err, -ENOTDIR, "log_dir %s: '%s' is not a directory", log_dir, strrchr(p, '/') + 1);
    else if (statfs(p, &fs) == 0 && (fs.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */ || fs.f_type == 0x62656572 /* SYSFS */))
        why = "a /proc or /sys file system takes no new directories";
    else if (statvfs(p, &vfs) == 0 && (vfs.f_flag & ST_RDONLY))
        why = strerror(EROFS);
    else if (access(p, W_OK | X_OK) != 0)
        why = strerror(errno);
    if (why)
        rc = ddp_errf(err, -EACCES, "log_dir %s: cannot create '%s' in %s: %s", log_dir, comp, p, why);
    free(missing);
    free(p);
    return rc;
}

static bool trusted_owner(uid_t u)
{
    return u == 0 || u == geteuid();
}

/* A symlink may be followed when it and the directory holding it belong to root or this user and nobody else
 * can replace it there (the directory is not writable by group or others, or is sticky like /tmp). */
static bool symlink_trusted(int dirfd, const struct stat *link)
{
    struct stat d;
    if (fstat(dirfd, &d) != 0 || !trusted_owner(link->st_uid) || !trusted_owner(d.st_uid))
        return false;
    return !(d.st_mode & (S_IWGRP | S_IWOTH)) || (d.st_mode & S_ISVTX);
}

/* A directory on the way to the run directory must be one that nobody but root and this user can change:
 * owned by one of them (an owner can always rename what is inside, mode or not) and not writable by group or
 * others unless sticky (then they cannot rename this user's entries). Otherwise another user could rename the
 * run directory away and plant a symlink or a FIFO in its place, and workers (which get paths, not
 * descriptors) would write their files through it. 0, or -EPERM with err. */
static int dir_trusted(int fd, const char *path, const char *name, struct ddp_err *err)
{
    struct stat d;
    if (fstat(fd, &d) != 0)
        return ddp_errf(err, -errno, "log_dir %s: cannot stat '%s': %s", path, name, strerror(errno));
    if (!trusted_owner(d.st_uid))
        return ddp_errf(err, -EPERM,
                        "log_dir %s: '%s' belongs to uid %u, who could rename the run directory and plant "
                        "files where workers write (expected a directory of root or uid %u all the way down)",
                        path, name, (unsigned)d.st_uid, (unsigned)geteuid());
    if ((d.st_mode & (S_IWGRP | S_IWOTH)) && !(d.st_mode & S_ISVTX))
        return ddp_errf(err, -EPERM,
                        "log_dir %s: '%s' has mode %04o: others may rename the run directory and plant files "
                        "where workers write (expected no group or other write, or the sticky bit as /tmp)",
                        path, name, (unsigned)(d.st_mode & 07777));
    return 0;
}

/* What walk() has found so far about the directories on the way. */
struct walk_trust {
    bool trust;          /* [job] trust_log_dir: every directory is accepted, every symlink followed */
    bool pending;        /* a directory on the way failed dir_trusted in a way a later one of our own forgives */
    struct ddp_err pend; /* its message */
};

/* The hint every refusal ends with: the explicit way to accept the directory. */
#define TRUST_HINT "; to accept it, pass --trust-log-dir (or [job] trust_log_dir = yes)"

/* dir_trusted() for one directory on the way, with what a user other than root may accept without asking
 * (issue 54): a directory that another user owns or its group may write (a setgid 2775 project directory)
 * is forgiven once the walk reaches, below it, a directory of this user's own that nobody else may write: the
 * run directory is made private (0700) inside that one. One that everybody may write (0777, not sticky) is
 * never forgiven, nor anything for root, whose workers could be led to write through a planted link. 0, or
 * -EPERM with err (the hint appended). */
static int check_dir(struct walk_trust *t, int fd, const char *path, const char *name, struct ddp_err *err)
{
    struct stat d;
    struct ddp_err e = {0};
    if (t->trust)
        return 0;
    int rc = dir_trusted(fd, path, name, &e);
    bool root = geteuid() == 0, got = fstat(fd, &d) == 0;
    if (rc == 0) {
        if (got && !root && d.st_uid == geteuid() && !(d.st_mode & (S_IWGRP | S_IWOTH)))
            t->pending = false; /* our own: nobody else can rename what we make in it */
        return 0;
    }
    if (rc == -EPERM && got && !root && (!(d.st_mode & S_IWOTH) || (d.st_mode & S_ISVTX))) {
        if (!t->pending)
            t->pend = e;
        t->pending = true;
        return 0;
    }
    return ddp_errf(err, rc, "%s%s", e.msg, rc == -EPERM ? TRUST_HINT : "");
}

/* One step of walk(): comp, a symlink (st) in the directory fd, is followed when trusted: *rest becomes its
 * target followed by what came after it (next; *rest is freed and replaced), and *fd becomes / when the target
 * is absolute. 0, or a negative errno with err (*fd stays open). */
static int follow(struct walk_trust *t, int *fd, const char *comp, const struct stat *st, const char *next, char **rest,
                  int *hops, const char *path, struct ddp_err *err)
{
    char target[PATH_MAX];
    ssize_t len;
    if (!t->trust && !symlink_trusted(*fd, st))
        return ddp_errf(err, -ELOOP,
                        "log_dir %s: '%s' is a symlink (owner uid %u) in a directory others may change: "
                        "not followed (expected a directory, or a symlink of root or uid %u in a "
                        "directory only they can write)" TRUST_HINT,
                        path, comp, (unsigned)st->st_uid, (unsigned)geteuid());
    len = readlinkat(*fd, comp, target, sizeof target - 1);
    if (len <= 0 || ++*hops > MAX_SYMLINKS)
        return ddp_errf(err, len < 0 ? -errno : -ELOOP, "log_dir %s: symlink '%s': %s", path, comp,
                        len < 0 ? strerror(errno) : "too many levels of symbolic links");
    target[len] = '\0';
    char *joined = ddp_xasprintf("%s%s", target, next);
    free(*rest);
    *rest = joined;
    if (target[0] == '/') {
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
            return ddp_errf(err, -errno, "log_dir %s: cannot open /: %s", path, strerror(errno));
        if (check_dir(t, root, path, "/", err) < 0) {
            close(root);
            return -EPERM;
        }
        close(*fd);
        *fd = root;
    }
    return 0;
}

/* Open the directory path (creating missing components 0755), one component at a time, each one trusted
 * (check_dir); O_PATH, so that a directory one may search but not list (a 0711 home) is on the way. 0 with *fd_out, or
 * a negative errno with err. */
static int walk(const char *given, bool trust, int *fd_out, struct ddp_err *err)
{
    struct walk_trust t = {.trust = trust};
    const char *path = given;
    char cwd[PATH_MAX];
    char *rest =
        given[0] == '/' ? ddp_xstrdup(given) : ddp_xasprintf("%s/%s", getcwd(cwd, sizeof cwd) ? cwd : ".", given);
    char *p = rest;
    int hops = 0, rc = 0;
    int fd = open(rest[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = ddp_errf(err, -errno, "log_dir %s: cannot open /: %s", path, strerror(errno));
        free(rest);
        return rc;
    }
    if ((rc = check_dir(&t, fd, path, "/", err)) < 0) {
        close(fd);
        free(rest);
        return rc;
    }
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        size_t n = strcspn(p, "/");
        char *comp = ddp_xstrndup(p, n);
        char *next = p + n;
        struct stat st;
        if (strcmp(comp, ".") == 0) {
            free(comp);
            p = next;
            continue;
        }
        if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT || (mkdirat(fd, comp, 0755) != 0 && errno != EEXIST) ||
                fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                rc = ddp_errf(err, -errno, "log_dir %s: cannot create '%s': %s", path, comp, strerror(errno));
                free(comp);
                break;
            }
        }
        if (S_ISLNK(st.st_mode)) {
            rc = follow(&t, &fd, comp, &st, next, &rest, &hops, path, err);
            free(comp);
            if (rc < 0)
                break;
            p = rest;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc = ddp_errf(err, -ENOTDIR, "log_dir %s: '%s' is not a directory", path, comp);
            free(comp);
            break;
        }
        int nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) {
            rc = ddp_errf(err, -errno, "log_dir %s: cannot open '%s': %s", path, comp, strerror(errno));
            free(comp);
            break;
        }
        if ((rc = check_dir(&t, nfd, path, comp, err)) < 0) {
            close(nfd);
            free(comp);
            break;
        }
        free(comp);
        close(fd);
        fd = nfd;
        p = next;
    }
    free(rest);
    if (rc == 0 && t.pending) /* no directory of our own below the one others may change */
        rc = ddp_errf(err, -EPERM, "%s" TRUST_HINT, t.pend.msg);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

/* Open the directory name in dirfd made by this job: no symlink, owned by this user. fd or negative errno. */
static int open_own_dir(int dirfd, const char *name)
{
    struct stat st;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

int ddp_logdir_create(const char *log_dir, const char *run_id, struct ddp_logdir **out, struct ddp_err *err)
{
    return ddp_logdir_make(log_dir, run_id, false, out, err);
}

int ddp_logdir_make(const char *log_dir, const char *run_id, bool trust, struct ddp_logdir **out, struct ddp_err *err)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
    int dirfd = -1, rc;
    if (!log_dir || !*log_dir)
        return ddp_errf(err, -EINVAL, "log_dir is empty (expected a directory)");
    rc = walk(log_dir, trust, &dirfd, err);
    if (rc < 0)
        return rc;
    char *id = ddp_xstrdup(run_id && *run_id ? run_id : "none");
    for (char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '-' || *c == '_'))
            *c = '_';
    if (id[0] == '.')
        id[0] = '_';
    for (int tries = 0; tries < 100; tries++) {
        unsigned char raw[8];
        char suffix[9];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
            long long t = ddp_now_ns() ^ ((long long)getpid() << 20) ^ tries;
            memcpy(raw, &t, sizeof raw);
        }
        for (int i = 0; i < 8; i++)
            suffix[i] = chars[raw[i] % (sizeof chars - 1)];
        suffix[8] = '\0';
        char *name = ddp_xasprintf("%s_%s", id, suffix);
        if (mkdirat(dirfd, name, 0700) != 0) {
            int e = errno;
            free(name);
            if (e == EEXIST)
                continue;
            rc = ddp_errf(err, -e, "log_dir %s: cannot create a directory in it: %s", log_dir, strerror(e));
            break;
        }
        int fd = open_own_dir(dirfd, name);
        if (fd < 0) {
            rc = ddp_errf(err, fd, "log_dir %s: %s: %s", log_dir, name, strerror(-fd));
            free(name);
            break;
        }
        struct ddp_logdir *ld = ddp_xcalloc(1, sizeof *ld);
        size_t n = strlen(log_dir);
        while (n > 1 && log_dir[n - 1] == '/')
            n--;
        ld->fd = fd;
        char cwd[PATH_MAX];
        bool rel = log_dir[0] != '/' && getcwd(cwd, sizeof cwd); /* workers may run elsewhere (workdir) */
        ld->path = ddp_xasprintf("%s%s%.*s/%s", rel ? cwd : "", rel ? "/" : "", (int)n, log_dir, name);
        free(name);
        *out = ld;
        rc = 1;
        break;
    }
    free(id);
    close(dirfd);
    if (rc == 0)
        rc = ddp_errf(err, -EEXIST, "log_dir %s: no free directory name after 100 tries", log_dir);
    return rc < 0 ? rc : 0;
}

const char *ddp_logdir_path(const struct ddp_logdir *ld)
{
    return ld->path;
}

int ddp_logdir_fd(const struct ddp_logdir *ld)
{
    return ld->fd;
}

int ddp_logdir_attempt(struct ddp_logdir *ld, int attempt, int nranks, struct ddp_err *err)
{
    char name[32];
    snprintf(name, sizeof name, "attempt_%d", attempt);
    if (mkdirat(ld->fd, name, 0755) != 0) {
        int e = errno;
        return ddp_errf(err, -e, "%s/%s: %s%s", ld->path, name, strerror(e),
                        e == EEXIST ? " (this job did not make it: nothing is written there)" : "");
    }
    int afd = open_own_dir(ld->fd, name);
    if (afd < 0)
        return ddp_errf(err, afd, "%s/%s: %s", ld->path, name, strerror(-afd));
    int rc = 0;
    for (int r = 0; r < nranks && rc == 0; r++) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", r);
        if (mkdirat(afd, rank, 0755) != 0)
            rc = ddp_errf(err, -errno, "%s/%s/%s: %s", ld->path, name, rank, strerror(errno));
    }
    close(afd);
    return rc;
}

int ddp_logdir_create_file(const struct ddp_logdir *ld, const char *rel, struct ddp_err *err)
{
    int fd = ld->fd;
    const char *p = rel;
    int rc;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        char *comp = ddp_xstrndup(p, (size_t)(slash - p));
        int nfd = open_own_dir(fd, comp);
        free(comp);
        if (fd != ld->fd)
            close(fd);
        if (nfd < 0)
            return ddp_errf(err, nfd, "%s/%s: %s", ld->path, rel,
                            nfd == -ELOOP || nfd == -ENOTDIR ? "a directory on the way is a symlink or no "
                                                               "directory: not followed"
                            : nfd == -EPERM                  ? "a directory on the way is not this user's"
                                                             : strerror(-nfd));
        fd = nfd;
        p = slash + 1;
    }
    rc = openat(fd, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (rc < 0)
        rc = ddp_errf(err, -errno, "%s/%s: cannot create: %s", ld->path, rel, strerror(errno));
    if (fd != ld->fd)
        close(fd);
    return rc;
}

void ddp_logdir_close(struct ddp_logdir *ld)
{
    if (!ld)
        return;
    if (ld->fd >= 0)
        close(ld->fd);
    free(ld->path);
    free(ld);
}
