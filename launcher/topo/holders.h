/* holders: which processes of this host hold an NVIDIA device (/dev/nvidia*) open, read from /proc without
 * NVML: the cheap, sound answer to "does any other process use a GPU now" (an nvmlInit costs ~20 ms; this scan
 * well under one). It does not know which GPU or how much memory a process holds: NVML does (nvml.h). */
#ifndef DDP_HOLDERS_H
#define DDP_HOLDERS_H

#include <stdbool.h>
#include <stddef.h>

/* The inode of the host's first pid namespace (the kernel's PROC_PID_INIT_INO): /proc/self/ns/pid names it
 * when this process sees every process of the host, containers' included. */
#define DDP_HOLDERS_INIT_PIDNS 4026531836ULL

/* Whether no process but self_pid holds an NVIDIA device, from the proc file system at proc_root ("/proc";
 * tests give a tree of their own). true only when all of these hold: proc_root/self/ns/pid is the host's first
 * pid namespace (so no process is out of sight), pid 1 is listed (hidepid would hide other users' processes),
 * every process's fd directory was readable (root, or only our own user's processes), and no process other than
 * self_pid has a descriptor on /dev/nvidia*; the NVIDIA persistence daemon (root's, running
 * /usr/bin/nvidia-persistenced: it keeps the driver loaded and never holds GPU memory) is not counted. Otherwise false,
 * with why (one line: "pid 836 (python3) has /dev/nvidia0 open", "pid 1's descriptors are not readable here", "not the
 * host's pid namespace", "pid 1 is out of sight in /proc (hidepid)"): NVML must be asked. Never says "nobody" where
 * NVML would list a compute process, as every such process holds /dev/nvidia* open. */
bool ddp_holders_none(const char *proc_root, int self_pid, char *why, size_t size);

/* Whether process pid has an NVIDIA device open: 1, 0, or -1 when its descriptors are not readable here
 * (another user's, without root; or it exited). proc_root as above. */
int ddp_holders_pid(const char *proc_root, unsigned pid);

/* NVML's pid of a GPU's holder, which is in the host's first pid namespace, as a pid of this process's namespace:
 * 1 with *here when this process runs in the host's namespace (the same pid), or when proc_root is the host's
 * /proc (its pid 1 is in the host's namespace) and the process host_pid names there lives in this process's own
 * namespace (*here: its NSpid entry at this namespace's level, from proc_root/PID/status). 0 when it cannot be
 * told (a container's own /proc shows no host pids at all; the process is in another namespace; a link this user
 * may not read): the pid is then the host's only, to be shown as such, never looked up or signalled here (the
 * process this namespace calls by that number is an unrelated one). proc_root as above. */
int ddp_holders_host_pid(const char *proc_root, unsigned host_pid, unsigned *here);

#endif
