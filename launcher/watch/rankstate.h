/* rankstate: is a rank stuck, busy or waiting? What the kernel says of a process (/proc: CPU time per thread,
 * state and wchan, I/O counters, voluntary switches), read at two moments, combined with what its stack and the
 * flight recorder say (inside a collective, or in a GPU sync: waiting, whatever the CPU does). The reading
 * (ddp_rankstate_read) is the edge; the judgement (ddp_rankstate_classify) is pure. It decides no action. */
#ifndef DDP_RANKSTATE_H
#define DDP_RANKSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "watch/hang.h"

/* One reading of a process. */
struct ddp_rankstate_sample {
    bool ok;                           /* read at all (the process existed and /proc was readable) */
    long long at_ms;                   /* when (monotonic) */
    long clk_tck;                      /* sysconf(_SC_CLK_TCK) */
    unsigned long long cpu_ticks;      /* utime + stime summed over its threads (clock ticks) */
    unsigned long long main_ticks;     /* of its main thread */
    int nthreads, nrunning, ndisk;     /* threads; of those in state R; in state D */
    char main_state;                   /* its main thread's state letter, 0 unknown */
    char wchan[48];                    /* its main thread's wchan ("" unknown, "0" running) */
    unsigned long long vol_switches;   /* its main thread's voluntary context switches */
    bool has_io;                       /* /proc/PID/io was readable */
    unsigned long long rchar, wchar;   /* every read and write (cached or not) */
    unsigned long long rbytes, wbytes; /* storage reads and writes */
};

/* Read /proc/PID (proc is "/proc", or a fixture directory laid out the same way) at at_ms into out. clk_tck:
 * sysconf(_SC_CLK_TCK) (the caller passes it, so that fixtures need no clock). Returns 0, or a negative errno
 * (-ENOENT: no such process); out->ok says the same. Reads at most 64 threads. */
int ddp_rankstate_read(const char *proc, pid_t pid, long long at_ms, long clk_tck, struct ddp_rankstate_sample *out);

enum ddp_rankstate {
    DDP_RANKSTATE_UNKNOWN, /* too little to say (no reading, too short a window, a little CPU or I/O) */
    DDP_RANKSTATE_STUCK,   /* outside every collective, neither runs nor does I/O */
    DDP_RANKSTATE_BUSY,    /* outside every collective, computes or does I/O */
    DDP_RANKSTATE_WAITING, /* inside a collective, or in a GPU sync (the stack or the recorder says so) */
};

/* What the stack and the recorder say of the rank, besides /proc. */
struct ddp_rankstate_evidence {
    bool in_collective; /* its stack is inside a collective, or the recorder has it waiting for one */
    bool in_gpu_wait;   /* its stack is in a GPU sync (ddp_rankstate_gpu_wait_frame) and did not move */
    bool culprit;       /* the others wait for it (the recorder's or the stacks' verdict named it) */
};

struct ddp_rankstate_verdict {
    enum ddp_rankstate state;
    long long window_ms;        /* the time between the two readings */
    double cpu_pct;             /* CPU over the window, percent of one core (all threads) */
    double read_Bps, write_Bps; /* rchar, wchar per second (all I/O the program asked for) */
    double switches_ps;         /* its main thread's voluntary switches per second */
    char main_state;            /* at the second reading */
    char wchan[48];             /* at the second reading */
    char words[160];            /* "CPU 100%, 38 MB/s written", "no CPU, no I/O for 30 s", "spins in a GPU wait" */
};

/* Thresholds (documented in ddplaunch(1), LIVE HANG WATCH). */
#define DDP_RANKSTATE_BUSY_CPU 25.0          /* percent of one core: computing */
#define DDP_RANKSTATE_IDLE_CPU 5.0           /* under this: not running (the sampler's own thread costs ~1%) */
#define DDP_RANKSTATE_BUSY_IO (256.0 * 1024) /* bytes per second read or written: doing I/O */
#define DDP_RANKSTATE_IDLE_IO (32.0 * 1024)  /* under this: no I/O (the sampler writes a few KB a sample) */
#define DDP_RANKSTATE_POLL_SWITCHES 20.0     /* main-thread wake-ups per second of a poll loop */
#define DDP_RANKSTATE_MIN_WINDOW_MS 900      /* two readings closer than this say nothing */

/* Judge a rank from two readings (a before b) and the evidence. Rules, first that applies: in a GPU sync: a
 * culprit is STUCK (its GPU work never finishes; the CPU a synchronize spins with is no work), another rank
 * WAITING; in a collective: WAITING, whatever its CPU; either reading missing or the window under
 * DDP_RANKSTATE_MIN_WINDOW_MS: UNKNOWN; CPU at least BUSY_CPU, I/O at least BUSY_IO, or CPU at least IDLE_CPU
 * with a thread runnable (R) at both readings (a CPU shared with others): BUSY; CPU under IDLE_CPU,
 * I/O under IDLE_IO and the main thread not polling (fewer than POLL_SWITCHES wake-ups a second): STUCK (also in
 * state D); else UNKNOWN (weak). words says it for a person. Pure. */
void ddp_rankstate_classify(const struct ddp_rankstate_sample *a, const struct ddp_rankstate_sample *b,
                            const struct ddp_rankstate_evidence *ev, struct ddp_rankstate_verdict *out);

/* Is this the innermost frame of a rank that waits on its GPU ("loss.item()", torch.cuda.synchronize, an
 * event's or a stream's wait)? func is the frame's function name, file its file name
 * (may be NULL). Pure. */
bool ddp_rankstate_gpu_wait_frame(const char *func, const char *file);

/* Is a stack's innermost frame, or its program's innermost, a GPU sync (ddp_rankstate_gpu_wait_frame)? Pure. */
bool ddp_rankstate_view_in_gpu_wait(const struct ddp_hang_view *v);

const char *ddp_rankstate_name(enum ddp_rankstate s); /* "unknown", "stuck", "busy", "waiting" */

#endif
