/* shim: see shim.h. Runs in the child between libuv's fork/exec and the worker program. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bind.h"
#include "util.h"

/* The signal the kernel sends the shim when the launcher dies. A real-time one, so that it can never be
 * confused with a signal forwarded to the group. */
#define SHIM_DEATHSIG (SIGRTMIN + 3)

int ddp_shim_exec_status(int err)
{
    return err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG || err == ELOOP ? 127 : 126;
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

static void kill_group_and_die(void)
{
    pid_t g = getpgrp();
    if (g > 1 && g == getpid())
        kill(-g, SIGKILL);
    _exit(137);
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
        _exit(128 + sig);
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

int ddp_shim_main(int argc, char **argv)
{
    const char *cpus = NULL, *mems = NULL;
    enum ddp_membind mode = DDP_MEM_NONE;
    bool strict = false;
    long long rank = -1, ppid = 0, rfd = -1;
    int i, prog = -1;
    sigset_t all, old;
    int execpipe[2];
    pid_t child;

    /* Block every signal first, before arming PDEATHSIG, so none is lost and none kills the shim. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    if (prctl(PR_SET_PDEATHSIG, SHIM_DEATHSIG) != 0) {
        fprintf(stderr, "ddplaunch: exec shim: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
        return 1;
    }
    for (i = 1; i < argc; i++) {
        char name[32];
        const char *a = argv[i];
        const char *v = NULL;
        const char *eq = strchr(a, '=');
        if (strcmp(a, "--exec-shim") == 0)
            continue;
        if (strcmp(a, "--") == 0) {
            prog = i + 1;
            break;
        }
        if (strcmp(a, "--strict") == 0) {
            strict = true;
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
            goto usage;
        }
        if (strcmp(a, "--rank") == 0) {
            if (ddp_parse_int(v, 0, 1 << 30, &rank) != 0)
                goto usage;
        } else if (strcmp(a, "--ppid") == 0) {
            if (ddp_parse_int(v, 1, 1LL << 31, &ppid) != 0)
                goto usage;
        } else if (strcmp(a, "--report-fd") == 0) {
            if (ddp_parse_int(v, 0, 1 << 20, &rfd) != 0)
                goto usage;
        } else if (strcmp(a, "--cpus") == 0) {
            cpus = v;
        } else if (strcmp(a, "--mems") == 0) {
            mems = v;
        } else if (strcmp(a, "--mem-mode") == 0) {
            if (parse_mode(v, &mode) != 0)
                goto usage;
        } else {
            goto usage;
        }
    }
    if (prog < 0 || prog >= argc)
        goto usage;
    /* The launcher may have died between our fork and the prctl: then nobody will ever signal us. */
    if (ppid > 0 && getppid() != (pid_t)ppid)
        kill_group_and_die();
    if (rfd >= 0)
        fcntl((int)rfd, F_SETFD, FD_CLOEXEC);

    if ((cpus && *cpus) || (mems && *mems)) {
        struct ddp_err err = {0};
        if (ddp_bind_self(cpus, mems, mode, &err) != 0) {
            char msg[sizeof(err.msg) + 128];
            snprintf(msg, sizeof(msg), "rank %lld: cannot bind to cpus %s mems %s: %s", rank, cpus ? cpus : "-",
                     mems ? mems : "-", err.msg[0] ? err.msg : strerror(-err.code));
            if (strict) {
                report((int)rfd, DDP_SHIM_BIND_FAILED, -err.code, 0, 1, msg);
                return 1;
            }
            report((int)rfd, DDP_SHIM_BIND_WARN, -err.code, 0, 0, msg);
        }
    }

    if (pipe2(execpipe, O_CLOEXEC) != 0) {
        report((int)rfd, DDP_SHIM_EXEC_FAILED, errno, 0, 126, "pipe2");
        return 126;
    }
    pid_t shim = getpid();
    /* Signals sent to the group before PROGRAM exists reached only us (blocked, pending): pass them on once it
     * runs, so that a SIGTERM during the start is not lost. */
    sigset_t early;
    sigpending(&early);
    child = fork();
    if (child < 0) {
        int e = errno;
        report((int)rfd, DDP_SHIM_EXEC_FAILED, e, 0, 126, "fork");
        return 126;
    }
    if (child == 0) {
        int e;
        close(execpipe[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != shim)
            _exit(137);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(argv[prog], argv + prog);
        e = errno;
        (void)!write(execpipe[1], &e, sizeof(e));
        _exit(ddp_shim_exec_status(e));
    }
    close(execpipe[1]);
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
            return st;
        }
    }
    report((int)rfd, DDP_SHIM_STARTED, 0, child, 0, NULL);
    for (int sig = 1; sig < NSIG; sig++) {
        sigset_t one;
        struct timespec zero = {0, 0};
        if (sig == SIGCHLD || sig == SHIM_DEATHSIG || !sigismember(&early, sig))
            continue;
        sigemptyset(&one);
        sigaddset(&one, sig);
        if (sigtimedwait(&one, NULL, &zero) == sig)
            kill(child, sig);
    }
    if (rfd >= 0)
        close((int)rfd);

    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&all, &si);
        if (sig < 0)
            continue;
        if (sig == SHIM_DEATHSIG) {
            kill_group_and_die();
        } else if (sig == SIGCHLD) {
            int ws;
            pid_t r = waitpid(child, &ws, WNOHANG);
            if (r == child)
                mirror_status(ws);
            /* grandchildren are not ours to reap: the kernel reparents them to init/subreaper */
        }
        /* Any other signal was sent to the group (or to us): PROGRAM got its own copy. */
    }

usage:
    fprintf(stderr, "ddplaunch: --exec-shim: bad arguments (internal mode, not for users)\n");
    return 1;
}
