/* util: errors with a human message, aborting allocation, string vectors, logging.
 * It does not know about jobs, specs or processes; every other module builds on it. */
#ifndef DDP_UTIL_H
#define DDP_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

/* An error a function could not handle, with the message a user should read.
 * code is a negative errno (or -EINVAL for bad input). msg never ends in '\n'. */
struct ddp_err {
    int code;
    char msg[1024];
};

/* Fill err (may be NULL) and return code (a negative errno), so that callers
 * can write: return ddp_errf(err, -EINVAL, "%s:%d: ...", file, line). */
int ddp_errf(struct ddp_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Allocation never fails: on ENOMEM these print file:line and abort (flux's oom()). */
#define ddp_xmalloc(n) ddp_xmalloc_at((n), __FILE__, __LINE__)
#define ddp_xcalloc(n, s) ddp_xcalloc_at((n), (s), __FILE__, __LINE__)
#define ddp_xrealloc(p, n) ddp_xrealloc_at((p), (n), __FILE__, __LINE__)
#define ddp_xstrdup(s) ddp_xstrdup_at((s), __FILE__, __LINE__)
#define ddp_xstrndup(s, n) ddp_xstrndup_at((s), (n), __FILE__, __LINE__)
void *ddp_xmalloc_at(size_t n, const char *file, int line);
void *ddp_xcalloc_at(size_t n, size_t size, const char *file, int line);
void *ddp_xrealloc_at(void *p, size_t n, const char *file, int line);
char *ddp_xstrdup_at(const char *s, const char *file, int line);
char *ddp_xstrndup_at(const char *s, size_t n, const char *file, int line);
/* printf into a new string. Caller owns; free(). */
char *ddp_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable NULL-terminated vector of owned strings (argv/envp shaped).
 * Zero-initialised is empty. v[n] is always NULL once anything was pushed. */
struct ddp_strv {
    char **v;
    size_t n;
    size_t cap;
};
void ddp_strv_push(struct ddp_strv *sv, const char *s); /* copies s */
void ddp_strv_push_own(struct ddp_strv *sv, char *s);   /* takes s */
void ddp_strv_pushf(struct ddp_strv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ddp_strv_copy(struct ddp_strv *dst, const struct ddp_strv *src); /* dst := copy of src */
void ddp_strv_clear(struct ddp_strv *sv);                             /* frees strings, keeps nothing */
/* Index of the entry "NAME=..." in an envp-shaped vector, or -1. */
int ddp_strv_env_find(const struct ddp_strv *sv, const char *name);
/* Value of NAME in a NULL-terminated envp array, or NULL (a pure getenv). */
const char *ddp_env_get(char *const *envp, const char *name);

/* Log levels for launcher messages on stderr; every line starts "ddplaunch: ". */
enum ddp_log_level { DDP_LOG_ERROR, DDP_LOG_WARN, DDP_LOG_INFO, DDP_LOG_DEBUG };
extern int ddp_log_verbosity; /* messages above this level are dropped; default INFO */
/* Colour the launcher's own lines (errors red, warnings yellow, the summary's title, a verdict, a success after
 * restarts): main.c sets it when stderr is a terminal and NO_COLOR is unset or empty. Default off. */
extern bool ddp_log_colour;
enum ddp_colour { DDP_COLOUR_RESET, DDP_COLOUR_RED, DDP_COLOUR_YELLOW, DDP_COLOUR_GREEN, DDP_COLOUR_BOLD };
/* The SGR sequence for c ("\033[1;31m"...) when ddp_log_colour is set, else "". Static string. */
const char *ddp_colour(enum ddp_colour c);
/* Whether the launcher's lines on a stream that is a terminal (tty) get colours, as NO_COLOR (no-color.org)
 * says: not when NO_COLOR is set and not empty. Pure. */
bool ddp_log_colour_wanted(bool tty, char *const *envp);
void ddp_log(enum ddp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ddp_error(...) ddp_log(DDP_LOG_ERROR, __VA_ARGS__)
#define ddp_warn(...) ddp_log(DDP_LOG_WARN, __VA_ARGS__)
#define ddp_info(...) ddp_log(DDP_LOG_INFO, __VA_ARGS__)
#define ddp_debug(...) ddp_log(DDP_LOG_DEBUG, __VA_ARGS__)

/* Copy the line that starts at text into buf (without its newline; cut to size - 1 bytes; NUL-terminated) and
 * return where the next line starts (the end of text after the last line). For /proc text parsers. */
const char *ddp_line_next(const char *text, char *buf, size_t size);

/* Make text from others safe to print on a terminal, in place: every control character (C0, DEL, C1 encoded
 * as UTF-8), every byte that is not part of valid UTF-8 (a raw 0x9b is CSI to an 8-bit terminal) and every
 * bidirectional control (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069: "Trojan Source" reordering)
 * becomes '?' per byte, so that escape sequences and reordering in a job name or a process name are shown,
 * not obeyed. The length never changes. Returns s. */
char *ddp_printable(char *s);
/* The length of s's first bytes, at most max, that end on a character boundary: a cut there never splits a
 * UTF-8 sequence (bytes that are not valid UTF-8 count one each). Pure. */
size_t ddp_utf8_cut(const char *s, size_t max);
/* The one copy of text from others into a buffer: src (NULL: "") cut to size - 1 bytes on a character boundary
 * (ddp_utf8_cut), then ddp_printable. The result is valid UTF-8 with no control character, NUL-terminated
 * (size > 0). Returns dst. */
char *ddp_text_copy(char *dst, size_t size, const char *src);

/* Open files the launcher needs for nproc workers, every descriptor it holds counted: 8 per worker (its stdout
 * and stderr pipes or terminals and the shim's report pipe, stdout.log, stderr.log and timed.log under log_dir,
 * its GPU's lease socket, one for what a hang capture or a /proc read opens for it) plus 64 (the event loop and
 * its signal pipes, the run records, the job's locks, the binary held for restarts, the three ends a spawn
 * holds for a moment). Measured: 21 + 6 per worker with log_dir on CPUs, 1 more per GPU. Pure. */
unsigned long long ddp_nofile_need(int nproc);
/* Make sure this process may open ddp_nofile_need(nproc) files: the soft RLIMIT_NOFILE is raised to that,
 * toward the hard limit, when it is lower (workers inherit it). 0, or -EMFILE with err (one line naming the
 * limits, the need and how to raise it) when the hard limit is lower too: nothing should start then. */
int ddp_nofile_ensure(int nproc, struct ddp_err *err);

/* The lexical normal form of a path: repeated slashes folded, "." components dropped, ".." removing the
 * component before it (never above "/"), no trailing slash ("/" stays "/"). A relative path stays relative
 * ("" and "." give "."). Pure; caller owns the result (free()). */
char *ddp_path_normalize(const char *path);

/* A rate limit for a warning that others can make us repeat (bad timer requests, ...): at most burst
 * messages per interval. Zero-initialised is fresh. */
struct ddp_ratelimit {
    long long start_ms; /* start of the current interval */
    unsigned shown;     /* messages shown in it */
    unsigned dropped;   /* messages dropped since the last one shown */
};
/* Whether to show one more message at now_ms (monotonic, ddp_now_ms()). When it returns true after messages
 * were dropped, *dropped_out says how many (to be said once, with this message); else it is 0. Pure. */
bool ddp_ratelimit_allow(struct ddp_ratelimit *rl, long long now_ms, unsigned burst, long long interval_ms,
                         unsigned *dropped_out);

/* Levenshtein distance, for "did you mean" suggestions. */
size_t ddp_edit_distance(const char *a, const char *b);
/* The closest candidate to word (NULL-terminated list), or NULL when none is close
 * enough to be a plausible typo. */
const char *ddp_did_you_mean(const char *word, const char *const *candidates);

/* Parse a whole decimal integer in [min, max]. 0 or -EINVAL/-ERANGE. */
int ddp_parse_int(const char *s, long long min, long long max, long long *out);
/* Parse a duration "250ms", "30s", "5m", "1h", "1.5h", bare number = seconds; "0", "off",
 * "none" = 0. Result in milliseconds. 0 or -EINVAL with err filled ("expected ..."). */
int ddp_parse_duration(const char *s, long long *ms_out, struct ddp_err *err);
/* Monotonic clock in milliseconds / nanoseconds. */
/* Read up to len bytes from fd into buf, through EINTR and short reads, until EOF or an error. Returns the count
 * read (less than len at EOF), or a negative errno when nothing was read. */
ssize_t ddp_read_full(int fd, void *buf, size_t len);
/* Write all len bytes of buf to fd, through EINTR and short writes. 0, or a negative errno. */
int ddp_write_full(int fd, const void *buf, size_t len);

long long ddp_now_ms(void);

/* The state letter of process pid from /proc/pid/stat ('R', 'S', 'T', 'Z', ...); 0 when unknown. */
char ddp_proc_state(int pid);
/* Whether pid is Slurm's slurmstepd (its comm): it signals every process of a step itself (scancel, KillWait), so
 * what it sends a launcher or a shim reached their workers too. Outside a Slurm job no process has that name. */
bool ddp_proc_is_slurmstepd(int pid);
/* mkdir -p path (each missing directory with mode). 0, or the first negative errno. */
int ddp_mkdir_p(const char *path, unsigned mode);
long long ddp_now_ns(void);
/* A wall-clock time as ISO 8601 UTC with milliseconds ("2026-12-01T01:08:54.123Z", 24 chars + NUL): strings in
 * this format sort as the times do. Pure; returns buf. ts NULL = now. */
char *ddp_time_iso(const struct timespec *ts, char buf[32]);

/* JSON string output: writes "s" with escapes to buf (a strv-free helper for plan/topo/doctor). */
struct ddp_buf {
    char *data;
    size_t len;
    size_t cap;
};
void ddp_buf_add(struct ddp_buf *b, const char *s, size_t n);
void ddp_buf_puts(struct ddp_buf *b, const char *s);
void ddp_buf_printf(struct ddp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ddp_buf_json_str(struct ddp_buf *b, const char *s); /* quoted, escaped; NULL -> null */
void ddp_buf_free(struct ddp_buf *b);

/* Open path (relative to dirfd; AT_FDCWD for the working directory) for reading only when it is a regular file:
 * never through a symlink in its last component, never a FIFO or a device (O_NONBLOCK, so that a FIFO
 * planted in its place cannot block the open). What the launcher reads that a worker (or anyone else) could
 * have put there goes through this. Returns an fd (O_CLOEXEC, blocking again) or a negative errno (-ELOOP a
 * symlink, -EINVAL not a regular file). */
int ddp_open_regular(int dirfd, const char *path);
/* The same as a stdio stream ("re"); NULL with errno. */
FILE *ddp_fopen_regular(const char *path);
/* Read at most max bytes of the regular file path (ddp_open_regular) into b (appended). 0 or negative errno. */
int ddp_read_regular(const char *path, size_t max, struct ddp_buf *b);

#endif
