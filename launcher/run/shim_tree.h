/* shim_tree: the exec shim's process tree, read from /proc (shim.c's descendants to end, and what a killed shim
 * left the launcher). It only reads /proc: it never signals, reaps or waits (shim.c does). */
#ifndef DDP_SHIM_TREE_H
#define DDP_SHIM_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Processes with their parents and states (/proc/PID/stat's letter), in three arrays of n. Zero-initialise;
 * free with ddp_shim_tree_free(). */
struct ddp_shim_procs {
    pid_t *pid, *ppid;
    char *state;
    size_t n, cap;
};

/* Fills p (emptied first) with this process's descendants and their parents, walked down from here
 * (/proc/PID/task/TID/children), or with every process of the machine when the kernel lists no children. */
void ddp_shim_tree_scan(struct ddp_shim_procs *p);
/* Reorders p so that p->[0..return) are the descendants of this process, zombies included; the subtrees of the
 * children in skip[0..nskip) are left out. */
size_t ddp_shim_tree_of(struct ddp_shim_procs *p, const pid_t *skip, size_t nskip);
/* The descendants of this process that are not zombies, into p->pid[0..return) (p reordered). */
size_t ddp_shim_tree_live(struct ddp_shim_procs *p);
/* Whether x is one of v[0..n). */
bool ddp_shim_tree_has(const pid_t *v, size_t n, pid_t x);
/* Frees p's arrays and zeroes it. */
void ddp_shim_tree_free(struct ddp_shim_procs *p);

#endif
