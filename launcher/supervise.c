/* supervise: see supervise.h. One libuv loop; the loop callbacks turn what happened into policy events
 * (policy.h) and carry out the actions the policy returns. Several nodes: nodes.c (the node agent); hang
 * verdicts: hang.c. */
#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "exit.h"
#include "hang.h"
#include "logdir.h"
#include "nodes.h"
#include "report.h"
#include "rundir.h"
#include "supervise_internal.h"

/* Kernel buffer of each worker output pipe: fewer wake-ups than the 64 KiB default when a worker floods. */
#define PIPE_SIZE (256 * 1024)

static void apply(struct sup *s, const struct ddp_paction *a);
static void capture_maybe_end(struct sup *s);
static void capture_end(struct sup *s);

/* ---------------------------------------------------------------- small helpers */

void ddp_sup_ended_clear(struct ended *e)
{
    free(e->error_file);
    free(e->class_name);
    free(e->class_line);
    free(e->hint);
    free(e->reason);
    ddp_strv_clear(&e->tail);
    memset(e, 0, sizeof(*e));
}

void ddp_sup_clear_others(struct sup *s)
{
    for (size_t i = 0; i < s->nothers; i++)
        ddp_sup_ended_clear(&s->others[i]);
    free(s->others);
    s->others = NULL;
    s->nothers = 0;
}

/* Read or stop reading every output pipe of the current attempt that is still open. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void set_reading(struct sup *s, bool on)
{
    struct run *r = s->cur;
    if (!r)
        return;
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        uv_stream_t *st[2] = {(uv_stream_t *)&k->out, (uv_stream_t *)&k->err};
        bool eof[2] = {k->out_eof, k->err_eof};
        if (!k->spawned || (!on && k->exited))
            continue; /* an exited worker's pipes hold a bounded rest: read it, so that it can finish */
        for (int j = 0; j < 2; j++) {
            if (eof[j] || uv_is_closing((uv_handle_t *)st[j]))
                continue;
            if (on)
                uv_read_start(st[j], on_alloc, on_read);
            else
                uv_read_stop(st[j]);
        }
    }
}

static void on_unblock(uv_timer_t *t)
{
    struct sup *s = t->data;
    if (ddp_output_flush(&s->out) > 0)
        return;
    long long now = ddp_now_ms();
    s->paused = false;
    uv_timer_stop(&s->unblock);
    /* the time the console was blocked is not the workers' silence */
    s->last_output_ms = now;
    if (s->cur && s->spec->heartbeat == DDP_HEARTBEAT_OUTPUT)
        for (size_t i = 0; i < s->cur->nw; i++)
            s->cur->w[i].last_progress_ms = now;
    set_reading(s, true);
}

/* Write what the console takes; when it is full, stop reading the workers until it drains. */
static void console_flush(struct sup *s)
{
    if (ddp_output_flush(&s->out) == 0 || s->paused)
        return;
    s->paused = true;
    set_reading(s, false);
    uv_timer_start(&s->unblock, on_unblock, 5, 5);
}

static void push_tail(void *arg, const char *line)
{
    ddp_strv_push((struct ddp_strv *)arg, line);
}

static const char *worker_env(const struct ddp_worker *w, const char *name)
{
    int i = ddp_strv_env_find(&w->envp, name);
    return i >= 0 ? w->envp.v[i] + strlen(name) + 1 : NULL;
}

static char *fmt_ms(long long ms)
{
    if (ms % 1000 == 0)
        return ddp_xasprintf("%llds", ms / 1000);
    return ddp_xasprintf("%lldms", ms);
}

/* ---------------------------------------------------------------- run records (record.h) */

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

static void rec_job_start(struct sup *s)
{
    const struct ddp_spec *sp = s->spec;
    json_t *plan =
        json_pack("{s:i, s:s, s:s, s:o, s:o, s:o, s:s, s:I}", "max_restarts", sp->max_restarts, "on_failure",
                  sp->on_failure == DDP_ONFAIL_FAIL ? "fail" : "restart", "on_timeout", on_timeout_name(sp->on_timeout),
                  "timeout_init_ms", ms_or_null(sp->timeout_init_ms), "timeout_stall_ms",
                  ms_or_null(sp->timeout_stall_ms), "timeout_wall_ms", ms_or_null(sp->timeout_wall_ms), "heartbeat",
                  heartbeat_name(sp->heartbeat), "shutdown_timeout_ms", (json_int_t)sp->shutdown_timeout_ms);
    ddp_record_event(s->rec, "job_start",
                     json_pack("{s:s?, s:s?, s:s?, s:i, s:i, s:i, s:i, s:s?, s:i, s:s?, s:o}", "job", sp->name, "host",
                               s->ctx->hostname, "run_id", s->ctx->run_id, "pid", (int)getpid(), "nnodes",
                               s->ctx->nnodes, "node_rank", s->ctx->node_rank, "nproc", s->ctx->nproc, "master_addr",
                               s->ctx->master_addr, "master_port", s->ctx->master_port, "log_dir",
                               ddp_record_dir(s->rec), "plan", plan));
}

static void rec_attempt_start(struct sup *s, const struct run *r)
{
    json_t *workers = json_array(), *argv = json_array();
    const struct ddp_attempt *a = &r->plan;
    for (size_t i = 0; i < r->nw; i++) {
        const struct wrk *k = &r->w[i];
        json_array_append_new(workers,
                              json_pack("{s:i, s:i, s:i, s:i, s:s?, s:i, s:s?, s:b}", "rank", k->w->rank, "local_rank",
                                        k->w->local_rank, "pid", k->pid, "gpu", k->w->gpu, "gpu_busid", k->w->gpu_busid,
                                        "numa_node", k->w->numa_node, "cpus", k->w->cpus, "started", k->spawned));
    }
    if (r->nw)
        for (size_t i = 0; i < r->w[0].w->argv.n; i++)
            json_array_append_new(argv, json_string(r->w[0].w->argv.v[i]));
    ddp_record_event(s->rec, "attempt_start",
                     json_pack("{s:i, s:i, s:i, s:i, s:s?, s:s?, s:o, s:o}", "attempt", a->attempt, "nproc", a->nproc,
                               "world_size", a->world_size, "master_port", a->master_port, "dir", a->dir, "gpu_reason",
                               a->gpu_reason, "argv", argv, "workers", workers));
}

static const char *wrk_class(const struct wrk *k, char *buf, size_t n)
{
    if (k->exec_failed)
        return "exec-failed";
    if (k->bind_failed)
        return "bind-failed";
    if (k->cls != DDP_CLASS_NONE)
        return ddp_class_name(k->cls);
    if (k->status == 0)
        return "ok";
    enum ddp_class c = ddp_classify_status(k->signo ? 0 : k->status, k->signo);
    if (c == DDP_CLASS_EXIT || c == DDP_CLASS_NONE) {
        snprintf(buf, n, "exit-%d", k->status);
        return buf;
    }
    return ddp_class_name(c);
}

static void rec_worker_exit(struct sup *s, const struct wrk *k)
{
    char cbuf[32];
    ddp_record_event(s->rec, "worker_exit",
                     json_pack("{s:i, s:i, s:i, s:i, s:o, s:o, s:s, s:I}", "attempt", k->run->plan.attempt, "rank",
                               k->w->rank, "local_rank", k->w->local_rank, "pid", k->pid, "exit_code",
                               k->signo ? json_null() : json_integer(k->status), "signal",
                               k->signo ? json_string(ddp_report_signame(k->signo)) : json_null(), "class",
                               wrk_class(k, cbuf, sizeof(cbuf)), "ran_ms", (json_int_t)(k->end_ms - k->start_ms)));
}

static void rec_timeout(struct sup *s, enum ddp_class c, const struct wrk *k, const char *reason)
{
    ddp_record_event(s->rec, "timeout",
                     json_pack("{s:i, s:s, s:o, s:s}", "attempt", s->cur ? s->cur->plan.attempt : s->pol.attempt,
                               "class", ddp_class_name(c), "rank", k ? json_integer(k->w->rank) : json_null(), "reason",
                               reason));
}

static void record_ended(struct sup *s, struct ended *e, const struct wrk *k, const char *reason)
{
    const char *ef = worker_env(k->w, "TORCHELASTIC_ERROR_FILE");
    enum ddp_class c;
    ddp_sup_ended_clear(e);
    e->set = true;
    e->rank = k->w->rank;
    e->local_rank = k->w->local_rank;
    e->pid = k->pid;
    e->status = k->status;
    e->signo = k->signo;
    e->exited = k->exited;
    e->attempt = k->run->plan.attempt;
    e->when = k->exited ? k->end_wall : time(NULL);
    e->error_file = ef ? ddp_xstrdup(ef) : NULL;
    c = k->cls;
    if (c == DDP_CLASS_NONE) {
        if (k->exec_failed)
            c = DDP_CLASS_EXEC_FAILED;
        else if (s->timeout_reason && reason)
            c = s->timeout_class;
        else if (k->exited)
            c = ddp_classify_status(k->signo ? 0 : k->status, k->signo);
    }
    if (k->bind_failed && !k->exec_failed) {
        e->class_name = ddp_xstrdup("bind-failed");
        e->hint = ddp_xstrdup("the worker could not be bound to its CPUs/memory nodes and [numa] strict = yes: "
                              "check the cpuset this job may use, or set [numa] strict = no or bind = none");
        c = DDP_CLASS_NONE;
    } else if (c == DDP_CLASS_EXIT)
        e->class_name = ddp_xasprintf("exit-%d", k->status);
    else if (c != DDP_CLASS_NONE)
        e->class_name = ddp_xstrdup(ddp_class_name(c));
    if (c != DDP_CLASS_NONE) {
        const char *h = ddp_class_hint(c);
        if (h && *h)
            e->hint = ddp_xstrdup(h);
    }
    e->class_line = k->cls_line ? ddp_xstrdup(k->cls_line) : NULL;
    e->reason = reason ? ddp_xstrdup(reason) : NULL;
    if (k->exec_failed)
        e->reason =
            ddp_xasprintf("cannot execute '%s': %s", k->w->argv.v ? k->w->argv.v[0] : "?", strerror(k->exec_err));
    else if (k->bind_failed && k->bind_msg)
        e->reason = ddp_xstrdup(k->bind_msg);
    ddp_stream_tail(&k->s_err, push_tail, &e->tail);
}

/* kill(-pgid) for every worker group of the current attempt that may still have processes. SIGKILL goes to
 * the shim while it lives (ddp_shim_kill: it kills its program's whole tree, in the group or not). */
static int signal_all(struct sup *s, int sig)
{
    int n = 0;
    struct run *r = s->cur;
    if (!r)
        return 0;
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        if (!k->spawned || k->finished || k->pgid <= 0)
            continue;
        if (sig == SIGKILL && !k->exited ? ddp_shim_kill(k->pgid) == 0 : kill(-k->pgid, sig) == 0)
            n++;
    }
    return n;
}

/* ---------------------------------------------------------------- handle lifetime */

static void run_free(struct run *r)
{
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        ddp_stream_free(&k->s_out);
        ddp_stream_free(&k->s_err);
        if (k->time_fd >= 0)
            close(k->time_fd);
        free(k->bind_msg);
        free(k->hb_path);
        free(k->cls_line);
        ddp_buf_free(&k->dump);
    }
    free(r->watched);
    if (r->cgroup) { /* normally already ended in attempt_cgroup_end() */
        ddp_cgroup_kill_remove(r->cgroup);
        free(r->cgroup);
    }
    free(r->w);
    ddp_attempt_free(&r->plan);
    free(r);
}

/* Every worker of r finished: what the attempt used, from its cgroup, and the cgroup ended (SIGKILL to
 * anything that is still in it, which the shims' subreaping should have left empty). */
static void attempt_cgroup_end(struct run *r)
{
    long long cpu, mem;
    if (!r->cgroup)
        return;
    bool failed = false;
    for (size_t i = 0; i < r->nw; i++)
        failed |= r->w[i].status != 0;
    /* said before a failed attempt's summary; with -v always */
    enum ddp_log_level level = failed ? DDP_LOG_INFO : DDP_LOG_DEBUG;
    if (ddp_cgroup_stats(r->cgroup, &cpu, &mem) == 0) {
        if (mem >= 0)
            ddp_log(level, "attempt %d: CPU time %.1f s, peak memory %.0f MiB (its cgroup)", r->plan.attempt,
                    (double)cpu / 1e6, (double)mem / (1024.0 * 1024.0));
        else
            ddp_log(level, "attempt %d: CPU time %.1f s (its cgroup)", r->plan.attempt, (double)cpu / 1e6);
    }
    int left = ddp_cgroup_kill_remove(r->cgroup);
    if (left > 0)
        ddp_warn("attempt %d: %d process%s still in the attempt's cgroup: killed", r->plan.attempt, left,
                 left == 1 ? "" : "es");
    free(r->cgroup);
    r->cgroup = NULL;
}

static void on_close(uv_handle_t *h)
{
    struct wrk *k = h->data;
    struct run *r = k->run;
    if (--r->open_handles == 0 && r->retired)
        run_free(r);
}

static void close_handle(struct wrk *k, uv_handle_t *h)
{
    (void)k; /* h->data is k */
    if (!uv_is_closing(h))
        uv_close(h, on_close);
}

/* ---------------------------------------------------------------- ending of workers */

static void check_finished(struct sup *s, struct wrk *k)
{
    struct run *r = k->run;
    if (k->finished || !k->exited || !k->out_eof || !k->err_eof || !k->rep_eof)
        return;
    k->finished = true;
    r->nfinished++;
    if (r->nfinished == r->nw)
        attempt_cgroup_end(r);
    if (r != s->cur)
        return;
    if (r->nfinished == r->nw) {
        struct ddp_pevent_data ev = {.kind = DDP_PE_ALL_FINISHED};
        if (s->capturing)
            capture_end(s); /* every rank is gone: decide before the policy ends the attempt */
        uv_timer_stop(&s->grace);
        uv_timer_stop(&s->force);
        uv_timer_stop(&s->watch);
        uv_timer_stop(&s->wall);
        s->grace_armed = false;
        if (s->multi)
            ddp_nodes_all_finished(s);
        else
            ddp_sup_feed(s, &ev);
    }
}

static void drain_output(struct sup *s, struct wrk *k);

/* The shim says the program failed while it still ends what the program left behind (which may take up to
 * shutdown_timeout): stop the other workers now, as on_exit_cb would. */
static void program_exited(struct sup *s, struct wrk *k, int status, int signo)
{
    struct run *r = k->run;
    if (k->exited || status == 0 || r != s->cur || s->pol.state != DDP_PS_RUNNING)
        return;
    k->status = status;
    k->signo = signo;
    k->end_ms = ddp_now_ms();
    k->end_wall = time(NULL);
    k->failure_fed = true;
    drain_output(s, k);
    ddp_sup_clear_others(s);
    record_ended(s, &s->root, k, NULL);
    if (signo)
        ddp_error("attempt %d: rank %d (local %d, pid %d) died by %s; stopping the other workers", r->plan.attempt,
                  k->w->rank, k->w->local_rank, k->pid, ddp_report_signame(signo));
    else
        ddp_error("attempt %d: rank %d (local %d, pid %d) exited with code %d; stopping the other workers",
                  r->plan.attempt, k->w->rank, k->w->local_rank, k->pid, status);
    struct ddp_pevent_data ev = {.kind = DDP_PE_WORKER_FAILED, .status = status};
    ddp_sup_feed(s, &ev);
}

static void handle_record(struct sup *s, struct wrk *k, const struct ddp_shim_record *rec)
{
    (void)s;
    switch (rec->kind) {
    case DDP_SHIM_STARTED:
        if (rec->pid > 0)
            k->pid = rec->pid;
        ddp_progress_program(k->run->progress, (size_t)(k - k->run->w), k->pid);
        break;
    case DDP_SHIM_EXEC_FAILED:
        k->exec_failed = true;
        k->exec_err = rec->err;
        ddp_error("rank %d: cannot execute '%s': %s", k->w->rank, k->w->argv.v ? k->w->argv.v[0] : "?",
                  strerror(rec->err));
        break;
    case DDP_SHIM_BIND_WARN:
        ddp_warn("%s", rec->msg);
        break;
    case DDP_SHIM_EXITED:
        program_exited(s, k, rec->status, rec->err);
        break;
    case DDP_SHIM_BIND_FAILED:
        k->bind_failed = true;
        free(k->bind_msg);
        k->bind_msg = ddp_xstrndup(rec->msg, sizeof(rec->msg));
        ddp_error("%s (numa strict = yes)", k->bind_msg);
        break;
    default:
        break;
    }
}

static void rep_bytes(struct sup *s, struct wrk *k, const char *p, size_t n)
{
    while (n > 0) {
        size_t take = sizeof(k->rep_buf) - k->rep_len;
        if (take > n)
            take = n;
        memcpy(k->rep_buf + k->rep_len, p, take);
        k->rep_len += take;
        p += take;
        n -= take;
        if (k->rep_len == sizeof(k->rep_buf)) {
            struct ddp_shim_record rec;
            memcpy(&rec, k->rep_buf, sizeof(rec));
            rec.msg[sizeof(rec.msg) - 1] = '\0';
            handle_record(s, k, &rec);
            k->rep_len = 0;
        }
    }
}

/* Read what the shim wrote before it exited (the record may not have been read by the loop yet). */
static void drain_report(struct sup *s, struct wrk *k)
{
    uv_os_fd_t fd;
    char buf[sizeof(struct ddp_shim_record) * 4];
    if (k->rep_eof || uv_fileno((uv_handle_t *)&k->rep, &fd) != 0)
        return;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            rep_bytes(s, k, buf, (size_t)n);
            continue;
        }
        break;
    }
}

static void on_grace(uv_timer_t *t);

/* Read what is already waiting in a worker's stdout/stderr pipes, so that its last lines (a traceback, a
 * recognised error message) are forwarded, classified and in the summary's tail before its ending is judged. */
static void drain_output(struct sup *s, struct wrk *k)
{
    uv_pipe_t *pipes[2] = {&k->out, &k->err};
    struct ddp_stream *streams[2] = {&k->s_out, &k->s_err};
    bool eof[2] = {k->out_eof, k->err_eof};
    for (int i = 0; i < 2; i++) {
        uv_os_fd_t fd;
        if (eof[i] || uv_is_closing((uv_handle_t *)pipes[i]) || uv_fileno((uv_handle_t *)pipes[i], &fd) != 0)
            continue;
        for (int rounds = 0; rounds < 64; rounds++) { /* bounded: a flooding grandchild cannot keep us here */
            ssize_t n = read(fd, s->readbuf, sizeof(s->readbuf));
            if (n <= 0)
                break; /* EAGAIN, or EOF: the loop's own read will see it */
            ddp_stream_feed(&s->out, streams[i], s->readbuf, (size_t)n);
        }
    }
    console_flush(s);
}

static void add_shim_pid(uv_handle_t *h, void *arg)
{
    struct ddp_buf *pids = arg;
    if (h->type == UV_PROCESS && ((uv_process_t *)h)->pid > 0)
        ddp_buf_add(pids, (const char *)&((uv_process_t *)h)->pid, sizeof(pid_t));
}

/* A shim ended: if its worker killed it, what it contained came back to us (ddp_shim_adopt_orphans); end it. */
static void sweep_orphans(struct sup *s)
{
    struct ddp_buf pids = {0};
    uv_walk(&s->loop, add_shim_pid, &pids);
    int n = ddp_shim_sweep_orphans((const pid_t *)(void *)pids.data, pids.len / sizeof(pid_t));
    if (n > 0)
        ddp_debug("ended %d process(es) a killed shim left behind", n);
    ddp_buf_free(&pids);
}

static void on_exit_cb(uv_process_t *p, int64_t exit_status, int term_signal)
{
    struct wrk *k = p->data;
    struct run *r = k->run;
    struct sup *s = r->sup;
    k->exited = true;
    ddp_progress_exited(r->progress, (size_t)(k - r->w));
    k->end_ms = ddp_now_ms();
    k->end_wall = time(NULL);
    k->signo = term_signal;
    k->status = term_signal ? ddp_exit_signal(term_signal) : (int)exit_status;
    r->nexited++;
    sweep_orphans(s);
    drain_report(s, k);
    drain_output(s, k);
    rec_worker_exit(s, k);
    if (s->ps) {
        json_t *ch = json_pack("{s:i}", "ranks_alive", (int)(r->nw - r->nexited));
        ddp_jobs_update(s->ps, ch);
        json_decref(ch);
    }
    if (s->paused) {
        if (!k->out_eof && !uv_is_closing((uv_handle_t *)&k->out))
            uv_read_start((uv_stream_t *)&k->out, on_alloc, on_read);
        if (!k->err_eof && !uv_is_closing((uv_handle_t *)&k->err))
            uv_read_start((uv_stream_t *)&k->err, on_alloc, on_read);
    }
    if (s->root.set && !s->root.exited && r == s->cur && s->root.rank == k->w->rank &&
        s->root.attempt == r->plan.attempt) {
        /* the root cause was recorded at a timeout while it ran: now we know how it ended */
        char *reason = s->root.reason ? ddp_xstrdup(s->root.reason) : NULL;
        /* a hang culprit stays one (the capture may end on its whole stack, before it exits) */
        bool culprit = s->root.class_name && strcmp(s->root.class_name, ddp_class_name(DDP_CLASS_HANG)) == 0;
        char *hint = culprit && s->root.hint ? ddp_xstrdup(s->root.hint) : NULL;
        record_ended(s, &s->root, k, reason);
        if (culprit) {
            free(s->root.class_name);
            free(s->root.hint);
            s->root.class_name = ddp_xstrdup(ddp_class_name(DDP_CLASS_HANG));
            s->root.hint = hint;
        }
        free(reason);
    }
    close_handle(k, (uv_handle_t *)p);
    /* Processes the worker left in its group: ask them to go. */
    if (k->pgid > 0 && kill(-k->pgid, 0) == 0)
        kill(-k->pgid, SIGTERM);
    if (r == s->cur) {
        struct ddp_pevent_data ev = {0};
        enum ddp_pstate before = s->pol.state;
        bool feed_it = !k->failure_fed; /* else fed when the shim said the program ended */
        if (!feed_it) {
        } else if (k->status == 0) {
            ev.kind = DDP_PE_WORKER_OK;
        } else {
            ev.kind = DDP_PE_WORKER_FAILED;
            ev.status = k->status;
            ev.fatal = k->exec_failed || k->bind_failed;
            if (before == DDP_PS_RUNNING) {
                ddp_sup_clear_others(s);
                record_ended(s, &s->root, k, NULL);
                if (k->signo)
                    ddp_error("attempt %d: rank %d (local %d, pid %d) died by %s; stopping the other workers",
                              r->plan.attempt, k->w->rank, k->w->local_rank, k->pid, ddp_report_signame(k->signo));
                else
                    ddp_error("attempt %d: rank %d (local %d, pid %d) exited with code %d; stopping the other "
                              "workers",
                              r->plan.attempt, k->w->rank, k->w->local_rank, k->pid, k->status);
            } else if (before == DDP_PS_STOPPING && s->pol.stop != DDP_STOP_SIGNAL && !k->exec_failed &&
                       !k->abort_sent && k->signo != SIGTERM && k->signo != SIGKILL &&
                       k->status != ddp_exit_signal(SIGTERM)) {
                /* a failure of its own while we were stopping: list it after the root cause */
                s->others = ddp_xrealloc(s->others, (s->nothers + 1) * sizeof(*s->others));
                memset(&s->others[s->nothers], 0, sizeof(*s->others));
                record_ended(s, &s->others[s->nothers++], k, NULL);
            }
        }
        if (feed_it)
            ddp_sup_feed(s, &ev);
        if (r->nexited == r->nw && r->nfinished < r->nw && !s->grace_armed && s->pol.state == DDP_PS_RUNNING) {
            s->grace_armed = true;
            uv_timer_start(&s->grace, on_grace, (uint64_t)s->spec->shutdown_timeout_ms, 0);
        }
    }
    check_finished(s, k);
    capture_maybe_end(s);
}

/* ---------------------------------------------------------------- output */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct wrk *k = h->data;
    struct sup *s = k->run->sup;
    (void)suggested;
    buf->base = s->readbuf;
    buf->len = sizeof(s->readbuf);
}

static void on_line(void *arg, int which, const char *line, size_t len)
{
    struct wrk *k = arg;
    struct sup *s = k->run->sup;
    enum ddp_class c;
    if (k->abort_sent && which == 1 && k->dump.len < (256u << 10)) {
        ddp_buf_add(&k->dump, line, len);
        ddp_buf_add(&k->dump, "\n", 1);
        /* the fault handler's last line (Python >= 3.10): the stack is whole, no need to wait for the exit
         * (measured on H200s: a CUDA process takes seconds to die after SIGABRT) */
        if (s->capture_armed && len >= 19 && memcmp(line, "Extension modules: ", 19) == 0) {
            k->dump_done = true;
            capture_maybe_end(s);
            return;
        }
    }
    c = ddp_classify_line(line, len);
    if (c == DDP_CLASS_NONE)
        return;
    if (ddp_class_is_timeout(c)) {
        struct ddp_hang_timeout t = k->tmo;
        if (!t.waiting)
            t.seq = -1;
        if (ddp_hang_parse_timeout(line, len, &t))
            k->tmo = t;
        k->reported_timeout = true;
    }
    if (k->cls == DDP_CLASS_NONE) {
        k->cls = c;
        k->cls_line = ddp_xstrndup(line, len < 1000 ? len : 1000);
    }
    if (ddp_class_is_timeout(c) && k->run == s->cur && s->pol.state == DDP_PS_RUNNING) {
        struct ddp_pevent_data ev = {.kind = DDP_PE_TIMEOUT};
        free(s->timeout_reason);
        const char *backend = ddp_classify_backend(line, len);
        s->timeout_reason = ddp_xasprintf("rank %d reported a %s%scollective timeout (%s)", k->w->rank,
                                          backend ? backend : "", backend ? " " : "", ddp_class_name(c));
        s->timeout_class = c;
        ddp_sup_clear_others(s);
        record_ended(s, &s->root, k, s->timeout_reason);
        rec_timeout(s, c, k, s->timeout_reason);
        ddp_error("attempt %d: %s; stopping the workers", k->run->plan.attempt, s->timeout_reason);
        ddp_sup_feed(s, &ev);
    }
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct wrk *k = st->data;
    struct sup *s = k->run->sup;
    if (st == (uv_stream_t *)&k->rep) {
        if (n > 0) {
            rep_bytes(s, k, buf->base, (size_t)n);
            return;
        }
        if (n < 0) {
            k->rep_eof = true;
            close_handle(k, (uv_handle_t *)st);
            check_finished(s, k);
        }
        return;
    }
    struct ddp_stream *ds = st == (uv_stream_t *)&k->out ? &k->s_out : &k->s_err;
    if (n > 0) {
        long long now = ddp_now_ms();
        ddp_stream_feed(&s->out, ds, buf->base, (size_t)n);
        k->alive = true;
        ddp_progress_output(k->run->progress, (size_t)(k - k->run->w), now);
        s->last_output_ms = now;
        s->any_output = true;
        if (s->spec->heartbeat == DDP_HEARTBEAT_OUTPUT)
            k->last_progress_ms = now;
        console_flush(s);
        return;
    }
    if (n < 0) {
        ddp_stream_finish(&s->out, ds);
        console_flush(s);
        if (ds == &k->s_out)
            k->out_eof = true;
        else
            k->err_eof = true;
        close_handle(k, (uv_handle_t *)st);
        check_finished(s, k);
        capture_maybe_end(s);
    }
}

/* ---------------------------------------------------------------- starting */

static int mkdir_p(const char *path, mode_t mode)
{
    char *p = ddp_xstrdup(path);
    int rc = 0;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/')
            continue;
        *q = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST)
            rc = -errno;
        *q = '/';
    }
    if (rc == 0 && mkdir(p, mode) != 0 && errno != EEXIST)
        rc = -errno;
    free(p);
    return rc;
}

static const char *mem_mode_name(enum ddp_membind m)
{
    return m == DDP_MEM_LOCAL ? "local" : m == DDP_MEM_INTERLEAVE ? "interleave" : "none";
}

/* Create (or reset) the heartbeat file with mtime = now. */
static void heartbeat_reset(struct wrk *k)
{
    struct stat st;
    char *dir = ddp_xstrdup(k->hb_path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir_p(dir, 0700);
    }
    free(dir);
    int fd = open(k->hb_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        futimens(fd, NULL);
        if (fstat(fd, &st) == 0)
            k->hb_mtime = st.st_mtim;
        close(fd);
    } else {
        ddp_warn("rank %d: heartbeat file %s: %s", k->w->rank, k->hb_path, strerror(errno));
    }
}

/* The worker's output streams: its log directory, and with a logdir its stdout, stderr and timed log files. */
static int open_streams(struct sup *s, struct wrk *k, struct ddp_err *err)
{
    const struct ddp_worker *w = k->w;
    struct ddp_logdir *ld = s->ctx->logdir;
    int fds[3] = {-1, -1, -1};
    int rc;

    if (w->log_dir && !ld) { /* error files in the private run directory */
        rc = mkdir_p(w->log_dir, 0755);
        if (rc < 0)
            return ddp_errf(err, rc, "rank %d: cannot create log dir %s: %s", w->rank, w->log_dir, strerror(-rc));
    }
    for (int i = 0; ld && i < 3; i++) {
        char *rel = ddp_xasprintf("attempt_%d/%d/%s", k->run->plan.attempt, w->local_rank,
                                  i == 2 ? "timed.log"
                                  : i    ? "stderr.log"
                                         : "stdout.log");
        fds[i] = ddp_logdir_create_file(ld, rel, err);
        free(rel);
        if (fds[i] < 0) {
            rc = fds[i];
            for (int j = 0; j < i; j++)
                close(fds[j]);
            return rc;
        }
    }
    ddp_stream_init(&k->s_out, 0, w->prefix[0], w->to_console[0], w->raw[0], fds[0]);
    ddp_stream_init(&k->s_err, 1, w->prefix[1], w->to_console[1], w->raw[1], fds[1]);
    k->time_fd = fds[2];
    k->s_out.time_fd = k->s_err.time_fd = fds[2];
    k->s_out.on_line = on_line;
    k->s_out.arg = k;
    k->s_err.on_line = on_line;
    k->s_err.arg = k;

    return 0;
}

/* Real pipes (libuv's UV_CREATE_PIPE makes socketpairs, whose per-write skbs cost both sides dearly when
 * a worker prints many short lines). Close-on-exec here; libuv dup2s them onto 1, 2 and 3 in the child. */
static int open_pipes(const struct ddp_worker *w, int rp[2], int op[2], int ep[2], struct ddp_err *err)
{
    if (pipe2(rp, O_CLOEXEC) != 0)
        return ddp_errf(err, -errno, "rank %d: pipe: %s", w->rank, strerror(errno));
    if (pipe2(op, O_CLOEXEC) != 0) {
        int e = errno;
        close(rp[0]);
        close(rp[1]);
        return ddp_errf(err, -e, "rank %d: pipe: %s", w->rank, strerror(e));
    }
    if (pipe2(ep, O_CLOEXEC) != 0) {
        int e = errno;
        close(rp[0]);
        close(rp[1]);
        close(op[0]);
        close(op[1]);
        return ddp_errf(err, -e, "rank %d: pipe: %s", w->rank, strerror(e));
    }
    fcntl(op[0], F_SETPIPE_SZ, PIPE_SIZE);
    fcntl(ep[0], F_SETPIPE_SZ, PIPE_SIZE);

    return 0;
}

/* The exec shim's command line: what it needs to know (see shim.h), then "--" and the worker's argv. */
static void shim_argv(const struct sup *s, const struct wrk *k, struct ddp_strv *args)
{
    const struct ddp_worker *w = k->w;

    ddp_strv_push(args, s->self_exe);
    ddp_strv_push(args, "--exec-shim");
    ddp_strv_pushf(args, "--rank=%d", w->rank);
    ddp_strv_pushf(args, "--ppid=%d", (int)getpid());
    ddp_strv_pushf(args, "--report-fd=3");
    ddp_strv_pushf(args, "--grace-ms=%lld", (long long)s->spec->shutdown_timeout_ms);
    if (k->run->cgroup)
        ddp_strv_pushf(args, "--cgroup=%s", k->run->cgroup);
    if (w->cpus && *w->cpus)
        ddp_strv_pushf(args, "--cpus=%s", w->cpus);
    if (w->mems && *w->mems) {
        ddp_strv_pushf(args, "--mems=%s", w->mems);
        ddp_strv_pushf(args, "--mem-mode=%s", mem_mode_name(w->mem_mode));
    }
    if (w->bind_strict)
        ddp_strv_push(args, "--strict");
    /* the program the job started with, should it have been deleted or replaced since */
    const char *via = w->argv.n ? ddp_shim_reach(w->argv.v[0], worker_env(w, "PATH")) : NULL;
    if (via)
        ddp_strv_pushf(args, "--exec-path=%s", via);
    ddp_strv_push(args, "--");
    for (size_t i = 0; i < w->argv.n; i++)
        ddp_strv_push(args, w->argv.v[i]);
}

static int spawn_one(struct sup *s, struct wrk *k, struct ddp_err *err)
{
    const struct ddp_worker *w = k->w;
    struct ddp_strv args = {0};
    uv_process_options_t o;
    uv_stdio_container_t io[4];
    int rp[2], op[2], ep[2];
    int rc;

    rc = open_streams(s, k, err);
    if (rc < 0)
        return rc;

    const char *hb = worker_env(w, "DDPLAUNCH_HEARTBEAT_FILE");
    if (hb && s->spec->heartbeat == DDP_HEARTBEAT_FILE) {
        k->hb_path = ddp_xstrdup(hb);
        heartbeat_reset(k);
    }

    rc = open_pipes(w, rp, op, ep, err);
    if (rc < 0)
        return rc;

    shim_argv(s, k, &args);

    uv_pipe_init(&s->loop, &k->out, 0);
    uv_pipe_init(&s->loop, &k->err, 0);
    uv_pipe_init(&s->loop, &k->rep, 0);
    k->out.data = k->err.data = k->rep.data = k->proc.data = k;
    k->run->open_handles += 3;

    memset(&o, 0, sizeof(o));
    memset(io, 0, sizeof(io));
    io[0].flags = UV_INHERIT_FD;
    io[0].data.fd = 0;
    io[1].flags = UV_INHERIT_FD;
    io[1].data.fd = op[1];
    io[2].flags = UV_INHERIT_FD;
    io[2].data.fd = ep[1];
    io[3].flags = UV_INHERIT_FD;
    io[3].data.fd = rp[1];
    o.exit_cb = on_exit_cb;
    o.file = s->self_exe;
    o.args = args.v;
    o.env = w->envp.v;
    o.cwd = w->cwd;
    o.flags = UV_PROCESS_DETACHED;
    o.stdio_count = 4;
    o.stdio = io;
    k->start_ms = ddp_now_ms();
    k->last_progress_ms = k->start_ms;
    rc = uv_spawn(&s->loop, &k->proc, &o);
    close(rp[1]);
    close(op[1]);
    close(ep[1]);
    ddp_strv_clear(&args);
    if (rc != 0) {
        close(rp[0]);
        close(op[0]);
        close(ep[0]);
        close_handle(k, (uv_handle_t *)&k->out);
        close_handle(k, (uv_handle_t *)&k->err);
        close_handle(k, (uv_handle_t *)&k->rep);
        return ddp_errf(err, rc, "rank %d: cannot start %s: %s", w->rank, s->self_exe, uv_strerror(rc));
    }
    k->run->open_handles++;
    k->spawned = true;
    k->pid = k->proc.pid;
    k->pgid = k->proc.pid;
    ddp_progress_spawned(k->run->progress, (size_t)(k - k->run->w), k->pgid, k->hb_path);
    uv_pipe_open(&k->out, op[0]);
    uv_pipe_open(&k->err, ep[0]);
    uv_pipe_open(&k->rep, rp[0]);
    if (!s->paused) {
        uv_read_start((uv_stream_t *)&k->out, on_alloc, on_read);
        uv_read_start((uv_stream_t *)&k->err, on_alloc, on_read);
    }
    uv_read_start((uv_stream_t *)&k->rep, on_alloc, on_read);
    return 0;
}

static void on_watch(uv_timer_t *t);
static void on_wall(uv_timer_t *t);

static long long watch_period(const struct ddp_spec *sp)
{
    long long p = 1000;
    if (sp->timeout_stall_ms > 0 && sp->timeout_stall_ms / 4 < p)
        p = sp->timeout_stall_ms / 4;
    if (sp->timeout_init_ms > 0 && sp->timeout_init_ms / 4 < p)
        p = sp->timeout_init_ms / 4;
    return p < 20 ? 20 : p;
}

static void timeout_now(struct sup *s, enum ddp_class c, struct wrk *k, char *reason);
static void exclude_gpu(struct sup *s, int gpu);

/* A suspected hang lasted [timeout] on_suspect_after (progress.h): a hang of the culprits, as a stall would be. */
static void on_suspect_act(void *arg, const bool *culprit, const char *why)
{
    struct sup *s = arg;
    struct run *r = s->cur;
    struct wrk *first = NULL;
    size_t named = 0;
    if (!r || s->pol.state != DDP_PS_RUNNING)
        return;
    for (size_t i = 0; i < r->nw; i++)
        if (culprit[i]) {
            named++;
            first = first ? first : &r->w[i];
        }
    for (size_t i = 0; i < r->nw && named < r->nw; i++)
        if (culprit[i])
            exclude_gpu(s, r->w[i].w->gpu);
    timeout_now(s, DDP_CLASS_HANG, first, ddp_xstrdup(why));
}

/* Live stack sampling and hang suspicion for this attempt ([timeout] sample; progress.h). */
static void progress_start(struct sup *s, struct run *r)
{
    struct ddp_progress_hooks hooks = {s, on_suspect_act};
    if (!s->spec->timeout_sample)
        return;
    if (r->plan.dir)
        mkdir_p(r->plan.dir, 0700);
    r->watched = ddp_xcalloc(r->nw ? r->nw : 1, sizeof(*r->watched));
    for (size_t i = 0; i < r->nw; i++) {
        const struct ddp_worker *w = &r->plan.workers[i];
        r->watched[i] =
            (struct ddp_progress_rank){w->rank, w->local_rank, w->gpu, w->gpu_busid, w->stacks_file, w->fr_pipe};
    }
    if (!s->stragglers)
        s->stragglers = json_array();
    r->progress = ddp_progress_start(&s->loop, s->spec, s->ctx->hostname, r->plan.attempt, r->watched, r->nw, s->rec,
                                     s->stragglers, &hooks);
}

/* Build and start attempt `attempt` with nproc workers. 0 or negative errno with s->err. */
int ddp_sup_start_attempt(struct sup *s, int attempt, int nproc)
{
    struct run *r = ddp_xcalloc(1, sizeof(*r));
    int rc;
    r->sup = s;
    rc = ddp_plan_build(&s->actx, attempt, nproc, s->exclude, s->nexclude, &r->plan, s->err);
    if (rc < 0 && s->nexclude > 0) {
        ddp_warn("attempt %d: %s; trying again without leaving out the GPUs of the stalled ranks", attempt,
                 s->err->msg);
        rc = ddp_plan_build(&s->actx, attempt, nproc, NULL, 0, &r->plan, s->err);
    }
    if (rc == 0 && s->ctx->logdir)
        rc = ddp_logdir_attempt(s->ctx->logdir, attempt, nproc, s->err);
    if (rc < 0) {
        ddp_attempt_free(&r->plan);
        free(r);
        return rc;
    }
    r->nw = r->plan.nworkers;
    if (s->cgroup_base) {
        char name[64];
        snprintf(name, sizeof name, "ddplaunch-%d-attempt-%d", (int)getpid(), attempt);
        if (ddp_cgroup_create(s->cgroup_base, name, &r->cgroup) < 0)
            r->cgroup = NULL;
    }
    r->w = ddp_xcalloc(r->nw ? r->nw : 1, sizeof(*r->w));
    r->start_ms = ddp_now_ms();
    for (size_t i = 0; i < r->nw; i++) {
        r->w[i].run = r;
        r->w[i].w = &r->plan.workers[i];
        r->w[i].s_out.file_fd = r->w[i].s_err.file_fd = -1;
        r->w[i].s_out.time_fd = r->w[i].s_err.time_fd = r->w[i].time_fd = -1;
    }
    s->cur = r;
    s->any_output = false;
    s->last_output_ms = r->start_ms;
    free(s->timeout_reason);
    s->timeout_reason = NULL;
    if (s->timer)
        ddp_timer_server_clear_all(s->timer);
    if (attempt > 0 && r->plan.gpu_reason)
        ddp_info("attempt %d: %s", attempt, r->plan.gpu_reason);
    progress_start(s, r);
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        rc = spawn_one(s, k, s->err);
        if (rc < 0) {
            /* the workers started so far are stopped like after a failure; then we exit 1 */
            ddp_error("%s", s->err->msg);
            s->launcher_failed = true;
            for (size_t j = i; j < r->nw; j++) {
                struct wrk *q = &r->w[j];
                q->exited = q->out_eof = q->err_eof = q->rep_eof = q->finished = true;
                q->status = DDP_EXIT_LAUNCHER;
                r->nexited++;
                r->nfinished++;
            }
            struct ddp_pevent_data ev = {.kind = DDP_PE_WORKER_FAILED, .status = DDP_EXIT_LAUNCHER, .fatal = true};
            if (s->pol.state == DDP_PS_RUNNING)
                ddp_sup_feed(s, &ev);
            if (r->nfinished == r->nw && s->cur == r) {
                struct ddp_pevent_data all = {.kind = DDP_PE_ALL_FINISHED};
                if (s->multi)
                    ddp_nodes_all_finished(s);
                else
                    ddp_sup_feed(s, &all);
            }
            return 0;
        }
    }
    s->nattempts++;
    rec_attempt_start(s, r);
    if (s->ps) {
        json_t *gpus = json_array();
        for (size_t i = 0; i < r->nw; i++)
            if (r->w[i].w->gpu_busid)
                json_array_append_new(gpus, json_string(r->w[i].w->gpu_busid));
        json_t *ch =
            json_pack("{s:i, s:i, s:i, s:i, s:i, s:o}", "attempt", r->plan.attempt, "world_size", r->plan.world_size,
                      "nproc", (int)r->nw, "ranks_alive", (int)r->nw, "master_port", r->plan.master_port, "gpus", gpus);
        ddp_jobs_update(s->ps, ch);
        json_decref(ch);
    }
    if (s->spec->timeout_wall_ms > 0)
        uv_timer_start(&s->wall, on_wall, (uint64_t)s->spec->timeout_wall_ms, 0);
    if (s->spec->timeout_init_ms > 0 || (s->spec->timeout_stall_ms > 0 && s->spec->heartbeat != DDP_HEARTBEAT_NONE)) {
        long long p = watch_period(s->spec);
        uv_timer_start(&s->watch, on_watch, (uint64_t)p, (uint64_t)p);
    }
    return 0;
}

/* ---------------------------------------------------------------- hang detection */

static void timeout_now(struct sup *s, enum ddp_class c, struct wrk *k, char *reason)
{
    struct ddp_pevent_data ev = {.kind = DDP_PE_TIMEOUT};
    free(s->timeout_reason);
    s->timeout_reason = reason;
    s->timeout_class = c;
    ddp_sup_clear_others(s);
    rec_timeout(s, c, k, reason);
    if (k)
        record_ended(s, &s->root, k, reason);
    else
        ddp_sup_ended_clear(&s->root);
    ddp_error("attempt %d: %s; stopping the workers", s->cur->plan.attempt, reason);
    ddp_sup_feed(s, &ev);
}

static void exclude_gpu(struct sup *s, int gpu)
{
    if (gpu < 0)
        return;
    for (size_t i = 0; i < s->nexclude; i++)
        if (s->exclude[i] == gpu)
            return;
    s->exclude = ddp_xrealloc(s->exclude, (s->nexclude + 1) * sizeof(int));
    s->exclude[s->nexclude++] = gpu;
}

static void on_watch(uv_timer_t *t)
{
    struct sup *s = t->data;
    struct run *r = s->cur;
    const struct ddp_spec *sp = s->spec;
    long long now = ddp_now_ms();
    struct ddp_hang_limits lim = {sp->timeout_init_ms, sp->timeout_stall_ms, sp->heartbeat};
    struct ddp_hang_check hc;
    if (!r || s->pol.state != DDP_PS_RUNNING)
        return;
    struct ddp_hang_rank *hr = ddp_xcalloc(r->nw ? r->nw : 1, sizeof(*hr));
    bool *stalled = ddp_xcalloc(r->nw ? r->nw : 1, sizeof(*stalled));
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        struct stat st;
        if (!k->exited && k->spawned && k->hb_path && stat(k->hb_path, &st) == 0 &&
            (st.st_mtim.tv_sec != k->hb_mtime.tv_sec || st.st_mtim.tv_nsec != k->hb_mtime.tv_nsec)) {
            k->hb_mtime = st.st_mtim;
            k->last_progress_ms = now;
            k->alive = true;
        }
        hr[i] = (struct ddp_hang_rank){k->w->rank,  k->spawned && !k->exited, k->alive, k->hb_path != NULL,
                                       k->start_ms, k->last_progress_ms};
    }
    ddp_hang_check(&lim, hr, r->nw, now, s->any_output, s->last_output_ms, s->paused, stalled, &hc);
    if (hc.kind != DDP_HANG_NONE) {
        struct wrk *first = hc.kind == DDP_HANG_SILENT ? NULL : &r->w[hc.first];
        char *d = fmt_ms(hc.kind == DDP_HANG_INIT ? sp->timeout_init_ms : sp->timeout_stall_ms);
        char *why;
        if (hc.kind == DDP_HANG_INIT)
            why = ddp_xasprintf("rank %d%s showed no sign of life within %s (init)", first->w->rank,
                                hc.nstalled > 1 ? " and others" : "", d);
        else if (hc.kind == DDP_HANG_SILENT)
            why = ddp_xasprintf("no rank wrote any output for %s (output)", d);
        else if (hc.nstalled > 1)
            why = ddp_xasprintf("rank %d and %zu other%s made no progress for %s (heartbeat)", first->w->rank,
                                hc.nstalled - 1, hc.nstalled > 2 ? "s" : "", d);
        else
            why = ddp_xasprintf("rank %d made no progress for %s (heartbeat)", first->w->rank, d);
        free(d);
        for (size_t i = 0; i < r->nw && hc.blame_gpus; i++)
            if (stalled[i])
                exclude_gpu(s, r->w[i].w->gpu);
        timeout_now(s, hc.kind == DDP_HANG_INIT ? DDP_CLASS_INIT_TIMEOUT : DDP_CLASS_HANG, first, why);
    }
    free(hr);
    free(stalled);
}

/* torch's FileTimerServer semantics: the expired client gets its signal; for us it is also a hang of its rank. */
static void on_timer_expired(void *arg, int pid, int signo, const char *scope_id)
{
    struct sup *s = arg;
    struct run *r = s->cur;
    struct wrk *hit = NULL;
    pid_t g = getpgid(pid);
    if (!r)
        return;
    for (size_t i = 0; i < r->nw && !hit; i++) {
        struct wrk *k = &r->w[i];
        if (k->spawned && !k->exited && (k->pid == pid || (g > 0 && (k->pgid == g || k->pid == g))))
            hit = k;
    }
    if (!hit)
        return; /* not one of ours (any more) */
    if (s->pol.state == DDP_PS_RUNNING) {
        char *why = ddp_xasprintf("rank %d's timer '%s' expired (TORCHELASTIC_TIMER_FILE)", hit->w->rank,
                                  scope_id ? scope_id : "");
        exclude_gpu(s, hit->w->gpu);
        timeout_now(s, DDP_CLASS_HANG, hit, why);
    }
    if (signo > 0 && pid > 0)
        kill(pid, signo);
}

static void on_wall(uv_timer_t *t)
{
    struct sup *s = t->data;
    if (!s->cur || s->pol.state != DDP_PS_RUNNING)
        return;
    char *d = fmt_ms(s->spec->timeout_wall_ms);
    char *why = ddp_xasprintf("the attempt ran longer than %s (wall)", d);
    free(d);
    timeout_now(s, DDP_CLASS_WALL_TIMEOUT, NULL, why);
}

/* ---------------------------------------------------------------- timers and signals */

static void on_grace(uv_timer_t *t)
{
    struct sup *s = t->data;
    struct ddp_pevent_data ev = {.kind = DDP_PE_GRACE_EXPIRED};
    s->grace_armed = false;
    ddp_sup_feed(s, &ev);
}

/* After SIGKILL, a process outside the groups may still hold a pipe: give up on those pipes. */
static void on_force(uv_timer_t *t)
{
    struct sup *s = t->data;
    struct run *r = s->cur;
    if (!r)
        return;
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        if (!k->exited)
            continue;
        if (!k->out_eof) {
            ddp_stream_finish(&s->out, &k->s_out);
            k->out_eof = true;
            close_handle(k, (uv_handle_t *)&k->out);
        }
        if (!k->err_eof) {
            ddp_stream_finish(&s->out, &k->s_err);
            k->err_eof = true;
            close_handle(k, (uv_handle_t *)&k->err);
        }
        if (!k->rep_eof) {
            k->rep_eof = true;
            close_handle(k, (uv_handle_t *)&k->rep);
        }
        if (!k->finished) {
            ddp_warn("rank %d: a process outside its group still holds its output; no longer reading it", k->w->rank);
            check_finished(s, k);
        }
    }
    console_flush(s);
}

static void on_backoff(uv_timer_t *t)
{
    struct sup *s = t->data;
    struct ddp_pevent_data ev = {.kind = DDP_PE_BACKOFF_DONE};
    ddp_sup_feed(s, &ev);
}

static void on_signal(uv_signal_t *h, int signo)
{
    struct sup *s = h->data;
    struct ddp_pevent_data ev = {.kind = DDP_PE_SIGNAL, .signo = signo};
    if (s->multi) {
        ddp_nodes_signal(s, signo); /* to the policy while an attempt is under way or decided */
        return;
    }
    ddp_sup_feed(s, &ev);
}

void ddp_sup_retire(struct sup *s)
{
    struct run *r = s->cur;
    if (!r)
        return;
    s->cur = NULL;
    r->retired = true;
    ddp_progress_stop(r->progress);
    r->progress = NULL;
    if (r->open_handles == 0)
        run_free(r);
}

void ddp_sup_close(struct sup *s)
{
    if (s->handles_closed)
        return;
    s->handles_closed = true;
    if (s->coord) {
        if (s->leader)
            ddp_coord_send_exit(s->coord, s->exit_status);
        ddp_coord_close(s->coord, NULL, NULL);
        s->coord = NULL;
    }
    uv_close((uv_handle_t *)&s->join, NULL);
    uv_close((uv_handle_t *)&s->grace, NULL);
    uv_close((uv_handle_t *)&s->backoff, NULL);
    uv_close((uv_handle_t *)&s->watch, NULL);
    uv_close((uv_handle_t *)&s->wall, NULL);
    uv_close((uv_handle_t *)&s->force, NULL);
    uv_close((uv_handle_t *)&s->unblock, NULL);
    uv_close((uv_handle_t *)&s->capture, NULL);
    uv_close((uv_handle_t *)&s->joinlog, NULL);
    for (int i = 0; i < s->nsigs; i++)
        uv_close((uv_handle_t *)&s->sigs[i], NULL);
    ddp_timer_server_close(s->timer);
    s->timer = NULL;
}

void ddp_sup_feed(struct sup *s, const struct ddp_pevent_data *ev)
{
    enum ddp_pstate before = s->pol.state;
    struct ddp_paction a = ddp_policy_step(&s->pol, ev);
    if (s->leader && s->coord && ddp_agent_round_live(&s->agent) && before == DDP_PS_RUNNING &&
        s->pol.state == DDP_PS_STOPPING) {
        const char *why = s->stop_why                       ? s->stop_why
                          : s->pol.stop == DDP_STOP_SIGNAL  ? "node 0 got a signal"
                          : s->pol.stop == DDP_STOP_TIMEOUT ? "a timeout on node 0"
                                                            : "a worker on node 0 failed";
        ddp_coord_send_stop(s->coord, s->round.attempt, why);
    }
    if (ev->kind == DDP_PE_SIGNAL && a.flags) {
        int alive = 0;
        if (s->cur)
            for (size_t i = 0; i < s->cur->nw; i++)
                alive += s->cur->w[i].spawned && !s->cur->w[i].exited;
        if (a.flags & DDP_ACT_KILL_ALL)
            ddp_error("got %s again: killing %d worker%s now", ddp_report_signame(ev->signo), alive,
                      alive == 1 ? "" : "s");
        else if (ddp_policy_signal_stops(ev->signo))
            ddp_info("got %s: forwarding it to %d worker%s%s", ddp_report_signame(ev->signo), alive,
                     alive == 1 ? "" : "s", ev->signo == SIGINT ? " (again to kill them now)" : "");
        else
            ddp_info("got %s: forwarding it to %d worker%s", ddp_report_signame(ev->signo), alive,
                     alive == 1 ? "" : "s");
    }
    apply(s, &a);
}

static const char *prog_name(const struct sup *s)
{
    return s->spec->script      ? s->spec->script
           : s->spec->module    ? s->spec->module
           : s->spec->program   ? s->spec->program
           : s->spec->command.n ? s->spec->command.v[0]
                                : "job";
}

static struct ddp_report_entry entry_of(const struct sup *s, const struct ended *e)
{
    return (struct ddp_report_entry){.rank = e->rank,
                                     .local_rank = e->local_rank,
                                     .host = s->ctx->hostname,
                                     .pid = e->pid,
                                     .exit_code = e->status,
                                     .signo = e->signo,
                                     .when = e->when,
                                     .error_file = e->error_file,
                                     .error_file_kept = s->ctx->logdir != NULL,
                                     .class_name = e->class_name,
                                     .class_line = e->class_line,
                                     .hint = e->hint,
                                     .reason = e->reason,
                                     .tail = (const char *const *)e->tail.v,
                                     .ntail = e->tail.n,
                                     .running = !e->exited};
}

void ddp_sup_print_summary(struct sup *s, int status)
{
    struct ddp_report_entry root;
    struct ddp_report_entry *others;
    char *title;
    if (!s->root.set)
        return;
    title = ddp_xasprintf("%s%s FAILED (exit status %d)%s", ddp_colour(DDP_COLOUR_RED), prog_name(s), status,
                          ddp_colour(DDP_COLOUR_RESET));
    root = entry_of(s, &s->root);
    others = ddp_xcalloc(s->nothers + 1, sizeof(*others));
    for (size_t i = 0; i < s->nothers; i++)
        others[i] = entry_of(s, &s->others[i]);
    ddp_output_flush_wait(&s->out);
    fflush(stdout);
    ddp_report_print(stderr, title, &root, others, s->nothers);
    if (s->hang_text)
        fprintf(stderr, "%s%s%s", ddp_colour(DDP_COLOUR_YELLOW), s->hang_text, ddp_colour(DDP_COLOUR_RESET));
    free(others);
    free(title);
}

/* job_end in events.jsonl and summary.json: what the console summary says, machine-readable. */
void ddp_sup_write_records(struct sup *s, int status)
{
    const char *result;
    json_t *others, *sum;
    char now[32];
    if (!s->rec || s->records_written)
        return;
    s->records_written = true;
    result = status == 0                                            ? "succeeded"
             : s->launcher_failed                                   ? "launcher-failed"
             : s->pol.stop == DDP_STOP_SIGNAL                       ? "stopped-by-signal"
             : s->pol.stop == DDP_STOP_TIMEOUT || s->timeout_reason ? "timeout"
                                                                    : "failed";
    ddp_record_event(s->rec, "job_end",
                     json_pack("{s:i, s:s, s:i, s:I}", "exit_status", status, "result", result, "attempts",
                               s->nattempts, "duration_ms", (json_int_t)(ddp_now_ms() - s->job_start_ms)));
    others = json_array();
    for (size_t i = 0; i < s->nothers && status != 0; i++) {
        struct ddp_report_entry e = entry_of(s, &s->others[i]);
        json_array_append_new(others, ddp_report_entry_json(&e));
    }
    struct ddp_report_entry root = entry_of(s, &s->root);
    sum = json_pack("{s:s, s:s?, s:s?, s:s?, s:i, s:s, s:i, s:s, s:s, s:I, s:o, s:o, s:o, s:s?}", "program",
                    prog_name(s), "job", s->spec->name, "host", s->ctx->hostname, "run_id", s->ctx->run_id,
                    "exit_status", status, "result", result, "attempts", s->nattempts, "started", s->job_start_iso,
                    "ended", ddp_time_iso(NULL, now), "duration_ms", (json_int_t)(ddp_now_ms() - s->job_start_ms),
                    "timeout", s->timeout_reason ? json_string(s->timeout_reason) : json_null(), "root_cause",
                    s->root.set && status != 0 ? ddp_report_entry_json(&root) : json_null(), "failures", others,
                    "log_dir", ddp_record_dir(s->rec));
    json_object_set(sum, "hang", s->hang ? s->hang : json_null());
    json_object_set_new(sum, "stragglers", s->stragglers ? json_deep_copy(s->stragglers) : json_array());
    ddp_record_summary(s->rec, sum);
}

/* ---------------------------------------------------------------- hang forensics
 * Before a timed-out attempt is stopped, every running Python rank gets SIGABRT: Python's fault handler
 * (PYTHONFAULTHANDLER, set by plan.c) prints every thread's stack to its stderr and the process ends. Once they
 * are gone (or CAPTURE_MS passed), hang.c decides which ranks caused the hang from those stacks (and from the
 * tracebacks of ranks that ended before), the verdict goes to the console, events.jsonl and summary.json, the
 * stacks to attempt_N/stacks.txt, the culprit becomes the summary's root cause, and the rest are stopped as
 * usual (SIGTERM, grace, SIGKILL). */

#define CAPTURE_MS 3000
#define SETTLE_MS 300

static bool can_capture(const struct wrk *k)
{
    const char *fh = worker_env(k->w, "PYTHONFAULTHANDLER");
    return k->spawned && !k->exited && k->w->python && fh && *fh && k->pid > 0 && k->pid != k->pgid;
}

static void on_capture(uv_timer_t *t);
static void capture_maybe_end(struct sup *s);

/* Start the capture; false when there is nothing to capture (the caller stops the workers at once). */
/* Send SIGABRT to the ranks in the capture that have not reported a timeout themselves, then wait for them. */
static void capture_fire(struct sup *s)
{
    struct run *r = s->cur;
    long long window = s->spec->shutdown_timeout_ms / 2;
    if (window > CAPTURE_MS || window <= 0)
        window = CAPTURE_MS;
    for (size_t i = 0; r && i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        /* A rank that reported waiting in a collective is already ending (torch raises, or its NCCL watchdog
         * aborts) and its timeout line says where it is: waited for, not interrupted, so its traceback stays
         * whole. A rank that only got torch's flight-recorder dump signal may be the hung one: it gets SIGABRT. */
        if (k->abort_sent && !k->exited && !k->tmo.waiting)
            kill(k->pid, SIGABRT);
    }
    s->capture_armed = true;
    uv_timer_start(&s->capture, on_capture, (uint64_t)window, 0);
    capture_maybe_end(s);
}

static void on_capture_settle(uv_timer_t *t)
{
    capture_fire(t->data);
}

/* Start the capture; false when there is nothing to capture (the caller stops the workers at once). */
static bool capture_begin(struct sup *s)
{
    struct run *r = s->cur;
    int n = 0;
    if (!r || !s->spec->timeout_stacks || s->capturing)
        return false;
    for (size_t i = 0; i < r->nw; i++) {
        struct wrk *k = &r->w[i];
        if (!can_capture(k))
            continue;
        k->abort_sent = true;
        n++;
    }
    if (n == 0)
        return false;
    s->capturing = true;
    s->capture_armed = false;
    s->capture_start_ms = ddp_now_ms();
    ddp_info("attempt %d: capturing the stacks of %d rank%s (SIGABRT, Python faulthandler)", r->plan.attempt, n,
             n == 1 ? "" : "s");
    /* After a collective timeout report the other waiting ranks report theirs within milliseconds (their
     * timeouts were armed together): give them SETTLE_MS to, so that none is interrupted while it prints its
     * own error (its traceback says where it waited), then SIGABRT the rest. */
    if (ddp_class_is_timeout(s->timeout_class) && s->timeout_class != DDP_CLASS_HANG &&
        s->timeout_class != DDP_CLASS_INIT_TIMEOUT && s->timeout_class != DDP_CLASS_WALL_TIMEOUT)
        uv_timer_start(&s->capture, on_capture_settle, SETTLE_MS, 0);
    else
        capture_fire(s);
    return true;
}

static void push_line_nl(void *arg, const char *line)
{
    struct ddp_buf *b = arg;
    ddp_buf_puts(b, line);
    ddp_buf_add(b, "\n", 1);
}

/* The flight recorder dumps torch left in a rank's log directory, as a JSON array of paths. */
static json_t *flight_recorder_files(const struct wrk *k)
{
    json_t *a = json_array();
    if (!k->w->log_dir)
        return a;
    DIR *d = opendir(k->w->log_dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "flight_recorder_rank_", 21) == 0) {
            char *path = ddp_xasprintf("%s/%s", k->w->log_dir, e->d_name);
            json_array_append_new(a, json_string(path));
            free(path);
        }
    if (d)
        closedir(d);
    return a;
}

/* What a hung attempt's capture holds while the verdict is made, one entry per worker. */
struct capture {
    size_t n;
    struct ddp_hang_view *views;
    struct ddp_hang_input *in;
    struct ddp_buf *texts; /* each rank's stack text, for stacks.txt */
    bool *culprit;
    struct ddp_hang_verdict v;
    json_t *ranks, *fr; /* summary.json's hang.ranks and hang.flight_recorder */
};

/* Each rank's stack (the fault handler's dump, or the traceback of a rank that reported its timeout). */
static void capture_gather(struct run *r, struct capture *c)
{
    for (size_t i = 0; i < c->n; i++) {
        struct wrk *k = &r->w[i];
        struct ddp_hang_view tv = {0};
        struct ddp_buf tail = {0};
        ddp_stream_tail(&k->s_err, push_line_nl, &tail);
        if (tail.len)
            ddp_hang_parse_stack(tail.data, tail.len, &tv);
        if (k->dump.len) {
            ddp_hang_parse_stack(k->dump.data, k->dump.len, &c->views[i]);
            ddp_buf_add(&c->texts[i], k->dump.data, k->dump.len);
        }
        /* a rank that already reported its timeout may be unwinding: its traceback says where it waited */
        if (tv.nframes && (!c->views[i].nframes || (!c->views[i].op[0] && tv.op[0]))) {
            c->views[i] = tv;
            if (!k->dump.len && tail.len)
                ddp_buf_add(&c->texts[i], tail.data, tail.len);
        }
        ddp_buf_free(&tail);
        c->in[i] = (struct ddp_hang_input){k->w->rank,          c->views[i].nframes ? &c->views[i] : NULL,
                                           k->reported_timeout, k->spawned && !k->exited,
                                           k->last_progress_ms, k->tmo.waiting ? &k->tmo : NULL};
        json_t *f = flight_recorder_files(k);
        json_array_extend(c->fr, f);
        json_decref(f);
    }
}

/* The stacks, for people: attempt_N/stacks.txt in the run directory (its path, caller frees; NULL without
 * log_dir), and each rank's place for summary.json. */
static char *capture_write_stacks(struct sup *s, struct run *r, struct capture *c)
{
    char *stacks = NULL;
    struct ddp_buf all = {0};
    for (size_t i = 0; i < c->n; i++) {
        struct wrk *k = &r->w[i];
        const char *op = ddp_hang_input_op(&c->in[i]);
        struct ddp_buf d = {0};
        if (op[0] || k->tmo.waiting)
            ddp_buf_printf(&d, "in %s", op[0] ? op : "a collective");
        if (k->tmo.waiting && k->tmo.seq >= 0)
            ddp_buf_printf(&d, " #%lld", k->tmo.seq);
        if (k->tmo.waiting)
            ddp_buf_puts(&d, " (it reported a timeout)");
        if (c->views[i].nframes)
            ddp_buf_printf(&d, "%sat %s", d.len ? ", " : "", c->views[i].frame);
        else
            ddp_buf_printf(&d, "%sno Python stack", d.len ? ", " : "");
        ddp_buf_printf(&all, "== rank %d (local %d, pid %d, host %s, gpu %s)%s: %.*s\n", k->w->rank, k->w->local_rank,
                       k->pid, s->ctx->hostname, k->w->gpu_busid ? k->w->gpu_busid : "-",
                       c->culprit[i] ? " CULPRIT" : "", (int)d.len, d.data ? d.data : "");
        ddp_buf_free(&d);
        if (c->texts[i].len)
            ddp_buf_add(&all, c->texts[i].data, c->texts[i].len);
        ddp_buf_add(&all, "\n", 1);
        json_t *jr = json_pack("{s:i, s:s?, s:s?, s:b, s:b}", "rank", k->w->rank, "collective", op[0] ? op : NULL,
                               "frame", c->views[i].nframes ? c->views[i].frame : NULL, "stack",
                               c->views[i].nframes > 0, "reported_timeout", k->reported_timeout);
        json_object_set_new(jr, "seq", k->tmo.waiting && k->tmo.seq >= 0 ? json_integer(k->tmo.seq) : json_null());
        json_array_append_new(c->ranks, jr);
    }
    if (s->ctx->logdir) {
        struct ddp_err e = {0};
        char *rel = ddp_xasprintf("attempt_%d/stacks.txt", r->plan.attempt);
        int fd = ddp_logdir_create_file(s->ctx->logdir, rel, &e);
        if (fd >= 0) {
            if (write(fd, all.data ? all.data : "", all.len) == (ssize_t)all.len)
                stacks = ddp_xasprintf("%s/%s", ddp_logdir_path(s->ctx->logdir), rel);
            close(fd);
        } else {
            ddp_warn("%s", e.msg);
        }
        free(rel);
    }
    ddp_buf_free(&all);
    return stacks;
}

/* The verdict, for the console, events.jsonl and summary.json (s->hang, s->hang_text). Returns the first
 * culprit, NULL when none is named. */
static struct wrk *capture_report(struct sup *s, struct run *r, struct capture *c, const char *stacks,
                                  long long capture_ms)
{
    const struct ddp_hang_verdict *v = &c->v;
    json_t *culprits = json_array();
    struct ddp_buf txt = {0};
    struct wrk *first = NULL;
    ddp_buf_printf(&txt, "Hang verdict (%s confidence): ", ddp_hang_confidence_name(v->confidence));
    for (size_t i = 0; i < c->n; i++) {
        struct wrk *k = &r->w[i];
        if (!c->culprit[i])
            continue;
        if (!first)
            first = k;
        const char *op = ddp_hang_input_op(&c->in[i]);
        const char *frame = c->views[i].nframes ? c->views[i].frame : NULL;
        ddp_buf_printf(&txt, "%srank %d (local %d, host %s, GPU %s)%s%s%s%s", first == k ? "" : "; ", k->w->rank,
                       k->w->local_rank, s->ctx->hostname, k->w->gpu_busid ? k->w->gpu_busid : "none",
                       frame ? " at " : "", frame ? frame : "", op[0] ? " in " : "", op);
        json_array_append_new(culprits, json_pack("{s:i, s:i, s:s, s:i, s:s?, s:i, s:s?, s:s?}", "rank", k->w->rank,
                                                  "local_rank", k->w->local_rank, "host", s->ctx->hostname, "gpu",
                                                  k->w->gpu, "gpu_busid", k->w->gpu_busid, "pid", k->pid, "collective",
                                                  op[0] ? op : NULL, "frame", frame));
    }
    if (!first)
        ddp_buf_puts(&txt, v->mismatch ? "collective mismatch, no culprit named" : "no culprit named");
    ddp_buf_printf(&txt, "\n  why: %s\n  stacks: %s\n", v->why,
                   stacks ? stacks : "printed on each rank's stderr above (no log_dir)");
    ddp_info("attempt %d: %.*s", r->plan.attempt, (int)txt.len - 1, txt.data);
    json_decref(s->hang);
    s->hang = json_pack("{s:i, s:s, s:o, s:s?, s:s, s:s?, s:o, s:o, s:I}", "attempt", r->plan.attempt, "confidence",
                        ddp_hang_confidence_name(v->confidence), "culprits", culprits, "collective",
                        v->op[0] ? v->op : NULL, "why", v->why, "stacks", stacks, "ranks", c->ranks, "flight_recorder",
                        c->fr, "capture_ms", (json_int_t)capture_ms);
    c->ranks = c->fr = NULL; /* s->hang owns them now */
    json_object_set_new(s->hang, "mismatch", json_boolean(v->mismatch));
    ddp_record_event(s->rec, "hang", json_deep_copy(s->hang));
    free(s->hang_text);
    s->hang_text = txt.data;
    return first;
}

/* The culprit is the root cause; the rank that reported the timeout becomes another failure. */
static void capture_blame(struct sup *s, struct wrk *first, const struct ddp_hang_verdict *v)
{
    char *why = ddp_xasprintf("hang culprit (%s confidence): %s", ddp_hang_confidence_name(v->confidence), v->why);
    if (s->root.set && s->root.rank != first->w->rank) {
        s->others = ddp_xrealloc(s->others, (s->nothers + 1) * sizeof(*s->others));
        s->others[s->nothers++] = s->root;
        memset(&s->root, 0, sizeof(s->root));
    }
    record_ended(s, &s->root, first, why);
    free(s->root.class_name);
    free(s->root.hint);
    s->root.class_name = ddp_xstrdup(ddp_class_name(DDP_CLASS_HANG));
    s->root.hint = ddp_xstrdup("this rank was not where the others waited: its frame above (and its full stack in "
                               "stacks) shows where it was stuck or slow");
    free(why);
}

static void capture_end(struct sup *s)
{
    struct run *r = s->cur;
    long long now = ddp_now_ms();
    if (!s->capturing)
        return;
    s->capturing = false;
    uv_timer_stop(&s->capture);
    if (!r)
        return;
    size_t n = r->nw ? r->nw : 1;
    struct capture c = {.n = r->nw,
                        .views = ddp_xcalloc(n, sizeof(*c.views)),
                        .in = ddp_xcalloc(n, sizeof(*c.in)),
                        .texts = ddp_xcalloc(n, sizeof(*c.texts)),
                        .culprit = ddp_xcalloc(n, sizeof(*c.culprit)),
                        .ranks = json_array(),
                        .fr = json_array()};
    capture_gather(r, &c);
    ddp_hang_decide(c.in, c.n, c.culprit, &c.v);
    char *stacks = capture_write_stacks(s, r, &c);
    struct wrk *first = capture_report(s, r, &c, stacks, now - s->capture_start_ms);
    if (first)
        capture_blame(s, first, &c.v);
    free(stacks);
    for (size_t i = 0; i < c.n; i++)
        ddp_buf_free(&c.texts[i]);
    free(c.texts);
    free(c.views);
    free(c.in);
    free(c.culprit);
    json_decref(c.ranks);
    json_decref(c.fr);
    if (s->pol.state == DDP_PS_STOPPING)
        signal_all(s, SIGTERM);
}

static void on_capture(uv_timer_t *t)
{
    capture_end(t->data);
}

/* The capture ends early once every rank in it has exited and its stderr was read to the end, or printed the
 * fault handler's last line, or (not interrupted) named its collective in its timeout line: measured on H200s,
 * torch 2.11's NCCL watchdog leaves such a rank running for seconds, and its place is known already. */
static void capture_maybe_end(struct sup *s)
{
    if (!s->capturing || !s->capture_armed || !s->cur)
        return;
    for (size_t i = 0; i < s->cur->nw; i++) {
        const struct wrk *k = &s->cur->w[i];
        if (k->abort_sent && !k->dump_done && !k->tmo.op[0] && (!k->exited || !k->err_eof))
            return;
    }
    capture_end(s);
}

static void apply(struct sup *s, const struct ddp_paction *a)
{
    int attempt = s->cur ? s->cur->plan.attempt : s->pol.attempt;
    if ((a->flags & (DDP_ACT_TERM_ALL | DDP_ACT_KILL_ALL)) && s->cur) { /* no suspicion while it is stopped */
        ddp_progress_stop(s->cur->progress);
        s->cur->progress = NULL;
    }
    if ((a->flags & DDP_ACT_TERM_ALL) && !(s->pol.stop == DDP_STOP_TIMEOUT && capture_begin(s)))
        signal_all(s, SIGTERM);
    if (a->flags & DDP_ACT_FORWARD)
        signal_all(s, a->signo);
    if (a->flags & DDP_ACT_KILL_ALL) {
        if (a->why[0] && !(s->pol.state == DDP_PS_STOPPING && s->pol.stop == DDP_STOP_SIGNAL))
            ddp_warn("attempt %d: %s", attempt, a->why);
        signal_all(s, SIGKILL);
        uv_timer_start(&s->force, on_force, 1000, 0);
    }
    if (a->flags & DDP_ACT_ARM_GRACE) {
        s->grace_armed = true;
        uv_timer_start(&s->grace, on_grace, (uint64_t)s->spec->shutdown_timeout_ms, 0);
    }
    if (a->flags & DDP_ACT_ARM_BACKOFF) {
        ddp_record_event(s->rec, "decision",
                         json_pack("{s:i, s:s, s:i, s:i, s:I, s:s, s:o}", "attempt", attempt, "action",
                                   a->downsized ? "downsize" : "restart", "next_attempt", a->attempt, "next_nproc",
                                   a->nproc, "delay_ms", (json_int_t)a->delay_ms, "why", a->why, "root_rank",
                                   s->root.set ? json_integer(s->root.rank) : json_null()));
        if (s->timeout_reason)
            ddp_warn("attempt %d: %s; %s", attempt, s->timeout_reason, a->why);
        else
            ddp_warn("attempt %d: %s", attempt, a->why);
        ddp_sup_retire(s);
        s->pending = *a;
        uv_timer_start(&s->backoff, on_backoff, (uint64_t)(a->delay_ms > 0 ? a->delay_ms : 0), 0);
    }
    if (a->flags & DDP_ACT_START) {
        ddp_info("attempt %d: starting %d worker%s", a->attempt, a->nproc, a->nproc == 1 ? "" : "s");
        /* node 0: nodes.c lays the attempt out over the nodes (the policy's attempt and size) */
        if ((s->leader ? ddp_nodes_start(s) : ddp_sup_start_attempt(s, a->attempt, a->nproc)) < 0) {
            ddp_error("attempt %d: %s", a->attempt, s->err->msg);
            s->launcher_failed = true;
            s->exit_status = DDP_EXIT_LAUNCHER;
            s->done = true;
            ddp_sup_close(s);
        }
    }
    if (a->flags & DDP_ACT_EXIT) {
        int status = s->launcher_failed ? 1 : a->exit_status;
        if (s->pol.stop == DDP_STOP_TIMEOUT && s->timeout_reason)
            ddp_error("attempt %d: %s; %s", attempt, s->timeout_reason, a->why[0] ? a->why : "exiting");
        else if (a->why[0] && status != 0)
            ddp_info("%s", a->why);
        if (s->pol.stop == DDP_STOP_SIGNAL)
            ddp_error("stopped by %s", ddp_report_signame(s->pol.stop_signo));
        else if (status != 0)
            ddp_sup_print_summary(s, status);
        else if (s->nattempts > 1) /* a success that needed restarts says so, in one line */
            ddp_info("%s%s succeeded%s after %d attempts (%d restart%s) in %.1f s", ddp_colour(DDP_COLOUR_GREEN),
                     prog_name(s), ddp_colour(DDP_COLOUR_RESET), s->nattempts, s->nattempts - 1,
                     s->nattempts == 2 ? "" : "s", (double)(ddp_now_ms() - s->job_start_ms) / 1000.0);
        ddp_record_event(s->rec, "decision",
                         json_pack("{s:i, s:s, s:i, s:s, s:o}", "attempt", attempt, "action", "exit", "exit_status",
                                   status, "why", a->why, "root_rank",
                                   s->root.set && status != 0 ? json_integer(s->root.rank) : json_null()));
        ddp_sup_write_records(s, status);
        ddp_sup_retire(s);
        if (s->leader)
            ddp_nodes_exit(s, status); /* EXIT goes to every node when the channel closes */
        s->exit_status = status;
        s->done = true;
        ddp_sup_close(s);
    }
}

/* ---------------------------------------------------------------- entry */

static int add_signal(struct sup *s, int signo)
{
    for (int i = 0; i < s->nsigs; i++)
        if (s->sigs[i].signum == signo)
            return 0;
    if (s->nsigs >= (int)(sizeof(s->sigs) / sizeof(s->sigs[0])))
        return 0;
    uv_signal_t *h = &s->sigs[s->nsigs];
    int rc = uv_signal_init(&s->loop, h);
    if (rc < 0)
        return rc; /* not initialised: never started nor closed */
    h->data = s;
    s->nsigs++;
    return uv_signal_start(h, on_signal, signo);
}

int ddp_supervise_run(const struct ddp_plan_ctx *ctx, const char *self_exe, struct ddp_err *err)
{
    struct sup *s = ddp_xcalloc(1, sizeof(*s));
    int rc, status;
    static const int base_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

    s->ctx = ctx;
    s->actx = *ctx;
    s->spec = ctx->spec;
    s->multi = ctx->nnodes > 1 && ctx->coord_secret;
    s->leader = s->multi && ctx->coord_node == 0;
    s->self_exe = self_exe;
    s->err = err;
    if (ddp_cgroup_base(&s->cgroup_base) < 0)
        s->cgroup_base = NULL; /* no cgroup v2 of ours: the shims' subreaping alone */
    signal(SIGPIPE, SIG_IGN);  /* a closed console must not kill the launcher (workers get SIG_DFL back) */
    /* what a worker's killed shim contained comes back to us, not to init */
    rc = ddp_shim_adopt_orphans();
    if (rc < 0)
        ddp_debug("not a child subreaper: %s", strerror(-rc));
    rc = uv_loop_init(&s->loop);
    if (rc < 0) { /* EMFILE at a low open-files limit: nothing was started, nothing to close */
        ddp_errf(err, rc, "cannot start the event loop: %s", uv_strerror(rc));
        free(s->cgroup_base);
        free(s);
        return DDP_EXIT_LAUNCHER;
    }
    ddp_output_init(&s->out, STDOUT_FILENO, STDERR_FILENO);
    uv_timer_t *timers[] = {&s->grace,   &s->backoff, &s->watch,   &s->wall,   &s->force,
                            &s->unblock, &s->join,    &s->capture, &s->joinlog};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_timer_init(&s->loop, timers[i]);
        timers[i]->data = s;
    }
    /* Signals first, so that one arriving while the workers start is not lost. */
    for (size_t i = 0; i < sizeof(base_sigs) / sizeof(base_sigs[0]); i++)
        if ((rc = add_signal(s, base_sigs[i])) < 0)
            ddp_warn("cannot handle signal %d: %s", base_sigs[i], uv_strerror(rc));
    for (size_t i = 0; i < s->spec->signals_to_handle.n; i++) {
        int n = ddp_report_signum(s->spec->signals_to_handle.v[i]);
        if (n <= 0 || n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS || n == SIGILL || n == SIGFPE ||
            n == SIGCHLD || n == SIGPIPE)
            ddp_warn("signals_to_handle: ignoring '%s' (not a signal that can be forwarded)",
                     s->spec->signals_to_handle.v[i]);
        else
            add_signal(s, n);
    }
    if (ctx->timer_file && s->spec->timer_file) {
        rc = ddp_timer_server_start(&s->loop, ctx->timer_file, on_timer_expired, s, &s->timer, err);
        if (rc < 0) {
            ddp_error("%s", err->msg);
            s->launcher_failed = true;
        }
    }
    s->job_start_ms = ddp_now_ms();
    ddp_time_iso(NULL, s->job_start_iso);
    if (ctx->logdir) {
        struct ddp_err rerr = {0};
        if (ddp_record_open(ddp_logdir_fd(ctx->logdir), ddp_logdir_path(ctx->logdir), &s->rec, &rerr) < 0)
            ddp_warn("no run record: %s", rerr.msg);
        rec_job_start(s);
    }
    {
        struct ddp_err perr = {0};
        json_t *st = json_pack("{s:i, s:s?, s:s?, s:s, s:I, s:i, s:i, s:i, s:i, s:s?, s:[]}", "v", 1, "job",
                               s->spec->name, "host", ctx->hostname, "start", s->job_start_iso, "start_unix",
                               (json_int_t)time(NULL), "master_port", ctx->master_port, "attempt", 0, "nproc",
                               ctx->nproc, "ranks_alive", 0, "log_dir", ddp_record_dir(s->rec), "gpus");
        if (ddp_jobs_publish(ddp_rundir_lock_dir(ctx->base_env), st, &s->ps, &perr) < 0)
            ddp_debug("not listed in ddplaunch ps: %s", perr.msg);
        json_decref(st);
    }
    ddp_policy_init(&s->pol, s->spec, ctx->nproc);
    rc = s->launcher_failed ? -1 : s->multi ? ddp_nodes_begin(s) : ddp_sup_start_attempt(s, 0, ctx->nproc);
    if (rc < 0) {
        if (!s->launcher_failed && !s->multi)
            ddp_error("%s", err->msg); /* multi_begin said it already */
        s->launcher_failed = true;
        s->exit_status = DDP_EXIT_LAUNCHER;
        s->done = true;
        ddp_sup_close(s);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* Anything still open (should be nothing): close and run once more so that memory is returned. */
    if (s->cur)
        ddp_sup_retire(s);
    status = s->launcher_failed ? 1 : s->exit_status;
    if (s->launcher_failed)
        err->msg[0] = '\0'; /* said on stderr where it happened: the caller must not say it again */
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    ddp_output_free(&s->out);
    ddp_record_close(s->rec);
    ddp_jobs_close(s->ps);
    ddp_sup_ended_clear(&s->root);
    ddp_sup_clear_others(s);
    free(s->exclude);
    free(s->cgroup_base);
    free(s->timeout_reason);
    ddp_nodes_free(s);
    json_decref(s->hang);
    json_decref(s->stragglers);
    free(s->hang_text);
    free(s);
    return status;
}
