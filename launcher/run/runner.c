/* runner: see runner.h. libuv reaps each shim; the shim reports on a close-on-exec pipe (shim.h). */
#include "run/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/exit.h"
#include "host/cgroup.h"
#include "host/logdir.h"
#include "run/pty.h"
#include "run/runner_internal.h"

struct ddp_runner {
    struct ddp_runner_config cfg;
    struct ddp_output out;
    struct ddp_runner_attempt *cur;
    uv_timer_t unblock;
    uv_signal_t winch;         /* SIGWINCH, when fd 1 or 2 is a terminal: workers' pseudo-terminals follow its size */
    bool paused;               /* the console is full: worker pipes are not read until it drains (back-pressure) */
    ddp_runner_adopt_fn adopt; /* warm restart: offers a running process for a worker (ddp_runner_set_adopt) */
    void *adopt_arg;
    char *ready_cgroup; /* made ahead by ddp_runner_prepare for attempt ready_attempt, or NULL */
    int ready_attempt;
    bool no_fork;          /* shims are executed: this kernel has no pidfd (ddp_shim_fork) */
    struct ddp_buf forked; /* pid_t of every forked shim not yet reaped (libuv knows only the ones it spawned) */
    char readbuf[64 * 1024];
};

#define OPS(rn) (&(rn)->cfg.ops)

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

/* ---------------------------------------------------------------- helpers */

static bool exited(const struct ddp_runner_worker *k)
{
    return k->state >= DDP_WS_EXITED;
}

bool ddp_runner_worker_running(const struct ddp_runner_worker *k)
{
    return k->state == DDP_WS_RUNNING || k->state == DDP_WS_ENDING;
}

const char *ddp_runner_worker_env(const struct ddp_runner_worker *k, const char *name)
{
    int i = ddp_strv_env_find(&k->w->envp, name);
    return i >= 0 ? k->w->envp.v[i] + strlen(name) + 1 : NULL;
}

void ddp_runner_worker_tail(const struct ddp_runner_worker *k, int which, void (*fn)(void *arg, const char *line),
                            void *arg)
{
    if (k->io) /* NULL: a stand-in no runner started (tests) */
        ddp_stream_tail(which ? &k->io->s_err : &k->io->s_out, fn, arg);
}

void ddp_runner_hold_dump(struct ddp_runner_worker *k, bool hold)
{
    if (k->io)
        ddp_stream_hold_dump(&k->run->runner->out, &k->io->s_err, hold);
}

/* ---------------------------------------------------------------- back-pressure */

static void read_streams(struct ddp_runner_worker *k)
{
    if (k->open & DDP_RS_OUT && !uv_is_closing((uv_handle_t *)&k->io->out))
        uv_read_start((uv_stream_t *)&k->io->out, on_alloc, on_read);
    if (k->open & DDP_RS_ERR && !uv_is_closing((uv_handle_t *)&k->io->err))
        uv_read_start((uv_stream_t *)&k->io->err, on_alloc, on_read);
}

/* Read or stop reading every output pipe of the current attempt that is still open. */
static void set_reading(struct ddp_runner *rn, bool on)
{
    struct ddp_runner_attempt *r = rn->cur;
    for (size_t i = 0; r && i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        if (k->pgid <= 0 || (!on && exited(k)))
            continue; /* an exited worker's pipes hold a bounded rest: read it, so that it can finish */
        if (on) {
            read_streams(k);
            continue;
        }
        if (k->open & DDP_RS_OUT && !uv_is_closing((uv_handle_t *)&k->io->out))
            uv_read_stop((uv_stream_t *)&k->io->out);
        if (k->open & DDP_RS_ERR && !uv_is_closing((uv_handle_t *)&k->io->err))
            uv_read_stop((uv_stream_t *)&k->io->err);
    }
}

static void on_unblock(uv_timer_t *t)
{
    struct ddp_runner *rn = t->data;
    if (ddp_output_flush(&rn->out) > 0)
        return;
    rn->paused = false;
    uv_timer_stop(&rn->unblock);
    if (OPS(rn)->resumed)
        OPS(rn)->resumed(rn->cfg.arg, ddp_now_ms());
    set_reading(rn, true);
}

/* Write what the console takes; when it is full, stop reading the workers until it drains. */
static void console_flush(struct ddp_runner *rn)
{
    if (ddp_output_flush(&rn->out) == 0 || rn->paused)
        return;
    rn->paused = true;
    set_reading(rn, false);
    uv_timer_start(&rn->unblock, on_unblock, 5, 5);
}

bool ddp_runner_paused(const struct ddp_runner *rn)
{
    return rn->paused;
}

struct ddp_output *ddp_runner_output(struct ddp_runner *rn)
{
    return &rn->out;
}

/* ---------------------------------------------------------------- signals */

int ddp_runner_signal_all(struct ddp_runner *rn, int sig)
{
    int n = 0;
    struct ddp_runner_attempt *r = rn->cur;
    for (size_t i = 0; r && i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        if (k->pgid <= 0 || k->state == DDP_WS_DONE)
            continue;
        if (sig == SIGKILL && !exited(k) ? ddp_shim_kill(k->pgid) == 0 : kill(-k->pgid, sig) == 0)
            n++;
        else if (errno == ESRCH && !exited(k) && kill(k->pgid, sig) == 0)
            n++; /* a forked shim before its setsid(): it passes the signal on once its program runs */
        /* a stopped process acts on TERM/INT only once continued (as a shell's kill does for stopped jobs) */
        if (sig == SIGTERM || sig == SIGINT)
            kill(-k->pgid, SIGCONT);
    }
    return n;
}

void ddp_runner_signal_program(struct ddp_runner_worker *k, int sig)
{
    if (ddp_runner_worker_running(k) && k->pid > 0)
        kill(k->pid, sig);
}

int ddp_runner_alive(const struct ddp_runner *rn)
{
    int alive = 0;
    for (size_t i = 0; rn->cur && i < rn->cur->nw; i++)
        alive += rn->cur->w[i].pgid > 0 && !exited(&rn->cur->w[i]);
    return alive;
}

struct ddp_runner_worker *ddp_runner_find_pid(struct ddp_runner *rn, int pid)
{
    struct ddp_runner_attempt *r = rn->cur;
    pid_t g = getpgid(pid);
    for (size_t i = 0; r && i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        if (k->pgid > 0 && !exited(k) && (k->pid == pid || (g > 0 && (k->pgid == g || k->pid == g))))
            return k;
    }
    return NULL;
}

/* ---------------------------------------------------------------- handle lifetime */

static void run_free(struct ddp_runner_attempt *r)
{
    for (size_t i = 0; i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        ddp_stream_free(&k->io->s_out);
        ddp_stream_free(&k->io->s_err);
        ddp_logfile_close(&k->io->timed);
        free(k->bind_msg);
        free(k->io);
    }
    ddp_logfile_close(&r->filtered[0]);
    ddp_logfile_close(&r->filtered[1]);
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
static void attempt_cgroup_end(struct ddp_runner_attempt *r)
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
    struct ddp_runner_worker *k = h->data;
    struct ddp_runner_attempt *r = k->run;
    if (h == (uv_handle_t *)&k->io->pidw)
        close(k->io->pidfd);
    if (--r->open_handles == 0 && r->retired)
        run_free(r);
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, on_close);
}

void ddp_runner_retire(struct ddp_runner *rn)
{
    struct ddp_runner_attempt *r = rn->cur;
    if (!r)
        return;
    rn->cur = NULL;
    r->retired = true;
    if (r->open_handles == 0)
        run_free(r);
}

struct ddp_runner_attempt *ddp_runner_current(const struct ddp_runner *rn)
{
    return rn->cur;
}

bool ddp_runner_is_current(const struct ddp_runner_worker *k)
{
    return k->run == k->run->runner->cur;
}

/* ---------------------------------------------------------------- ending of workers */

/* Move k by ev; tell the caller when it became DONE. */
static void step(struct ddp_runner_worker *k, enum ddp_lifecycle_event ev, unsigned stream);

/* k just became DONE (ddp_wstate_step said so). */
static void became_done(struct ddp_runner_worker *k)
{
    struct ddp_runner_attempt *r = k->run;
    struct ddp_runner *rn = r->runner;
    r->ndone++;
    if (r->ndone == r->nw)
        attempt_cgroup_end(r);
    if (OPS(rn)->done)
        OPS(rn)->done(rn->cfg.arg, k, r->ndone == r->nw);
}

static void step(struct ddp_runner_worker *k, enum ddp_lifecycle_event ev, unsigned stream)
{
    if (ddp_wstate_step(&k->state, &k->open, ev, stream))
        became_done(k);
}

static void changed(struct ddp_runner_worker *k)
{
    struct ddp_runner *rn = k->run->runner;
    if (OPS(rn)->changed)
        OPS(rn)->changed(rn->cfg.arg, k);
}

/* Read what is already waiting in a worker's stdout/stderr pipes, so that its last lines (a traceback, a
 * recognised error message) are forwarded, classified and in the summary's tail before its ending is judged. */
static void drain_output(struct ddp_runner_worker *k)
{
    struct ddp_runner *rn = k->run->runner;
    uv_pipe_t *pipes[2] = {&k->io->out, &k->io->err};
    struct ddp_stream *streams[2] = {&k->io->s_out, &k->io->s_err};
    unsigned bit[2] = {DDP_RS_OUT, DDP_RS_ERR};
    for (int i = 0; i < 2; i++) {
        uv_os_fd_t fd;
        if (!(k->open & bit[i]) || uv_is_closing((uv_handle_t *)pipes[i]) ||
            uv_fileno((uv_handle_t *)pipes[i], &fd) != 0)
            continue;
        for (int rounds = 0; rounds < 64; rounds++) { /* bounded: a flooding grandchild cannot keep us here */
            ssize_t n = read(fd, rn->readbuf, sizeof(rn->readbuf));
            if (n <= 0)
                break; /* EAGAIN, or EOF: the loop's own read will see it */
            ddp_stream_feed(&rn->out, streams[i], rn->readbuf, (size_t)n);
        }
    }
    console_flush(rn);
}

void ddp_runner_program_ended(struct ddp_runner_worker *k, int status, int signo)
{
    if (k->state != DDP_WS_RUNNING)
        return;
    step(k, DDP_WE_PROGRAM_ENDED, 0);
    k->status = status;
    k->signo = signo;
    k->end_ms = ddp_now_ms();
    k->end_wall = time(NULL);
    drain_output(k);
}

static void handle_record(struct ddp_runner_worker *k, const struct ddp_shim_record *rec)
{
    struct ddp_runner *rn = k->run->runner;
    switch (rec->kind) {
    case DDP_SHIM_STARTED:
        if (rec->pid > 0)
            k->pid = rec->pid;
        if (OPS(rn)->started)
            OPS(rn)->started(rn->cfg.arg, k);
        break;
    case DDP_SHIM_EXEC_FAILED:
        k->fail = DDP_WF_EXEC;
        k->exec_err = rec->err;
        ddp_error("rank %d: cannot execute '%s': %s", k->w->rank, k->w->argv.v ? k->w->argv.v[0] : "?",
                  strerror(rec->err));
        break;
    case DDP_SHIM_BIND_WARN:
        ddp_warn("%s", rec->msg);
        break;
    case DDP_SHIM_EXITED:
        /* the program failed while the shim still ends what it left behind (up to shutdown_timeout) */
        if (k->state == DDP_WS_RUNNING && rec->status != 0 && OPS(rn)->program_ended)
            OPS(rn)->program_ended(rn->cfg.arg, k, rec->status, rec->err);
        break;
    case DDP_SHIM_BIND_FAILED:
        k->fail = DDP_WF_BIND;
        free(k->bind_msg);
        k->bind_msg = ddp_xstrndup(rec->msg, sizeof(rec->msg));
        ddp_error("%s (numa strict = yes)", k->bind_msg);
        break;
    default:
        break;
    }
}

static void rep_bytes(struct ddp_runner_worker *k, const char *p, size_t n)
{
    while (n > 0) {
        size_t take = sizeof(k->io->rep_buf) - k->io->rep_len;
        if (take > n)
            take = n;
        memcpy(k->io->rep_buf + k->io->rep_len, p, take);
        k->io->rep_len += take;
        p += take;
        n -= take;
        if (k->io->rep_len == sizeof(k->io->rep_buf)) {
            struct ddp_shim_record rec;
            memcpy(&rec, k->io->rep_buf, sizeof(rec));
            rec.msg[sizeof(rec.msg) - 1] = '\0';
            handle_record(k, &rec);
            k->io->rep_len = 0;
        }
    }
}

/* Read what the shim wrote before it exited (the record may not have been read by the loop yet). */
static void drain_report(struct ddp_runner_worker *k)
{
    uv_os_fd_t fd;
    char buf[sizeof(struct ddp_shim_record) * 4];
    if (!(k->open & DDP_RS_REP) || uv_fileno((uv_handle_t *)&k->io->rep, &fd) != 0)
        return;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        rep_bytes(k, buf, (size_t)n);
    }
}

static void add_shim_pid(uv_handle_t *h, void *arg)
{
    struct ddp_buf *pids = arg;
    if (h->type == UV_PROCESS && ((uv_process_t *)h)->pid > 0)
        ddp_buf_add(pids, (const char *)&((uv_process_t *)h)->pid, sizeof(pid_t));
}

/* A shim ended: if its worker killed it, what it contained came back to us (ddp_shim_adopt_orphans); end it. */
static void sweep_orphans(struct ddp_runner *rn)
{
    struct ddp_buf pids = {0};
    uv_walk(rn->cfg.loop, add_shim_pid, &pids);
    if (rn->forked.len)
        ddp_buf_add(&pids, rn->forked.data, rn->forked.len);
    int n = ddp_shim_sweep_orphans((const pid_t *)(void *)pids.data, pids.len / sizeof(pid_t));
    if (n > 0)
        ddp_debug("ended %d process(es) a killed shim left behind", n);
    ddp_buf_free(&pids);
}

/* k's shim ended (exit_status, or term_signal); h: the handle that said so, closed here. */
static void shim_ended(struct ddp_runner_worker *k, int64_t exit_status, int term_signal, uv_handle_t *h)
{
    struct ddp_runner_attempt *r = k->run;
    struct ddp_runner *rn = r->runner;
    enum ddp_lifecycle_state from = k->state;
    bool done = ddp_wstate_step(&k->state, &k->open, DDP_WE_EXITED, 0);
    k->end_ms = ddp_now_ms();
    k->end_wall = time(NULL);
    k->signo = term_signal;
    k->status = term_signal ? ddp_exit_signal(term_signal) : (int)exit_status;
    r->nexited++;
    sweep_orphans(rn);
    drain_report(k);
    drain_output(k);
    if (rn->paused)
        read_streams(k); /* its bounded rest, so that it can finish */
    close_handle(h);
    /* Processes the worker left in its group: ask them to go. */
    if (k->pgid > 0 && kill(-k->pgid, 0) == 0)
        kill(-k->pgid, SIGTERM);
    if (OPS(rn)->exited)
        OPS(rn)->exited(rn->cfg.arg, k, from);
    if (done)
        became_done(k); /* after the caller heard of the exit */
    changed(k);
}

static void on_exit_cb(uv_process_t *p, int64_t exit_status, int term_signal)
{
    shim_ended(p->data, exit_status, term_signal, (uv_handle_t *)p);
}

/* A forked shim's pidfd is readable: it ended (reaped here, as libuv reaps the ones it spawned). */
static void on_pidfd(uv_poll_t *h, int status, int events)
{
    struct ddp_runner_worker *k = h->data;
    struct ddp_runner *rn = k->run->runner;
    pid_t pid = (pid_t)k->pgid;
    int ws = 0;
    (void)status, (void)events;
    pid_t got = waitpid(pid, &ws, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR))
        return;
    uv_poll_stop(h);
    pid_t *v = (pid_t *)(void *)rn->forked.data;
    size_t n = rn->forked.len / sizeof(pid_t);
    for (size_t i = 0; i < n; i++)
        if (v[i] == pid) {
            v[i] = v[n - 1];
            rn->forked.len -= sizeof(pid_t);
            break;
        }
    if (got < 0) /* ECHILD: reaped by someone else, which nothing here does */
        ws = DDP_EXIT_LAUNCHER << 8;
    shim_ended(k, WIFEXITED(ws) ? WEXITSTATUS(ws) : 0, WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, (uv_handle_t *)h);
}

/* Stream bit of k is over: its rest forwarded, its handle closed (the lifecycle moves with DDP_WE_EOF). */
static void stream_eof(struct ddp_runner_worker *k, unsigned bit)
{
    struct ddp_runner *rn = k->run->runner;
    uv_handle_t *h = bit == DDP_RS_OUT   ? (uv_handle_t *)&k->io->out
                     : bit == DDP_RS_ERR ? (uv_handle_t *)&k->io->err
                                         : (uv_handle_t *)&k->io->rep;
    if (bit != DDP_RS_REP)
        ddp_stream_finish(&rn->out, bit == DDP_RS_OUT ? &k->io->s_out : &k->io->s_err);
    close_handle(h);
}

void ddp_runner_give_up(struct ddp_runner *rn)
{
    struct ddp_runner_attempt *r = rn->cur;
    for (size_t i = 0; r && i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        if (!exited(k))
            continue;
        for (unsigned bit = DDP_RS_OUT; bit <= DDP_RS_REP; bit <<= 1)
            if (k->open & bit)
                stream_eof(k, bit);
        if (k->state != DDP_WS_DONE) {
            ddp_warn("rank %d: a process outside its group still holds its output; no longer reading it", k->w->rank);
            step(k, DDP_WE_GIVE_UP, 0);
        }
    }
    console_flush(rn);
}

/* ---------------------------------------------------------------- output */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct ddp_runner_worker *k = h->data;
    struct ddp_runner *rn = k->run->runner;
    (void)suggested;
    buf->base = rn->readbuf;
    buf->len = sizeof(rn->readbuf);
}

static void on_line(void *arg, int which, const char *line, size_t len)
{
    struct ddp_runner_worker *k = arg;
    struct ddp_runner *rn = k->run->runner;
    if (OPS(rn)->line)
        OPS(rn)->line(rn->cfg.arg, k, which, line, len);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct ddp_runner_worker *k = st->data;
    struct ddp_runner *rn = k->run->runner;
    if (st == (uv_stream_t *)&k->io->rep) {
        if (n > 0) {
            rep_bytes(k, buf->base, (size_t)n);
            return;
        }
        if (n < 0) {
            stream_eof(k, DDP_RS_REP);
            step(k, DDP_WE_EOF, DDP_RS_REP);
        }
        return;
    }
    bool is_out = st == (uv_stream_t *)&k->io->out;
    if (n > 0) {
        ddp_stream_feed(&rn->out, is_out ? &k->io->s_out : &k->io->s_err, buf->base, (size_t)n);
        if (OPS(rn)->output)
            OPS(rn)->output(rn->cfg.arg, k, ddp_now_ms());
        console_flush(rn);
        return;
    }
    if (n < 0) {
        stream_eof(k, is_out ? DDP_RS_OUT : DDP_RS_ERR);
        console_flush(rn);
        step(k, DDP_WE_EOF, is_out ? DDP_RS_OUT : DDP_RS_ERR);
        changed(k);
    }
}

/* ---------------------------------------------------------------- starting */

/* The worker's output streams (runner_streams.c), their lines handed to on_line. */
static int open_streams(struct ddp_runner *rn, struct ddp_runner_worker *k, struct ddp_err *err)
{
    int rc = ddp_runner_open_streams(&rn->cfg, k, err);
    if (rc < 0)
        return rc;
    k->io->s_out.on_line = on_line;
    k->io->s_out.arg = k;
    k->io->s_err.on_line = on_line;
    k->io->s_err.arg = k;
    return 0;
}

static const char *mem_mode_name(enum ddp_membind m)
{
    return m == DDP_MEM_LOCAL ? "local" : m == DDP_MEM_INTERLEAVE ? "interleave" : "none";
}

/* The exec shim's command line: what it needs to know (see shim.h), then "--" and prog (the worker's argv, or
 * a standby's). */
void ddp_runner_shim_argv(const struct ddp_runner *rn, const struct ddp_worker *w, const char *cgroup,
                          const struct ddp_strv *prog, struct ddp_strv *args)
{
    ddp_strv_push(args, rn->cfg.self_exe);
    ddp_strv_push(args, "--exec-shim");
    ddp_strv_pushf(args, "--rank=%d", w->rank);
    ddp_strv_pushf(args, "--ppid=%d", (int)getpid());
    ddp_strv_pushf(args, "--report-fd=3");
    ddp_strv_pushf(args, "--grace-ms=%lld", rn->cfg.grace_ms);
    if (cgroup)
        ddp_strv_pushf(args, "--cgroup=%s", cgroup);
    if (w->cpus && *w->cpus)
        ddp_strv_pushf(args, "--cpus=%s", w->cpus);
    if (w->mems && *w->mems) {
        ddp_strv_pushf(args, "--mems=%s", w->mems);
        ddp_strv_pushf(args, "--mem-mode=%s", mem_mode_name(w->mem_mode));
    }
    if (w->bind_strict)
        ddp_strv_push(args, "--strict");
    /* the program the job started with, should it have been deleted or replaced since */
    int path = ddp_strv_env_find(&w->envp, "PATH");
    const char *via = prog->n ? ddp_shim_reach(prog->v[0], path >= 0 ? w->envp.v[path] + 5 : NULL) : NULL;
    if (via)
        ddp_strv_pushf(args, "--exec-path=%s", via);
    ddp_strv_push(args, "--");
    for (size_t i = 0; i < prog->n; i++)
        ddp_strv_push(args, prog->v[i]);
}

/* Start k's shim forked (ddp_shim_fork) with the worker's descriptors out, err and rep as its 1, 2 and 3: its pid,
 * watched through its pidfd; -EBUSY or -ENOSYS when it must be executed instead; another negative errno when it
 * could not be started at all. */
static int fork_shim(struct ddp_runner *rn, struct ddp_runner_worker *k, struct ddp_strv *args, int out, int err,
                     int rep)
{
    int fds[4] = {STDIN_FILENO, out, err, rep}, pidfd;
    if (rn->no_fork)
        return -ENOSYS;
    int pid = ddp_shim_fork(args->v, k->w->envp.v, k->w->cwd, fds, &pidfd);
    if (pid == -ENOSYS) {
        ddp_debug("worker shims are executed: no pidfd_open here (Linux 5.3)");
        rn->no_fork = true;
    }
    if (pid < 0)
        return pid;
    k->io->pidfd = pidfd;
    int rc = uv_poll_init(rn->cfg.loop, &k->io->pidw, pidfd);
    if (rc == 0) {
        k->io->pidw.data = k;
        k->run->open_handles++;
        rc = uv_poll_start(&k->io->pidw, UV_READABLE, on_pidfd);
        if (rc != 0)
            close_handle((uv_handle_t *)&k->io->pidw); /* on_close closes pidfd */
    } else {
        close(pidfd);
    }
    if (rc != 0) { /* not watched, never reaped: it ends now */
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return rc;
    }
    k->io->forked = true;
    pid_t p = (pid_t)pid;
    ddp_buf_add(&rn->forked, (const char *)&p, sizeof p);
    return pid;
}

static int spawn_one(struct ddp_runner *rn, struct ddp_runner_worker *k, struct ddp_err *err)
{
    const struct ddp_worker *w = k->w;
    uv_loop_t *loop = rn->cfg.loop;
    struct ddp_strv args = {0};
    uv_process_options_t o;
    uv_stdio_container_t io[4];
    int rp[2], op[2], ep[2];
    int rc;

    rc = open_streams(rn, k, err);
    if (rc < 0)
        return rc;
    rc = ddp_runner_open_pipes(w, rp, op, ep, err);
    if (rc < 0)
        return rc;
    ddp_runner_shim_argv(rn, w, k->run->cgroup, &w->argv, &args);

    uv_pipe_init(loop, &k->io->out, 0);
    uv_pipe_init(loop, &k->io->err, 0);
    uv_pipe_init(loop, &k->io->rep, 0);
    k->io->out.data = k->io->err.data = k->io->rep.data = k->io->proc.data = k;
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
    o.file = ddp_runner_shim_file(rn);
    o.args = args.v;
    o.env = w->envp.v;
    o.cwd = w->cwd;
    o.flags = UV_PROCESS_DETACHED;
    o.stdio_count = 4;
    o.stdio = io;
    k->start_ms = ddp_now_ms();
    int pid = fork_shim(rn, k, &args, op[1], ep[1], rp[1]);
    if (pid == -EBUSY || pid == -ENOSYS) { /* it cannot be forked here: executed */
        rc = uv_spawn(loop, &k->io->proc, &o);
        pid = k->io->proc.pid;
    } else {
        rc = pid < 0 ? pid : 0;
    }
    close(rp[1]);
    close(op[1]);
    close(ep[1]);
    ddp_strv_clear(&args);
    if (rc != 0) {
        close(rp[0]);
        close(op[0]);
        close(ep[0]);
        close_handle((uv_handle_t *)&k->io->out);
        close_handle((uv_handle_t *)&k->io->err);
        close_handle((uv_handle_t *)&k->io->rep);
        return ddp_errf(err, rc, "rank %d: cannot start %s: %s", w->rank, rn->cfg.self_exe, uv_strerror(rc));
    }
    if (!k->io->forked)
        k->run->open_handles++; /* the process handle (fork_shim counted its watcher) */
    step(k, DDP_WE_SPAWNED, 0);
    k->pid = pid;
    k->pgid = pid;
    uv_pipe_open(&k->io->out, op[0]);
    uv_pipe_open(&k->io->err, ep[0]);
    uv_pipe_open(&k->io->rep, rp[0]);
    if (!rn->paused)
        read_streams(k);
    uv_read_start((uv_stream_t *)&k->io->rep, on_alloc, on_read);
    return 0;
}

/* Start k in a process the adopt hook offers (a standby interpreter) instead of a fresh one: its shim, pipes and
 * program become k's. 0, or -1 when none fits (k is then started fresh; nothing of k changed). */
static int adopt(struct ddp_runner *rn, struct ddp_runner_worker *k, struct ddp_err *err)
{
    struct ddp_runner_adopted t;
    char why[128];
    if (!rn->adopt)
        return -1;
    if (rn->adopt(rn->adopt_arg, k->w, k->run->cgroup, &t, why, sizeof why) < 0) {
        if (k->run->plan.attempt > 0)
            ddp_debug("rank %d: starts fresh: %s", k->w->rank, why);
        return -1;
    }
    free(k->io);
    k->io = t.io;
    k->io->proc.data = k;
    k->io->proc.exit_cb = on_exit_cb;
    k->run->open_handles++; /* the process */
    uv_pipe_init(rn->cfg.loop, &k->io->out, 0);
    uv_pipe_init(rn->cfg.loop, &k->io->err, 0);
    uv_pipe_init(rn->cfg.loop, &k->io->rep, 0);
    k->io->out.data = k->io->err.data = k->io->rep.data = k;
    k->run->open_handles += 3;
    uv_pipe_open(&k->io->out, t.out_fd);
    uv_pipe_open(&k->io->err, t.err_fd);
    uv_pipe_open(&k->io->rep, t.rep_fd);
    for (int j = 0; j < 2; j++) /* a pseudo-terminal made earlier: the console's size now */
        if (k->w->tty[j])
            (void)ddp_pty_resize(j ? t.err_fd : t.out_fd, j ? STDERR_FILENO : STDOUT_FILENO);
    k->start_ms = ddp_now_ms();
    step(k, DDP_WE_SPAWNED, 0);
    k->pid = t.py_pid;
    k->pgid = t.shim_pid;
    k->warm = true;
    if (open_streams(rn, k, err) < 0) /* its log files: the program runs on, as a fresh one would not */
        ddp_warn("%s", err->msg);
    if (!rn->paused)
        read_streams(k);
    uv_read_start((uv_stream_t *)&k->io->rep, on_alloc, on_read);
    return 0;
}

void ddp_runner_set_adopt(struct ddp_runner *rn, ddp_runner_adopt_fn fn, void *arg)
{
    rn->adopt = fn;
    rn->adopt_arg = arg;
}

const char *ddp_runner_shim_file(const struct ddp_runner *rn)
{
    return rn->cfg.self_exec ? rn->cfg.self_exec : rn->cfg.self_exe;
}

/* The cgroup of attempt, or NULL. */
static char *attempt_cgroup(struct ddp_runner *rn, int attempt)
{
    char name[64], *path = NULL;
    snprintf(name, sizeof name, "ddplaunch-%d-attempt-%d", (int)getpid(), attempt);
    if (rn->cfg.cgroup_base && ddp_cgroup_create(rn->cfg.cgroup_base, name, &path) < 0)
        path = NULL;
    return path;
}

int ddp_runner_start(struct ddp_runner *rn, struct ddp_attempt *plan, struct ddp_runner_attempt **out,
                     struct ddp_err *err)
{
    struct ddp_runner_attempt *r = ddp_xcalloc(1, sizeof(*r));
    r->runner = rn;
    ddp_logfile_init(&r->filtered[0], -1, -1, NULL);
    ddp_logfile_init(&r->filtered[1], -1, -1, NULL);
    r->plan = *plan;
    memset(plan, 0, sizeof(*plan));
    r->nw = r->plan.nworkers;
    if (rn->ready_cgroup && rn->ready_attempt == r->plan.attempt) {
        r->cgroup = rn->ready_cgroup;
        rn->ready_cgroup = NULL;
    } else {
        r->cgroup = attempt_cgroup(rn, r->plan.attempt);
    }
    r->w = ddp_xcalloc(r->nw ? r->nw : 1, sizeof(*r->w));
    r->start_ms = ddp_now_ms();
    for (size_t i = 0; i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        k->run = r;
        k->index = i;
        k->w = &r->plan.workers[i];
        k->io = ddp_xcalloc(1, sizeof(*k->io));
        k->io->s_out.file.fd = k->io->s_err.file.fd = k->io->timed.fd = -1;
    }
    rn->cur = r;
    *out = r;
    for (size_t i = 0; i < r->nw; i++) {
        if (adopt(rn, &r->w[i], err) == 0)
            continue;
        int rc = spawn_one(rn, &r->w[i], err);
        if (rc < 0) {
            /* the workers started so far run on; the rest never will */
            for (size_t j = i; j < r->nw; j++) {
                struct ddp_runner_worker *q = &r->w[j];
                ddp_wstate_step(&q->state, &q->open, DDP_WE_NOT_STARTED, 0); /* never reported: start failed */
                q->status = DDP_EXIT_LAUNCHER;
                r->nexited++;
                r->ndone++;
            }
            return rc;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- the runner */

/* The launcher's terminal changed size: every pseudo-terminal of the current attempt's workers follows. */
static void on_winch(uv_signal_t *h, int signo)
{
    struct ddp_runner *rn = h->data;
    struct ddp_runner_attempt *r = rn->cur;
    (void)signo;
    for (size_t i = 0; r && i < r->nw; i++) {
        struct ddp_runner_worker *k = &r->w[i];
        for (int j = 0; j < 2; j++) {
            uv_handle_t *st = j ? (uv_handle_t *)&k->io->err : (uv_handle_t *)&k->io->out;
            uv_os_fd_t fd;
            if (k->w->tty[j] && k->state != DDP_WS_NEW && (k->open & (j ? DDP_RS_ERR : DDP_RS_OUT)) &&
                !uv_is_closing(st) && uv_fileno(st, &fd) == 0)
                (void)ddp_pty_resize(fd, j ? STDERR_FILENO : STDOUT_FILENO);
        }
    }
}

struct ddp_runner *ddp_runner_new(const struct ddp_runner_config *cfg)
{
    struct ddp_runner *rn = ddp_xcalloc(1, sizeof(*rn));
    rn->cfg = *cfg;
    ddp_output_init(&rn->out, STDOUT_FILENO, STDERR_FILENO);
    uv_timer_init(cfg->loop, &rn->unblock);
    rn->unblock.data = rn;
    uv_signal_init(cfg->loop, &rn->winch);
    rn->winch.data = rn;
    if (isatty(STDOUT_FILENO) == 1 || isatty(STDERR_FILENO) == 1)
        uv_signal_start(&rn->winch, on_winch, SIGWINCH);
    return rn;
}

void ddp_runner_close(struct ddp_runner *rn)
{
    if (!uv_is_closing((uv_handle_t *)&rn->unblock))
        uv_close((uv_handle_t *)&rn->unblock, NULL);
    if (!uv_is_closing((uv_handle_t *)&rn->winch))
        uv_close((uv_handle_t *)&rn->winch, NULL);
}

void ddp_runner_prepare(struct ddp_runner *rn, int attempt)
{
    if (rn->ready_cgroup)
        return;
    rn->ready_cgroup = attempt_cgroup(rn, attempt);
    rn->ready_attempt = attempt;
}

void ddp_runner_free(struct ddp_runner *rn)
{
    if (!rn)
        return;
    if (rn->ready_cgroup) /* made for an attempt that never started: empty */
        ddp_cgroup_kill_remove(rn->ready_cgroup);
    free(rn->ready_cgroup);
    ddp_output_free(&rn->out);
    ddp_buf_free(&rn->forked);
    free(rn);
}
