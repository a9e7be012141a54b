/* mismatch: what differed at a collective failure. From the flight recorders of an attempt's ranks (fr.h:
 * the survivors' read when a rank failed with a collective error, the failed rank's as last sampled), finds the
 * first collective (group, N) whose members enqueued different ops, shapes or dtypes, and names the ranks whose
 * values differ: the minority, or, with no majority, the side the failed rank is not on. Pure: no loop, no files
 * (atfail.c asks the ranks and records the verdict). */
#ifndef DDP_MISMATCH_H
#define DDP_MISMATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "watch/fr.h"

/* One rank's recorder at the failure. */
struct ddp_mismatch_input {
    int rank;
    const struct ddp_fr_state *fr; /* NULL: none (torch 1.x, never sampled, no answer) */
    bool failed;                   /* this rank failed with the collective error */
};

struct ddp_mismatch {
    bool found;
    char group[DDP_FR_ID];    /* the process group (its name) */
    char ranks[DDP_FR_RANKS]; /* its members as the recorders say them ("0-1"), "" unknown */
    long long seq;            /* N */
    char op[DDP_FR_OPLEN];    /* what the others enqueued at N */
    char shape[DDP_FR_SHAPELEN];
    char other_op[DDP_FR_OPLEN]; /* what the culprits (or, with none, the second side) enqueued */
    char other_shape[DDP_FR_SHAPELEN];
    char culprits[DDP_FR_RANKS]; /* "1", "1, 3"; "" when nobody is named (no majority, failed rank unknown) */
    char others[DDP_FR_RANKS];   /* the other side's ranks */
    size_t nculprits;
    char why[1024]; /* "rank 1 sent [[4]] Double where rank 0 sent [[4]] Float in gloo:all_reduce #4 of group 1
                       (ranks 0-1)" */
};

/* Decide from n ranks (culprit[i], caller's, n entries, set for the ranks named). m->found false when no two
 * known ranks differ at any collective they both recorded. Linear in ranks x groups x entries kept. */
void ddp_mismatch_decide(const struct ddp_mismatch_input *in, size_t n, bool *culprit, struct ddp_mismatch *m);

/* m as summary.json's "mismatch" and the mismatch event: a new object {"pg", "ranks", "seq", "op", "shape",
 * "culprits", "culprit_op", "culprit_shape", "others", "why"}. */
json_t *ddp_mismatch_json(const struct ddp_mismatch *m);

#endif
