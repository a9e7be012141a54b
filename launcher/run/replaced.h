/* replaced: the launcher's own settings that ddplaunch replaces for its workers without being asked (an exported
 * MASTER_PORT, a CUDA_VISIBLE_DEVICES blanked on a host without GPUs), said in one line each. It decides
 * nothing about the values (plan.c, port.c and place.c do); it compares what the launcher got with what a
 * worker gets. */
#ifndef DDP_REPLACED_H
#define DDP_REPLACED_H

#include "base/util.h"
#include "run/plan.h"

/* One line per variable of base_env (the launcher's environment) that the first worker of a gets with another
 * value, for MASTER_PORT and CUDA_VISIBLE_DEVICES, each saying why and how to keep it, into out (appended).
 * spec says where master_port came from. Pure. */
void ddp_replaced_notes(char *const *base_env, const struct ddp_spec *spec, const struct ddp_attempt *a,
                        struct ddp_strv *out);

#endif
