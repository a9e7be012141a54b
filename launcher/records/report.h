/* report: the end-of-run summary, in the spirit of torchrun's "Root Cause (first observed failure)" block, plus
 * the failure's class and a hint; and the reader of torch's @record error files. It does not watch processes:
 * supervise.c fills the entries. */
#ifndef DDP_REPORT_H
#define DDP_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "base/util.h"

/* One failed (or stopped) worker, as the summary shows it. Strings are borrowed from the caller. */
struct ddp_report_entry {
    int rank, local_rank;
    const char *host;
    int pid;
    int exit_code;           /* when signo == 0 */
    int signo;               /* death by this signal, or 0 */
    bool running;            /* it had not exited when the launcher gave up on it (exit_code/signo unknown) */
    bool captured;           /* its SIGABRT was ddplaunch's, for the hang capture */
    time_t when;             /* wall clock of the ending */
    const char *error_file;  /* TORCHELASTIC_ERROR_FILE path, or NULL */
    bool error_file_kept;    /* it lies under --log-dir (stays after the run, beside stderr.log); false: in the
                                private run directory, removed at exit: its contents are shown, its path is not */
    const char *class_name;  /* "collective-timeout", "exit-3", ...; NULL = none */
    const char *class_line;  /* the output line that was recognised, or NULL */
    const char *hint;        /* one line, or NULL */
    const char *reason;      /* why it ended when the launcher ended it ("no progress for 10s (heartbeat)") */
    const char *cause;       /* the cause outside the worker when one is known ("GPU memory held by pid N (user,
                                command, X GiB)", a GPU fault), or NULL */
    const char *const *tail; /* last stderr lines, oldest first */
    size_t ntail;
};

/* Read torch's error file ({"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp":
 * "..."}}}, or {"message": "..."}). Returns 0 and sets *message and *traceback (either may be NULL when absent;
 * caller owns, free()) and *timestamp (0 if absent); -ENOENT when there is no file; -EINVAL when it is not such
 * JSON. */
int ddp_report_read_error_file(const char *path, char **message, char **traceback, long long *timestamp);
/* The same from len bytes of text (the pure part, fuzzed: tests/fuzz/fuzz_report.c). -EINVAL when it is not such
 * JSON (then nothing to free). Strings with an embedded NUL (\u0000) make the document invalid. */
int ddp_report_parse_error_json(const char *text, size_t len, char **message, char **traceback, long long *timestamp);

/* Print the summary: title (e.g. "train.py FAILED"), the root cause first, then the other failures.
 * Reads the error files named in the entries. */
void ddp_report_print(FILE *f, const char *title, const struct ddp_report_entry *root,
                      const struct ddp_report_entry *others, size_t nothers);

/* The entry as a JSON object (summary.json's root_cause / failures items; keys in ddplaunch(1), RUN RECORDS).
 * Reads its error file. Caller owns (json_decref). */
struct json_t;
struct json_t *ddp_report_entry_json(const struct ddp_report_entry *e);

/* "SIGSEGV" for 11 (or "SIG34" for unnamed ones). Static or thread-local storage; do not free. */
const char *ddp_report_signame(int signo);

/* Parse a signal name or number ("SIGUSR1", "USR1", "10"). Returns the number, or -EINVAL. */
int ddp_report_signum(const char *name);

#endif
