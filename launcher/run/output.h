/* output: forwards a worker's stdout/stderr bytes to the console, either raw (the bytes as they came, when only
 * this worker's stream reaches that console) or framed (whole lines with a prefix, never split or mixed with
 * another worker's; a '\r'-terminated progress update is written at once, and another worker's line first ends
 * it with '\n'); copies the bytes unchanged to per-worker log files; gives whole lines (a '\r' update replaced
 * by the next, "\r\n" as one end) to the caller and keeps the last stderr lines for the summary.
 * A log file whose write fails (a full disk) stops there: said once on the console and listed for the summary.
 * A stream can hold back a stack dump: from ddp_stream_hold_dump on, the lines of Python's fault handler dump
 * reach the log files and the caller but neither the console nor the tail (the hang capture files them).
 * It does not read pipes or decide anything: supervise.c feeds it the bytes it read, plan.c decides raw. */
#ifndef DDP_OUTPUT_H
#define DDP_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

#define DDP_OUTPUT_TAIL 20             /* stderr lines kept per worker for the summary */
#define DDP_OUTPUT_TAIL_LINE 2000      /* bytes kept of each of them */
#define DDP_OUTPUT_MAX_LINE (8u << 20) /* a line longer than this without newline is cut (and counted) */
#define DDP_OUTPUT_FLUSH (256u << 10)  /* console/file buffers are written out beyond this */

/* A file a worker's bytes or lines are appended to (stdout.log, stderr.log, timed.log). Its first failed write
 * stops it for good (closed; a disk that has room again would only give a log with a hole in it). */
struct ddp_logfile {
    int fd;       /* -1: none, or stopped */
    int rank;     /* whose log, for messages */
    char *name;   /* owned, NULL: its path under log_dir ("attempt_0/0/stdout.log") */
    uint64_t len; /* bytes in the file: what the writes before the failure kept */
    int err;      /* 0, or the errno of the write that stopped it */
};

/* The launcher's console: fd 1 and fd 2 (or any fds, for tests). One per launch. */
struct ddp_output {
    int fd[2];             /* [0] stdout, [1] stderr; -1 = discard */
    bool may_block[2];     /* a pipe, socket or terminal (not a regular file): written without blocking */
    struct ddp_buf buf[2]; /* whole lines waiting to be written */
    bool broken[2];        /* EPIPE or another write error: stop writing there */
    uint64_t lines[2];     /* lines written (or discarded after a break) */
    int console_of[2];     /* which console each fd is: fd 1 and 2 on one terminal/file/pipe are one */
    unsigned cr_owner[2];  /* per console: the stream (id) whose '\r' update or unended last line is open, 0 none */
    char stamp[32];        /* when the bytes being framed arrived (ddp_time_iso), set per feed */
    struct ddp_logfile *stopped; /* every log that stopped (fd -1, name owned), in order, for the summary */
    size_t nstopped;
};

typedef void ddp_line_fn(void *arg, int which, const char *line, size_t len);

/* One stream (stdout or stderr) of one worker. Zero-initialise, then ddp_stream_init. */
struct ddp_stream {
    int which;                 /* 0 stdout, 1 stderr */
    unsigned id;               /* distinct per stream (for the console's open '\r' line) */
    char *prefix;              /* owned copy; "" for none; "${time}" in it is the line's arrival time */
    bool prefix_time;          /* prefix holds ${time} */
    struct ddp_logfile *timed; /* NULL, or the worker's timed.log (borrowed: both streams of a worker share it) */
    struct ddp_buf timebuf;
    bool to_console;
    bool raw;                /* console gets the bytes as they come (no prefix, no framing) */
    bool cr_pending;         /* the last terminator seen was '\r': partial holds that update */
    struct ddp_logfile file; /* fd -1 when not logging to a file */
    struct ddp_buf partial;  /* bytes of the line not yet ended (or the last '\r' update) */
    struct ddp_buf filebuf;
    uint64_t nlines;
    uint64_t ncut;               /* lines cut at DDP_OUTPUT_MAX_LINE */
    char *tail[DDP_OUTPUT_TAIL]; /* ring of the last lines (stderr only), owned */
    size_t tail_next, ntail;
    bool keep_tail;
    bool hold_dump;          /* ddp_stream_hold_dump: fault handler lines are held back from console and tail */
    size_t raw_shown;        /* raw console, hold_dump: bytes of partial already written as they came */
    uint64_t nheld;          /* lines held back */
    struct ddp_logfile *dup; /* NULL, or the attempt's filtered_stdout.log / filtered_stderr.log (borrowed: every
                                worker's stream shares it): lines with one of dup_filters go there too */
    const char *dup_filters; /* comma-separated substrings (borrowed), as torchrun's --duplicate-*-filters */
    char *dup_prefix;        /* owned: what such a line starts with there ("[rank0]: ") */
    struct ddp_buf dupbuf;
    ddp_line_fn *on_line; /* called once per whole line (no '\n'), may be NULL */
    void *arg;
};

void ddp_output_init(struct ddp_output *o, int out_fd, int err_fd);
/* Write what the console takes now without blocking (a pipe or terminal that is full is polled, and written
 * at most PIPE_BUF bytes at a time, which never blocks once it polls writable); regular files are written in full.
 * Returns the bytes still waiting (0 = all written): the caller then stops reading the workers (back-pressure)
 * and calls again later. Write errors mark that side broken (never fatal: workers must not be stopped because
 * nobody reads the console); its buffered lines are dropped. */
size_t ddp_output_flush(struct ddp_output *o);
/* Write everything, waiting while the console makes progress (at the end, before the summary); a console that
 * takes nothing for 10 s is given up (its lines are dropped) so that the launcher can still exit. */
void ddp_output_flush_wait(struct ddp_output *o);
void ddp_output_free(struct ddp_output *o); /* flushes, then frees buffers and stops; does not close fds */

/* f (overwritten) gets fd (taken: closed by ddp_logfile_close, -1 for none), rank and a copy of name (NULL:
 * none). */
void ddp_logfile_init(struct ddp_logfile *f, int fd, int rank, const char *name);
void ddp_logfile_close(struct ddp_logfile *f); /* closes the fd, frees the name; idempotent */

/* which 0/1; prefix copied (framed console only); raw: see struct; file_fd: -1, or the log file for this
 * stream (taken: closed by ddp_stream_free; ddp_logfile_init(&s->file, ...) names it). s->timed is NULL after
 * this; set it to have every whole line written there as "2026-12-01T01:08:54.123Z out|err text" (its arrival
 * time, ISO 8601 UTC: sortable, also across ranks). A log write that fails stops that log: one warning
 * ("rank 0 attempt_0/0/stdout.log: log stopped at 65536 bytes: No space left on device"), and o->stopped
 * lists it. */
void ddp_stream_init(struct ddp_stream *s, int which, const char *prefix, bool to_console, bool raw, int file_fd);
/* len bytes of the worker: unchanged to the file (written before returning); to the console buffer as they are
 * (raw) or as framed segments: prefix + text + '\n', or + '\r' for a progress update, at once. The console
 * buffer is written when it passes DDP_OUTPUT_FLUSH (the caller calls ddp_output_flush after a batch of reads). */
void ddp_stream_feed(struct ddp_output *o, struct ddp_stream *s, const char *data, size_t len);
/* End of stream: a last line without newline is emitted as a line (framed console with a prefix: a newline
 * added; raw or no prefix: the bytes stay as the worker left them, and another stream's next line first ends
 * it). Idempotent. */
void ddp_stream_finish(struct ddp_output *o, struct ddp_stream *s);
/* hold: from now on (the hang capture sent SIGABRT), the lines of Python's fault handler dump
 * (ddp_output_fault_line) are held back: they still go to the log files and to on_line, but not to the console
 * nor the tail; every other line is released as before (a raw stream's console then gets whole lines). !hold:
 * back to normal (a raw console first gets what it has not had of the open line). */
void ddp_stream_hold_dump(struct ddp_output *o, struct ddp_stream *s, bool hold);
/* True when line (len bytes, no '\n') is one Python's fault handler writes in a dump (faulthandler.c, Python
 * 3.8 to 3.14): "Fatal Python error: ...", "Python runtime state: ...", "Thread 0x... (most recent call
 * first):", "Current thread 0x...", "Stack (most recent call first):", a frame "  File \"f.py\", line 3 in g"
 * (a traceback's has "line 3, in g"), "  <no Python frame>", "  ...", "  Garbage-collecting", the C stack's
 * lines (3.14), "Extension modules: ...", or a blank line. Pure. */
bool ddp_output_fault_line(const char *line, size_t len);
/* Whether line (len bytes) holds one of the comma-separated substrings of filters (empty ones match nothing).
 * Pure. */
bool ddp_output_filter_match(const char *filters, const char *line, size_t len);
/* The kept tail lines, oldest first: calls fn for each. */
void ddp_stream_tail(const struct ddp_stream *s, void (*fn)(void *arg, const char *line), void *arg);
/* Frees buffers and tail, closes the file. */
void ddp_stream_free(struct ddp_stream *s);

#endif
