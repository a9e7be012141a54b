/* record: the run's machine-readable record in log_dir: events.jsonl (one JSON object per line, appended as
 * things happen) and summary.json (written once at the end, atomically). Schema version DDP_RECORD_VERSION,
 * documented in ddplaunch(1), RUN RECORDS. It does not decide what to record: supervise.c calls it. */
#ifndef DDP_RECORD_H
#define DDP_RECORD_H

#include <jansson.h>
#include <stddef.h>
#include <time.h>

#include "util.h"

#define DDP_RECORD_VERSION 1

struct ddp_record;

/* Create events.jsonl in the run directory dirfd (borrowed: it must stay open until ddp_record_close; path is
 * its name for messages) with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644. Returns 0 with *out (caller owns;
 * ddp_record_close()), or a negative errno with err. */
int ddp_record_open(int dirfd, const char *path, struct ddp_record **out, struct ddp_err *err);

/* Append one event: {"v":1,"ts":"...","event":name, ...fields}. Takes fields (a JSON object, or NULL);
 * r == NULL is a no-op that still frees fields. A write error is reported once as a warning, never fatal. */
void ddp_record_event(struct ddp_record *r, const char *name, json_t *fields);

/* Write summary.json in the run directory ({"v":1,"ts":...} added to summary) through a temporary file and rename.
 * Takes summary. 0 or a negative errno (warned, not fatal). */
int ddp_record_summary(struct ddp_record *r, json_t *summary);

/* The path given to ddp_record_open (borrowed), or NULL for r == NULL. */
const char *ddp_record_dir(const struct ddp_record *r);

void ddp_record_close(struct ddp_record *r); /* NULL is a no-op */

#endif
