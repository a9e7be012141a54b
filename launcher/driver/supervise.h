/* supervise: the driver that runs one job on this node, alone or as one of several: one libuv loop that turns
 * what happens (workers ending, output lines, timeouts, signals, the other nodes) into events for the policy
 * (policy.h) and the node agent (agent.h) and carries out the actions their tables return, through the runner
 * (runner.h: the workers), records.h, capture.h and roster.h. It does not decide what to run (plan.c) nor what a
 * decision should be (the tables): it carries them out. */
#ifndef DDP_SUPERVISE_H
#define DDP_SUPERVISE_H

#include "base/util.h"
#include "run/plan.h"

/* Run the job: build attempt 0 with ddp_plan_build(ctx, 0, ctx->nproc, NULL, 0, &a, err), start the workers
 * through the exec shim (self_exe re-executed with "--exec-shim"), supervise, restart/downsize per ctx->job.spec,
 * print the summary. Returns the launcher's exit status: 0 all succeeded, the root cause's exit code,
 * 128+N after a signal N (to a worker or to the launcher), 124 on a timeout with on_timeout=fail, 1 when the
 * launcher itself failed (said on stderr when it happened; err->msg is then empty). */
int ddp_supervise_run(const struct ddp_plan_ctx *ctx, const char *self_exe, const char *self_exec, struct ddp_err *err);

#endif
