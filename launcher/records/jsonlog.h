/* jsonlog: the run's machine-readable record in log_dir: events.jsonl (one JSON object per line, appended as
 * things happen) and summary.json (written once at the end, atomically). Schema version DDP_JSONLOG_VERSION,
 * documented in ddplaunch(1), RUN RECORDS. It does not decide what to record: supervise.c calls it. */
#ifndef DDP_JSONLOG_H
#define DDP_JSONLOG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/util.h"

#define DDP_JSONLOG_VERSION 1
#define DDP_JSONLOG_RESERVE (64u << 10) /* disk taken at open for summary.json (a summary is a few KiB) */

struct ddp_jsonlog;

/* Create events.jsonl in the run directory dirfd (borrowed: it must stay open until ddp_jsonlog_close; path is
 * its name for messages) with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644, and summary.json's temporary file
 * .summary.json.PID holding DDP_JSONLOG_RESERVE bytes (fallocate), so that the summary is written when the disk
 * filled up during the run. Returns 0 with *out (caller owns; ddp_jsonlog_close()), or a negative errno with
 * err. */
int ddp_jsonlog_open(int dirfd, const char *path, struct ddp_jsonlog **out, struct ddp_err *err);

/* Append one event: {"v":1,"ts":"...","event":name, ...fields}. Takes fields (a JSON object, or NULL);
 * r == NULL is a no-op that still frees fields. A write that fails (a full disk) stops events.jsonl at its last
 * whole line (the part written is cut off): one warning, never fatal; later events are left out. */
void ddp_jsonlog_event(struct ddp_jsonlog *r, const char *name, json_t *fields);
/* Hold the next event's place and time: the events that come until ddp_jsonlog_fill() wait (each stamped when
 * it came) and are written after the one that fills the place, stamped with the time it was held. An event
 * whose fields are known only later (attempt_start names the programs' pids) keeps its place in the order.
 * A place already held stays as it is; ddp_jsonlog_close() writes what still waits. r NULL: a no-op. */
void ddp_jsonlog_hold(struct ddp_jsonlog *r);
/* Fill the held place with this event (takes fields), then write the events that waited; without a held place
 * it is ddp_jsonlog_event(). */
void ddp_jsonlog_fill(struct ddp_jsonlog *r, const char *name, json_t *fields);
/* events.jsonl stopped: the errno of the failed write and *len its bytes; 0 while it is written (or r NULL). */
int ddp_jsonlog_stopped(const struct ddp_jsonlog *r, uint64_t *len);

/* Write summary.json in the run directory ({"v":1,"ts":...} added to summary) through a temporary file and rename.
 * Takes summary. 0 or a negative errno (warned, not fatal). */
int ddp_jsonlog_summary(struct ddp_jsonlog *r, json_t *summary);

/* A JSON string of s's bytes (json_null() for NULL) that jansson cannot refuse: each byte that is not part of
 * valid UTF-8 (a stray continuation byte, an overlong form, a surrogate, a cut-off sequence) becomes U+FFFD.
 * json_string() returns NULL for such text, and a NULL value silently drops its key from an object. */
json_t *ddp_jsonlog_text(const char *s);

/* The one writer of a record's fields: json_pack's format ("{s:i, s:s?, s:o, s:[]}": objects and arrays of i int,
 * I json_int_t, b bool, f double, n null, s and s? text (NULL is null), o (taken; NULL is null), O (borrowed), []
 * and {} empty) with every text through ddp_jsonlog_text, so that text that is not valid UTF-8 becomes U+FFFD in
 * its field instead of making json_pack fail and the whole record lose its fields. Never NULL; a format outside
 * that grammar is a programming error (abort). Caller owns. */
json_t *ddp_jsonlog_pack(const char *fmt, ...);

/* The path given to ddp_jsonlog_open (borrowed), or NULL for r == NULL. */
const char *ddp_jsonlog_dir(const struct ddp_jsonlog *r);

void ddp_jsonlog_close(struct ddp_jsonlog *r); /* NULL is a no-op */

#endif
