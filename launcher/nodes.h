/* nodes: the node agent of a job on several nodes (ctx->nnodes > 1), the supervisor's multi-node part: node 0
 * (the leader) runs the policy for the whole job. It waits until every node joined, then for each attempt lays
 * the ranks out over the nodes that are up (layout.h), sends START and starts its own workers. A failure or
 * timeout anywhere (its own workers, a node's REPORT, a lost node) is fed to its policy as one event and STOP
 * goes to every node; once every node reported the attempt's end, the policy's decision (restart, downsize,
 * exit) is carried out everywhere: START with the next attempt number, or EXIT. The other nodes decide
 * nothing: they start workers on START, stop them on STOP, report how each attempt ended, exit on EXIT, and
 * stop everything and exit 1 when node 0 is lost. What to do on which event is agent.h's table; this file turns
 * the control channel's events (coord.h), the end of this node's workers and signals into its events and
 * carries out its actions through the loop (supervise.c, supervise_internal.h). */
#ifndef DDP_NODES_H
#define DDP_NODES_H

struct sup;

/* Start listening (node 0) or joining (others); node 0 starts attempt 0 once every node joined (or enough of
 * them at join_timeout). 0, or negative errno (said on stderr). */
int ddp_nodes_begin(struct sup *s);

/* This node's workers of the current attempt all ended (LOCAL_DONE). */
void ddp_nodes_all_finished(struct sup *s);

/* The launcher got signal signo (SIGNAL): exits while no attempt is under way, else goes to the policy. */
void ddp_nodes_signal(struct sup *s, int signo);

/* Node 0: the policy starts its next attempt (s->pol's attempt and size) on every node that is up. 0, or
 * negative errno with s->err set (the agent is then DONE: the caller exits 1). */
int ddp_nodes_start(struct sup *s);

/* Node 0: the policy exits with status (the caller carries it out; EXIT goes to every node on close). */
void ddp_nodes_exit(struct sup *s, int status);

/* Free what node 0 keeps of the nodes and rounds. */
void ddp_nodes_free(struct sup *s);

#endif
