/* progress_internal: the live watcher's state, shared by the files of progress.h only: the loop, the samples
 * and what is said and done of a suspicion (progress.c), the evidence judged (progress_judge.c) and NCCL's RAS
 * asked (progress_ras.c). Every other module uses progress.h. */
#ifndef DDP_PROGRESS_INTERNAL_H
#define DDP_PROGRESS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>
#include <uv.h>

#include "base/util.h"
#include "records/jsonlog.h"
#include "records/records.h"
#include "watch/fr.h"
#include "watch/fr_remote.h"
#include "watch/hang.h"
#include "watch/progress.h"
#include "watch/rankstate.h"
#include "watch/rasq.h"
#include "watch/sample.h"
#include "watch/suspect.h"

struct wrank {
    struct ddp_progress_rank r;
    pid_t groups[2]; /* the shim's process group, the program's own */
    bool running;
    bool sampled; /* has a stacks file */
    struct ddp_sample_file file;
    struct ddp_hang_view view; /* the last sample's place */
    bool has_view;
    long long last_ms;   /* its last sign of progress */
    const char *hb_path; /* its heartbeat file (borrowed), or NULL */
    struct timespec hb;
    json_t *straggler;       /* its entry in stragglers once named (borrowed from the array) */
    struct ddp_fr_state *fr; /* its flight recorder as the last sample showed it (fr.h), NULL: none yet */
    long long fr_moved_ms;   /* when its recorder status last moved */
    enum { ASK_NO, ASK_POKE, ASK_SENT, ASK_ANSWERED } ask; /* ddp_progress_ask's state for this rank */
    struct ddp_rankstate_sample proc_base, proc_last;      /* /proc early in the quiet spell, and at the last tick */
    struct ddp_rankstate_verdict state;                    /* its state at the last judgement (rankstate.h) */
    bool worked;                                           /* judged busy in this quiet spell */
};

struct ddp_progress {
    uv_timer_t tick, collect;
    int open_timers;
    const struct ddp_spec *spec;
    const char *host;
    int attempt;
    struct wrank *rk;
    size_t n;
    struct ddp_jsonlog *rec;
    json_t *stragglers;
    json_t *recorder;                   /* summary.json's flight_recorder (borrowed), or NULL */
    const struct ddp_fr_remote *remote; /* the other nodes' ranks' recorders (borrowed; node 0), or NULL */
    struct ddp_progress_hooks hooks;
    struct ddp_suspect sus;
    long long suspected_ms; /* when the current suspicion began, 0: none */
    long long quiet_since;  /* the last progress before it */
    bool fr_asked;          /* the flight recorders were asked to dump (once per suspicion) */
    bool fr_places;         /* the last round's places came from the flight recorders */
    long long round_ms;     /* when the last sample round was taken */
    long long warned_ms;
    bool acted;
    bool said_hang;        /* the suspected hang's line was said in this quiet spell */
    bool said_stuck;       /* ... with its culprits stuck */
    bool alone_said;       /* the attempt's one "works alone" line was said */
    long long stuck_since; /* the culprits were first judged stuck (this spell), 0: not stuck */
    long clk_tck;
    struct ddp_recovery *recovery; /* the last hang named and how it was recovered from (records.h), or NULL */
    bool asking;                   /* ddp_progress_ask: the regular samples pause */
    struct ddp_rasq *rasq;         /* NCCL RAS's answer awaited, or NULL */
    bool *ras_named;               /* the ranks RAS's last answer named (behind, missing, failed), n of them */
    char ras_why[1024];            /* what it said of them, "" none */
};

/* What the evidence says of a suspected hang now: the verdict (culprits, from the recorder, the stacks or NCCL's
 * RAS), each running rank's state (rankstate.h) and the job's (suspect.h). */
struct judged {
    struct ddp_hang_verdict v;
    bool *culprit;
    bool fr_verdict;     /* the flight recorder named them */
    bool deadlock;       /* ... in a collective mismatch or an ordering deadlock: it never ends by itself */
    json_t *culprits;    /* the culprits, as the suspect event lists them */
    json_t *recorder;    /* the recorder's verdict, or JSON null */
    json_t *reached;     /* each rank's recorder summary */
    struct ddp_buf desc; /* "rank 2 (local 2, host h, GPU g) at x.py:3 in f" */
    enum ddp_suspect_state st;
    bool all_busy;        /* busy, and no rank waits: the job works (its start, a long step), nobody alone */
    struct ddp_buf words; /* the state in words: "rank 2 is stuck (...); ranks 0-1 wait in all_reduce for it" */
};

/* "rank 2 (local 2, host h, GPU 0000:17:00.0)" into b */
void ddp_progress_rank_desc(struct ddp_buf *b, const struct ddp_progress *w, const struct wrank *k);
/* Rank k as an event lists it (with_place: its collective and frame). Caller owns; json_decref(). */
json_t *ddp_progress_rank_json(const struct ddp_progress *w, const struct wrank *k, bool with_place);
/* The evidence of a suspected hang after quiet ms of no progress, into *j (free with ddp_progress_judged_free):
 * the verdict, each running rank's state (it sets w->rk[].state and .worked) and the job's, and the words. */
void ddp_progress_judge(struct ddp_progress *w, long long quiet, long long now, struct judged *j);
void ddp_progress_judged_free(struct judged *j);
/* Ask NCCL's RAS where no rank has a flight recorder and the job has a port of its own (once at a time): its
 * answer is said and kept in w->ras_named and w->ras_why for the next verdict. */
void ddp_progress_ras_ask(struct ddp_progress *w);

#endif
