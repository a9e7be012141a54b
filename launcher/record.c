/* record: see record.h. */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ddp_record {
    char *dir;
    int dirfd; /* borrowed */
    int fd;
    bool warned;
};

int ddp_record_open(int dirfd, const char *path, struct ddp_record **out, struct ddp_err *err)
{
    int fd = openat(dirfd, "events.jsonl", O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    *out = NULL;
    if (fd < 0)
        return ddp_errf(err, -errno, "%s/events.jsonl: %s", path, strerror(errno));
    struct ddp_record *r = ddp_xcalloc(1, sizeof(*r));
    r->dir = ddp_xstrdup(path);
    r->dirfd = dirfd;
    r->fd = fd;
    *out = r;
    return 0;
}

static json_t *stamped(const char *name, json_t *fields)
{
    struct timespec ts;
    char buf[32];
    json_t *o = json_object();
    clock_gettime(CLOCK_REALTIME, &ts);
    json_object_set_new(o, "v", json_integer(DDP_RECORD_VERSION));
    json_object_set_new(o, "ts", json_string(ddp_time_iso(&ts, buf)));
    if (name)
        json_object_set_new(o, "event", json_string(name));
    if (fields)
        json_object_update(o, fields);
    json_decref(fields);
    return o;
}

void ddp_record_event(struct ddp_record *r, const char *name, json_t *fields)
{
    if (!r) {
        json_decref(fields);
        return;
    }
    json_t *o = stamped(name, fields);
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps' NUL becomes the line's end: one write, one whole line (O_APPEND) */
    if (write(r->fd, line, n + 1) != (ssize_t)(n + 1) && !r->warned) {
        r->warned = true;
        ddp_warn("%s/events.jsonl: %s", r->dir, strerror(errno));
    }
    free(line);
}

int ddp_record_summary(struct ddp_record *r, json_t *summary)
{
    int rc = 0, fd;
    char *tmp, *path;
    json_t *o;
    char *text;
    if (!r) {
        json_decref(summary);
        return 0;
    }
    o = stamped(NULL, summary);
    text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    tmp = ddp_xasprintf(".summary.json.%d", (int)getpid());
    path = ddp_xasprintf("%s/summary.json", r->dir);
    fd = openat(r->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    size_t n = strlen(text);
    if (fd >= 0) {
        errno = 0;
        bool ok = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
        ok = close(fd) == 0 && ok;
        if (!ok || renameat(r->dirfd, tmp, r->dirfd, "summary.json") != 0) {
            rc = errno ? -errno : -EIO;
            unlinkat(r->dirfd, tmp, 0);
        }
    } else {
        rc = -errno;
    }
    if (rc < 0)
        ddp_warn("%s: %s", path, strerror(-rc));
    free(text);
    free(tmp);
    free(path);
    return rc;
}

const char *ddp_record_dir(const struct ddp_record *r)
{
    return r ? r->dir : NULL;
}

void ddp_record_close(struct ddp_record *r)
{
    if (!r)
        return;
    close(r->fd);
    free(r->dir);
    free(r);
}
