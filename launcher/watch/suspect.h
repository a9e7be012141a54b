/* suspect: the pure part of watching a running attempt. (1) When has the job made no progress for longer than its
 * own cadence allows (a limit learned from the longest gap between signs of progress seen so far, with a setup
 * allowance and a floor)? (2) Which rank makes the others wait, from periodic stack samples (a straggler)? It keeps
 * counts and timestamps only: no clock, no files, no signals (progress.c gathers the facts; hang.c names culprits). */
#ifndef DDP_SUSPECT_H
#define DDP_SUSPECT_H

#include <stdbool.h>
#include <stddef.h>

struct ddp_suspect_cfg {
    long long floor_ms; /* never suspect a hang sooner than this without progress */
    long long setup_ms; /* no suspicion before the attempt ran this long (first step, compilation) */
    int factor;         /* the limit: factor times the longest gap between signs of progress seen so far */
};

/* A rank's place in one sample round. */
enum ddp_suspect_place {
    DDP_SUSPECT_NONE,    /* no stack this round (not running, not registered, no answer) */
    DDP_SUSPECT_INSIDE,  /* inside a collective (waiting, as far as Python can tell) */
    DDP_SUSPECT_OUTSIDE, /* in no collective (computing, loading, saving...) */
};

/* A straggler test needs this many rounds where some ranks waited while others did not */
#define DDP_SUSPECT_MIN_WAITED 8

struct ddp_suspect {
    struct ddp_suspect_cfg cfg;
    long long start_ms, last_ms; /* attempt start; last sign of progress of any rank (start until one) */
    long long longest_gap_ms;    /* longest time between two signs of progress (the cadence learned) */
    size_t n;
    unsigned rounds;  /* sample rounds with two or more ranks placed */
    unsigned waited;  /* of those, rounds where some ranks were inside a collective and others outside */
    unsigned *caused; /* per rank: waited rounds in which it was outside */
    bool *named;      /* per rank: already named a straggler */
};

/* Start watching an attempt of n ranks at now. Free with ddp_suspect_free(). */
void ddp_suspect_init(struct ddp_suspect *s, const struct ddp_suspect_cfg *cfg, size_t n, long long now);
void ddp_suspect_free(struct ddp_suspect *s);

/* A sign of progress of some rank at now (an output line, a heartbeat, a stack that changed). */
void ddp_suspect_progress(struct ddp_suspect *s, long long now);

/* How long the job may go without progress now: max(floor, factor x longest gap). */
long long ddp_suspect_limit(const struct ddp_suspect *s);

/* How long the job has made no progress at now, when that is a suspected hang (at least the limit, and the
 * attempt older than setup); 0 otherwise. */
long long ddp_suspect_stalled(const struct ddp_suspect *s, long long now);

/* Count one sample round (place[i] for each of the n ranks; the caller leaves out rounds during a suspected
 * hang). Returns the index of a rank that has just become a straggler, or (size_t)-1: at least
 * DDP_SUSPECT_MIN_WAITED waited rounds, the rank outside in at least 60% of them (its share of the waiting)
 * and the others waiting on it in at least 15% of all rounds. Each rank is named once. */
size_t ddp_suspect_round(struct ddp_suspect *s, const enum ddp_suspect_place *place);

/* A rank's share of the rounds in which others waited (0..1), and the share of all rounds in which the others
 * waited on it. */
double ddp_suspect_share(const struct ddp_suspect *s, size_t i);
double ddp_suspect_waited(const struct ddp_suspect *s, size_t i);

#endif
