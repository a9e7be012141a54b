/* spec: see spec.h. The key table below is the single source of truth for the job spec. */
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OFF(field) offsetof(struct ddp_spec, field)

static const char *const policy_names[] = {"same-numa", "pack", "spread", "any", NULL};
static const char *const visible_names[] = {"per-job", "per-rank", "virtual", NULL};
static const char *const console_names[] = {"auto", "raw", "lines", NULL};
static const char *const bind_names[] = {"node", "socket", "exclusive", "core-complex", "none", NULL};
static const char *const membind_names[] = {"local", "interleave", "none", NULL};
static const char *const on_failure_names[] = {"restart", "fail", NULL};
static const char *const on_timeout_names[] = {"restart", "downsize", "fail", NULL};
static const char *const heartbeat_names[] = {"file", "output", "none", NULL};
static const char *const on_suspect_names[] = {"warn", "restart", "downsize", NULL};
static const char *const tristate_names[] = {"auto", "yes", "no", NULL};

const char *const ddp_spec_sections[] = {"job", "gpus", "numa", "restart", "timeout", "nccl", "env", "slurm", NULL};

/* clang-format off */
const struct ddp_key ddp_spec_keys[] = {
    { "job", "name", DDP_T_STR, OFF(name), NULL, NULL, 0, 0,
      "job name, shown in messages and GPU leases (default: the program's base name)" },
    { "job", "command", DDP_T_ARGV, OFF(command), NULL, NULL, 0, 0,
      "the program and its arguments, shell-like quoting, never run through a shell" },
    { "job", "script", DDP_T_STR, OFF(script), NULL, NULL, 0, 0,
      "a Python script, run as: python3 -u SCRIPT ARGS" },
    { "job", "module", DDP_T_STR, OFF(module), NULL, NULL, 0, 0,
      "a Python module, run as: python3 -u -m MODULE ARGS" },
    { "job", "program", DDP_T_STR, OFF(program), NULL, NULL, 0, 0,
      "a program run directly with ARGS (torchrun --no-python)" },
    { "job", "args", DDP_T_ARGV, OFF(args), NULL, NULL, 0, 0,
      "arguments for script, module or program (shell-like quoting)" },
    { "job", "nproc_per_node", DDP_T_NPROC, OFF(nproc_per_node), "1", NULL, 0, 0,
      "workers on this node: a number, gpu (one per usable GPU), cpu (one per CPU) or auto" },
    { "job", "min_nproc_per_node", DDP_T_INT, OFF(min_nproc_per_node), "0", NULL, 0, 1 << 20,
      "smallest size a timeout may downsize the job to (0: 1 with on_timeout = downsize, else nproc_per_node)" },
    { "job", "nnodes", DDP_T_RANGE, OFF(nnodes), "1", NULL, 0, 0,
      "number of nodes, N or MIN:MAX" },
    { "job", "node_rank", DDP_T_INT, OFF(node_rank), "0", NULL, 0, 1 << 20,
      "rank of this node, 0 to nnodes-1" },
    { "job", "master_addr", DDP_T_STR, OFF(master_addr), "127.0.0.1", NULL, 0, 0,
      "address of the node that runs rank 0" },
    { "job", "master_port", DDP_T_PORT, OFF(master_port), "auto", NULL, 0, 0,
      "port of rank 0's store: a number, auto or auto:LO-HI (a free port, reserved host-wide)" },
    { "job", "workdir", DDP_T_STR, OFF(workdir), NULL, NULL, 0, 0,
      "working directory of the workers (default: the launcher's)" },
    { "job", "log_dir", DDP_T_STR, OFF(log_dir), NULL, NULL, 0, 0,
      "directory for per-attempt, per-rank logs and error files: RUNID_XXXXXXXX/attempt_N/RANK (default: none)" },
    { "job", "tee", DDP_T_STD, OFF(tee), "0", NULL, 0, 0,
      "also copy to log files: 0 none, 1 stdout, 2 stderr, 3 both; or per rank 0:1,1:2" },
    { "job", "redirects", DDP_T_STD, OFF(redirects), "0", NULL, 0, 0,
      "send to log files only (not the console), same values as tee" },
    { "job", "local_ranks_filter", DDP_T_LIST, OFF(local_ranks_filter), NULL, NULL, 0, 0,
      "only these local ranks are shown on the console (default: all)" },
    { "job", "role", DDP_T_STR, OFF(role), "default", NULL, 0, 0,
      "role name (ROLE_NAME)" },
    { "job", "log_line_prefix", DDP_T_STR, OFF(log_line_prefix), "[rank${rank}]: ", NULL, 0, 0,
      "console prefix template: ${rank} ${local_rank} ${role_name} ${host} ${time}; empty for none" },
    { "job", "console", DDP_T_ENUM, OFF(console_mode), "auto", console_names, 0, 0,
      "worker output on the console: raw (bytes as they come), lines (whole lines, log_line_prefix), "
      "auto (raw when one worker's output reaches the console and no log_line_prefix is set, else lines: "
      "prefixed on a terminal, without prefix on a file or pipe); --tee copies get torchrun's prefix" },
    { "job", "run_id", DDP_T_STR, OFF(run_id), NULL, NULL, 0, 0,
      "run id (TORCHELASTIC_RUN_ID; default: a fresh one, or the Slurm job id)" },
    { "job", "rdzv_backend", DDP_T_STR, OFF(rdzv_backend), "static", NULL, 0, 0,
      "static (every node gives its node_rank) or c10d (ranks given at join)" },
    { "job", "rdzv_endpoint", DDP_T_STR, OFF(rdzv_endpoint), NULL, NULL, 0, 0,
      "HOST[:PORT]: sets master_addr (and master_port) as torchrun's c10d endpoint would" },
    { "job", "rdzv_conf", DDP_T_STR, OFF(rdzv_conf), NULL, NULL, 0, 0,
      "key=value,... as torchrun's; join_timeout (seconds) is used" },
    { "job", "join_timeout", DDP_T_DURATION, OFF(join_timeout_ms), "0", NULL, 0, 0,
      "wait this long for every node to join; 0 = 600s (c10d), 900s (static)" },
    { "job", "lost_after", DDP_T_DURATION, OFF(lost_after_ms), "15s", NULL, 0, 0,
      "an agent that does not answer a heartbeat within this long is lost (torchrun: 3 x 5s)" },
    { "job", "standalone", DDP_T_BOOL, OFF(standalone), "no", NULL, 0, 0,
      "single node on localhost with a free port (torchrun --standalone)" },
    { "job", "local_addr", DDP_T_STR, OFF(local_addr), NULL, NULL, 0, 0,
      "address of this node as others reach it (torchrun --local-addr)" },
    { "job", "signals_to_handle", DDP_T_LIST, OFF(signals_to_handle), "SIGTERM,SIGINT,SIGHUP,SIGQUIT", NULL,
      0, 0, "signals forwarded to every worker (add SIGUSR1/SIGUSR2 for Slurm preemption)" },
    { "job", "secret", DDP_T_STR, OFF(secret), NULL, NULL, 0, 0,
      "shared secret of a multi-node job (prefer secret_file or the environment)" },
    { "job", "secret_file", DDP_T_STR, OFF(secret_file), NULL, NULL, 0, 0,
      "private file (mode 600) holding the multi-node job's shared secret" },
    { "job", "run_path", DDP_T_BOOL, OFF(run_path), "no", NULL, 0, 0,
      "accepted for torchrun compatibility (--run-path): the script runs as a file either way" },
    { "gpus", "select", DDP_T_LIST, OFF(gpus_select), "auto", NULL, 0, 0,
      "auto, none (CPU workers), or a list of GPU indices, PCI bus ids or UUIDs" },
    { "gpus", "exclude", DDP_T_LIST, OFF(gpus_exclude), NULL, NULL, 0, 0,
      "GPUs never to use (indices, PCI bus ids or UUIDs)" },
    { "gpus", "policy", DDP_T_ENUM, OFF(gpus_policy), "same-numa", policy_names, 0, 0,
      "how to pick: same-numa, pack, spread or any" },
    { "gpus", "max_memory_used", DDP_T_MEM, OFF(gpus_max_memory_used), "none", NULL, 0, 0,
      "skip GPUs with more memory in use than this (e.g. 10%, 2GiB; needs NVML)" },
    { "gpus", "visible", DDP_T_ENUM, OFF(gpus_visible), "per-job", visible_names, 0, 0,
      "per-job: every worker sees the job's GPUs; per-rank: each sees only its own; virtual: per-rank and "
      "LOCAL_RANK=0 (torchrun --virtual-local-rank)" },
    { "gpus", "lease", DDP_T_TRISTATE, OFF(gpus_lease), "auto", tristate_names, 0, 0,
      "lease GPUs so concurrent jobs on this host get disjoint sets (auto: yes unless under Slurm)" },
    { "gpus", "lease_wait", DDP_T_DURATION, OFF(gpus_lease_wait_ms), "0", NULL, 0, 0,
      "how long to wait for leased GPUs to become free (0: fail at once)" },
    { "numa", "bind", DDP_T_ENUM, OFF(numa_bind), "node", bind_names, 0, 0,
      "CPU binding: node, socket, exclusive, core-complex or none" },
    { "numa", "memory", DDP_T_ENUM, OFF(numa_memory), "local", membind_names, 0, 0,
      "memory policy: local, interleave or none" },
    { "numa", "strict", DDP_T_BOOL, OFF(numa_strict), "no", NULL, 0, 0,
      "a binding that cannot be applied is an error instead of a warning" },
    { "restart", "max_restarts", DDP_T_INT, OFF(max_restarts), "0", NULL, 0, 1000000,
      "how many times the job may be restarted" },
    { "restart", "backoff", DDP_T_DURATION, OFF(backoff_ms), "1s", NULL, 0, 0,
      "pause before a restart (doubles each time, up to 1 minute)" },
    { "restart", "on_failure", DDP_T_ENUM, OFF(on_failure), "restart", on_failure_names, 0, 0,
      "when a worker fails: restart (while restarts remain) or fail" },
    { "restart", "on_timeout", DDP_T_ENUM, OFF(on_timeout), "restart", on_timeout_names, 0, 0,
      "when the job hangs or times out: restart, downsize or fail" },
    { "restart", "downsize_after", DDP_T_INT, OFF(downsize_after), "1", NULL, 1, 1000000,
      "timeouts at one size before downsizing" },
    { "restart", "downsize_to", DDP_T_DOWNSIZE, OFF(downsize_to), "half", NULL, 0, 0,
      "next size after a timeout: half or a number of workers" },
    { "restart", "shutdown_timeout", DDP_T_DURATION, OFF(shutdown_timeout_ms), "30s", NULL, 0, 0,
      "grace time between SIGTERM and SIGKILL when stopping workers" },
    { "timeout", "init", DDP_T_DURATION, OFF(timeout_init_ms), "off", NULL, 0, 0,
      "every rank must show life (heartbeat or output) within this after start" },
    { "timeout", "stall", DDP_T_DURATION, OFF(timeout_stall_ms), "off", NULL, 0, 0,
      "a rank without progress (see heartbeat) for this long is hung (from its start unless init is set)" },
    { "timeout", "heartbeat", DDP_T_ENUM, OFF(heartbeat), "file", heartbeat_names, 0, 0,
      "progress signal for stall: file (DDPLAUNCH_HEARTBEAT_FILE), output or none" },
    { "timeout", "wall", DDP_T_DURATION, OFF(timeout_wall_ms), "off", NULL, 0, 0,
      "limit for one attempt" },
    { "timeout", "timer_file", DDP_T_BOOL, OFF(timer_file), "no", NULL, 0, 0,
      "serve torch's file-based watchdog (TORCHELASTIC_TIMER_FILE)" },
    { "timeout", "stacks", DDP_T_BOOL, OFF(timeout_stacks), "yes", NULL, 0, 0,
      "before a hung attempt is stopped, capture each Python rank's stack and name the culprit rank" },
    { "timeout", "sample", DDP_T_BOOL, OFF(timeout_sample), "yes", NULL, 0, 0,
      "sample each Python rank's stacks while it runs (signal 37, SIGRTMIN+3): suspected hangs, stragglers" },
    { "timeout", "sample_interval", DDP_T_DURATION, OFF(sample_interval_ms), "1s", NULL, 0, 0,
      "time between two stack samples of every rank" },
    { "timeout", "suspect_floor", DDP_T_DURATION, OFF(suspect_floor_ms), "30s", NULL, 0, 0,
      "a hang is suspected after no progress for max(this, 3 x the longest gap seen)" },
    { "timeout", "suspect_setup", DDP_T_DURATION, OFF(suspect_setup_ms), "45s", NULL, 0, 0,
      "no hang is suspected in an attempt's first this long" },
    { "timeout", "on_suspect", DDP_T_ENUM, OFF(on_suspect), "warn", on_suspect_names, 0, 0,
      "a suspected hang: warn (the job runs on), or restart or downsize after on_suspect_after" },
    { "timeout", "on_suspect_after", DDP_T_DURATION, OFF(on_suspect_after_ms), "10m", NULL, 0, 0,
      "how long a suspected hang lasts before on_suspect restarts or downsizes" },
    { "nccl", "preset", DDP_T_STR, OFF(nccl_preset), NULL, NULL, 0, 0,
      "a set of NCCL/torch variables: debug, robust or none" },
    { "slurm", "enabled", DDP_T_TRISTATE, OFF(slurm_enabled), "auto", tristate_names, 0, 0,
      "take nodes, ranks, address and GPUs from Slurm: auto (inside srun), yes or no" },
};
/* clang-format on */
const size_t ddp_spec_nkeys = sizeof ddp_spec_keys / sizeof ddp_spec_keys[0];

const char *ddp_origin_name(enum ddp_origin o)
{
    static const char *const names[] = {"default", "site", "spec", "env", "cli"};
    return names[o];
}

int ddp_spec_key_find(const char *section, const char *name)
{
    for (size_t i = 0; i < ddp_spec_nkeys; i++)
        if (strcmp(ddp_spec_keys[i].section, section) == 0 && strcmp(ddp_spec_keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

static bool is_section(const char *s)
{
    for (const char *const *p = ddp_spec_sections; *p; p++)
        if (strcmp(*p, s) == 0)
            return true;
    return false;
}

/* ---- values ---- */

static void *field(struct ddp_spec *spec, size_t i)
{
    return (char *)spec + ddp_spec_keys[i].offset;
}

static const void *cfield(const struct ddp_spec *spec, size_t i)
{
    return (const char *)spec + ddp_spec_keys[i].offset;
}

static void free_value(struct ddp_spec *spec, size_t i)
{
    void *f = field(spec, i);
    switch (ddp_spec_keys[i].type) {
    case DDP_T_STR:
    case DDP_T_STD:
        free(*(char **)f);
        *(char **)f = NULL;
        break;
    case DDP_T_LIST:
    case DDP_T_ARGV:
        ddp_strv_clear(f);
        break;
    default:
        break;
    }
}

int ddp_spec_split_argv(const char *s, struct ddp_strv *out, struct ddp_err *err)
{
    struct ddp_buf word = {0};
    bool in_word = false;
    ddp_strv_clear(out);
    for (const char *p = s;; p++) {
        char c = *p;
        if (c == '\0' || isspace((unsigned char)c)) {
            if (in_word) {
                ddp_strv_push(out, word.data ? word.data : "");
                ddp_buf_free(&word);
                in_word = false;
            }
            if (c == '\0')
                break;
            continue;
        }
        in_word = true;
        if (c == '\'') {
            const char *end = strchr(p + 1, '\'');
            if (!end)
                goto unterminated;
            ddp_buf_add(&word, p + 1, (size_t)(end - p - 1));
            p = end;
        } else if (c == '"') {
            for (p++; *p != '"'; p++) {
                if (*p == '\0')
                    goto unterminated;
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$' || p[1] == '`'))
                    p++;
                ddp_buf_add(&word, p, 1);
            }
        } else if (c == '\\') {
            if (p[1] == '\0') {
                ddp_buf_free(&word);
                ddp_strv_clear(out);
                return ddp_errf(err, -EINVAL, "a backslash at the end of '%s' escapes nothing", s);
            }
            p++;
            ddp_buf_add(&word, p, 1);
        } else {
            ddp_buf_add(&word, p, 1);
        }
    }
    return 0;
unterminated:
    ddp_buf_free(&word);
    ddp_strv_clear(out);
    return ddp_errf(err, -EINVAL, "unterminated quote in '%s'", s);
}

static void split_list(const char *s, struct ddp_strv *out)
{
    ddp_strv_clear(out);
    const char *p = s;
    while (*p) {
        while (*p && (*p == ',' || isspace((unsigned char)*p)))
            p++;
        const char *start = p;
        while (*p && *p != ',' && !isspace((unsigned char)*p))
            p++;
        if (p > start)
            ddp_strv_push_own(out, ddp_xstrndup(start, (size_t)(p - start)));
    }
}

static int parse_std(const char *v, struct ddp_err *err)
{
    long long n;
    if (ddp_parse_int(v, 0, 3, &n) == 0)
        return 0;
    /* per rank: "0:1,1:2" */
    const char *p = v;
    if (!*p)
        goto bad;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p))
            goto bad;
        strtol(p, &end, 10);
        if (*end != ':' || end[1] < '0' || end[1] > '3')
            goto bad;
        p = end + 2;
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    return 0;
bad:
    return ddp_errf(err, -EINVAL,
                    "expected 0-3 (0 none, 1 stdout, 2 stderr, 3 both) or per rank like 0:1,1:2, got '%s'", v);
}

int ddp_spec_std_for_rank(const char *value, int local_rank)
{
    if (!value || !*value)
        return 0;
    if (!strchr(value, ':')) {
        long v = strtol(value, NULL, 10);
        return v >= 0 && v <= 3 ? (int)v : 0;
    }
    /* Unvalidated input must not run past the end: "0:" or "0:1x" mean nothing. */
    for (const char *p = value; *p;) {
        char *end;
        long r = strtol(p, &end, 10);
        if (end == p || *end != ':' || end[1] < '0' || end[1] > '3')
            return 0;
        int v = end[1] - '0';
        if (r == local_rank)
            return v;
        p = end + 2;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return 0;
}

static int parse_mem(const char *v, struct ddp_mem_limit *m, struct ddp_err *err)
{
    memset(m, 0, sizeof *m);
    if (strcmp(v, "none") == 0 || strcmp(v, "0") == 0 || strcmp(v, "off") == 0)
        return 0;
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)v[0]))
        goto bad;
    double x = strtod(v, &end);
    if (errno || end == v || x <= 0)
        goto bad;
    if (strcmp(end, "%") == 0) {
        if (x > 100)
            goto bad;
        m->percent = (int)x;
        return 0;
    }
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},          {"B", 1},       {"K", 1024.0},    {"KiB", 1024.0},        {"M", 1 << 20},
                 {"MiB", 1 << 20}, {"G", 1 << 30}, {"GiB", 1 << 30}, {"T", 1099511627776.0}, {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0) {
            if (x * units[i].mult >= 1.8e19) /* would not fit: the conversion is undefined */
                goto bad;
            m->bytes = (unsigned long long)(x * units[i].mult);
            return 0;
        }
bad:
    return ddp_errf(err, -EINVAL, "expected a percentage like 10%% or a size like 2GiB or 512MiB, got '%s'", v);
}

/* Parse value for key i into spec. Messages say only what was expected; the caller adds where. */
/* Parse v into key i's field. Over 100 lines on purpose: one short case per value type of the key table
 * (DDP_T_*), each parsing into the field's own C type; ddp_spec_format() writes them back case for case in the
 * same order, so a type's two directions are read side by side. */
static int parse_value(struct ddp_spec *spec, size_t i, const char *v, struct ddp_err *err)
{
    const struct ddp_key *k = &ddp_spec_keys[i];
    void *f = field(spec, i);
    long long n;
    int rc;

    switch (k->type) {
    case DDP_T_STR: {
        /* "..." keeps leading and trailing spaces, which inih strips from bare values. */
        size_t len = strlen(v);
        free_value(spec, i);
        *(char **)f = len >= 2 && v[0] == '"' && v[len - 1] == '"' ? ddp_xstrndup(v + 1, len - 2) : ddp_xstrdup(v);
        return 0;
    }
    case DDP_T_STD:
        if ((rc = parse_std(v, err)) < 0)
            return rc;
        free_value(spec, i);
        *(char **)f = ddp_xstrdup(v);
        return 0;
    case DDP_T_INT:
        rc = ddp_parse_int(v, k->min, k->max, &n);
        if (rc == -ERANGE && v[0] == '-' && k->min >= 0)
            return ddp_errf(err, rc, "expected a non-negative integer, got '%s'", v);
        if (rc < 0)
            return ddp_errf(err, -EINVAL, "expected an integer from %lld to %lld, got '%s'", k->min, k->max, v);
        *(int *)f = (int)n;
        return 0;
    case DDP_T_BOOL:
        if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "1"))
            *(bool *)f = true;
        else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "0"))
            *(bool *)f = false;
        else
            return ddp_errf(err, -EINVAL, "expected yes or no, got '%s'", v);
        return 0;
    case DDP_T_ENUM:
    case DDP_T_TRISTATE:
        for (int j = 0; k->choices[j]; j++)
            if (strcmp(v, k->choices[j]) == 0) {
                *(int *)f = j;
                return 0;
            }
        {
            struct ddp_buf b = {0};
            for (int j = 0; k->choices[j]; j++)
                ddp_buf_printf(&b, "%s%s", j ? (k->choices[j + 1] ? ", " : " or ") : "", k->choices[j]);
            const char *dym = ddp_did_you_mean(v, k->choices);
            rc = dym ? ddp_errf(err, -EINVAL, "expected %s, got '%s' (did you mean '%s'?)", b.data, v, dym)
                     : ddp_errf(err, -EINVAL, "expected %s, got '%s'", b.data, v);
            ddp_buf_free(&b);
            return rc;
        }
    case DDP_T_DURATION:
        return ddp_parse_duration(v, (long long *)f, err);
    case DDP_T_RANGE: {
        struct ddp_range r;
        const char *colon = strchr(v, ':');
        long long lo, hi;
        if (colon) {
            char *a = ddp_xstrndup(v, (size_t)(colon - v));
            int ra = ddp_parse_int(a, 1, 1 << 20, &lo), rb = ddp_parse_int(colon + 1, 1, 1 << 20, &hi);
            free(a);
            if (ra < 0 || rb < 0)
                return ddp_errf(err, -EINVAL, "expected N or MIN:MAX with positive integers, got '%s'", v);
            if (lo > hi)
                return ddp_errf(err, -EINVAL, "expected MIN:MAX with MIN <= MAX, got '%s'", v);
        } else {
            if (ddp_parse_int(v, 1, 1 << 20, &lo) < 0)
                return ddp_errf(err, -EINVAL, "expected N or MIN:MAX with positive integers, got '%s'", v);
            hi = lo;
        }
        r.min = (int)lo;
        r.max = (int)hi;
        *(struct ddp_range *)f = r;
        return 0;
    }
    case DDP_T_LIST:
        split_list(v, f);
        return 0;
    case DDP_T_ARGV: {
        struct ddp_strv tmp = {0};
        if ((rc = ddp_spec_split_argv(v, &tmp, err)) < 0)
            return rc;
        ddp_strv_clear(f);
        *(struct ddp_strv *)f = tmp;
        return 0;
    }
    case DDP_T_NPROC: {
        struct ddp_nproc *np = f;
        if (!strcmp(v, "gpu"))
            np->kind = DDP_NPROC_GPU;
        else if (!strcmp(v, "cpu"))
            np->kind = DDP_NPROC_CPU;
        else if (!strcmp(v, "auto"))
            np->kind = DDP_NPROC_AUTO;
        else if ((rc = ddp_parse_int(v, 1, 1 << 16, &n)) == 0) {
            np->kind = DDP_NPROC_INT;
            np->n = (int)n;
        } else if (rc == -ERANGE && v[0] != '-' && strspn(v, "0") != strlen(v)) {
            return ddp_errf(err, -ERANGE, "expected at most %d workers per node, got '%s'", 1 << 16, v);
        } else if (v[0] == '-' || !strcmp(v, "0"))
            return ddp_errf(err, -EINVAL, "expected a positive number of workers, gpu, cpu or auto, got '%s'", v);
        else {
            static const char *const words[] = {"gpu", "cpu", "auto", NULL};
            const char *dym = ddp_did_you_mean(v, words);
            return dym ? ddp_errf(err, -EINVAL, "expected a number, gpu, cpu or auto, got '%s' (did you mean '%s'?)", v,
                                  dym)
                       : ddp_errf(err, -EINVAL, "expected a number, gpu, cpu or auto, got '%s'", v);
        }
        return 0;
    }
    case DDP_T_PORT: {
        struct ddp_port_spec *ps = f;
        if (!strcmp(v, "auto") || !strcmp(v, "0")) {
            ps->is_auto = true;
            ps->lo = ps->hi = 0; /* port.c's default range, clear of the kernel's ephemeral ports */
            return 0;
        }
        if (!strncmp(v, "auto:", 5)) {
            long long lo, hi;
            const char *dash = strchr(v + 5, '-');
            char *a = dash ? ddp_xstrndup(v + 5, (size_t)(dash - v - 5)) : NULL;
            int ok =
                dash && ddp_parse_int(a, 1, 65535, &lo) == 0 && ddp_parse_int(dash + 1, 1, 65535, &hi) == 0 && lo <= hi;
            free(a);
            if (!ok)
                return ddp_errf(err, -EINVAL, "expected auto:LO-HI with 1 <= LO <= HI <= 65535, got '%s'", v);
            ps->is_auto = true;
            ps->lo = (int)lo;
            ps->hi = (int)hi;
            return 0;
        }
        if (ddp_parse_int(v, 1, 65535, &n) < 0)
            return ddp_errf(err, -EINVAL, "expected a port from 1 to 65535, auto or auto:LO-HI, got '%s'", v);
        ps->is_auto = false;
        ps->port = (int)n;
        return 0;
    }
    case DDP_T_MEM:
        return parse_mem(v, f, err);
    case DDP_T_DOWNSIZE: {
        struct ddp_downsize *d = f;
        if (!strcmp(v, "half")) {
            d->divisor = 2;
            d->size = 0;
            return 0;
        }
        if (ddp_parse_int(v, 1, 1 << 16, &n) < 0)
            return ddp_errf(err, -EINVAL, "expected half or a positive number of workers, got '%s'", v);
        d->divisor = 0;
        d->size = (int)n;
        return 0;
    }
    }
    return ddp_errf(err, -EINVAL, "internal: unknown key type");
}

/* Over 100 lines on purpose: the mirror of parse_value(), one case per value type in the same order. */
char *ddp_spec_format(const struct ddp_spec *spec, size_t i)
{
    const struct ddp_key *k = &ddp_spec_keys[i];
    const void *f = cfield(spec, i);
    struct ddp_buf b = {0};
    switch (k->type) {
    case DDP_T_STR: {
        const char *v = *(char *const *)f ? *(char *const *)f : "";
        size_t len = strlen(v);
        bool quote = len && (isspace((unsigned char)v[0]) || isspace((unsigned char)v[len - 1]) ||
                             (len >= 2 && v[0] == '"' && v[len - 1] == '"'));
        ddp_buf_printf(&b, quote ? "\"%s\"" : "%s", v); /* as it would be written in a file */
        break;
    }
    case DDP_T_STD:
        ddp_buf_puts(&b, *(char *const *)f ? *(char *const *)f : "");
        break;
    case DDP_T_INT:
        ddp_buf_printf(&b, "%d", *(const int *)f);
        break;
    case DDP_T_BOOL:
        ddp_buf_puts(&b, *(const bool *)f ? "yes" : "no");
        break;
    case DDP_T_ENUM:
    case DDP_T_TRISTATE:
        ddp_buf_puts(&b, k->choices[*(const int *)f]);
        break;
    case DDP_T_DURATION: {
        long long ms = *(const long long *)f;
        if (ms == 0)
            ddp_buf_puts(&b, "off");
        else if (ms % 3600000 == 0)
            ddp_buf_printf(&b, "%lldh", ms / 3600000);
        else if (ms % 60000 == 0)
            ddp_buf_printf(&b, "%lldm", ms / 60000);
        else if (ms % 1000 == 0)
            ddp_buf_printf(&b, "%llds", ms / 1000);
        else
            ddp_buf_printf(&b, "%lldms", ms);
        break;
    }
    case DDP_T_RANGE: {
        const struct ddp_range *r = f;
        if (r->min == r->max)
            ddp_buf_printf(&b, "%d", r->min);
        else
            ddp_buf_printf(&b, "%d:%d", r->min, r->max);
        break;
    }
    case DDP_T_LIST:
    case DDP_T_ARGV: {
        const struct ddp_strv *sv = f;
        for (size_t j = 0; j < sv->n; j++) {
            if (j)
                ddp_buf_puts(&b, k->type == DDP_T_LIST ? "," : " ");
            bool quote = k->type == DDP_T_ARGV && (!*sv->v[j] || strpbrk(sv->v[j], " \t\n\v\f\r'\"\\"));
            if (quote) {
                ddp_buf_puts(&b, "'");
                for (const char *p = sv->v[j]; *p; p++)
                    if (*p == '\'')
                        ddp_buf_puts(&b, "'\\''");
                    else
                        ddp_buf_add(&b, p, 1);
                ddp_buf_puts(&b, "'");
            } else {
                ddp_buf_puts(&b, sv->v[j]);
            }
        }
        break;
    }
    case DDP_T_NPROC: {
        const struct ddp_nproc *np = f;
        static const char *const kinds[] = {NULL, "gpu", "cpu", "auto"};
        if (np->kind == DDP_NPROC_INT)
            ddp_buf_printf(&b, "%d", np->n);
        else
            ddp_buf_puts(&b, kinds[np->kind]);
        break;
    }
    case DDP_T_PORT: {
        const struct ddp_port_spec *ps = f;
        if (!ps->is_auto)
            ddp_buf_printf(&b, "%d", ps->port);
        else if (ps->lo == 0 && ps->hi == 0)
            ddp_buf_puts(&b, "auto");
        else
            ddp_buf_printf(&b, "auto:%d-%d", ps->lo, ps->hi);
        break;
    }
    case DDP_T_MEM: {
        const struct ddp_mem_limit *m = f;
        if (m->percent)
            ddp_buf_printf(&b, "%d%%", m->percent);
        else if (m->bytes) {
            /* the largest unit that keeps the value exact, so that it parses back the same */
            static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
            unsigned long long v = m->bytes;
            int u = 0;
            while (u < 4 && v % 1024 == 0) {
                v /= 1024;
                u++;
            }
            ddp_buf_printf(&b, "%llu%s", v, units[u]);
        } else
            ddp_buf_puts(&b, "none");
        break;
    }
    case DDP_T_DOWNSIZE: {
        const struct ddp_downsize *d = f;
        if (d->divisor == 2)
            ddp_buf_puts(&b, "half");
        else
            ddp_buf_printf(&b, "%d", d->size);
        break;
    }
    }
    if (!b.data && k->type == DDP_T_LIST && k->def && strcmp(k->def, "auto") == 0)
        ddp_buf_puts(&b, "auto"); /* an empty [gpus] select means auto */
    if (!b.data)
        ddp_buf_puts(&b, "");
    return b.data;
}

/* ---- kv lists ---- */

static size_t key_hash(const char *key)
{
    size_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

/* The slot of key in l->idx: where it is, or the empty slot where it would go. l->idx_cap > 0. */
static size_t kv_slot(const struct ddp_kvlist *l, const char *key)
{
    size_t mask = l->idx_cap - 1, j = key_hash(key) & mask;
    while (l->idx[j] && strcmp(l->v[l->idx[j] - 1].key, key) != 0)
        j = (j + 1) & mask;
    return j;
}

static void kv_reindex(struct ddp_kvlist *l, size_t cap)
{
    free(l->idx);
    l->idx_cap = cap;
    l->idx = ddp_xcalloc(cap, sizeof *l->idx);
    for (size_t i = 0; i < l->n; i++)
        l->idx[kv_slot(l, l->v[i].key)] = i + 1;
}

void ddp_kvlist_set(struct ddp_kvlist *l, const char *key, const char *value, enum ddp_origin origin, const char *file,
                    int line)
{
    struct ddp_kv *kv = NULL;
    if (2 * (l->n + 1) > l->idx_cap)
        kv_reindex(l, l->idx_cap ? 2 * l->idx_cap : 16);
    size_t slot = kv_slot(l, key);
    if (l->idx[slot])
        kv = &l->v[l->idx[slot] - 1];
    if (!kv) {
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 8;
            l->v = ddp_xrealloc(l->v, l->cap * sizeof *l->v);
        }
        kv = &l->v[l->n++];
        kv->key = ddp_xstrdup(key);
        l->idx[slot] = l->n;
    } else {
        free(kv->value);
        free(kv->file);
    }
    kv->value = ddp_xstrdup(value);
    kv->origin = origin;
    kv->file = file ? ddp_xstrdup(file) : NULL;
    kv->line = line;
}

const struct ddp_kv *ddp_kvlist_get(const struct ddp_kvlist *l, const char *key)
{
    if (l->idx_cap) {
        size_t slot = kv_slot(l, key);
        return l->idx[slot] ? &l->v[l->idx[slot] - 1] : NULL;
    }
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0)
            return &l->v[i];
    return NULL;
}

void ddp_kvlist_remove(struct ddp_kvlist *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) {
            free(l->v[i].key);
            free(l->v[i].value);
            free(l->v[i].file);
            memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
            l->n--;
            if (l->idx_cap)
                kv_reindex(l, l->idx_cap);
            return;
        }
}

void ddp_kvlist_free(struct ddp_kvlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
        free(l->v[i].file);
    }
    free(l->v);
    free(l->idx);
    memset(l, 0, sizeof *l);
}

/* ---- lifecycle ---- */

void ddp_spec_init(struct ddp_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->origin = ddp_xcalloc(ddp_spec_nkeys, sizeof *spec->origin);
    spec->set_file = ddp_xcalloc(ddp_spec_nkeys, sizeof *spec->set_file);
    spec->set_line = ddp_xcalloc(ddp_spec_nkeys, sizeof *spec->set_line);
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        if (!ddp_spec_keys[i].def)
            continue;
        struct ddp_err err;
        if (parse_value(spec, i, ddp_spec_keys[i].def, &err) < 0) {
            fprintf(stderr, "ddplaunch: internal: bad default for %s.%s: %s\n", ddp_spec_keys[i].section,
                    ddp_spec_keys[i].name, err.msg);
            abort();
        }
    }
}

void ddp_spec_free(struct ddp_spec *spec)
{
    if (!spec->origin)
        return;
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        free_value(spec, i);
        free(spec->set_file[i]);
    }
    ddp_kvlist_free(&spec->nccl);
    ddp_kvlist_free(&spec->env);
    free(spec->origin);
    free(spec->set_file);
    free(spec->set_line);
    free(spec->spec_path);
    memset(spec, 0, sizeof *spec);
}

/* ---- setting keys ---- */

static bool valid_env_name(const char *s)
{
    if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

static const char **key_names(const char *section)
{
    size_t n = 0;
    const char **names = ddp_xcalloc(ddp_spec_nkeys + 1, sizeof *names);
    for (size_t i = 0; i < ddp_spec_nkeys; i++)
        if (!section || strcmp(ddp_spec_keys[i].section, section) == 0)
            names[n++] = ddp_spec_keys[i].name;
    return names;
}

/* Set a key. file/line locate it for messages and duplicate detection (file NULL: where names the source). */
static int set_key(struct ddp_spec *spec, const char *section, const char *key, const char *value,
                   enum ddp_origin origin, const char *file, int line, const char *where, struct ddp_err *err)
{
    struct ddp_err e;
    if (!is_section(section)) {
        const char *dym = ddp_did_you_mean(section, ddp_spec_sections);
        return dym ? ddp_errf(err, -EINVAL, "%s: unknown section [%s] (did you mean [%s]?)", where, section, dym)
                   : ddp_errf(err, -EINVAL,
                              "%s: unknown section [%s] (expected job, gpus, numa, restart, timeout, "
                              "nccl, env or slurm)",
                              where, section);
    }
    int i = ddp_spec_key_find(section, key);
    if (i < 0 && (strcmp(section, "nccl") == 0 || strcmp(section, "env") == 0)) {
        bool nccl = section[0] == 'n';
        struct ddp_kvlist *l = nccl ? &spec->nccl : &spec->env;
        if (!valid_env_name(key))
            return ddp_errf(err, -EINVAL, "%s: '%s' is not a valid environment variable name", where, key);
        if (nccl && strncmp(key, "NCCL_", 5) != 0 && strncmp(key, "TORCH_", 6) != 0) {
            return ddp_errf(err, -EINVAL,
                            "%s: [nccl] takes preset or NCCL_*/TORCH_* variables, got '%s' (put other variables "
                            "in [env])",
                            where, key);
        }
        const struct ddp_kv *old = ddp_kvlist_get(l, key);
        if (file && old && old->file && old->origin == origin && strcmp(old->file, file) == 0)
            return ddp_errf(err, -EINVAL, "%s: duplicate key '%s' in [%s] (first set at line %d)", where, key, section,
                            old->line);
        ddp_kvlist_set(l, key, value, origin, file, line);
        return 0;
    }
    if (i < 0) {
        const char **names = key_names(section);
        const char *dym = ddp_did_you_mean(key, names);
        int rc;
        if (!dym) {
            /* Maybe the key exists in another section. */
            for (size_t j = 0; j < ddp_spec_nkeys; j++)
                if (strcmp(ddp_spec_keys[j].name, key) == 0) {
                    free(names);
                    return ddp_errf(err, -EINVAL, "%s: unknown key '%s' in [%s] (it belongs in [%s])", where, key,
                                    section, ddp_spec_keys[j].section);
                }
        }
        rc = dym ? ddp_errf(err, -EINVAL, "%s: unknown key '%s' in [%s] (did you mean '%s'?)", where, key, section, dym)
                 : ddp_errf(err, -EINVAL, "%s: unknown key '%s' in [%s]", where, key, section);
        free(names);
        return rc;
    }
    if (file && spec->origin[i] == origin && spec->set_file[i] && strcmp(spec->set_file[i], file) == 0)
        return ddp_errf(err, -EINVAL, "%s: duplicate key '%s' in [%s] (first set at line %d)", where, key, section,
                        spec->set_line[i]);
    if (parse_value(spec, (size_t)i, value, &e) < 0)
        return ddp_errf(err, e.code, "%s: %s.%s: %s", where, section, key, e.msg);
    spec->origin[i] = origin;
    free(spec->set_file[i]);
    spec->set_file[i] = file ? ddp_xstrdup(file) : NULL;
    spec->set_line[i] = line;
    return 0;
}

int ddp_spec_set(struct ddp_spec *spec, const char *section, const char *key, const char *value, enum ddp_origin origin,
                 const char *where, struct ddp_err *err)
{
    return set_key(spec, section, key, value, origin, NULL, 0, where, err);
}

/* DDPLAUNCH_* variables that are not spec keys: read by ddplaunch (launch.c, rundir.c) or set for workers
 * (plan.c; a ddplaunch started inside a worker sees them). */
static const char *const env_not_keys[] = {
    "DDPLAUNCH_CONFIG",
    "DDPLAUNCH_TOPOLOGY",
    "DDPLAUNCH_LOCK_DIR",
    "DDPLAUNCH_TOKEN_FILE",
    "DDPLAUNCH_TOPOLOGY_CACHE",
    "DDPLAUNCH_ATTEMPT",
    "DDPLAUNCH_ATTEMPT_DIR",
    "DDPLAUNCH_ORIG_WORLD_SIZE",
    "DDPLAUNCH_HEARTBEAT_FILE",
    "DDPLAUNCH_GPU_BUSID",
    "DDPLAUNCH_GPU_UUID",
    "DDPLAUNCH_NUMA_NODE",
    NULL,
};

static void env_key_name(size_t i, char name[128])
{
    int n = snprintf(name, 128, "DDPLAUNCH_%s_%s", ddp_spec_keys[i].section, ddp_spec_keys[i].name);
    for (int j = 0; j < n && j < 128; j++)
        name[j] = (char)toupper((unsigned char)name[j]);
}

/* DDPLAUNCH_NCCL_NAME and DDPLAUNCH_ENV_NAME set [nccl] and [env] entries; any other DDPLAUNCH_* variable that
 * is not a key is an error, as an unknown INI key is: a typo must not be ignored. */
static int apply_env_rest(struct ddp_spec *spec, char *const *envp, struct ddp_err *err)
{
    for (size_t e = 0; envp && envp[e]; e++) {
        const char *var = envp[e];
        const char *eq = strchr(var, '=');
        size_t len = eq ? (size_t)(eq - var) : strlen(var);
        char name[128];
        if (strncmp(var, "DDPLAUNCH_", 10) != 0 || len >= sizeof name)
            continue;
        memcpy(name, var, len);
        name[len] = '\0';
        bool known = false;
        for (size_t k = 0; env_not_keys[k] && !known; k++)
            known = strcmp(name, env_not_keys[k]) == 0;
        const char **cands = ddp_xcalloc(ddp_spec_nkeys + 16, sizeof *cands);
        char(*names)[128] = ddp_xcalloc(ddp_spec_nkeys + 1, 128);
        size_t nc = 0;
        for (size_t i = 0; i < ddp_spec_nkeys && !known; i++) {
            env_key_name(i, names[i]);
            known = strcmp(name, names[i]) == 0;
            cands[nc++] = names[i];
        }
        for (size_t k = 0; env_not_keys[k] && !known; k++)
            cands[nc++] = env_not_keys[k];
        cands[nc] = NULL;
        int rc = 0;
        bool nccl = strncmp(name, "DDPLAUNCH_NCCL_", 15) == 0, env = strncmp(name, "DDPLAUNCH_ENV_", 14) == 0;
        if (!known && (nccl || env) && name[nccl ? 15 : 14] && eq) {
            rc = set_key(spec, nccl ? "nccl" : "env", name + (nccl ? 15 : 14), eq + 1, DDP_ORIGIN_ENV, NULL, 0, name,
                         err);
            known = true;
        }
        if (!known) {
            const char *dym = ddp_did_you_mean(name, cands);
            rc = dym ? ddp_errf(err, -EINVAL, "environment: unknown variable %s (did you mean %s?)", name, dym)
                     : ddp_errf(err, -EINVAL,
                                "environment: unknown variable %s (ddplaunch --help-keys lists the keys; "
                                "DDPLAUNCH_SECTION_KEY sets one)",
                                name);
        }
        free(cands);
        free(names);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ddp_spec_apply_env(struct ddp_spec *spec, char *const *envp, struct ddp_err *err)
{
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        char name[128];
        env_key_name(i, name);
        const char *v = ddp_env_get(envp, name);
        if (!v)
            continue;
        int rc = set_key(spec, ddp_spec_keys[i].section, ddp_spec_keys[i].name, v, DDP_ORIGIN_ENV, NULL, 0, name, err);
        if (rc < 0)
            return rc;
    }
    return apply_env_rest(spec, envp, err);
}

/* ---- files ---- */

struct load_ctx {
    struct ddp_spec *spec;
    const char *name;
    enum ddp_origin origin;
    const char *text;
    size_t len;
    size_t pos;
    int line;            /* number of the line last handed to inih */
    const char *rawline; /* its start in text */
    struct ddp_err *err;
    int rc;
    int nkeys;
    char prev_section[64];
    char prev_key[64];
    struct ddp_strv long_values; /* values of lines too long for inih, handed to it as "\001N" */
};

/* inih reads through this: one line per call, so ctx->line is the line the handler is looking at. */
/* The longest line ddp_spec_load_string accepts: a "key = value" line may pass inih's line limit (its value
 * goes around inih), up to what one environment string may hold (MAX_ARG_STRLEN). */
#define SPEC_LONG_LINE_MAX (128 * 1024)

/* A "key = value" line that starts at column 0 (not a section, comment or continuation), with the key in its
 * first 128 bytes: the only kind of line that may be longer than inih's limit. */
static const char *long_line_eq(const char *line, size_t n)
{
    if (n == 0 || isspace((unsigned char)line[0]) || line[0] == '[' || line[0] == ';' || line[0] == '#')
        return NULL;
    return memchr(line, '=', n < 128 ? n : 128);
}

/* inih reads through this: one line per call, so ctx->line is the line the handler is looking at. A line
 * too long for inih's buffer is a "key = value" line (prescan checked): inih gets "key = \001N" and the
 * handler takes value N from ctx->long_values, trimmed and inline comments removed as inih would. */
static char *reader(char *str, int num, void *stream)
{
    struct load_ctx *c = stream;
    if (c->pos >= c->len)
        return NULL;
    const char *start = c->text + c->pos;
    const char *nl = memchr(start, '\n', c->len - c->pos);
    size_t n = nl ? (size_t)(nl - start) + 1 : c->len - c->pos;
    c->line++;
    c->rawline = start;
    c->pos += n;
    if (n > (size_t)num - 1) {
        size_t content = nl ? n - 1 : n;
        const char *eq = long_line_eq(start, content);
        const char *v = eq ? eq + 1 : start + content, *end = start + content;
        while (v < end && isspace((unsigned char)*v))
            v++;
        for (const char *q = v; q < end; q++)
            if (*q == ';' && q > v && isspace((unsigned char)q[-1])) {
                end = q;
                break;
            }
        while (end > v && isspace((unsigned char)end[-1]))
            end--;
        ddp_strv_push_own(&c->long_values, ddp_xstrndup(v, (size_t)(end - v)));
        snprintf(str, (size_t)num, "%.*s= \001%zu\n", eq ? (int)(eq - start) : 0, start, c->long_values.n - 1);
        return str;
    }
    memcpy(str, start, n);
    str[n] = '\0';
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *c = user;
    if (c->rc < 0)
        return 1;
    if (value[0] == '\001') {
        long long k;
        if (ddp_parse_int(value + 1, 0, (long long)c->long_values.n - 1, &k) == 0)
            value = c->long_values.v[k];
    }
    char where[512];
    snprintf(where, sizeof where, "%s:%d", c->name, c->line);
    bool continuation = isspace((unsigned char)c->rawline[0]) && strcmp(section, c->prev_section) == 0 &&
                        strcmp(name, c->prev_key) == 0;
    if (continuation) {
        /* inih's multi-line value: an indented line continues the previous key. Only list-like keys may
         * span lines; the pieces are joined with a space. */
        int i = ddp_spec_key_find(section, name);
        /* "  nproc_per_node = 4" under "args = ...": an indented key, which inih would silently make part of
         * the previous value. */
        const char *p = c->rawline, *end = c->text + c->len;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        size_t n = 0;
        while (p + n < end && n < 64 && (isalnum((unsigned char)p[n]) || p[n] == '_'))
            n++;
        const char *q = p + n;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if (n > 0 && n < 64 && q < end && *q == '=') {
            char word[64];
            memcpy(word, p, n);
            word[n] = '\0';
            if (ddp_spec_key_find(section, word) >= 0 || i < 0) {
                c->rc = ddp_errf(c->err, -EINVAL,
                                 "%s: indented key '%s' would continue the value of '%s' (write keys at the start "
                                 "of the line; only continuation lines are indented)",
                                 where, word, name);
                return 0;
            }
        }
        if (i < 0 || (ddp_spec_keys[i].type != DDP_T_ARGV && ddp_spec_keys[i].type != DDP_T_LIST)) {
            c->rc = ddp_errf(c->err, -EINVAL,
                             "%s: indented line continues '%s', which takes one line (only command, args and lists "
                             "may continue)",
                             where, name);
            return 0;
        }
        char *prev = ddp_spec_format(c->spec, (size_t)i);
        char *joined = ddp_xasprintf("%s %s", prev, value);
        free(prev);
        int rc = parse_value(c->spec, (size_t)i, joined, c->err);
        free(joined);
        if (rc < 0) {
            char msg[sizeof c->err->msg];
            snprintf(msg, sizeof msg, "%s", c->err->msg);
            c->rc = ddp_errf(c->err, rc, "%s: %s.%s: %s", where, section, name, msg);
            return 0;
        }
        return 1;
    }
    snprintf(c->prev_section, sizeof c->prev_section, "%s", section);
    snprintf(c->prev_key, sizeof c->prev_key, "%s", name);
    if (!*section) {
        c->rc = ddp_errf(c->err, -EINVAL, "%s: key '%s' before any [section] (expected e.g. [job] first)", where, name);
        return 0;
    }
    c->nkeys++;
    int rc = set_key(c->spec, section, name, value, c->origin, c->name, c->line, where, c->err);
    if (rc < 0) {
        c->rc = rc;
        return 0;
    }
    return 1;
}

/* Checks inih cannot make: line length (its fixed buffer would split a long line silently), UTF-8,
 * section names (inih reports keys, not empty sections). */
static int prescan(const char *name, const char *text, size_t len, struct ddp_err *err)
{
    int line = 1;
    size_t col = 0, line_start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            line++;
            col = 0;
            line_start = i + 1;
            continue;
        }
        if (ch == '\0')
            return ddp_errf(err, -EINVAL, "%s:%d: NUL byte in the file (expected text)", name, line);
        if (++col == INI_MAX_LINE - 1) {
            const char *ls = text + line_start, *nl = memchr(ls, '\n', len - line_start);
            if (!long_line_eq(ls, nl ? (size_t)(nl - ls) : len - line_start))
                return ddp_errf(err, -EINVAL,
                                "%s:%d: line too long (only 'key = value' lines may be longer than "
                                "%d characters; continue a long command on indented lines)",
                                name, line, INI_MAX_LINE - 2);
        }
        if (col > SPEC_LONG_LINE_MAX)
            return ddp_errf(err, -EINVAL, "%s:%d: line too long (the limit is %d characters)", name, line,
                            SPEC_LONG_LINE_MAX);
        if (ch < 0x80)
            continue;
        /* UTF-8 sequence */
        int extra = (ch & 0xe0) == 0xc0 ? 1 : (ch & 0xf0) == 0xe0 ? 2 : (ch & 0xf8) == 0xf0 ? 3 : -1;
        if (ch == 0xc0 || ch == 0xc1 || ch > 0xf4)
            extra = -1;
        for (int k = 1; extra > 0 && k <= extra; k++)
            if (i + (size_t)k >= len || ((unsigned char)text[i + (size_t)k] & 0xc0) != 0x80)
                extra = -1;
        if (extra < 0)
            return ddp_errf(err, -EINVAL, "%s:%d: invalid UTF-8 byte 0x%02x in column %zu (expected UTF-8 text)", name,
                            line, ch, col);
        i += (size_t)extra;
    }
    /* Section headers */
    line = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        line++;
        const char *s = p;
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        if (s < eol && *s == '[') {
            const char *close = memchr(s, ']', (size_t)(eol - s));
            if (!close)
                return ddp_errf(err, -EINVAL, "%s:%d: expected ']' to close the section name", name, line);
            char sec[64];
            size_t n = (size_t)(close - s - 1);
            if (n >= sizeof sec)
                n = sizeof sec - 1;
            memcpy(sec, s + 1, n);
            sec[n] = '\0';
            if (!is_section(sec)) {
                const char *dym = ddp_did_you_mean(sec, ddp_spec_sections);
                return dym ? ddp_errf(err, -EINVAL, "%s:%d: unknown section [%s] (did you mean [%s]?)", name, line, sec,
                                      dym)
                           : ddp_errf(err, -EINVAL,
                                      "%s:%d: unknown section [%s] (expected job, gpus, numa, restart, "
                                      "timeout, nccl, env or slurm)",
                                      name, line, sec);
            }
        }
        p = eol + 1;
    }
    return 0;
}

int ddp_spec_load_string(struct ddp_spec *spec, const char *name, const char *text, size_t len, enum ddp_origin origin,
                         struct ddp_err *err)
{
    int rc = prescan(name, text, len, err);
    if (rc < 0)
        return rc;
    struct load_ctx c = {.spec = spec, .name = name, .origin = origin, .text = text, .len = len, .err = err};
    int line = ini_parse_stream(reader, &c, handler, &c);
    ddp_strv_clear(&c.long_values);
    if (c.rc < 0)
        return c.rc;
    if (line > 0)
        return ddp_errf(err, -EINVAL, "%s:%d: expected 'key = value', '[section]' or a comment", name, line);
    if (line < 0)
        return ddp_errf(err, -ENOMEM, "%s: the INI parser failed", name);
    if (origin == DDP_ORIGIN_SPEC && c.nkeys == 0)
        return ddp_errf(err, -EINVAL,
                        "%s: empty job spec (expected at least [job] with command, script, module "
                        "or program)",
                        name);
    return 0;
}

int ddp_spec_load_file(struct ddp_spec *spec, const char *path, enum ddp_origin origin, struct ddp_err *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return ddp_errf(err, -errno, "%s: cannot read: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return ddp_errf(err, -EISDIR, "%s: cannot read: %s", path, strerror(EISDIR));
    }
    struct ddp_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        ddp_buf_add(&b, chunk, n);
        if (b.len > (16u << 20)) {
            fclose(f);
            ddp_buf_free(&b);
            return ddp_errf(err, -EFBIG, "%s: larger than 16 MiB (expected a job spec)", path);
        }
    }
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (rerr) {
        ddp_buf_free(&b);
        return ddp_errf(err, -rerr, "%s: cannot read: %s", path, strerror(rerr));
    }
    int rc = ddp_spec_load_string(spec, path, b.data ? b.data : "", b.len, origin, err);
    ddp_buf_free(&b);
    if (rc == 0 && origin == DDP_ORIGIN_SPEC) {
        free(spec->spec_path);
        spec->spec_path = ddp_xstrdup(path);
    }
    return rc;
}

int ddp_spec_validate(const struct ddp_spec *spec, struct ddp_err *err)
{
    int nprog = (spec->command.n > 0) + (spec->script != NULL) + (spec->module != NULL) + (spec->program != NULL);
    const char *where = spec->spec_path ? spec->spec_path : "ddplaunch";
    if (nprog == 0)
        return ddp_errf(err, -EINVAL,
                        "%s: missing command: set [job] command, script, module or program (or give "
                        "a training script on the command line)",
                        where);
    if (nprog > 1)
        return ddp_errf(err, -EINVAL,
                        "%s: [job] command, script, module and program exclude each other; set only "
                        "one",
                        where);
    /* an empty name would only fail in every worker (127), or give workers an empty MASTER_ADDR */
    const char *empty = spec->command.n > 0 && !spec->command.v[0][0] ? "command"
                        : spec->script && !*spec->script              ? "script"
                        : spec->module && !*spec->module              ? "module"
                        : spec->program && !*spec->program            ? "program"
                                                                      : NULL;
    if (empty)
        return ddp_errf(err, -EINVAL, "%s: job.%s is empty (expected the program to run)", where, empty);
    if (!spec->master_addr || !*spec->master_addr)
        return ddp_errf(err, -EINVAL, "%s: job.master_addr is empty (expected a host name or address)", where);
    if (spec->node_rank >= spec->nnodes.max)
        return ddp_errf(err, -EINVAL, "%s: job.node_rank %d is out of range for nnodes %d (expected 0 to %d)", where,
                        spec->node_rank, spec->nnodes.max, spec->nnodes.max - 1);
    if (spec->nproc_per_node.kind == DDP_NPROC_INT && spec->min_nproc_per_node > spec->nproc_per_node.n)
        return ddp_errf(err, -EINVAL, "%s: job.min_nproc_per_node %d is larger than nproc_per_node %d", where,
                        spec->min_nproc_per_node, spec->nproc_per_node.n);
    if (spec->downsize_to.divisor == 0 && spec->nproc_per_node.kind == DDP_NPROC_INT &&
        spec->downsize_to.size >= spec->nproc_per_node.n && spec->on_timeout == DDP_ONTIMEOUT_DOWNSIZE)
        return ddp_errf(err, -EINVAL, "%s: restart.downsize_to %d must be smaller than nproc_per_node %d", where,
                        spec->downsize_to.size, spec->nproc_per_node.n);
    for (size_t i = 0; i < spec->local_ranks_filter.n; i++) {
        long long r;
        if (ddp_parse_int(spec->local_ranks_filter.v[i], 0, 1 << 16, &r) < 0)
            return ddp_errf(err, -EINVAL, "%s: job.local_ranks_filter: expected local rank numbers, got '%s'", where,
                            spec->local_ranks_filter.v[i]);
    }
    if (spec->log_dir && !*spec->log_dir)
        return ddp_errf(err, -EINVAL, "%s: job.log_dir is empty (expected a directory)", where);
    return 0;
}

int ddp_spec_set_from_scheduler(struct ddp_spec *spec, const char *key, const char *value, const char *where,
                                struct ddp_err *err)
{
    int i = ddp_spec_key_find("job", key);
    if (i < 0 || spec->origin[i] >= DDP_ORIGIN_ENV)
        return 0;
    return ddp_spec_set(spec, "job", key, value, DDP_ORIGIN_ENV, where, err);
}
