/* supervise: see supervise.h. Placeholder until the real loop lands (minutes away). */
#include "supervise.h"

#include <errno.h>

int ddp_supervise_run(const struct ddp_plan_ctx *ctx, const char *self_exe, struct ddp_err *err)
{
    (void)ctx;
    (void)self_exe;
    ddp_errf(err, -ENOSYS, "supervisor not implemented yet");
    return 1;
}
