/* signals: which signals the launcher takes on its loop: SIGINT, SIGTERM, SIGHUP, SIGQUIT and [job]
 * signals_to_handle (a signal that cannot be forwarded is said and left out; one ignored when ddplaunch started,
 * as nohup ignores SIGHUP, stays ignored: all but SIGINT and SIGQUIT, which shells ignore for every `cmd &`).
 * Each arrival goes to fn from the loop, with reached = true when its sender signals every process of the job
 * itself (Slurm's slurmstepd: `scancel --signal`, KillWait's SIGTERM), so that the workers have their copy
 * already; what it means is the policy's (policy.h). */
#ifndef DDP_SIGNALS_H
#define DDP_SIGNALS_H

#include <stdbool.h>
#include <sys/types.h>
#include <uv.h>

#include "run/plan.h"
#include "spec/spec.h"

struct ddp_signals;

/* Start handling them on loop, with what the scheduler says of its signals (the launch's scheduler part,
 * run/plan.h): signals_all, its daemon signals every process of the job (Slurm); step, this launcher runs in a
 * step of it, where that daemon signals the whole step, not in the batch script, which alone gets what is sent to
 * the batch step. Caller owns; ddp_signals_close(), then free() after the loop. */
struct ddp_signals *ddp_signals_start(uv_loop_t *loop, const struct ddp_spec *spec, struct ddp_plan_sched sched,
                                      void (*fn)(void *arg, int signo, bool reached), void *arg);
void ddp_signals_close(struct ddp_signals *g);

struct ddp_records;
/* What the launcher does with signal signo, in one console line and the signal event: kill (a second SIGINT: the
 * workers are killed now), not forwarded (reached: Slurm signalled every worker already), or forwarded to alive
 * workers. */
void ddp_signals_tell(struct ddp_records *rec, int attempt, int signo, bool reached, bool kill, int alive);

#endif
