/* cli: the command line: torchrun's flags (dash and underscore forms, PET_* defaults) and ddplaunch's own,
 * subcommands, help. It maps flags onto spec keys; it does not read files or look at the machine. */
#ifndef DDP_CLI_H
#define DDP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "spec.h"
#include "util.h"

enum ddp_cmd { DDP_CMD_RUN, DDP_CMD_PLAN, DDP_CMD_TOPO, DDP_CMD_DOCTOR, DDP_CMD_HELP, DDP_CMD_VERSION, DDP_CMD_KEYS };

struct ddp_cli {
    enum ddp_cmd cmd;
    bool json;
    char *topology;   /* --topology FILE */
    char *config;     /* --config FILE (site config) */
    char *spec_path;  /* JOB.ini */
    char *target;     /* the training script or program, torchrun style */
    struct ddp_strv target_args;
    bool module;      /* -m */
    bool no_python;   /* --no-python */
    int verbosity;    /* -v / -q adjust */
    struct ddp_kvlist sets; /* "section.key" -> value, in command-line order; file = the flag */
};

/* Parse argv. 0, or -EINVAL with err->msg = "FLAG: what was expected" (main prints it, then
 * "Try 'ddplaunch --help'.", exit 2). Caller owns cli; free with ddp_cli_free(). */
int ddp_cli_parse(int argc, char **argv, struct ddp_cli *cli, struct ddp_err *err);
void ddp_cli_free(struct ddp_cli *cli);

/* Apply PET_* variables (torchrun's environment defaults) from envp at origin env. */
int ddp_cli_apply_pet(struct ddp_spec *spec, char *const *envp, struct ddp_err *err);
/* Apply the command line's settings (flags, --set, the script and its args) at origin cli; envp supplies
 * PET_MODULE / PET_NO_PYTHON. */
int ddp_cli_apply(const struct ddp_cli *cli, struct ddp_spec *spec, char *const *envp, struct ddp_err *err);

void ddp_cli_help(FILE *f);
/* Every spec key with type, default and description (ddplaunch --help-keys). */
void ddp_cli_help_keys(FILE *f);

/* For the test that keeps --help and the man page in step: NULL-terminated long flag names ("--nnodes"). */
const char *const *ddp_cli_flag_names(void);

#endif
