/* port: see port.h. */
#include "host/port.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "host/klock.h"
#include "host/rundir.h"

struct ddp_port_resv {
    int port;
    int lock_fd; /* -1 when reserved by bind test alone */
};

int ddp_port_spec_parse(const char *s, struct ddp_port_spec *out, struct ddp_err *err)
{
    struct ddp_port_spec ps = {0};
    long long v;
    if (!s)
        return ddp_errf(err, -EINVAL, "expected a port number 1-65535, 'auto' or 'auto:LO-HI'");
    if (strcmp(s, "auto") == 0 || strcmp(s, "0") == 0) {
        ps.is_auto = true;
    } else if (strncmp(s, "auto:", 5) == 0) {
        const char *r = s + 5;
        const char *dash = strchr(r, '-');
        long long lo, hi;
        if (!dash)
            return ddp_errf(err, -EINVAL, "'%s': expected auto:LO-HI, e.g. auto:29500-29999", s);
        char *los = ddp_xstrndup(r, (size_t)(dash - r));
        int rc1 = ddp_parse_int(los, 1, 65535, &lo);
        int rc2 = ddp_parse_int(dash + 1, 1, 65535, &hi);
        free(los);
        if (rc1 < 0 || rc2 < 0)
            return ddp_errf(err, -EINVAL, "'%s': expected auto:LO-HI with ports 1-65535", s);
        if (lo > hi)
            return ddp_errf(err, -EINVAL, "'%s': the range is empty (LO %lld > HI %lld)", s, lo, hi);
        ps.is_auto = true;
        ps.lo = (int)lo;
        ps.hi = (int)hi;
    } else if (ddp_parse_int(s, 1, 65535, &v) == 0) {
        ps.port = (int)v;
    } else {
        return ddp_errf(err, -EINVAL, "'%s': expected a port number 1-65535, 'auto' or 'auto:LO-HI'", s);
    }
    *out = ps;
    return 0;
}

static bool parse_ephemeral(const char *text, int *elo, int *ehi)
{
    return text && sscanf(text, "%d %d", elo, ehi) == 2 && *elo > 0 && *elo <= *ehi;
}

char *ddp_port_ephemeral_range(void)
{
    char buf[64] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

    if (!f)
        return NULL;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    return buf[0] ? ddp_xstrdup(buf) : NULL;
}

bool ddp_port_range_overlaps_ephemeral(const char *text, int lo, int hi)
{
    int elo, ehi;
    return parse_ephemeral(text, &elo, &ehi) && lo <= ehi && hi >= elo;
}

void ddp_port_default_range(const char *text, int *lo, int *hi)
{
    int elo, ehi;
    *lo = DDP_PORT_AUTO_LO;
    *hi = DDP_PORT_AUTO_HI;
    if (!parse_ephemeral(text, &elo, &ehi) || *hi < elo || *lo > ehi)
        return;
    const int width = DDP_PORT_AUTO_HI - DDP_PORT_AUTO_LO + 1;
    if (elo - 1 >= 1024 + width) { /* room below the ephemeral range */
        *hi = elo - 1;
        *lo = *hi - width + 1;
    } else if (ehi + width <= 65535) {
        *lo = ehi + 1;
        *hi = *lo + width - 1;
    } /* else: the ephemeral range covers nearly everything; keep the default */
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The ports other launchers take by default: torchrun's MASTER_PORT and the c10d rendezvous port. */
static const int well_known[] = {DDP_PORT_TORCHRUN, DDP_PORT_C10D};

int ddp_port_candidate(int lo, int hi, unsigned start, unsigned i)
{
    if (hi < lo)
        return lo;
    unsigned n = (unsigned)(hi - lo) + 1, k = 0;
    unsigned pos[2]; /* where the well-known ports of [lo, hi] fall in the rotation from start, ascending */
    for (size_t w = 0; w < sizeof well_known / sizeof well_known[0]; w++)
        if (well_known[w] >= lo && well_known[w] <= hi) {
            unsigned at = ((unsigned)(well_known[w] - lo) + n - start % n) % n;
            if (k && pos[0] > at) {
                pos[1] = pos[0];
                pos[0] = at;
            } else {
                pos[k] = at;
            }
            k++;
        }
    i %= n;
    unsigned j;
    if (i < n - k) { /* the i-th position that holds no well-known port */
        j = i;
        for (unsigned w = 0; w < k; w++)
            if (pos[w] <= j)
                j++;
    } else { /* nothing else left: the well-known ones, last */
        j = pos[i - (n - k)];
    }
    return lo + (int)((start % n + j) % n);
}

int ddp_port_job_candidate(unsigned long long job_id, unsigned long long step_id, int lo, int hi, unsigned i)
{
    if (hi < lo)
        return lo;
    uint64_t n = (uint64_t)(hi - lo) + 1;
    uint64_t h = mix64(mix64(job_id) ^ step_id);
    return ddp_port_candidate(lo, hi, (unsigned)(h % n), i);
}

int ddp_port_job_port(unsigned long long job_id, unsigned long long step_id, const struct ddp_port_spec *ps)
{
    int lo = ps->lo > 0 ? ps->lo : DDP_PORT_AUTO_LO;
    int hi = ps->hi > 0 ? ps->hi : DDP_PORT_AUTO_HI;
    return ddp_port_job_candidate(job_id, step_id, lo, hi, 0);
}

/* "0100007F" -> 127.0.0.1; 32 hex digits -> IPv6. The kernel prints each 32-bit word in host order. */
static int decode_addr(const char *hex, bool v6, char *out, size_t len)
{
    size_t words = v6 ? 4 : 1;
    if (strlen(hex) != words * 8)
        return -EINVAL;
    uint32_t w[4] = {0};
    for (size_t i = 0; i < words; i++) {
        char part[9];
        memcpy(part, hex + i * 8, 8);
        part[8] = '\0';
        char *end;
        w[i] = (uint32_t)strtoul(part, &end, 16);
        if (*end)
            return -EINVAL;
    }
    if (!inet_ntop(v6 ? AF_INET6 : AF_INET, w, out, (socklen_t)len))
        return -EINVAL;
    return 0;
}

int ddp_port_parse_listeners(const char *text, bool v6, int port, struct ddp_port_listener *out, size_t max)
{
    if (!text)
        return -EINVAL;
    int count = 0;
    bool header = false;
    const char *line = text;
    while (*line) {
        char buf[512];
        line = ddp_line_next(line, buf, sizeof buf);
        if (strstr(buf, "local_address")) {
            header = true;
            continue;
        }
        char addr[40];
        unsigned int lport, state, uid;
        unsigned long long inode;
        int n =
            sscanf(buf, " %*d: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %u %*d %llu", addr, &lport, &state, &uid, &inode);
        if (n != 5) {
            if (buf[strspn(buf, " \t\r")] != '\0' && !header)
                return -EINVAL;
            continue;
        }
        if (state != 0x0A || (int)lport != port) /* TCP_LISTEN */
            continue;
        if ((size_t)count < max) {
            struct ddp_port_listener *l = &out[count];
            l->inode = inode;
            l->uid = uid;
            if (decode_addr(addr, v6, l->addr, sizeof l->addr) < 0)
                snprintf(l->addr, sizeof l->addr, "?");
        }
        count++;
    }
    return count;
}

static char *read_text(const char *path, size_t max)
{
    char *text = NULL;
    if (ddp_rundir_read_small(AT_FDCWD, path, max, &text) < 0)
        return NULL;
    return text;
}

/* the first process with an fd on socket:[inode], or 0 */
static pid_t find_socket_owner(unsigned long long inode)
{
    char want[64];
    snprintf(want, sizeof want, "socket:[%llu]", inode);
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    pid_t found = 0;
    struct dirent *de;
    while (!found && (de = readdir(proc))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char fddir[300];
        snprintf(fddir, sizeof fddir, "/proc/%s/fd", de->d_name);
        DIR *fds = opendir(fddir);
        if (!fds)
            continue;
        struct dirent *fe;
        while ((fe = readdir(fds))) {
            if (fe->d_name[0] == '.')
                continue;
            char link[600], target[64];
            snprintf(link, sizeof link, "%s/%s", fddir, fe->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            if (strcmp(target, want) == 0) {
                found = (pid_t)atoi(de->d_name);
                break;
            }
        }
        closedir(fds);
    }
    closedir(proc);
    return found;
}

static void read_cmdline(pid_t pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    if (n <= 0)
        return;
    while (n > 0 && out[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == '\0' || out[i] == '\n')
            out[i] = ' ';
    out[n] = '\0';
}

int ddp_port_holder(int port, struct ddp_port_holder *h)
{
    memset(h, 0, sizeof *h);
    static const char *const files[2] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int f = 0; f < 2; f++) {
        char *text = read_text(files[f], 4u << 20);
        if (!text)
            continue;
        struct ddp_port_listener ls[8];
        int n = ddp_port_parse_listeners(text, f == 1, port, ls, 8);
        free(text);
        for (int i = 0; i < n && i < 8; i++) {
            h->uid = ls[i].uid;
            snprintf(h->addr, sizeof h->addr, "%s", ls[i].addr);
            h->pid = ls[i].inode ? find_socket_owner(ls[i].inode) : 0;
            if (h->pid > 0) {
                ddp_rundir_proc_identity(h->pid, h->comm, sizeof h->comm, h->user, sizeof h->user);
                read_cmdline(h->pid, h->cmdline, sizeof h->cmdline);
                ddp_printable(h->cmdline);
                return 0;
            }
        }
        if (n > 0) {
            snprintf(h->user, sizeof h->user, "uid %u", h->uid);
            return 0; /* a listener, but its process is not visible to us */
        }
    }
    return -ENOENT;
}

/* Whether a socket listening on addr (as /proc/net/tcp{,6} gives it) takes a connection to 127.0.0.1: IPv4's
 * wildcard or a loopback address, IPv6's wildcard (dual-stack unless IPV6_V6ONLY, which /proc does not show: counted)
 * or a v4-mapped one of those. */
static bool takes_loopback(const char *addr, bool v6)
{
    if (v6 && strncmp(addr, "::ffff:", 7) == 0) {
        addr += 7;
        v6 = false;
    }
    if (v6)
        return strcmp(addr, "::") == 0;
    return strcmp(addr, "0.0.0.0") == 0 || strncmp(addr, "127.", 4) == 0;
}

/* Whether the process /proc/NAME is one of groups or in one of their process groups. */
static bool in_groups(const char *name, const pid_t *groups, size_t n)
{
    char path[300], buf[1024];
    pid_t pid = (pid_t)atoi(name);
    int pgrp = 0;
    for (size_t i = 0; i < n; i++)
        if (groups[i] > 0 && groups[i] == pid)
            return true;
    snprintf(path, sizeof path, "/proc/%s/stat", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[len > 0 ? len : 0] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    if (!p || sscanf(p + 1, " %*c %*d %d", &pgrp) != 1 || pgrp <= 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (groups[i] == pgrp)
            return true;
    return false;
}

/* Mark in seen[] which of the socket inodes ino[0..n) the process /proc/NAME has open. */
static void mark_open(const char *name, const unsigned long long *ino, bool *seen, size_t n)
{
    char fddir[300];
    snprintf(fddir, sizeof fddir, "/proc/%s/fd", name);
    DIR *fds = opendir(fddir);
    if (!fds)
        return;
    for (struct dirent *fe; (fe = readdir(fds)) != NULL;) {
        char link[600], target[64];
        unsigned long long got;
        snprintf(link, sizeof link, "%s/%s", fddir, fe->d_name);
        ssize_t len = fe->d_name[0] == '.' ? -1 : readlink(link, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%llu]", &got) == 1)
            for (size_t i = 0; i < n; i++)
                seen[i] |= ino[i] == got;
    }
    closedir(fds);
}

int ddp_port_listener_owned(int port, const pid_t *groups, size_t ngroups, struct ddp_port_holder *other)
{
    enum { MAXL = 16 };
    static const char *const files[2] = {"/proc/net/tcp", "/proc/net/tcp6"};
    struct ddp_port_listener ls[2 * MAXL];
    unsigned long long ino[2 * MAXL];
    bool seen[2 * MAXL] = {false};
    size_t n = 0;
    memset(other, 0, sizeof *other);
    for (int f = 0; f < 2; f++) {
        char *text = read_text(files[f], 4u << 20);
        struct ddp_port_listener got[MAXL];
        int k = text ? ddp_port_parse_listeners(text, f == 1, port, got, MAXL) : 0;
        free(text);
        for (int i = 0; i < k && i < MAXL; i++)
            if (takes_loopback(got[i].addr, f == 1)) {
                ls[n] = got[i];
                ino[n++] = got[i].inode;
            }
    }
    if (!n)
        return -ENOENT;
    DIR *proc = opendir("/proc");
    for (struct dirent *de; proc && (de = readdir(proc)) != NULL;)
        if (de->d_name[0] >= '1' && de->d_name[0] <= '9' && in_groups(de->d_name, groups, ngroups))
            mark_open(de->d_name, ino, seen, n);
    if (proc)
        closedir(proc);
    for (size_t i = 0; i < n; i++) {
        if (seen[i] && ino[i])
            continue;
        other->uid = ls[i].uid;
        snprintf(other->addr, sizeof other->addr, "%s", ls[i].addr);
        other->pid = ino[i] ? find_socket_owner(ino[i]) : 0;
        if (other->pid <= 0 ||
            ddp_rundir_proc_identity(other->pid, other->comm, sizeof other->comm, other->user, sizeof other->user) < 0)
            snprintf(other->user, sizeof other->user, "uid %u", other->uid);
        return 0;
    }
    return 1;
}

static int bind_test(int family, int port)
{
    int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return (family == AF_INET6 && errno == EAFNOSUPPORT) ? 0 : -errno;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (family == AF_INET6) {
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        struct sockaddr_in6 a = {
            .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_ANY_INIT};
        rc = bind(s, (struct sockaddr *)&a, sizeof a);
        if (rc < 0 && errno == EADDRNOTAVAIL) { /* no IPv6 on this host */
            close(s);
            return 0;
        }
    } else {
        struct sockaddr_in a = {
            .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_ANY)}};
        rc = bind(s, (struct sockaddr *)&a, sizeof a);
    }
    if (rc == 0)
        rc = listen(s, 1);
    rc = rc < 0 ? -errno : 0;
    close(s);
    return rc;
}

int ddp_port_probe(int port)
{
    int rc = bind_test(AF_INET, port);
    if (rc == 0)
        rc = bind_test(AF_INET6, port);
    return rc;
}

static void port_lock_name(const char *ns, int port, char out[DDP_KLOCK_NAME_MAX + 1])
{
    char what[32];
    snprintf(what, sizeof what, "port-%d", port);
    ddp_klock_name(ns, what, out);
}

/* Try to take port's kernel lock: 1 taken (fd in *fd_out), 0 held by another job, negative errno. */
static int lock_port(const char *ns, int port, int *fd_out, struct ddp_err *err)
{
    char name[DDP_KLOCK_NAME_MAX + 1];
    port_lock_name(ns, port, name);
    int rc = ddp_klock_take(name, fd_out);
    if (rc < 0)
        return ddp_errf(err, rc, "port %d: cannot take its reservation: %s", port, strerror(-rc));
    return rc;
}

/* pid and uid come from the kernel (the lock's SO_PEERCRED, else its socket table); the command from /proc:
 * "pid 12, user bob, command ddplaunch" */
static void describe_holder(const struct ddp_klock_holder *h, char *buf, size_t len)
{
    char user[64] = "";
    struct passwd pw, *res = NULL;
    char pwbuf[1024];
    if (getpwuid_r(h->uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
        snprintf(user, sizeof user, "%s", res->pw_name);
    else
        snprintf(user, sizeof user, "uid %u", (unsigned)h->uid);
    ddp_printable(user);
    if (h->pid > 0)
        snprintf(buf, len, "pid %d, user %s, command %s%s", (int)h->pid, user, h->comm[0] ? h->comm : "?",
                 h->answers ? "" : ", not listening as a ddplaunch job does");
    else
        snprintf(buf, len, "a process of user %s whose pid this user cannot see%s", user,
                 h->answers ? "" : ", not listening as a ddplaunch job does");
}

int ddp_port_lock_holder(const char *lock_dir, int port, char *buf, size_t len)
{
    char name[DDP_KLOCK_NAME_MAX + 1];
    struct ddp_klock_holder h;
    port_lock_name(lock_dir, port, name);
    if (ddp_klock_holder(name, &h) < 0)
        return -ENOENT;
    if (!h.known)
        snprintf(buf, len, "holder unknown: the kernel does not say");
    else
        describe_holder(&h, buf, len);
    return 0;
}

int ddp_port_foreign_holders(const char *lock_dir, char *buf, size_t len)
{
    char prefix[DDP_KLOCK_NAME_MAX + 1];
    struct ddp_strv names = {0};
    int count = 0;
    size_t used = 0;
    ddp_klock_name(lock_dir, "port-", prefix);
    buf[0] = '\0';
    int rc = ddp_klock_list(prefix, &names);
    for (size_t i = 0; rc == 0 && i < names.n; i++) {
        struct ddp_klock_holder h;
        if (ddp_klock_holder(names.v[i], &h) < 0 || (h.answers && strcmp(h.comm, "ddplaunch") == 0))
            continue;
        if (++count <= 3 && used < len) {
            char who[200] = "";
            if (h.known)
                describe_holder(&h, who, sizeof who);
            else
                snprintf(who, sizeof who, "holder unknown: the kernel does not say");
            used += (size_t)snprintf(buf + used, len - used, "%s%s: %s", used ? "; " : "",
                                     names.v[i] + strlen(prefix) - strlen("port-"), who);
        }
    }
    ddp_strv_clear(&names);
    return rc < 0 ? rc : count;
}

int ddp_port_locks_held(const char *lock_dir, struct ddp_strv *held)
{
    char prefix[DDP_KLOCK_NAME_MAX + 1];
    ddp_klock_name(lock_dir, "port-", prefix);
    return ddp_klock_list(prefix, held);
}

bool ddp_port_lock_listed(const struct ddp_strv *held, const char *lock_dir, int port)
{
    char name[DDP_KLOCK_NAME_MAX + 1];
    port_lock_name(lock_dir, port, name);
    return ddp_klock_listed(held, name);
}

static int busy_message(int port, const char *addr, int probe_rc, struct ddp_err *err)
{
    struct ddp_port_holder h;
    if (ddp_port_holder(port, &h) == 0) {
        bool v6 = strchr(h.addr, ':') != NULL;
        if (h.pid > 0)
            return ddp_errf(err, -EADDRINUSE,
                            "master_port %d on %s is in use: pid %d (%s) of user %s listens on %s%s%s:%d "
                            "[command: %.60s%s]; use master_port = auto to pick a free port",
                            port, addr, (int)h.pid, h.comm, h.user, v6 ? "[" : "", h.addr, v6 ? "]" : "", port,
                            h.cmdline[0] ? h.cmdline : h.comm, strlen(h.cmdline) > 60 ? "..." : "");
        return ddp_errf(err, -EADDRINUSE,
                        "master_port %d on %s is in use by a process of %s that this user cannot see "
                        "(listening on %s); use master_port = auto to pick a free port",
                        port, addr, h.user, h.addr);
    }
    return ddp_errf(err, -EADDRINUSE,
                    "master_port %d on %s cannot be bound (%s; no process listens on it: a socket may "
                    "hold it without listening); use master_port = auto to pick a free port",
                    port, addr, strerror(-probe_rc));
}

/* The port derived from a scheduler's job id is the one every node agrees on: a listener that goes within
 * DDP_PORT_SETTLE_MS (the rank 0 of a job that just ended, still exiting) does not make it busy. */
static int probe_settled(int port)
{
    int rc = ddp_port_probe(port);
    for (int waited = 0; rc == -EADDRINUSE && waited < DDP_PORT_SETTLE_MS; waited += 100) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        rc = ddp_port_probe(port);
    }
    return rc;
}

int ddp_port_reserve(const struct ddp_port_req *req, struct ddp_port_resv **out, int *port_out, struct ddp_err *err)
{
    const char *addr = req->addr && *req->addr ? req->addr : "localhost";

    int lo, hi;
    unsigned n;
    if (req->spec.is_auto) {
        lo = req->spec.lo;
        hi = req->spec.hi;
        if ((lo <= 0 || hi <= 0) && req->job_key) {
            lo = DDP_PORT_AUTO_LO; /* the same on every node: see ddp_port_job_port() */
            hi = DDP_PORT_AUTO_HI;
        } else if (lo <= 0 || hi <= 0) {
            ddp_port_default_range(req->ephemeral_range, &lo, &hi);
        }
        if (hi < lo) {
            return ddp_errf(err, -EINVAL, "master_port = auto:%d-%d is an empty range", lo, hi);
        }
        n = (unsigned)(hi - lo + 1);
        if (req->max_candidates && req->max_candidates < n)
            n = req->max_candidates;
    } else {
        lo = hi = req->spec.port;
        n = 1;
    }

    unsigned held = 0, in_use = 0;
    struct ddp_strv holders = {0};
    for (unsigned i = 0; i < n; i++) {
        int port = !req->spec.is_auto ? req->spec.port
                   : req->job_key     ? ddp_port_job_candidate(req->job_key, req->job_step_key, lo, hi, i)
                                      : ddp_port_candidate(lo, hi, 0, i);
        int fd = -1;
        {
            int rc = lock_port(req->lock_dir, port, &fd, err);
            if (rc < 0)
                return rc;
            if (rc == 0) {
                held++;
                if (req->spec.is_auto && holders.n < 3) { /* named in the refusal when every port is taken */
                    char who[200] = "";
                    ddp_port_lock_holder(req->lock_dir, port, who, sizeof who);
                    bool seen = false;
                    for (size_t k = 0; k < holders.n && !seen; k++)
                        seen = strcmp(holders.v[k], who) == 0;
                    if (!seen && who[0])
                        ddp_strv_push(&holders, who);
                }
                if (!req->spec.is_auto && req->quiet)
                    return ddp_errf(err, -EADDRINUSE, "master_port %d on %s is reserved by another process", port,
                                    addr);
                if (!req->spec.is_auto) {
                    char who[160] = "";
                    ddp_port_lock_holder(req->lock_dir, port, who, sizeof who);
                    return ddp_errf(err, -EADDRINUSE,
                                    "master_port %d on %s is reserved by another process (%s); "
                                    "use master_port = auto to pick a free port",
                                    port, addr, who[0] ? who : "holder unknown");
                }
                continue;
            }
        }
        int prc = req->job_key ? probe_settled(port) : ddp_port_probe(port);
        if (prc < 0) {
            if (fd >= 0)
                close(fd);
            in_use++;
            if (!req->spec.is_auto)
                return busy_message(port, addr, prc, err);
            continue;
        }
        struct ddp_port_resv *r = ddp_xcalloc(1, sizeof *r);
        r->port = port;
        r->lock_fd = fd;
        *out = r;
        *port_out = port;
        ddp_strv_clear(&holders);
        return 0;
    }
    struct ddp_buf who = {0};
    for (size_t k = 0; k < holders.n; k++)
        ddp_buf_printf(&who, "%s%s", k ? "; " : ": reserved by ", holders.v[k]);
    ddp_strv_clear(&holders);
    int rc;
    if (req->job_key && n < (unsigned)(hi - lo + 1))
        rc = ddp_errf(err, -EBUSY,
                      "the MASTER_PORT derived from the job id %llu (%d) is busy on this host "
                      "(%u reserved%s, %u in use); set master_port explicitly",
                      req->job_key, ddp_port_job_candidate(req->job_key, req->job_step_key, lo, hi, 0), held,
                      who.data ? who.data : "", in_use);
    else
        rc = ddp_errf(err, -EBUSY,
                      "no free port for master_port = auto in %d-%d on this host (%u reserved%s, %u in use); "
                      "widen the range with master_port = auto:LO-HI",
                      lo, hi, held, who.data ? who.data : "", in_use);
    ddp_buf_free(&who);
    return rc;
}

void ddp_port_release(struct ddp_port_resv *r)
{
    if (!r)
        return;
    if (r->lock_fd >= 0)
        close(r->lock_fd);
    free(r);
}
