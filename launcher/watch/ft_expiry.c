/* ft_expiry: see ft_expiry.h. */
#include "watch/ft_expiry.h"

#include <signal.h>
#include <stdlib.h>

#include "run/plan.h"
#include "watch/ft_server.h"
#include "watch/source.h"

struct ddp_ft_expiry {
    struct ddp_runner *rn;
    struct ddp_timeout_sink sink;
    struct ddp_ft_server *server;
};

/* torch's FileTimerServer semantics: the expired client gets its signal; for us it is also a hang of its rank. */
static void on_expired(void *arg, int pid, int signo, const char *scope_id)
{
    struct ddp_ft_expiry *f = arg;
    struct ddp_runner_worker *k = ddp_runner_find_pid(f->rn, pid);
    if (!k)
        return; /* not one of ours (any more) */
    int gpu = ddp_runner_worker_plan(k)->gpu;
    struct ddp_timeout to = {.cls = DDP_CLASS_HANG,
                             .k = k,
                             .why = ddp_xasprintf("rank %d's timer '%s' expired (TORCHELASTIC_TIMER_FILE)",
                                                  ddp_runner_worker_rank(k), scope_id ? scope_id : ""),
                             .gpus = &gpu,
                             .ngpus = 1};
    f->sink.fn(f->sink.arg, &to);
    if (signo > 0 && pid > 0)
        kill(pid, signo);
}

int ddp_ft_expiry_start(uv_loop_t *loop, const char *fifo_path, struct ddp_runner *rn, struct ddp_timeout_sink sink,
                        struct ddp_ft_expiry **out, struct ddp_err *err)
{
    struct ddp_ft_expiry *f = ddp_xcalloc(1, sizeof(*f));
    f->rn = rn;
    f->sink = sink;
    int rc = ddp_ft_server_server_start(loop, fifo_path, on_expired, f, &f->server, err);
    if (rc < 0) {
        free(f);
        *out = NULL;
        return rc;
    }
    *out = f;
    return 0;
}

void ddp_ft_expiry_clear(struct ddp_ft_expiry *f)
{
    if (f)
        ddp_ft_server_server_clear_all(f->server);
}

void ddp_ft_expiry_close(struct ddp_ft_expiry *f)
{
    if (f && f->server) {
        ddp_ft_server_server_close(f->server);
        f->server = NULL;
    }
}

void ddp_ft_expiry_free(struct ddp_ft_expiry *f)
{
    free(f);
}

/* ---------------------------------------------------------------- as a source of the hang watch (source.h) */

static int source_open(const struct ddp_watch_env *env, void **self, struct ddp_err *err)
{
    struct ddp_ft_expiry *f = NULL;
    int rc = 0;
    if (env->cfg.timer_file && env->cfg.job->spec->timer_file)
        rc = ddp_ft_expiry_start(env->cfg.loop, env->cfg.timer_file, env->cfg.rn, env->cfg.sink, &f, err);
    *self = f;
    return rc;
}

static void source_prepare(void *self, const struct ddp_attempt *plan)
{
    (void)plan;
    ddp_ft_expiry_clear(self);
}

static void source_close(void *self)
{
    ddp_ft_expiry_close(self);
}

static void source_free(void *self)
{
    ddp_ft_expiry_free(self);
}

const struct ddp_watch_source ddp_ft_expiry_source = {
    .name = "filetimer", .open = source_open, .prepare = source_prepare, .close = source_close, .free = source_free};
