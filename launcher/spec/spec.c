/* spec: see spec.h. The key table below is the single source of truth for the job spec; this file sets keys
 * (layers, environment), checks them together and owns the spec's lifetime. Values: spec_value.c; files:
 * spec_file.c. */
#include "spec/spec.h"
#include "spec/spec_internal.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OFF(field) offsetof(struct ddp_spec, field)

static const char *const policy_names[] = {"same-numa", "pack", "spread", "any", NULL};
static const char *const busy_names[] = {"warn", "skip", "fail", NULL};
static const char *const visible_names[] = {"per-job", "per-rank", "virtual", NULL};
static const char *const console_names[] = {"auto", "raw", "lines", NULL};
static const char *const bind_names[] = {"node", "socket", "exclusive", "core-complex", "none", NULL};
static const char *const membind_names[] = {"local", "interleave", "none", NULL};
static const char *const on_failure_names[] = {"restart", "fail", NULL};
static const char *const on_timeout_names[] = {"restart", "downsize", "fail", NULL};
static const char *const heartbeat_names[] = {"file", "output", "none", NULL};
static const char *const on_suspect_names[] = {"warn", "restart", "downsize", "auto", NULL};
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
      "working directory of the workers (default: the job spec's directory, else the launcher's)" },
    { "job", "log_dir", DDP_T_STR, OFF(log_dir), NULL, NULL, 0, 0,
      "directory for per-attempt, per-rank logs and error files: RUNID_XXXXXXXX/attempt_N/RANK (default: none)" },
    { "job", "dup_stdout_filters", DDP_T_STR, OFF(duplicate_stdout_filters), NULL, NULL, 0, 0,
      "comma-separated substrings: stdout lines holding one also go to LOG_DIR/RUN/attempt_N/filtered_stdout.log" },
    { "job", "dup_stderr_filters", DDP_T_STR, OFF(duplicate_stderr_filters), NULL, NULL, 0, 0,
      "comma-separated substrings: stderr lines holding one also go to LOG_DIR/RUN/attempt_N/filtered_stderr.log" },
    { "job", "trust_log_dir", DDP_T_BOOL, OFF(trust_log_dir), "no", NULL, 0, 0,
      "use log_dir even where another user or the group could rename the run directory (root in a workspace of another uid)" },
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
      "static (every node gives its node_rank), c10d (ranks given at join) or etcd-v3 (no node must survive)" },
    { "job", "rdzv_endpoint", DDP_T_STR, OFF(rdzv_endpoint), NULL, NULL, 0, 0,
      "HOST[:PORT]: sets master_addr (and master_port) as torchrun's c10d endpoint would" },
    { "job", "rdzv_conf", DDP_T_STR, OFF(rdzv_conf), NULL, NULL, 0, 0,
      "key=value,... as torchrun's; join_timeout and last_call_timeout (seconds) are used" },
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
    { "gpus", "busy", DDP_T_ENUM, OFF(gpus_busy), "warn", busy_names, 0, 0,
      "a GPU where another process holds more than 1 GiB: warn (one line, the job starts), skip (choose other "
      "GPUs) or fail (refuse, exit 75)" },
    { "gpus", "visible", DDP_T_ENUM, OFF(gpus_visible), "per-job", visible_names, 0, 0,
      "per-job: every worker sees the job's GPUs; per-rank: each sees only its own; virtual: per-rank and "
      "LOCAL_RANK=0 (torchrun --virtual-local-rank)" },
    { "gpus", "share", DDP_T_BOOL, OFF(gpus_share), "no", NULL, 0, 0,
      "more workers than usable GPUs: start them all on the GPUs there are, round-robin, as torchrun does" },
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
    { "restart", "warm", DDP_T_TRISTATE, OFF(restart_warm), "auto", tristate_names, 0, 0,
      "warm restart: keep one standby interpreter per local rank that imported preload, and run a restarted rank's "
      "program in it (auto: for Python jobs with restarts allowed, where memory allows; yes; no)" },
    { "restart", "preload", DDP_T_LIST, OFF(restart_preload), "torch, torch.distributed, torch._dynamo", NULL, 0, 0,
      "the modules a standby interpreter imports before it waits (warm restart; one whose import loads CUDA's "
      "driver turns warm restart off for the job)" },
    { "timeout", "init", DDP_T_DURATION, OFF(timeout_init_ms), "off", NULL, 0, 0,
      "every rank must show life (heartbeat or output) within this after start" },
    { "timeout", "stall", DDP_T_DURATION, OFF(timeout_stall_ms), "off", NULL, 0, 0,
      "a rank without progress (see heartbeat) for this long is hung (from its start unless init is set)" },
    { "timeout", "heartbeat", DDP_T_ENUM, OFF(heartbeat), "file", heartbeat_names, 0, 0,
      "progress signal for stall: file (DDPLAUNCH_HEARTBEAT_FILE), output or none" },
    { "timeout", "wall", DDP_T_DURATION, OFF(timeout_wall_ms), "off", NULL, 0, 0,
      "wall-clock limit for one attempt: time the launcher was stopped or the machine suspended counts" },
    { "timeout", "timer_file", DDP_T_BOOL, OFF(timer_file), "no", NULL, 0, 0,
      "serve torch's file-based watchdog (TORCHELASTIC_TIMER_FILE)" },
    { "timeout", "stacks", DDP_T_BOOL, OFF(timeout_stacks), "yes", NULL, 0, 0,
      "before a hung attempt is stopped, capture each Python rank's stack (into attempt_N/stacks.txt, not over "
      "the console) and name the culprit rank" },
    { "timeout", "sample", DDP_T_BOOL, OFF(timeout_sample), "yes", NULL, 0, 0,
      "sample each Python rank's stacks while it runs (signal 39, SIGRTMIN+5): suspected hangs, stragglers" },
    { "timeout", "sample_interval", DDP_T_DURATION, OFF(sample_interval_ms), "1s", NULL, 0, 0,
      "time between two stack samples of every rank" },
    { "timeout", "suspect_floor", DDP_T_DURATION, OFF(suspect_floor_ms), "30s", NULL, 0, 0,
      "a hang is suspected after no progress for max(this, 3 x the longest gap seen)" },
    { "timeout", "suspect_setup", DDP_T_DURATION, OFF(suspect_setup_ms), "45s", NULL, 0, 0,
      "no hang is suspected in an attempt's first this long" },
    { "timeout", "on_suspect", DDP_T_ENUM, OFF(on_suspect), "auto", on_suspect_names, 0, 0,
      "a suspected hang: auto (stop it when its culprit is stuck, after a short confirmation; warn when a rank is "
      "busy or the evidence weak), warn (the job runs on), or restart or downsize after on_suspect_after" },
    { "timeout", "on_suspect_after", DDP_T_DURATION, OFF(on_suspect_after_ms), "10m", NULL, 0, 0,
      "how long a suspected hang lasts before on_suspect restarts or downsizes" },
    { "timeout", "busy_limit", DDP_T_DURATION, OFF(busy_limit_ms), "30m", NULL, 0, 0,
      "how long a rank may work alone while the others wait before the job ends with the evidence" },
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

bool ddp_spec_is_section(const char *s)
{
    for (const char *const *p = ddp_spec_sections; *p; p++)
        if (strcmp(*p, s) == 0)
            return true;
    return false;
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
        if (ddp_spec_parse_value(spec, &ddp_spec_keys[i], ddp_spec_keys[i].def, &err) < 0) {
            fprintf(stderr, "ddplaunch: internal: bad default for %s.%s: %s\n", ddp_spec_keys[i].section,
                    ddp_spec_keys[i].name, err.msg);
            abort();
        }
    }
}

char *ddp_spec_format(const struct ddp_spec *spec, size_t i)
{
    return ddp_spec_format_key(spec, &ddp_spec_keys[i]);
}

void ddp_spec_free(struct ddp_spec *spec)
{
    if (!spec->origin)
        return;
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        ddp_spec_free_value(spec, &ddp_spec_keys[i]);
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
int ddp_spec_set_key(struct ddp_spec *spec, const char *section, const char *key, const char *value,
                     enum ddp_origin origin, const char *file, int line, const char *where, struct ddp_err *err)
{
    struct ddp_err e;
    if (!ddp_spec_is_section(section)) {
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
    if (ddp_spec_parse_value(spec, &ddp_spec_keys[i], value, &e) < 0)
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
    return ddp_spec_set_key(spec, section, key, value, origin, NULL, 0, where, err);
}

/* DDPLAUNCH_* variables that are not spec keys: read by ddplaunch (launch.c, rundir.c) or set for workers
 * (plan.c; a ddplaunch started inside a worker sees them). */
static const char *const env_not_keys[] = {
    "DDPLAUNCH_CONFIG",          "DDPLAUNCH_TOPOLOGY",       "DDPLAUNCH_LOCK_DIR",      "DDPLAUNCH_TOKEN_FILE",
    "DDPLAUNCH_TOPOLOGY_CACHE",  "DDPLAUNCH_TOPOLOGY_NVML",  "DDPLAUNCH_ATTEMPT",       "DDPLAUNCH_ATTEMPT_DIR",
    "DDPLAUNCH_ORIG_WORLD_SIZE", "DDPLAUNCH_HEARTBEAT_FILE", "DDPLAUNCH_GPU_BUSID",     "DDPLAUNCH_GPU_UUID",
    "DDPLAUNCH_NUMA_NODE",       "DDPLAUNCH_NVML_TIMEOUT",   "DDPLAUNCH_TOPOLOGY_PROC", NULL,
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
            rc = ddp_spec_set_key(spec, nccl ? "nccl" : "env", name + (nccl ? 15 : 14), eq + 1, DDP_ORIGIN_ENV, NULL, 0,
                                  name, err);
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
        int rc = ddp_spec_set_key(spec, ddp_spec_keys[i].section, ddp_spec_keys[i].name, v, DDP_ORIGIN_ENV, NULL, 0,
                                  name, err);
        if (rc < 0)
            return rc;
    }
    return apply_env_rest(spec, envp, err);
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
