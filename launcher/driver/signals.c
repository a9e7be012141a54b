/* signals: see signals.h. */
#include "driver/signals.h"

#include <signal.h>

#include "base/util.h"
#include "records/report.h"

struct ddp_signals {
    uv_signal_t sigs[16];
    int n;
    void (*fn)(void *arg, int signo);
    void *arg;
};

static void on_signal(uv_signal_t *h, int signo)
{
    struct ddp_signals *g = h->data;
    g->fn(g->arg, signo);
}

static void add(struct ddp_signals *g, uv_loop_t *loop, int signo)
{
    for (int i = 0; i < g->n; i++)
        if (g->sigs[i].signum == signo)
            return;
    if (g->n >= (int)(sizeof(g->sigs) / sizeof(g->sigs[0])))
        return;
    uv_signal_t *h = &g->sigs[g->n];
    int rc = uv_signal_init(loop, h);
    if (rc < 0) { /* not initialised: never started nor closed */
        ddp_warn("cannot handle signal %d: %s", signo, uv_strerror(rc));
        return;
    }
    g->n++;
    h->data = g;
    uv_signal_start(h, on_signal, signo);
}

struct ddp_signals *ddp_signals_start(uv_loop_t *loop, const struct ddp_spec *spec, void (*fn)(void *arg, int signo),
                                      void *arg)
{
    static const int base[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct ddp_signals *g = ddp_xcalloc(1, sizeof(*g));
    g->fn = fn;
    g->arg = arg;
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
        add(g, loop, base[i]);
    for (size_t i = 0; i < spec->signals_to_handle.n; i++) {
        int n = ddp_report_signum(spec->signals_to_handle.v[i]);
        if (n <= 0 || n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS || n == SIGILL || n == SIGFPE ||
            n == SIGCHLD || n == SIGPIPE)
            ddp_warn("signals_to_handle: ignoring '%s' (not a signal that can be forwarded)",
                     spec->signals_to_handle.v[i]);
        else
            add(g, loop, n);
    }
    return g;
}

void ddp_signals_close(struct ddp_signals *g)
{
    for (int i = 0; g && i < g->n; i++)
        uv_close((uv_handle_t *)&g->sigs[i], NULL);
}
