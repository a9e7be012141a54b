/* cli: see cli.h. One table of flags; every torchrun flag maps onto a spec key or a cli field. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum flag_kind {
    F_KEY,       /* sets section.key to the argument */
    F_KEY_YES,   /* sets section.key to "yes", takes no argument */
    F_KEY_FIXED, /* sets section.key to a fixed value, no argument */
    F_IGNORED,   /* torchrun flag with an argument that means nothing here */
    F_IGNORED0,  /* the same without an argument */
    F_MODULE,
    F_NO_PYTHON,
    F_SET,
    F_JSON,
    F_TOPOLOGY,
    F_CONFIG,
    F_HELP,
    F_VERSION,
    F_KEYS,
    F_VERBOSE,
    F_QUIET,
};

struct flag {
    const char *name; /* dash form without the leading "--" */
    char short_name;
    enum flag_kind kind;
    const char *section, *key, *fixed;
    const char *pet; /* torchrun environment default, or NULL */
    const char *arg;
    const char *help;
};

/* clang-format off */
static const struct flag flags[] = {
    { "nnodes", 0, F_KEY, "job", "nnodes", NULL, "PET_NNODES", "N|MIN:MAX", "number of nodes [1]" },
    { "nproc-per-node", 0, F_KEY, "job", "nproc_per_node", NULL, "PET_NPROC_PER_NODE", "N|gpu|cpu|auto",
      "workers on this node [1]" },
    { "node-rank", 0, F_KEY, "job", "node_rank", NULL, "PET_NODE_RANK", "N", "rank of this node [0]" },
    { "master-addr", 0, F_KEY, "job", "master_addr", NULL, "PET_MASTER_ADDR", "ADDR",
      "address of rank 0's node [127.0.0.1]" },
    { "master-port", 0, F_KEY, "job", "master_port", NULL, "PET_MASTER_PORT", "PORT|auto",
      "rank 0's port [auto: a free port, reserved host-wide]" },
    { "max-restarts", 0, F_KEY, "restart", "max_restarts", NULL, "PET_MAX_RESTARTS", "N", "restarts allowed [0]" },
    { "monitor-interval", 0, F_IGNORED, NULL, NULL, NULL, "PET_MONITOR_INTERVAL", "SECS",
      "accepted; ddplaunch is event-driven and does not poll" },
    { "start-method", 0, F_IGNORED, NULL, NULL, NULL, "PET_START_METHOD", "METHOD",
      "accepted; workers are always fresh processes (spawn)" },
    { "standalone", 0, F_KEY_YES, "job", "standalone", NULL, "PET_STANDALONE", NULL,
      "single node on localhost with a free port" },
    { "rdzv-backend", 0, F_KEY, "job", "rdzv_backend", NULL, "PET_RDZV_BACKEND", "NAME",
      "static (each node gives --node-rank) or c10d (ranks given at join)" },
    { "rdzv-endpoint", 0, F_KEY, "job", "rdzv_endpoint", NULL, "PET_RDZV_ENDPOINT", "HOST[:PORT]",
      "c10d: the agent on HOST serves [29400]; static: master address" },
    { "rdzv-id", 0, F_KEY, "job", "run_id", NULL, "PET_RDZV_ID", "ID", "run id (TORCHELASTIC_RUN_ID)" },
    { "rdzv-conf", 0, F_KEY, "job", "rdzv_conf", NULL, "PET_RDZV_CONF", "K=V,...", "torchrun's; join_timeout=SECONDS is used" },
    { "role", 0, F_KEY, "job", "role", NULL, "PET_ROLE", "NAME", "role name [default]" },
    { "module", 'm', F_MODULE, NULL, NULL, NULL, "PET_MODULE", NULL, "run the target as a Python module" },
    { "no-python", 0, F_NO_PYTHON, NULL, NULL, NULL, "PET_NO_PYTHON", NULL,
      "run the target directly, not with python3" },
    { "run-path", 0, F_KEY_YES, "job", "run_path", NULL, "PET_RUN_PATH", NULL, "accepted for compatibility" },
    { "log-dir", 0, F_KEY, "job", "log_dir", NULL, "PET_LOG_DIR", "DIR",
      "per-attempt, per-rank log files and error files" },
    { "redirects", 'r', F_KEY, "job", "redirects", NULL, "PET_REDIRECTS", "0-3|R:V,...",
      "send worker output to log files only: 1 stdout, 2 stderr, 3 both" },
    { "tee", 't', F_KEY, "job", "tee", NULL, "PET_TEE", "0-3|R:V,...",
      "copy worker output to log files too" },
    { "local-ranks-filter", 0, F_KEY, "job", "local_ranks_filter", NULL, "PET_LOCAL_RANKS_FILTER", "R,...",
      "show only these local ranks on the console" },
    { "local-addr", 0, F_KEY, "job", "local_addr", NULL, "PET_LOCAL_ADDR", "ADDR", "address of this node" },
    { "logs-specs", 0, F_IGNORED, NULL, NULL, NULL, "PET_LOGS_SPECS", "NAME",
      "accepted; log layout is ddplaunch's own" },
    { "numa-binding", 0, F_KEY, "numa", "bind", NULL, "PET_NUMA_BINDING", "MODE",
      "node, socket, exclusive, core-complex or none [node]" },
    { "signals-to-handle", 0, F_KEY, "job", "signals_to_handle", NULL, "PET_SIGNALS_TO_HANDLE", "SIG,...",
      "signals forwarded to workers [SIGTERM,SIGINT,SIGHUP,SIGQUIT]" },
    { "virtual-local-rank", 0, F_KEY_FIXED, "gpus", "visible", "virtual", "PET_VIRTUAL_LOCAL_RANK", NULL,
      "LOCAL_RANK=0; each worker sees only its GPU" },
    { "shutdown-timeout", 0, F_KEY, "restart", "shutdown_timeout", NULL, "PET_SHUTDOWN_TIMEOUT",
      "DURATION", "grace between SIGTERM and SIGKILL [30s]" },
    { "event-log-handler", 0, F_IGNORED, NULL, NULL, NULL, "PET_EVENT_LOG_HANDLER", "NAME",
      "accepted; ddplaunch logs its own events" },
    { "duplicate-stdout-filters", 0, F_IGNORED, NULL, NULL, NULL, NULL, "PATTERNS", "accepted; not supported" },
    { "duplicate-stderr-filters", 0, F_IGNORED, NULL, NULL, NULL, NULL, "PATTERNS", "accepted; not supported" },
    { "console", 0, F_KEY, "job", "console", NULL, NULL, "auto|raw|lines",
      "worker output: raw bytes, or prefixed lines [auto]" },
    { "set", 0, F_SET, NULL, NULL, NULL, NULL, "SECTION.KEY=VALUE", "set any job spec key" },
    { "json", 0, F_JSON, NULL, NULL, NULL, NULL, NULL, "machine-readable output (plan, topo, doctor)" },
    { "topology", 0, F_TOPOLOGY, NULL, NULL, NULL, NULL, "FILE.xml",
      "use an hwloc XML export instead of this machine" },
    { "config", 0, F_CONFIG, NULL, NULL, NULL, NULL, "FILE", "site config file instead of the default" },
    { "verbose", 'v', F_VERBOSE, NULL, NULL, NULL, NULL, NULL, "say more" },
    { "quiet", 'q', F_QUIET, NULL, NULL, NULL, NULL, NULL, "say only warnings and errors" },
    { "help-keys", 0, F_KEYS, NULL, NULL, NULL, NULL, NULL, "list every job spec key" },
    { "help", 'h', F_HELP, NULL, NULL, NULL, NULL, NULL, "this help" },
    { "version", 'V', F_VERSION, NULL, NULL, NULL, NULL, NULL, "print the version" },
};
/* clang-format on */
#define NFLAGS (sizeof flags / sizeof flags[0])

static bool takes_arg(const struct flag *f)
{
    return f->kind == F_KEY || f->kind == F_IGNORED || f->kind == F_SET || f->kind == F_TOPOLOGY || f->kind == F_CONFIG;
}

const char *const *ddp_cli_flag_names(void)
{
    static const char *names[NFLAGS + 1];
    static char buf[NFLAGS][40];
    for (size_t i = 0; i < NFLAGS; i++) {
        snprintf(buf[i], sizeof buf[i], "--%s", flags[i].name);
        names[i] = buf[i];
    }
    names[NFLAGS] = NULL;
    return names;
}

/* "--nproc_per_node" and "--nproc-per-node" are the same flag. */
static const struct flag *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < NFLAGS; i++) {
        const char *n = flags[i].name;
        if (strlen(n) != len)
            continue;
        size_t j = 0;
        while (j < len && (n[j] == name[j] || (n[j] == '-' && name[j] == '_')))
            j++;
        if (j == len)
            return &flags[i];
    }
    return NULL;
}

static const struct flag *find_short(char c)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (flags[i].short_name == c)
            return &flags[i];
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

static int apply_flag(struct ddp_cli *cli, const struct flag *f, const char *shown, const char *arg,
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
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* "--name", "--name=value" or "--name value" at argv[*i]; advances *i past a separate value. */
static int parse_long(int argc, char **argv, int *i, struct ddp_cli *cli, struct ddp_err *err)
{
    const char *name = argv[*i] + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct flag *f = find_long(name, len);
    if (!f) {
        char *word = ddp_xstrndup(name, len);
        for (char *p = word; *p; p++)
            if (*p == '_')
                *p = '-';
        const char *cands[NFLAGS + 1];
        for (size_t k = 0; k < NFLAGS; k++)
            cands[k] = flags[k].name;
        cands[NFLAGS] = NULL;
        const char *dym = ddp_did_you_mean(word, cands);
        int rc = dym ? ddp_errf(err, -EINVAL, "unknown option '--%s' (did you mean '--%s'?)", word, dym)
                     : ddp_errf(err, -EINVAL, "unknown option '--%s'", word);
        free(word);
        return rc;
    }
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
static int parse_short(int argc, char **argv, int *i, struct ddp_cli *cli, struct ddp_err *err)
{
    const char *a = argv[*i];
    const struct flag *f = find_short(a[1]);
    if (!f)
        return ddp_errf(err, -EINVAL, "unknown option '-%c'", a[1]);
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

int ddp_cli_parse(int argc, char **argv, struct ddp_cli *cli, struct ddp_err *err)
{
    memset(cli, 0, sizeof *cli);
    int i = 1;
    if (argc > 1) {
        if (strcmp(argv[1], "plan") == 0)
            cli->cmd = DDP_CMD_PLAN, i = 2;
        else if (strcmp(argv[1], "topo") == 0)
            cli->cmd = DDP_CMD_TOPO, i = 2;
        else if (strcmp(argv[1], "doctor") == 0)
            cli->cmd = DDP_CMD_DOCTOR, i = 2;
        cli->sub = cli->cmd;
    }
    bool options_done = false;
    for (; i < argc; i++) {
        const char *a = argv[i];
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
        if (!options_done && a[0] == '-' && a[1] == '-' && a[2]) {
            int rc = parse_long(argc, argv, &i, cli, err);
            if (rc < 0)
                return rc;
            continue;
        }
        if (!options_done && a[0] == '-' && a[1] && a[1] != '-') {
            int rc = parse_short(argc, argv, &i, cli, err);
            if (rc < 0)
                return rc;
            continue;
        }
        /* A positional argument: a job spec, or the training script and everything after it. */
        if (!cli->spec_path && !cli->target && ends_with(a, ".ini")) {
            cli->spec_path = ddp_xstrdup(a);
            continue;
        }
        if (cli->spec_path && !options_done)
            return ddp_errf(err, -EINVAL,
                            "unexpected argument '%s' after %s (put the program's extra arguments "
                            "after '--')",
                            a, cli->spec_path);
        if (cli->spec_path) {
            /* "-- JOB.ini -- extra args": the job spec came after '--'; the rest is for the program. */
            if (strcmp(a, "--") == 0)
                i++;
            for (; i < argc; i++)
                ddp_strv_push(&cli->target_args, argv[i]);
            break;
        }
        cli->target = ddp_xstrdup(a);
        for (i++; i < argc; i++)
            ddp_strv_push(&cli->target_args, argv[i]);
        break;
    }
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
        const struct flag *f = &flags[i];
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

/* Print text from column col, wrapped at 80 columns, continuation lines indented to column indent. */
static void put_wrapped(FILE *f, size_t col, const char *text, size_t indent)
{
    const size_t width = 80;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t room = width > col ? width - col : 1;
        size_t n = strlen(p);
        if (n > room) {
            /* break at the last space that fits (or the first one after, for a word longer than a line) */
            size_t cut = room;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0) {
                cut = room;
                while (p[cut] && p[cut] != ' ')
                    cut++;
            }
            n = cut;
        }
        fprintf(f, "%.*s\n", (int)n, p);
        p += n;
        if (*p)
            fprintf(f, "%*s", (int)indent, ""), col = indent;
    }
}

/* One option line: "  -r, --redirects 0-3|R:V,...  help", the help wrapped from column 33. */
static void put_flag(FILE *f, const struct flag *fl)
{
    char left[64];
    if (fl->short_name)
        snprintf(left, sizeof left, "-%c, --%s%s%s", fl->short_name, fl->name, fl->arg ? " " : "",
                 fl->arg ? fl->arg : "");
    else
        snprintf(left, sizeof left, "    --%s%s%s", fl->name, fl->arg ? " " : "", fl->arg ? fl->arg : "");
    if (strlen(left) > 29)
        fprintf(f, "  %s\n  %-29s ", left, "");
    else
        fprintf(f, "  %-29s ", left);
    put_wrapped(f, 32, fl->help, 32);
}

static void put_named_flags(FILE *f, const char *const *names)
{
    for (const char *const *n = names; *n; n++)
        put_flag(f, find_long(*n, strlen(*n)));
}

void ddp_cli_help_cmd(FILE *f, enum ddp_cmd cmd)
{
    static const char *const plan_flags[] = {"json", "topology", "config", "set", "help", NULL};
    static const char *const topo_flags[] = {"json", "topology", "config", "set", "nproc-per-node", "help", NULL};
    static const char *const doctor_flags[] = {"json", "topology", "config", "set", "master-port", "help", NULL};
    switch (cmd) {
    case DDP_CMD_PLAN:
        fputs("Usage: ddplaunch plan [options] JOB.ini [-- extra args for the program]\n"
              "       ddplaunch plan [options] SCRIPT.py|PROGRAM [args...]\n"
              "\n"
              "Dry run: print every setting and where it came from, the GPUs ddplaunch would\n"
              "pick and why, and per local rank the command, GPU, NUMA node, CPUs, memory nodes\n"
              "and environment it would get. Starts nothing and reserves nothing.\n"
              "\n"
              "Takes every option of a launch (see 'ddplaunch --help'), and:\n",
              f);
        put_named_flags(f, plan_flags);
        fputs("\nExit status: 0 printed; 2 bad command line or job spec; 1 launcher failure.\n"
              "See ddplaunch(1).\n",
              f);
        return;
    case DDP_CMD_TOPO:
        fputs("Usage: ddplaunch topo [--topology FILE.xml] [--json] [options]\n"
              "\n"
              "Print the GPU x GPU link matrix (as nvidia-smi topo -m), each GPU's CPU and\n"
              "NUMA affinity, the NUMA nodes with the CPUs this process may use, GPUs leased by\n"
              "other jobs, and the GPUs ddplaunch would pick for 1, 2, 4 and 8 workers, with\n"
              "the reason.\n"
              "\n"
              "Options:\n",
              f);
        put_named_flags(f, topo_flags);
        fputs("\nExit status: 0 printed; 2 bad input (an unreadable --topology file); 1 failure.\n"
              "See ddplaunch(1).\n",
              f);
        return;
    case DDP_CMD_DOCTOR:
        fputs("Usage: ddplaunch doctor [options] [JOB.ini | SCRIPT.py ...]\n"
              "\n"
              "Preflight checks for the usual causes of NCCL timeouts and failed starts, for\n"
              "the job the same options and JOB.ini describe: GPUs it would pick, NUMA span,\n"
              "busy GPUs, leases, driver, devices, libnccl, NCCL variables, master port and\n"
              "address, network interface, allowed CPUs and memory, open-files limit, runtime\n"
              "directories. One line per check: STATUS CHECK FOUND[; WHAT TO DO]. Starts\n"
              "nothing.\n"
              "\n"
              "Takes every option of a launch (see 'ddplaunch --help'), and:\n",
              f);
        put_named_flags(f, doctor_flags);
        fputs("\nExit status: 0 all ok; 1 a warning; 2 a failure (or bad input).\n"
              "See ddplaunch(1).\n",
              f);
        return;
    default:
        break;
    }
    fputs("Usage: ddplaunch [options] JOB.ini [-- extra args for the program]\n"
          "       ddplaunch [options] SCRIPT.py|PROGRAM [args...]   (torchrun style)\n"
          "       ddplaunch plan [options] JOB.ini|SCRIPT ...       (dry run)\n"
          "       ddplaunch topo [--topology FILE.xml] [--json]     (GPUs, NUMA, links)\n"
          "       ddplaunch doctor [options] [JOB.ini]              (preflight checks)\n"
          "       ddplaunch report [--svg FILE] LOG_DIR             (a run's timeline)\n"
          "       ddplaunch ps [--json]                             (jobs on this host)\n"
          "       ddplaunch plan|topo|doctor --help                 (a command's help)\n"
          "\n"
          "Launch and supervise a PyTorch distributed job: pick same-NUMA GPUs and a free\n"
          "port, bind workers to their GPU's NUMA node, forward output and signals, detect\n"
          "failures and hangs, restart or downsize.\n"
          "\n"
          "Options (torchrun's flags; --dash-form and --underscore_form both work):\n",
          f);
    for (size_t i = 0; i < NFLAGS; i++) {
        put_flag(f, &flags[i]);
        if (strcmp(flags[i].name, "duplicate-stderr-filters") == 0)
            fputs("\nddplaunch's own options:\n", f);
    }
    fputs("\n", f);
    put_wrapped(
        f, 0,
        "Settings, lowest precedence first: built-in defaults, site config ($DDPLAUNCH_CONFIG or " DDP_SYSCONFDIR
        "/ddplaunch/ddplaunch.ini), JOB.ini, environment (PET_* as torchrun, "
        "DDPLAUNCH_<SECTION>_<KEY>), command line. `ddplaunch --help-keys` lists every key.",
        0);
    fputs("\n"
          "Exit status: 0 all workers succeeded; the first failed worker's exit code; 128+N\n"
          "when it died by signal N (or the launcher was stopped by signal N); 124 when the\n"
          "last attempt timed out; 75 refused for now (GPUs leased by other jobs, nodes\n"
          "that did not join): retry; 2 bad command line or job spec; 1 launcher failure.\n"
          "\n"
          "See ddplaunch(1) and ddplaunch.ini(5).\n",
          f);
}

void ddp_cli_help(FILE *f)
{
    ddp_cli_help_cmd(f, DDP_CMD_RUN);
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

void ddp_cli_help_keys(FILE *f)
{
    static const char *const type_names[] = {"string",      "integer", "yes|no", "choice",         "duration",
                                             "N|MIN:MAX",   "list",    "argv",   "N|gpu|cpu|auto", "port|auto",
                                             "0-3|R:V,...", "size|N%", "half|N", "auto|yes|no"};
    const char *section = "";
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        const struct ddp_key *k = &ddp_spec_keys[i];
        if (strcmp(section, k->section) != 0) {
            section = k->section;
            fprintf(f, "%s[%s]\n", i ? "\n" : "", section);
        }
        char type[96];
        if (k->type == DDP_T_ENUM) {
            struct ddp_buf b = {0};
            for (int j = 0; k->choices[j]; j++)
                ddp_buf_printf(&b, "%s%s", j ? "|" : "", k->choices[j]);
            snprintf(type, sizeof type, "%s", b.data);
            ddp_buf_free(&b);
        } else {
            snprintf(type, sizeof type, "%s", type_names[k->type]);
        }
        /* "  key  type  [default]" in columns, unless that would pass 80 columns; the doc wrapped below it */
        const char *def = k->def ? k->def : "";
        int tw = 2 + 20 + 1 + 28 + 1 + (int)strlen(def) + 2 > 80 ? 0 : 28;
        fprintf(f, "  %-20s %-*s [%s]\n      ", k->name, tw, type, def);
        put_wrapped(f, 6, k->doc, 6);
    }
    fputs("\n[nccl]\n  NCCL_*, TORCH_*     any NCCL or torch variable, validated before launch\n"
          "\n[env]\n  NAME                any variable for the workers; ${VAR} expands from the\n"
          "                      launcher's environment\n",
          f);
}
