/* sample: every thread's Python stack of a running rank, without stopping it. A launcher-provided
 * sitecustomize.py (ddp_sample_install) blocks DDP_SAMPLE_SIGNAL in each worker that gets DDPLAUNCH_STACKS_FILE
 * and starts one idle thread that takes it with sigwait and writes every other thread's stack (faulthandler's
 * format) into that per-rank file of the attempt's directory, announcing its pid there first; ddp_sample_poke
 * signals a rank that announced itself, ddp_sample_take reads what it wrote since.
 * It decides nothing about hangs (suspect.h, hang.h) and never signals a process that did not register. */
#ifndef DDP_SAMPLE_H
#define DDP_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"

#define DDP_SAMPLE_PYDIR "python"  /* the sitecustomize's directory in the run directory */
#define DDP_SAMPLE_SIGNAL_OFFSET 3 /* the signal is SIGRTMIN + 3 (glibc: 37); never SIGUSR1/2 (the job's) */

/* The signal number the sitecustomize registers and ddp_sample_poke sends. */
int ddp_sample_signal(void);

/* The sitecustomize.py text (a static string). */
const char *ddp_sample_sitecustomize(void);

/* Write sitecustomize.py into DIR/python (created 0700), DIR being the launch's private run directory. Returns 0
 * with *pydir_out (the directory to prepend to PYTHONPATH; caller frees), or a negative errno with err. */
int ddp_sample_install(const char *dir, char **pydir_out, struct ddp_err *err);

/* The first line the sitecustomize writes once registered: "ddplaunch-stacks pid=123 signal=37". Returns
 * true with *pid and *signo when text (len bytes) starts with a whole such line. Pure. */
bool ddp_sample_parse_header(const char *text, size_t len, pid_t *pid, int *signo);

/* One rank's stacks file. */
struct ddp_sample_file {
    char *path;
    int fd;       /* -1 until the file exists */
    pid_t pid;    /* the registered interpreter's pid, 0 until announced */
    bool pending; /* poked, not yet taken */
    long long poked_ms;
};

/* Start watching path (caller's string is copied); nothing is opened yet. Free with ddp_sample_file_free(). */
void ddp_sample_file_init(struct ddp_sample_file *f, const char *path);
void ddp_sample_file_free(struct ddp_sample_file *f);

/* Signal the rank for one sample: opens the file and reads its header when not done yet, checks that the
 * announced pid is still in one of the worker's process groups (groups[0..n), those > 0: the program's own
 * group, the shim's), empties the file, then sends the signal. Returns 0, or -EAGAIN (not registered yet: no
 * sitecustomize ran, or -S/-I), -ESRCH (its pid is gone or in no such group), or another negative errno. */
int ddp_sample_poke(struct ddp_sample_file *f, const pid_t *groups, size_t n, long long now_ms);

/* Append what the rank wrote since the poke to out. Returns the number of bytes (0: nothing yet), or a negative
 * errno. Clears pending. */
long ddp_sample_take(struct ddp_sample_file *f, struct ddp_buf *out);

#endif
