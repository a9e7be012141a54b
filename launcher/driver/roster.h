/* roster: what a job on several nodes (ctx->nnodes > 1) knows about its nodes, and its control channel (coord.h):
 * node 0's table of the nodes (joined, worker count, host), its round of the current attempt (layout.h), the
 * layout of an attempt over the nodes that are up and its START; the translation of the channel's events into
 * the node agent's events (agent.h). It decides nothing and feeds no table: the node agent (roles.c) receives
 * the channel's events, asks this module what they mean, steps agent.h's table (the policy through the driver),
 * and calls back here only to send (START, STOP, REPORT, EXIT). */
#ifndef DDP_ROSTER_H
#define DDP_ROSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "driver/agent.h"
#include "nodes/coord.h"
#include "records/records.h"
#include "run/plan.h"

struct ddp_roster;

/* What the driver knows that the translation needs. */
struct ddp_roster_view {
    enum ddp_agent_state agent; /* the agent's state */
    int attempt;                /* the attempt whose workers are under way on this node, -1 none */
    bool stopping;              /* this node's attempt is being stopped already */
};

/* What the roster is told of the job: the parts of the plan context (run/plan.h) it reads, filled by the driver.
 * cf is copied; job and coord must outlive the roster. */
struct ddp_roster_config {
    const struct ddp_plan_job *job;     /* spec (rdzv_conf, max_restarts), run id, host name */
    const struct ddp_plan_coord *coord; /* the control channel: secret, port, node, timeouts, etcd */
    const char *master_addr;            /* node 0's address */
    int master_port;
    int nnodes; /* MAX */
    int nproc;  /* this node's workers */
};

/* This node's place in an attempt that ddp_roster_start laid out. */
struct ddp_roster_place {
    int node_rank; /* group rank */
    int nnodes;    /* nodes in the attempt */
    int rank_base; /* this node's first global rank */
    int world_size;
};

/* Start listening (node 0) or joining (others) on loop; the channel's events go to cb(c, ev, arg). 0 with *out
 * (caller owns; ddp_roster_free after the loop), or a negative errno (said on stderr, err set). */
int ddp_roster_new(uv_loop_t *loop, const struct ddp_roster_config *cf, struct ddp_records *rec, ddp_coord_cb cb,
                   void *arg, struct ddp_roster **out, struct ddp_err *err);
void ddp_roster_free(struct ddp_roster *n);

/* The channel's event ev as the agent's event *ae (why: its line for NODE_FAILED), with what node 0 keeps
 * updated and the line the user sees said. False: nothing for the agent. */
bool ddp_roster_translate(struct ddp_roster *n, const struct ddp_coord_event *ev, const struct ddp_roster_view *v,
                          struct ddp_agent_event_data *ae, char *why, size_t why_size);

/* Node 0, join_timeout: *ae is JOIN_TIMEOUT (all: enough nodes joined to start); when not, err says why. */
void ddp_roster_join_timeout(struct ddp_roster *n, struct ddp_agent_event_data *ae, struct ddp_err *err);
/* Node 0 of a c10d job with nnodes MIN < MAX, as torchrun: the nodes up now (node 0 and those joined) once
 * MIN or more are in and fewer than MAX, i.e. how long to wait before starting is the last call; else 0. */
int ddp_roster_last_call(const struct ddp_roster *n);
/* Node 0 waiting for the others: who is missing, elapsed, deadline. False once every node joined. */
bool ddp_roster_join_progress(struct ddp_roster *n, long long waited_ms);

/* Node 0: lay attempt `attempt` with nproc workers here out over the nodes that are up, begin its round and
 * send START (with the attempt's master_port); *out gets this node's group rank, node count, rank base and world
 * size. 0, or -ENODEV with err when too few nodes are up. */
int ddp_roster_start(struct ddp_roster *n, int attempt, int nproc, int master_port, struct ddp_roster_place *out,
                     struct ddp_err *err);
/* Node 0: this node's workers of the round ended with status; true when every node of the round has ended. */
bool ddp_roster_local_end(struct ddp_roster *n, int status);
/* Node 0: STOP the round's attempt on every node. */
void ddp_roster_stop(struct ddp_roster *n, const char *why);
/* Node 0: the round's attempt number. */
int ddp_roster_round_attempt(const struct ddp_roster *n);
/* Other nodes: tell node 0 how this node's part of attempt `attempt` ended. */
void ddp_roster_report(struct ddp_roster *n, int attempt, int status, const char *why);
/* Node 0: does node `node` run global rank `rank` in the round of attempt `attempt`? Its host name (never NULL
 * then), or NULL: a message about such a rank is not to be believed. */
const char *ddp_roster_runs_rank(const struct ddp_roster *n, int attempt, int node, int rank);
/* Other nodes: rank's flight-recorder summary (fr_remote.h's JSON) to node 0. 0, or a negative errno. */
int ddp_roster_send_fr(struct ddp_roster *n, int attempt, int rank, long long still_ms, const char *json);
/* Close the channel; node 0 first sends EXIT with status. */
void ddp_roster_close(struct ddp_roster *n, int status);

#endif
