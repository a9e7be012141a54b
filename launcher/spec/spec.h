/* spec: the job spec. One key table drives parsing, validation, layering (defaults < site < job spec <
 * environment < command line), the listing in --help-keys and the man page check.
 * It does not look at the machine: GPUs, ports and processes are other modules' business. */
#ifndef DDP_SPEC_H
#define DDP_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/util.h"

/* Where a value came from, lowest precedence first. */
enum ddp_origin { DDP_ORIGIN_DEFAULT, DDP_ORIGIN_SITE, DDP_ORIGIN_SPEC, DDP_ORIGIN_ENV, DDP_ORIGIN_CLI };
const char *ddp_origin_name(enum ddp_origin o);

enum ddp_nproc_kind { DDP_NPROC_INT, DDP_NPROC_GPU, DDP_NPROC_CPU, DDP_NPROC_AUTO };
struct ddp_nproc {
    enum ddp_nproc_kind kind;
    int n; /* for DDP_NPROC_INT */
};

struct ddp_range {
    int min, max;
};

/* master_port: a number, or auto (optionally auto:LO-HI). */
struct ddp_port_spec {
    bool is_auto;
    int port;   /* when !is_auto */
    int lo, hi; /* range for auto */
};

/* max_memory_used: a GPU with more memory in use than this is skipped. 0/0 = no limit. */
struct ddp_mem_limit {
    int percent;              /* 1-100, or 0 */
    unsigned long long bytes; /* or 0 */
};

/* downsize_to: half (default), or a fixed size. */
struct ddp_downsize {
    int divisor; /* 2 for half, 0 when fixed */
    int size;
};

enum ddp_gpu_policy { DDP_POLICY_SAME_NUMA, DDP_POLICY_PACK, DDP_POLICY_SPREAD, DDP_POLICY_ANY };
/* [gpus] busy: a chosen GPU that another process holds memory on (gpus.h) */
enum ddp_gpu_busy { DDP_BUSY_WARN, DDP_BUSY_SKIP, DDP_BUSY_FAIL };
/* What "another process holds memory" means for [gpus] busy: more than this. */
#define DDP_GPU_BUSY_THRESHOLD (1LL << 30)
enum ddp_visible { DDP_VISIBLE_PER_JOB, DDP_VISIBLE_PER_RANK, DDP_VISIBLE_VIRTUAL /* per-rank + LOCAL_RANK=0 */ };
enum ddp_console { DDP_CONSOLE_AUTO, DDP_CONSOLE_RAW, DDP_CONSOLE_LINES };
enum ddp_bind { DDP_BIND_NODE, DDP_BIND_SOCKET, DDP_BIND_EXCLUSIVE, DDP_BIND_CORE_COMPLEX, DDP_BIND_NONE };
enum ddp_membind { DDP_MEM_LOCAL, DDP_MEM_INTERLEAVE, DDP_MEM_NONE };
enum ddp_on_failure { DDP_ONFAIL_RESTART, DDP_ONFAIL_FAIL };
enum ddp_on_timeout { DDP_ONTIMEOUT_RESTART, DDP_ONTIMEOUT_DOWNSIZE, DDP_ONTIMEOUT_FAIL };
enum ddp_on_suspect { DDP_ONSUSPECT_WARN, DDP_ONSUSPECT_RESTART, DDP_ONSUSPECT_DOWNSIZE, DDP_ONSUSPECT_AUTO };
enum ddp_heartbeat { DDP_HEARTBEAT_FILE, DDP_HEARTBEAT_OUTPUT, DDP_HEARTBEAT_NONE };
enum ddp_tristate { DDP_AUTO, DDP_YES, DDP_NO };

/* An ordered key=value list for the open sections [nccl] and [env]. */
struct ddp_kv {
    char *key;
    char *value;
    enum ddp_origin origin;
    char *file; /* where it was set, or NULL */
    int line;
};
struct ddp_kvlist {
    struct ddp_kv *v;
    size_t n, cap;
    size_t *idx;    /* hash index of v by key (slot = i + 1, 0 = empty), so that big [env] sections load in
                     * linear time; maintained by ddp_kvlist_set/remove: change v only through them */
    size_t idx_cap; /* a power of two, at least 2 * n, or 0 */
};

struct ddp_spec {
    /* [job] */
    char *name;
    struct ddp_strv command; /* full argv, shell-like quoting in the file */
    char *script;            /* python3 -u SCRIPT ARGS */
    char *module;            /* python3 -u -m MODULE ARGS */
    char *program;           /* PROGRAM ARGS (torchrun --no-python) */
    struct ddp_strv args;
    struct ddp_nproc nproc_per_node;
    int min_nproc_per_node; /* 0 = same as nproc_per_node */
    struct ddp_range nnodes;
    int node_rank;
    char *master_addr;
    struct ddp_port_spec master_port;
    char *workdir;
    char *log_dir;
    bool trust_log_dir;             /* use log_dir even where others could rename the run directory (logdir.h) */
    char *duplicate_stdout_filters; /* comma-separated substrings: matching lines also go to the attempt's */
    char *duplicate_stderr_filters; /* filtered_stdout.log / filtered_stderr.log (torchrun 2.9's) */
    char *tee;                      /* torchrun Std: 0-3, or per rank "0:1,1:2" */
    char *redirects;                /* same grammar */
    struct ddp_strv local_ranks_filter;
    char *role;
    char *log_line_prefix;         /* template: ${role_name} ${rank} ${local_rank}; empty = torchrun default */
    enum ddp_console console_mode; /* how worker output reaches the console (plan.c decides auto) */
    char *run_id;
    char *rdzv_backend;
    char *rdzv_endpoint;
    char *rdzv_conf;
    long long join_timeout_ms; /* 0 = torchrun's default for the backend */
    long long lost_after_ms;
    bool standalone;
    char *local_addr;
    struct ddp_strv signals_to_handle;
    char *secret;
    char *secret_file;
    bool run_path;
    /* [gpus] */
    struct ddp_strv gpus_select; /* empty = auto; "none" = no GPUs */
    struct ddp_strv gpus_exclude;
    enum ddp_gpu_policy gpus_policy;
    enum ddp_gpu_busy gpus_busy;
    struct ddp_mem_limit gpus_max_memory_used;
    enum ddp_visible gpus_visible;
    bool gpus_share; /* more workers than usable GPUs: they share them, round-robin */
    enum ddp_tristate gpus_lease;
    long long gpus_lease_wait_ms;
    /* [numa] */
    enum ddp_bind numa_bind;
    enum ddp_membind numa_memory;
    bool numa_strict;
    /* [restart] */
    int max_restarts;
    long long backoff_ms;
    enum ddp_on_failure on_failure;
    enum ddp_on_timeout on_timeout;
    int downsize_after;
    struct ddp_downsize downsize_to;
    long long shutdown_timeout_ms;
    enum ddp_tristate restart_warm;  /* standby interpreters for restarts (standby.h) */
    struct ddp_strv restart_preload; /* what they import */
    /* [timeout] (0 = off) */
    long long timeout_init_ms;
    long long timeout_stall_ms;
    enum ddp_heartbeat heartbeat;
    long long timeout_wall_ms;
    bool timer_file;                /* serve TORCHELASTIC_TIMER_FILE */
    bool timeout_stacks;            /* capture stacks and name the culprit before a hung attempt is stopped */
    bool timeout_sample;            /* sample Python stacks live (stall.c) */
    long long sample_interval_ms;   /* how often */
    long long suspect_floor_ms;     /* no suspicion with less time without progress */
    long long suspect_setup_ms;     /* no suspicion within this of an attempt's start */
    enum ddp_on_suspect on_suspect; /* what a suspected hang does */
    long long on_suspect_after_ms;  /* after how long (restart, downsize) */
    long long busy_limit_ms;        /* a rank working alone ends the job after this (0: never) */
    /* [nccl] */
    char *nccl_preset;
    struct ddp_kvlist nccl; /* NCCL_* / TORCH_* variables, validated by nccl.c */
    /* [env] */
    struct ddp_kvlist env;
    /* [slurm] */
    enum ddp_tristate slurm_enabled;

    /* Bookkeeping, one slot per key of the table. */
    enum ddp_origin *origin;
    char **set_file; /* file that set the key, or NULL */
    int *set_line;
    char *spec_path; /* the job spec file, if any */
};

/* Value types of the key table. */
enum ddp_key_type {
    DDP_T_STR,
    DDP_T_INT,
    DDP_T_BOOL,
    DDP_T_ENUM,
    DDP_T_DURATION,
    DDP_T_RANGE,
    DDP_T_LIST,
    DDP_T_ARGV,
    DDP_T_NPROC,
    DDP_T_PORT,
    DDP_T_STD,
    DDP_T_MEM,
    DDP_T_DOWNSIZE,
    DDP_T_TRISTATE
};

struct ddp_key {
    const char *section;
    const char *name;
    enum ddp_key_type type;
    size_t offset;              /* into struct ddp_spec */
    const char *def;            /* default, as written in a file; NULL = unset */
    const char *const *choices; /* DDP_T_ENUM: NULL-terminated names in enum order */
    long long min, max;         /* DDP_T_INT */
    const char *doc;            /* one line, for --help-keys and the man page check */
};

extern const struct ddp_key ddp_spec_keys[];
extern const size_t ddp_spec_nkeys;
extern const char *const ddp_spec_sections[]; /* NULL-terminated */

/* Index of section.key in the table, or -1. */
int ddp_spec_key_find(const char *section, const char *name);

/* Set every key to its default. Caller owns; release with ddp_spec_free(). */
void ddp_spec_init(struct ddp_spec *spec);
void ddp_spec_free(struct ddp_spec *spec);

/* Parse an INI file into spec with the given origin (SITE or SPEC). Returns 0, or a negative errno with
 * err->msg = "FILE:LINE: what was wrong (what was expected)". */
int ddp_spec_load_file(struct ddp_spec *spec, const char *path, enum ddp_origin origin, struct ddp_err *err);
/* The same from a string in memory; name is used in messages (fuzzing, tests). */
int ddp_spec_load_string(struct ddp_spec *spec, const char *name, const char *text, size_t len, enum ddp_origin origin,
                         struct ddp_err *err);

/* Set one key from a string ("section.key", value). where names the source for messages (a flag like
 * "--set", or a variable name). [nccl] and [env] accept any key. 0 or negative errno. */
int ddp_spec_set(struct ddp_spec *spec, const char *section, const char *key, const char *value, enum ddp_origin origin,
                 const char *where, struct ddp_err *err);

/* A scheduler's value (Slurm, SkyPilot, MPI...) for [job] key, with where naming its variable: set at the
 * environment layer unless the environment or the command line already set the key (they win). Returns 0 or
 * ddp_spec_set's error. */
int ddp_spec_set_from_scheduler(struct ddp_spec *spec, const char *key, const char *value, const char *where,
                                struct ddp_err *err);

/* Apply DDPLAUNCH_<SECTION>_<KEY> variables from envp (a pure getenv). */
int ddp_spec_apply_env(struct ddp_spec *spec, char *const *envp, struct ddp_err *err);

/* Cross-key checks after all layers: a program to run, MIN<=MAX, min_nproc <= nproc... */
int ddp_spec_validate(const struct ddp_spec *spec, struct ddp_err *err);

/* The value of key i, formatted as it would be written in a file. Caller owns; free(). */
char *ddp_spec_format(const struct ddp_spec *spec, size_t i);

/* Split a shell-like quoted string into argv ('...', "...", backslash; no expansion, no shell).
 * 0 or -EINVAL with err ("unterminated quote"). */
int ddp_spec_split_argv(const char *s, struct ddp_strv *out, struct ddp_err *err);

/* torchrun's Std value for one local rank from a tee/redirects string: 0 none, 1 out, 2 err, 3 both. */
int ddp_spec_std_for_rank(const char *value, int local_rank);

/* kvlist helpers. */
void ddp_kvlist_set(struct ddp_kvlist *l, const char *key, const char *value, enum ddp_origin origin, const char *file,
                    int line);
const struct ddp_kv *ddp_kvlist_get(const struct ddp_kvlist *l, const char *key);
/* Remove key's entry (if any), keeping the order of the others. */
void ddp_kvlist_remove(struct ddp_kvlist *l, const char *key);
void ddp_kvlist_free(struct ddp_kvlist *l);

#endif
