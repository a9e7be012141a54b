/* rasq: one STATUS query to a job's NCCL RAS port (ras.h), over the loop: a TCP connection to localhost, "CLIENT
 * PROTOCOL 2", "SET FORMAT json", "STATUS", read until the JSON document is whole, with a deadline; never blocks.
 * It judges nothing (ras.h) and knows no job (the caller gives the port). */
#ifndef DDP_RASQ_H
#define DDP_RASQ_H

#include <uv.h>

#include "watch/ras.h"

#define DDP_RASQ_MAX (1 << 20) /* the longest answer read */

struct ddp_rasq;

/* The port of an NCCL_RAS_ADDR value this host's RAS answers on ("localhost:28031", "127.0.0.1:28031"), else 0. */
int ddp_rasq_port(const char *ras_addr);

/* Query 127.0.0.1:port; done(arg, rc, ras) is called once, from the loop: rc 0 with ras (borrowed for the call),
 * or a negative errno (-ETIMEDOUT after deadline_ms, -ECONNREFUSED: nobody listens, -EINVAL: not RAS's answer)
 * with ras NULL. The query frees itself after done; the handle is valid until then. */
struct ddp_rasq *ddp_rasq_start(uv_loop_t *loop, int port, long long deadline_ms,
                                void (*done)(void *arg, int rc, const struct ddp_ras *ras), void *arg);
/* Give up on q before its answer: done is not called. NULL is a no-op. */
void ddp_rasq_cancel(struct ddp_rasq *q);

#endif
