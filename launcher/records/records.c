/* records: see records.h. */
#include "records/records.h"

#include <ctype.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/jobs.h"
#include "host/logdir.h"
#include "host/rundir.h"
#include "records/jsonlog.h"
#include "records/recognise.h"
#include "records/report.h"
#include "records/verdict.h"
#include "topo/topo.h"

/* What the summary needs from a failed worker, kept after its attempt is freed. */
struct ended {
    int rank, local_rank, pid, status, signo, attempt;
    time_t when;
    char *error_file, *class_name, *class_line, *hint, *reason, *cause;
    struct ddp_strv tail;
    bool set;
    bool exited;   /* false: recorded while it still ran (a timeout); updated when it exits */
    bool captured; /* its SIGABRT was the hang capture's */
};

struct ddp_records {
    struct ddp_records_config cfg;
    struct ddp_output *out; /* borrowed: its logs that stopped; flushed before they are listed */
    const struct ddp_spec *spec;
    struct ddp_jsonlog *rec; /* events.jsonl and summary.json, or NULL */
    struct ddp_jobs *ps;     /* this job in `ddplaunch ps`, or NULL */
    long long job_start_ms;
    char job_start_iso[32];
    int nattempts;
    bool written;           /* job_end and summary.json are out */
    int ranks_lo, ranks_hi; /* the global ranks of this node's last attempt; hi -1 before one started */
    int stopping;           /* the attempt ddplaunch is stopping (its exits are "stopped"), -1: none */
    struct ended root;      /* root cause of the attempt being stopped / last failed attempt */
    struct ended *others;
    size_t nothers;
    json_t *hang;                 /* the last verdict (summary.json "hang"), or NULL */
    json_t *mismatch;             /* what differed at a collective failure (summary.json "mismatch"), or NULL */
    char *mismatch_text;          /* the same for the console summary, or NULL */
    json_t *stragglers;           /* every straggler named live (progress.h), for summary.json */
    struct ddp_recovery recovery; /* the last hang named live and how it was recovered from (progress.h) */
    json_t *warm;     /* the attempts with ranks that started warm (standby.h): {attempt, ranks}, summary.json */
    json_t *recorder; /* each rank's flight recorder as last sampled (progress.h), for summary.json */
    char *hang_text;  /* the same for the console summary, or NULL */
    const struct ddp_runner_attempt *unrecorded; /* its attempt_start waits for its programs' pids */
    struct ddp_logfile *stopped;                 /* record files that stopped (ddp_records_stopped), name owned */
    size_t nstopped;
    /* per worker of attempt seen_attempt (by index, nseen of them): the first line of its output a failure
     * class recognised. Not the attempt's pointer: a retired attempt is freed, and the next may reuse it. */
    int seen_attempt;
    size_t nseen;
    struct seen {
        enum ddp_class cls;
        char *line;
        bool captured; /* the hang capture sent it SIGABRT */
    } * seen;
    /* per topology GPU (ngpu): a fault NVML reported, a holder seen after the launch */
    char **gpu_fault, **gpu_held;
    size_t ngpu;
    json_t *left_out; /* summary.json's gpus_left_out */
};

static void ended_clear(struct ended *e)
{
    free(e->error_file);
    free(e->class_name);
    free(e->class_line);
    free(e->hint);
    free(e->reason);
    free(e->cause);
    ddp_strv_clear(&e->tail);
    memset(e, 0, sizeof(*e));
}

static void forget_seen(struct ddp_records *r)
{
    for (size_t i = 0; i < r->nseen; i++)
        free(r->seen[i].line);
    free(r->seen);
    r->seen = NULL;
    r->nseen = 0;
}

/* What k's output was recognised as (DDP_CLASS_NONE: nothing), and the line (NULL: none). */
static const struct seen *seen_of(const struct ddp_records *r, const struct ddp_runner_worker *k)
{
    static const struct seen none = {DDP_CLASS_NONE, NULL, false};
    size_t i = ddp_runner_worker_index(k);
    bool same = r->seen && r->seen_attempt == ddp_runner_attempt_number(ddp_runner_worker_attempt(k)) && i < r->nseen;
    return same ? &r->seen[i] : &none;
}

/* k's entry, made for its attempt. */
static struct seen *seen_for(struct ddp_records *r, const struct ddp_runner_worker *k)
{
    const struct ddp_runner_attempt *run = ddp_runner_worker_attempt(k);
    if (!r->seen || r->seen_attempt != ddp_runner_attempt_number(run) || r->nseen != ddp_runner_attempt_nworkers(run)) {
        forget_seen(r);
        r->seen_attempt = ddp_runner_attempt_number(run);
        r->nseen = ddp_runner_attempt_nworkers(run);
        r->seen = ddp_xcalloc(r->nseen, sizeof(*r->seen));
    }
    return &r->seen[ddp_runner_worker_index(k)];
}

void ddp_records_captured(struct ddp_records *r, const struct ddp_runner_worker *k)
{
    seen_for(r, k)->captured = true;
}

void ddp_records_recognised(struct ddp_records *r, const struct ddp_runner_worker *k, enum ddp_class cls,
                            const char *line, size_t len)
{
    struct seen *s = seen_for(r, k);
    if (s->cls != DDP_CLASS_NONE || cls == DDP_CLASS_NONE)
        return;
    s->cls = cls;
    s->line = ddp_xstrndup(line, len < 1000 ? len : 1000);
}

static void clear_others(struct ddp_records *r)
{
    for (size_t i = 0; i < r->nothers; i++)
        ended_clear(&r->others[i]);
    free(r->others);
    r->others = NULL;
    r->nothers = 0;
}

static struct ended *push_other(struct ddp_records *r)
{
    r->others = ddp_xrealloc(r->others, (r->nothers + 1) * sizeof(*r->others));
    memset(&r->others[r->nothers], 0, sizeof(*r->others));
    return &r->others[r->nothers++];
}

static void push_tail(void *arg, const char *line)
{
    ddp_strv_push((struct ddp_strv *)arg, line);
}

static bool has_exited(const struct ddp_runner_worker *k)
{
    return ddp_runner_worker_state(k) >= DDP_WS_EXITED;
}

/* ---------------------------------------------------------------- events */

static const char *on_timeout_name(enum ddp_on_timeout t)
{
    return t == DDP_ONTIMEOUT_DOWNSIZE ? "downsize" : t == DDP_ONTIMEOUT_FAIL ? "fail" : "restart";
}

static const char *heartbeat_name(enum ddp_heartbeat h)
{
    return h == DDP_HEARTBEAT_FILE ? "file" : h == DDP_HEARTBEAT_OUTPUT ? "output" : "none";
}

static json_t *ms_or_null(long long ms)
{
    return ms > 0 ? json_integer(ms) : json_null();
}

void ddp_records_event(struct ddp_records *r, const char *name, json_t *fields)
{
    ddp_jsonlog_event(r->rec, name, fields);
}

static void job_start(struct ddp_records *r)
{
    const struct ddp_spec *sp = r->spec;
    const struct ddp_records_config *c = &r->cfg;
    json_t *plan = ddp_jsonlog_pack("{s:i, s:s, s:s, s:o, s:o, s:o, s:s, s:I}", "max_restarts", sp->max_restarts,
                                    "on_failure", sp->on_failure == DDP_ONFAIL_FAIL ? "fail" : "restart", "on_timeout",
                                    on_timeout_name(sp->on_timeout), "timeout_init_ms", ms_or_null(sp->timeout_init_ms),
                                    "timeout_stall_ms", ms_or_null(sp->timeout_stall_ms), "timeout_wall_ms",
                                    ms_or_null(sp->timeout_wall_ms), "heartbeat", heartbeat_name(sp->heartbeat),
                                    "shutdown_timeout_ms", (json_int_t)sp->shutdown_timeout_ms);
    ddp_jsonlog_event(r->rec, "job_start",
                      ddp_jsonlog_pack("{s:s?, s:s?, s:s?, s:i, s:i, s:i, s:i, s:s?, s:i, s:s?, s:o}", "job", sp->name,
                                       "host", c->job->hostname, "run_id", c->job->run_id, "pid", (int)getpid(),
                                       "nnodes", c->nnodes, "node_rank", c->node_rank, "nproc", c->nproc, "master_addr",
                                       c->master_addr, "master_port", c->master_port, "log_dir",
                                       ddp_jsonlog_dir(r->rec), "plan", plan));
}

struct ddp_records *ddp_records_open(struct ddp_records_config cfg, struct ddp_output *out)
{
    struct ddp_records *r = ddp_xcalloc(1, sizeof(*r));
    const struct ddp_plan_job *job = cfg.job;
    r->cfg = cfg;
    r->out = out;
    r->spec = job->spec;
    r->job_start_ms = ddp_now_ms();
    r->ranks_hi = -1;
    r->stopping = -1;
    r->stragglers = json_array();
    r->recovery.attempt = -1;
    r->warm = json_array();
    r->ngpu = ddp_topo_ngpus(job->topo);
    r->left_out = json_array();
    r->gpu_fault = ddp_xcalloc(r->ngpu + 1, sizeof(*r->gpu_fault));
    r->gpu_held = ddp_xcalloc(r->ngpu + 1, sizeof(*r->gpu_held));
    r->recorder = json_object();
    ddp_time_iso(NULL, r->job_start_iso);
    if (job->logdir) {
        struct ddp_err rerr = {0};
        if (ddp_jsonlog_open(ddp_logdir_fd(job->logdir), ddp_logdir_path(job->logdir), &r->rec, &rerr) < 0)
            ddp_warn("no run record: %s", rerr.msg);
        job_start(r);
    }
    struct ddp_err perr = {0};
    json_t *st = ddp_jsonlog_pack("{s:i, s:s?, s:s?, s:s, s:I, s:i, s:i, s:i, s:i, s:s?, s:[]}", "v", 1, "job",
                                  r->spec->name, "host", job->hostname, "start", r->job_start_iso, "start_unix",
                                  (json_int_t)time(NULL), "master_port", cfg.master_port, "attempt", 0, "nproc",
                                  cfg.nproc, "ranks_alive", 0, "log_dir", ddp_jsonlog_dir(r->rec), "gpus");
    if (ddp_jobs_publish(ddp_rundir_lock_dir(job->base_env), st, job->sweep_leftovers, &r->ps, &perr) < 0)
        ddp_debug("not listed in ddplaunch ps: %s", perr.msg);
    json_decref(st);
    return r;
}

void ddp_records_close(struct ddp_records *r)
{
    if (!r)
        return;
    ddp_jsonlog_close(r->rec);
    ddp_jobs_close(r->ps);
    ended_clear(&r->root);
    clear_others(r);
    for (size_t i = 0; i < r->nstopped; i++)
        free(r->stopped[i].name);
    free(r->stopped);
    json_decref(r->hang);
    json_decref(r->mismatch);
    free(r->mismatch_text);
    json_decref(r->stragglers);
    json_decref(r->warm);
    json_decref(r->recorder);
    free(r->hang_text);
    forget_seen(r);
    for (size_t i = 0; i < r->ngpu; i++) {
        free(r->gpu_fault[i]);
        free(r->gpu_held[i]);
    }
    free(r->gpu_fault);
    free(r->gpu_held);
    json_decref(r->left_out);
    free(r);
}

static void ps_update(struct ddp_records *r, json_t *changes)
{
    if (r->ps)
        ddp_jobs_update(r->ps, changes);
    json_decref(changes);
}

static void attempt_start(struct ddp_records *r, const struct ddp_runner_attempt *run);

/* attempt_start names each worker by its program's pid, as worker_exit does (issue 23 item 13): its place in
 * events.jsonl is held from the attempt's start (the events meanwhile wait behind it) and it is written once no
 * worker's shim is still starting its program: each one said its program's pid, or exited without. A rank that
 * fails before another's program started does not make the late one's record name its shim. */
void ddp_records_attempt_begin(struct ddp_records *r, const struct ddp_runner_attempt *run)
{
    r->unrecorded = run;
    r->ranks_lo = INT_MAX;
    r->ranks_hi = -1;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(run); i++) {
        int rank = ddp_runner_worker_rank(ddp_runner_attempt_worker(run, i));
        r->ranks_lo = rank < r->ranks_lo ? rank : r->ranks_lo;
        r->ranks_hi = rank > r->ranks_hi ? rank : r->ranks_hi;
    }
    ddp_jsonlog_hold(r->rec);
    ddp_records_attempt_flush(r, run);
}

void ddp_records_attempt_flush(struct ddp_records *r, const struct ddp_runner_attempt *run)
{
    if (r->unrecorded != run)
        return;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(run); i++) {
        const struct ddp_runner_worker *k = ddp_runner_attempt_worker(run, i);
        if (ddp_runner_worker_pgid(k) > 0 && ddp_runner_worker_pid(k) == ddp_runner_worker_pgid(k) &&
            ddp_runner_worker_state(k) == DDP_WS_RUNNING)
            return;
    }
    r->unrecorded = NULL;
    attempt_start(r, run);
}

static void attempt_start(struct ddp_records *r, const struct ddp_runner_attempt *run)
{
    json_t *workers = json_array(), *argv = json_array(), *gpus = json_array(), *warm = json_array();
    const struct ddp_attempt *a = ddp_runner_attempt_plan(run);
    r->nattempts++;
    for (size_t i = 0; i < ddp_runner_attempt_nworkers(run); i++) {
        const struct ddp_runner_worker *k = ddp_runner_attempt_worker(run, i);
        const struct ddp_worker *w = ddp_runner_worker_plan(k);
        json_array_append_new(
            workers, ddp_jsonlog_pack("{s:i, s:i, s:i, s:i, s:s?, s:i, s:s?, s:b, s:b}", "rank", w->rank, "local_rank",
                                      w->local_rank, "pid", ddp_runner_worker_pid(k), "gpu", w->gpu, "gpu_busid",
                                      w->gpu_busid, "numa_node", w->numa_node, "cpus", w->cpus, "started",
                                      ddp_runner_worker_pgid(k) > 0, "warm", ddp_runner_worker_warm(k)));
        if (ddp_runner_worker_warm(k))
            json_array_append_new(warm, json_integer(w->rank));
        if (w->gpu_busid)
            json_array_append_new(gpus, json_string(w->gpu_busid));
    }
    if (json_array_size(warm))
        json_array_append_new(r->warm, ddp_jsonlog_pack("{s:i, s:O}", "attempt", a->attempt, "ranks", warm));
    json_decref(warm);
    if (ddp_runner_attempt_nworkers(run))
        for (size_t i = 0; i < a->workers[0].argv.n; i++)
            json_array_append_new(argv, ddp_jsonlog_text(a->workers[0].argv.v[i]));
    ddp_jsonlog_fill(r->rec, "attempt_start",
                     ddp_jsonlog_pack("{s:i, s:i, s:i, s:i, s:o, s:s?, s:o, s:o}", "attempt", a->attempt, "nproc",
                                      a->nproc, "world_size", a->world_size, "master_port", a->master_port, "dir",
                                      ddp_jsonlog_text(a->dir), "gpu_reason", a->gpu_reason, "argv", argv, "workers",
                                      workers));
    ps_update(r, ddp_jsonlog_pack("{s:i, s:i, s:i, s:i, s:i, s:o}", "attempt", a->attempt, "world_size", a->world_size,
                                  "nproc", (int)ddp_runner_attempt_nworkers(run), "ranks_alive",
                                  (int)(ddp_runner_attempt_nworkers(run) - ddp_runner_attempt_nexited(run)),
                                  "master_port", a->master_port, "gpus", gpus));
}

static const char *worker_class(const struct ddp_records *r, const struct ddp_runner_worker *k, char *buf, size_t n)
{
    const struct seen *o = seen_of(r, k);
    if (ddp_runner_worker_fail(k) == DDP_WF_EXEC)
        return "exec-failed";
    if (ddp_runner_worker_fail(k) == DDP_WF_BIND)
        return "bind-failed";
    if (o->cls != DDP_CLASS_NONE)
        return ddp_class_name(o->cls);
    if (ddp_runner_worker_status(k) == 0)
        return "ok";
    enum ddp_class c =
        ddp_recognise_status(ddp_runner_worker_signo(k) ? 0 : ddp_runner_worker_status(k), ddp_runner_worker_signo(k));
    if (c == DDP_CLASS_EXIT || c == DDP_CLASS_NONE) {
        snprintf(buf, n, "exit-%d", ddp_runner_worker_status(k));
        return buf;
    }
    return ddp_class_name(c);
}

void ddp_records_signal(struct ddp_records *r, int attempt, int signo, bool from_slurm, const char *action)
{
    ddp_jsonlog_event(r ? r->rec : NULL, "signal",
                      ddp_jsonlog_pack("{s:i, s:s, s:b, s:s}", "attempt", attempt, "signal", ddp_report_signame(signo),
                                       "from_slurm", from_slurm, "action", action));
}

void ddp_records_stopping(struct ddp_records *r, int attempt)
{
    if (r)
        r->stopping = attempt;
}

void ddp_records_worker_exit(struct ddp_records *r, const struct ddp_runner_worker *k)
{
    char cbuf[32];
    const struct ddp_runner_attempt *run = ddp_runner_worker_attempt(k);
    int attempt = ddp_runner_attempt_number(run), rank = ddp_runner_worker_rank(k);
    int status = ddp_runner_worker_status(k), signo = ddp_runner_worker_signo(k);
    bool root = r->root.set && r->root.attempt == attempt && r->root.rank == rank;
    bool stopped = r->stopping == attempt && status != 0 && ddp_runner_worker_fail(k) == DDP_WF_NONE && !root;
    ddp_records_attempt_flush(r, run); /* k no longer holds it back */
    ddp_jsonlog_event(r->rec, "worker_exit",
                      ddp_jsonlog_pack("{s:i, s:i, s:i, s:i, s:o, s:o, s:s, s:I, s:b}", "attempt", attempt, "rank",
                                       rank, "local_rank", ddp_runner_worker_local_rank(k), "pid",
                                       ddp_runner_worker_pid(k), "exit_code",
                                       signo ? json_null() : json_integer(status), "signal",
                                       signo ? json_string(ddp_report_signame(signo)) : json_null(), "class",
                                       worker_class(r, k, cbuf, sizeof(cbuf)), "ran_ms",
                                       (json_int_t)(ddp_runner_worker_end_ms(k) - ddp_runner_worker_start_ms(k)),
                                       "stopped", stopped));
    ps_update(r, ddp_jsonlog_pack("{s:i}", "ranks_alive",
                                  (int)(ddp_runner_attempt_nworkers(run) - ddp_runner_attempt_nexited(run))));
}

void ddp_records_timeout(struct ddp_records *r, int attempt, enum ddp_class cls, const struct ddp_runner_worker *k,
                         const char *why)
{
    ddp_jsonlog_event(r->rec, "timeout",
                      ddp_jsonlog_pack("{s:i, s:s, s:o, s:o}", "attempt", attempt, "class", ddp_class_name(cls), "rank",
                                       k ? json_integer(ddp_runner_worker_rank(k)) : json_null(), "reason",
                                       ddp_jsonlog_text(why)));
}

/* ---------------------------------------------------------------- the failure ledger */

/* The cause outside the worker, from what NVML said about its GPU: a fault there (any class: the GPU failed
 * under it), or memory another process held there when the worker ran out of it. */
static void gpu_cause(const struct ddp_records *r, struct ended *e, const struct ddp_runner_worker *k, enum ddp_class c)
{
    const struct ddp_worker *w = ddp_runner_worker_plan(k);
    int g = w->gpu;
    if (g < 0 || (size_t)g >= r->ngpu)
        return;
    const char *held = r->gpu_held[g]                          ? r->gpu_held[g]
                       : r->cfg.gpu_held && r->cfg.gpu_held[g] ? r->cfg.gpu_held[g]
                                                               : NULL;
    if (r->gpu_fault[g]) {
        e->cause = ddp_xasprintf("GPU %d (%s) fault: %s", g, w->gpu_busid ? w->gpu_busid : "?", r->gpu_fault[g]);
        free(e->class_name);
        e->class_name = ddp_xstrdup("gpu-fault");
        free(e->hint);
        e->hint = ddp_xasprintf("the GPU failed under rank %d, not the program: a restart leaves GPU %d out; reset it "
                                "(nvidia-smi -r) or have the node drained, and see NVIDIA's Xid catalog",
                                e->rank, g);
    } else if (c == DDP_CLASS_CUDA_OOM && held) {
        /* the holder seen at launch is the holder now only while that pid runs the process that started before
         * the launch: an exited holder's pid may have gone to an unrelated process, maybe another user's */
        const char *pid_at = strstr(held, "pid ");
        int pid = pid_at ? atoi(pid_at + 4) : 0;
        long long age = 0;
        bool here = !strstr(held, "not visible here") && !strstr(held, "pid namespace");
        bool now = here && pid > 0 && ddp_nvml_proc_age_ms((unsigned)pid, &age) == 0 &&
                   age + 1000 >= ddp_now_ms() - r->job_start_ms;
        free(e->hint);
        if (now) {
            e->cause = ddp_xasprintf("GPU memory held by %s", held);
            e->hint = ddp_xasprintf("another process held GPU %d's memory, not this job's batch size: stop it (kill "
                                    "%d) or set [gpus] busy = skip to choose other GPUs",
                                    g, pid);
        } else {
            e->cause = ddp_xasprintf("GPU memory held at launch by %s%s", held, here ? ", which has exited since" : "");
            e->hint = ddp_xasprintf("another process held GPU %d's memory, not this job's batch size: set [gpus] "
                                    "busy = skip to choose other GPUs",
                                    g);
        }
    }
}

void ddp_records_gpu_fault(struct ddp_records *r, int gpu, const char *busid, const char *text)
{
    (void)busid;
    if (gpu >= 0 && (size_t)gpu < r->ngpu && !r->gpu_fault[gpu])
        r->gpu_fault[gpu] = ddp_xstrdup(text);
}

void ddp_records_gpu_held(struct ddp_records *r, int gpu, const char *held)
{
    if (gpu < 0 || (size_t)gpu >= r->ngpu)
        return;
    free(r->gpu_held[gpu]);
    r->gpu_held[gpu] = held ? ddp_xstrdup(held) : NULL;
}

void ddp_records_gpu_left_out(struct ddp_records *r, int attempt, int gpu, const char *busid, const char *why,
                              const char *text)
{
    json_t *o = ddp_jsonlog_pack("{s:i, s:i, s:s?, s:s, s:s}", "attempt", attempt, "gpu", gpu, "busid", busid, "reason",
                                 why, "text", text);
    ddp_jsonlog_event(r->rec, "gpu_left_out", json_deep_copy(o));
    json_array_append_new(r->left_out, o);
}

/* missing-module's hint, naming the interpreter the worker ran (its argv[0] for a Python job) and the module of
 * the line ("ModuleNotFoundError: No module named 'torch'"). Caller frees. */
static char *missing_module_hint(const struct ddp_runner_worker *k, const char *line)
{
    const char *q = line ? strstr(line, "No module named '") : NULL, *name = q ? q + 17 : NULL;
    const char *end = name ? strchr(name, '\'') : NULL;
    char module[128] = "a module";
    bool plain = end && end > name && end - name < 100; /* a module name, nothing a terminal would act on */
    for (const char *c = name; plain && c < end; c++)
        plain = isalnum((unsigned char)*c) || *c == '_' || *c == '.';
    if (plain)
        snprintf(module, sizeof module, "'%.*s'", (int)(end - name), name);
    const struct ddp_worker *w = ddp_runner_worker_plan(k);
    if (!w->python || !w->argv.n)
        return ddp_xstrdup(ddp_class_hint(DDP_CLASS_MISSING_MODULE));
    return ddp_xasprintf("the workers' Python %s has no module %s: install it for that python, or run with "
                         "PYTHON_EXEC=<a python that has it> (`ddplaunch doctor` names one for torch)",
                         w->argv.v[0], module);
}

static void record_ended(const struct ddp_records *r, struct ended *e, const struct ddp_runner_worker *k,
                         const char *reason, enum ddp_class tcls)
{
    const struct seen *o = seen_of(r, k);
    const char *ef = ddp_runner_worker_env(k, "TORCHELASTIC_ERROR_FILE");
    enum ddp_class c;
    ended_clear(e);
    e->set = true;
    e->rank = ddp_runner_worker_rank(k);
    e->local_rank = ddp_runner_worker_local_rank(k);
    e->pid = ddp_runner_worker_pid(k);
    e->status = ddp_runner_worker_status(k);
    e->signo = ddp_runner_worker_signo(k);
    e->exited = has_exited(k);
    e->attempt = ddp_runner_attempt_number(ddp_runner_worker_attempt(k));
    e->when = e->exited ? ddp_runner_worker_end_wall(k) : time(NULL);
    e->error_file = ef ? ddp_xstrdup(ef) : NULL;
    e->captured = o->captured && ddp_runner_worker_signo(k) == SIGABRT;
    c = o->cls;
    if (c == DDP_CLASS_NONE) {
        if (ddp_runner_worker_fail(k) == DDP_WF_EXEC)
            c = DDP_CLASS_EXEC_FAILED;
        else if (tcls != DDP_CLASS_NONE && reason)
            c = tcls;
        else if (e->exited)
            c = ddp_recognise_status(e->signo ? 0 : e->status, e->signo);
    }
    if (ddp_runner_worker_fail(k) == DDP_WF_BIND) {
        e->class_name = ddp_xstrdup("bind-failed");
        e->hint = ddp_xstrdup("the worker could not be bound to its CPUs/memory nodes and [numa] strict = yes: "
                              "check the cpuset this job may use, or set [numa] strict = no or bind = none");
        c = DDP_CLASS_NONE;
    } else if (c == DDP_CLASS_EXIT)
        e->class_name = ddp_xasprintf("exit-%d", ddp_runner_worker_status(k));
    else if (c != DDP_CLASS_NONE)
        e->class_name = ddp_xstrdup(ddp_class_name(c));
    if (c == DDP_CLASS_MISSING_MODULE)
        e->hint = missing_module_hint(k, o->line);
    else if (c == DDP_CLASS_SEGFAULT && o->line && strstr(o->line, "Fatal Python error: "))
        e->hint = ddp_xstrdup("the worker crashed in native code: an extension/ABI mismatch or a CUDA driver "
                              "problem; its Python stack (PYTHONFAULTHANDLER) is in its stderr above");
    else if (c != DDP_CLASS_NONE) {
        const char *h = ddp_class_hint(c);
        if (h && *h)
            e->hint = ddp_xstrdup(h);
    }
    e->class_line = o->line ? ddp_xstrdup(o->line) : NULL;
    e->reason = reason ? ddp_xstrdup(reason) : NULL;
    if (ddp_runner_worker_fail(k) == DDP_WF_EXEC) {
        free(e->reason);
        e->reason = ddp_xasprintf("cannot execute '%s': %s",
                                  ddp_runner_worker_plan(k)->argv.v ? ddp_runner_worker_plan(k)->argv.v[0] : "?",
                                  strerror(ddp_runner_worker_exec_err(k)));
    } else if (ddp_runner_worker_fail(k) == DDP_WF_BIND && ddp_runner_worker_bind_msg(k)) {
        free(e->reason);
        e->reason = ddp_xstrdup(ddp_runner_worker_bind_msg(k));
    }
    gpu_cause(r, e, k, c);
    ddp_runner_worker_tail(k, 1, push_tail, &e->tail);
}

void ddp_records_root(struct ddp_records *r, const struct ddp_runner_worker *k, const char *reason, enum ddp_class tcls)
{
    clear_others(r);
    if (k)
        record_ended(r, &r->root, k, reason, tcls);
    else
        ended_clear(&r->root);
}

void ddp_records_other(struct ddp_records *r, const struct ddp_runner_worker *k)
{
    record_ended(r, push_other(r), k, NULL, DDP_CLASS_NONE);
}

/* The root cause a verdict named (hang, collective-mismatch): it stays one however the rank then ended. */
static bool root_is_named(const struct ddp_records *r)
{
    return r->root.class_name && (strcmp(r->root.class_name, ddp_class_name(DDP_CLASS_HANG)) == 0 ||
                                  strcmp(r->root.class_name, ddp_class_name(DDP_CLASS_COLL_MISMATCH)) == 0);
}

void ddp_records_exited(struct ddp_records *r, const struct ddp_runner_worker *k, enum ddp_class tcls)
{
    if (!r->root.set || r->root.exited || r->root.rank != ddp_runner_worker_rank(k) ||
        r->root.attempt != ddp_runner_attempt_number(ddp_runner_worker_attempt(k)))
        return;
    /* the root cause was recorded at a timeout while it ran: now we know how it ended */
    char *reason = r->root.reason ? ddp_xstrdup(r->root.reason) : NULL;
    /* a hang culprit stays one (the capture may end on its whole stack, before it exits), as does a mismatch's */
    bool culprit = root_is_named(r);
    char *cls = culprit ? ddp_xstrdup(r->root.class_name) : NULL;
    char *hint = culprit && r->root.hint ? ddp_xstrdup(r->root.hint) : NULL;
    record_ended(r, &r->root, k, reason, tcls);
    if (culprit) {
        free(r->root.class_name);
        free(r->root.hint);
        r->root.class_name = cls;
        r->root.hint = hint;
    }
    free(reason);
}

void ddp_records_blame(struct ddp_records *r, const struct ddp_runner_worker *k, const char *why, const char *hint)
{
    if (r->root.set && r->root.rank != ddp_runner_worker_rank(k)) {
        *push_other(r) = r->root;
        memset(&r->root, 0, sizeof(r->root));
    }
    record_ended(r, &r->root, k, why, DDP_CLASS_NONE);
    if (r->root.cause && r->root.class_name && !strcmp(r->root.class_name, "gpu-fault"))
        return; /* the GPU failed under the hung rank: that is the verdict */
    free(r->root.class_name);
    free(r->root.hint);
    r->root.class_name = ddp_xstrdup(ddp_class_name(DDP_CLASS_HANG));
    r->root.hint = ddp_xstrdup(hint);
}

void ddp_records_mismatch(struct ddp_records *r, const struct ddp_runner_worker *k, const char *why, json_t *mismatch,
                          char *text)
{
    if (r->root.set && r->root.rank != ddp_runner_worker_rank(k)) {
        *push_other(r) = r->root;
        memset(&r->root, 0, sizeof(r->root));
    }
    record_ended(r, &r->root, k, why, DDP_CLASS_NONE);
    free(r->root.class_name);
    free(r->root.hint);
    r->root.class_name = ddp_xstrdup(ddp_class_name(DDP_CLASS_COLL_MISMATCH));
    r->root.hint = ddp_xstrdup(ddp_class_hint(DDP_CLASS_COLL_MISMATCH));
    json_decref(r->mismatch);
    r->mismatch = mismatch;
    ddp_jsonlog_event(r->rec, "mismatch", json_deep_copy(mismatch));
    free(r->mismatch_text);
    r->mismatch_text = text;
}

void ddp_records_forget(struct ddp_records *r)
{
    clear_others(r);
    ended_clear(&r->root);
}

void ddp_records_root_line(const struct ddp_records *r, char *buf, size_t size)
{
    const struct ended *e = &r->root;
    if (!e->set) {
        buf[0] = '\0';
        return;
    }
    snprintf(buf, size, "rank %d (local %d) %s %d%s%s", e->rank, e->local_rank,
             e->signo ? "died by signal" : "exited with code", e->signo ? e->signo : e->status,
             e->class_name ? ", " : "", e->class_name ? e->class_name : "");
}

struct ddp_jsonlog *ddp_records_record(struct ddp_records *r)
{
    return r->rec;
}

json_t *ddp_records_stragglers(struct ddp_records *r)
{
    return r->stragglers;
}

struct ddp_recovery *ddp_records_recovery(struct ddp_records *r)
{
    return &r->recovery;
}

/* summary.json's "recovery": each step's time after the hang began; null where none was named. */
static json_t *recovery_json(const struct ddp_recovery *v)
{
    if (v->attempt < 0 || !v->began_ms)
        return json_null();
    const long long at[] = {v->named_ms, v->stopped_ms, v->restarted_ms, v->training_ms};
    const char *const key[] = {"named_after_ms", "stopped_after_ms", "restarted_after_ms", "training_after_ms"};
    json_t *j = ddp_jsonlog_pack("{s:i, s:s, s:s}", "attempt", v->attempt, "state", v->state, "text", v->text);
    for (size_t i = 0; i < 4; i++)
        json_object_set_new(j, key[i], at[i] ? json_integer(at[i] - v->began_ms) : json_null());
    return j;
}

json_t *ddp_records_recorder(struct ddp_records *r)
{
    return r->recorder;
}

void ddp_records_decision(struct ddp_records *r, int attempt, const char *action, int next_attempt, int next_nproc,
                          long long delay_ms, int status, const char *why)
{
    bool exiting = strcmp(action, "exit") == 0;
    json_t *root = r->root.set && (!exiting || status != 0) ? json_integer(r->root.rank) : json_null();
    if (exiting)
        ddp_jsonlog_event(r->rec, "decision",
                          ddp_jsonlog_pack("{s:i, s:s, s:i, s:s, s:o}", "attempt", attempt, "action", action,
                                           "exit_status", status, "why", why, "root_rank", root));
    else
        ddp_jsonlog_event(r->rec, "decision",
                          ddp_jsonlog_pack("{s:i, s:s, s:i, s:i, s:I, s:s, s:o}", "attempt", attempt, "action", action,
                                           "next_attempt", next_attempt, "next_nproc", next_nproc, "delay_ms",
                                           (json_int_t)delay_ms, "why", why, "root_rank", root));
}

void ddp_records_hang(struct ddp_records *r, json_t *hang, char *text)
{
    json_decref(r->hang);
    r->hang = hang;
    if (hang && r->recovery.attempt >= 0 && r->recovery.state[0] &&
        json_integer_value(json_object_get(hang, "attempt")) == r->recovery.attempt) {
        json_object_set_new(hang, "state", json_string(r->recovery.state));
        json_object_set_new(hang, "state_text", ddp_jsonlog_text(r->recovery.text));
    }
    ddp_jsonlog_event(r->rec, "hang", json_deep_copy(r->hang));
    free(r->hang_text);
    r->hang_text = text;
}

/* ---------------------------------------------------------------- the summary */

static const char *prog_name(const struct ddp_spec *sp)
{
    return sp->script      ? sp->script
           : sp->module    ? sp->module
           : sp->program   ? sp->program
           : sp->command.n ? sp->command.v[0]
                           : "job";
}

/* The job's name as report and the SVG say it: the spec's name (the program's when it gives none). */
static const char *job_name(const struct ddp_spec *sp)
{
    return sp->name && *sp->name ? sp->name : prog_name(sp);
}

static struct ddp_report_entry entry_of(const struct ddp_records *r, const struct ended *e)
{
    return (struct ddp_report_entry){.rank = e->rank,
                                     .local_rank = e->local_rank,
                                     .host = r->cfg.job->hostname,
                                     .pid = e->pid,
                                     .exit_code = e->status,
                                     .signo = e->signo,
                                     .captured = e->captured,
                                     .when = e->when,
                                     .error_file = e->error_file,
                                     .error_file_kept = r->cfg.job->logdir != NULL,
                                     .class_name = e->class_name,
                                     .class_line = e->class_line,
                                     .hint = e->hint,
                                     .reason = e->reason,
                                     .cause = e->cause,
                                     .tail = (const char *const *)e->tail.v,
                                     .ntail = e->tail.n,
                                     .running = !e->exited};
}

void ddp_records_stopped(struct ddp_records *r, const char *file, uint64_t bytes, int err)
{
    r->stopped = ddp_xrealloc(r->stopped, (r->nstopped + 1) * sizeof(*r->stopped));
    r->stopped[r->nstopped++] =
        (struct ddp_logfile){.fd = -1, .rank = -1, .name = ddp_xstrdup(file), .len = bytes, .err = err};
}

/* One log that stopped (rank < 0: a record file of the run), into a (JSON) and text (console lines). */
static void stopped_log(json_t *a, struct ddp_buf *text, const struct ddp_logfile *f)
{
    const char *name = f->name ? f->name : "?", *why = strerror(f->err);
    json_array_append_new(a, ddp_jsonlog_pack("{s:o, s:s, s:I, s:s}", "rank",
                                              f->rank >= 0 ? json_integer(f->rank) : json_null(), "file", name, "bytes",
                                              (json_int_t)f->len, "error", why));
    if (f->rank >= 0)
        ddp_buf_printf(text, "  rank %d ", f->rank);
    else
        ddp_buf_puts(text, "  ");
    ddp_buf_printf(text, "%s: stopped at %llu bytes: %s\n", name, (unsigned long long)f->len, why);
}

/* Each log that stopped (a full disk): summary.json's logs_stopped, and (text) the console's lines. */
static json_t *stopped_logs(const struct ddp_records *r, struct ddp_buf *text)
{
    json_t *a = json_array();
    struct ddp_logfile ev = {.fd = -1, .rank = -1, .name = "events.jsonl"};
    for (size_t i = 0; i < r->out->nstopped; i++)
        stopped_log(a, text, &r->out->stopped[i]);
    for (size_t i = 0; i < r->nstopped; i++)
        stopped_log(a, text, &r->stopped[i]);
    ev.err = ddp_jsonlog_stopped(r->rec, &ev.len);
    if (ev.err)
        stopped_log(a, text, &ev);
    return a;
}

/* After the summary: the logs that stopped, which lack what followed (the stderr tails came from memory). */
static void print_stopped(const struct ddp_records *r)
{
    struct ddp_buf stops = {0};
    json_decref(stopped_logs(r, &stops));
    if (stops.len) {
        ddp_output_flush_wait(r->out);
        fflush(stdout);
        fprintf(stderr, "Logs that stopped (a write failed; what came after is not in them):\n%s", stops.data);
    }
    ddp_buf_free(&stops);
}

void ddp_records_print_summary(struct ddp_records *r, int status, struct ddp_output *out)
{
    if (!r->root.set) {
        print_stopped(r);
        return;
    }
    char *title = ddp_xasprintf("%s%s FAILED (exit status %d)%s", ddp_colour(DDP_COLOUR_RED), job_name(r->spec), status,
                                ddp_colour(DDP_COLOUR_RESET));
    struct ddp_report_entry root = entry_of(r, &r->root);
    struct ddp_report_entry *others = ddp_xcalloc(r->nothers + 1, sizeof(*others));
    for (size_t i = 0; i < r->nothers; i++)
        others[i] = entry_of(r, &r->others[i]);
    ddp_output_flush_wait(out);
    fflush(stdout);
    ddp_report_print(stderr, title, &root, others, r->nothers);
    if (r->hang_text)
        fprintf(stderr, "%s%s%s", ddp_colour(DDP_COLOUR_YELLOW), r->hang_text, ddp_colour(DDP_COLOUR_RESET));
    if (r->mismatch_text)
        fprintf(stderr, "%s%s%s", ddp_colour(DDP_COLOUR_YELLOW), r->mismatch_text, ddp_colour(DDP_COLOUR_RESET));
    print_stopped(r);
    free(others);
    free(title);
}

void ddp_records_print_success(const struct ddp_records *r)
{
    if (r->nattempts > 1) /* a success that needed restarts says so, in one line */
        ddp_info("%s%s succeeded%s after %d attempts (%d restart%s) in %.1f s", ddp_colour(DDP_COLOUR_GREEN),
                 job_name(r->spec), ddp_colour(DDP_COLOUR_RESET), r->nattempts, r->nattempts - 1,
                 r->nattempts == 2 ? "" : "s", (double)(ddp_now_ms() - r->job_start_ms) / 1000.0);
    print_stopped(r);
}

void ddp_records_job_end(struct ddp_records *r, int status, const char *result, const char *timeout)
{
    char now[32];
    if (!r || !r->rec || r->written)
        return;
    r->written = true;
    if (r->root.set && r->root.cause && status != 0)
        ddp_jsonlog_event(r->rec, "gpu_cause",
                          ddp_jsonlog_pack("{s:i, s:i, s:s, s:s}", "attempt", r->root.attempt, "rank", r->root.rank,
                                           "text", r->root.cause, "class",
                                           r->root.class_name ? r->root.class_name : ""));
    if (r->recovery.attempt >= 0 && r->recovery.began_ms) /* `ddplaunch report`: "hang -> training again in N s" */
        ddp_jsonlog_event(r->rec, "recovery", recovery_json(&r->recovery));
    ddp_jsonlog_event(r->rec, "job_end",
                      ddp_jsonlog_pack("{s:i, s:s, s:i, s:I}", "exit_status", status, "result", result, "attempts",
                                       r->nattempts, "duration_ms", (json_int_t)(ddp_now_ms() - r->job_start_ms)));
    json_t *others = json_array();
    for (size_t i = 0; i < r->nothers && status != 0; i++) {
        struct ddp_report_entry e = entry_of(r, &r->others[i]);
        json_array_append_new(others, ddp_report_entry_json(&e));
    }
    struct ddp_report_entry root = entry_of(r, &r->root);
    json_t *sum = ddp_jsonlog_pack("{s:s, s:s?, s:s?, s:s?, s:i, s:s, s:i, s:s, s:s, s:I, s:o, s:o, s:o, s:s?}",
                                   "program", prog_name(r->spec), "job", r->spec->name, "host", r->cfg.job->hostname,
                                   "run_id", r->cfg.job->run_id, "exit_status", status, "result", result, "attempts",
                                   r->nattempts, "started", r->job_start_iso, "ended", ddp_time_iso(NULL, now),
                                   "duration_ms", (json_int_t)(ddp_now_ms() - r->job_start_ms), "timeout",
                                   timeout ? json_string(timeout) : json_null(), "root_cause",
                                   r->root.set && status != 0 ? ddp_report_entry_json(&root) : json_null(), "failures",
                                   others, "log_dir", ddp_jsonlog_dir(r->rec));
    const struct ddp_records_config *c = &r->cfg; /* which node this is, on a file system that nodes share */
    json_object_set_new(sum, "node_rank", c->node_rank >= 0 ? json_integer(c->node_rank) : json_null());
    json_object_set_new(sum, "nnodes", json_integer(c->nnodes));
    json_object_set_new(sum, "ranks", r->ranks_hi >= 0 ? json_pack("[i, i]", r->ranks_lo, r->ranks_hi) : json_null());
    json_object_set_new(sum, "exit", ddp_verdict_json(status, result, r->root.set, r->root.rank, r->root.status));
    json_object_set(sum, "hang", r->hang ? r->hang : json_null());
    json_object_set(sum, "mismatch", r->mismatch ? r->mismatch : json_null());
    json_object_set_new(sum, "stragglers", json_deep_copy(r->stragglers));
    json_object_set_new(sum, "recovery", recovery_json(&r->recovery));
    json_object_set_new(sum, "gpus_left_out", json_deep_copy(r->left_out));
    json_object_set_new(sum, "warm_starts", json_deep_copy(r->warm));
    json_object_set_new(sum, "flight_recorder",
                        json_object_size(r->recorder) ? json_deep_copy(r->recorder) : json_null());
    struct ddp_buf text = {0};
    json_object_set_new(sum, "logs_stopped", stopped_logs(r, &text));
    ddp_buf_free(&text);
    ddp_jsonlog_summary(r->rec, sum);
}
