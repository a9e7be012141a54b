/* filetimer: torch's FileTimer as a timeout source (timeouts.h): serves TORCHELASTIC_TIMER_FILE (timer.c) and
 * reports an expired timer of a worker of the current attempt (or of a process in its group) as a hang of that
 * rank; the expired client still gets its signal, as torch does. It decides nothing about what follows. */
#ifndef DDP_FILETIMER_H
#define DDP_FILETIMER_H

#include <uv.h>

#include "base/util.h"
#include "run/runner.h"
#include "watch/timeouts.h"

struct ddp_filetimer;

/* Serve fifo_path on loop (see ddp_timer_server_start). 0 with *out (caller owns; ddp_filetimer_close, then
 * ddp_filetimer_free after the loop), or a negative errno with err. */
int ddp_filetimer_start(uv_loop_t *loop, const char *fifo_path, struct ddp_runner *rn, struct ddp_timeout_sink sink,
                        struct ddp_filetimer **out, struct ddp_err *err);
/* A new attempt starts: forget every timer. NULL is a no-op. */
void ddp_filetimer_clear(struct ddp_filetimer *f);
/* Stop serving; NULL is a no-op. */
void ddp_filetimer_close(struct ddp_filetimer *f);
void ddp_filetimer_free(struct ddp_filetimer *f);

#endif
