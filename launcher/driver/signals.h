/* signals: which signals the launcher takes on its loop: SIGINT, SIGTERM, SIGHUP, SIGQUIT and [job]
 * signals_to_handle (a signal that cannot be forwarded is said and left out). Each arrival goes to fn from the
 * loop; what it means is the policy's (policy.h). */
#ifndef DDP_SIGNALS_H
#define DDP_SIGNALS_H

#include <uv.h>

#include "spec/spec.h"

struct ddp_signals;

/* Start handling them on loop. Caller owns; ddp_signals_close(), then free() after the loop. */
struct ddp_signals *ddp_signals_start(uv_loop_t *loop, const struct ddp_spec *spec, void (*fn)(void *arg, int signo),
                                      void *arg);
void ddp_signals_close(struct ddp_signals *g);

#endif
