/* bind: apply a CPU and memory binding to the calling process (sched_setaffinity + libnuma's mempolicy), the
 * same effect as `numactl --physcpubind=CPUS --membind=MEMS`. It does not decide the binding (topo.h does). */
#ifndef DDP_BIND_H
#define DDP_BIND_H

#include "base/util.h"
#include "spec/spec.h"

/* Bind the calling process: CPU affinity to the list `cpus` ("0-3,8"; NULL or "" = leave affinity alone) and
 * the memory policy for `mems` (NULL or "" = leave it alone): DDP_MEM_LOCAL = membind to those nodes,
 * DDP_MEM_INTERLEAVE = interleave over them, DDP_MEM_NONE = no memory policy.
 * Both sets are intersected with what this process may use now (its current affinity, its cpuset's mems):
 * CPUs or nodes of the list that do not exist or are not allowed here (an XML topology of another machine)
 * are dropped with a warning on the log; if nothing is left the call fails with -EINVAL (CPUs are bound first: a
 * failing mems leaves them bound). Returns 0 or a negative errno; err says which set failed and why ("cpus 24-47: none
 * of them is allowed here (allowed: 0-1)", "mems 1: set_mempolicy: Invalid argument"). Used by the exec shim before
 * execvp. */
int ddp_bind_self(const char *cpus, const char *mems, enum ddp_membind mode, struct ddp_err *err);

/* The calling process's current CPU affinity as a list string ("0-3"). Caller owns; free(). NULL on error. */
char *ddp_bind_current_cpus(void);

#endif
