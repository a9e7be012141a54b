/* klock: see klock.h. */
#include "host/klock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <dirent.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdbool.h>
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

/* The owner uid and inode of the socket bound to the abstract name (listening, else bound and unconnected:
 * a listener's pending connections carry its name too, owned by nobody in particular), from the kernel's
 * unix socket table. 0, or a negative errno (-ENOENT: not found). */
static int diag_owner(const char *name, uid_t *uid, unsigned *ino)
{
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } q = {
        .nlh = {.nlmsg_len = sizeof q, .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .req = {.sdiag_family = AF_UNIX, .udiag_states = ~0u, .udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID},
    };
    struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
    size_t nlen = strlen(name);
    int best = -1; /* 2 listening, 1 bound */
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    if (sendto(fd, &q, sizeof q, 0, (struct sockaddr *)&nl, sizeof nl) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    static long buf[8192 / sizeof(long)];
    for (bool done = false; !done;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
                done = true;
                break;
            }
            struct unix_diag_msg *m = NLMSG_DATA(h);
            int rank = m->udiag_state == 10 /* TCP_LISTEN */ ? 2 : m->udiag_state == 7 /* TCP_CLOSE */ ? 1 : 0;
            bool match = false, has_uid = false;
            uid_t u = 0;
            int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
            for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == UNIX_DIAG_NAME) {
                    const char *p = RTA_DATA(a);
                    size_t plen = RTA_PAYLOAD(a);
                    match = plen == nlen + 1 && p[0] == '\0' && memcmp(p + 1, name, nlen) == 0;
                } else if (a->rta_type == UNIX_DIAG_UID && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
                    uint32_t v;
                    memcpy(&v, RTA_DATA(a), sizeof v);
                    u = (uid_t)v;
                    has_uid = true;
                }
            }
            if (match && has_uid && rank > best) {
                best = rank;
                *uid = u;
                *ino = m->udiag_ino;
            }
        }
    }
    close(fd);
    return best > 0 ? 0 : -ENOENT;
}

/* The process that has the socket inode ino open, among those whose fds this user may read; 0 if none. */
static pid_t pid_of_socket(unsigned ino)
{
    char want[48];
    snprintf(want, sizeof want, "socket:[%u]", ino);
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d)) != NULL) {
        long long pid;
        if (ddp_parse_int(e->d_name, 1, 1LL << 31, &pid) != 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%lld/fd", pid);
        DIR *fds = opendir(path);
        struct dirent *f;
        while (fds && !found && (f = readdir(fds)) != NULL) {
            char link[64];
            ssize_t n = readlinkat(dirfd(fds), f->d_name, link, sizeof link - 1);
            if (n <= 0)
                continue;
            link[n] = '\0';
            if (strcmp(link, want) == 0)
                found = (pid_t)pid;
        }
        if (fds)
            closedir(fds);
    }
    if (d)
        closedir(d);
    return found;
}

static void read_comm(pid_t pid, char *out, size_t cap)
{
    char path[64];
    out[0] = '\0';
    if (pid <= 0)
        return;
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    ddp_printable(out); /* another user's process may name itself with escape sequences */
}

int ddp_klock_holder(const char *name, struct ddp_klock_holder *h)
{
    struct sockaddr_un sa;
    socklen_t len = address(name, &sa);
    memset(h, 0, sizeof *h);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) == 0) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
            h->known = h->answers = true;
            h->pid = cr.pid;
            h->uid = cr.uid;
            read_comm(h->pid, h->comm, sizeof h->comm);
        }
        close(fd);
        return 0;
    }
    /* a full backlog (EAGAIN) is a listening holder all the same: nobody accepts, so after 64 questions about
     * one lock every later one lands here */
    bool listening = fd >= 0 && errno == EAGAIN;
    if (fd >= 0)
        close(fd);
    /* refused (bound but not listening, or free) or a full backlog: held or not, bind says; who, the kernel's
     * socket table */
    if (ddp_klock_probe(name) != 1)
        return -ENOENT;
    char abs_name[DDP_KLOCK_NAME_MAX + 1];
    snprintf(abs_name, sizeof abs_name, "%s", name);
    unsigned ino = 0;
    if (diag_owner(abs_name, &h->uid, &ino) == 0) {
        h->known = true;
        h->answers = listening;
        h->pid = pid_of_socket(ino);
        read_comm(h->pid, h->comm, sizeof h->comm);
    }
    return 0;
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
        ddp_strv_push(out, p + 1);
    }
    /* sorted, then each name once (a socket listed twice): n log n, not n^2, with a thousand agents' locks */
    if (out->n <= first)
        return;
    qsort(out->v + first, out->n - first, sizeof *out->v, cmp_str);
    size_t kept = first + 1;
    for (size_t i = first + 1; i < out->n; i++) {
        if (strcmp(out->v[i], out->v[kept - 1]) == 0)
            free(out->v[i]);
        else
            out->v[kept++] = out->v[i];
    }
    out->n = kept;
    out->v[kept] = NULL;
}

bool ddp_klock_listed(const struct ddp_strv *list, const char *name)
{
    return list->n && bsearch(&name, list->v, list->n, sizeof *list->v, cmp_str) != NULL;
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
