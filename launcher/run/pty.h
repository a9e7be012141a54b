/* pty: pseudo-terminals for a worker's stdout/stderr when the launcher's own stream is a terminal, so that the
 * worker sees a terminal of the same size (isatty, tqdm's width, colours of rich/loguru/click) while the
 * launcher still reads every byte (console framing, log files, hang detection). Output post-processing is off
 * on the worker's side ('\n' stays '\n': the bytes are the worker's; the real terminal does its own '\r\n').
 * It does not spawn, read or decide who gets one: the runner opens them, plan.c decides. */
#ifndef DDP_PTY_H
#define DDP_PTY_H

#include "base/util.h"

/* A new pseudo-terminal pair, both ends close-on-exec and neither the caller's controlling terminal. The
 * window size is copied from size_fd when that is a terminal (else left as the kernel's 0x0). *master is what
 * the launcher reads (as a pipe: EIO once the worker side is closed everywhere means end of stream); *slave
 * goes to the worker. 0, or a negative errno with err ("posix_openpt: No space left on device"). */
int ddp_pty_open(int size_fd, int *master, int *slave, struct ddp_err *err);

/* Copy size_fd's window size to master (after SIGWINCH). 0, or a negative errno (size_fd is not a terminal). */
int ddp_pty_resize(int master, int size_fd);

#endif
