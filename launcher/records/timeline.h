/* timeline: `ddplaunch report RUN_DIR`: what happened in a run, from its records (events.jsonl, each rank's
 * timed.log): per attempt and rank when it started, its last output, when and how it ended, the timeouts, hang
 * verdicts and decisions, as text and as an SVG a browser shows. It reads a finished (or running) run's files;
 * it never writes into the run directory. */
#ifndef DDP_TIMELINE_H
#define DDP_TIMELINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/util.h"

struct ddp_timeline;

/* Build from the events (a JSON array of events.jsonl's objects, borrowed) and a function that gives the last
 * output time (ISO string, or NULL) of (attempt, local_rank) before `before` (ISO, NULL = any). Pure apart
 * from calling last_output. Returns 0 with *out (free with ddp_timeline_free), or -EINVAL with err when the
 * events hold no job_start. */
typedef const char *ddp_last_output_fn(void *arg, int attempt, int local_rank, const char *before);
int ddp_timeline_build(const json_t *events, ddp_last_output_fn *last_output, void *arg, struct ddp_timeline **out,
                       struct ddp_err *err);
void ddp_timeline_free(struct ddp_timeline *t);

/* Text: one block per attempt, one line per rank, then the events of note, times in seconds from the start. */
void ddp_timeline_print(FILE *f, const struct ddp_timeline *t);
/* A record without job_end: the launcher's pid (job_start) and *host its host, else -1. When gone (that pid is
 * no ddplaunch any more on that host), the record says so: result "launcher-killed", a line with its last
 * record's time, ranks without an end "unknown" instead of "running". */
int ddp_timeline_pid(const struct ddp_timeline *t, const char **host);
void ddp_timeline_launcher_gone(struct ddp_timeline *t, bool gone);
/* The same as a standalone SVG document (one lane per rank and attempt, colours by how the rank ended, the
 * culprit of a hang in red, timeouts as vertical lines). */
void ddp_timeline_svg(FILE *f, const struct ddp_timeline *t);

/* The report command: path is a run directory (holds events.jsonl) or a log_dir whose newest run is shown.
 * Prints the text to out; with svg_path, writes the SVG there (created 0644, not through a symlink).
 * Returns the exit status: 0, 2 (not a run directory or unreadable records, message on stderr). */
int ddp_timeline_command(const char *path, const char *svg_path, FILE *out);

#endif
