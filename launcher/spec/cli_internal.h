/* cli_internal: the two tables of the command line, shared by cli.c (which parses with them) and cli_help.c
 * (which prints them); nothing else includes it. Both are static data: no function here allocates. */
#ifndef DDP_CLI_INTERNAL_H
#define DDP_CLI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "spec/cli.h"

enum ddp_cli_flag_kind {
    F_KEY,       /* sets section.key to the argument */
    F_KEY_YES,   /* sets section.key to "yes", takes no argument */
    F_KEY_FIXED, /* sets section.key to a fixed value, no argument */
    F_IGNORED,   /* torchrun flag with an argument that means nothing here */
    F_IGNORED0,  /* the same without an argument */
    F_MODULE,
    F_NO_PYTHON,
    F_SET,
    F_JSON,
    F_FULL,
    F_TOPOLOGY,
    F_CONFIG,
    F_HELP,
    F_VERSION,
    F_KEYS,
    F_VERBOSE,
    F_QUIET,
    F_SVG,
};

struct ddp_cli_flag {
    const char *name; /* dash form without the leading "--" */
    char short_name;
    enum ddp_cli_flag_kind kind;
    const char *section, *key, *fixed;
    const char *pet; /* torchrun environment default, or NULL */
    const char *arg;
    const char *help;
    unsigned cmds; /* the commands that take it: bits 1 << DDP_CMD_* */
};

/* What follows a subcommand's options. */
enum ddp_cli_positional {
    POS_LAUNCH, /* JOB.ini [-- args], or SCRIPT|PROGRAM args... (run, plan, topo, doctor) */
    POS_NONE,   /* nothing (ps) */
    POS_DIR,    /* one LOG_DIR or RUN_DIR (report) */
};

/* The subcommand table: one row per command, its word, what follows its options, its line in the global usage and
 * its own --help (the text before its options, the options listed, the exit statuses). Which options a command
 * takes is the flag table's cmds column. */
struct ddp_cli_subcmd {
    const char *name; /* the word after "ddplaunch"; NULL: run (no word) */
    enum ddp_cmd cmd;
    enum ddp_cli_positional positional;
    const char *synopsis;      /* its line in the global usage, after "ddplaunch " */
    const char *about;         /* how its --help starts (run: the global help) */
    const char *const *listed; /* the options its --help lists */
    const char *exit_status;   /* how its --help ends */
};

/* The flag table, in --help's order (torchrun's flags, then ddplaunch's own from "console"). */
extern const struct ddp_cli_flag ddp_cli_flags[];
extern const size_t ddp_cli_nflags;
/* Whether command cmd takes flag f. */
bool ddp_cli_flag_takes(const struct ddp_cli_flag *f, enum ddp_cmd cmd);
/* The flag of that exact dash-form name ("nproc-per-node"), whoever takes it, or NULL. */
const struct ddp_cli_flag *ddp_cli_flag_find(const char *name);

/* The subcommand table, run first (no word). */
extern const struct ddp_cli_subcmd ddp_cli_subcmds[];
extern const size_t ddp_cli_nsubcmds;
/* cmd's row; run's row for a value that is no subcommand (help, version, keys). */
const struct ddp_cli_subcmd *ddp_cli_subcmd_of(enum ddp_cmd cmd);

#endif
