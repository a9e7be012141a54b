/* shim: the hidden "--exec-shim" mode of ddplaunch, run between fork and the worker's program: dies with the
 * launcher, applies the binding, reports failures before exec on a pipe. It does not supervise anything. */
#ifndef DDP_SHIM_H
#define DDP_SHIM_H

/* Hidden mode: main.c calls this when argv[1] is "--exec-shim"; it never returns on success (execvp).
 * On failure it returns the exit status the process should end with (1 setup, 126/127 exec). */
int ddp_shim_main(int argc, char **argv);

#endif
