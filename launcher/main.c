/* main: wires the modules together: cli -> launch (spec layers, topology, resolve, acquire) -> plan ->
 * supervise -> exit status. It decides nothing itself. Only main.c and the exec shim call exit(). */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "doctor.h"
#include "jobs.h"
#include "launch.h"
#include "plan.h"
#include "rundir.h"
#include "shim.h"
#include "supervise.h"
#include "timeline.h"
#include "topo.h"
#include "topo_print.h"
#include "util.h"

extern char **environ;

enum { EXIT_USAGE = 2, EXIT_LAUNCHER = 1 };

static int usage_error(const char *msg)
{
    fprintf(stderr, "ddplaunch: %s\nTry 'ddplaunch --help'.\n", msg);
    return EXIT_USAGE;
}

/* A failed launch step: its message, and the exit status it set. */
static int launch_error(const struct ddp_launch *l, const struct ddp_err *err)
{
    if (l->fail_usage)
        return usage_error(err->msg);
    fprintf(stderr, "ddplaunch: %s\n", err->msg);
    return l->fail_status;
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

/* `ddplaunch topo`: the topology with the GPUs other jobs lease now. */
static int topo_command(struct ddp_launch *l, const struct ddp_cli *cli, struct ddp_err *err)
{
    if (ddp_launch_load_topology(l, ddp_launch_topology_path(cli, environ), true, environ, err) < 0)
        return launch_error(l, err);
    struct ddp_launch_facts facts;
    ddp_launch_facts_gather(&facts, environ);
    char **holders = ddp_launch_holders(l->topo, facts.leases, facts.nleases, facts.self);
    int status = ddp_topo_print(l->topo, &l->spec, environ, (const char *const *)holders, cli->json, stdout);
    ddp_launch_holders_free(holders, ddp_topo_ngpus(l->topo));
    ddp_launch_facts_free(&facts);
    return status;
}

/* run, plan, doctor. */
static int launch_command(struct ddp_launch *l, const struct ddp_cli *cli, const char *argv0, struct ddp_err *err)
{
    struct ddp_launch_facts facts;
    struct ddp_attempt attempt = {0};
    int status;

    if (ddp_launch_check_spec(l, cli, environ, err) < 0 ||
        ddp_launch_load_topology(l, ddp_launch_topology_path(cli, environ), false, environ, err) < 0)
        return launch_error(l, err);
    ddp_launch_facts_gather(&facts, environ);
    int rc = ddp_launch_resolve(l, &facts, err);
    ddp_launch_facts_free(&facts);
    if (rc < 0)
        return launch_error(l, err);
    if (l->cmd == DDP_CMD_DOCTOR)
        return ddp_doctor_run(&l->ctx, cli->json, stdout);
    if (ddp_launch_acquire(l, environ, err) < 0)
        return launch_error(l, err);

    /* Attempt 0 as `plan` shows it, also before a run: what it rejects ([env] ${VAR} not set, too few
     * GPUs) is a usage error, exit 2, before anything starts. */
    if (ddp_plan_build(&l->ctx, 0, l->ctx.nproc, NULL, 0, &attempt, err) < 0) {
        fprintf(stderr, "ddplaunch: %s\n", err->msg);
        return EXIT_USAGE;
    }
    if (l->cmd == DDP_CMD_PLAN) {
        ddp_plan_print(stdout, &l->ctx, &attempt, cli->json);
        ddp_attempt_free(&attempt);
        return 0;
    }
    ddp_attempt_free(&attempt);

    if (ddp_launch_acquire_secret(l, environ, err) < 0)
        return launch_error(l, err);
    char *exe = self_exe(argv0);
    status = ddp_supervise_run(&l->ctx, exe, err);
    if (status == EXIT_LAUNCHER && err->msg[0])
        fprintf(stderr, "ddplaunch: %s\n", err->msg);
    free(exe);
    return status;
}

/* ddplaunch ps [--json] (jobs.h). */
static int ps_command(int argc, char **argv)
{
    bool json = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs("Usage: ddplaunch ps [--json]\n"
                  "\n"
                  "The ddplaunch jobs running on this host, of every user: job, user, pid, master\n"
                  "port, attempt, world size, ranks alive, age, GPUs and log directory. Read from\n"
                  "what each job publishes in the shared lock directory; no daemon.\n"
                  "\n"
                  "Exit status: 0 listed (also when there are none); 2 bad command line.\n"
                  "See ddplaunch(1).\n",
                  stdout);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else
            return usage_error("ps: unknown argument (expected --json)");
    }
    return ddp_jobs_command(ddp_rundir_lock_dir(environ), json, stdout);
}

/* ddplaunch report [--svg FILE] LOG_DIR|RUN_DIR (timeline.h). */
static int report_command(int argc, char **argv)
{
    const char *svg = NULL, *dir = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs("Usage: ddplaunch report [--svg FILE] LOG_DIR|RUN_DIR\n"
                  "\n"
                  "What happened in a run, from its records (events.jsonl, each rank's timed.log):\n"
                  "per attempt and rank the start, last output, end and how it ended, then the\n"
                  "timeouts, hang verdicts and decisions. LOG_DIR: its newest run. --svg FILE also\n"
                  "draws it as an SVG image (one lane per rank, the culprit of a hang in red).\n"
                  "\n"
                  "Exit status: 0 printed; 2 bad command line or no run records there.\n"
                  "See ddplaunch(1).\n",
                  stdout);
            return 0;
        }
        if (strcmp(argv[i], "--svg") == 0 && i + 1 < argc)
            svg = argv[++i];
        else if (strncmp(argv[i], "--svg=", 6) == 0)
            svg = argv[i] + 6;
        else if (argv[i][0] == '-' || dir)
            return usage_error(argv[i][0] == '-' ? "report: unknown option (expected --svg FILE)"
                                                 : "report: one LOG_DIR or RUN_DIR expected");
        else
            dir = argv[i];
    }
    if (!dir)
        return usage_error("report: a LOG_DIR or RUN_DIR is needed");
    return ddp_timeline_command(dir, svg, stdout);
}

int main(int argc, char **argv)
{
    hold_std_fds();
    if (argc > 1 && strcmp(argv[1], "--exec-shim") == 0)
        return ddp_shim_main(argc, argv);

    /* SIGUSR1/SIGUSR2 must not kill the launcher: Slurm sends them to every process of a step as a preemption
     * warning (--signal=USR1@T), and workers get them directly. A handler (not SIG_IGN) so that exec'd workers
     * start with the default disposition; with signals_to_handle listing them, the supervisor forwards them. */
    struct sigaction sa = {.sa_handler = ignore_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    if (argc > 1 && strcmp(argv[1], "report") == 0)
        return report_command(argc, argv);
    if (argc > 1 && strcmp(argv[1], "ps") == 0)
        return ps_command(argc, argv);

    struct ddp_cli cli;
    struct ddp_err err = {0};
    if (ddp_cli_parse(argc, argv, &cli, &err) < 0) {
        ddp_cli_free(&cli);
        return usage_error(err.msg);
    }
    ddp_log_verbosity = DDP_LOG_INFO + cli.verbosity;
    ddp_log_colour = ddp_log_colour_wanted(isatty(STDERR_FILENO) == 1, environ);

    int status = 0;
    struct ddp_launch l;
    switch (cli.cmd) {
    case DDP_CMD_HELP:
        ddp_cli_help_cmd(stdout, cli.sub);
        break;
    case DDP_CMD_VERSION:
        printf("ddplaunch %s\n", DDP_VERSION);
        break;
    case DDP_CMD_KEYS:
        ddp_cli_help_keys(stdout);
        break;
    case DDP_CMD_TOPO:
    case DDP_CMD_RUN:
    case DDP_CMD_PLAN:
    case DDP_CMD_DOCTOR:
        ddp_launch_init(&l, cli.cmd);
        if (ddp_launch_load_spec(&l, &cli, environ, &err) < 0)
            status = launch_error(&l, &err);
        else if (cli.cmd == DDP_CMD_TOPO)
            status = topo_command(&l, &cli, &err);
        else
            status = launch_command(&l, &cli, argv[0], &err);
        ddp_launch_free(&l);
        break;
    }
    ddp_cli_free(&cli);
    return status;
}
