/* fr: torch's flight recorder as evidence of a hang. The sampler thread (the _ddplaunch_fr_* functions of
 * watch/sitecustomize.py) writes one "ddplaunch-fr {json}" line beside each stack sample: every process group's last
 * enqueued and completed collective, and (once a group stood still 10 s) its last entries: op, shapes, dtypes.
 * This module parses that line (or torch's own JSON dump) and decides, per process group, which ranks never
 * reached collective N and what differs at N. Pure: no files, no clock, no signals (progress.c feeds it). */
#ifndef DDP_FR_H
#define DDP_FR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "watch/suspect.h"

#define DDP_FR_GROUPS 16   /* process groups kept per rank */
#define DDP_FR_PER_GROUP 8 /* last entries kept per group (enough steps to see the order of two groups) */
#define DDP_FR_ID 32
#define DDP_FR_OPLEN 48
#define DDP_FR_SHAPELEN 96
#define DDP_FR_RANKS 256

/* One entry of the recorder: one collective (or point-to-point op) as one rank enqueued it. */
struct ddp_fr_entry {
    long long seq;               /* collective_seq_id (0 for p2p) */
    long long p2p_seq;           /* p2p_seq_id */
    bool p2p;                    /* is_p2p */
    char op[DDP_FR_OPLEN];       /* profiling_name: "gloo:all_reduce", "nccl:broadcast" */
    char shape[DDP_FR_SHAPELEN]; /* input sizes and dtypes: "[[2]] Float" */
    long long created_ns;        /* time_created_ns (the host's realtime clock) */
};

/* One process group as one rank's recorder sees it. */
struct ddp_fr_group {
    char id[DDP_FR_ID];       /* its name: the entries' process_group[0], pg_config's key; the same on every rank
                                 ("" unknown: a group with no entry yet, from an old sampler) */
    char key[DDP_FR_ID];      /* this rank's pg_status key (the entries' pg_id): torch counts the backends each
                                 process made, so "1" is [0,1] on ranks 0-1 and [2,3] on ranks 2-3; used only to
                                 join this rank's status to its entries */
    char desc[DDP_FR_ID];     /* process_group[1] or pg_config's desc ("default_pg", "mesh_tp"), "" unknown */
    long long enqueued;       /* last_enqueued_collective, -1 unknown */
    long long started;        /* last_started_collective */
    long long completed;      /* last_completed_collective, -1 unknown (NCCL without timing) */
    char ranks[DDP_FR_RANKS]; /* its global ranks as a list ("0-2", "0,2"), "" unknown */
    size_t nentries;          /* its last entries, oldest first */
    struct ddp_fr_entry e[DDP_FR_PER_GROUP];
};

struct ddp_fr_state {
    size_t ngroups;
    struct ddp_fr_group g[DDP_FR_GROUPS];
    bool has_entries; /* the document carried entries (the sampler's, after a standstill; torch's own dump) */
};

/* Find the recorder in len bytes of text: the sampler's "ddplaunch-fr {json}" line (the last one when several),
 * else text that is a whole JSON document of torch's (_dump_fr_trace_json, _dump_nccl_trace_json). Returns 0 with
 * *st filled, -ENOENT when there is none, -EINVAL when it is not a recorder document. Pure. */
int ddp_fr_parse(const char *text, size_t len, struct ddp_fr_state *st);

/* A sorted list of n ranks as "0-2,5" into dst (cap bytes; cut at a whole item when it does not fit). */
void ddp_fr_ranks_text(char *dst, size_t cap, const long long *r, size_t n);

/* The group named id in st, or NULL. */
const struct ddp_fr_group *ddp_fr_group(const struct ddp_fr_state *st, const char *id);

/* Each process group's last collective in st, as summary.json's flight_recorder.ranks holds it per rank: a new
 * JSON array of {"pg", "ranks", "last_enqueued", "last_completed", "op", "shape"}. */
json_t *ddp_fr_summary_json(const struct ddp_fr_state *st);

/* Did any group's enqueued or completed collective change from a to b (a group appearing counts)? */
bool ddp_fr_moved(const struct ddp_fr_state *a, const struct ddp_fr_state *b);

/* One rank's evidence at the verdict. */
struct ddp_fr_input {
    int rank;
    const struct ddp_fr_state *fr; /* NULL: no recorder (torch 1.x, not sampled) */
    long long still_ms;            /* how long its recorder status has not moved */
    const char *frame;             /* where its stack says it is ("train.py:88 in load_batch"), or NULL */
};

enum ddp_fr_kind {
    DDP_FR_NONE,   /* the recorder names nobody: the stack rules decide */
    DDP_FR_BEHIND, /* ranks never reached collective N that the others enqueued */
    DDP_FR_OP,     /* at the same N, different ops */
    DDP_FR_SHAPE,  /* at the same N, the same op with different shapes or dtypes */
    DDP_FR_ORDER,  /* a cycle: ranks entered two groups' collectives in different orders (a deadlock) */
};

#define DDP_FR_HOPS 8 /* links of a chain kept for summary.json's hang.chain */

/* One link of the wait-for chain: ranks `waiting` wait in collective seq of group `group` for ranks `on`, which have
 * not enqueued it (their last there is `last`; -1 mixed or unknown). */
struct ddp_fr_hop {
    char waiting[DDP_FR_RANKS];
    char group[DDP_FR_ID];
    char ranks[DDP_FR_RANKS]; /* the group's members, "" unknown */
    long long seq;
    char op[DDP_FR_OPLEN];
    char on[DDP_FR_RANKS];
    long long last;
};

struct ddp_fr_verdict {
    enum ddp_fr_kind kind;
    size_t nculprits;            /* 0 with OP/SHAPE: no majority (only the program says which side is wrong) */
    char group[DDP_FR_ID];       /* the process group (its name) */
    char ranks[DDP_FR_RANKS];    /* its ranks */
    long long seq;               /* N: the collective the others wait in */
    char op[DDP_FR_OPLEN];       /* what the others (the majority) are in at N, "" unknown */
    char other[DDP_FR_SHAPELEN]; /* OP: the minority's op; SHAPE: the minority's shape; BEHIND: "" */
    char shape[DDP_FR_SHAPELEN]; /* SHAPE: the majority's shape */
    long long waited_ms;         /* how long the waiting ranks' recorders stood still */
    char group2[DDP_FR_ID];      /* ORDER: the second group of the cycle */
    size_t nhops;                /* the chain from the culprits out to the ranks that wait on them */
    struct ddp_fr_hop hop[DDP_FR_HOPS];
    char why[1536]; /* one line naming the culprits, the group, N, both ops or shapes, the chain */
};

/* Decide from the recorders of n ranks (culprit[i], caller's, n entries), across all their process groups. A group
 * is known by its name (the same on every rank) and its members (the rank's own torch map, pg_config, else the ranks
 * that report it). Each rank's oldest collective that is pending, (group, N), points to the members of that group
 * that have not enqueued N; the chains are followed (watch/waitgraph.c, waitfor.c). The culprits are at their ends:
 * ranks that wait on nothing (BEHIND), the minority where all entered N with different ops (OP) or shapes/dtypes
 * (SHAPE), or, in a cycle, the rank that left the order its own history shows (BEHIND), else nobody (ORDER, both
 * groups and orders named). Linear in ranks x groups. Pure. */
void ddp_fr_decide(const struct ddp_fr_input *in, size_t n, bool *culprit, struct ddp_fr_verdict *v);

/* v as summary.json's hang.recorder and the suspect event's recorder: a new object {"verdict", "pg", "pg2" (ORDER:
 * the other group), "ranks", "seq", "op", "other", "shape", "waited_ms", "chain"}. */
json_t *ddp_fr_verdict_json(const struct ddp_fr_verdict *v);

/* The chain of v as summary.json's hang.chain: a new JSON array of {"waiting", "group", "ranks", "seq", "op", "on",
 * "last"}. */
json_t *ddp_fr_chain_json(const struct ddp_fr_verdict *v);

/* "none", "behind", "op_mismatch", "shape_mismatch", "order_deadlock" */
const char *ddp_fr_kind_name(enum ddp_fr_kind k);

/* One sample round's places from the recorders (fr[i], NULL: none), for stragglers (suspect.h), across all process
 * groups: a rank whose oldest pending collective no member of that group is past waits (INSIDE); a rank with a
 * recorder that waits in none, or is behind where it waits, is OUTSIDE; a rank without one NONE. Returns false
 * (place untouched) unless two or more ranks have a named group. Under NCCL, where every stack shows a CUDA sync,
 * this is what says who makes the others wait. Pure (watch/waitfor.c). */
bool ddp_fr_places(const struct ddp_fr_state *const *fr, size_t n, enum ddp_suspect_place *place);

#endif
