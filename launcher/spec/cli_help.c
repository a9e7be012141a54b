/* cli_help: see cli.h (ddp_cli_help_cmd, ddp_cli_help, ddp_cli_help_keys): the usage texts, printed from the flag
 * and subcommand tables of cli.c and the spec's key table. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "spec/cli.h"
#include "spec/cli_internal.h"
#include "spec/spec.h"

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
static void put_flag(FILE *f, const struct ddp_cli_flag *fl)
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
        put_flag(f, ddp_cli_flag_find(*n));
}

/* The global usage's lines, one per command, from the subcommand table. */
static void put_synopses(FILE *f)
{
    fputs("Usage: ddplaunch [options] JOB.ini [-- extra args for the program]\n"
          "       ddplaunch [options] SCRIPT.py|PROGRAM [args...]   (torchrun style)\n",
          f);
    struct ddp_buf names = {0};
    for (size_t i = 1; i < ddp_cli_nsubcmds; i++) {
        const char *tab = strchr(ddp_cli_subcmds[i].synopsis, '\t');
        fprintf(f, "       ddplaunch %-40.*s(%s)\n", (int)(tab - ddp_cli_subcmds[i].synopsis),
                ddp_cli_subcmds[i].synopsis, tab + 1);
        ddp_buf_printf(&names, "%s%s", i > 1 ? "|" : "", ddp_cli_subcmds[i].name);
    }
    char line[128];
    snprintf(line, sizeof line, "%s --help", names.data);
    fprintf(f, "       ddplaunch %-40s(a command's help)\n", line);
    ddp_buf_free(&names);
}

void ddp_cli_help_cmd(FILE *f, enum ddp_cmd cmd)
{
    const struct ddp_cli_subcmd *sc = ddp_cli_subcmd_of(cmd);
    if (sc->about) {
        fputs(sc->about, f);
        put_named_flags(f, sc->listed);
        fprintf(f, "\n%sSee ddplaunch(1).\n", sc->exit_status);
        return;
    }
    put_synopses(f);
    fputs("\n"
          "Launch and supervise a PyTorch distributed job: pick same-NUMA GPUs and a free\n"
          "port, bind workers to their GPU's NUMA node, forward output and signals, detect\n"
          "failures and hangs, restart or downsize. A hang whose rank is stuck (no CPU, no\n"
          "I/O) is stopped by default ([timeout] on_suspect = auto); a rank working alone\n"
          "is not.\n"
          "\n"
          "Options (torchrun's flags; --dash-form and --underscore_form both work, and so\n"
          "does a prefix that names one option, as --nproc):\n",
          f);
    for (size_t i = 0; i < ddp_cli_nflags; i++) {
        put_flag(f, &ddp_cli_flags[i]);
        if (strcmp(ddp_cli_flags[i].name, "duplicate-stderr-filters") == 0)
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
          "A worker's own code may be any of these: with --log-dir, summary.json's\n"
          "exit.source (worker or launcher) tells them apart, also for a refused launch.\n"
          "A signal ignored at start (nohup: SIGHUP) stays ignored.\n"
          "\n"
          "See ddplaunch(1) and ddplaunch.ini(5).\n",
          f);
}

void ddp_cli_help(FILE *f)
{
    ddp_cli_help_cmd(f, DDP_CMD_RUN);
}

/* The keys a section takes besides the table's, under its header: [nccl] any NCCL/torch variable, [env] any. */
static void put_open_keys(FILE *f, const char *section, bool *nccl, bool *env)
{
    if (strcmp(section, "nccl") == 0 && !*nccl) {
        fputs("  NCCL_*, TORCH_*     any NCCL or torch variable, validated before launch\n", f);
        *nccl = true;
    } else if (strcmp(section, "env") == 0 && !*env) {
        fputs("  NAME                any variable for the workers; ${VAR} expands from the\n"
              "                      launcher's environment\n",
              f);
        *env = true;
    }
}

void ddp_cli_help_keys(FILE *f)
{
    static const char *const type_names[] = {"string",      "integer", "yes|no", "choice",         "duration",
                                             "N|MIN:MAX",   "list",    "argv",   "N|gpu|cpu|auto", "port|auto",
                                             "0-3|R:V,...", "size|N%", "half|N", "auto|yes|no"};
    const char *section = "";
    bool nccl = false, env = false; /* their open keys listed */
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        const struct ddp_key *k = &ddp_spec_keys[i];
        if (strcmp(section, k->section) != 0) {
            put_open_keys(f, section, &nccl, &env);
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
    put_open_keys(f, section, &nccl, &env);
    if (!nccl)
        fputs("\n[nccl]\n", f), put_open_keys(f, "nccl", &nccl, &env);
    if (!env)
        fputs("\n[env]\n", f), put_open_keys(f, "env", &nccl, &env);
}
