/* watchdog: collective timeouts that a rank prints (NCCL's watchdog, gloo, the TCP store), a timeout source
 * (timeout.h): a line that recognise.c recognises as one is folded into the rank's observations (where it
 * waited: hang.c parses it) and reported to the sink. It decides nothing about what follows. */
#ifndef DDP_COLL_TIMEOUT_H
#define DDP_COLL_TIMEOUT_H

#include <stddef.h>

#include "records/class.h"
#include "run/runner.h"
#include "watch/timeout.h"

/* k printed line (len bytes), recognised as class c: when c is a collective timeout, note it and report it. */
void ddp_coll_timeout_line(const struct ddp_timeout_sink *sink, struct ddp_runner_worker *k, enum ddp_class c,
                           const char *line, size_t len);

#endif
