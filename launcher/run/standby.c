/* standby: see standby.h. A standby is a shim (run/shim.c) whose program is "python OPTIONS -c BOOT PRELOAD", with
 * a socket to us on its descriptor 4: we write standby.py's text there first, it answers "ready PID RSS" (or
 * "unfit WHY") and then waits for "go". Its stdout, stderr and report pipes are made as a worker's and read by
 * nobody until the runner takes them. */
#include "run/standby.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/cgroup.h"
#include "run/runner_internal.h"
#include "run/shim.h"
#include <standby_py.h> /* generated from run/standby.py (Makefile): standby_py[], standby_py_len */

#define BOOT "exec(__import__('os').read(4, 1 << 20))"

/* ---------------------------------------------------------------- pure parts */

int ddp_standby_split(const struct ddp_strv *argv, bool *module)
{
    /* not -E, -I, -S: the standby's sitecustomize (on PYTHONPATH) holds the program's site hooks back */
    static const char *const plain[] = {"-u", "-B", "-O", "-OO", "-s", "-b", "-bb", "-q", "-R", NULL};
    const char *a0 = argv->n ? argv->v[0] : "", *slash = strrchr(a0, '/'), *base = slash ? slash + 1 : a0;
    *module = false;
    if (strncmp(base, "python", 6) != 0 || base[6 + strspn(base + 6, "0123456789.")] != '\0')
        return -1; /* python, python3, python3.11; not python_job.sh (a --no-python program) */
    for (size_t i = 1; i < argv->n; i++) {
        const char *a = argv->v[i];
        bool known = false;
        for (size_t j = 0; plain[j]; j++)
            known |= strcmp(a, plain[j]) == 0;
        if (known)
            continue;
        if (strcmp(a, "-W") == 0 || strcmp(a, "-X") == 0) {
            i++;
            continue;
        }
        if ((strncmp(a, "-W", 2) == 0 || strncmp(a, "-X", 2) == 0) && a[2])
            continue;
        if (strcmp(a, "-m") == 0) {
            *module = true;
            return i + 1 < argv->n ? (int)i : -1;
        }
        if (a[0] == '-')
            return -1; /* -c, -P, -i, "-", "--", anything not above */
        return (int)i;
    }
    return -1;
}

bool ddp_standby_env_dropped(const char *name)
{
    static const char *const exact[] = {"RANK",
                                        "LOCAL_RANK",
                                        "GROUP_RANK",
                                        "ROLE_RANK",
                                        "LOCAL_WORLD_SIZE",
                                        "WORLD_SIZE",
                                        "GROUP_WORLD_SIZE",
                                        "ROLE_WORLD_SIZE",
                                        "MASTER_ADDR",
                                        "MASTER_PORT",
                                        "CUDA_VISIBLE_DEVICES",
                                        NULL};
    static const char *const prefix[] = {"TORCHELASTIC_", "DDPLAUNCH_", "TORCH_NCCL_DEBUG_INFO_", NULL};
    size_t n = strcspn(name, "=");
    if (n == strlen("DDPLAUNCH_PYTHONPATH") && strncmp(name, "DDPLAUNCH_PYTHONPATH", n) == 0)
        return false; /* the sitecustomize restores PYTHONPATH from it, as in a worker */
    for (size_t i = 0; exact[i]; i++)
        if (strlen(exact[i]) == n && strncmp(name, exact[i], n) == 0)
            return true;
    for (size_t i = 0; prefix[i]; i++)
        if (strncmp(name, prefix[i], strlen(prefix[i])) == 0)
            return true;
    return false;
}

void ddp_standby_env(const struct ddp_strv *envp, const char *pydir, struct ddp_strv *out)
{
    const char *path = NULL;
    ddp_strv_clear(out);
    for (size_t i = 0; i < envp->n; i++) {
        if (strncmp(envp->v[i], "PYTHONPATH=", 11) == 0)
            path = envp->v[i] + 11;
        else if (!ddp_standby_env_dropped(envp->v[i]))
            ddp_strv_push(out, envp->v[i]);
    }
    if (!pydir) {
        if (path)
            ddp_strv_pushf(out, "PYTHONPATH=%s", path);
        return;
    }
    size_t n = strlen(pydir);
    if (path && strncmp(path, pydir, n) == 0 && (path[n] == ':' || path[n] == '\0'))
        ddp_strv_pushf(out, "PYTHONPATH=%s", path); /* the workers sample: theirs has it first already */
    else if (path && path[0])
        ddp_strv_pushf(out, "PYTHONPATH=%s:%s", pydir, path);
    else
        ddp_strv_pushf(out, "PYTHONPATH=%s", pydir);
    ddp_strv_push(out, "DDPLAUNCH_STANDBY=1");
}

long long ddp_standby_estimate_mib(const struct ddp_strv *preload)
{
    for (size_t i = 0; i < preload->n; i++)
        if (strcmp(preload->v[i], "torch") == 0 || strncmp(preload->v[i], "torch.", 6) == 0)
            return 256;
    return 32;
}

static void field(struct ddp_buf *b, const char *s)
{
    ddp_buf_add(b, s, strlen(s) + 1);
}

static void fieldf(struct ddp_buf *b, size_t n)
{
    char num[24];
    snprintf(num, sizeof num, "%zu", n);
    field(b, num);
}

void ddp_standby_message(const struct ddp_worker *w, int at, bool module, const char *cwd, bool sampling,
                         struct ddp_buf *out)
{
    struct ddp_buf b = {0};
    size_t first = (size_t)at + (module ? 2 : 1); /* the program's own arguments */
    field(&b, cwd);
    field(&b, module ? "m" : "s");
    field(&b, w->argv.v[at + (module ? 1 : 0)]);
    field(&b, sampling ? "1" : "");
    fieldf(&b, w->argv.n - first);
    for (size_t i = first; i < w->argv.n; i++)
        field(&b, w->argv.v[i]);
    fieldf(&b, w->envp.n);
    for (size_t i = 0; i < w->envp.n; i++)
        field(&b, w->envp.v[i]);
    fieldf(&b, w->argv.n);
    for (size_t i = 0; i < w->argv.n; i++)
        field(&b, w->argv.v[i]);
    char head[16];
    snprintf(head, sizeof head, "%08zu", b.len);
    ddp_buf_add(out, head, 8);
    ddp_buf_add(out, b.data, b.len);
    ddp_buf_free(&b);
}

const char *ddp_standby_refuse(const char *cwd, const char *script)
{
    char path[4096];
    struct stat st;
    unsigned char head[4], tail[66000];
    size_t len = strlen(script);
    if (script[0] == '/' || !cwd)
        snprintf(path, sizeof path, "%s", script);
    else
        snprintf(path, sizeof path, "%s/%s", cwd, script);
    if (len >= 4 && strcmp(script + len - 4, ".pyc") == 0)
        return "a compiled file (.pyc)";
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        bool dir = fd >= 0 && S_ISDIR(st.st_mode);
        if (fd >= 0)
            close(fd);
        return dir ? "a directory (its __main__.py)" : "not a regular file it can read";
    }
    ssize_t n = pread(fd, head, sizeof head, 0);
    /* a .pyc under another name: 2 bytes of version, then "\r\n" (importlib.util.MAGIC_NUMBER) */
    unsigned version = n == 4 ? head[0] | (unsigned)head[1] << 8 : 0;
    bool pyc = n == 4 && head[2] == '\r' && head[3] == '\n' && version >= 3000 && version < 4000;
    off_t from = st.st_size > (off_t)sizeof tail ? st.st_size - (off_t)sizeof tail : 0;
    ssize_t m = pread(fd, tail, sizeof tail, from);
    close(fd);
    if (pyc)
        return "a compiled file (.pyc)";
    /* a zip's end record ("PK\5\6") in its last 64 KiB: a zipapp, a PEX (a #! line, then a zip) */
    for (ssize_t i = m - 22; i >= 0; i--)
        if (tail[i] == 'P' && tail[i + 1] == 'K' && tail[i + 2] == 5 && tail[i + 3] == 6)
            return "a zip archive (zipapp)";
    return NULL;
}

const char *ddp_standby_refuse_interp(const struct ddp_worker *w)
{
    const char *a0 = w->argv.n ? w->argv.v[0] : "", *path = "/usr/local/bin:/usr/bin:/bin";
    char file[4096], head[2];
    for (size_t i = 0; i < w->envp.n; i++)
        if (strncmp(w->envp.v[i], "PATH=", 5) == 0)
            path = w->envp.v[i] + 5;
    int fd = -1;
    if (strchr(a0, '/')) {
        snprintf(file, sizeof file, "%s%s%s", a0[0] != '/' && w->cwd ? w->cwd : "", a0[0] != '/' && w->cwd ? "/" : "",
                 a0);
        fd = open(file, O_RDONLY | O_CLOEXEC);
    }
    for (const char *p = path; fd < 0 && !strchr(a0, '/') && *p;) {
        size_t n = strcspn(p, ":");
        snprintf(file, sizeof file, "%.*s/%s", (int)n, n ? p : ".", a0);
        if (access(file, X_OK) == 0)
            fd = open(file, O_RDONLY | O_CLOEXEC);
        p += n + (p[n] == ':');
    }
    if (fd < 0)
        return NULL; /* its start fails as a fresh one's would */
    bool script = read(fd, head, 2) == 2 && head[0] == '#' && head[1] == '!';
    close(fd);
    return script ? "a script, not python itself (a wrapper such as pyenv's shim may change what python sees)" : NULL;
}

void ddp_standby_print_plan(FILE *f, const struct ddp_spec *s, const struct ddp_attempt *a)
{
    size_t n = 0;
    bool module;
    if (s->restart_warm == DDP_NO || (s->restart_warm == DDP_AUTO && s->max_restarts == 0))
        return; /* auto without restarts: nothing to say */
    for (size_t i = 0; i < a->nworkers; i++)
        n += ddp_standby_split(&a->workers[i].argv, &module) >= 0;
    if (s->max_restarts == 0 || n == 0) {
        fprintf(f, "Warm restart: none (%s)\n", s->max_restarts == 0 ? "no restarts allowed" : "not a Python program");
        return;
    }
    long long each = ddp_standby_estimate_mib(&s->restart_preload);
    fprintf(f,
            "Warm restart: %zu standby interpreter%s (one per local rank), about %lld MiB in all (%lld MiB each, "
            "expected); not started when MemAvailable or the job's memory limit leaves less than %lld MiB\n",
            n, n == 1 ? "" : "s", (long long)n * each, each, 2 * (long long)n * each);
}

/* ---------------------------------------------------------------- the pool */

enum sb_state { SB_STARTING, SB_READY, SB_GONE };

struct standby {
    struct ddp_standby_pool *pool;
    struct standby *next;
    int local_rank;
    enum sb_state state;
    struct ddp_runner_io *io; /* io->proc: the shim */
    bool proc_live;           /* io->proc spawned and not yet closed by us */
    int out_fd, err_fd, rep_fd, ctl_fd;
    uv_poll_t poll;
    bool poll_live;
    int handles; /* ours still open (proc, poll) */
    int shim_pid, py_pid;
    long long rss_kib;
    long long start_ms;
    struct ddp_worker model; /* what it was started for: argv (interpreter part), binding, terminals */
    int at;                  /* the model's program index */
    char line[512];
    size_t len;
};

struct ddp_standby_pool {
    struct ddp_standby_config cfg;
    struct standby *list;
    char *cgroup;      /* the standbys' cgroup, or NULL */
    long long rss_kib; /* the largest a standby measured, 0 before one did */
    bool told_memory;  /* the MemAvailable line was said */
    bool told_ready;   /* the first "ready" line was said */
    char skipped[256]; /* the preload modules a standby found not installed ("" for none) */
    bool closing;
    bool off; /* a standby's preload brought CUDA's driver in: no more standbys for this job */
};

static void sb_free(struct standby *sb)
{
    free(sb->io);
    ddp_strv_clear(&sb->model.argv);
    free(sb->model.cpus);
    free(sb->model.mems);
    free(sb);
}

static void unlink_sb(struct standby *sb)
{
    for (struct standby **pp = &sb->pool->list; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            return;
        }
}

static void on_sb_close(uv_handle_t *h)
{
    struct standby *sb = h->data;
    if (--sb->handles == 0)
        sb_free(sb);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* sb is no longer ours to give: its fds closed, its shim told to end (it is reaped in on_sb_exit). */
static void sb_drop(struct standby *sb, const char *why)
{
    if (sb->state != SB_GONE && why)
        ddp_debug("warm restart: standby of local rank %d (pid %d): %s", sb->local_rank, sb->py_pid, why);
    sb->state = SB_GONE;
    unlink_sb(sb);
    close_fd(&sb->ctl_fd);
    close_fd(&sb->out_fd);
    close_fd(&sb->err_fd);
    close_fd(&sb->rep_fd);
    if (sb->poll_live) {
        sb->poll_live = false;
        uv_close((uv_handle_t *)&sb->poll, on_sb_close);
    }
    if (sb->proc_live && sb->shim_pid > 0)
        ddp_shim_kill(sb->shim_pid);
}

static void on_sb_exit(uv_process_t *p, int64_t status, int sig)
{
    struct standby *sb = p->data;
    (void)status;
    (void)sig;
    sb_drop(sb, "ended");
    sb->proc_live = false;
    uv_close((uv_handle_t *)p, on_sb_close);
}

/* A standby said "cuda MODULE WHAT": its preload put CUDA's driver into the process before the rank's
 * CUDA_VISIBLE_DEVICES was set. Every standby of the job preloads the same: all are ended, none is started again,
 * and restarts start fresh; said once. */
static void sb_cuda(struct standby *sb, const char *said)
{
    struct ddp_standby_pool *p = sb->pool;
    char mod[128] = "", what[256];
    int end = 0;
    if (sscanf(said, "%127s %n", mod, &end) != 1 || end == 0)
        end = (int)strlen(said);
    ddp_text_copy(what, sizeof what, said + end);
    ddp_printable(mod);
    p->off = true;
    ddp_log(p->cfg.quiet ? DDP_LOG_INFO : DDP_LOG_WARN,
            "warm restart off: %s%s initialised CUDA (%s); a standby must not: restarting cold",
            strcmp(mod, "-") == 0 ? "the standby interpreter's start, before its preload," : "preloading ",
            strcmp(mod, "-") == 0 ? "" : mod, what);
    while (p->list)
        sb_drop(p->list, NULL);
}

/* The pid of the program sb's shim started: its STARTED record on the report pipe, copied with tee(2) and left
 * there (the runner reads it when the standby becomes a worker); 0 while the record is not there. What the
 * standby says of itself is never its identity: a preload could name another user's process. */
static int sb_started_pid(const struct standby *sb)
{
    struct ddp_shim_record rec[4];
    int p[2], pid = 0;
    if (sb->rep_fd < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return 0;
    ssize_t n = tee(sb->rep_fd, p[1], sizeof rec, SPLICE_F_NONBLOCK);
    if (n > 0)
        n = read(p[0], rec, (size_t)n);
    for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof rec[0]; i++)
        if (rec[i].kind == DDP_SHIM_STARTED && rec[i].pid > 0)
            pid = rec[i].pid;
    close(p[0]);
    close(p[1]);
    return pid;
}

static void sb_ready_line(struct standby *sb)
{
    struct ddp_standby_pool *p = sb->pool;
    int pid, end = 0;
    long long rss;
    ddp_printable(sb->line); /* what a preload raised is the program's text */
    if (strncmp(sb->line, "cuda ", 5) == 0) {
        sb_cuda(sb, sb->line + 5);
        return;
    }
    if (strncmp(sb->line, "unfit ", 6) == 0) {
        ddp_warn("warm restart: the standby interpreter of local rank %d cannot preload: %s", sb->local_rank,
                 sb->line + 6);
        sb_drop(sb, NULL);
        return;
    }
    if (sscanf(sb->line, "ready %d %lld %n", &pid, &rss, &end) != 2 || end == 0) {
        sb_drop(sb, "said something else than ready");
        return;
    }
    const char *skipped = strcmp(sb->line + end, "-") == 0 ? "" : sb->line + end; /* not installed */
    if (!p->skipped[0] && skipped[0])
        ddp_text_copy(p->skipped, sizeof p->skipped, skipped);
    sb->py_pid = sb_started_pid(sb);
    if (sb->py_pid > 0 && pid != sb->py_pid) {
        ddp_warn("warm restart: the standby of local rank %d said it is pid %d, but its shim started pid %d: not used",
                 sb->local_rank, pid, sb->py_pid);
        sb_drop(sb, NULL);
        return;
    }
    sb->state = SB_READY;
    sb->rss_kib = rss;
    if (rss > p->rss_kib)
        p->rss_kib = rss;
    int ready = 0, all = 0;
    for (struct standby *q = p->list; q; q = q->next, all++)
        ready += q->state == SB_READY;
    ddp_debug("warm restart: standby of local rank %d ready in %.1f s (pid %d, %lld MiB)", sb->local_rank,
              (double)(ddp_now_ms() - sb->start_ms) / 1000.0, pid, rss / 1024);
    if (ready == all && !p->told_ready) {
        p->told_ready = true;
        ddp_info("warm restart: %d standby interpreter%s ready (%lld MiB in all%s%s)", all, all == 1 ? "" : "s",
                 (long long)all * p->rss_kib / 1024, p->skipped[0] ? "; not installed, not preloaded: " : "",
                 p->skipped);
    }
}

static void on_ctl(uv_poll_t *h, int status, int events)
{
    struct standby *sb = h->data;
    (void)events;
    if (status < 0) {
        sb_drop(sb, "its socket failed");
        return;
    }
    ssize_t n = read(sb->ctl_fd, sb->line + sb->len, sizeof sb->line - 1 - sb->len);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            sb_drop(sb, "closed its socket before it was ready");
        return;
    }
    sb->len += (size_t)n;
    sb->line[sb->len] = '\0';
    char *nl = strchr(sb->line, '\n');
    if (!nl) {
        if (sb->len == sizeof sb->line - 1)
            sb_drop(sb, "said too much");
        return;
    }
    *nl = '\0';
    sb->poll_live = false;
    uv_close((uv_handle_t *)&sb->poll, on_sb_close);
    sb_ready_line(sb);
}

static void close_pair(int fd[2])
{
    close(fd[0]);
    close(fd[1]);
}

/* A standby for local rank w->local_rank modelled on worker w (whose program starts at argv index at), not yet
 * started. */
static struct standby *sb_new(struct ddp_standby_pool *p, const struct ddp_worker *w, int at)
{
    struct standby *sb = ddp_xcalloc(1, sizeof *sb);
    sb->pool = p;
    sb->local_rank = w->local_rank;
    sb->out_fd = sb->err_fd = sb->rep_fd = sb->ctl_fd = -1;
    sb->io = ddp_xcalloc(1, sizeof *sb->io);
    sb->io->s_out.file.fd = sb->io->s_err.file.fd = sb->io->timed.fd = -1;
    for (int i = 0; i < at; i++)
        ddp_strv_push(&sb->model.argv, w->argv.v[i]);
    sb->model.cpus = w->cpus ? ddp_xstrdup(w->cpus) : NULL;
    sb->model.mems = w->mems ? ddp_xstrdup(w->mems) : NULL;
    sb->model.mem_mode = w->mem_mode;
    sb->model.bind_strict = w->bind_strict;
    sb->model.tty[0] = w->tty[0];
    sb->model.tty[1] = w->tty[1];
    sb->at = at;
    return sb;
}

/* The shim's command line for sb: "python OPTIONS -c BOOT PRELOAD SIGNAL" under the shim's own options. */
static void sb_args(const struct ddp_standby_pool *p, const struct standby *sb, const struct ddp_worker *w,
                    struct ddp_strv *args)
{
    struct ddp_strv prog = {0};
    struct ddp_buf pre = {0};
    ddp_strv_copy(&prog, &sb->model.argv);
    ddp_strv_push(&prog, "-c");
    ddp_strv_push(&prog, BOOT);
    for (size_t i = 0; i < p->cfg.preload->n; i++) {
        if (i)
            ddp_buf_puts(&pre, ",");
        ddp_buf_puts(&pre, p->cfg.preload->v[i]);
    }
    ddp_buf_add(&pre, "", 1);
    ddp_strv_push(&prog, pre.data);
    ddp_buf_free(&pre);
    ddp_strv_pushf(&prog, "%d", p->cfg.sampling ? p->cfg.sample_signal : 0);
    ddp_runner_shim_argv(p->cfg.rn, w, p->cgroup, &prog, args);
    ddp_strv_clear(&prog);
}

/* Spawn sb's shim with the pipes of a worker and the control socket on its descriptor 4. 0, or -1 (said). */
static int sb_spawn(struct ddp_standby_pool *p, struct standby *sb, const struct ddp_worker *w)
{
    struct ddp_strv env = {0}, args = {0};
    int rp[2], op[2], ep[2], cp[2];
    struct ddp_err err = {0};
    if (ddp_runner_open_pipes(w, rp, op, ep, &err) < 0) {
        ddp_debug("warm restart: %s", err.msg);
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) != 0) {
        ddp_debug("warm restart: socketpair: %s", strerror(errno));
        close_pair(rp);
        close_pair(op);
        close_pair(ep);
        return -1;
    }
    sb_args(p, sb, w, &args);
    ddp_standby_env(&w->envp, p->cfg.pydir, &env);
    uv_process_options_t o;
    uv_stdio_container_t io[5];
    memset(&o, 0, sizeof o);
    memset(io, 0, sizeof io);
    int fds[5] = {0, op[1], ep[1], rp[1], cp[1]};
    for (int i = 0; i < 5; i++) {
        io[i].flags = UV_INHERIT_FD;
        io[i].data.fd = fds[i];
    }
    o.exit_cb = on_sb_exit;
    o.file = ddp_runner_shim_file(p->cfg.rn);
    o.args = args.v;
    o.env = env.v;
    o.cwd = w->cwd;
    o.flags = UV_PROCESS_DETACHED;
    o.stdio_count = 5;
    o.stdio = io;
    sb->io->proc.data = sb;
    sb->start_ms = ddp_now_ms();
    int rc = uv_spawn(p->cfg.loop, &sb->io->proc, &o);
    for (int i = 1; i < 5; i++)
        close(fds[i]);
    ddp_strv_clear(&args);
    ddp_strv_clear(&env);
    if (rc != 0) {
        ddp_debug("warm restart: cannot start a standby: %s", uv_strerror(rc));
        close(rp[0]);
        close(op[0]);
        close(ep[0]);
        close(cp[0]);
        return -1;
    }
    sb->shim_pid = sb->io->proc.pid;
    sb->out_fd = op[0];
    sb->err_fd = ep[0];
    sb->rep_fd = rp[0];
    sb->ctl_fd = cp[0];
    return 0;
}

/* Start a standby for local rank w->local_rank modelled on worker w (whose program starts at argv index at). */
static void sb_start(struct ddp_standby_pool *p, const struct ddp_worker *w, int at)
{
    struct standby *sb = sb_new(p, w, at);
    if (sb_spawn(p, sb, w) < 0) {
        sb_free(sb);
        return;
    }
    sb->proc_live = true;
    sb->handles = 1;
    sb->next = p->list;
    p->list = sb;
    /* the program: its socket buffer holds it whole (a few KiB) until python reads it */
    if (send(sb->ctl_fd, standby_py, standby_py_len, MSG_NOSIGNAL) != (ssize_t)standby_py_len) {
        sb_drop(sb, "cannot be sent its program");
        return;
    }
    fcntl(sb->ctl_fd, F_SETFL, fcntl(sb->ctl_fd, F_GETFL) | O_NONBLOCK);
    uv_poll_init(p->cfg.loop, &sb->poll, sb->ctl_fd);
    sb->poll.data = sb;
    sb->poll_live = true;
    sb->handles++;
    uv_poll_start(&sb->poll, UV_READABLE, on_ctl);
}

struct ddp_standby_pool *ddp_standby_new(const struct ddp_standby_config *cfg)
{
    struct ddp_standby_pool *p = ddp_xcalloc(1, sizeof *p);
    p->cfg = *cfg;
    if (cfg->cgroup_base) {
        char name[64];
        snprintf(name, sizeof name, "ddplaunch-%d-standby", (int)getpid());
        if (ddp_cgroup_create(cfg->cgroup_base, name, &p->cgroup) < 0)
            p->cgroup = NULL;
    }
    return p;
}

static struct standby *find(struct ddp_standby_pool *p, int local_rank)
{
    for (struct standby *sb = p->list; sb; sb = sb->next)
        if (sb->local_rank == local_rank)
            return sb;
    return NULL;
}

/* Whether attempt a's program is one a standby cannot run as python would (ddp_standby_refuse), or the standbys
 * have no sitecustomize to hold the program's own back: then warm restart is off for the job, said once. */
static bool refused(struct ddp_standby_pool *p, const struct ddp_attempt *a)
{
    const char *why = NULL, *what = "";
    for (size_t i = 0; i < a->nworkers && !why; i++) {
        const struct ddp_worker *w = &a->workers[i];
        bool module;
        int at = ddp_standby_split(&w->argv, &module);
        if (at >= 0 && !module && (why = ddp_standby_refuse(w->cwd, w->argv.v[at])))
            what = w->argv.v[at];
    }
    for (size_t i = 0; i < a->nworkers && !why; i++) {
        bool module;
        if (ddp_standby_split(&a->workers[i].argv, &module) >= 0 && (why = ddp_standby_refuse_interp(&a->workers[i])))
            what = a->workers[i].argv.v[0];
    }
    size_t python = 0;
    for (size_t i = 0; i < a->nworkers; i++) {
        bool module;
        python += ddp_standby_split(&a->workers[i].argv, &module) >= 0;
    }
    if (!why && python == 0 && a->nworkers > 0) {
        why = "the workers' command is not python SCRIPT or python -m MODULE with options a standby shares";
        what = "";
    }
    if (!why && !p->cfg.pydir)
        why = "no run directory for the standbys' sitecustomize";
    if (!why)
        return false;
    char name[256];
    ddp_text_copy(name, sizeof name, what);
    p->off = true;
    /* warm = auto is for Python jobs: of another, only -v says it */
    ddp_log(!p->cfg.quiet ? DDP_LOG_WARN
            : python      ? DDP_LOG_INFO
                          : DDP_LOG_DEBUG,
            "warm restart off: %s%s%s; restarts start cold", name, name[0] ? " is " : "", why);
    return true;
}

void ddp_standby_fill(struct ddp_standby_pool *p, const struct ddp_attempt *a)
{
    if (p->closing || p->off)
        return;
    for (struct standby *sb = p->list, *next; sb; sb = next) {
        next = sb->next;
        if ((size_t)sb->local_rank >= a->nworkers)
            sb_drop(sb, "its local rank is not in this attempt");
    }
    size_t missing = 0;
    for (size_t i = 0; i < a->nworkers; i++)
        missing += find(p, a->workers[i].local_rank) == NULL;
    if (missing == 0)
        return;
    if (refused(p, a))
        return;
    long long each = p->rss_kib > 0 ? p->rss_kib : ddp_standby_estimate_mib(p->cfg.preload) * 1024;
    struct ddp_standby_mem m;
    ddp_standby_mem_read(&m, p->cfg.sched_mem_kib);
    const char *which;
    long long room = ddp_standby_mem_room(&m, &which);
    if (room >= 0 && room < 2 * each * (long long)missing) {
        if (!p->told_memory)
            ddp_log(p->cfg.quiet ? DDP_LOG_INFO : DDP_LOG_WARN,
                    "warm restart: no standby interpreters: %s %lld MiB is below twice the %zu x %lld MiB "
                    "they would take; restarts start fresh",
                    which, room / 1024, missing, each / 1024);
        p->told_memory = true;
        return;
    }
    for (size_t i = 0; i < a->nworkers; i++) {
        const struct ddp_worker *w = &a->workers[i];
        bool module;
        int at = ddp_standby_split(&w->argv, &module);
        if (at < 0 || find(p, w->local_rank))
            continue;
        sb_start(p, w, at);
    }
}

static bool same_str(const char *a, const char *b)
{
    return (a ? a : "")[0] == (b ? b : "")[0] && strcmp(a ? a : "", b ? b : "") == 0;
}

/* Why sb cannot run w, or NULL when it can. */
static const char *unfit(struct standby *sb, const struct ddp_worker *w, int at)
{
    if (sb->state != SB_READY)
        return "not ready in time";
    if (at != sb->at)
        return "another interpreter or options";
    for (int i = 0; i < at; i++)
        if (strcmp(sb->model.argv.v[i], w->argv.v[i]) != 0)
            return "another interpreter or options";
    if (!same_str(sb->model.cpus, w->cpus) || !same_str(sb->model.mems, w->mems) || sb->model.mem_mode != w->mem_mode ||
        sb->model.bind_strict != w->bind_strict)
        return "another binding";
    if (sb->model.tty[0] != w->tty[0] || sb->model.tty[1] != w->tty[1])
        return "another terminal";
    if (sb->py_pid <= 0 && (sb->py_pid = sb_started_pid(sb)) <= 0)
        return "its start not confirmed by its shim";
    if (kill(sb->py_pid, 0) != 0)
        return "gone";
    return NULL;
}

int ddp_standby_take(void *pool, const struct ddp_worker *w, const char *cgroup, struct ddp_runner_adopted *t,
                     char *why, size_t whylen)
{
    struct ddp_standby_pool *p = pool;
    struct standby *sb = find(p, w->local_rank);
    bool module;
    int at = ddp_standby_split(&w->argv, &module);
    char cwd[4096], dir[8200];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, "/");
    if (!w->cwd) /* a relative workdir is the launcher's: the standby's own is that already */
        snprintf(dir, sizeof dir, "%s", cwd);
    else
        snprintf(dir, sizeof dir, "%s%s%s", w->cwd[0] == '/' ? "" : cwd, w->cwd[0] == '/' ? "" : "/", w->cwd);
    const char *bad = p->off                                              ? "warm restart is off"
                      : !sb                                               ? "no standby"
                      : at < 0                                            ? "not a Python program it can run"
                      : !module && ddp_standby_refuse(dir, w->argv.v[at]) ? "a program python runs otherwise"
                                                                          : unfit(sb, w, at);
    if (why && whylen)
        snprintf(why, whylen, "%s", bad ? bad : "");
    if (bad) {
        if (sb)
            sb_drop(sb, bad);
        return -1;
    }
    if (cgroup) { /* the attempt's cgroup counts and ends it as a worker's: the shim first, then its program */
        int rc = ddp_cgroup_move(cgroup, sb->shim_pid);
        if (rc == 0)
            rc = ddp_cgroup_move(cgroup, sb->py_pid);
        if (rc < 0)
            ddp_debug("warm restart: rank %d: cannot move its standby into %s: %s", w->rank, cgroup, strerror(-rc));
    }
    struct ddp_buf msg = {0};
    ddp_standby_message(w, at, module, dir, p->cfg.sampling, &msg);
    int fl = fcntl(sb->ctl_fd, F_GETFL);
    fcntl(sb->ctl_fd, F_SETFL, fl & ~O_NONBLOCK);
    size_t off = 0;
    while (off < msg.len) {
        ssize_t n = send(sb->ctl_fd, msg.data + off, msg.len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    bool sent = msg.len > 0 && off == msg.len;
    ddp_buf_free(&msg);
    if (!sent) {
        if (why && whylen)
            snprintf(why, whylen, "cannot be sent go: %s", strerror(errno));
        sb_drop(sb, "cannot be sent go");
        return -1;
    }
    close_fd(&sb->ctl_fd);
    *t = (struct ddp_runner_adopted){.io = sb->io,
                                     .out_fd = sb->out_fd,
                                     .err_fd = sb->err_fd,
                                     .rep_fd = sb->rep_fd,
                                     .shim_pid = sb->shim_pid,
                                     .py_pid = sb->py_pid};
    /* the process handle is the worker's now: the runner closes it; sb is freed here */
    unlink_sb(sb);
    sb->io = NULL;
    sb->proc_live = false;
    sb->out_fd = sb->err_fd = sb->rep_fd = -1;
    if (--sb->handles == 0)
        sb_free(sb);
    return 0;
}

void ddp_standby_close(struct ddp_standby_pool *p)
{
    if (!p)
        return;
    p->closing = true;
    while (p->list)
        sb_drop(p->list, NULL);
}

void ddp_standby_free(struct ddp_standby_pool *p)
{
    if (!p)
        return;
    if (p->cgroup) {
        ddp_cgroup_kill_remove(p->cgroup);
        free(p->cgroup);
    }
    free(p);
}
