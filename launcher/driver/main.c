/* main: wires the modules together: cli (which command, which options) -> that command's module: run is
 * launch (spec layers, topology, resolve, acquire) -> plan -> supervise -> exit status; plan, doctor, topo,
 * report and ps print. It decides nothing itself. Only main.c and the exec shim call exit(). */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exit.h"
#include "base/util.h"
#include "doctor/doctor.h"
#include "driver/gpus.h"
#include "driver/launch.h"
#include "driver/parts.h"
#include "driver/supervise.h"
#include "host/jobs.h"
#include "host/rundir.h"
#include "records/timeline.h"
#include "records/verdict.h"
#include "run/plan.h"
#include "run/replaced.h"
#include "run/shim.h"
#include "run/standby.h"
#include "spec/cli.h"
#include "topo/nvml.h"
#include "topo/topo.h"
#include "topo/topo_print.h"

extern char **environ;

/* An error before the workers start: labelled and coloured as the supervisor's errors are (util.h ddp_log);
 * each line of msg labelled (a job spec's errors come together, one per line). */
static void error_line(const char *msg)
{
    for (;;) {
        const char *nl = strchr(msg, '\n');
        int n = nl ? (int)(nl - msg) : (int)strlen(msg);
        fprintf(stderr, "ddplaunch: %serror: %s%.*s\n", ddp_colour(DDP_COLOUR_RED), ddp_colour(DDP_COLOUR_RESET), n,
                msg);
        if (!nl)
            break;
        msg = nl + 1;
    }
}

static int usage_error(const char *msg)
{
    error_line(msg);
    fputs("Try 'ddplaunch --help'.\n", stderr);
    return DDP_EXIT_USAGE;
}

/* A failed launch step: its message, and the exit status it set. */
static int launch_error(const struct ddp_launch *l, const struct ddp_err *err)
{
    if (l->fail_usage)
        return usage_error(err->msg);
    error_line(err->msg);
    return l->fail_status;
}

/* The running binary, opened at start (O_PATH): shims are started from /proc/self/fd/N, so that a package upgrade
 * that removes or replaces the file mid-job does not break the next restart. -1 when /proc is missing. */
static int self_fd = -1;

static void open_self(void)
{
    int fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
    if (fd < 0)
        return;
    /* above the fds a spawn puts in place (stdin, stdout, stderr, the shim's report pipe at 3) */
    self_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
}

static char *self_exe(const char *argv0)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = '\0';
        return ddp_xstrdup(buf);
    }
    return ddp_xstrdup(argv0);
}

/* Started with 0, 1 or 2 closed (cron, `<&-`, `>&-`): hold them on /dev/null before anything opens a file, so
 * that no pipe, log file or libuv's epoll fd lands there (libuv asserts when closing one, and workers would
 * read the epoll fd as their stdin). Output to a closed stdout is then discarded, as the caller asked. */
static void hold_std_fds(void)
{
    for (;;) {
        int fd = open("/dev/null", O_RDWR);
        if (fd < 0)
            return;
        if (fd > STDERR_FILENO) {
            close(fd);
            return;
        }
    }
}

static void ignore_signal(int signo)
{
    (void)signo;
}

/* The spec's layers for a launching command; 0, or the exit status of the failed step (its message printed). */
static int load_spec(struct ddp_launch *l, const struct ddp_cli *cli, struct ddp_err *err)
{
    ddp_launch_init(l, cli->cmd);
    return ddp_launch_load_spec(l, cli, environ, err) < 0 ? launch_error(l, err) : 0;
}

/* `ddplaunch topo`: the topology with the GPUs other jobs lease now. */
static int topo_command(const struct ddp_cli *cli, const char *argv0)
{
    struct ddp_launch l;
    struct ddp_err err = {0};
    struct ddp_launch_facts facts;
    int status;
    (void)argv0;
    if ((status = load_spec(&l, cli, &err)) != 0)
        goto out;
    if (ddp_launch_load_topology(&l, ddp_launch_topology_path(cli, environ), true, environ, &err) < 0) {
        status = launch_error(&l, &err);
        goto out;
    }
    ddp_launch_facts_gather(&facts, &l, environ);
    if (ddp_launch_scheduler(&l, environ, &err) < 0) /* the picks then ignore the scheduler's GPUs */
        ddp_debug("topo: %s", err.msg);
    char **holders = ddp_launch_holders(l.topo, facts.leases, facts.nleases, facts.self);
    status = ddp_topo_print(l.topo, &l.spec, environ, l.sched.gpus, (const char *const *)holders, cli->json, stdout);
    ddp_launch_holders_free(holders, ddp_topo_ngpus(l.topo));
    ddp_launch_facts_free(&facts);
out:
    ddp_launch_free(&l);
    return status;
}

/* run, plan, doctor: the spec, its checks, the topology, resolve; 0 or the failed step's exit status. */
static int resolve(struct ddp_launch *l, const struct ddp_cli *cli, struct ddp_err *err)
{
    struct ddp_launch_facts facts;
    int status;
    if ((status = load_spec(l, cli, err)) != 0)
        return status;
    if (ddp_launch_check_spec(l, cli, environ, err) < 0 ||
        ddp_launch_load_topology(l, ddp_launch_topology_path(cli, environ), false, environ, err) < 0)
        return launch_error(l, err);
    ddp_launch_facts_gather(&facts, l, environ);
    int rc = ddp_launch_resolve(l, &facts, err);
    ddp_launch_facts_free(&facts);
    return rc < 0 ? launch_error(l, err) : 0;
}

/* After resolve: acquire, then attempt 0 as `plan` shows it (also before a run: what it rejects, [env] ${VAR} not
 * set, too few GPUs, is a usage error before anything starts). 0 or the failed step's exit status. */
static int acquire_and_plan(struct ddp_launch *l, struct ddp_attempt *attempt, char ***held, struct ddp_err *err)
{
    if (ddp_launch_acquire(l, environ, err) < 0)
        return launch_error(l, err);
    if (ddp_plan_build(&l->ctx, 0, l->ctx.nproc, NULL, 0, attempt, err) < 0) {
        error_line(err->msg);
        return DDP_EXIT_USAGE;
    }
    struct ddp_strv notes = {0}; /* what the workers get instead of the launcher's own settings */
    ddp_replaced_notes(environ, l->ctx.job.spec, attempt, &notes);
    for (size_t i = 0; i < notes.n; i++)
        ddp_info("%s", notes.v[i]);
    ddp_strv_clear(&notes);
    /* the chosen GPUs as NVML sees them now (gpus.h says when: before the spawn, or beside it) */
    if (ddp_gpus_launch_check(l->topo, &l->spec, l->cmd == DDP_CMD_RUN, attempt, stderr, held, err) < 0) {
        error_line(err->msg);
        return DDP_EXIT_TEMPFAIL;
    }
    l->ctx.gpus.held = held ? (const char *const *)*held : NULL;
    return 0;
}

static int doctor_command(const struct ddp_cli *cli, const char *argv0)
{
    struct ddp_launch l;
    struct ddp_err err = {0};
    (void)argv0;
    int status = resolve(&l, cli, &err);
    if (status == 0) {
        struct ddp_doctor_config dc = ddp_parts_doctor(&l.ctx);
        status = ddp_doctor_run(&dc, cli->json, stdout);
    }
    ddp_launch_free(&l);
    return status;
}

static int plan_command(const struct ddp_cli *cli, const char *argv0)
{
    struct ddp_launch l;
    struct ddp_err err = {0};
    struct ddp_attempt attempt = {0};
    (void)argv0;
    char **held = NULL;
    int status = resolve(&l, cli, &err);
    if (status == 0 && (status = acquire_and_plan(&l, &attempt, &held, &err)) == 0) {
        if (!cli->json && !cli->full && isatty(STDOUT_FILENO)) /* one screen; a pipe or file gets it all */
            ddp_plan_print_brief(stdout, &l.ctx, &attempt);
        else
            ddp_plan_print(stdout, &l.ctx, &attempt, cli->json);
        if (!cli->json)
            ddp_standby_print_plan(stdout, l.ctx.job.spec, &attempt);
    }
    ddp_attempt_free(&attempt);
    ddp_gpus_held_free(held, ddp_topo_ngpus(l.topo));
    ddp_launch_free(&l);
    return status;
}

/* A run refused before any worker started: with a log_dir, its record (verdict.h), so that summary.json always
 * exists for a requeue script. */
static void record_refusal(const struct ddp_launch *l, int status, const char *reason)
{
    const struct ddp_spec *sp = l->resolved.log_dir ? &l->resolved : &l->spec;
    const char *prog = sp->script ? sp->script : sp->module ? sp->module : sp->program;
    struct ddp_verdict_refusal v = {.log_dir = sp->log_dir,
                                    .ld = l->logdir,
                                    .run_id = l->run_id,
                                    .job = sp->name,
                                    .program = prog            ? prog
                                               : sp->command.n ? sp->command.v[0]
                                                               : NULL,
                                    .host = l->hostname[0] ? l->hostname : NULL,
                                    .node_rank = l->run_id ? l->ctx.node_rank : -1,
                                    .nnodes = l->run_id ? l->ctx.nnodes : 0,
                                    .status = status,
                                    .reason = reason};
    ddp_verdict_refused(&v);
}

static int run_command(const struct ddp_cli *cli, const char *argv0)
{
    struct ddp_launch l;
    struct ddp_err err = {0};
    struct ddp_attempt attempt = {0};
    int status = resolve(&l, cli, &err);
    /* before anything starts: the open files this job needs (the soft limit raised toward the hard one) */
    if (status == 0 && ddp_nofile_ensure(l.ctx.nproc, &err) < 0) {
        error_line(err.msg);
        status = DDP_EXIT_USAGE;
    }
    char **held = NULL;
    if (status == 0)
        status = acquire_and_plan(&l, &attempt, &held, &err);
    ddp_attempt_free(&attempt);
    if (status == 0 && ddp_launch_acquire_secret(&l, environ, &err) < 0)
        status = launch_error(&l, &err);
    if (status == 0) {
        char *exe = self_exe(argv0), fdpath[32];
        snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", self_fd);
        status = ddp_supervise_run(&l.ctx, exe, self_fd >= 0 ? fdpath : exe, &err);
        if (status == DDP_EXIT_LAUNCHER && err.msg[0])
            error_line(err.msg);
        free(exe);
    } else {
        record_refusal(&l, status, err.msg);
    }
    ddp_gpus_held_free(held, ddp_topo_ngpus(l.topo));
    ddp_launch_free(&l);
    return status;
}

/* ddplaunch ps [--json] (jobs.h). */
static int ps_command(const struct ddp_cli *cli, const char *argv0)
{
    (void)argv0;
    return ddp_jobs_command(ddp_rundir_lock_dir(environ), cli->json, stdout);
}

/* ddplaunch report [--svg FILE] LOG_DIR|RUN_DIR (timeline.h). */
static int report_command(const struct ddp_cli *cli, const char *argv0)
{
    (void)argv0;
    return ddp_timeline_command(cli->dir, cli->svg, stdout);
}

static int help_command(const struct ddp_cli *cli, const char *argv0)
{
    (void)argv0;
    ddp_cli_help_cmd(stdout, cli->sub);
    return DDP_EXIT_OK;
}

static int version_command(const struct ddp_cli *cli, const char *argv0)
{
    (void)cli, (void)argv0;
    printf("ddplaunch %s\n", DDP_VERSION);
    return DDP_EXIT_OK;
}

static int keys_command(const struct ddp_cli *cli, const char *argv0)
{
    (void)cli, (void)argv0;
    ddp_cli_help_keys(stdout);
    return DDP_EXIT_OK;
}

/* Each command of cli.h's table, wired to the module that carries it out. */
typedef int command_fn(const struct ddp_cli *cli, const char *argv0);
static command_fn *const commands[DDP_CMD_COUNT] = {
    [DDP_CMD_RUN] = run_command,       [DDP_CMD_PLAN] = plan_command,       [DDP_CMD_TOPO] = topo_command,
    [DDP_CMD_DOCTOR] = doctor_command, [DDP_CMD_REPORT] = report_command,   [DDP_CMD_PS] = ps_command,
    [DDP_CMD_HELP] = help_command,     [DDP_CMD_VERSION] = version_command, [DDP_CMD_KEYS] = keys_command,
};

int main(int argc, char **argv)
{
    hold_std_fds();
    if (argc > 1 && strcmp(argv[1], "--exec-shim") == 0)
        return ddp_shim_main(argc, argv);
    ddp_shim_title_area(argc, argv);
    open_self();

    /* SIGUSR1/SIGUSR2 must not kill the launcher: Slurm sends them to every process of a step as a preemption
     * warning (--signal=USR1@T), and workers get them directly. A handler (not SIG_IGN) so that exec'd workers
     * start with the default disposition; with signals_to_handle listing them, the supervisor forwards them. */
    struct sigaction sa = {.sa_handler = ignore_signal}, old;
    sigemptyset(&sa.sa_mask);
    for (int sig = SIGUSR1; sig; sig = sig == SIGUSR1 ? SIGUSR2 : 0)
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN) /* ignored at start: stays so */
            sigaction(sig, &sa, NULL);

    struct ddp_cli cli;
    struct ddp_err err = {0};
    int status;
    ddp_log_colour = ddp_log_colour_wanted(isatty(STDERR_FILENO) == 1, environ);
    if (ddp_cli_parse(argc, argv, &cli, &err) < 0) {
        status = usage_error(err.msg);
    } else {
        ddp_log_verbosity = DDP_LOG_INFO + cli.verbosity;
        status = commands[cli.cmd](&cli, argv[0]);
    }
    ddp_cli_free(&cli);
    if (ddp_nvml_stuck()) { /* an NVML call that never returned: its library's destructors could wait for it */
        fflush(NULL);
        _exit(status);
    }
    return status;
}
