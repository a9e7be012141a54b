/* watchdog: collective timeouts that a rank prints (NCCL's watchdog, gloo, the TCP store), a timeout source
 * (timeouts.h): a line that classify.c recognises as one is folded into the rank's observations (where it
 * waited: hang.c parses it) and reported to the sink. It decides nothing about what follows. */
#ifndef DDP_WATCHDOG_H
#define DDP_WATCHDOG_H

#include <stddef.h>

#include "records/class.h"
#include "run/runner.h"
#include "watch/timeouts.h"

/* k printed line (len bytes), recognised as class c: when c is a collective timeout, note it and report it. */
void ddp_watchdog_line(const struct ddp_timeout_sink *sink, struct ddp_rworker *k, enum ddp_class c, const char *line,
                       size_t len);

#endif
