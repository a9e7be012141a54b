/* shim: see shim.h. Runs in the child between the launcher's fork (or libuv's exec) and the worker program. */
#include "run/shim.h"
#include "run/shim_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/exit.h"
#include "base/util.h"
#include "host/cgroup.h"
#include "topo/bind.h"

/* The signal the kernel sends the shim when the launcher dies. A real-time one, so that it can never be
 * confused with a signal forwarded to the group. */
#define SHIM_DEATHSIG (SIGRTMIN + 3)
/* The launcher's "kill everything now" (see ddp_shim_kill). */
#define SHIM_KILLSIG (SIGRTMIN + 4)
/* How long the shim keeps reaping after SIGKILL (a process in the kernel's D state dies late). */
#define SHIM_REAP_MS 30000
/* How long the launcher keeps ending what a killed shim left (ddp_shim_sweep_orphans). */
#define SHIM_SWEEP_MS 3000

int ddp_shim_kill(int shim_pid)
{
    if (shim_pid <= 1)
        return -EINVAL;
    if (kill(shim_pid, SHIM_KILLSIG) != 0)
        return -errno;
    kill(shim_pid, SIGCONT); /* a stopped shim could not act on it */
    return 0;
}

int ddp_shim_exec_status(int err)
{
    return err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG || err == ELOOP ? DDP_EXIT_NOTFOUND : DDP_EXIT_NOEXEC;
}

static void report(int fd, int kind, int err, int pid, int status, const char *msg)
{
    struct ddp_shim_record r;
    memset(&r, 0, sizeof(r));
    r.kind = kind;
    r.err = err;
    r.pid = pid;
    r.status = status;
    if (msg)
        snprintf(r.msg, sizeof(r.msg), "%s", msg);
    if (fd >= 0) {
        ssize_t n;
        do
            n = write(fd, &r, sizeof(r));
        while (n < 0 && errno == EINTR);
    }
}

/* ---------------------------------------------------------------- descendants
 * The shim is a child subreaper: every process its program starts, in any session or group, and every orphan
 * of those (double fork) stays below it. shim_tree finds them in /proc; these end them. */

/* Whether any child of ours (ended or not) is left to reap. */
static bool has_children(void)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 || errno != ECHILD;
}

/* Programs the launcher keeps open for restarts (ddp_shim_reach): one per distinct program of the job. */
static struct kept {
    char *program;
    int fd;
    dev_t dev;
    ino_t ino;
    bool warned;
} kept[8];

/* program resolved as execvp would with path_env: a path with a '/' as is, else the first executable
 * DIR/program of path_env. NULL when there is none. Caller frees. */
static char *resolve_program(const char *program, const char *path_env)
{
    if (strchr(program, '/'))
        return ddp_xstrdup(program);
    const char *p = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    while (*p) {
        size_t n = strcspn(p, ":");
        char *cand = ddp_xasprintf("%.*s%s%s", (int)n, p, n ? "/" : "", program);
        if (access(cand, X_OK) == 0)
            return cand;
        free(cand);
        p += n + (p[n] == ':');
    }
    return NULL;
}

const char *ddp_shim_reach(const char *program, const char *path_env)
{
    static char via[64];
    size_t i;
    if (!program || !*program)
        return NULL;
    for (i = 0; i < sizeof kept / sizeof kept[0] && kept[i].program; i++)
        if (strcmp(kept[i].program, program) == 0)
            break;
    if (i == sizeof kept / sizeof kept[0])
        return NULL;
    struct stat st;
    if (!kept[i].program) { /* first start: keep what runs now */
        char *path = resolve_program(program, path_env);
        int fd = path ? open(path, O_PATH | O_CLOEXEC) : -1;
        free(path);
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0)
                close(fd);
            return NULL; /* not found now: the shim says so (127) */
        }
        kept[i] = (struct kept){.program = ddp_xstrdup(program), .fd = fd, .dev = st.st_dev, .ino = st.st_ino};
        return NULL;
    }
    char *path = resolve_program(program, path_env);
    bool exists = path && stat(path, &st) == 0;
    bool same = exists && st.st_dev == kept[i].dev && st.st_ino == kept[i].ino;
    if (!same && !kept[i].warned) {
        ddp_warn("%s was %s since the job started: restarts run the program the job started with (kept open "
                 "by the launcher)",
                 program, exists ? "replaced" : "deleted");
        kept[i].warned = true;
    }
    free(path);
    if (same)
        return NULL;
    snprintf(via, sizeof via, "/proc/%d/fd/%d", (int)getpid(), kept[i].fd);
    return via;
}

int ddp_shim_adopt_orphans(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -errno;
}

/* Whether this process has a child (any thread's) that is not in shims[0..nshims): only then did a shim's
 * tree come back to it, and only then is /proc worth a scan. True when /proc cannot tell. */
static bool has_strangers(const pid_t *shims, size_t nshims)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    bool found = d == NULL;
    while (d && !found && (e = readdir(d)) != NULL) {
        char path[96], buf[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%.32s/children", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            found = true;
            break;
        }
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n < 0 || n == (ssize_t)sizeof buf - 1) {
            found = true;
            break;
        }
        buf[n] = '\0';
        for (char *p = buf, *end; *p && !found; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            found = !ddp_shim_tree_has(shims, nshims, (pid_t)v);
        }
    }
    if (d)
        closedir(d);
    return found;
}

int ddp_shim_sweep_orphans(const pid_t *shims, size_t nshims)
{
    struct ddp_shim_procs p = {0};
    if (!has_strangers(shims, nshims))
        return 0;
    pid_t me = getpid();
    int ended = 0;
    long long give_up = ddp_now_ms() + SHIM_SWEEP_MS;
    for (;;) {
        ddp_shim_tree_scan(&p);
        size_t nd = ddp_shim_tree_of(&p, shims, nshims), live = 0;
        for (size_t i = 0; i < nd; i++) {
            if (p.state[i] != 'Z' && p.state[i] != 'X') {
                kill(p.pid[i], SIGKILL);
                live++;
            }
            /* our own children among them (not a shim: libuv waits for those) are ours to reap */
            if (p.ppid[i] == me && waitpid(p.pid[i], NULL, WNOHANG) == p.pid[i])
                ended++;
        }
        if (nd == 0 || ddp_now_ms() >= give_up)
            break;
        struct timespec tick = {0, 5 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    ddp_shim_tree_free(&p);
    return ended;
}

/* Reap every ended child; remember how PROGRAM ended. */
static void reap(pid_t program, int *program_status, bool *program_done)
{
    int ws;
    pid_t r;
    while ((r = waitpid(-1, &ws, WNOHANG)) > 0 || (r < 0 && errno == EINTR))
        if (r == program && !*program_done) {
            *program_status = ws;
            *program_done = true;
        }
}

/* End every descendant: SIGTERM to each (once), up to grace_ms for them to go, then SIGKILL (at once when
 * grace_ms is 0 or SHIM_KILLSIG/SHIM_DEATHSIG arrives), then reap until none is left (bounded by SHIM_REAP_MS). */
static void end_descendants(long long grace_ms, pid_t program, int *program_status, bool *program_done)
{
    struct ddp_shim_procs p = {0};
    pid_t *termed = NULL;
    size_t ntermed = 0, capt = 0;
    long long now = ddp_now_ms();
    long long kill_at = now + (grace_ms > 0 ? grace_ms : 0), give_up = 0;
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, SIGCHLD);
    sigaddset(&wake, SHIM_KILLSIG);
    sigaddset(&wake, SHIM_DEATHSIG);
    for (;;) {
        size_t n = 0;
        reap(program, program_status, program_done);
        /* No child left (all reaped) means no descendant either: as a subreaper we inherit every orphan of the
         * tree, so a live descendant always has a live child of ours above it. Then /proc is not read at all. */
        if (has_children()) {
            ddp_shim_tree_scan(&p);
            n = ddp_shim_tree_live(&p);
        }
        if (n == 0)
            break;
        now = ddp_now_ms();
        if (now >= kill_at) {
            for (size_t i = 0; i < n; i++)
                kill(p.pid[i], SIGKILL);
            if (give_up == 0)
                give_up = now + SHIM_REAP_MS;
            else if (now >= give_up)
                break;
        } else {
            for (size_t i = 0; i < n; i++) {
                if (ddp_shim_tree_has(termed, ntermed, p.pid[i]))
                    continue;
                kill(p.pid[i], SIGTERM);
                kill(p.pid[i], SIGCONT);
                if (ntermed == capt) {
                    capt = capt ? 2 * capt : 64;
                    termed = ddp_xrealloc(termed, capt * sizeof(*termed));
                }
                termed[ntermed++] = p.pid[i];
            }
        }
        /* wait for a child to end (SIGCHLD), or the launcher's kill, or 20 ms (a grandchild's end is not
         * signalled to us while its parent lives) */
        struct timespec tick = {0, 20 * 1000 * 1000};
        int sig = sigtimedwait(&wake, NULL, &tick);
        if (sig == SHIM_KILLSIG || sig == SHIM_DEATHSIG)
            kill_at = 0;
    }
    reap(program, program_status, program_done);
    free(termed);
    ddp_shim_tree_free(&p);
}

/* Pass a signal sent to the shim's group on: to PROGRAM's group (its own, see start_program) and, for a stop
 * signal (all_outside), to every descendant that left that group (they did not get the group's copy). */
static void forward_signal(pid_t program, int sig, bool all_outside)
{
    struct ddp_shim_procs p = {0};
    size_t n;
    kill(-program, sig);
    if (!all_outside)
        return;
    ddp_shim_tree_scan(&p);
    n = ddp_shim_tree_live(&p);
    for (size_t i = 0; i < n; i++)
        if (getpgid(p.pid[i]) != program)
            kill(p.pid[i], sig);
    ddp_shim_tree_free(&p);
}

/* The launcher is gone before PROGRAM started: end what we have and exit. */
static _Noreturn void kill_all_and_die(void)
{
    int ws = 0;
    bool done = false;
    end_descendants(0, -1, &ws, &done);
    _exit(ddp_exit_signal(SIGKILL));
}

static _Noreturn void mirror_status(int wstatus)
{
    if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        sigset_t one;
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore); /* the program dumped core already if it was allowed to */
        signal(sig, SIG_DFL);
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(ddp_exit_signal(sig));
    }
    _exit(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1);
}

static int parse_mode(const char *s, enum ddp_membind *out)
{
    if (strcmp(s, "local") == 0)
        *out = DDP_MEM_LOCAL;
    else if (strcmp(s, "interleave") == 0)
        *out = DDP_MEM_INTERLEAVE;
    else if (strcmp(s, "none") == 0)
        *out = DDP_MEM_NONE;
    else
        return -1;
    return 0;
}

/* What the launcher told the shim on its command line. */
struct shim_args {
    const char *cpus, *mems, *cgroup, *exec_path;
    enum ddp_membind mode;
    bool strict;
    long long rank, ppid, rfd, grace_ms;
    int prog; /* argv index of PROGRAM */
};

/* "--exec-shim [--name value | --name=value | --strict]... -- PROGRAM ARGS...": 0, or -1 on bad arguments. */
static int parse_args(int argc, char **argv, struct shim_args *sa)
{
    *sa = (struct shim_args){.mode = DDP_MEM_NONE, .rank = -1, .rfd = -1, .prog = -1};
    for (int i = 1; i < argc; i++) {
        char name[32];
        const char *a = argv[i];
        const char *v = NULL;
        const char *eq = strchr(a, '=');
        if (strcmp(a, "--exec-shim") == 0)
            continue;
        if (strcmp(a, "--") == 0) {
            sa->prog = i + 1;
            break;
        }
        if (strcmp(a, "--strict") == 0) {
            sa->strict = true;
            continue;
        }
        if (eq && (size_t)(eq - a) < sizeof(name)) { /* --name=value */
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            v = eq + 1;
            a = name;
        } else if (i + 1 < argc) { /* --name value */
            v = argv[++i];
        } else {
            return -1;
        }
        if (strcmp(a, "--rank") == 0) {
            if (ddp_parse_int(v, 0, 1 << 30, &sa->rank) != 0)
                return -1;
        } else if (strcmp(a, "--ppid") == 0) {
            if (ddp_parse_int(v, 1, 1LL << 31, &sa->ppid) != 0)
                return -1;
        } else if (strcmp(a, "--report-fd") == 0) {
            if (ddp_parse_int(v, 0, 1 << 20, &sa->rfd) != 0)
                return -1;
        } else if (strcmp(a, "--grace-ms") == 0) {
            if (ddp_parse_int(v, 0, 1LL << 40, &sa->grace_ms) != 0)
                return -1;
        } else if (strcmp(a, "--cgroup") == 0) {
            sa->cgroup = v;
        } else if (strcmp(a, "--exec-path") == 0) {
            sa->exec_path = v;
        } else if (strcmp(a, "--cpus") == 0) {
            sa->cpus = v;
        } else if (strcmp(a, "--mems") == 0) {
            sa->mems = v;
        } else if (strcmp(a, "--mem-mode") == 0) {
            if (parse_mode(v, &sa->mode) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    if (sa->prog < 0 || sa->prog >= argc)
        return -1;
    return 0;
}

/* Join the attempt's cgroup ourselves, for a kernel that cannot start PROGRAM in it (ddp_cgroup_fork_into). A
 * failure is a warning. */
static void join_cgroup(const struct shim_args *sa)
{
    int cgrc = ddp_cgroup_join(sa->cgroup);
    if (cgrc < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "rank %lld: cannot join the attempt's cgroup %s: %s", sa->rank, sa->cgroup,
                 strerror(-cgrc));
        report((int)sa->rfd, DDP_SHIM_BIND_WARN, -cgrc, 0, 0, msg);
    }
}

/* Bind CPUs and memory. A failure is a warning; a failed strict binding is the end (returns 1, the shim's exit
 * status). */
static int place_self(const struct shim_args *sa)
{
    long long rank = sa->rank, rfd = sa->rfd;
    const char *cpus = sa->cpus, *mems = sa->mems;

    if ((cpus && *cpus) || (mems && *mems)) {
        struct ddp_err err = {0};
        if (ddp_bind_self(cpus, mems, sa->mode, &err) != 0) {
            char msg[sizeof(err.msg) + 128];
            snprintf(msg, sizeof(msg), "rank %lld: cannot bind to cpus %s mems %s: %s", rank, cpus ? cpus : "-",
                     mems ? mems : "-", err.msg[0] ? err.msg : strerror(-err.code));
            if (sa->strict) {
                report((int)rfd, DDP_SHIM_BIND_FAILED, -err.code, 0, 1, msg);
                return 1;
            }
            report((int)rfd, DDP_SHIM_BIND_WARN, -err.code, 0, 0, msg);
        }
    }
    return 0;
}

/* A child process, in the attempt's cgroup when there is one, so that everything PROGRAM starts is counted (and
 * killable) there: started in it where the kernel can (the shim stays where the launcher put it), else after the
 * shim joined it. */
static pid_t fork_program(const struct shim_args *sa)
{
    if (!sa->cgroup || !*sa->cgroup)
        return fork();
    int cgfd = open(sa->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long pid = cgfd >= 0 ? ddp_cgroup_fork_into(cgfd) : -errno;
    if (cgfd >= 0 && pid != 0)
        close(cgfd);
    if (pid >= 0)
        return (pid_t)pid;
    if (pid == -EAGAIN || pid == -ENOMEM) {
        errno = (int)-pid;
        return -1;
    }
    join_cgroup(sa); /* an older kernel, or a cgroup it will not start a process in: say why if joining fails */
    return fork();
}

/* Fork and exec PROGRAM with the signal mask OLD. Returns its pid once the exec succeeded, or -1 with the shim's
 * exit status in *status (reported already). *early: the signals that reached only us before the fork. */
static pid_t start_program(char **argv, const struct shim_args *sa, const sigset_t *old, sigset_t *early, int *status)
{
    long long rfd = sa->rfd;
    int prog = sa->prog;
    int execpipe[2];
    pid_t child;

    if (pipe2(execpipe, O_CLOEXEC) != 0) {
        report((int)rfd, DDP_SHIM_EXEC_FAILED, errno, 0, DDP_EXIT_NOEXEC, "pipe2");
        *status = DDP_EXIT_NOEXEC;
        return -1;
    }
    pid_t shim = getpid();
    /* Signals sent to the group before PROGRAM exists reached only us (blocked, pending): pass them on once it
     * runs, so that a SIGTERM during the start is not lost. */
    sigpending(early);
    child = fork_program(sa);
    if (child < 0) {
        int e = errno;
        report((int)rfd, DDP_SHIM_EXEC_FAILED, e, 0, DDP_EXIT_NOEXEC, "fork");
        *status = DDP_EXIT_NOEXEC;
        return -1;
    }
    if (child == 0) {
        int e;
        close(execpipe[0]); /* the cgroup's descriptor, if any, closes on exec */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != shim)
            _exit(ddp_exit_signal(SIGKILL));
        prctl(PR_SET_CHILD_SUBREAPER, 0);
        /* PROGRAM leads a group of its own, so that `kill -9 0` or killpg(getpgrp()) in it cannot end the shim
         * and with it the containment of what PROGRAM started */
        setpgid(0, 0);
        sigprocmask(SIG_SETMASK, old, NULL);
        if (sa->exec_path) /* the program as attempt 0 ran it, kept open by the launcher (ddp_shim_reach) */
            execv(sa->exec_path, argv + prog);
        else
            execvp(argv[prog], argv + prog);
        e = errno;
        (void)!write(execpipe[1], &e, sizeof(e));
        _exit(ddp_shim_exec_status(e));
    }
    close(execpipe[1]);
    setpgid(child, child); /* either of the two calls wins the race with exec; the other fails harmlessly */
    {
        int e = 0;
        ssize_t n;
        do
            n = read(execpipe[0], &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        close(execpipe[0]);
        if (n == (ssize_t)sizeof(e)) {
            int st = ddp_shim_exec_status(e);
            int ws;
            report((int)rfd, DDP_SHIM_EXEC_FAILED, e, child, st, argv[prog]);
            while (waitpid(child, &ws, 0) < 0 && errno == EINTR)
                ;
            *status = st;
            return -1;
        }
    }
    return child;
}

/* Pass the signals that were pending before PROGRAM existed (EARLY) on to it. */
static void forward_early(pid_t child, const sigset_t *early)
{
    for (int sig = 1; sig < NSIG; sig++) {
        sigset_t one;
        struct timespec zero = {0, 0};
        if (sig == SIGCHLD || sig == SHIM_DEATHSIG || !sigismember(early, sig))
            continue;
        sigemptyset(&one);
        sigaddset(&one, sig);
        if (sigtimedwait(&one, NULL, &zero) == sig)
            kill(child, sig);
    }
}

/* Wait for the signals in ALL (all blocked) until PROGRAM ends or the launcher goes, then end as PROGRAM did. */
static _Noreturn void watch_program(pid_t child, const sigset_t *all, const struct shim_args *sa)
{
    for (;;) {
        siginfo_t si;
        int ws = 0;
        bool done = false;
        int sig = sigwaitinfo(all, &si);
        if (sig < 0)
            continue;
        if (sig == SHIM_DEATHSIG || sig == SHIM_KILLSIG) {
            /* the launcher died, or wants everything gone now: SIGKILL to the whole tree */
            end_descendants(0, child, &ws, &done);
            mirror_status(done ? ws : (SIGKILL & 0x7f));
        } else if (sig == SIGCHLD) {
            reap(child, &ws, &done);
            if (done) {
                /* PROGRAM ended: say so at once (a failure must not wait for its leftovers), then what it left
                 * behind ends too (SIGTERM, grace, SIGKILL), then we end as it did */
                int psig = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
                report((int)sa->rfd, DDP_SHIM_EXITED, psig, child,
                       psig            ? ddp_exit_signal(psig)
                       : WIFEXITED(ws) ? WEXITSTATUS(ws)
                                       : 1,
                       NULL);
                end_descendants(sa->grace_ms, child, &ws, &done);
                mirror_status(ws);
            }
        } else if ((si.si_code == SI_USER || si.si_code == SI_QUEUE || si.si_code == SI_TKILL) &&
                   !ddp_proc_is_slurmstepd(si.si_pid)) {
            /* sent to the shim's group (the launcher forwarding a signal): PROGRAM's group gets it, and a stop
             * (SIGTERM, SIGINT, SIGHUP) also reaches those that left that group. Not Slurm's: slurmstepd
             * signals every process of the step, PROGRAM's tree included (one copy each) */
            forward_signal(child, sig, sig == SIGTERM || sig == SIGINT || sig == SIGHUP);
        }
    }
}

/* The shim proper, with every signal blocked: set up, start PROGRAM with the signal mask PROGRAM_MASK, watch it
 * and end as it did. Returns only on failure, with the exit status. */
static int shim_run(int argc, char **argv, const sigset_t *program_mask)
{
    struct shim_args sa;
    sigset_t all, early;
    pid_t child;
    int rc;

    /* Started from /proc/self/fd/N, the kernel names us "N" (ps, top, pgrep, the OOM killer's log): our name. */
    prctl(PR_SET_NAME, "ddplaunch", 0, 0, 0);
    sigfillset(&all);
    if (prctl(PR_SET_PDEATHSIG, SHIM_DEATHSIG) != 0) {
        fprintf(stderr, "ddplaunch: exec shim: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
        return 1;
    }
    if (parse_args(argc, argv, &sa) != 0) {
        fprintf(stderr, "ddplaunch: --exec-shim: bad arguments (internal mode, not for users)\n");
        return 1;
    }
    /* The launcher may have died between our fork and the prctl: then nobody will ever signal us. */
    if (sa.ppid > 0 && getppid() != (pid_t)sa.ppid)
        kill_all_and_die();
    /* Orphans of PROGRAM's tree (setsid + double fork included) become our children, not init's. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        fprintf(stderr, "ddplaunch: exec shim: prctl(PR_SET_CHILD_SUBREAPER): %s\n", strerror(errno));
        return 1;
    }
    if (sa.rfd >= 0)
        fcntl((int)sa.rfd, F_SETFD, FD_CLOEXEC);
    rc = place_self(&sa);
    if (rc != 0)
        return rc;
    child = start_program(argv, &sa, program_mask, &early, &rc);
    if (child < 0)
        return rc;
    report((int)sa.rfd, DDP_SHIM_STARTED, 0, child, 0, NULL);
    forward_early(child, &early);
    watch_program(child, &all, &sa);
}

int ddp_shim_main(int argc, char **argv)
{
    sigset_t all, old;
    /* Block every signal first, before arming PDEATHSIG, so none is lost and none kills the shim. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    return shim_run(argc, argv, &old);
}

/* ---------------------------------------------------------------- forked, not executed */

/* The memory of this process's command line (main's argv strings, one after another), or NULL: a forked shim
 * writes its own there, so that ps shows "ddplaunch --exec-shim --rank=N -- PROGRAM..." as for an executed one. */
static char *title_area;
static size_t title_len;

void ddp_shim_title_area(int argc, char **argv)
{
    if (argc < 1 || !argv[0])
        return;
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; i++)
        end += strlen(argv[i]) + 1;
    title_area = argv[0];
    title_len = (size_t)(end - argv[0]);
}

/* Appends s and its NUL to the title at *at, as much as fits (the area's last byte stays NUL). */
static void title_put(const char *s, size_t *at)
{
    size_t n = strlen(s) + 1;
    if (*at + 1 >= title_len)
        return;
    if (n > title_len - 1 - *at)
        n = title_len - 1 - *at;
    memcpy(title_area + *at, s, n);
    *at += n;
}

/* In a forked shim: argv[0], --exec-shim, its --rank= and "--" with PROGRAM's argv, as far as they fit. */
static void set_title(char **argv)
{
    size_t at = 0;
    if (!title_area)
        return;
    memset(title_area, 0, title_len);
    title_put(argv[0], &at);
    title_put("--exec-shim", &at);
    for (int i = 1; argv[i]; i++) {
        if (strncmp(argv[i], "--rank=", 7) == 0)
            title_put(argv[i], &at);
        if (strcmp(argv[i], "--") == 0) {
            for (; argv[i]; i++)
                title_put(argv[i], &at);
            break;
        }
    }
}

/* This process runs one thread (a fork of a threaded one could find a lock taken for ever): /proc/self/task
 * links one directory per thread. */
static bool one_thread(void)
{
    struct stat st;
    return stat("/proc/self/task", &st) == 0 && st.st_nlink == 3;
}

/* In the child: fds[i] becomes descriptor i (i < 4, kept across exec), and every other descriptor that an exec
 * would close (close-on-exec: all of the launcher's own) is closed, so that the shim holds none of the
 * launcher's sockets, locks or pipes; what the launcher inherited open passes on, as through an exec. -errno. */
static int child_fds(const int fds[4])
{
    int src[4];
    for (int i = 0; i < 4; i++) { /* first out of the way of each other: a source may be another's target */
        src[i] = fds[i];
        if (src[i] != i && src[i] < 4 && (src[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 4)) < 0)
            return -errno;
    }
    for (int i = 0; i < 4; i++) {
        if (src[i] == i ? fcntl(i, F_SETFD, 0) != 0 : dup2(src[i], i) != i)
            return -errno;
    }
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    struct dirent *e;
    long long fd;
    while ((e = readdir(d)) != NULL) {
        int flags;
        if (ddp_parse_int(e->d_name, 4, 1 << 30, &fd) == 0 && fd != dirfd(d) &&
            (flags = fcntl((int)fd, F_GETFD)) >= 0 && (flags & FD_CLOEXEC))
            close((int)fd);
    }
    closedir(d);
    return 0;
}

int ddp_shim_fork(char **argv, char **envp, const char *cwd, const int fds[4], int *pidfd)
{
    int argc = 0;
    sigset_t all, old;
    if (!one_thread())
        return -EBUSY;
    if (cwd && *cwd) { /* as uv_spawn would: a directory that is not there is the start's error, not the worker's */
        int d = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
            return -errno;
        close(d);
    }
    while (argv[argc])
        argc++;
    /* No handler of ours may run in the child before it has the default ones */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP)
                sigaction(sig, &dfl, NULL); /* those glibc keeps for itself refuse: EINVAL */
        if (setsid() < 0 || child_fds(fds) < 0)
            _exit(DDP_EXIT_LAUNCHER);
        if (cwd && *cwd && chdir(cwd) != 0) { /* removed since the parent looked: on the worker's stderr */
            fprintf(stderr, "ddplaunch: cannot enter the working directory %s: %s\n", cwd, strerror(errno));
            _exit(DDP_EXIT_LAUNCHER);
        }
        environ = envp; /* PROGRAM's, and the PATH it is looked up by */
        set_title(argv);
        sigemptyset(&none);
        _exit(shim_run(argc, argv, &none));
    }
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        return -e;
    *pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (*pidfd < 0) { /* before Linux 5.3: nothing could tell us that it ended; it ends now, never started */
        e = errno;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return e == ENOSYS ? -ENOSYS : -e;
    }
    return (int)pid;
}
