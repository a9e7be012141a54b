/* watchdog: see coll_timeout.h. */
#include "watch/coll_timeout.h"

#include "records/recognise.h"
#include "watch/hang.h"
#include "watch/observe.h"

void ddp_coll_timeout_line(const struct ddp_timeout_sink *sink, struct ddp_runner_worker *k, enum ddp_class c,
                           const char *line, size_t len)
{
    struct ddp_observed *o = ddp_observed(k);
    if (!ddp_class_is_timeout(c))
        return;
    struct ddp_hang_timeout t = o->tmo;
    if (!t.waiting)
        t.seq = -1;
    if (ddp_hang_parse_timeout(line, len, &t))
        o->tmo = t;
    o->reported_timeout = true;
    const char *backend = ddp_recognise_backend(line, len);
    struct ddp_timeout to = {.cls = c,
                             .k = k,
                             .why = ddp_xasprintf("rank %d reported a %s%scollective timeout (%s)", k->w->rank,
                                                  backend ? backend : "", backend ? " " : "", ddp_class_name(c))};
    sink->fn(sink->arg, &to);
}
