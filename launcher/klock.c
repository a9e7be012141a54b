/* klock: see klock.h. */
#include "klock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void ddp_klock_name(const char *ns, const char *what, char out[DDP_KLOCK_NAME_MAX + 1])
{
    ns = ns ? ns : "";
    if (strlen("ddplaunch") + strlen(ns) + 1 + strlen(what) <= DDP_KLOCK_NAME_MAX) {
        snprintf(out, DDP_KLOCK_NAME_MAX + 1, "ddplaunch%s/%s", ns, what);
        return;
    }
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)ns; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    snprintf(out, DDP_KLOCK_NAME_MAX + 1, "ddplaunch/h%016llx/%s", (unsigned long long)h, what);
}

static socklen_t address(const char *name, struct sockaddr_un *sa)
{
    size_t n = strlen(name);
    if (n > DDP_KLOCK_NAME_MAX)
        n = DDP_KLOCK_NAME_MAX;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = '\0': the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int ddp_klock_take(const char *name, int *fd_out)
{
    struct sockaddr_un sa;
    socklen_t len = address(name, &sa);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, len) < 0) {
        int e = errno;
        close(fd);
        return e == EADDRINUSE ? 0 : -e;
    }
    /* listening lets others ask the kernel who holds it (SO_PEERCRED of a connection); nobody accepts */
    if (listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *fd_out = fd;
    return 1;
}

int ddp_klock_probe(const char *name)
{
    int fd;
    int rc = ddp_klock_take(name, &fd);
    if (rc == 1) {
        close(fd);
        return 0;
    }
    return rc == 0 ? 1 : rc;
}

int ddp_klock_holder(const char *name, struct ddp_klock_holder *h)
{
    struct sockaddr_un sa;
    socklen_t len = address(name, &sa);
    memset(h, 0, sizeof *h);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return ddp_klock_probe(name) == 1 ? 0 : -ENOENT;
    if (connect(fd, (struct sockaddr *)&sa, len) == 0) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
            h->known = true;
            h->pid = cr.pid;
            h->uid = cr.uid;
        }
        close(fd);
        return 0;
    }
    close(fd);
    /* refused (bound but not listening, or free) or a full backlog: held or not, bind says */
    return ddp_klock_probe(name) == 1 ? 0 : -ENOENT;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void ddp_klock_parse_list(const char *text, const char *prefix, struct ddp_strv *out)
{
    char line[512];
    size_t plen = strlen(prefix);
    size_t first = out->n;
    while (text && *text) {
        text = ddp_line_next(text, line, sizeof line);
        /* Num RefCount Protocol Flags Type St Inode Path: the path is the 8th field */
        char *p = line;
        for (int f = 0; f < 7 && p; f++) {
            p += strspn(p, " ");
            p = strchr(p, ' ');
        }
        if (!p)
            continue;
        p += strspn(p, " ");
        if (p[0] != '@' || strncmp(p + 1, prefix, plen) != 0)
            continue;
        bool dup = false;
        for (size_t i = first; i < out->n && !dup; i++)
            dup = strcmp(out->v[i], p + 1) == 0;
        if (!dup)
            ddp_strv_push(out, p + 1);
    }
    if (out->n > first)
        qsort(out->v + first, out->n - first, sizeof *out->v, cmp_str);
}

int ddp_klock_list(const char *prefix, struct ddp_strv *out)
{
    int fd = open("/proc/net/unix", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct ddp_buf b = {0};
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            ddp_buf_add(&b, chunk, (size_t)n);
    int e = n < 0 ? -errno : 0;
    close(fd);
    ddp_buf_add(&b, "", 1);
    if (e == 0)
        ddp_klock_parse_list(b.data, prefix, out);
    ddp_buf_free(&b);
    return e;
}
