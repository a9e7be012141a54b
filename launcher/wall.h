/* wall: [timeout] wall, a timeout source (timeouts.h): an attempt that runs longer than the limit is reported
 * to the sink once. It decides nothing about what follows. */
#ifndef DDP_WALL_H
#define DDP_WALL_H

#include <uv.h>

#include "timeouts.h"

struct ddp_wall;

/* limit_ms 0 = off. Caller owns; ddp_wall_close(), then ddp_wall_free() after the loop ended. */
struct ddp_wall *ddp_wall_new(uv_loop_t *loop, long long limit_ms, struct ddp_timeout_sink sink);
void ddp_wall_close(struct ddp_wall *w);
void ddp_wall_free(struct ddp_wall *w);
/* An attempt started / is being stopped. */
void ddp_wall_start(struct ddp_wall *w);
void ddp_wall_stop(struct ddp_wall *w);

#endif
