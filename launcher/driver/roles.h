/* roles: the node agent at work on several nodes (ctx->nnodes > 1). Node 0, the leader, waits for the nodes to
 * join (join_timeout, torchrun's last call), lays each attempt out over them, stops and ends them all; every other
 * node, a follower, joins node 0 and runs what it says. This module steps agent.h's table with the events of the
 * channel (translated by roster.h), of its join timers and of the driver, and carries the table's actions out:
 * on the channel itself (roster.h, frshare.h), and through the driver's operations (struct ddp_roles_ops) for
 * what the driver owns: the policy, starting this node's workers, the report of how they ended, the exit. It
 * decides nothing itself (the tables do) and is not used on one node. */
#ifndef DDP_ROLES_H
#define DDP_ROLES_H

#include <stdbool.h>
#include <uv.h>

#include "driver/policy.h"
#include "records/records.h"
#include "run/plan.h"
#include "run/runner.h"
#include "watch/watch.h"

struct ddp_roles;

/* What the driver does when the agent's table says so. arg: ddp_roles_config's. */
struct ddp_roles_ops {
    /* Feed the policy one event (the driver carries out its actions). */
    void (*policy)(void *arg, const struct ddp_policy_event_data *ev);
    /* Start this node's workers of attempt `attempt` with nproc (the config's actx already says where): 0, or a
     * negative errno with err set and nothing started. */
    int (*start)(void *arg, int attempt, int nproc);
    /* Node 0: another node failed or was lost in the current attempt (why: the line; disarm_grace: this node's own
     * workers are gone already, nothing to wait for). */
    void (*node_failed)(void *arg, int attempt, int status, const char *why, bool disarm_grace);
    /* Another node: its workers of the attempt all ended; the driver tells node 0 (ddp_roles_report). */
    void (*report)(void *arg);
    /* The agent exits with status. */
    void (*finish)(void *arg, int status);
};

struct ddp_roles_config {
    uv_loop_t *loop;
    const struct ddp_plan_ctx *ctx;
    struct ddp_plan_ctx *actx; /* the driver's: the attempt's group rank, node count, port, ranks (START) */
    struct ddp_policy *pol;    /* the driver's policy: its state is read, a follower's START begins it anew */
    struct ddp_runner *rn;
    struct ddp_records *rec;
    struct ddp_watch *watch;
    struct ddp_err *err;
    struct ddp_roles_ops ops;
    void *arg;
};

/* Start listening (node 0) or joining (others); node 0 starts attempt 0 (ops.start) once the nodes joined. 0 with
 * *out (ddp_roles_close, then ddp_roles_free after the loop), or a negative errno (said on stderr, err set). */
int ddp_roles_begin(const struct ddp_roles_config *c, struct ddp_roles **out);
/* The driver's events for the agent: a signal the launcher got; this node's workers of the current attempt all
 * ended (local_status: what they add up to, ddp_policy_local_status). */
void ddp_roles_signal(struct ddp_roles *r, int signo);
void ddp_roles_local_done(struct ddp_roles *r, int local_status);
/* Node 0, the policy said START: lay the attempt out over the nodes and start it. 0, or a negative errno (err
 * set; the agent is then done, the driver exits 1). */
int ddp_roles_start(struct ddp_roles *r);
/* Node 0, the policy stops the attempt (why: for the other nodes' lines): STOP goes to every node of a live
 * round. The policy said EXIT with status: EXIT goes to every node when the channel closes. */
void ddp_roles_stopping(struct ddp_roles *r, const char *why);
void ddp_roles_exit(struct ddp_roles *r, int status);
/* Another node: tell node 0 how this node's part of attempt `attempt` ended. */
void ddp_roles_report(struct ddp_roles *r, int attempt, int status, const char *why);
/* Close the channel (node 0: EXIT with status first), the timers and the recorders' sharing; NULL: no-op. */
void ddp_roles_close(struct ddp_roles *r, int status);
void ddp_roles_free(struct ddp_roles *r);

#endif
