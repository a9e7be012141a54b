/* lease: GPU leases between ddplaunch jobs on one host: one kernel lock per GPU (klock.h: an abstract unix
 * socket named by the lock directory setting and the PCI bus id), held by the launcher for the job's life and
 * dropped by the kernel when it exits or is killed; nobody can delete, plant or forge one. Who holds a GPU
 * (pid, user) comes from the kernel; the job's name and start time from a small info file per GPU and user
 * in the lock directory, believed only when that user owns it and it names that pid.
 * It does not choose GPUs (topo.h) and does not see GPUs used by programs that are not ddplaunch. */
#ifndef DDP_LEASE_H
#define DDP_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"

/* The GPUs a job holds. */
struct ddp_lease;

/* Whether each of busids[0..n) is leased by someone now (another job, or another lease in this process).
 * Does not wait; a probe can make a concurrent ddp_lease_take() miss for a moment, which it retries.
 * Returns 0 with held[i] filled, or a negative errno with err (bad bus id, no sockets left). */
int ddp_lease_probe(const char *lock_dir, const char *const *busids, size_t n, bool *held, struct ddp_err *err);

/* Lease all of busids[0..n) (PCI bus ids "0000:17:00.0", any case) or none, without waiting. job_name names the
 * job in the info file ("who holds it"). The lock fds are O_CLOEXEC: workers never hold a lease.
 * Returns 0 with *out, -EBUSY with err listing who holds which of them ("gpu 0000:17:00.0: job 'a' (pid 12,
 * user bob, since 12:00:01)"), or another negative errno with err. Caller owns *out; free with
 * ddp_lease_release(). */
int ddp_lease_take(const char *lock_dir, const char *const *busids, size_t n, const char *job_name,
                   struct ddp_lease **out, struct ddp_err *err);

/* End the lease (removes this job's info files, drops the locks). NULL is fine. Process exit ends it too. */
void ddp_lease_release(struct ddp_lease *l);

/* Choose GPUs for the job with the GPUs in held[0..nheld) (bus ids leased by other jobs) left out: fill
 * chosen with the bus ids to lease. Return 0, -ENODEV when there are not enough GPUs without the held ones
 * (the caller then waits and retries), or another negative errno with err to stop. */
typedef int (*ddp_lease_choose_fn)(void *ctx, const char *const *held, size_t nheld, struct ddp_strv *chosen,
                                   struct ddp_err *err);

/* The whole acquisition loop: probe all_busids, let choose() pick among the free ones, take them; when choose
 * says -ENODEV or a take loses a race, retry every ~200 ms until wait_ms has passed (0 = try once), logging
 * once who holds what while waiting. Returns 0 with *out and the chosen bus ids in *chosen_out (caller clears),
 * or -EBUSY with err naming the job, pid and user holding each busy GPU, or choose()'s error. */
int ddp_lease_acquire(const char *lock_dir, const char *const *all_busids, size_t n, ddp_lease_choose_fn choose,
                      void *ctx, const char *job_name, long long wait_ms, struct ddp_lease **out,
                      struct ddp_strv *chosen_out, struct ddp_err *err);

/* A current lease, for `ddplaunch topo` and `doctor`. */
struct ddp_lease_info {
    char busid[32];
    bool known;           /* holder known from the kernel; false: held by a process that does not answer */
    pid_t pid;            /* holder, from the kernel (0 when unknown or in a pid namespace not visible here) */
    uid_t uid;            /* holder's user id, from the kernel */
    char job[128];        /* from the holder's own info file, control characters replaced; "" when unknown */
    char user[64];        /* user name of uid; "" when unknown */
    long long start_unix; /* from the holder's info file, seconds since the epoch, 0 when unknown */
    char comm[32];        /* holder's command (/proc/PID/comm, control characters replaced), "" when not seen */
    bool ddplaunch;       /* the holder listens as a ddplaunch job's lock does and is named ddplaunch; false:
                           * some other process (bound without listening, or another command) */
};
/* Every GPU leased now under lock_dir, sorted by bus id. Returns 0 with *out (caller frees with free()) and
 * *n, or a negative errno (/proc/net/unix unreadable). */
int ddp_lease_list(const char *lock_dir, struct ddp_lease_info **out, size_t *n);

/* One line per leased GPU among busids (all leases when busids is NULL), as in the -EBUSY message:
 * "gpu 0000:17:00.0: job 'a' (pid 12, user bob, since 2026-11-29 23:59:01)". Caller owns; free(). */
char *ddp_lease_describe(const char *lock_dir, const char *const *busids, size_t n);

/* Parse an info file's text ("pid=..\njob=..\nuser=..\nstart=..\n") into info (busid untouched). Pure.
 * 0 or -EINVAL when no pid= line is present. */
int ddp_lease_parse_info(const char *text, struct ddp_lease_info *info);

/* Whether s is a well-formed PCI bus id we accept in file names ("0000:17:00.0" or "17:00.0"). Pure. */
bool ddp_lease_busid_ok(const char *s);

#endif
