/* sample: every thread's Python stack of a running rank, without stopping it. A launcher-provided
 * sitecustomize.py (ddp_sample_install) blocks DDP_SAMPLE_SIGNAL in each worker that gets DDPLAUNCH_STACKS_FILE
 * and starts one idle thread that takes it with sigwait and writes every other thread's stack (faulthandler's
 * format) into that per-rank file of the attempt's directory (opened by its path for each sample, never a kept
 * descriptor the program may have reused), announcing itself there first; ddp_sample_poke signals a rank that
 * announced itself and can take the signal, ddp_sample_take reads what it wrote since.
 * It decides nothing about hangs (suspect.h, hang.h) and never signals a process that did not register. */
#ifndef DDP_SAMPLE_H
#define DDP_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"

#define DDP_SAMPLE_PYDIR "python" /* the sitecustomize's directory in the run directory */
/* the signal is SIGRTMIN + 5 (glibc: 39); never SIGUSR1/2 (the job's), never the exec shim's SIGRTMIN + 3 and + 4
 * (launcher died, kill everything: shim.c) */
#define DDP_SAMPLE_SIGNAL_OFFSET 5
/* The header's length: its numbers are zero-padded, so that emptying the file down to it never cuts a newer
 * registration written meanwhile */
#define DDP_SAMPLE_HEAD_LEN 93
#define DDP_SAMPLE_BUSY_MAX 5 /* samples in a row with the last signal still pending: its sampler stopped answering */

/* The signal number the sitecustomize registers and ddp_sample_poke sends. */
int ddp_sample_signal(void);

/* The sitecustomize.py text: watch/sitecustomize.py as built into the binary (a static string). */
const char *ddp_sample_sitecustomize(void);

/* Write sitecustomize.py into DIR/python (created 0700), DIR being the launch's private run directory. Returns 0
 * with *pydir_out (the directory to prepend to PYTHONPATH; caller frees), or a negative errno with err. */
int ddp_sample_install(const char *dir, char **pydir_out, struct ddp_err *err);

/* A registration: the first line the sitecustomize writes, DDP_SAMPLE_HEAD_LEN bytes,
 * "ddplaunch-stacks pid=0000000123 signal=039 start=00000000000000012345 tid=0000000125 err=000": the
 * interpreter's pid, the signal it takes, its start time (/proc/PID/stat field 22), its sampler thread's id, and
 * 0 or the errno that stopped its writing (a full disk: the header is rewritten in place, which needs no room). */
struct ddp_sample_head {
    pid_t pid, tid;
    int signo, err;
    unsigned long long start;
};

/* Returns true with *h when text (len bytes) starts with a whole header line. Pure. */
bool ddp_sample_parse_header(const char *text, size_t len, struct ddp_sample_head *h);

/* One rank's stacks file. */
struct ddp_sample_file {
    char *path;
    int fd;       /* -1 until the file exists */
    pid_t pid;    /* the registered interpreter's pid, 0 until announced */
    bool pending; /* poked, not yet taken */
    long long poked_ms;
    char head[DDP_SAMPLE_HEAD_LEN]; /* the registration in use (a new one replaces it) */
    struct ddp_sample_head h;
    int busy;       /* samples in a row skipped because the last signal was still pending */
    bool no_thread; /* the last poke found the sampler thread gone and the process still there */
    char why[200];  /* set: sampling stopped for this registration, and why (the launcher says it once) */
    bool told;      /* why was said */
    bool want_fr;   /* the next poke asks for the flight recorder's entries now (sigqueue: si_code SI_QUEUE), not
                       only after the recorder stood still (fr.h); cleared by the poke that sent it */
};

/* Start watching path (caller's string is copied); nothing is opened yet. Free with ddp_sample_file_free(). */
void ddp_sample_file_init(struct ddp_sample_file *f, const char *path);
void ddp_sample_file_free(struct ddp_sample_file *f);

/* Signal the rank for one sample. Reads the registration on every call (a later one, a new Python of the rank,
 * replaces the one in use) and checks, before every signal, that the announced process is still the one that
 * registered (its start time), is not the exec shim nor in its group (groups[0], the shim leads it) but in the
 * program's (groups[1..n), those > 0), still has its sampler thread (an exec ends it; so does an interpreter's
 * exit a moment before the process ends: the first poke that finds it gone counts as gone, -ESRCH, the next as an
 * exec), blocks the signal in every
 * thread (SigBlk: an unblocked one would kill it), and has taken the previous one (SigPnd, ShdPnd: never a second
 * queued signal); then empties the file down to the header and sends the signal (with sigqueue when f->want_fr:
 * the sampler then adds its recorder's entries). Returns 0 (sent), -EAGAIN (not
 * registered yet: no sitecustomize ran, or -S/-I), -ESRCH (its pid is gone or in no such group), -EBUSY (the
 * last signal is still pending: skipped), -ECANCELED (sampling stopped for this registration: f->why says why;
 * the caller says it once and sets f->told), or another negative errno. */
int ddp_sample_poke(struct ddp_sample_file *f, const pid_t *groups, size_t n, long long now_ms);

/* Append what the rank wrote since the poke (after the header) to out. Returns the number of bytes (0: nothing
 * yet), or a negative errno. Clears pending. */
long ddp_sample_take(struct ddp_sample_file *f, struct ddp_buf *out);

#endif
