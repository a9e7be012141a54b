/* records: what a job leaves for people and tools: events.jsonl and summary.json in the log directory
 * (jsonlog.h writes them), this job's entry in `ddplaunch ps` (jobs.h), the failure ledger (the root cause and
 * the other failures) and the console summary made from it. It is fed events and facts by the driver and
 * never reaches back: it decides no action, signals nothing, reads no pipe. */
#ifndef DDP_RECORDS_H
#define DDP_RECORDS_H

#include <jansson.h>
#include <stdbool.h>

#include "records/class.h"
#include "run/output.h"
#include "run/plan.h"
#include "run/runner.h"

struct ddp_records;

/* What the records are told of the job on this node (the driver fills it from its plan context). */
struct ddp_records_config {
    const struct ddp_plan_job *job; /* spec, host, run id, topology, log dir, base_env; must outlive the records */
    const char *const *gpu_held;    /* per topology GPU: what held memory on it at launch (ddp_plan_gpus), or NULL */
    const char *master_addr;
    int master_port;
    int nnodes;
    int node_rank; /* -1: not known */
    int nproc;
};

/* Open the records of a job (job->logdir: events.jsonl with job_start; job->base_env: the ps entry); a record
 * that cannot be written is said (warning or debug line) and left out. out: the workers' console, whose logs
 * that stopped (a full disk) the summaries list. Never fails. Caller owns; ddp_records_close(). cfg.job,
 * cfg.gpu_held and out must outlive it. */
struct ddp_records *ddp_records_open(struct ddp_records_config cfg, struct ddp_output *out);
void ddp_records_close(struct ddp_records *r); /* NULL is a no-op */

/* The record files, for a module that writes its own events (progress.h), or NULL; the JSON array of the
 * stragglers named live (summary.json's "stragglers"), to append to. Both borrowed. */
struct ddp_jsonlog *ddp_records_record(struct ddp_records *r);
json_t *ddp_records_stragglers(struct ddp_records *r);
/* The JSON object of summary.json's "flight_recorder" (progress.h fills it; borrowed). */
json_t *ddp_records_recorder(struct ddp_records *r);

/* How the last hang the live watch named was recovered from (progress.h fills it; times monotonic ms, 0 = not
 * reached): summary.json's "recovery" and a `recovery` event at the job's end, which `ddplaunch report` prints as
 * "hang -> training again in N s". The state it judged goes into the hang verdict of the same attempt
 * (summary.json's hang.state). Borrowed. */
struct ddp_recovery {
    int attempt;               /* the attempt that hung, -1 none */
    long long began_ms;        /* the last progress before the hang */
    long long named_ms;        /* the hang was named (the suspected hang's line) */
    long long stopped_ms;      /* the attempt was stopped for it */
    long long restarted_ms;    /* the next attempt started */
    long long training_ms;     /* that attempt made progress: its first recorder move, else its first output */
    bool training_provisional; /* training_ms is an output line's: a recorder move replaces it */
    char state[16];            /* "stuck", "busy", "weak" */
    char text[512];            /* the state in words */
};
struct ddp_recovery *ddp_records_recovery(struct ddp_records *r);

/* One event line (fields: taken; NULL = none). */
void ddp_records_event(struct ddp_records *r, const char *name, json_t *fields);

/* An attempt's workers are being started: its attempt_start (ps: attempt, world size, GPUs, ranks alive) takes
 * its place in events.jsonl now and is written once every worker's program started or its shim exited, so that
 * it names the programs' pids; the events that come meanwhile are written after it. ddp_records_attempt_flush()
 * checks again (a program started). */
void ddp_records_attempt_begin(struct ddp_records *r, const struct ddp_runner_attempt *run);
void ddp_records_attempt_flush(struct ddp_records *r, const struct ddp_runner_attempt *run);
/* The launcher got signal signo (events.jsonl's signal: when the end began, should it be SIGKILLed after);
 * from_slurm: slurmstepd sent it to every process (not forwarded); action: "stop", "kill" or "forward". */
void ddp_records_signal(struct ddp_records *r, int attempt, int signo, bool from_slurm, const char *action);
/* ddplaunch began to stop attempt `attempt` (a failure, a timeout, a signal): a worker of it that exits non-zero
 * from now on, not the root cause, is recorded as stopped (worker_exit "stopped": true; grey in report --svg). */
void ddp_records_stopping(struct ddp_records *r, int attempt);
/* A worker's shim exited (worker_exit, with "stopped"; ps: ranks alive). Call it after k's state is
 * DDP_WS_EXITED. */
void ddp_records_worker_exit(struct ddp_records *r, const struct ddp_runner_worker *k);
/* The first line of k's output that a failure class (cls) recognised, this attempt (len bytes of line; later
 * ones are ignored): the class its worker_exit and the ledger give it. */
void ddp_records_recognised(struct ddp_records *r, const struct ddp_runner_worker *k, enum ddp_class cls,
                            const char *line, size_t len);
/* A timeout stops attempt `attempt` (timeout): cls, the rank to blame first (k, or NULL), why. */
void ddp_records_timeout(struct ddp_records *r, int attempt, enum ddp_class cls, const struct ddp_runner_worker *k,
                         const char *why);

/* The failure ledger. tcls: the class of the timeout that stops the attempt when reason is a timeout's, else
 * DDP_CLASS_NONE. */
/* k is the root cause now (k NULL: none, a timeout of no one rank); the other failures are forgotten. */
void ddp_records_root(struct ddp_records *r, const struct ddp_runner_worker *k, const char *reason,
                      enum ddp_class tcls);
/* k failed on its own while the attempt was being stopped: listed after the root cause. */
void ddp_records_other(struct ddp_records *r, const struct ddp_runner_worker *k);
/* k got SIGABRT from the hang capture (capture.c): its summary entry says it was stopped by ddplaunch for the
 * stack capture, not that it aborted. */
void ddp_records_captured(struct ddp_records *r, const struct ddp_runner_worker *k);
/* k exited: when the root cause was recorded while k still ran (a timeout), it now says how k ended. */
void ddp_records_exited(struct ddp_records *r, const struct ddp_runner_worker *k, enum ddp_class tcls);
/* The hang verdict named k: it becomes the root cause (the earlier root cause, another rank, one of the
 * others) with class hang, why and hint. */
void ddp_records_blame(struct ddp_records *r, const struct ddp_runner_worker *k, const char *why, const char *hint);
/* A rank failed with a collective error and the flight recorders showed what differed (watch/mismatch.h): k, whose
 * values differ, becomes the root cause with class collective-mismatch and why (the rank that failed is listed
 * after it); mismatch (taken) is summary.json's "mismatch" and a "mismatch" event; text (taken) is said after the
 * console summary. */
void ddp_records_mismatch(struct ddp_records *r, const struct ddp_runner_worker *k, const char *why, json_t *mismatch,
                          char *text);
/* Forget the root cause and the other failures (a follower's next attempt). */
void ddp_records_forget(struct ddp_records *r);
/* The root cause in one line for node 0 ("rank 3 (local 1) exited with code 2, exit-2"), "" when none. */
void ddp_records_root_line(const struct ddp_records *r, char *buf, size_t size);

/* What NVML said about topology GPU gpu (busid) during the run: a fault (a critical Xid, a double-bit ECC error,
 * text its meaning), which then names the GPU as the root cause of a failure or hang of the rank on it; or a
 * process holding its memory seen after the launch (held: "pid N (user, command, X GiB)"), which explains a CUDA
 * out-of-memory failure there as the launch's holder does (ddp_records_config's gpu_held). The first fault is kept. */
void ddp_records_gpu_fault(struct ddp_records *r, int gpu, const char *busid, const char *text);
void ddp_records_gpu_held(struct ddp_records *r, int gpu, const char *held);
/* GPU gpu (busid) is left out of the attempts after `attempt` (why; text: the console's line): a gpu_left_out
 * event, and an entry of summary.json's "gpus_left_out". */
void ddp_records_gpu_left_out(struct ddp_records *r, int attempt, int gpu, const char *busid, const char *why,
                              const char *text);

/* The driver's decision after attempt `attempt` (decision): action "restart" or "downsize" (next attempt, its
 * size, the delay before it) or "exit" (status), why, and the root cause's rank when one is known (and the
 * exit is a failure). */
void ddp_records_decision(struct ddp_records *r, int attempt, const char *action, int next_attempt, int next_nproc,
                          long long delay_ms, int status, const char *why);

/* A record file of the run (file: its path under the run directory) stopped at bytes by errno err (a full
 * disk): listed with the logs that stopped (the workers' logs are listed by output.h itself). */
void ddp_records_stopped(struct ddp_records *r, const char *file, uint64_t bytes, int err);

/* The hang verdict (summary.json "hang", taken) and its console text (taken), with a "hang" event. */
void ddp_records_hang(struct ddp_records *r, json_t *hang, char *text);

/* The failure summary on stderr ("PROG FAILED (exit status N)", root cause, others, hang verdict), after what
 * the console holds (out). When no root cause is known, only the logs that stopped (if any). */
void ddp_records_print_summary(struct ddp_records *r, int status, struct ddp_output *out);

/* A job that succeeded after restarts says so in one line ("X succeeded after 2 attempts (1 restart) in 0.3 s");
 * nothing after one attempt. Both summaries end with the logs that stopped (a full disk), if any. */
void ddp_records_print_success(const struct ddp_records *r);

/* job_end in events.jsonl and summary.json, once: result ("succeeded", "failed", "timeout", ...), timeout:
 * why the last attempt timed out, or NULL. */
void ddp_records_job_end(struct ddp_records *r, int status, const char *result, const char *timeout);

#endif
