/* runner_worker: runner.h's accessors of a worker and its attempt, which are opaque outside launcher/run/ (their data:
 * runner_internal.h). Apart from runner.c so that a unit test's stand-in runner (tests/unit/fake_runner.h), which
 * defines runner.c's interface itself, links them as they are. */
#include "run/runner.h"

#include "run/runner_internal.h"

struct ddp_runner_attempt *ddp_runner_worker_attempt(const struct ddp_runner_worker *k)
{
    return k->run;
}

size_t ddp_runner_worker_index(const struct ddp_runner_worker *k)
{
    return k->index;
}

const struct ddp_worker *ddp_runner_worker_plan(const struct ddp_runner_worker *k)
{
    return k->w;
}

int ddp_runner_worker_rank(const struct ddp_runner_worker *k)
{
    return k->w->rank;
}

int ddp_runner_worker_local_rank(const struct ddp_runner_worker *k)
{
    return k->w->local_rank;
}

enum ddp_lifecycle_state ddp_runner_worker_state(const struct ddp_runner_worker *k)
{
    return k->state;
}

unsigned ddp_runner_worker_open(const struct ddp_runner_worker *k)
{
    return k->open;
}

enum ddp_worker_fail ddp_runner_worker_fail(const struct ddp_runner_worker *k)
{
    return k->fail;
}

int ddp_runner_worker_exec_err(const struct ddp_runner_worker *k)
{
    return k->exec_err;
}

const char *ddp_runner_worker_bind_msg(const struct ddp_runner_worker *k)
{
    return k->bind_msg;
}

int ddp_runner_worker_status(const struct ddp_runner_worker *k)
{
    return k->status;
}

int ddp_runner_worker_signo(const struct ddp_runner_worker *k)
{
    return k->signo;
}

int ddp_runner_worker_pid(const struct ddp_runner_worker *k)
{
    return k->pid;
}

int ddp_runner_worker_pgid(const struct ddp_runner_worker *k)
{
    return k->pgid;
}

bool ddp_runner_worker_warm(const struct ddp_runner_worker *k)
{
    return k->warm;
}

long long ddp_runner_worker_start_ms(const struct ddp_runner_worker *k)
{
    return k->start_ms;
}

long long ddp_runner_worker_end_ms(const struct ddp_runner_worker *k)
{
    return k->end_ms;
}

time_t ddp_runner_worker_end_wall(const struct ddp_runner_worker *k)
{
    return k->end_wall;
}

const struct ddp_attempt *ddp_runner_attempt_plan(const struct ddp_runner_attempt *r)
{
    return &r->plan;
}

int ddp_runner_attempt_number(const struct ddp_runner_attempt *r)
{
    return r->plan.attempt;
}

size_t ddp_runner_attempt_nworkers(const struct ddp_runner_attempt *r)
{
    return r->nw;
}

struct ddp_runner_worker *ddp_runner_attempt_worker(const struct ddp_runner_attempt *r, size_t i)
{
    return &r->w[i];
}

size_t ddp_runner_attempt_nexited(const struct ddp_runner_attempt *r)
{
    return r->nexited;
}

size_t ddp_runner_attempt_ndone(const struct ddp_runner_attempt *r)
{
    return r->ndone;
}

long long ddp_runner_attempt_start_ms(const struct ddp_runner_attempt *r)
{
    return r->start_ms;
}
