/* rdzv: how the agents of a job on several nodes find each other, decided from the spec (pure): a static
 * rendezvous (every node gives its node rank; node 0 serves the control channel on master_port + 1), or a
 * c10d-style one (the same command on every node: the agent on the endpoint's host serves on the endpoint's
 * port and hands out node ranks at join), the join timeout (from [job] join_timeout, rdzv_conf's join_timeout,
 * else torchrun's defaults), the last call (rdzv_conf's last_call_timeout, else torchrun's 30 s) and the job's identity
 * bound into the handshake. It opens no socket and reads no file: main/supervise act on what it decides; the secret's
 * files are token.h's. */
#ifndef DDP_RDZV_H
#define DDP_RDZV_H

#include <stdbool.h>

#include "base/util.h"
#include "spec/spec.h"

#define DDP_RDZV_C10D_PORT 29400    /* torchrun's c10d endpoint port when the endpoint gives none */
#define DDP_RDZV_STATIC_PORT 29500  /* torchrun's master port for several nodes when none is given */
#define DDP_RDZV_LAST_CALL_MS 30000 /* torchrun's c10d last_call_timeout */

struct ddp_rdzv {
    bool several;       /* nnodes MAX > 1 */
    bool dynamic;       /* c10d-style or etcd: node ranks given at join */
    bool etcd;          /* etcd-v3 (torchrun's etcd and etcd-v2 too): the agents meet in the etcd cluster that
                           rdzv_endpoint lists; no node must survive (rdzv_etcd.h) */
    const char *note;   /* one line to say (torchrun's etcd or etcd-v2 taken as etcd-v3), or NULL */
    const char *source; /* what gave this node its rank: "single node", "static", "c10d", "slurm", or
                           a scheduler of scheduler.h ("skypilot", "flux", "openmpi", "jobset", ...) */
    long long join_timeout_ms;
    long long last_call_ms; /* c10d, MIN < MAX: once MIN nodes are in, wait this long for more, then start */
    long long lost_after_ms;
};

/* Decide from spec (after every layer) and the scheduler that gave the node rank, if any (sched_source:
 * "slurm", or scheduler.h's name; NULL = none). A static rendezvous without --node-rank and no scheduler runs
 * as node 0, as torchrun does (a second agent claiming node 0 is refused when it tries to serve). 0 and *out,
 * or -EINVAL with err when a node other than 0 has no address for node 0 (static, master_addr left at its
 * default), or rdzv_backend / rdzv_conf are not understood. */
int ddp_rdzv_decide(const struct ddp_spec *spec, const char *sched_source, struct ddp_rdzv *out, struct ddp_err *err);

/* rdzv_conf "k=v,k=v": key's value in seconds (join_timeout, last_call_timeout) into *ms (unchanged when
 * absent). 0, or -EINVAL with err for a malformed list or value. Other keys are accepted and ignored (torchrun
 * has many). */
int ddp_rdzv_conf_seconds(const char *conf, const char *key, long long *ms, struct ddp_err *err);

/* The job's identity: a digest of the run id and the command (argv), the same on every node of one job and
 * different for another job, whatever secret they share. out: 64 hex digits and a NUL. */
void ddp_rdzv_identity(const char *run_id, const char *const *argv, char out[65]);

#endif
