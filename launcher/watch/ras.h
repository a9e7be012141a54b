/* ras: NCCL's RAS (NCCL 2.24 and later: a thread in every rank, answering on NCCL_RAS_ADDR, which ddplaunch gives
 * each job) as evidence where torch's flight recorder is missing (torch 1.x, the recorder off, a rank whose Python
 * is stuck). Parses the answer to STATUS, JSON (`SET FORMAT json`, NCCL 2.28.7 and later) or the text's
 * communicator table, and judges it: per communicator, the ranks behind in a collective count, missing ranks and
 * ranks with an error, named by rank and mapped to this job's pids. Pure: it does not connect (the query is the
 * caller's, over the loop) and decides nothing about stopping. */
#ifndef DDP_RAS_H
#define DDP_RAS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define DDP_RAS_OPS 5 /* Broadcast, Reduce, AllGather, ReduceScatter, AllReduce */

struct ddp_ras_rank {
    int rank;
    char host[64];
    long pid;     /* -1 unknown */
    bool missing; /* listed in missing_ranks: RAS could not reach it */
    bool error;   /* async_error set, or abort_flag */
    int async_error;
    long long count[DDP_RAS_OPS]; /* -1 unknown (missing, text) */
};

struct ddp_ras_comm {
    char hash[40];
    int size;          /* ranks in the communicator */
    int missing_count; /* missing_ranks_count */
    char status[16];   /* the text table's: RUNNING, INIT, FINALIZE, ABORT..., "" from JSON */
    char errors[16];   /* the text table's: OK, MISMATCH, ERROR, INCOMPLETE..., "" from JSON */
    size_t nranks;
    struct ddp_ras_rank *r;
};

struct ddp_ras {
    char version[32]; /* nccl_version, or the text's "NCCL version X" */
    bool json;        /* from the JSON form (per rank), else the text's table (per group of communicators) */
    size_t ncomms;
    struct ddp_ras_comm *c;
};

/* The op names in count[]'s order ("Broadcast" ...). */
const char *ddp_ras_op_name(int op);

/* Parse len bytes of a STATUS answer: a JSON document (from its first '{'), else the text form's communicator
 * table. 0 with *out filled (free with ddp_ras_free), -ENOENT when neither is there, -EINVAL for a JSON document
 * that is not RAS's. */
int ddp_ras_parse(const char *text, size_t len, struct ddp_ras *out);
void ddp_ras_free(struct ddp_ras *ras);

/* Judge ras for this job's n ranks (pid[i] the program's pid of rank[i]): per communicator, the ranks whose
 * count of some op is below the highest (behind: the others wait in it, if the counts stand still), the missing
 * ranks and those with an error. culprit[i] (caller's, n entries) set for the job's ranks named; why gets one
 * line ("NCCL RAS: communicator 0x1111222233334444 (3 ranks): rank 1 (pid 4101) is behind: AllReduce 9 where
 * rank 0 has 10; rank 2 (pid 4102, 192.0.2.3) is missing"), "" when nothing is wrong. A rank RAS reports with a
 * pid not in pid[] keeps RAS's own rank number. Returns the number of ranks named. */
size_t ddp_ras_judge(const struct ddp_ras *ras, const pid_t *pid, const int *rank, size_t n, bool *culprit, char *why,
                     size_t cap);

#endif
