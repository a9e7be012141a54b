/* wall: see wall.h. */
#include "watch/wall.h"

#include <stdlib.h>
#include <time.h>

#include "base/util.h"
#include "run/plan.h"
#include "watch/source.h"

struct ddp_wall {
    long long limit_ms;
    long long start_ms; /* CLOCK_BOOTTIME */
    struct ddp_timeout_sink sink;
    uv_timer_t timer;
};

static long long boot_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long ddp_wall_wait_ms(long long limit_ms, long long elapsed_ms)
{
    long long left = limit_ms - elapsed_ms;
    return left <= 0 ? 0 : left < DDP_WALL_CHECK_MS ? left : DDP_WALL_CHECK_MS;
}

struct ddp_wall *ddp_wall_new(uv_loop_t *loop, long long limit_ms, struct ddp_timeout_sink sink)
{
    struct ddp_wall *w = ddp_xcalloc(1, sizeof(*w));
    w->limit_ms = limit_ms;
    w->sink = sink;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    return w;
}

void ddp_wall_close(struct ddp_wall *w)
{
    if (!uv_is_closing((uv_handle_t *)&w->timer))
        uv_close((uv_handle_t *)&w->timer, NULL);
}

void ddp_wall_free(struct ddp_wall *w)
{
    free(w);
}

static void on_wall(uv_timer_t *t)
{
    struct ddp_wall *w = t->data;
    long long wait = ddp_wall_wait_ms(w->limit_ms, boot_ms() - w->start_ms);
    if (wait > 0) {
        uv_timer_start(&w->timer, on_wall, (uint64_t)wait, 0);
        return;
    }
    char *d = ddp_timeout_duration(w->limit_ms);
    struct ddp_timeout to = {.cls = DDP_CLASS_WALL_TIMEOUT,
                             .why = ddp_xasprintf("the attempt ran longer than %s (wall)", d)};
    free(d);
    w->sink.fn(w->sink.arg, &to);
}

void ddp_wall_start(struct ddp_wall *w)
{
    if (w->limit_ms <= 0)
        return;
    w->start_ms = boot_ms();
    uv_timer_start(&w->timer, on_wall, (uint64_t)ddp_wall_wait_ms(w->limit_ms, 0), 0);
}

void ddp_wall_stop(struct ddp_wall *w)
{
    uv_timer_stop(&w->timer);
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    (void)err;
    *self = ddp_wall_new(env->cfg.loop, env->cfg.job->spec->timeout_wall_ms, env->cfg.sink);
    return 0;
}

static void source_start(void *self, struct ddp_runner_attempt *r)
{
    (void)r;
    ddp_wall_start(self);
}

static void source_stop(void *self)
{
    ddp_wall_stop(self);
}

static void source_close(void *self)
{
    ddp_wall_close(self);
}

static void source_free(void *self)
{
    ddp_wall_free(self);
}

const struct ddp_watch_source ddp_wall_source = {.name = "wall",
                                                 .open = source_open,
                                                 .start = source_start,
                                                 .stop = source_stop,
                                                 .close = source_close,
                                                 .free = source_free};
