/* cli: see cli.h. One table of flags; every torchrun flag maps onto a spec key or a cli field. */
#include "spec/cli.h"
#include "spec/cli_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CMD(c) (1u << (c))
#define LAUNCHING (CMD(DDP_CMD_RUN) | CMD(DDP_CMD_PLAN) | CMD(DDP_CMD_TOPO) | CMD(DDP_CMD_DOCTOR))

/* clang-format off */
const struct ddp_cli_flag ddp_cli_flags[] = {
    { "nnodes", 0, F_KEY, "job", "nnodes", NULL, "PET_NNODES", "N|MIN:MAX", "number of nodes [1]", LAUNCHING },
    { "nproc-per-node", 0, F_KEY, "job", "nproc_per_node", NULL, "PET_NPROC_PER_NODE", "N|gpu|cpu|auto",
      "workers on this node [1]", LAUNCHING },
    { "node-rank", 0, F_KEY, "job", "node_rank", NULL, "PET_NODE_RANK", "N", "rank of this node [0]", LAUNCHING },
    { "master-addr", 0, F_KEY, "job", "master_addr", NULL, "PET_MASTER_ADDR", "ADDR",
      "address of rank 0's node [127.0.0.1]", LAUNCHING },
    { "master-port", 0, F_KEY, "job", "master_port", NULL, "PET_MASTER_PORT", "PORT|auto",
      "rank 0's port [auto: a free port, reserved host-wide]", LAUNCHING },
    { "max-restarts", 0, F_KEY, "restart", "max_restarts", NULL, "PET_MAX_RESTARTS", "N", "restarts allowed [0]", LAUNCHING },
    { "monitor-interval", 0, F_IGNORED, NULL, NULL, NULL, "PET_MONITOR_INTERVAL", "SECS",
      "accepted; ddplaunch is event-driven and does not poll", LAUNCHING },
    { "start-method", 0, F_IGNORED, NULL, NULL, NULL, "PET_START_METHOD", "METHOD",
      "accepted; workers are always fresh processes (spawn)", LAUNCHING },
    { "standalone", 0, F_KEY_YES, "job", "standalone", NULL, "PET_STANDALONE", NULL,
      "single node on localhost with a free port", LAUNCHING },
    { "rdzv-backend", 0, F_KEY, "job", "rdzv_backend", NULL, "PET_RDZV_BACKEND", "NAME",
      "static (each node gives --node-rank), c10d (ranks given at join) or etcd-v3 (no node must survive)",
      LAUNCHING },
    { "rdzv-endpoint", 0, F_KEY, "job", "rdzv_endpoint", NULL, "PET_RDZV_ENDPOINT", "HOST[:PORT]",
      "c10d: the agent on HOST serves [29400]; static: master address; etcd-v3: HOST:PORT,... of etcd members",
      LAUNCHING },
    { "rdzv-id", 0, F_KEY, "job", "run_id", NULL, "PET_RDZV_ID", "ID", "run id (TORCHELASTIC_RUN_ID)", LAUNCHING },
    { "rdzv-conf", 0, F_KEY, "job", "rdzv_conf", NULL, "PET_RDZV_CONF", "K=V,...", "torchrun's; join_timeout, last_call_timeout (seconds); etcd: protocol, cacert, cert, key", LAUNCHING },
    { "role", 0, F_KEY, "job", "role", NULL, "PET_ROLE", "NAME", "role name [default]", LAUNCHING },
    { "module", 'm', F_MODULE, NULL, NULL, NULL, "PET_MODULE", NULL, "run the target as a Python module (also '-- -m MOD')", LAUNCHING },
    { "no-python", 0, F_NO_PYTHON, NULL, NULL, NULL, "PET_NO_PYTHON", NULL,
      "run the target directly, not with python3", LAUNCHING },
    { "run-path", 0, F_KEY_YES, "job", "run_path", NULL, "PET_RUN_PATH", NULL, "accepted for compatibility", LAUNCHING },
    { "log-dir", 0, F_KEY, "job", "log_dir", NULL, "PET_LOG_DIR", "DIR",
      "per-attempt, per-rank log files and error files", LAUNCHING },
    { "trust-log-dir", 0, F_KEY_YES, "job", "trust_log_dir", NULL, NULL, NULL,
      "use --log-dir even in a directory others may change", LAUNCHING },
    { "redirects", 'r', F_KEY, "job", "redirects", NULL, "PET_REDIRECTS", "0-3|R:V,...",
      "send worker output to log files only: 1 stdout, 2 stderr, 3 both", LAUNCHING },
    { "tee", 't', F_KEY, "job", "tee", NULL, "PET_TEE", "0-3|R:V,...",
      "copy worker output to log files too", LAUNCHING },
    { "local-ranks-filter", 0, F_KEY, "job", "local_ranks_filter", NULL, "PET_LOCAL_RANKS_FILTER", "R,...",
      "show only these local ranks on the console", LAUNCHING },
    { "local-addr", 0, F_KEY, "job", "local_addr", NULL, "PET_LOCAL_ADDR", "ADDR", "address of this node", LAUNCHING },
    { "logs-specs", 0, F_IGNORED, NULL, NULL, NULL, "PET_LOGS_SPECS", "NAME",
      "accepted; log layout is ddplaunch's own", LAUNCHING },
    { "numa-binding", 0, F_KEY, "numa", "bind", NULL, "PET_NUMA_BINDING", "MODE",
      "node, socket, exclusive, core-complex or none [node]", LAUNCHING },
    { "signals-to-handle", 0, F_KEY, "job", "signals_to_handle", NULL, "PET_SIGNALS_TO_HANDLE", "SIG,...",
      "signals forwarded to workers [SIGTERM,SIGINT,SIGHUP,SIGQUIT]", LAUNCHING },
    { "virtual-local-rank", 0, F_KEY_FIXED, "gpus", "visible", "virtual", "PET_VIRTUAL_LOCAL_RANK", NULL,
      "LOCAL_RANK=0; each worker sees only its GPU", LAUNCHING },
    { "shutdown-timeout", 0, F_KEY, "restart", "shutdown_timeout", NULL, "PET_SHUTDOWN_TIMEOUT",
      "DURATION", "grace between SIGTERM and SIGKILL [30s]", LAUNCHING },
    { "event-log-handler", 0, F_IGNORED, NULL, NULL, NULL, "PET_EVENT_LOG_HANDLER", "NAME",
      "accepted; ddplaunch logs its own events", LAUNCHING },
    { "duplicate-stdout-filters", 0, F_KEY, "job", "dup_stdout_filters", NULL, "PET_DUPLICATE_STDOUT_FILTERS",
      "S,...", "stdout lines holding one also go to attempt_N/filtered_stdout.log", LAUNCHING },
    { "duplicate-stderr-filters", 0, F_KEY, "job", "dup_stderr_filters", NULL, "PET_DUPLICATE_STDERR_FILTERS",
      "S,...", "stderr lines holding one also go to attempt_N/filtered_stderr.log", LAUNCHING },
    { "console", 0, F_KEY, "job", "console", NULL, NULL, "auto|raw|lines",
      "worker output: raw bytes, or prefixed lines [auto]", LAUNCHING },
    { "warm-restart", 0, F_KEY_YES, "restart", "warm", NULL, NULL, NULL,
      "restarted ranks run in standby interpreters that imported torch before the failure (warm = yes; the "
      "default, auto: Python jobs with restarts allowed, where memory allows)", LAUNCHING },
    { "share-gpus", 0, F_KEY_YES, "gpus", "share", NULL, NULL, NULL,
      "more workers than GPUs: they share them, round-robin", LAUNCHING },
    { "set", 0, F_SET, NULL, NULL, NULL, NULL, "SECTION.KEY=VALUE", "set any job spec key", LAUNCHING },
    { "json", 0, F_JSON, NULL, NULL, NULL, NULL, NULL, "machine-readable output (plan, topo, doctor, ps)",
      CMD(DDP_CMD_PLAN) | CMD(DDP_CMD_TOPO) | CMD(DDP_CMD_DOCTOR) | CMD(DDP_CMD_PS) }, /* a run ignored it */
    { "full", 0, F_FULL, NULL, NULL, NULL, NULL, NULL,
      "plan: every setting and each rank's environment (the default when stdout is no terminal)", CMD(DDP_CMD_PLAN) },
    { "svg", 0, F_SVG, NULL, NULL, NULL, NULL, "FILE", "report: also draw the run as an SVG image",
      CMD(DDP_CMD_REPORT) },
    { "topology", 0, F_TOPOLOGY, NULL, NULL, NULL, NULL, "FILE.xml",
      "use an hwloc XML export instead of this machine", LAUNCHING },
    { "config", 0, F_CONFIG, NULL, NULL, NULL, NULL, "FILE", "site config file instead of the default", LAUNCHING },
    { "verbose", 'v', F_VERBOSE, NULL, NULL, NULL, NULL, NULL, "say more", LAUNCHING },
    { "quiet", 'q', F_QUIET, NULL, NULL, NULL, NULL, NULL, "say only warnings and errors", LAUNCHING },
    { "help-keys", 0, F_KEYS, NULL, NULL, NULL, NULL, NULL, "list every job spec key", LAUNCHING },
    { "help", 'h', F_HELP, NULL, NULL, NULL, NULL, NULL, "this help", ~0u },
    { "version", 'V', F_VERSION, NULL, NULL, NULL, NULL, NULL, "print the version", LAUNCHING },
};
/* clang-format on */
#define NFLAGS (sizeof ddp_cli_flags / sizeof ddp_cli_flags[0])
const size_t ddp_cli_nflags = NFLAGS;

static bool takes_arg(const struct ddp_cli_flag *f)
{
    return f->kind == F_KEY || f->kind == F_IGNORED || f->kind == F_SET || f->kind == F_TOPOLOGY ||
           f->kind == F_CONFIG || f->kind == F_SVG;
}

const char *const *ddp_cli_flag_names(void)
{
    static const char *names[NFLAGS + 1];
    static char buf[NFLAGS][40];
    for (size_t i = 0; i < NFLAGS; i++) {
        snprintf(buf[i], sizeof buf[i], "--%s", ddp_cli_flags[i].name);
        names[i] = buf[i];
    }
    names[NFLAGS] = NULL;
    return names;
}

bool ddp_cli_flag_takes(const struct ddp_cli_flag *f, enum ddp_cmd cmd)
{
    return (f->cmds & CMD(cmd)) != 0;
}

/* Whether the flag named n starts with name[0..len), '_' standing for '-' ("--nproc_per" starts "nproc-per-node"). */
static bool name_starts(const char *n, const char *name, size_t len)
{
    if (strlen(n) < len)
        return false;
    for (size_t j = 0; j < len; j++)
        if (n[j] != name[j] && !(n[j] == '-' && name[j] == '_'))
            return false;
    return true;
}

/* The flag a long option names for command cmd: its full name ("--nproc_per_node" and "--nproc-per-node" are the
 * same flag) or, as argparse does, an unambiguous prefix of one ("--nproc", "--nnode"). NULL when none or several
 * match; then cands holds the *ncands flags that start with it (0: unknown, 2 or more: ambiguous). */
static const struct ddp_cli_flag *find_long(const char *name, size_t len, enum ddp_cmd cmd,
                                            const struct ddp_cli_flag **cands, size_t *ncands)
{
    *ncands = 0;
    for (size_t i = 0; i < NFLAGS; i++) {
        const struct ddp_cli_flag *f = &ddp_cli_flags[i];
        if (!ddp_cli_flag_takes(f, cmd) || !name_starts(f->name, name, len))
            continue;
        if (strlen(f->name) == len)
            return f;
        cands[(*ncands)++] = f;
    }
    return *ncands == 1 ? cands[0] : NULL;
}

/* The flag of that exact dash-form name, whoever takes it (the help lists, messages). */
const struct ddp_cli_flag *ddp_cli_flag_find(const char *name)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (strcmp(ddp_cli_flags[i].name, name) == 0)
            return &ddp_cli_flags[i];
    return NULL;
}

static const struct ddp_cli_flag *find_short(char c, enum ddp_cmd cmd)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (ddp_cli_flags[i].short_name == c && ddp_cli_flag_takes(&ddp_cli_flags[i], cmd))
            return &ddp_cli_flags[i];
    return NULL;
}

static void add_set(struct ddp_cli *cli, const char *section, const char *key, const char *value, const char *flag)
{
    char *name = ddp_xasprintf("%s.%s", section, key);
    /* A later flag wins over an earlier one, as with argparse. */
    struct ddp_kvlist *l = &cli->sets;
    ddp_kvlist_remove(l, name); /* to the end: the order of flags is the order they apply in */
    ddp_kvlist_set(l, name, value, DDP_ORIGIN_CLI, flag, 0);
    free(name);
}

static int apply_flag(struct ddp_cli *cli, const struct ddp_cli_flag *f, const char *shown, const char *arg,
                      struct ddp_err *err)
{
    switch (f->kind) {
    case F_KEY:
        add_set(cli, f->section, f->key, arg, shown);
        break;
    case F_KEY_YES:
        add_set(cli, f->section, f->key, "yes", shown);
        break;
    case F_KEY_FIXED:
        add_set(cli, f->section, f->key, f->fixed, shown);
        break;
    case F_IGNORED:
    case F_IGNORED0:
        break;
    case F_MODULE:
        cli->module = true;
        break;
    case F_NO_PYTHON:
        cli->no_python = true;
        break;
    case F_SET: {
        const char *dot = strchr(arg, '.');
        const char *eq = strchr(arg, '=');
        if (!dot || !eq || dot > eq || dot == arg || eq == dot + 1)
            return ddp_errf(err, -EINVAL, "--set: expected SECTION.KEY=VALUE, got '%s'", arg);
        char *section = ddp_xstrndup(arg, (size_t)(dot - arg));
        char *key = ddp_xstrndup(dot + 1, (size_t)(eq - dot - 1));
        add_set(cli, section, key, eq + 1, "--set");
        free(section);
        free(key);
        break;
    }
    case F_JSON:
        cli->json = true;
        break;
    case F_FULL:
        cli->full = true;
        break;
    case F_TOPOLOGY:
        free(cli->topology);
        cli->topology = ddp_xstrdup(arg);
        break;
    case F_CONFIG:
        free(cli->config);
        cli->config = ddp_xstrdup(arg);
        break;
    case F_HELP:
        cli->cmd = DDP_CMD_HELP;
        break;
    case F_VERSION:
        cli->cmd = DDP_CMD_VERSION;
        break;
    case F_KEYS:
        cli->cmd = DDP_CMD_KEYS;
        break;
    case F_VERBOSE:
        cli->verbosity++;
        break;
    case F_QUIET:
        cli->verbosity--;
        break;
    case F_SVG:
        free(cli->svg);
        cli->svg = ddp_xstrdup(arg);
        break;
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *const plan_listed[] = {"json", "full", "topology", "config", "set", "help", NULL};
static const char *const topo_listed[] = {"json", "topology", "config", "set", "nproc-per-node", "help", NULL};
static const char *const doctor_listed[] = {"json", "topology", "config", "set", "master-port", "help", NULL};
static const char *const ps_listed[] = {"json", "help", NULL};
static const char *const report_listed[] = {"svg", "help", NULL};

const struct ddp_cli_subcmd ddp_cli_subcmds[] = {
    {NULL, DDP_CMD_RUN, POS_LAUNCH, NULL, NULL, NULL, NULL},
    {"plan", DDP_CMD_PLAN, POS_LAUNCH, "plan [options] JOB.ini|SCRIPT ...\tdry run",
     "Usage: ddplaunch plan [options] JOB.ini [-- extra args for the program]\n"
     "       ddplaunch plan [options] SCRIPT.py|PROGRAM [args...]\n"
     "\n"
     "Dry run: print every setting and where it came from, the GPUs ddplaunch would\n"
     "pick and why, and per local rank the command, GPU, NUMA node, CPUs, memory nodes\n"
     "and environment it would get (every variable ddplaunch adds, \"<run dir>\" for the\n"
     "directory a run makes; ranks after the first show what differs). Starts nothing\n"
     "and reserves nothing.\n"
     "\n"
     "Takes every option of a launch (see 'ddplaunch --help'), and:\n",
     plan_listed, "Exit status: 0 printed; 2 bad command line or job spec; 1 launcher failure.\n"},
    {"topo", DDP_CMD_TOPO, POS_LAUNCH, "topo [--topology FILE.xml] [--json]\tGPUs, NUMA, links",
     "Usage: ddplaunch topo [--topology FILE.xml] [--json] [options]\n"
     "\n"
     "Print the GPU x GPU link matrix (as nvidia-smi topo -m), each GPU's CPU and\n"
     "NUMA affinity, the NUMA nodes with the CPUs this process may use, GPUs leased by\n"
     "other jobs, and the GPUs ddplaunch would pick for 1, 2, 4 and 8 workers, with\n"
     "the reason.\n"
     "\n"
     "Options:\n",
     topo_listed, "Exit status: 0 printed; 2 bad input (an unreadable --topology file); 1 failure.\n"},
    {"doctor", DDP_CMD_DOCTOR, POS_LAUNCH, "doctor [options] [JOB.ini]\tpreflight checks",
     "Usage: ddplaunch doctor [options] [JOB.ini | SCRIPT.py ...]\n"
     "\n"
     "Preflight checks for the usual causes of NCCL timeouts and failed starts, for\n"
     "the job the same options and JOB.ini describe: GPUs it would pick, NUMA span,\n"
     "busy GPUs, leases, driver, devices, libnccl, NCCL variables, master port and\n"
     "address, network interface, allowed CPUs and memory, open-files limit, runtime\n"
     "directories. One line per check: STATUS CHECK FOUND[; WHAT TO DO]. Starts\n"
     "nothing.\n"
     "\n"
     "Takes every option of a launch (see 'ddplaunch --help'), and:\n",
     doctor_listed, "Exit status: 0 all ok; 1 a warning; 2 a failure (or bad input).\n"},
    {"report", DDP_CMD_REPORT, POS_DIR, "report [--svg FILE] LOG_DIR\ta run's timeline",
     "Usage: ddplaunch report [--svg FILE] LOG_DIR|RUN_DIR\n"
     "\n"
     "What happened in a run, from its records (events.jsonl, each rank's timed.log):\n"
     "per attempt and rank the start, last output, end and how it ended, then the\n"
     "timeouts, hang verdicts and decisions. LOG_DIR: its newest run. --svg FILE also\n"
     "draws it as an SVG image (one lane per rank, the culprit of a hang in red).\n"
     "\n"
     "Options:\n",
     report_listed, "Exit status: 0 printed; 2 bad command line or no run records there.\n"},
    {"ps", DDP_CMD_PS, POS_NONE, "ps [--json]\tjobs on this host",
     "Usage: ddplaunch ps [--json]\n"
     "\n"
     "The ddplaunch jobs running on this host, of every user: job, user, pid, master\n"
     "port, attempt, world size, ranks alive, age, GPUs and log directory. Read from\n"
     "what each job publishes in the shared lock directory; no daemon.\n"
     "\n"
     "Options:\n",
     ps_listed, "Exit status: 0 listed (also when there are none); 2 bad command line.\n"},
};
#define NSUBCMDS (sizeof ddp_cli_subcmds / sizeof ddp_cli_subcmds[0])
const size_t ddp_cli_nsubcmds = NSUBCMDS;

const struct ddp_cli_subcmd *ddp_cli_subcmd_of(enum ddp_cmd cmd)
{
    for (size_t i = 0; i < NSUBCMDS; i++)
        if (ddp_cli_subcmds[i].cmd == cmd)
            return &ddp_cli_subcmds[i];
    return &ddp_cli_subcmds[0];
}

bool ddp_cli_is_command(const char *word)
{
    for (size_t i = 1; i < NSUBCMDS; i++)
        if (strcmp(word, ddp_cli_subcmds[i].name) == 0)
            return true;
    return false;
}

const char *ddp_cli_command_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t n = 0;
        for (size_t i = 1; i < NSUBCMDS; i++) {
            const char *sep = i == 1 ? "" : i + 1 == NSUBCMDS ? " and " : ", ";
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", sep, ddp_cli_subcmds[i].name);
        }
    }
    return names;
}

/* "unknown option '--x'" for command sc, with the flag it may have meant; err's message names the command
 * when it is not a launching one ("ps: ..."). A launch's unknown option that resembles none of ours was likely
 * the program's: the message says where those go (after the script, or after '--' behind the job spec). */
static int unknown_long(const struct ddp_cli_subcmd *sc, const struct ddp_cli *cli, const char *name, size_t len,
                        const struct ddp_cli_flag *const *cands, size_t ncands, struct ddp_err *err)
{
    char *word = ddp_xstrndup(name, len);
    for (char *p = word; *p; p++)
        if (*p == '_')
            *p = '-';
    const char *who = sc->positional == POS_LAUNCH ? "" : sc->name;
    const char *colon = *who ? ": " : "";
    struct ddp_buf b = {0};
    const struct ddp_cli_flag *f;
    int rc;
    if (ncands > 1) {
        for (size_t k = 0; k < ncands; k++)
            ddp_buf_printf(&b, "%s--%s", k ? ", " : "", cands[k]->name);
        rc = ddp_errf(err, -EINVAL, "%s%sambiguous option '--%s' (could be %s)", who, colon, word, b.data);
    } else if ((f = ddp_cli_flag_find(word))) {
        for (size_t k = 0; k < NSUBCMDS; k++)
            if (ddp_cli_flag_takes(f, ddp_cli_subcmds[k].cmd))
                ddp_buf_printf(&b, "%s%s", b.len ? ", " : "",
                               ddp_cli_subcmds[k].name ? ddp_cli_subcmds[k].name : "run");
        rc = ddp_errf(err, -EINVAL, "%s%s'--%s' is not an option of %s (only of: %s)", who, colon, word,
                      *who ? who : "a launch", b.data);
    } else {
        const char *names[NFLAGS + 1];
        size_t n = 0;
        for (size_t k = 0; k < NFLAGS; k++)
            if (ddp_cli_flag_takes(&ddp_cli_flags[k], sc->cmd))
                names[n++] = ddp_cli_flags[k].name;
        names[n] = NULL;
        const char *dym = ddp_did_you_mean(word, names);
        if (sc->positional == POS_LAUNCH && strcmp(word, "use-env") == 0)
            rc = ddp_errf(err, -EINVAL,
                          "unknown option '--use-env' (torch.distributed.launch's: not needed, every worker gets "
                          "LOCAL_RANK in its environment and no --local-rank argument, as under torchrun; drop it)");
        else if (dym)
            rc = ddp_errf(err, -EINVAL, "%s%sunknown option '--%s' (did you mean '--%s'?)", who, colon, word, dym);
        else if (sc->positional == POS_LAUNCH && cli->spec_path)
            rc = ddp_errf(err, -EINVAL,
                          "unknown option '--%s' (the program's own options go after '--': ddplaunch [OPTIONS] %s -- "
                          "--%s ...)",
                          word, cli->spec_path, word);
        else if (sc->positional == POS_LAUNCH)
            rc = ddp_errf(err, -EINVAL,
                          "unknown option '--%s' (the program's own options go after the script: ddplaunch "
                          "[OPTIONS] train.py --%s ...)",
                          word, word);
        else
            rc = ddp_errf(err, -EINVAL, "%s%sunknown option '--%s'", who, colon, word);
    }
    ddp_buf_free(&b);
    free(word);
    return rc;
}

/* "--name", "--name=value" or "--name value" at argv[*i]; advances *i past a separate value. */
static int parse_long(int argc, char **argv, int *i, const struct ddp_cli_subcmd *sc, struct ddp_cli *cli,
                      struct ddp_err *err)
{
    const char *name = argv[*i] + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct ddp_cli_flag *cands[NFLAGS];
    size_t ncands;
    const struct ddp_cli_flag *f = find_long(name, len, sc->cmd, cands, &ncands);
    if (!f)
        return unknown_long(sc, cli, name, len, cands, ncands, err);
    const char *arg = NULL;
    if (takes_arg(f)) {
        if (eq)
            arg = eq + 1;
        else if (*i + 1 < argc)
            arg = argv[++*i];
        else
            return ddp_errf(err, -EINVAL, "--%s: expected a value (%s)", f->name, f->arg);
    } else if (eq) {
        return ddp_errf(err, -EINVAL, "--%s takes no value, got '%s'", f->name, eq + 1);
    }
    char shown[64];
    snprintf(shown, sizeof shown, "--%s", f->name);
    return apply_flag(cli, f, shown, arg, err);
}

/* "-x", "-xVALUE" or "-x VALUE" at argv[*i]; advances *i past a separate value. */
static int parse_short(int argc, char **argv, int *i, const struct ddp_cli_subcmd *sc, struct ddp_cli *cli,
                       struct ddp_err *err)
{
    const char *a = argv[*i];
    const struct ddp_cli_flag *f = find_short(a[1], sc->cmd);
    if (!f)
        return sc->positional == POS_LAUNCH ? ddp_errf(err, -EINVAL, "unknown option '-%c'", a[1])
                                            : ddp_errf(err, -EINVAL, "%s: unknown option '-%c'", sc->name, a[1]);
    const char *arg = NULL;
    if (takes_arg(f)) {
        if (a[2])
            arg = a + 2;
        else if (*i + 1 < argc)
            arg = argv[++*i];
        else
            return ddp_errf(err, -EINVAL, "-%c: expected a value (%s)", f->short_name, f->arg);
    } else if (a[2]) {
        return ddp_errf(err, -EINVAL, "-%c takes no value, got '%s'", f->short_name, a + 2);
    }
    char shown[8];
    snprintf(shown, sizeof shown, "-%c", f->short_name);
    return apply_flag(cli, f, shown, arg, err);
}

/* A launching command's positional argument at argv[*i]: a job spec, or the training script and everything after
 * it. Returns 1 when the rest of argv is consumed, 0 to go on, or a negative errno. */
static int launch_positional(int argc, char **argv, int *i, bool options_done, struct ddp_cli *cli, struct ddp_err *err)
{
    const char *a = argv[*i];
    if (!cli->spec_path && !cli->target && ends_with(a, ".ini")) {
        cli->spec_path = ddp_xstrdup(a);
        return 0;
    }
    if (cli->spec_path && !options_done)
        return ddp_errf(err, -EINVAL,
                        "unexpected argument '%s' after %s (put the program's extra arguments "
                        "after '--')",
                        a, cli->spec_path);
    if (cli->spec_path) {
        /* "-- JOB.ini -- extra args": the job spec came after '--'; the rest is for the program. */
        if (strcmp(a, "--") == 0)
            ++*i;
        for (; *i < argc; ++*i)
            ddp_strv_push(&cli->target_args, argv[*i]);
        return 1;
    }
    if (options_done && !cli->no_python && a[0] == '-' && a[1] == 'm') {
        /* torchrun's "-- -m pkg.mod": its script is "-m", so "python -u -m pkg.mod" runs the module; so here. */
        if (!a[2] && *i + 1 >= argc)
            return ddp_errf(err, -EINVAL, "'-m' after '--' needs a module name (expected '-- -m pkg.module ARGS')");
        cli->module = true;
        a = a[2] ? a + 2 : argv[++*i];
    }
    cli->target = ddp_xstrdup(a);
    for (++*i; *i < argc; ++*i)
        ddp_strv_push(&cli->target_args, argv[*i]);
    return 1;
}

/* Any other command's positional argument: report's directory, nothing for ps. */
static int other_positional(const struct ddp_cli_subcmd *sc, const char *a, struct ddp_cli *cli, struct ddp_err *err)
{
    if (sc->positional == POS_DIR && !cli->dir) {
        cli->dir = ddp_xstrdup(a);
        return 0;
    }
    return sc->positional == POS_DIR
               ? ddp_errf(err, -EINVAL, "%s: one LOG_DIR or RUN_DIR expected, got '%s' too", sc->name, a)
               : ddp_errf(err, -EINVAL, "%s: unexpected argument '%s' (see 'ddplaunch %s --help')", sc->name, a,
                          sc->name);
}

int ddp_cli_parse(int argc, char **argv, struct ddp_cli *cli, struct ddp_err *err)
{
    memset(cli, 0, sizeof *cli);
    const struct ddp_cli_subcmd *sc = &ddp_cli_subcmds[0];
    int i = 1;
    for (size_t k = 1; argc > 1 && k < NSUBCMDS; k++)
        if (strcmp(argv[1], ddp_cli_subcmds[k].name) == 0)
            sc = &ddp_cli_subcmds[k], i = 2;
    cli->cmd = cli->sub = sc->cmd;
    bool options_done = false;
    for (; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (!options_done && strcmp(a, "--") == 0) {
            options_done = true;
            if (cli->spec_path) {
                /* JOB.ini -- extra args for the program */
                for (i++; i < argc; i++)
                    ddp_strv_push(&cli->target_args, argv[i]);
                break;
            }
            continue;
        }
        if (!options_done && a[0] == '-' && a[1] == '-' && a[2])
            rc = parse_long(argc, argv, &i, sc, cli, err);
        else if (!options_done && a[0] == '-' && a[1] && a[1] != '-')
            rc = parse_short(argc, argv, &i, sc, cli, err);
        else if (sc->positional == POS_LAUNCH)
            rc = launch_positional(argc, argv, &i, options_done, cli, err);
        else
            rc = other_positional(sc, a, cli, err);
        if (rc < 0)
            return rc;
        if (rc > 0)
            break;
    }
    if (sc->positional == POS_DIR && !cli->dir && cli->cmd == sc->cmd)
        return ddp_errf(err, -EINVAL, "%s: a LOG_DIR or RUN_DIR is needed", sc->name);
    if (cli->verbosity > 2)
        cli->verbosity = 2;
    if (cli->verbosity < -1)
        cli->verbosity = -1;
    return 0;
}

void ddp_cli_free(struct ddp_cli *cli)
{
    free(cli->topology);
    free(cli->config);
    free(cli->spec_path);
    free(cli->target);
    free(cli->dir);
    free(cli->svg);
    ddp_strv_clear(&cli->target_args);
    ddp_kvlist_free(&cli->sets);
    memset(cli, 0, sizeof *cli);
}

static bool env_true(const char *v)
{
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes"));
}

int ddp_cli_apply_pet(struct ddp_spec *spec, char *const *envp, struct ddp_err *err)
{
    /* torchrun's default for --shutdown-timeout, below PET_SHUTDOWN_TIMEOUT */
    const char *sd = ddp_env_get(envp, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
    if (sd && ddp_spec_set(spec, "restart", "shutdown_timeout", sd, DDP_ORIGIN_ENV, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
                           err) < 0)
        return -EINVAL;
    for (size_t i = 0; i < NFLAGS; i++) {
        const struct ddp_cli_flag *f = &ddp_cli_flags[i];
        if (!f->pet)
            continue;
        const char *v = ddp_env_get(envp, f->pet);
        if (!v)
            continue;
        int rc = 0;
        if (f->kind == F_KEY)
            rc = ddp_spec_set(spec, f->section, f->key, v, DDP_ORIGIN_ENV, f->pet, err);
        else if ((f->kind == F_KEY_YES || f->kind == F_KEY_FIXED) && env_true(v))
            rc = ddp_spec_set(spec, f->section, f->key, f->kind == F_KEY_YES ? "yes" : f->fixed, DDP_ORIGIN_ENV, f->pet,
                              err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void clear_program(struct ddp_spec *spec)
{
    static const char *const keys[] = {"command", "script", "module", "program", NULL};
    for (const char *const *k = keys; *k; k++) {
        int i = ddp_spec_key_find("job", *k);
        void *f = (char *)spec + ddp_spec_keys[i].offset;
        if (ddp_spec_keys[i].type == DDP_T_ARGV)
            ddp_strv_clear(f);
        else {
            free(*(char **)f);
            *(char **)f = NULL;
        }
        spec->origin[i] = DDP_ORIGIN_CLI;
    }
}

int ddp_cli_apply(const struct ddp_cli *cli, struct ddp_spec *spec, char *const *envp, struct ddp_err *err)
{
    for (size_t i = 0; i < cli->sets.n; i++) {
        const struct ddp_kv *kv = &cli->sets.v[i];
        const char *dot = strchr(kv->key, '.');
        char *section = ddp_xstrndup(kv->key, (size_t)(dot - kv->key));
        int rc = ddp_spec_set(spec, section, dot + 1, kv->value, DDP_ORIGIN_CLI, kv->file, err);
        free(section);
        if (rc < 0)
            return rc;
    }
    bool module = cli->module || env_true(ddp_env_get(envp, "PET_MODULE"));
    bool no_python = cli->no_python || env_true(ddp_env_get(envp, "PET_NO_PYTHON"));
    if (module && no_python) /* torchrun refuses them together too; caught before anything starts */
        return ddp_errf(err, -EINVAL,
                        "--no-python and --module (-m) cannot be used together (expected one: a "
                        "program to run directly, or a Python module)");
    if (cli->target) {
        clear_program(spec);
        const char *key = no_python ? "program" : module ? "module" : "script";
        int rc = ddp_spec_set(spec, "job", key, cli->target, DDP_ORIGIN_CLI, "command line", err);
        if (rc < 0)
            return rc;
        int ai = ddp_spec_key_find("job", "args");
        ddp_strv_copy(&spec->args, &cli->target_args);
        spec->origin[ai] = DDP_ORIGIN_CLI;
    } else if (cli->target_args.n) {
        /* JOB.ini -- extra args */
        int ai = ddp_spec_key_find("job", "args");
        for (size_t i = 0; i < cli->target_args.n; i++)
            ddp_strv_push(&spec->args, cli->target_args.v[i]);
        spec->origin[ai] = DDP_ORIGIN_CLI;
    }
    if ((no_python || module) && !cli->target && spec->script) {
        /* --no-python / -m with a job spec's script: reinterpret it. */
        char *s = spec->script;
        spec->script = NULL;
        int rc = ddp_spec_set(spec, "job", no_python ? "program" : "module", s, DDP_ORIGIN_CLI,
                              no_python ? "--no-python" : "--module", err);
        free(s);
        if (rc < 0)
            return rc;
    }
    return 0;
}

char *ddp_cli_script_to_check(const struct ddp_cli *cli, const char *workdir, char *const *envp)
{
    if (!cli->target || cli->module || cli->no_python || env_true(ddp_env_get(envp, "PET_MODULE")) ||
        env_true(ddp_env_get(envp, "PET_NO_PYTHON")))
        return NULL;
    if (cli->target[0] != '/' && workdir && *workdir)
        return ddp_xasprintf("%s/%s", workdir, cli->target);
    return ddp_xstrdup(cli->target);
}
