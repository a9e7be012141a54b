/* recognise: recognises the way an attempt ended (a failure class, class.h) from an exit status, or from one
 * recognised line of a worker's output. Pure: it does not read files, watch processes or decide policy. */
#ifndef DDP_RECOGNISE_H
#define DDP_RECOGNISE_H

#include <stddef.h>

#include "records/class.h"

/* The class of a recognised failure message in one line of worker output (no trailing newline needed),
 * else DDP_CLASS_NONE. Fast: a handful of memmem() calls, no regex, no allocation. */
enum ddp_class ddp_recognise_line(const char *line, size_t len);

/* Which communication backend wrote a line: "nccl" (names NCCL or ProcessGroupNCCL's watchdog), "gloo" (names
 * gloo, or is one of gloo's own messages: "Timed out waiting ... operation to complete", a monitored barrier,
 * "Connection closed by peer"), else NULL. For messages ("rank 1 reported a gloo collective timeout"). Pure. */
const char *ddp_recognise_backend(const char *line, size_t len);

/* The class of a process ending: signo > 0 -> SEGFAULT/ABORT/KILLED/SIGNAL; else exit_code != 0 -> EXIT;
 * else NONE (success). */
enum ddp_class ddp_recognise_status(int exit_code, int signo);

#endif
