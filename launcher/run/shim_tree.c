/* shim_tree: the exec shim's process tree, read from /proc: the shim's descendants (a child subreaper's whole tree,
 * zombies told apart) and the subtrees a killed shim left its parent. It reads; it never signals or reaps. */
#include "run/shim_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "host/rundir.h"

static void procs_add(struct ddp_shim_procs *p, pid_t pid, pid_t ppid, char state)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 512;
        p->pid = ddp_xrealloc(p->pid, p->cap * sizeof(*p->pid));
        p->ppid = ddp_xrealloc(p->ppid, p->cap * sizeof(*p->ppid));
        p->state = ddp_xrealloc(p->state, p->cap);
    }
    p->pid[p->n] = pid;
    p->ppid[p->n] = ppid;
    p->state[p->n] = state;
    p->n++;
}

/* pid's state and parent from /proc/PID/stat ("pid (comm) S ppid ..."; comm may hold spaces and parentheses,
 * so parse after the last ')'). 0, or -1 when it is gone. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    int pp;
    if (!rp || sscanf(rp + 1, " %c %d", state, &pp) != 2)
        return -1;
    *ppid = (pid_t)pp;
    return 0;
}

/* Every process of the machine with its parent. */
static void procs_scan_all(struct ddp_shim_procs *p)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        long long pid;
        char st;
        pid_t ppid;
        if (ddp_parse_int(e->d_name, 1, 1LL << 31, &pid) == 0 && proc_stat((pid_t)pid, &st, &ppid) == 0)
            procs_add(p, (pid_t)pid, ppid, st);
    }
    closedir(d);
}

/* The children of pid that each of its threads started (/proc/PID/task/TID/children, zombies included) into p.
 * -1 when the kernel has no such files (CONFIG_PROC_CHILDREN off). */
static int procs_add_children(struct ddp_shim_procs *p, pid_t pid)
{
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0; /* gone */
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%.20s/children", (int)pid, e->d_name);
        char *text = NULL;
        int r = ddp_rundir_read_small(AT_FDCWD, path, 1 << 16, &text); /* a cut-off pid fails the check below */
        if (r < 0) {
            rc = r == -ENOENT && pid == getpid() ? -1 : 0; /* our own task: the file is missing, not gone */
            continue;
        }
        for (const char *q = text; *q;) {
            char *end;
            long c = strtol(q, &end, 10);
            if (end == q)
                break;
            q = end;
            char st;
            pid_t ppid;
            if (c > 0 && proc_stat((pid_t)c, &st, &ppid) == 0 && ppid == pid)
                procs_add(p, (pid_t)c, pid, st);
        }
        free(text);
    }
    closedir(d);
    return rc;
}

/* This process's descendants with their parents: walked down from here, so that a thousand shims ending at
 * once read their own trees, not every process of the machine each. Every process of the machine when the
 * kernel lists no children. */
void ddp_shim_tree_scan(struct ddp_shim_procs *p)
{
    p->n = 0;
    if (procs_add_children(p, getpid()) < 0) {
        p->n = 0;
        procs_scan_all(p);
        return;
    }
    for (size_t i = 0; i < p->n && p->n < (1u << 20); i++) /* bounded, should pids be reused mid-walk */
        procs_add_children(p, p->pid[i]);
}

bool ddp_shim_tree_has(const pid_t *v, size_t n, pid_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* The descendants of this process, zombies included, into p->[0..return) (p reordered); the subtrees of the
 * children in skip[0..nskip) are left out. */
size_t ddp_shim_tree_of(struct ddp_shim_procs *p, const pid_t *skip, size_t nskip)
{
    pid_t me = getpid();
    size_t nd = 0; /* p->[0..nd) are descendants */
    bool grew = true;
    while (grew) {
        grew = false;
        for (size_t i = nd; i < p->n; i++) {
            bool mine = p->ppid[i] == me && !ddp_shim_tree_has(skip, nskip, p->pid[i]);
            for (size_t j = 0; j < nd && !mine; j++)
                mine = p->ppid[i] == p->pid[j];
            if (!mine)
                continue;
            pid_t tp = p->pid[i], tpp = p->ppid[i];
            char ts = p->state[i];
            p->pid[i] = p->pid[nd];
            p->ppid[i] = p->ppid[nd];
            p->state[i] = p->state[nd];
            p->pid[nd] = tp;
            p->ppid[nd] = tpp;
            p->state[nd] = ts;
            nd++;
            grew = true;
        }
    }
    return nd;
}

/* The descendants of the shim that are not zombies, into p->pid[0..return) (p reordered). */
size_t ddp_shim_tree_live(struct ddp_shim_procs *p)
{
    size_t nd = ddp_shim_tree_of(p, NULL, 0);
    /* zombies count for the tree above, not as processes to end */
    size_t live = 0;
    for (size_t i = 0; i < nd; i++)
        if (p->state[i] != 'Z' && p->state[i] != 'X')
            p->pid[live++] = p->pid[i];
    return live;
}

void ddp_shim_tree_free(struct ddp_shim_procs *p)
{
    free(p->pid);
    free(p->ppid);
    free(p->state);
    memset(p, 0, sizeof *p);
}
