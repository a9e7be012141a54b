/* jobs: `ddplaunch ps`: the ddplaunch jobs running on this host. Each running job publishes a small JSON file
 * "job-PID.json" (0644, owned by its user) in the shared lock directory and holds the kernel lock "job-PID"
 * (klock.h) while it lives; any user lists them without a daemon, believing a file only when the kernel says
 * that lock is held by that pid of the file's owner (a crashed job's leftover or a forged file is not shown).
 * It does not decide what a job's state is (supervise.c fills it). */
#ifndef DDP_JOBS_H
#define DDP_JOBS_H

#include <jansson.h>
#include <stdio.h>

#include "base/util.h"

struct ddp_jobs;

/* Publish this process as a job in lock_dir with state (an object; copied); with sweep, first remove the files
 * of this user's jobs that are gone (SIGKILLed). Returns 0 with *out (caller owns; ddp_jobs_close()), or a
 * negative errno with err (the job runs on without being listed). */
int ddp_jobs_publish(const char *lock_dir, const json_t *state, bool sweep, struct ddp_jobs **out, struct ddp_err *err);
/* Replace the published state (merged over the last one). NULL j is a no-op. */
void ddp_jobs_update(struct ddp_jobs *j, const json_t *changes);
/* Remove the file and drop the lock. NULL is fine. */
void ddp_jobs_close(struct ddp_jobs *j);

/* The jobs listed in lock_dir now, as a JSON array (caller owns), each the job's state plus "user" (from the
 * kernel's uid) and "age_s". Never fails: an unreadable directory gives an empty array. A job file that a live
 * job's lock backs but that cannot be read or is no JSON object (planted unreadable, or cut short) is skipped,
 * never the others: skipped (cap bytes, may be NULL) then says how many and the first ("" when none). */
json_t *ddp_jobs_list(const char *lock_dir, char *skipped, size_t cap);

/* The ps command: text table (or --json) on out. Returns the exit status (0). */
int ddp_jobs_command(const char *lock_dir, bool json, FILE *out);

#endif
