/* holders: see holders.h. */
#include "topo/holders.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

#define PERSISTENCED "/usr/bin/nvidia-persistenced"

/* 1 with the device's path in dev when the process whose /proc directory is pidfd has a descriptor on
 * /dev/nvidia*, 0 when none, -1 when its fd directory is not readable (-2: it exited meanwhile). */
static int pid_holds(int pidfd, char *dev, size_t size)
{
    int fdd = openat(pidfd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdd < 0)
        return errno == ENOENT || errno == ESRCH ? -2 : -1;
    DIR *d = fdopendir(fdd);
    if (!d) {
        close(fdd);
        return -1;
    }
    int found = 0;
    char link[64];
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) { /* a readdir that failed part way has not seen every descriptor: not known */
            if (errno && errno != ENOENT)
                found = -1;
            break;
        }
        if (e->d_name[0] == '.')
            continue;
        ssize_t n = readlinkat(fdd, e->d_name, link, sizeof link - 1);
        if (n < 0 && errno != ENOENT) { /* ENOENT: closed meanwhile */
            found = -1;
            break;
        }
        if (n > 11 && memcmp(link, "/dev/nvidia", 11) == 0) {
            link[n] = '\0';
            snprintf(dev, size, "%s", link);
            found = 1;
            break;
        }
    }
    closedir(d);
    return found;
}

/* The persistence daemon: root's process running the driver's own daemon binary. */
static bool persistenced(int pidfd)
{
    char exe[sizeof PERSISTENCED + 16];
    struct stat st;
    ssize_t n = readlinkat(pidfd, "exe", exe, sizeof exe - 1);
    if (n <= 0 || fstat(pidfd, &st) < 0 || st.st_uid != 0)
        return false;
    exe[n] = '\0';
    return strcmp(exe, PERSISTENCED) == 0;
}

static void comm_of(int pidfd, char *comm, size_t size)
{
    int fd = openat(pidfd, "comm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, comm, size - 1) : -1;
    if (fd >= 0)
        close(fd);
    comm[n > 0 ? n : 0] = '\0';
    comm[strcspn(comm, "\n")] = '\0';
    ddp_printable(comm); /* another user names it */
}

bool ddp_holders_none(const char *proc_root, int self_pid, char *why, size_t size)
{
    char path[4096], ns[64];
    snprintf(path, sizeof path, "%s/self/ns/pid", proc_root);
    ssize_t n = readlink(path, ns, sizeof ns - 1);
    unsigned long long ino = 0;
    if (n <= 0 || (ns[n] = '\0', sscanf(ns, "pid:[%llu]", &ino) != 1) || ino != DDP_HOLDERS_INIT_PIDNS) {
        snprintf(why, size, "not the host's pid namespace (%s): processes out of sight may hold a GPU",
                 n > 0 ? ns : "unknown");
        return false;
    }
    int rootfd = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = rootfd >= 0 ? fdopendir(rootfd) : NULL;
    if (!d) {
        snprintf(why, size, "%s: %s", proc_root, strerror(errno));
        if (rootfd >= 0)
            close(rootfd);
        return false;
    }
    if (faccessat(rootfd, "1", F_OK, 0) != 0) { /* hidepid: other users' processes are not even listed */
        snprintf(why, size, "pid 1 is out of sight in %s (hidepid): other users' processes may hold a GPU", proc_root);
        closedir(d);
        return false;
    }
    bool none = true;
    for (struct dirent *e; none && (e = readdir(d)) != NULL;) {
        if (!isdigit((unsigned char)e->d_name[0]) || atoi(e->d_name) == self_pid)
            continue;
        int pidfd = openat(rootfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pidfd < 0)
            continue; /* exited */
        char dev[64], comm[64];
        int held = pid_holds(pidfd, dev, sizeof dev);
        if (held == -1) {
            snprintf(why, size, "pid %s's descriptors are not readable here", e->d_name);
            none = false;
        } else if (held == 1 && !persistenced(pidfd)) {
            comm_of(pidfd, comm, sizeof comm);
            snprintf(why, size, "pid %s (%s) has %s open", e->d_name, comm, dev);
            none = false;
        }
        close(pidfd);
    }
    closedir(d);
    if (none)
        snprintf(why, size, "no process holds /dev/nvidia* (%s)", proc_root);
    return none;
}

int ddp_holders_pid(const char *proc_root, unsigned pid)
{
    char path[4096], dev[64];
    snprintf(path, sizeof path, "%s/%u", proc_root, pid);
    int pidfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pidfd < 0)
        return -1;
    int held = pid_holds(pidfd, dev, sizeof dev);
    close(pidfd);
    return held < 0 ? -1 : held;
}

/* The inode of the pid namespace link at proc_root/rel ("self/ns/pid"), 0 when it cannot be read. */
static unsigned long long pidns_of(const char *proc_root, const char *rel)
{
    char path[4096], ns[64];
    unsigned long long ino = 0;
    snprintf(path, sizeof path, "%s/%s", proc_root, rel);
    ssize_t n = readlink(path, ns, sizeof ns - 1);
    if (n <= 0)
        return 0;
    ns[n] = '\0';
    return sscanf(ns, "pid:[%llu]", &ino) == 1 ? ino : 0;
}

/* The NSpid line of proc_root/rel ("self/status"): the process's pid in each pid namespace from proc_root's own
 * down to its own, up to max of them into v; returns how many there are (0: none, or not readable). */
static size_t nspid_of(const char *proc_root, const char *rel, unsigned *v, size_t max)
{
    char path[4096], line[512];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", proc_root, rel);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "NSpid:", 6) != 0)
            continue;
        char *p = line + 6, *end;
        for (;;) {
            unsigned long x = strtoul(p, &end, 10);
            if (end == p)
                break;
            if (n < max)
                v[n] = (unsigned)x;
            n++;
            p = end;
        }
        break;
    }
    fclose(f);
    return n;
}

int ddp_holders_host_pid(const char *proc_root, unsigned host_pid, unsigned *here)
{
    char rel[64];
    unsigned self[32], them[32];
    unsigned long long own = pidns_of(proc_root, "self/ns/pid");
    if (own == DDP_HOLDERS_INIT_PIDNS) {
        *here = host_pid;
        return 1;
    }
    /* a /proc that shows host pids: the host's own (its pid 1 is the host's init), mounted into this namespace */
    if (!own || host_pid == 0 || pidns_of(proc_root, "1/ns/pid") != DDP_HOLDERS_INIT_PIDNS)
        return 0;
    size_t levels = nspid_of(proc_root, "self/status", self, 32);
    snprintf(rel, sizeof rel, "%u/ns/pid", host_pid);
    if (levels < 2 || levels > 32 || pidns_of(proc_root, rel) != own)
        return 0;
    snprintf(rel, sizeof rel, "%u/status", host_pid);
    if (nspid_of(proc_root, rel, them, 32) != levels || them[0] != host_pid)
        return 0;
    *here = them[levels - 1];
    return 1;
}
