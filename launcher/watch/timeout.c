/* timeout: see timeout.h. */
#include "watch/timeout.h"

#include "base/util.h"

char *ddp_timeout_duration(long long ms)
{
    if (ms % 1000 == 0)
        return ddp_xasprintf("%llds", ms / 1000);
    return ddp_xasprintf("%lldms", ms);
}
