/* cli: the command line: one table of flags (torchrun's, in dash and underscore forms and unambiguous prefixes,
 * PET_* defaults, and ddplaunch's own) and one table of subcommands (run, plan, topo, doctor, report, ps) with the
 * options each takes and its help. It maps flags onto spec keys; it does not read files or look at the machine,
 * and it runs no command (main.c wires each to its module). */
#ifndef DDP_CLI_H
#define DDP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "base/util.h"
#include "spec/spec.h"

enum ddp_cmd {
    DDP_CMD_RUN,
    DDP_CMD_PLAN,
    DDP_CMD_TOPO,
    DDP_CMD_DOCTOR,
    DDP_CMD_REPORT,
    DDP_CMD_PS,
    DDP_CMD_HELP,
    DDP_CMD_VERSION,
    DDP_CMD_KEYS,
    DDP_CMD_COUNT
};

struct ddp_cli {
    enum ddp_cmd cmd;
    enum ddp_cmd sub; /* the subcommand named on the command line (plan, topo, doctor, report, ps), else
                         DDP_CMD_RUN; with --help, cmd is DDP_CMD_HELP and sub says whose help */
    bool json;
    bool full;       /* plan --full: every setting and each rank's environment, also on a terminal */
    char *dir;       /* report: LOG_DIR or RUN_DIR */
    char *svg;       /* report --svg FILE */
    char *topology;  /* --topology FILE */
    char *config;    /* --config FILE (site config) */
    char *spec_path; /* JOB.ini */
    char *target;    /* the training script or program, torchrun style */
    struct ddp_strv target_args;
    bool module;            /* -m */
    bool no_python;         /* --no-python */
    int verbosity;          /* -v / -q adjust */
    struct ddp_kvlist sets; /* "section.key" -> value, in command-line order; file = the flag */
};

/* Parse argv: the subcommand (argv[1] when it is one's word), then the options that command takes (a long option
 * by its name or an unambiguous prefix; an ambiguous one is an error listing the candidates), then its positional
 * arguments. 0, or -EINVAL with err->msg = "FLAG: what was expected" (main prints it, then
 * "Try 'ddplaunch --help'.", exit 2). Caller owns cli; free with ddp_cli_free(). */
int ddp_cli_parse(int argc, char **argv, struct ddp_cli *cli, struct ddp_err *err);
void ddp_cli_free(struct ddp_cli *cli);

/* Apply PET_* variables (torchrun's environment defaults) from envp at origin env. */
int ddp_cli_apply_pet(struct ddp_spec *spec, char *const *envp, struct ddp_err *err);
/* Apply the command line's settings (flags, --set, the script and its args) at origin cli; envp supplies
 * PET_MODULE / PET_NO_PYTHON. */
int ddp_cli_apply(const struct ddp_cli *cli, struct ddp_spec *spec, char *const *envp, struct ddp_err *err);

/* The usage text of a command: DDP_CMD_RUN (or any value that is not a subcommand) the global --help, a
 * subcommand's (DDP_CMD_PLAN, _TOPO, _DOCTOR, _REPORT, _PS) its own. Every line fits in 80 columns. */
void ddp_cli_help_cmd(FILE *f, enum ddp_cmd cmd);
/* The global --help (ddp_cli_help_cmd with DDP_CMD_RUN). */
void ddp_cli_help(FILE *f);
/* Every spec key with type, default and description (ddplaunch --help-keys). */
void ddp_cli_help_keys(FILE *f);

/* Whether a command-line target that does not exist is worth one "no such file" line before anything starts:
 * the target (cli->target) is a Python script (not -m, not --no-python, nor PET_MODULE / PET_NO_PYTHON in envp)
 * and its path, relative to workdir when workdir is non-NULL and the path is relative, is what to check.
 * Pure: returns the path to check (caller frees) or NULL when there is nothing to check. */
char *ddp_cli_script_to_check(const struct ddp_cli *cli, const char *workdir, char *const *envp);

/* The subcommands' words for a message: "plan, topo, doctor, report and ps". Static storage. */
const char *ddp_cli_command_names(void);
/* Whether word is a subcommand's name ("plan"): a target that is one was meant as the command, given too late. */
bool ddp_cli_is_command(const char *word);

/* For the test that keeps --help and the man page in step: NULL-terminated long flag names ("--nnodes"). */
const char *const *ddp_cli_flag_names(void);

#endif
