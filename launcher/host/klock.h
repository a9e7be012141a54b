/* klock: host-wide named locks that live in the kernel: a listening abstract unix socket bound under the name
 * (Linux's abstract socket namespace, one per network namespace). The kernel frees a name when its holder's
 * socket closes (exit, SIGKILL); there is no file, so no user can delete, replace, chmod or pre-plant a lock,
 * and another user can block a name only by holding it with a live process, whose user and pid the kernel
 * reports (SO_PEERCRED). It does not decide what is locked (lease.h, port.h) and never waits. */
#ifndef DDP_KLOCK_H
#define DDP_KLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"

/* Longest name (the abstract address holds 107 bytes after its leading NUL). */
#define DDP_KLOCK_NAME_MAX 100

/* The lock name of what ("gpu-0000:17:00.0", "port-29500") in namespace ns (the lock directory setting, so
 * that jobs pointed at different lock directories, such as tests, never meet): "ddplaunch" ns "/" what, or
 * "ddplaunch/h" HASH(ns) "/" what when that would be longer than DDP_KLOCK_NAME_MAX. Pure. */
void ddp_klock_name(const char *ns, const char *what, char out[DDP_KLOCK_NAME_MAX + 1]);

/* Take the lock name now. Returns 1 with *fd_out (O_CLOEXEC, so workers never hold it; close it to release),
 * 0 when another process holds it, or a negative errno. */
int ddp_klock_take(const char *name, int *fd_out);

/* Whether name is held now: 1 held, 0 free, or a negative errno. A free name is taken and dropped within
 * microseconds, so a concurrent ddp_klock_take() may see it held: retry. */
int ddp_klock_probe(const char *name);

/* Who holds a lock, as the kernel says. */
struct ddp_klock_holder {
    bool known;    /* false: the kernel would not say (no sock_diag here); pid and uid are then unknown */
    bool answers;  /* it listens, as a ddplaunch job's lock does: it took our connection (SO_PEERCRED), or its
                    * backlog is full (nobody accepts: 64 questions fill it); a bare bind() does not listen.
                    * Without SO_PEERCRED the kernel's socket table is asked for the pid */
    pid_t pid;     /* the process that holds it; 0 when this user cannot see it (another user's process seen
                    * by a non-root user, or another pid namespace) */
    uid_t uid;     /* the socket's owner */
    char comm[32]; /* its command (/proc/PID/comm, control characters as '?'), "" when pid is 0 */
};
/* Who holds name: SO_PEERCRED of a connection when the holder listens and has room in its backlog, else the
 * owner uid from the kernel's unix socket table (NETLINK_SOCK_DIAG, UDIAG_SHOW_UID) and the pid from the
 * /proc/PID/fd links this user may read. 0 with *h, or -ENOENT when name is free now. */
int ddp_klock_holder(const char *name, struct ddp_klock_holder *h);

/* The held names that start with prefix, from the text of /proc/net/unix ("... Inode Path" lines, abstract
 * paths shown with a leading '@'), without the '@', sorted, each once. Pure. */
void ddp_klock_parse_list(const char *proc_net_unix, const char *prefix, struct ddp_strv *out);
/* The same on the live /proc/net/unix. 0 or a negative errno. */
int ddp_klock_list(const char *prefix, struct ddp_strv *out);
/* Whether name is in list, a list that ddp_klock_list (or _parse_list) filled from empty: sorted, so a binary
 * search. */
bool ddp_klock_listed(const struct ddp_strv *list, const char *name);

#endif
