/* port: MASTER_PORT for a job: `auto` picks a port free on this host now and reserved against every other
 * ddplaunch job (a kernel lock per port, klock.h, in the lock directory's namespace, held by the launcher for
 * the job's life and dropped by the kernel when the launcher dies; no user can delete, plant or forge one); an explicit
 * busy port is refused naming its holder (from /proc, as `ss -ltnp` would). It does not start workers, and cannot stop
 * non-ddplaunch programs from taking a port between the check and the workers' bind. */
#ifndef DDP_PORT_H
#define DDP_PORT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"
#include "spec/spec.h"

/* Default range for `master_port = auto` (below the kernel's default ephemeral range 32768-60999). */
#define DDP_PORT_AUTO_LO 29500
#define DDP_PORT_AUTO_HI 29999
#define DDP_PORT_SETTLE_MS 2000 /* how long a job-id port may stay in use before it is busy (port.c) */
/* torchrun's default MASTER_PORT and c10d rendezvous port: master_port = auto tries them last (a torchrun job
 * started beside a ddplaunch job takes them without asking). */
#define DDP_PORT_TORCHRUN 29500
#define DDP_PORT_C10D 29400
/* Where a job's NCCL_RAS_ADDR port comes from (NCCL's own default is 28028, which every job would share). */
#define DDP_PORT_RAS_RANGE "auto:28029-28499"

/* Parse a master_port value: "N" (1-65535), "auto", "auto:LO-HI", "0" (= auto). LO/HI default to lo==hi==0,
 * which means the default range (ddp_port_default_range). 0 or -EINVAL with err ("expected ..."). */
int ddp_port_spec_parse(const char *s, struct ddp_port_spec *out, struct ddp_err *err);

/* The default auto range given the text of /proc/sys/net/ipv4/ip_local_port_range ("32768\t60999\n", or NULL
 * when unknown): DDP_PORT_AUTO_LO-HI unless it overlaps the ephemeral range, else 500 ports just below it
 * (or just above it when there is no room below). Pure. */
void ddp_port_default_range(const char *ip_local_port_range, int *lo, int *hi);
/* The text of /proc/sys/net/ipv4/ip_local_port_range ("32768\t60999\n"), or NULL when it cannot be read.
 * Caller owns; free(). */
char *ddp_port_ephemeral_range(void);
/* Whether [lo, hi] overlaps the ephemeral range in that text (ports the kernel hands to outgoing
 * connections, which can take a port between the check and the bind). Pure; false when text is NULL. */
bool ddp_port_range_overlaps_ephemeral(const char *ip_local_port_range, int lo, int hi);

/* Candidate i (0, 1, ...) of [lo, hi] for master_port = auto: the range rotated to begin at lo + start % n, with
 * DDP_PORT_TORCHRUN and DDP_PORT_C10D moved to the end (taken only when nothing else is free). Candidates
 * 0..(hi-lo) are all distinct. Pure. */
int ddp_port_candidate(int lo, int hi, unsigned start, unsigned i);

/* Under a scheduler that gives a job id (Slurm, LSF, PBS): candidate i (0, 1, ...) of the port sequence for a job step,
 * in [lo, hi]. The same on every node; jobs whose ids share their last digits get unrelated sequences (unlike 15000 +
 * jobid % 10000). Candidates 0..(hi-lo) are all distinct. Pure. */
int ddp_port_job_candidate(unsigned long long job_id, unsigned long long step_id, int lo, int hi, unsigned i);

/* The port every node of a multi-node scheduled job computes for master_port = auto (ps->is_auto): candidate 0 of
 * ddp_port_job_candidate() in ps's range, or in DDP_PORT_AUTO_LO-HI when ps gives none (fixed, so that nodes
 * with different ephemeral ranges agree). Node 0 reserves the same port with ddp_port_reserve() and
 * max_candidates = 1. Pure. */
int ddp_port_job_port(unsigned long long job_id, unsigned long long step_id, const struct ddp_port_spec *ps);

/* A LISTEN socket from /proc/net/tcp or /proc/net/tcp6. */
struct ddp_port_listener {
    unsigned long long inode;
    unsigned int uid;
    char addr[INET6_ADDRSTRLEN]; /* local address, e.g. "0.0.0.0", "::", "127.0.0.1" */
};
/* Parse the text of /proc/net/tcp (v6 = false) or /proc/net/tcp6 (v6 = true) for sockets listening on port.
 * Fills up to max entries, returns how many there are (may exceed max), or -EINVAL when the text is not in
 * that format. Pure. */
int ddp_port_parse_listeners(const char *text, bool v6, int port, struct ddp_port_listener *out, size_t max);

/* Who listens on a port, from the live /proc. */
struct ddp_port_holder {
    pid_t pid; /* 0 when the socket's process is not visible to this user */
    unsigned int uid;
    char comm[64];     /* process name, "" when unknown */
    char cmdline[256]; /* its argv joined by spaces, truncated, "" when unknown */
    char user[64];
    char addr[INET6_ADDRSTRLEN];
};
/* Returns 0 with *h filled, or -ENOENT when no socket listens on port. */
int ddp_port_holder(int port, struct ddp_port_holder *h);

/* Whether the sockets listening on port that a connection to 127.0.0.1 reaches (/proc/net/tcp and tcp6: IPv4's
 * wildcard or loopback, IPv6's wildcard or v4-mapped) all belong to a job: each one's inode is among the open
 * descriptors (/proc/PID/fd) of a process whose pid or process group is in groups[0..ngroups). 1 yes; 0 no, with
 * *other describing the first that does not (pid 0 and user "uid N" when its process is not visible here);
 * -ENOENT when nothing listens there. For evidence a job's port gives (NCCL RAS): another user may bind a port
 * the job was meant to have. Costs one pass over /proc. */
int ddp_port_listener_owned(int port, const pid_t *groups, size_t ngroups, struct ddp_port_holder *other);

/* Bind test as torch's TCPStore would bind the port (wildcard IPv4, and wildcard IPv6 where the host has
 * IPv6; SO_REUSEADDR so that TIME_WAIT leftovers do not count). 0 free, -EADDRINUSE, or another negative
 * errno. */
int ddp_port_probe(int port);

/* What to reserve. */
struct ddp_port_req {
    const char *lock_dir;            /* ddp_rundir_lock_dir(envp): the lock namespace */
    const char *addr;                /* master_addr, for messages; NULL = "localhost" */
    struct ddp_port_spec spec;       /* explicit port, or auto with its range (lo == hi == 0: default range) */
    unsigned long long job_key;      /* nonzero: auto candidates come from ddp_port_job_candidate() */
    unsigned long long job_step_key; /* the step of that job (Slurm), else 0 */
    unsigned max_candidates;         /* auto: how many candidates to try at most; 0 = the whole range. A
                                      * multi-node scheduled job whose nodes cannot tell each other the port sets 1:
                                      * every node then computes the same candidate 0. */
    const char *ephemeral_range;     /* text of /proc/sys/net/ipv4/ip_local_port_range, or NULL */
    bool quiet;                      /* an explicit port that is held: -EADDRINUSE without naming its holder (the
                                      * caller joins the agent that holds it: asking who it is would cost each of a
                                      * thousand joining agents a walk of every process's open files) */
};

/* A held reservation: the port and the lock. */
struct ddp_port_resv;

/* Reserve a port. Auto: the first candidate whose lock is free and whose bind test passes, locked. Explicit:
 * that port, refused when another ddplaunch job holds its lock or a socket listens on it, with a one-line
 * message naming the port, the address and the holder (pid, command, user) and suggesting master_port = auto.
 * The lock fd is O_CLOEXEC, so workers never inherit it; keep the reservation until the job has ended.
 * A port whose lock another process holds (a job, or a squatter) is skipped as busy.
 * Returns 0 with *out and *port_out, -EADDRINUSE (explicit port busy, or no free port in the range), or
 * another negative errno, with err. Caller owns *out; free with ddp_port_release(). */
int ddp_port_reserve(const struct ddp_port_req *req, struct ddp_port_resv **out, int *port_out, struct ddp_err *err);
/* Drop the reservation (the port may go to the next job). NULL is fine. Process exit drops it as well. */
void ddp_port_release(struct ddp_port_resv *r);

/* Describe who holds port's lock into buf, pid and user as the kernel reports them: "pid 123, ddplaunch,
 * user alice". Returns 0, or -ENOENT when the lock is free. For `doctor` and messages. */
/* The port reservations under lock_dir held by processes that are no ddplaunch job (they do not answer as a
 * job's lock does, or are not named ddplaunch): how many, and the first holders described in buf ("port
 * 29500: pid 12, user bob, command python3; ..."). 0 or more, or a negative errno (/proc/net/unix). */
int ddp_port_foreign_holders(const char *lock_dir, char *buf, size_t len);
/* The port locks under lock_dir held now, by jobs or anything else (*held: sorted lock names; caller clears it
 * with ddp_strv_clear), and whether port's lock is among them. For doctor's count of usable auto ports. 0 or a
 * negative errno (/proc/net/unix). */
int ddp_port_locks_held(const char *lock_dir, struct ddp_strv *held);
bool ddp_port_lock_listed(const struct ddp_strv *held, const char *lock_dir, int port);
int ddp_port_lock_holder(const char *lock_dir, int port, char *buf, size_t len);

#endif
