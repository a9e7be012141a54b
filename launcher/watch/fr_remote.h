/* fr_remote: the flight recorders of ranks on other nodes, so that node 0's verdict names them (issue 31). Each
 * joined node sends its ranks' recorder summaries (fr.h's state, as this module's compact JSON) to node 0
 * over the control channel (driver/frshare.h); node 0 keeps the latest one per rank for the current attempt and
 * decides over its own ranks and these together with fr.h's rules, so that "rank 3 on node 1" is named in
 * the live line, the post-mortem verdict, summary.json and the events. Node 0 knows no stack and no pid of a
 * remote rank: its recorder is the whole evidence.
 *
 * The JSON ({"v":2, "lr", "gpu", "bus", "he", "g": [{"id", "k", "d", "r", "q", "s", "c", "e": [{"n", "p", "pp", "o",
 * "sh", "t"}]}]}) is this module's own: encoded on the sending node, decoded strictly here (it comes from the network).
 */
#ifndef DDP_FR_REMOTE_H
#define DDP_FR_REMOTE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/util.h"
#include "watch/fr.h"

/* Where a rank runs on its node, as its summary carries it. */
struct ddp_fr_remote_rank {
    int local_rank; /* -1 unknown */
    int gpu;        /* -1 none */
    char busid[32]; /* "" none */
};

/* st (and where) as JSON into out (cap bytes, one line): the last entries of each group are dropped, newest
 * last, until it fits. The length, or -ENOSPC when not even the groups' status fits. */
int ddp_fr_remote_encode(const struct ddp_fr_state *st, const struct ddp_fr_remote_rank *where, char *out, size_t cap);
/* The JSON of ddp_fr_remote_encode into *st and *where. 0, or -EINVAL for anything else (strict: wrong types,
 * unknown version, too many groups or entries). Pure. */
int ddp_fr_remote_decode(const char *json, struct ddp_fr_state *st, struct ddp_fr_remote_rank *where);

struct ddp_fr_remote;

struct ddp_fr_remote *ddp_fr_remote_new(void);
void ddp_fr_remote_free(struct ddp_fr_remote *r);
/* Forget every rank (a new job, tests). */
void ddp_fr_remote_clear(struct ddp_fr_remote *r);

/* Rank `rank` of node `node` (on host, may be NULL) in attempt: its summary json, standing still still_ms when
 * sent, received at now (ms). A later attempt clears what the store held; an earlier one is ignored (-ESTALE).
 * recorder (borrowed, may be NULL): summary.json's flight_recorder gets the rank as progress.h's local ones.
 * 0, or -EINVAL (json not decodable: ignored). */
int ddp_fr_remote_put(struct ddp_fr_remote *r, int attempt, int node, const char *host, int rank, long long still_ms,
                      const char *json, long long now, json_t *recorder);
/* How many ranks the store holds for attempt. */
size_t ddp_fr_remote_count(const struct ddp_fr_remote *r, int attempt);

/* The remote culprits one verdict named: "rank 3 on node 1 (local 0, host h, GPU none)" joined by "; ", and
 * summary.json culprit objects (with "node", "pid": null). */
struct ddp_fr_remote_named {
    size_t n;
    struct ddp_buf text;
    json_t *culprits; /* array, owned */
};

/* fr.h's ddp_fr_decide over this node's n ranks in[] and the remote ranks of attempt held in r (NULL r: the
 * local ranks alone): culprit[0..n) for the local ranks, the remote culprits in *named (caller frees with
 * ddp_fr_remote_named_take or _free); v's why says on which node each remote culprit is. A remote rank with the
 * rank number of a local one is left out (the local process is the truth). */
void ddp_fr_remote_decide(const struct ddp_fr_remote *r, int attempt, long long now, const struct ddp_fr_input *in,
                          size_t n, bool *culprit, struct ddp_fr_verdict *v, struct ddp_fr_remote_named *named);
/* Append named's text to b ("; " after what b has) and its culprits to culprits (may be NULL); free named. */
void ddp_fr_remote_named_take(struct ddp_fr_remote_named *named, struct ddp_buf *b, json_t *culprits);
void ddp_fr_remote_named_free(struct ddp_fr_remote_named *named);

#endif
