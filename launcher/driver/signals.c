/* signals: see signals.h. Its own SA_SIGINFO handler (not uv_signal) because the sender matters: a handler
 * writes {signo, sender} to a pipe the loop reads (async-signal-safe: one write(2) of a few bytes). */
#include "driver/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "driver/policy.h"
#include "records/records.h"
#include "records/report.h"

struct note {
    int signo;
    pid_t from; /* the sender (kill, sigqueue), 0 for the kernel or a terminal */
};

struct ddp_signals {
    int sigs[16];
    int n;
    int fds[2];
    uv_poll_t poll;
    void (*fn)(void *arg, int signo, bool reached);
    void *arg;
    struct ddp_plan_sched sched;
};

static int note_fd = -1; /* the write end for the handler; one set of handlers per process */

static void on_raw(int signo, siginfo_t *si, void *uc)
{
    (void)uc;
    int e = errno;
    struct note n = {signo, si && si->si_code <= 0 ? si->si_pid : 0}; /* SI_USER, SI_QUEUE, SI_TKILL */
    if (note_fd >= 0)
        (void)!write(note_fd, &n, sizeof(n));
    errno = e;
}

/* The sender signals every process of the step itself (so each worker has its copy already): slurmstepd in a
 * Slurm job, unless this launcher is the batch script itself and the sender its parent (`scancel --batch` and
 * `#SBATCH --signal=B:...` reach only it). */
static bool reached_all(const struct ddp_signals *g, pid_t from)
{
    bool batch_script = !g->sched.step && getppid() == from;
    return g->sched.signals_all && ddp_proc_is_slurmstepd(from) && !batch_script;
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct ddp_signals *g = h->data;
    struct note n;
    (void)events;
    while (status == 0 && read(g->fds[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
        g->fn(g->arg, n.signo, reached_all(g, n.from));
}

/* Handle signo, unless it was ignored when we started (nohup, a shell's `trap '' HUP`): it stays ignored. Not
 * SIGINT and SIGQUIT: a shell without job control ignores them for every `cmd &`, where a script's `kill -INT`
 * must still stop the job (the terminal's keys reach only the foreground group, never a background job). */
static void add(struct ddp_signals *g, int signo)
{
    for (int i = 0; i < g->n; i++)
        if (g->sigs[i] == signo)
            return;
    struct sigaction old;
    if (g->n >= (int)(sizeof(g->sigs) / sizeof(g->sigs[0])) || sigaction(signo, NULL, &old) < 0)
        return;
    if (signo != SIGINT && signo != SIGQUIT && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) {
        ddp_info("%s was ignored when ddplaunch started (nohup?): it stays ignored", ddp_report_signame(signo));
        return;
    }
    struct sigaction sa = {.sa_sigaction = on_raw, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, NULL) < 0) {
        ddp_warn("cannot handle signal %d: %s", signo, strerror(errno));
        return;
    }
    g->sigs[g->n++] = signo;
}

struct ddp_signals *ddp_signals_start(uv_loop_t *loop, const struct ddp_spec *spec, struct ddp_plan_sched sched,
                                      void (*fn)(void *arg, int signo, bool reached), void *arg)
{
    static const int base[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct ddp_signals *g = ddp_xcalloc(1, sizeof(*g));
    g->fn = fn;
    g->arg = arg;
    g->sched = sched;
    if (pipe2(g->fds, O_CLOEXEC | O_NONBLOCK) < 0 || uv_poll_init(loop, &g->poll, g->fds[0]) < 0) {
        ddp_warn("cannot handle signals: %s", strerror(errno));
        g->fds[0] = g->fds[1] = -1;
        return g;
    }
    g->poll.data = g;
    uv_poll_start(&g->poll, UV_READABLE, on_readable);
    note_fd = g->fds[1];
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
        add(g, base[i]);
    for (size_t i = 0; i < spec->signals_to_handle.n; i++) {
        int n = ddp_report_signum(spec->signals_to_handle.v[i]);
        if (n <= 0 || n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS || n == SIGILL || n == SIGFPE ||
            n == SIGCHLD || n == SIGPIPE)
            ddp_warn("signals_to_handle: ignoring '%s' (not a signal that can be forwarded)",
                     spec->signals_to_handle.v[i]);
        else
            add(g, n);
    }
    return g;
}

static void on_poll_closed(uv_handle_t *h)
{
    struct ddp_signals *g = h->data;
    close(g->fds[0]);
    close(g->fds[1]);
    g->fds[0] = g->fds[1] = -1;
}

void ddp_signals_close(struct ddp_signals *g)
{
    if (!g)
        return;
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (int i = 0; i < g->n; i++)
        sigaction(g->sigs[i], &dfl, NULL);
    g->n = 0;
    note_fd = -1;
    if (g->fds[0] >= 0)
        uv_close((uv_handle_t *)&g->poll, on_poll_closed);
}

void ddp_signals_tell(struct ddp_records *rec, int attempt, int signo, bool reached, bool kill, int alive)
{
    ddp_records_signal(rec, attempt, signo, reached,
                       kill                             ? "kill"
                       : ddp_policy_signal_stops(signo) ? "stop"
                                                        : "forward");
    const char *s = alive == 1 ? "" : "s";
    if (kill)
        ddp_error("got %s again: killing %d worker%s now", ddp_report_signame(signo), alive, s);
    else if (reached)
        ddp_info("got %s from Slurm, which signalled the %d worker%s too: not forwarded", ddp_report_signame(signo),
                 alive, s);
    else if (ddp_policy_signal_stops(signo))
        ddp_info("got %s: forwarding it to %d worker%s%s", ddp_report_signame(signo), alive, s,
                 signo == SIGINT ? " (again to kill them now)" : "");
    else
        ddp_info("got %s: forwarding it to %d worker%s", ddp_report_signame(signo), alive, s);
}
