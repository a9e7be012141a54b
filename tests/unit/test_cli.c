/* Unit tests for launcher/cli: every torchrun flag in its forms, short flags, script arguments left alone,
 * JOB.ini -- extra args, subcommands, usage errors with the exact message, PET_* defaults and precedence. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/cli.h"
#include "spec/spec.h"

static char *no_env[] = {NULL};

/* Parse "ddplaunch" + the given words (NULL-terminated). */
static int parse_v(struct ddp_cli *cli, struct ddp_err *err, const char *first, va_list ap)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "ddplaunch";
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        cr_assert(argc < 63);
        argv[argc++] = (char *)a;
    }
    argv[argc] = NULL;
    return ddp_cli_parse(argc, argv, cli, err);
}

static int parse(struct ddp_cli *cli, struct ddp_err *err, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    int rc = parse_v(cli, err, first, ap);
    va_end(ap);
    return rc;
}

/* Parse, apply onto a default spec with envp, and expect success. */
static void parse_apply(struct ddp_cli *cli, struct ddp_spec *spec, char *const *envp, const char *first, ...)
{
    struct ddp_err err = {0};
    va_list ap;
    va_start(ap, first);
    int rc = parse_v(cli, &err, first, ap);
    va_end(ap);
    cr_assert_eq(rc, 0, "parse: %s", err.msg);
    ddp_spec_init(spec);
    cr_assert_eq(ddp_cli_apply_pet(spec, envp, &err), 0, "pet: %s", err.msg);
    cr_assert_eq(ddp_cli_apply(cli, spec, envp, &err), 0, "apply: %s", err.msg);
}

static int key(const char *section, const char *name)
{
    int i = ddp_spec_key_find(section, name);
    cr_assert(i >= 0, "%s.%s", section, name);
    return i;
}

static void expect_fmt(const struct ddp_spec *s, const char *section, const char *name, const char *want,
                       const char *ctx)
{
    char *got = ddp_spec_format(s, (size_t)key(section, name));
    cr_expect_str_eq(got, want, "%s: %s.%s = '%s', want '%s'", ctx, section, name, got, want);
    free(got);
}

static void expect_argv(const struct ddp_strv *sv, const char *const *want, const char *ctx)
{
    size_t n = 0;
    while (want[n])
        n++;
    cr_expect_eq(sv->n, n, "%s: %zu words, want %zu", ctx, sv->n, n);
    for (size_t i = 0; i < n && i < sv->n; i++)
        cr_expect_str_eq(sv->v[i], want[i], "%s: word %zu '%s', want '%s'", ctx, i, sv->v[i], want[i]);
}

/* ---- every torchrun flag that takes a value, in three spellings ---- */

struct flag_case {
    const char *dash;  /* "--nproc-per-node" */
    const char *value; /* given on the command line */
    const char *section, *key;
    const char *want; /* formatted spec value */
};

static const struct flag_case value_flags[] = {
    {"--nnodes", "2:4", "job", "nnodes", "2:4"},
    {"--nproc-per-node", "8", "job", "nproc_per_node", "8"},
    {"--nproc-per-node", "gpu", "job", "nproc_per_node", "gpu"},
    {"--node-rank", "1", "job", "node_rank", "1"},
    {"--master-addr", "10.0.0.7", "job", "master_addr", "10.0.0.7"},
    {"--master-port", "29501", "job", "master_port", "29501"},
    {"--max-restarts", "3", "restart", "max_restarts", "3"},
    {"--rdzv-backend", "c10d", "job", "rdzv_backend", "c10d"},
    {"--rdzv-endpoint", "node1:29400", "job", "rdzv_endpoint", "node1:29400"},
    {"--rdzv-id", "job42", "job", "run_id", "job42"},
    {"--rdzv-conf", "join_timeout=900", "job", "rdzv_conf", "join_timeout=900"},
    {"--role", "trainer", "job", "role", "trainer"},
    {"--log-dir", "/tmp/logs", "job", "log_dir", "/tmp/logs"},
    {"--redirects", "3", "job", "redirects", "3"},
    {"--tee", "0:1,1:2", "job", "tee", "0:1,1:2"},
    {"--local-ranks-filter", "0,2", "job", "local_ranks_filter", "0,2"},
    {"--local-addr", "10.0.0.8", "job", "local_addr", "10.0.0.8"},
    {"--numa-binding", "socket", "numa", "bind", "socket"},
    {"--signals-to-handle", "SIGTERM,SIGUSR1", "job", "signals_to_handle", "SIGTERM,SIGUSR1"},
    {"--shutdown-timeout", "10", "restart", "shutdown_timeout", "10s"},
};

static void check_value_flag(const struct flag_case *c, const char *form, const char *a1, const char *a2)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    char ctx[128];
    snprintf(ctx, sizeof ctx, "%s %s", form, c->value);
    if (a2)
        parse_apply(&cli, &spec, no_env, a1, a2, "train.py", NULL);
    else
        parse_apply(&cli, &spec, no_env, a1, "train.py", NULL);
    expect_fmt(&spec, c->section, c->key, c->want, ctx);
    cr_expect_eq(spec.origin[key(c->section, c->key)], DDP_ORIGIN_CLI, "%s", ctx);
    cr_expect_str_eq(cli.target, "train.py", "%s", ctx);
    cr_expect_eq(cli.target_args.n, 0u, "%s", ctx);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_flags, every_value_flag_in_dash_underscore_and_equals_forms)
{
    for (size_t i = 0; i < sizeof value_flags / sizeof value_flags[0]; i++) {
        const struct flag_case *c = &value_flags[i];
        char under[64], eq_dash[128], eq_under[128];
        snprintf(under, sizeof under, "--%s", c->dash + 2);
        for (char *p = under + 2; *p; p++)
            if (*p == '-')
                *p = '_';
        snprintf(eq_dash, sizeof eq_dash, "%s=%s", c->dash, c->value);
        snprintf(eq_under, sizeof eq_under, "%s=%s", under, c->value);
        check_value_flag(c, c->dash, c->dash, c->value);
        check_value_flag(c, under, under, c->value);
        check_value_flag(c, eq_dash, eq_dash, NULL);
        check_value_flag(c, eq_under, eq_under, NULL);
    }
}

Test(cli_flags, switches)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--standalone", "--run_path", "--virtual-local-rank", "t.py", NULL);
    cr_expect(spec.standalone);
    cr_expect(spec.run_path);
    cr_expect_eq(spec.gpus_visible, DDP_VISIBLE_VIRTUAL);
    cr_expect_eq(spec.origin[key("gpus", "visible")], DDP_ORIGIN_CLI);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, no_env, "--virtual_local_rank", "--run-path", "t.py", NULL);
    cr_expect_eq(spec.gpus_visible, DDP_VISIBLE_VIRTUAL);
    cr_expect(!spec.standalone);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_flags, accepted_and_ignored_torchrun_flags)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--monitor-interval", "5", "--monitor_interval=0.1", "--start-method", "spawn",
                "--start_method=fork", "--logs-specs", "x", "t.py", NULL);
    cr_expect_str_eq(spec.script, "t.py");
    for (size_t i = 0; i < ddp_spec_nkeys; i++)
        if (strcmp(ddp_spec_keys[i].name, "script") != 0 && strcmp(ddp_spec_keys[i].name, "command") != 0 &&
            strcmp(ddp_spec_keys[i].name, "module") != 0 && strcmp(ddp_spec_keys[i].name, "program") != 0 &&
            strcmp(ddp_spec_keys[i].name, "args") != 0)
            cr_expect_eq(spec.origin[i], DDP_ORIGIN_DEFAULT, "%s.%s changed by an ignored flag",
                         ddp_spec_keys[i].section, ddp_spec_keys[i].name);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

/* issue 54: torchrun 2.9's duplicate filters are carried out, no longer ignored */
Test(cli_flags, duplicate_filters_set_their_keys)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--duplicate-stdout-filters", "loss,acc", "--duplicate_stderr_filters=warn",
                "t.py", NULL);
    cr_expect_str_eq(spec.duplicate_stdout_filters, "loss,acc");
    cr_expect_str_eq(spec.duplicate_stderr_filters, "warn");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_flags, every_torchrun_flag_is_known)
{
    static const char *const torchrun[] = {"--nnodes",
                                           "--nproc-per-node",
                                           "--rdzv-backend",
                                           "--rdzv-endpoint",
                                           "--rdzv-id",
                                           "--rdzv-conf",
                                           "--standalone",
                                           "--max-restarts",
                                           "--monitor-interval",
                                           "--start-method",
                                           "--role",
                                           "--module",
                                           "--no-python",
                                           "--run-path",
                                           "--log-dir",
                                           "--redirects",
                                           "--tee",
                                           "--local-ranks-filter",
                                           "--node-rank",
                                           "--master-addr",
                                           "--master-port",
                                           "--local-addr",
                                           "--logs-specs",
                                           "--numa-binding",
                                           "--signals-to-handle",
                                           "--virtual-local-rank",
                                           "--shutdown-timeout",
                                           "--duplicate-stdout-filters",
                                           "--duplicate-stderr-filters",
                                           NULL};
    const char *const *names = ddp_cli_flag_names();
    char *help = NULL;
    size_t helplen = 0;
    FILE *f = open_memstream(&help, &helplen);
    ddp_cli_help(f);
    fclose(f);
    for (const char *const *t = torchrun; *t; t++) {
        bool found = false;
        for (const char *const *n = names; *n; n++)
            found |= strcmp(*n, *t) == 0;
        cr_expect(found, "torchrun flag %s is not in ddp_cli_flag_names()", *t);
        cr_expect_not_null(strstr(help, *t), "%s is not in --help", *t);
    }
    for (const char *const *n = names; *n; n++)
        cr_expect_not_null(strstr(help, *n), "%s is not in --help", *n);
    free(help);
}

/* ---- short flags, -m, --no-python ---- */

Test(cli_short, r_and_t_attached_and_separate)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "-r3", "-t", "1", "t.py", NULL);
    cr_expect_str_eq(spec.redirects, "3");
    cr_expect_str_eq(spec.tee, "1");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, no_env, "-r", "0:3", "-t2", "t.py", NULL);
    cr_expect_str_eq(spec.redirects, "0:3");
    cr_expect_str_eq(spec.tee, "2");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_short, module)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--nproc-per-node", "2", "-m", "pkg.train", "--lr", "0.1", NULL);
    cr_expect(cli.module);
    cr_expect_str_eq(spec.module, "pkg.train");
    cr_expect_null(spec.script);
    const char *want[] = {"--lr", "0.1", NULL};
    expect_argv(&spec.args, want, "-m args");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, no_env, "--module", "pkg.train", NULL);
    cr_expect_str_eq(spec.module, "pkg.train");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

/* issue 34 item 16: torchrun takes "-m" after "--" as its script and so runs the module; ddplaunch does the same */
Test(cli_short, module_after_double_dash)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--nproc_per_node=2", "--", "-m", "training.main", "--args", "-m", NULL);
    cr_expect(cli.module);
    cr_expect_str_eq(spec.module, "training.main");
    cr_expect_null(spec.script);
    const char *want[] = {"--args", "-m", NULL};
    expect_argv(&spec.args, want, "-- -m args");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, no_env, "--", "-mtraining.main", NULL);
    cr_expect_str_eq(spec.module, "training.main");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    struct ddp_err err = {0};
    cr_expect_eq(parse(&cli, &err, "--", "-m", NULL), -EINVAL);
    cr_expect(strstr(err.msg, "needs a module name") != NULL, "%s", err.msg);
    ddp_cli_free(&cli);
}

Test(cli_short, no_python)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--no-python", "/bin/echo", "hi", NULL);
    cr_expect(cli.no_python);
    cr_expect_str_eq(spec.program, "/bin/echo");
    cr_expect_null(spec.script);
    const char *want[] = {"hi", NULL};
    expect_argv(&spec.args, want, "--no-python args");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, no_env, "--no_python", "true", NULL);
    cr_expect_str_eq(spec.program, "true");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_short, verbosity_help_version)
{
    struct ddp_cli cli;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "-v", "-v", "-v", "t.py", NULL), 0);
    cr_expect_eq(cli.verbosity, 2);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "-q", "--quiet", "t.py", NULL), 0);
    cr_expect_eq(cli.verbosity, -1);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--help", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_HELP);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "-h", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_HELP);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--version", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_VERSION);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "-V", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_VERSION);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--help-keys", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_KEYS);
    ddp_cli_free(&cli);
}

/* ---- positional arguments ---- */

Test(cli_pos, script_args_are_passed_untouched)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--nnodes", "1", "train.py", "--nnodes", "5", "-m", "--help", "--", "-r3",
                "config.ini", "--set", "job.role=x", NULL);
    cr_expect_str_eq(cli.target, "train.py");
    const char *want[] = {"--nnodes", "5", "-m", "--help", "--", "-r3", "config.ini", "--set", "job.role=x", NULL};
    expect_argv(&cli.target_args, want, "target_args");
    expect_argv(&spec.args, want, "spec args");
    cr_expect_eq(cli.cmd, DDP_CMD_RUN);
    cr_expect(!cli.module);
    cr_expect_null(cli.spec_path);
    cr_expect_eq(spec.nnodes.max, 1);
    cr_expect_str_eq(spec.role, "default");
    cr_expect_str_eq(spec.script, "train.py");
    cr_expect_str_eq(spec.redirects, "0"); /* the script's -r3 is not ours */
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pos, double_dash_before_the_script)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--", "--weird-name.py", "-x", NULL);
    cr_expect_str_eq(cli.target, "--weird-name.py");
    const char *want[] = {"-x", NULL};
    expect_argv(&cli.target_args, want, "after --");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pos, job_spec_and_extra_args)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "job.ini", "--nproc-per-node", "2", "--", "--epochs", "3", "--", "x.ini", NULL), 0,
                 "%s", err.msg);
    cr_expect_str_eq(cli.spec_path, "job.ini");
    cr_expect_null(cli.target);
    const char *want[] = {"--epochs", "3", "--", "x.ini", NULL};
    expect_argv(&cli.target_args, want, "extra args");
    /* applied after the spec's own args */
    ddp_spec_init(&spec);
    const char *t = "[job]\nscript = train.py\nargs = --lr 0.1\n";
    cr_assert_eq(ddp_spec_load_string(&spec, "job.ini", t, strlen(t), DDP_ORIGIN_SPEC, &err), 0);
    cr_assert_eq(ddp_cli_apply(&cli, &spec, no_env, &err), 0, "%s", err.msg);
    const char *all[] = {"--lr", "0.1", "--epochs", "3", "--", "x.ini", NULL};
    expect_argv(&spec.args, all, "spec args + extra");
    cr_expect_str_eq(spec.script, "train.py");
    cr_expect_eq(spec.nproc_per_node.n, 2);
    cr_expect_eq(spec.origin[key("job", "args")], DDP_ORIGIN_CLI);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pos, job_spec_after_double_dash)
{
    /* found by fuzz_cli: the second '--' became a training script named "--" next to the job spec */
    struct ddp_cli cli;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "--", "job.ini", "--", "--epochs", "3", NULL), 0, "%s", err.msg);
    cr_expect_str_eq(cli.spec_path, "job.ini");
    cr_expect_null(cli.target);
    const char *want[] = {"--epochs", "3", NULL};
    expect_argv(&cli.target_args, want, "extra args");
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--", "job.ini", "x", NULL), 0, "%s", err.msg);
    cr_expect_null(cli.target);
    const char *want2[] = {"x", NULL};
    expect_argv(&cli.target_args, want2, "extra args");
    ddp_cli_free(&cli);
}

Test(cli_pos, script_on_the_command_line_replaces_the_specs_program)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "other.py", "a", NULL), 0);
    ddp_spec_init(&spec);
    const char *t = "[job]\ncommand = python3 x.py\nargs = --old\n";
    cr_assert_eq(ddp_spec_load_string(&spec, "site.ini", t, strlen(t), DDP_ORIGIN_SITE, &err), 0);
    cr_assert_eq(ddp_cli_apply(&cli, &spec, no_env, &err), 0, "%s", err.msg);
    cr_expect_eq(spec.command.n, 0u);
    cr_expect_str_eq(spec.script, "other.py");
    const char *want[] = {"a", NULL};
    expect_argv(&spec.args, want, "args replaced");
    cr_expect_eq(ddp_spec_validate(&spec, &err), 0, "%s", err.msg);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pos, no_python_reinterprets_the_specs_script)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "--no-python", "job.ini", NULL), 0);
    ddp_spec_init(&spec);
    const char *t = "[job]\nscript = ./run.sh\n";
    cr_assert_eq(ddp_spec_load_string(&spec, "job.ini", t, strlen(t), DDP_ORIGIN_SPEC, &err), 0);
    cr_assert_eq(ddp_cli_apply(&cli, &spec, no_env, &err), 0, "%s", err.msg);
    cr_expect_null(spec.script);
    cr_expect_str_eq(spec.program, "./run.sh");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pos, subcommands)
{
    static const struct {
        const char *word;
        enum ddp_cmd cmd;
    } subs[] = {{"plan", DDP_CMD_PLAN}, {"topo", DDP_CMD_TOPO}, {"doctor", DDP_CMD_DOCTOR}};
    for (size_t i = 0; i < 3; i++) {
        struct ddp_cli cli;
        struct ddp_err err = {0};
        cr_assert_eq(parse(&cli, &err, subs[i].word, "--json", "--topology", "t.xml", "job.ini", NULL), 0, "%s",
                     err.msg);
        cr_expect_eq(cli.cmd, subs[i].cmd, "%s", subs[i].word);
        cr_expect(cli.json);
        cr_expect_str_eq(cli.topology, "t.xml");
        cr_expect_str_eq(cli.spec_path, "job.ini");
        ddp_cli_free(&cli);
    }
    /* plan with a torchrun-style script */
    struct ddp_cli cli;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "plan", "--nproc_per_node=2", "train.py", "plan", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_PLAN);
    cr_expect_str_eq(cli.target, "train.py");
    cr_expect_str_eq(cli.target_args.v[0], "plan");
    ddp_cli_free(&cli);
    /* only the first word is a subcommand: a script named "plan" after options is a script */
    cr_assert_eq(parse(&cli, &err, "--standalone", "plan", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_RUN);
    cr_expect_str_eq(cli.target, "plan");
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--config", "site.ini", "--set", "gpus.policy=pack", "t.py", NULL), 0);
    cr_expect_str_eq(cli.config, "site.ini");
    cr_expect_null(cli.spec_path);
    ddp_cli_free(&cli);
}

Test(cli_pos, set_any_key_and_later_flags_win)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--set", "gpus.policy=pack", "--set=timeout.stall=5m", "--set", "env.MY_VAR=a=b",
                "--set", "nccl.NCCL_DEBUG=INFO", "--nnodes", "2", "--nnodes", "3", "--set", "job.nnodes=4", "t.py",
                NULL);
    cr_expect_eq(spec.gpus_policy, DDP_POLICY_PACK);
    cr_expect_eq(spec.timeout_stall_ms, 300000);
    cr_expect_str_eq(ddp_kvlist_get(&spec.env, "MY_VAR")->value, "a=b");
    cr_expect_eq(ddp_kvlist_get(&spec.env, "MY_VAR")->origin, DDP_ORIGIN_CLI);
    cr_expect_str_eq(ddp_kvlist_get(&spec.nccl, "NCCL_DEBUG")->value, "INFO");
    cr_expect_eq(spec.nnodes.max, 4);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, no_env, "--set", "job.nnodes=4", "--nnodes", "3", "t.py", NULL);
    cr_expect_eq(spec.nnodes.max, 3);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

/* ---- usage errors: one line naming the flag ---- */

Test(cli_errors, parse_errors)
{
    static const struct {
        const char *a, *b, *want;
    } cases[] = {
        {"--nproc-per-nodes", "4", "unknown option '--nproc-per-nodes' (did you mean '--nproc-per-node'?)"},
        {"--nproc_pre_node", "4", "unknown option '--nproc-pre-node' (did you mean '--nproc-per-node'?)"},
        {"--n", "4",
         "ambiguous option '--n' (could be --nnodes, --nproc-per-node, --node-rank, --no-python, "
         "--numa-binding)"},
        {"--ma", "x", "ambiguous option '--ma' (could be --master-addr, --master-port, --max-restarts)"},
        {"--master_", "x", "ambiguous option '--master-' (could be --master-addr, --master-port)"},
        {"--svg", "x", "'--svg' is not an option of a launch (only of: report)"},
        {"--standlone", NULL, "unknown option '--standlone' (did you mean '--standalone'?)"},
        {"--master_adr=x", NULL, "unknown option '--master-adr' (did you mean '--master-addr'?)"},
        {"--frobnicate", NULL,
         "unknown option '--frobnicate' (the program's own options go after the script: ddplaunch [OPTIONS] "
         "train.py --frobnicate ...)"},
        {"-x", NULL, "unknown option '-x'"},
        {"--nnodes", NULL, "--nnodes: expected a value (N|MIN:MAX)"},
        {"--node_rank", NULL, "--node-rank: expected a value (N)"},
        {"-r", NULL, "-r: expected a value (0-3|R:V,...)"},
        {"--standalone=yes", NULL, "--standalone takes no value, got 'yes'"},
        {"-mfoo", NULL, "-m takes no value, got 'foo'"},
        {"--set", "x", "--set: expected SECTION.KEY=VALUE, got 'x'"},
        {"--set", "job.=1", "--set: expected SECTION.KEY=VALUE, got 'job.=1'"},
        {"--set", ".role=1", "--set: expected SECTION.KEY=VALUE, got '.role=1'"},
        {"job.ini", "extra",
         "unexpected argument 'extra' after job.ini (put the program's extra arguments after '--')"},
        {"job.ini", "--epochs",
         "unknown option '--epochs' (the program's own options go after '--': ddplaunch [OPTIONS] job.ini -- "
         "--epochs ...)"},
        {"--epochs", "t.py",
         "unknown option '--epochs' (the program's own options go after the script: ddplaunch [OPTIONS] train.py "
         "--epochs ...)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ddp_cli cli;
        struct ddp_err err = {0};
        int rc = parse(&cli, &err, cases[i].a, cases[i].b, NULL);
        cr_expect_eq(rc, -EINVAL, "%s %s: accepted", cases[i].a, cases[i].b ? cases[i].b : "");
        cr_expect_str_eq(err.msg, cases[i].want, "%s %s:\n  got  %s\n  want %s", cases[i].a,
                         cases[i].b ? cases[i].b : "", err.msg, cases[i].want);
        ddp_cli_free(&cli);
    }
}

/* argparse's rule, as torchrun users type them: an unambiguous prefix of a long option is that option, in either
 * form; an exact name wins over a longer one it starts. */
Test(cli_flags, unambiguous_prefixes)
{
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, no_env, "--nproc", "3", "--nnode=2", "--node_r", "1", "--master-p", "29511", "--max-r",
                "4", "--stand", "t.py", "--nproc", "9", NULL);
    expect_fmt(&spec, "job", "nproc_per_node", "3", "--nproc");
    expect_fmt(&spec, "job", "nnodes", "2", "--nnode");
    expect_fmt(&spec, "job", "node_rank", "1", "--node_r");
    expect_fmt(&spec, "job", "master_port", "29511", "--master-p");
    expect_fmt(&spec, "restart", "max_restarts", "4", "--max-r");
    expect_fmt(&spec, "job", "standalone", "yes", "--stand");
    /* the script's own arguments are its own, prefixes or not */
    cr_expect_eq(spec.args.n, 2);
    cr_expect_str_eq(spec.args.v[0], "--nproc");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

/* report and ps parse through the same table: their own options (prefixes too), their own positionals. */
Test(cli_pos, report_and_ps)
{
    struct ddp_cli cli;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "report", "--svg", "t.svg", "logs", NULL), 0, "%s", err.msg);
    cr_expect_eq(cli.cmd, DDP_CMD_REPORT);
    cr_expect_str_eq(cli.dir, "logs");
    cr_expect_str_eq(cli.svg, "t.svg");
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "report", "--sv=t.svg", "--", "-odd", NULL), 0, "%s", err.msg);
    cr_expect_str_eq(cli.dir, "-odd");
    cr_expect_str_eq(cli.svg, "t.svg");
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "ps", "--j", NULL), 0, "%s", err.msg);
    cr_expect_eq(cli.cmd, DDP_CMD_PS);
    cr_expect(cli.json);
    ddp_cli_free(&cli);
    static const struct {
        const char *a, *b, *c, *want;
    } bad[] = {
        {"report", NULL, NULL, "report: a LOG_DIR or RUN_DIR is needed"},
        {"report", "a", "b", "report: one LOG_DIR or RUN_DIR expected, got 'b' too"},
        {"report", "--json", "a", "report: '--json' is not an option of report (only of: plan, topo, doctor, ps)"},
        {"ps", "x", NULL, "ps: unexpected argument 'x' (see 'ddplaunch ps --help')"},
        {"ps", "--nnodes", "2", "ps: '--nnodes' is not an option of ps (only of: run, plan, topo, doctor)"},
        {"ps", "--frob", NULL, "ps: unknown option '--frob'"},
        {"ps", "-v", NULL, "ps: unknown option '-v'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(parse(&cli, &err, bad[i].a, bad[i].b, bad[i].c, NULL), -EINVAL, "%s: accepted", bad[i].want);
        cr_expect_str_eq(err.msg, bad[i].want);
        ddp_cli_free(&cli);
    }
}

Test(cli_errors, bad_values_name_the_flag)
{
    static const struct {
        const char *a, *b, *want;
    } cases[] = {
        {"--nnodes", "3:1", "--nnodes: job.nnodes: expected MIN:MAX with MIN <= MAX, got '3:1'"},
        {"--nproc_per_node", "lots",
         "--nproc-per-node: job.nproc_per_node: expected a number, gpu, cpu or auto, got 'lots'"},
        {"-t", "9", "-t: job.tee: expected 0-3 (0 none, 1 stdout, 2 stderr, 3 both) or per rank like 0:1,1:2, got '9'"},
        {"--numa-binding", "nod",
         "--numa-binding: numa.bind: expected node, socket, exclusive, core-complex or none, got 'nod' (did you mean "
         "'node'?)"},
        {"--max-restarts", "-1", "--max-restarts: restart.max_restarts: expected a non-negative integer, got '-1'"},
        {"--shutdown-timeout", "5x",
         "--shutdown-timeout: restart.shutdown_timeout: unknown duration unit 'x' in '5x' (expected ms, s, m or h)"},
        {"--master-port", "http",
         "--master-port: job.master_port: expected a port from 1 to 65535, auto or auto:LO-HI, "
         "got 'http'"},
        {"--set", "job.nproc_per_nod=2",
         "--set: unknown key 'nproc_per_nod' in [job] (did you mean 'nproc_per_node'?)"},
        {"--set", "jobs.name=2", "--set: unknown section [jobs] (did you mean [job]?)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ddp_cli cli;
        struct ddp_spec spec;
        struct ddp_err err = {0};
        cr_assert_eq(parse(&cli, &err, cases[i].a, cases[i].b, "t.py", NULL), 0, "%s", err.msg);
        ddp_spec_init(&spec);
        int rc = ddp_cli_apply(&cli, &spec, no_env, &err);
        cr_expect(rc < 0, "%s %s: accepted", cases[i].a, cases[i].b);
        cr_expect_str_eq(err.msg, cases[i].want, "%s %s:\n  got  %s\n  want %s", cases[i].a, cases[i].b, err.msg,
                         cases[i].want);
        ddp_spec_free(&spec);
        ddp_cli_free(&cli);
    }
}

/* ---- PET_* defaults ---- */

Test(cli_pet, defaults_from_environment)
{
    char *envp[] = {"PET_NNODES=1:3",
                    "PET_NPROC_PER_NODE=4",
                    "PET_NODE_RANK=0",
                    "PET_MASTER_ADDR=10.9.9.9",
                    "PET_MASTER_PORT=29555",
                    "PET_MAX_RESTARTS=2",
                    "PET_RDZV_ID=abc",
                    "PET_ROLE=worker",
                    "PET_LOG_DIR=/tmp/l",
                    "PET_REDIRECTS=1",
                    "PET_TEE=2",
                    "PET_LOCAL_RANKS_FILTER=0",
                    "PET_NUMA_BINDING=none",
                    "PET_SIGNALS_TO_HANDLE=SIGTERM",
                    "PET_STANDALONE=1",
                    "PET_VIRTUAL_LOCAL_RANK=true",
                    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7",
                    "PET_MONITOR_INTERVAL=5",
                    "PET_START_METHOD=fork",
                    NULL};
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, envp, "t.py", NULL);
    expect_fmt(&spec, "job", "nnodes", "1:3", "PET");
    expect_fmt(&spec, "job", "nproc_per_node", "4", "PET");
    expect_fmt(&spec, "job", "master_addr", "10.9.9.9", "PET");
    expect_fmt(&spec, "job", "master_port", "29555", "PET");
    expect_fmt(&spec, "restart", "max_restarts", "2", "PET");
    expect_fmt(&spec, "job", "run_id", "abc", "PET");
    expect_fmt(&spec, "job", "role", "worker", "PET");
    expect_fmt(&spec, "job", "log_dir", "/tmp/l", "PET");
    expect_fmt(&spec, "job", "redirects", "1", "PET");
    expect_fmt(&spec, "job", "tee", "2", "PET");
    expect_fmt(&spec, "job", "local_ranks_filter", "0", "PET");
    expect_fmt(&spec, "numa", "bind", "none", "PET");
    expect_fmt(&spec, "job", "signals_to_handle", "SIGTERM", "PET");
    expect_fmt(&spec, "job", "standalone", "yes", "PET");
    expect_fmt(&spec, "gpus", "visible", "virtual", "PET");
    expect_fmt(&spec, "restart", "shutdown_timeout", "7s", "PET");
    cr_expect_eq(spec.origin[key("job", "nproc_per_node")], DDP_ORIGIN_ENV);
    cr_expect_eq(spec.origin[key("gpus", "visible")], DDP_ORIGIN_ENV);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pet, shutdown_timeout_pet_beats_torch_elastic_and_no_python_with_module_is_refused)
{
    char *envp[] = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7", "PET_SHUTDOWN_TIMEOUT=9", NULL};
    char *envp2[] = {"PET_MODULE=1", NULL};
    struct ddp_cli cli;
    struct ddp_spec spec;
    struct ddp_err err = {0};
    parse_apply(&cli, &spec, envp, "t.py", NULL);
    expect_fmt(&spec, "restart", "shutdown_timeout", "9s", "PET");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--no-python", "-m", "pkg", NULL), 0);
    ddp_spec_init(&spec);
    cr_expect_eq(ddp_cli_apply(&cli, &spec, no_env, &err), -EINVAL);
    cr_expect(strstr(err.msg, "--no-python and --module") != NULL, "%s", err.msg);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "--no-python", "prog", NULL), 0);
    ddp_spec_init(&spec);
    cr_expect_eq(ddp_cli_apply(&cli, &spec, envp2, &err), -EINVAL, "PET_MODULE with --no-python");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pet, flags_beat_pet_and_pet_beats_the_spec)
{
    char *envp[] = {"PET_NPROC_PER_NODE=4", "PET_MAX_RESTARTS=2", "PET_STANDALONE=0", "PET_ROLE=petrole", NULL};
    struct ddp_cli cli;
    struct ddp_spec spec;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "--nproc-per-node", "2", "job.ini", NULL), 0);
    ddp_spec_init(&spec);
    const char *t = "[job]\nscript = a.py\nnproc_per_node = 8\nrole = specrole\nstandalone = yes\n"
                    "[restart]\nmax_restarts = 5\n";
    cr_assert_eq(ddp_spec_load_string(&spec, "job.ini", t, strlen(t), DDP_ORIGIN_SPEC, &err), 0);
    cr_assert_eq(ddp_cli_apply_pet(&spec, envp, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_spec_apply_env(&spec, envp, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_cli_apply(&cli, &spec, envp, &err), 0, "%s", err.msg);
    cr_expect_eq(spec.nproc_per_node.n, 2); /* flag */
    cr_expect_eq(spec.origin[key("job", "nproc_per_node")], DDP_ORIGIN_CLI);
    cr_expect_eq(spec.max_restarts, 2); /* PET over spec */
    cr_expect_eq(spec.origin[key("restart", "max_restarts")], DDP_ORIGIN_ENV);
    cr_expect_str_eq(spec.role, "petrole");
    cr_expect(spec.standalone); /* PET_STANDALONE=0 does not switch a spec's yes off */
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pet, module_and_no_python_from_environment)
{
    char *m_env[] = {"PET_MODULE=1", NULL};
    char *np_env[] = {"PET_NO_PYTHON=true", NULL};
    char *off_env[] = {"PET_MODULE=0", "PET_NO_PYTHON=no", NULL};
    struct ddp_cli cli;
    struct ddp_spec spec;
    parse_apply(&cli, &spec, m_env, "pkg.mod", "x", NULL);
    cr_expect_str_eq(spec.module, "pkg.mod");
    cr_expect_null(spec.script);
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, np_env, "/bin/true", NULL);
    cr_expect_str_eq(spec.program, "/bin/true");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
    parse_apply(&cli, &spec, off_env, "t.py", NULL);
    cr_expect_str_eq(spec.script, "t.py");
    ddp_spec_free(&spec);
    ddp_cli_free(&cli);
}

Test(cli_pet, bad_pet_value_names_the_variable)
{
    char *envp[] = {"PET_NNODES=two", NULL};
    struct ddp_spec spec;
    struct ddp_err err = {0};
    ddp_spec_init(&spec);
    cr_expect(ddp_cli_apply_pet(&spec, envp, &err) < 0);
    cr_expect_str_eq(err.msg, "PET_NNODES: job.nnodes: expected N or MIN:MAX with positive integers, got 'two'");
    ddp_spec_free(&spec);
}

Test(cli_help, keys_listing_has_every_key)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ddp_cli_help_keys(f);
    fclose(f);
    /* docs are wrapped at 80 columns: compare with the continuation breaks ("\n      ") as spaces */
    for (char *p; (p = strstr(out, "\n      ")) != NULL;)
        memmove(p, p + 6, strlen(p + 6) + 1), *p = ' ';
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        char *sec = ddp_xasprintf("[%s]", ddp_spec_keys[i].section);
        cr_expect_not_null(strstr(out, sec), "%s missing", sec);
        cr_expect_not_null(strstr(out, ddp_spec_keys[i].name), "%s missing", ddp_spec_keys[i].name);
        cr_expect_not_null(strstr(out, ddp_spec_keys[i].doc), "doc of %s missing", ddp_spec_keys[i].name);
        free(sec);
    }
    free(out);
}

Test(cli_help, a_commands_help_is_its_own_and_fits_80_columns)
{
    static const struct {
        const char *word;
        enum ddp_cmd sub;
        const char *first;
    } cases[] = {
        {NULL, DDP_CMD_RUN, "Usage: ddplaunch [options] JOB.ini"},
        {"plan", DDP_CMD_PLAN, "Usage: ddplaunch plan "},
        {"topo", DDP_CMD_TOPO, "Usage: ddplaunch topo "},
        {"doctor", DDP_CMD_DOCTOR, "Usage: ddplaunch doctor "},
        {"ps", DDP_CMD_PS, "Usage: ddplaunch ps [--json]\n"},
        {"report", DDP_CMD_REPORT, "Usage: ddplaunch report [--svg FILE] LOG_DIR|RUN_DIR\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ddp_cli cli;
        struct ddp_err err = {0};
        const char *opt = cases[i].sub == DDP_CMD_REPORT ? "--svg=x.svg" : "--json";
        int rc = cases[i].word ? parse(&cli, &err, cases[i].word, opt, "--help", NULL) : parse(&cli, &err, "-h", NULL);
        cr_assert_eq(rc, 0, "%s", err.msg);
        cr_expect_eq(cli.cmd, DDP_CMD_HELP);
        cr_expect_eq(cli.sub, cases[i].sub);
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        ddp_cli_help_cmd(f, cli.sub);
        fclose(f);
        cr_expect_eq(strncmp(out, cases[i].first, strlen(cases[i].first)), 0, "%.60s", out);
        for (char *line = out, *nl; *line; line = nl + 1) {
            nl = strchr(line, '\n');
            cr_assert_not_null(nl);
            cr_expect_leq(nl - line, 80, "wider than 80 columns: %.*s", (int)(nl - line), line);
        }
        free(out);
        ddp_cli_free(&cli);
    }
}

Test(cli_pos, script_to_check)
{
    char *np_env[] = {"PET_NO_PYTHON=1", NULL};
    struct ddp_cli cli;
    struct ddp_err err = {0};
    cr_assert_eq(parse(&cli, &err, "help", NULL), 0);
    cr_expect_eq(cli.cmd, DDP_CMD_RUN);
    char *p = ddp_cli_script_to_check(&cli, NULL, no_env);
    cr_expect_str_eq(p, "help");
    free(p);
    p = ddp_cli_script_to_check(&cli, "/w", no_env);
    cr_expect_str_eq(p, "/w/help");
    free(p);
    cr_expect_null(ddp_cli_script_to_check(&cli, NULL, np_env));
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "-m", "pkg.help", NULL), 0);
    cr_expect_null(ddp_cli_script_to_check(&cli, NULL, no_env));
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "/abs/t.py", NULL), 0);
    p = ddp_cli_script_to_check(&cli, "/w", no_env);
    cr_expect_str_eq(p, "/abs/t.py");
    free(p);
    ddp_cli_free(&cli);
    cr_assert_eq(parse(&cli, &err, "job.ini", NULL), 0);
    cr_expect_null(ddp_cli_script_to_check(&cli, NULL, no_env));
    ddp_cli_free(&cli);
}
