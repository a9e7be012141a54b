/* jobs: see jobs.h. */
#include "host/jobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host/klock.h"
#include "host/rundir.h"

struct ddp_jobs {
    char *lock_dir;
    int dirfd, lock_fd, fd; /* fd: the job's file, open for its life (rewritten in place: rundir.h) */
    char name[64];
    json_t *state;
};

static void lock_of(const char *lock_dir, long pid, char out[DDP_KLOCK_NAME_MAX + 1])
{
    char what[48];
    snprintf(what, sizeof(what), "job-%ld", pid);
    ddp_klock_name(lock_dir, what, out);
}

static void write_state(struct ddp_jobs *j)
{
    struct ddp_err err = {0};
    char *text = json_dumps(j->state, JSON_COMPACT | JSON_PRESERVE_ORDER);
    struct stat st;
    if (j->fd >= 0 && fstat(j->fd, &st) == 0 && st.st_nlink == 0) { /* removed meanwhile: made again */
        close(j->fd);
        j->fd = -1;
    }
    int rc = j->fd < 0 ? ddp_rundir_open_owned(j->dirfd, j->name, &j->fd, &err) : 0;
    if (rc == 0 && text && (rc = ddp_rundir_rewrite(j->fd, text)) < 0)
        ddp_errf(&err, rc, "cannot write %s: %s", j->name, strerror(-rc));
    if (rc < 0)
        ddp_debug("ps record: %s", err.msg);
    free(text);
}

/* "job-PID.json" -> "job-PID" */
static int job_file_lock(const char *file, char *what, size_t cap)
{
    long pid;
    char tail[16];
    if (sscanf(file, "job-%ld%15s", &pid, tail) != 2 || strcmp(tail, ".json") != 0 || pid <= 0)
        return 0;
    snprintf(what, cap, "job-%ld", pid);
    return 1;
}

/* Whether some job file of dirfd names a pid that no process has (in this pid namespace): only then is there
 * anything to sweep, and only then is every launcher's lock read (/proc/net/unix, which a thousand agents on one
 * host would each read whole). A file whose pid was taken again by another process waits until that one ends. */
static bool some_job_gone(int dirfd)
{
    int dfd = dup(dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *e;
    bool gone = false;
    if (d)
        rewinddir(d); /* a dup shares dirfd's offset: from the start, and left there for the next reader */
    while (d && !gone && (e = readdir(d)) != NULL) {
        char what[64];
        long pid;
        if (job_file_lock(e->d_name, what, sizeof what) == 1 && sscanf(what, "job-%ld", &pid) == 1 &&
            pid != (long)getpid())
            gone = kill((pid_t)pid, 0) < 0 && errno == ESRCH;
    }
    if (d) {
        rewinddir(d);
        closedir(d);
    } else if (dfd >= 0) {
        close(dfd);
    }
    return gone;
}

int ddp_jobs_publish(const char *lock_dir, const json_t *state, bool sweep, struct ddp_jobs **out, struct ddp_err *err)
{
    char lname[DDP_KLOCK_NAME_MAX + 1];
    int dirfd, lock_fd, rc;
    *out = NULL;
    rc = ddp_rundir_open_shared(lock_dir, &dirfd, err);
    if (rc < 0)
        return rc;
    lock_of(lock_dir, (long)getpid(), lname);
    rc = ddp_klock_take(lname, &lock_fd);
    if (rc <= 0) {
        close(dirfd);
        return ddp_errf(err, rc < 0 ? rc : -EBUSY, "ps lock %s: %s", lname, rc < 0 ? strerror(-rc) : "held");
    }
    /* what SIGKILLed launchers of this user left (their locks are gone with them) */
    int swept = sweep && some_job_gone(dirfd) ? ddp_rundir_sweep_stale(dirfd, lock_dir, job_file_lock) : 0;
    if (swept > 0)
        ddp_debug("removed %d ps file(s) of jobs that are gone", swept);
    struct ddp_jobs *j = ddp_xcalloc(1, sizeof(*j));
    j->lock_dir = ddp_xstrdup(lock_dir);
    j->dirfd = dirfd;
    j->lock_fd = lock_fd;
    j->fd = -1;
    snprintf(j->name, sizeof(j->name), "job-%ld.json", (long)getpid());
    j->state = json_deep_copy(state);
    write_state(j);
    *out = j;
    return 0;
}

void ddp_jobs_update(struct ddp_jobs *j, const json_t *changes)
{
    if (!j)
        return;
    json_object_update(j->state, (json_t *)changes);
    write_state(j);
}

void ddp_jobs_close(struct ddp_jobs *j)
{
    if (!j)
        return;
    unlinkat(j->dirfd, j->name, 0);
    if (j->fd >= 0)
        close(j->fd);
    close(j->lock_fd);
    close(j->dirfd);
    json_decref(j->state);
    free(j->lock_dir);
    free(j);
}

/* One more job file skipped: counted, the first named with why. */
static void skip(char *skipped, size_t cap, int *nskipped, char first[160], const char *name, const char *why)
{
    if ((*nskipped)++ == 0)
        snprintf(first, 160, "%.80s: %s", name, why);
    if (skipped && cap)
        snprintf(skipped, cap, "%d job file%s skipped (%s%s)", *nskipped, *nskipped == 1 ? "" : "s", first,
                 *nskipped > 1 ? ", ..." : "");
}

json_t *ddp_jobs_list(const char *lock_dir, char *skipped, size_t cap)
{
    json_t *a = json_array();
    int nskipped = 0;
    char first[160];
    if (skipped && cap)
        skipped[0] = '\0';
    int dirfd = open(lock_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dirfd >= 0 ? fdopendir(dirfd) : NULL;
    struct dirent *e;
    time_t now = time(NULL);
    if (!d) {
        if (dirfd >= 0)
            close(dirfd);
        return a;
    }
    while ((e = readdir(d))) {
        long pid;
        char tail[16];
        if (sscanf(e->d_name, "job-%ld%15s", &pid, tail) != 2 || strcmp(tail, ".json") != 0 || pid <= 0)
            continue;
        /* believed only when the kernel says pid holds the job's lock, and pid's user owns the file */
        char lname[DDP_KLOCK_NAME_MAX + 1];
        struct ddp_klock_holder h;
        struct stat st;
        lock_of(lock_dir, pid, lname);
        if (ddp_klock_holder(lname, &h) < 0 || !h.known || (h.pid != 0 && h.pid != (pid_t)pid))
            continue;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_uid != h.uid)
            continue;
        char *text = NULL;
        int rc = ddp_rundir_read_small(dirfd, e->d_name, 1 << 16, &text);
        if (rc < 0) {
            skip(skipped, cap, &nskipped, first, e->d_name, strerror(-rc));
            continue;
        }
        /* the first JSON text: a file caught while its job rewrote it may still hold the old one's tail after */
        json_t *o = json_loads(text, JSON_DISABLE_EOF_CHECK, NULL);
        free(text);
        if (!json_is_object(o)) {
            skip(skipped, cap, &nskipped, first, e->d_name, "not a JSON object");
            json_decref(o);
            continue;
        }
        struct passwd pw, *res = NULL;
        char pwbuf[1024], user[64];
        if (getpwuid_r(h.uid, &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res)
            snprintf(user, sizeof(user), "%s", res->pw_name);
        else
            snprintf(user, sizeof(user), "uid %u", (unsigned)h.uid);
        json_object_set_new(o, "pid", json_integer(pid));
        json_object_set_new(o, "user", json_string(user));
        json_object_set_new(o, "uid", json_integer(h.uid));
        json_int_t start = json_integer_value(json_object_get(o, "start_unix"));
        json_object_set_new(o, "age_s", json_integer(start > 0 && now >= start ? now - start : 0));
        json_array_append_new(a, o);
    }
    closedir(d);
    return a;
}

/* A string field for the table: control characters shown as '?', "-" when absent. */
static void cell(char *out, size_t cap, const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_string(v))
        snprintf(out, cap, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else
        snprintf(out, cap, "-");
    ddp_printable(out);
}

int ddp_jobs_command(const char *lock_dir, bool json, FILE *out)
{
    char skipped[256];
    json_t *a = ddp_jobs_list(lock_dir, skipped, sizeof skipped);
    if (skipped[0]) /* once, on stderr: the other jobs are listed all the same */
        fprintf(stderr, "ddplaunch: ps: %s in %s\n", skipped, lock_dir);
    size_t i;
    json_t *o;
    if (json) {
        char *text = json_dumps(a, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII); /* \u202e, not RLO */
        fprintf(out, "%s\n", text ? text : "[]");
        free(text);
        json_decref(a);
        return 0;
    }
    if (json_array_size(a) == 0) { /* not a bare header: say there are none, and where they would be */
        fprintf(out, "no ddplaunch jobs running on this host (none registered in %s)\n", lock_dir);
        json_decref(a);
        return 0;
    }
    fprintf(out, "%-16s %-10s %-8s %-6s %-7s %-5s %-8s %-7s %-20s %s\n", "JOB", "USER", "PID", "PORT", "ATTEMPT",
            "WORLD", "ALIVE", "AGE", "GPUS", "LOG_DIR");
    json_array_foreach(a, i, o)
    {
        char job[64], user[64], port[16], attempt[16], world[16], log[512], gpus[256] = "", alive[24];
        size_t k;
        const json_t *g;
        cell(job, sizeof(job), o, "job");
        cell(user, sizeof(user), o, "user");
        cell(port, sizeof(port), o, "master_port");
        cell(attempt, sizeof(attempt), o, "attempt");
        cell(world, sizeof(world), o, "world_size");
        cell(log, sizeof(log), o, "log_dir");
        snprintf(alive, sizeof(alive), "%lld/%lld", (long long)json_integer_value(json_object_get(o, "ranks_alive")),
                 (long long)json_integer_value(json_object_get(o, "nproc")));
        json_array_foreach(json_object_get(o, "gpus"), k, g)
        {
            size_t n = strlen(gpus);
            snprintf(gpus + n, sizeof(gpus) - n, "%s%s", n ? "," : "",
                     json_string_value(g) ? json_string_value(g) : "?");
        }
        ddp_printable(gpus);
        long long age = (long long)json_integer_value(json_object_get(o, "age_s"));
        char agebuf[16];
        snprintf(agebuf, sizeof(agebuf), age >= 3600 ? "%lldh%02lldm" : "%lldm%02llds",
                 age >= 3600 ? age / 3600 : age / 60, age >= 3600 ? age % 3600 / 60 : age % 60);
        fprintf(out, "%-16s %-10s %-8lld %-6s %-7s %-5s %-8s %-7s %-20s %s\n", job, user,
                (long long)json_integer_value(json_object_get(o, "pid")), port, attempt, world, alive, agebuf,
                gpus[0] ? gpus : "-", log);
    }
    json_decref(a);
    return 0;
}
