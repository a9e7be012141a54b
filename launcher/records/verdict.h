/* verdict: the one rule a requeue script reads to tell ddplaunch's own verdict from a worker's exit code, which
 * may be 1, 2 or 75 too (ddplaunch(1), EXIT STATUS): summary.json's "exit" object
 *   {"code": N, "source": "worker" | "launcher", "rank": R | null, "reason": RESULT}
 * "worker": N is the root-cause worker's own exit code (128+S when it died by signal S), or 0 when every worker
 * succeeded; "launcher": ddplaunch decided N (1, 2, 75, 124, 128+S when it was stopped by signal S). And the
 * record of a launch refused before any worker started (bad spec, busy port, GPUs held or leased): with a
 * log_dir, a run directory holding events.jsonl's job_refused and summary.json with result "refused". */
#ifndef DDP_VERDICT_H
#define DDP_VERDICT_H

#include <jansson.h>
#include <stdbool.h>

#include "host/logdir.h"

/* summary.json's "exit" for a job that ran: status, result (supervise's: "succeeded", "failed", "timeout",
 * "stopped-by-signal", "launcher-failed"), the root cause's rank and own status (root_set false: none). */
json_t *ddp_verdict_json(int status, const char *result, bool root_set, int root_rank, int root_status);

/* What a refused launch records, where it has a log_dir. */
struct ddp_verdict_refusal {
    const char *log_dir;   /* the job's log_dir (NULL: nothing is recorded) */
    struct ddp_logdir *ld; /* the run directory when the launch made it already (borrowed), else NULL: made here */
    const char *run_id, *job, *program, *host;
    int node_rank; /* -1: unknown */
    int nnodes;    /* 0: unknown (1) */
    int status;
    const char *reason; /* the error said on the console */
};
/* Write the refusal's events.jsonl (job_refused) and summary.json (exit source "launcher"); says where in one
 * info line. Best effort: a log_dir that cannot be made (the refusal's own reason, perhaps) records nothing. */
void ddp_verdict_refused(const struct ddp_verdict_refusal *v);

#endif
