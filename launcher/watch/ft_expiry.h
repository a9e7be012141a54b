/* ft_expiry: torch's FileTimer as a timeout source (timeout.h): serves TORCHELASTIC_TIMER_FILE (ft_server.c) and
 * reports an expired timer of a worker of the current attempt (or of a process in its group) as a hang of that
 * rank; the expired client still gets its signal, as torch does. It decides nothing about what follows. */
#ifndef DDP_FT_EXPIRY_H
#define DDP_FT_EXPIRY_H

#include <uv.h>

#include "base/util.h"
#include "run/runner.h"
#include "watch/timeout.h"

struct ddp_ft_expiry;

/* Serve fifo_path on loop (see ddp_ft_server_server_start). 0 with *out (caller owns; ddp_ft_expiry_close, then
 * ddp_ft_expiry_free after the loop), or a negative errno with err. */
int ddp_ft_expiry_start(uv_loop_t *loop, const char *fifo_path, struct ddp_runner *rn, struct ddp_timeout_sink sink,
                        struct ddp_ft_expiry **out, struct ddp_err *err);
/* A new attempt starts: forget every timer. NULL is a no-op. */
void ddp_ft_expiry_clear(struct ddp_ft_expiry *f);
/* Stop serving; NULL is a no-op. */
void ddp_ft_expiry_close(struct ddp_ft_expiry *f);
void ddp_ft_expiry_free(struct ddp_ft_expiry *f);

/* This module as a source of the hang watch (source.h; a row of watch.c's table). */
struct ddp_watch_source;
extern const struct ddp_watch_source ddp_ft_expiry_source;

#endif
