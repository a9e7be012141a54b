/* agent: the node agent's decisions on several nodes as one table of role x state x event -> next state + action
 * bits, beside policy.h's table for one attempt on one node. Node 0 (the leader) runs the policy for the whole
 * job and this table for the rounds across the nodes; every other node (a follower) runs this table for what
 * node 0 tells it, and policy.h only to stop its own workers. Pure: no loop, no sockets, no clock; roles.c feeds
 * the events in (from coord.h's events, the workers' ends and signals) and carries the actions out. */
#ifndef DDP_AGENT_H
#define DDP_AGENT_H

#include <stdbool.h>

/* Which table: node 0, or any other node. */
enum ddp_agent_role { DDP_AR_LEADER, DDP_AR_FOLLOWER, DDP_AR__COUNT };

/* States. A role uses the ones named for it; the others' rows do nothing (and are tested to).
 *   JOINING   leader: waiting for the other nodes to join before attempt 0; follower: not joined node 0 yet
 *   WAITING   leader: between attempts (the policy's backoff; no round live);
 *             follower: joined, no attempt under way, waiting for node 0's START or EXIT
 *   RUNNING   an attempt is under way and its round is live; this node's workers run
 *   DRAINING  leader: its own workers of the attempt all ended; waiting for the other nodes' ends of the round
 *   STOPPING  follower: node 0 said STOP; the workers are being stopped
 *   EXITING   follower: node 0 said EXIT while workers still ran; they are being stopped, then exit_status
 *   LOST      follower: node 0 is gone while workers still ran; they are being stopped, then exit 1
 *   DONE      the agent exits with exit_status */
enum ddp_agent_state {
    DDP_AS_JOINING,
    DDP_AS_WAITING,
    DDP_AS_RUNNING,
    DDP_AS_DRAINING,
    DDP_AS_STOPPING,
    DDP_AS_EXITING,
    DDP_AS_LOST,
    DDP_AS_DONE,
    DDP_AS__COUNT
};

/* Events.
 *   JOINED        leader: a node joined (all: every node is up now); follower: it joined node 0
 *   JOIN_TIMEOUT  leader: join_timeout passed (all: enough nodes joined for the job's minimum node count)
 *   START         leader: the policy starts the next attempt; follower: node 0 said START
 *   START_FAILED  this node could not start its workers of the attempt (its start failed as a whole)
 *   STOP          follower: node 0 said STOP for the attempt under way
 *   EXIT          follower: node 0 said EXIT (status); leader: the policy exits (status)
 *   NODE_LOST     leader: another node's connection is gone (its part of the round ends with status 1)
 *   NODE_REPORT   leader: another node reported how its part of the attempt ended (status)
 *                 NODE_*: fresh = this ended the node's part of the live round just now (a node's first end);
 *                 round_done = every node of the round has ended now
 *   LOCAL_DONE    this node's workers of the attempt all ended (leader: round_done as above; follower:
 *                 signo = the signal that stopped them here, 0 none)
 *   COORD_LOST    follower: node 0 is gone, or cannot be joined
 *   SIGNAL        the agent got signal signo (ddp_policy_signal_stops says which stop the job) */
enum ddp_agent_event {
    DDP_AE_JOINED,
    DDP_AE_JOIN_TIMEOUT,
    DDP_AE_START,
    DDP_AE_START_FAILED,
    DDP_AE_STOP,
    DDP_AE_EXIT,
    DDP_AE_NODE_LOST,
    DDP_AE_NODE_REPORT,
    DDP_AE_LOCAL_DONE,
    DDP_AE_COORD_LOST,
    DDP_AE_SIGNAL,
    DDP_AE__COUNT
};

struct ddp_agent_event_data {
    enum ddp_agent_event kind;
    int status;      /* EXIT, NODE_LOST, NODE_REPORT */
    int signo;       /* SIGNAL; LOCAL_DONE (follower) */
    bool all;        /* JOINED, JOIN_TIMEOUT (leader) */
    bool fresh;      /* NODE_LOST, NODE_REPORT */
    bool round_done; /* NODE_LOST, NODE_REPORT, LOCAL_DONE (leader) */
};

/* Actions, a bit set: what the agent must do now, in this order. */
enum {
    DDP_AA_POLICY = 1 << 0,       /* pass the event (a signal) on to the policy of the attempt (policy.h) */
    DDP_AA_STOP_WORKERS = 1 << 1, /* follower: feed REMOTE_STOP to the policy: stop this node's workers */
    DDP_AA_NODE_FAILED = 1 << 2,  /* leader: feed NODE_FAILED (status) to the policy: the job's attempt stops */
    DDP_AA_DISARM_GRACE = 1 << 3, /* leader: its own workers are gone: no shutdown timer to run for them */
    DDP_AA_REPORT = 1 << 4,       /* follower: tell node 0 how this node's part of the attempt ended */
    DDP_AA_DECIDE = 1 << 5,       /* leader: every node ended the attempt: feed ALL_FINISHED to the policy */
    DDP_AA_START = 1 << 6,        /* start the attempt (leader: lay it out and send START; follower: START's) */
    DDP_AA_EXIT = 1 << 7,         /* exit with act.exit_status */
};

struct ddp_agent_action {
    unsigned flags;
    int status;      /* NODE_FAILED */
    int exit_status; /* EXIT */
};

/* The agent's whole state. Initialise with ddp_agent_init. */
struct ddp_agent {
    enum ddp_agent_role role;
    enum ddp_agent_state state;
    int exit_status; /* EXITING: what node 0 said; LOST: 1; DONE: the agent's exit status */
};

/* Start in JOINING. */
void ddp_agent_init(struct ddp_agent *a, enum ddp_agent_role role);

/* Feed one event; returns what to do (flags 0 = nothing). Updates a. Never fails. */
struct ddp_agent_action ddp_agent_step(struct ddp_agent *a, const struct ddp_agent_event_data *ev);

/* True while an attempt's round is live on node 0 (RUNNING, DRAINING): a stop there goes to every node. */
bool ddp_agent_round_live(const struct ddp_agent *a);

/* True while no attempt is under way and none is decided (JOINING, WAITING of a follower): a stopping signal
 * exits at once, the policy has nothing to stop. */
bool ddp_agent_idle(const struct ddp_agent *a);

const char *ddp_astate_name(enum ddp_agent_state s);
const char *ddp_aevent_name(enum ddp_agent_event e);

#endif
