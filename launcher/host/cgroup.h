/* cgroup: a cgroup v2 per attempt, where this process may make one below its own (root, or a cgroup delegated
 * to the user: a systemd user slice, a Slurm step with cgroup v2): the attempt's processes join it (the exec
 * shim does), it gives the attempt's CPU time and peak memory, and cgroup.kill ends whatever is still in it.
 * Optional: without a writable cgroup v2 nothing changes (the shim's subreaper still ends every descendant).
 * It does not limit resources and never touches cgroups that no ddplaunch made. */
#ifndef DDP_CGROUP_H
#define DDP_CGROUP_H

#include "base/util.h"

/* This process's cgroup v2 directory from the texts of /proc/self/cgroup and /proc/self/mountinfo (the
 * "0::/path" line under the cgroup2 mount, pure v2 or hybrid). Pure. Returns 0 with *dir_out (caller frees),
 * or -ENOENT when there is no cgroup v2. */
int ddp_cgroup_parse_self(const char *proc_cgroup, const char *mountinfo, char **dir_out);

/* The directory where attempt cgroups can be made now: this process's cgroup v2 when it is writable by us and
 * allows children (no controllers enabled for a subtree that holds us). 0 with *dir_out, or a negative errno
 * (no cgroup v2, not delegated). */
int ddp_cgroup_base(char **dir_out);

/* End and remove the attempt and standby cgroups in base ("ddplaunch-PID-attempt-N", "ddplaunch-PID-standby")
 * whose launcher PID is gone (no process of that pid, or one started after the cgroup was made; its name does
 * not matter): what a SIGKILLed launcher left. Nothing is looked at further unless some PID has no process at
 * all (the common case costs one readdir and no read of the launchers' locks), so a cgroup whose pid was taken
 * again waits until that process ends. Returns how many were removed. */
int ddp_cgroup_sweep(const char *base);

/* Make base/name (removing a stale empty one). 0 with *path_out (caller frees), or a negative errno. */
int ddp_cgroup_create(const char *base, const char *name, char **path_out);

/* Move the calling process into the cgroup path (the exec shim's way where ddp_cgroup_fork_into cannot). */
int ddp_cgroup_join(const char *path);
/* fork() whose child starts in the cgroup open at cgfd (clone3 with CLONE_INTO_CGROUP, Linux 5.7): no migration,
 * so none of the system-wide lock and RCU wait that writing cgroup.procs costs (10 ms for the first of a burst,
 * and a thousand shims joining at once queue behind each other). Returns the child's pid in the parent, 0 in the
 * child, or a negative errno (ENOSYS, E2BIG or EINVAL on older kernels: join and fork instead). The child has
 * only the calling thread and must stick to async-signal-safe calls until it execs, as after fork(), and more:
 * no atfork handler ran. */
long ddp_cgroup_fork_into(int cgfd);
/* Move process pid (all its threads) into the cgroup path (a standby interpreter joining the attempt it runs
 * for). 0 or a negative errno. */
int ddp_cgroup_move(const char *path, int pid);

/* What the attempt used: CPU time (cpu.stat usage_usec) and peak memory (memory.peak; -1 when the memory
 * controller is not enabled there). 0 or a negative errno. */
int ddp_cgroup_stats(const char *path, long long *cpu_usec, long long *mem_peak);

/* SIGKILL everything still in path (cgroup.kill, or each pid of cgroup.procs on kernels before 5.14), wait up
 * to 2 s for it to empty, and remove it. Returns how many processes were still there (0 normally). */
int ddp_cgroup_kill_remove(const char *path);

#endif
