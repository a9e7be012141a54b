/* capture_ask: what the driver may ask of the hang capture (capture.h) in a watch, and how it finds it there:
 * whether ranks can be captured, begin, whether a worker is in it. Nothing of how it captures. */
#ifndef DDP_CAPTURE_ASK_H
#define DDP_CAPTURE_ASK_H

#include <stdbool.h>

#include "records/class.h"
#include "run/runner.h"

struct ddp_capture;
struct ddp_watch_env;

/* The capture of the watch env belongs to (watch.h's ddp_watch_env), or NULL when it is not open. */
struct ddp_capture *ddp_capture_in_watch(const struct ddp_watch_env *env);

/* Ranks of the current attempt whose stacks can be captured now ([timeout] stacks, Python with its fault
 * handler, running); 0 = no capture. */
int ddp_capture_possible(const struct ddp_capture *c);
/* Begin: the timeout that stops the attempt is of class tcls. */
void ddp_capture_begin(struct ddp_capture *c, enum ddp_class tcls);
/* k (of the current attempt) is in the capture under way or done. */
bool ddp_capture_in(const struct ddp_capture *c, const struct ddp_runner_worker *k);

#endif
