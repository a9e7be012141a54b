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

/* ---- what a suspicion does: the facts the live watch gathers (progress.c), decided by the driver's policy
 * (ddp_policy_suspect, policy.h), handed down as a function so that the watch never includes the driver. */

/* What the kernel and the evidence say of the suspected hang (rankstate.h, judged per rank). */
enum ddp_suspect_state {
    DDP_SUSPECT_WEAK,  /* no culprit, a culprit neither stuck nor busy, or low confidence */
    DDP_SUSPECT_STUCK, /* every culprit is stuck (no CPU, no I/O; or a GPU wait that does not end) */
    DDP_SUSPECT_BUSY,  /* a rank outside every collective works alone: not a hang */
};

struct ddp_suspect_facts {
    int on_suspect; /* enum ddp_on_suspect */
    enum ddp_suspect_state state;
    long long quiet_ms;      /* no progress for this long */
    long long stuck_ms;      /* the culprits were judged stuck for this long (0: not stuck) */
    long long busy_ms;       /* a rank has worked alone for this long (0: none) */
    long long after_ms;      /* [timeout] on_suspect_after (restart, downsize) */
    long long confirm_ms;    /* auto: how long a stuck culprit must stay stuck (ddp_suspect_confirm_ms) */
    long long busy_limit_ms; /* [timeout] busy_limit, 0: never */
};

enum ddp_suspect_action {
    DDP_SUSPECT_SAY,   /* the suspected hang's line (again each minute while it lasts) */
    DDP_SUSPECT_ALONE, /* the "works alone" line (once): no action */
    DDP_SUSPECT_STOP,  /* stop the attempt as a hang of the culprits (restart as max_restarts allows) */
    DDP_SUSPECT_END,   /* stop it and end the job with the evidence (busy_limit passed) */
};

const char *ddp_suspect_state_name(enum ddp_suspect_state st); /* "weak", "stuck", "busy" */

typedef enum ddp_suspect_action ddp_suspect_decide_fn(const struct ddp_suspect_facts *f);

/* How long auto waits, once the culprits are judged stuck, before it stops them: twice the sample interval, at
 * least half the floor, at most 30 s. */
long long ddp_suspect_confirm_ms(long long floor_ms, long long sample_interval_ms);

#endif
