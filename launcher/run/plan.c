/* plan: see plan.h. Builds each worker's argv and environment (never calling setenv: the environment is
 * data), and prints the plan. */
#include "run/plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "host/logdir.h"
#include "topo/place.h"
#include "topo/topo.h"

void ddp_attempt_free(struct ddp_attempt *a)
{
    for (size_t i = 0; i < a->nworkers; i++) {
        struct ddp_worker *w = &a->workers[i];
        ddp_strv_clear(&w->argv);
        ddp_strv_clear(&w->envp);
        free(w->cwd);
        free(w->gpu_busid);
        free(w->cpus);
        free(w->mems);
        free(w->log_dir);
        free(w->prefix[0]);
        free(w->prefix[1]);
        free(w->stacks_file);
        free(w->fr_pipe);
    }
    free(a->workers);
    free(a->run_id);
    free(a->master_addr);
    free(a->dir);
    free(a->gpu_reason);
    memset(a, 0, sizeof *a);
}

/* A worker's environment while it is built: a hashed list (spec.h's kvlist: insertion order kept, a name set
 * again keeps its place), so that [env] with 40,000 keys costs linear time; env_store() writes it out as the
 * worker's "NAME=value" vector. */
static void env_set(struct ddp_kvlist *env, const char *name, const char *value)
{
    ddp_kvlist_set(env, name, value, DDP_ORIGIN_DEFAULT, NULL, 0);
}

static void env_setf(struct ddp_kvlist *env, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void env_setf(struct ddp_kvlist *env, const char *name, const char *fmt, ...)
{
    va_list ap;
    char *v;
    va_start(ap, fmt);
    if (vasprintf(&v, fmt, ap) < 0)
        abort();
    va_end(ap);
    env_set(env, name, v);
    free(v);
}

static const char *env_lookup(const struct ddp_kvlist *env, const char *name)
{
    const struct ddp_kv *kv = ddp_kvlist_get(env, name);
    return kv ? kv->value : NULL;
}

static void env_default(struct ddp_kvlist *env, const char *name, const char *value)
{
    if (!env_lookup(env, name))
        env_set(env, name, value);
}

/* The launcher's environment as the worker's starting point, except the agents' secret (never the workers').
 * An entry without '=' names no variable and is left out. */
static void env_load(struct ddp_kvlist *env, char *const *base)
{
    for (char *const *e = base; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "DDPLAUNCH_JOB_SECRET=", 21) == 0)
            continue;
        char *name = ddp_xstrndup(*e, (size_t)(eq - *e));
        env_set(env, name, eq + 1);
        free(name);
    }
}

static void env_store(const struct ddp_kvlist *env, struct ddp_strv *out)
{
    for (size_t i = 0; i < env->n; i++)
        ddp_strv_push_own(out, ddp_xasprintf("%s=%s", env->v[i].key, env->v[i].value));
}

/* Expand ${VAR} and ${VAR:-default} from the worker's environment as built so far (which includes the
 * launcher's). $$ is a literal $. An unset variable without default is an error. */
static int expand(const char *value, const struct ddp_kvlist *env, const struct ddp_kv *kv, char **out,
                  struct ddp_err *err)
{
    struct ddp_buf b = {0};
    for (const char *p = value; *p; p++) {
        if (p[0] == '$' && p[1] == '$') {
            ddp_buf_add(&b, "$", 1);
            p++;
            continue;
        }
        if (p[0] != '$' || p[1] != '{') {
            ddp_buf_add(&b, p, 1);
            continue;
        }
        const char *close = strchr(p + 2, '}');
        if (!close) {
            ddp_buf_free(&b);
            goto bad_syntax;
        }
        char *name = ddp_xstrndup(p + 2, (size_t)(close - p - 2));
        char *def = strstr(name, ":-");
        if (def) {
            *def = '\0';
            def += 2;
        }
        const char *v = env_lookup(env, name);
        if (!v && !def) {
            int rc;
            if (kv->file)
                rc = ddp_errf(err, -EINVAL, "%s:%d: %s: ${%s} is not set (write ${%s:-default} for a default)",
                              kv->file, kv->line, kv->key, name, name);
            else
                rc = ddp_errf(err, -EINVAL, "%s: ${%s} is not set (write ${%s:-default} for a default)", kv->key, name,
                              name);
            free(name);
            ddp_buf_free(&b);
            return rc;
        }
        ddp_buf_puts(&b, v ? v : def);
        free(name);
        p = close;
    }
    *out = b.data ? b.data : ddp_xstrdup("");
    return 0;
bad_syntax:
    if (kv->file)
        return ddp_errf(err, -EINVAL, "%s:%d: %s: unterminated ${ in '%s'", kv->file, kv->line, kv->key, value);
    return ddp_errf(err, -EINVAL, "%s: unterminated ${ in '%s'", kv->key, value);
}

static char *prefix_for(const char *tmpl, int rank, int local_rank, const char *role, const char *host)
{
    struct ddp_buf b = {0};
    for (const char *p = tmpl; *p; p++) {
        if (p[0] == '$' && p[1] == '{') {
            const char *close = strchr(p, '}');
            if (close) {
                size_t n = (size_t)(close - p - 2);
                if (n == 4 && !strncmp(p + 2, "rank", 4)) {
                    ddp_buf_printf(&b, "%d", rank);
                    p = close;
                    continue;
                }
                if (n == 10 && !strncmp(p + 2, "local_rank", 10)) {
                    ddp_buf_printf(&b, "%d", local_rank);
                    p = close;
                    continue;
                }
                if (n == 9 && !strncmp(p + 2, "role_name", 9)) {
                    ddp_buf_puts(&b, role);
                    p = close;
                    continue;
                }
                if (n == 4 && !strncmp(p + 2, "host", 4)) {
                    ddp_buf_puts(&b, host);
                    p = close;
                    continue;
                }
            }
        }
        ddp_buf_add(&b, p, 1);
    }
    return b.data ? b.data : ddp_xstrdup("");
}

const char *ddp_plan_python(char *const *envp, const char *env_python, const char *torchrun_python,
                            const char *path_python, const char **why_out)
{
    const char *py = ddp_env_get(envp, "PYTHON_EXEC");
    const char *why, *choice;
    if (py && *py) {
        choice = py;
        why = "PYTHON_EXEC";
    } else if (env_python && *env_python) {
        choice = env_python;
        why = "the Python environment ddplaunch is installed in";
    } else if (torchrun_python && *torchrun_python) {
        choice = torchrun_python;
        why = "the interpreter of torchrun on PATH, its #! line";
    } else if (path_python && *path_python) {
        choice = path_python;
        why = "python3 from PATH";
    } else {
        choice = "python3";
        why = "python3 from PATH";
    }
    if (why_out)
        *why_out = why;
    return choice;
}

char *ddp_plan_shebang_python(const char *line)
{
    if (!line || line[0] != '#' || line[1] != '!')
        return NULL;
    const char *p = line + 2;
    char word[2][4096];
    int n = 0;
    while (n < 2) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, " \t\r\n");
        if (len == 0 || len >= sizeof word[0])
            break;
        memcpy(word[n], p, len);
        word[n][len] = '\0';
        p += len;
        /* "#!/usr/bin/env -S python3 -u": env's options are not the interpreter */
        if (n == 1 && word[1][0] == '-')
            continue;
        n++;
    }
    if (n == 0)
        return NULL;
    const char *slash = strrchr(word[0], '/');
    const char *interp = word[0];
    if (strcmp(slash ? slash + 1 : word[0], "env") == 0) {
        if (n < 2)
            return NULL;
        interp = word[1];
    }
    slash = strrchr(interp, '/');
    return strncmp(slash ? slash + 1 : interp, "python", 6) == 0 ? ddp_xstrdup(interp) : NULL;
}

static bool uses_python(const struct ddp_spec *s)
{
    return !s->command.n && (s->script || s->module);
}

/* "python", "python3.11", "/usr/bin/python3" (a command = line that runs Python itself). */
static bool argv0_is_python(const struct ddp_strv *argv)
{
    const char *a = argv->n ? argv->v[0] : "", *slash = strrchr(a, '/');
    return strncmp(slash ? slash + 1 : a, "python", 6) == 0;
}

static void build_argv(const struct ddp_plan_ctx *ctx, struct ddp_strv *argv)
{
    const struct ddp_spec *s = ctx->spec;
    const char *py = ctx->python ? ctx->python : "python3";
    if (s->command.n) {
        for (size_t i = 0; i < s->command.n; i++)
            ddp_strv_push(argv, s->command.v[i]);
    } else if (s->script) {
        ddp_strv_push(argv, py);
        ddp_strv_push(argv, "-u");
        ddp_strv_push(argv, s->script);
    } else if (s->module) {
        ddp_strv_push(argv, py);
        ddp_strv_push(argv, "-u");
        ddp_strv_push(argv, "-m");
        ddp_strv_push(argv, s->module);
    } else if (s->program) {
        ddp_strv_push(argv, s->program);
    }
    for (size_t i = 0; i < s->args.n; i++)
        ddp_strv_push(argv, s->args.v[i]);
}

/* torchrun's console prefix of a --tee copy (TailLog's header): "[default0]:" */
#define TEE_PREFIX "[${role_name}${local_rank}]:"

/* job.console for each stream that reaches the console: raw bytes, or whole lines with a prefix.
 * raw: all raw. A stream --tee copies: lines with torchrun's tee prefix (or the log_line_prefix asked for),
 * on any console, as torchrun. lines: the others with log_line_prefix. auto: the others raw when at most one
 * worker's output reaches the console and no log_line_prefix was asked for (`> out.json` gets the worker's
 * bytes, a progress bar draws as without a launcher); else prefixed lines on a terminal (a person reads
 * them), and on a file or pipe whole lines without prefix: the workers' bytes, never two ranks in one line.
 * A stream whose console is a terminal comes from a pseudo-terminal, so the worker sees one too (torchrun's
 * workers write to the terminal itself). */
static void decide_console(const struct ddp_plan_ctx *ctx, struct ddp_attempt *a)
{
    const struct ddp_spec *s = ctx->spec;
    size_t reaching = 0;
    bool prefix_asked = s->origin[ddp_spec_key_find("job", "log_line_prefix")] != DDP_ORIGIN_DEFAULT &&
                        s->log_line_prefix && *s->log_line_prefix;
    const char *tmpl = s->log_line_prefix ? s->log_line_prefix : "";
    for (size_t i = 0; i < a->nworkers; i++)
        reaching += a->workers[i].to_console[0] || a->workers[i].to_console[1];
    for (size_t i = 0; i < a->nworkers; i++) {
        struct ddp_worker *w = &a->workers[i];
        for (int k = 0; k < 2; k++) {
            bool tee = (w->std_tee & (1 << k)) && s->console_mode != DDP_CONSOLE_RAW;
            const char *t = tee && !prefix_asked ? TEE_PREFIX : tmpl;
            w->raw[k] = false;
            if (s->console_mode == DDP_CONSOLE_RAW)
                w->raw[k] = true;
            else if (!tee && s->console_mode == DDP_CONSOLE_AUTO && !prefix_asked)
                w->raw[k] = reaching <= 1;
            if (!tee && s->console_mode == DDP_CONSOLE_AUTO && !prefix_asked && !ctx->console_tty[k])
                t = "";
            w->prefix[k] = prefix_for(t, w->rank, w->local_rank, s->role, ctx->hostname);
            w->tty[k] = w->to_console[k] && ctx->console_tty[k];
        }
    }
}

/* The first worker whose console output is framed lines, or NULL when all of it is raw bytes. */
static const struct ddp_worker *console_framed(const struct ddp_attempt *a)
{
    for (size_t i = 0; i < a->nworkers; i++)
        for (int k = 0; k < 2; k++)
            if (a->workers[i].to_console[k] && !a->workers[i].raw[k])
                return &a->workers[i];
    return NULL;
}

static bool select_is(const struct ddp_spec *s, const char *word)
{
    return s->gpus_select.n == 1 && strcmp(s->gpus_select.v[0], word) == 0;
}

void ddp_plan_place_req(const struct ddp_plan_ctx *ctx, int nproc, struct ddp_place_req *req)
{
    const struct ddp_spec *s = ctx->spec;
    static const struct ddp_strv empty;
    memset(req, 0, sizeof *req);
    req->nproc = nproc;
    bool auto_select = s->gpus_select.n == 0 || select_is(s, "auto");
    req->want_gpus = s->nproc_per_node.kind != DDP_NPROC_CPU && !select_is(s, "none") &&
                     (!auto_select || (ctx->topo && ddp_topo_ngpus(ctx->topo) > 0));
    req->select = auto_select || select_is(s, "none") ? &empty : &s->gpus_select;
    req->exclude = &s->gpus_exclude;
    req->policy = s->gpus_policy;
    req->visible = s->gpus_visible;
    req->share = s->gpus_share;
    req->bind = s->numa_bind;
    req->mem = s->numa_memory;
    req->max_memory_used = s->gpus_max_memory_used;
    req->skip_held_over = s->gpus_busy == DDP_BUSY_SKIP ? DDP_GPU_BUSY_THRESHOLD : 0;
    req->inherited_cvd = ctx->inherited_cvd;
    req->sched_gpus = ctx->sched_gpus;
    req->holders = ctx->gpu_holders;
}

/* LOG_DIR/<run>/attempt_N, or the run directory's attempt_N without a log dir, or NULL. Caller owns. */
static char *attempt_dir(const struct ddp_plan_ctx *ctx, int attempt)
{
    if (ctx->logdir)
        return ddp_xasprintf("%s/attempt_%d", ddp_logdir_path(ctx->logdir), attempt);
    if (ctx->spec->log_dir) /* `plan`: the run directory is made when the job starts */
        return ddp_xasprintf("%s/%s_XXXXXXXX/attempt_%d", ctx->spec->log_dir, ctx->run_id, attempt);
    if (ctx->run_dir)
        return ddp_xasprintf("%s/attempt_%d", ctx->run_dir, attempt);
    return NULL;
}

/* The variables torchrun gives every worker (rank, sizes, master, restart count, run id, error and timer files),
 * and the defaults it sets unless inherited. */
static void set_torchrun_env(struct ddp_kvlist *env, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *out,
                             int rank, int lr, const char *signals, const char *log_dir)
{
    env_setf(env, "RANK", "%d", rank);
    env_setf(env, "LOCAL_RANK", "%d", ctx->spec->gpus_visible == DDP_VISIBLE_VIRTUAL ? 0 : lr);
    env_setf(env, "GROUP_RANK", "%d", ctx->node_rank);
    env_setf(env, "ROLE_RANK", "%d", rank);
    env_set(env, "ROLE_NAME", ctx->spec->role);
    env_setf(env, "LOCAL_WORLD_SIZE", "%d", out->nproc);
    env_setf(env, "WORLD_SIZE", "%d", out->world_size);
    env_setf(env, "GROUP_WORLD_SIZE", "%d", ctx->nnodes);
    env_setf(env, "ROLE_WORLD_SIZE", "%d", out->world_size);
    env_set(env, "MASTER_ADDR", ctx->master_addr);
    env_setf(env, "MASTER_PORT", "%d", ctx->master_port);
    env_setf(env, "TORCHELASTIC_RESTART_COUNT", "%d", out->attempt);
    env_setf(env, "TORCHELASTIC_MAX_RESTARTS", "%d", ctx->spec->max_restarts);
    env_set(env, "TORCHELASTIC_RUN_ID", ctx->run_id);
    env_set(env, "TORCHELASTIC_USE_AGENT_STORE", "False");
    env_set(env, "TORCHELASTIC_SIGNALS_TO_HANDLE", signals);
    if (log_dir)
        env_setf(env, "TORCHELASTIC_ERROR_FILE", "%s/error.json", log_dir);
    if (ctx->timer_file)
        env_set(env, "TORCHELASTIC_TIMER_FILE", ctx->timer_file);
    env_default(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    if (ctx->ras_port > 0 && !env_lookup(env, "NCCL_RAS_ADDR")) /* NCCL's RAS thread: this job's own port */
        env_setf(env, "NCCL_RAS_ADDR", "localhost:%d", ctx->ras_port);
    if (out->nproc > 1)
        env_default(env, "OMP_NUM_THREADS", "1");
}

/* Where placement put the worker: its GPU, NUMA node and bindings, and the variables that name them. */
static void apply_placement(struct ddp_worker *w, const struct ddp_place_rank *pr, struct ddp_kvlist *env)
{
    w->gpu = pr->gpu;
    w->gpu_busid = pr->busid ? ddp_xstrdup(pr->busid) : NULL;
    w->numa_node = pr->numa_node;
    w->cpus = pr->cpus ? ddp_xstrdup(pr->cpus) : NULL;
    w->mems = pr->mems ? ddp_xstrdup(pr->mems) : NULL;
    if (pr->cvd) {
        env_set(env, "CUDA_VISIBLE_DEVICES", pr->cvd);
        if (pr->gpu >= 0)
            env_set(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    if (pr->busid)
        env_set(env, "DDPLAUNCH_GPU_BUSID", pr->busid);
    if (pr->uuid)
        env_set(env, "DDPLAUNCH_GPU_UUID", pr->uuid);
    if (pr->numa_node >= 0)
        env_setf(env, "DDPLAUNCH_NUMA_NODE", "%d", pr->numa_node);
}

/* A worker's own settings (ranks, argv, directory, bindings, log routing and prefix), before its environment. */
static void init_worker(const struct ddp_plan_ctx *ctx, const struct ddp_attempt *out, struct ddp_worker *w, int lr,
                        int rank)
{
    const struct ddp_spec *s = ctx->spec;

    w->local_rank = lr;
    w->rank = rank;
    w->gpu = -1;
    w->numa_node = -1;
    build_argv(ctx, &w->argv);
    w->cwd = s->workdir ? ddp_xstrdup(s->workdir) : NULL;
    w->mem_mode = s->numa_memory;
    w->bind_strict = s->numa_strict;
    if (out->dir)
        w->log_dir = ddp_xasprintf("%s/%d", out->dir, lr);
    w->std_redirect = ddp_spec_std_for_rank(s->redirects, lr);
    w->std_tee = ddp_spec_std_for_rank(s->tee, lr);
    w->console = s->local_ranks_filter.n == 0;
    for (size_t i = 0; i < s->local_ranks_filter.n; i++)
        if (atoi(s->local_ranks_filter.v[i]) == lr)
            w->console = true;
    for (int i = 0; i < 2; i++)
        w->to_console[i] = w->console && !(w->std_redirect & ~w->std_tee & (1 << i));
}

/* [nccl] then [env]: explicit settings win over inherited values. */
static int set_user_env(struct ddp_kvlist *env, const struct ddp_spec *s, struct ddp_err *err)
{
    const struct ddp_kvlist *lists[] = {&s->nccl, &s->env};
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            const struct ddp_kv *kv = &lists[l]->v[i];
            char *v = NULL;
            int rc = expand(kv->value, env, kv, &v, err);
            if (rc < 0)
                return rc;
            env_set(env, kv->key, v);
            free(v);
        }
    return 0;
}

/* Hang forensics ([timeout] stacks): Python's fault handler prints every thread's stack when the
 * supervisor sends SIGABRT to a hung rank; torch (2.x, NCCL) dumps its flight recorder on a collective
 * timeout into the rank's log directory. Values the user set win. */
static void set_stacks_env(struct ddp_worker *w, const struct ddp_spec *s, struct ddp_kvlist *env)
{
    w->python = uses_python(s) || argv0_is_python(&w->argv);
    if (s->timeout_stacks && w->python) {
        env_default(env, "PYTHONFAULTHANDLER", "1");
        /* torch 2.11 names (TORCH_NCCL_TRACE_BUFFER_SIZE draws a deprecation warning there) */
        if (!env_lookup(env, "TORCH_NCCL_TRACE_BUFFER_SIZE"))
            env_default(env, "TORCH_FR_BUFFER_SIZE", "2000");
        env_default(env, "TORCH_NCCL_DUMP_ON_TIMEOUT", "1");
        if (w->log_dir && !env_lookup(env, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")) {
            char *fr = ddp_xasprintf("%s/flight_recorder_rank_", w->log_dir);
            env_default(env, "TORCH_FR_DUMP_TEMP_FILE", fr);
            free(fr);
        }
    }
}

/* Live stack sampling ([timeout] sample, progress.c): the directory holding ddplaunch's sitecustomize.py
 * (sample.c writes it into the run directory) goes first on PYTHONPATH, and the rank's stacks file in the attempt's
 * directory and the signal go in DDPLAUNCH_STACKS_FILE/SIGNAL, which the sitecustomize takes out of the
 * environment. `plan` shows them with "<run dir>" for the run directory it does not make. */
static void set_sample_env(struct ddp_worker *w, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a, int lr,
                           struct ddp_kvlist *env)
{
    if (!ctx->spec->timeout_sample || !ctx->sample_pydir || !a->dir)
        return;
    /* the user's PYTHONPATH is kept verbatim after ours (an empty entry is the current directory), and given to
     * the sitecustomize, which puts it back into the environment byte for byte ("-": there was none) */
    const char *old = env_lookup(env, "PYTHONPATH");
    if (old)
        env_setf(env, "DDPLAUNCH_PYTHONPATH", "+%s", old);
    else
        env_set(env, "DDPLAUNCH_PYTHONPATH", "-");
    if (old && *old)
        env_setf(env, "PYTHONPATH", "%s:%s", ctx->sample_pydir, old);
    else
        env_set(env, "PYTHONPATH", ctx->sample_pydir);
    w->stacks_file = ddp_xasprintf("%s/stacks.%d", a->dir, lr);
    env_set(env, "DDPLAUNCH_STACKS_FILE", w->stacks_file);
    env_setf(env, "DDPLAUNCH_STACKS_SIGNAL", "%d", ctx->sample_signal);
    /* torch 2.x's on-demand flight-recorder dump (NCCL): progress.c writes to the FIFO when it suspects a hang */
    char *stem = ddp_xasprintf("%s/fr_pipe_", a->dir);
    env_default(env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", stem);
    w->fr_pipe = ddp_xasprintf("%s%d.pipe", env_lookup(env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"), w->rank);
    free(stem);
}

int ddp_plan_build(const struct ddp_plan_ctx *ctx, int attempt, int nproc, const int *exclude, size_t nexclude,
                   struct ddp_attempt *out, struct ddp_err *err)
{
    const struct ddp_spec *s = ctx->spec;
    struct ddp_placement place = {0};
    int rc;

    memset(out, 0, sizeof *out);
    if (nproc < 1)
        return ddp_errf(err, -EINVAL, "internal: attempt with %d workers", nproc);

    if (ctx->topo) {
        struct ddp_place_req req;
        ddp_plan_place_req(ctx, nproc, &req);
        req.exclude_idx = exclude;
        req.nexclude_idx = nexclude;
        rc = ddp_place_ranks(ctx->topo, &req, &place, err);
        if (rc < 0)
            return rc;
    }

    out->attempt = attempt;
    out->nproc = nproc;
    out->world_size = ctx->world_size > 0 ? ctx->world_size : nproc * ctx->nnodes;
    out->orig_world_size = ctx->nproc * ctx->nnodes;
    out->run_id = ddp_xstrdup(ctx->run_id);
    out->master_addr = ddp_xstrdup(ctx->master_addr);
    out->master_port = ctx->master_port;
    out->dir = attempt_dir(ctx, attempt);
    out->gpu_reason = place.reason ? ddp_xstrdup(place.reason) : NULL;
    out->workers = ddp_xcalloc((size_t)nproc, sizeof *out->workers);
    out->nworkers = (size_t)nproc;

    char signals[256] = "";
    for (size_t i = 0; i < s->signals_to_handle.n; i++)
        snprintf(signals + strlen(signals), sizeof signals - strlen(signals), "%s%s", i ? "," : "",
                 s->signals_to_handle.v[i]);

    for (int lr = 0; lr < nproc; lr++) {
        struct ddp_worker *w = &out->workers[lr];
        struct ddp_kvlist envl = {0}, *env = &envl;
        int rank = (ctx->world_size > 0 ? ctx->rank_base : ctx->node_rank * nproc) + lr;
        init_worker(ctx, out, w, lr, rank);

        env_load(env, ctx->base_env);
        set_torchrun_env(env, ctx, out, rank, lr, signals, w->log_dir);

        if (ctx->topo)
            apply_placement(w, &place.ranks[lr], env);
        env_setf(env, "DDPLAUNCH_ATTEMPT", "%d", attempt);
        env_setf(env, "DDPLAUNCH_ORIG_WORLD_SIZE", "%d", out->orig_world_size);
        if (out->dir)
            env_set(env, "DDPLAUNCH_ATTEMPT_DIR", out->dir);
        if (ctx->run_dir)
            env_setf(env, "DDPLAUNCH_HEARTBEAT_FILE", "%s/heartbeat.%d", ctx->run_dir, lr);

        rc = set_user_env(env, s, err);
        if (rc < 0) {
            ddp_kvlist_free(env);
            ddp_place_free(&place);
            ddp_attempt_free(out);
            return rc;
        }
        set_stacks_env(w, s, env);
        set_sample_env(w, ctx, out, lr, env);
        env_store(env, &w->envp);
        ddp_kvlist_free(env);
    }
    if (ctx->topo)
        ddp_place_free(&place);
    decide_console(ctx, out);
    return 0;
}

/* ---- printing ---- */

/* Whether v holds the string e. */
static bool strv_has(const struct ddp_strv *v, const char *e)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->v[i], e) == 0)
            return true;
    return false;
}

/* The variables ddplaunch sets or changes for a worker, relative to the launcher's environment. */
static bool env_changed(const struct ddp_plan_ctx *ctx, const char *entry)
{
    for (char *const *e = ctx->base_env; e && *e; e++)
        if (strcmp(*e, entry) == 0)
            return false;
    return true;
}

/* A key's value as plan shows it: the job secret is never printed. Caller frees. */
static char *key_value(const struct ddp_spec *s, size_t i)
{
    if (strcmp(ddp_spec_keys[i].section, "job") == 0 && strcmp(ddp_spec_keys[i].name, "secret") == 0 && s->secret &&
        *s->secret)
        return ddp_xstrdup("(redacted)");
    return ddp_spec_format(s, i);
}
/* A key as plan shows it, with what a 0 left at its default stands for: join_timeout's 0 is 600 s (c10d) or 900 s
 * (static), min_nproc_per_node's 0 is resolved (policy.c) to nproc_per_node, or 1 with on_timeout = downsize. The
 * value shown is the one the job uses. *note (static) is NULL or the meaning of the default. Caller frees. */
static char *key_value_used(const struct ddp_plan_ctx *ctx, size_t i, const char **note)
{
    const struct ddp_spec *s = ctx->spec;
    const struct ddp_key *k = &ddp_spec_keys[i];
    *note = NULL;
    if (s->origin[i] == DDP_ORIGIN_DEFAULT && strcmp(k->section, "job") == 0) {
        if (strcmp(k->name, "join_timeout") == 0) { /* 0 on one node, which waits for no other */
            *note = "0 = 600s with c10d, 900s static";
            return ddp_xasprintf("%llds", ctx->join_timeout_ms / 1000);
        }
        if (strcmp(k->name, "min_nproc_per_node") == 0)
            *note = s->on_timeout == DDP_ONTIMEOUT_DOWNSIZE ? "0 = 1 with on_timeout = downsize"
                                                            : "0 = nproc_per_node unless on_timeout = downsize";
    }
    return key_value(s, i);
}

/* NVML's view of topology GPU g now (memory in use, processes), or NULL; *unheld (may be NULL) set when NVML
 * was not read because /proc shows that no other process holds an NVIDIA device (topo.h). */
static const struct ddp_nvml_gpu *gpu_now(const struct ddp_plan_ctx *ctx, int g, bool *unheld)
{
    struct ddp_topo_gpu_facts facts;
    if (unheld)
        *unheld = false;
    if (!ctx->topo || g < 0 || ddp_topo_gpu_facts(ctx->topo, (size_t)g, &facts) < 0)
        return NULL;
    if (unheld)
        *unheld = facts.unheld;
    return facts.nvml && facts.nvml->mem_used >= 0 ? facts.nvml : NULL;
}

/* plan: each GPU of the attempt with its memory in use and the processes holding it. */
static void print_gpu_state(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a)
{
    bool header = false;
    for (size_t i = 0; i < a->nworkers; i++) {
        const struct ddp_worker *w = &a->workers[i];
        bool unheld;
        const struct ddp_nvml_gpu *g = gpu_now(ctx, w->gpu, &unheld);
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen |= a->workers[j].gpu == w->gpu;
        if ((!g && !unheld) || seen)
            continue;
        if (!header)
            fprintf(f, g ? "\nGPU memory now (NVML):\n" : "\nGPU memory now:\n");
        header = true;
        if (!g) {
            fprintf(f,
                    "  GPU %d (%s): held by no other process (/proc: nothing else has /dev/nvidia* open; NVML not "
                    "read)\n",
                    w->gpu, w->gpu_busid ? w->gpu_busid : "?");
            continue;
        }
        fprintf(f, "  GPU %d (%s): %.1f of %.1f GiB in use", w->gpu, w->gpu_busid ? w->gpu_busid : "?",
                (double)g->mem_used / 1073741824.0, (double)g->mem_total / 1073741824.0);
        for (int p = 0; p < g->nprocs; p++) {
            char who[160];
            fprintf(f, "%s%s", p ? ", " : "; held by ", ddp_nvml_proc_describe(&g->procs[p], who, sizeof who));
        }
        fprintf(f, "\n");
    }
}

/* plan --json: a worker's GPU memory in use and its holders (additive keys; memory only when NVML was read). */
static void gpu_state_json(struct ddp_buf *b, const struct ddp_plan_ctx *ctx, int gpu)
{
    bool unheld;
    const struct ddp_nvml_gpu *g = gpu_now(ctx, gpu, &unheld);
    if (!g) {
        if (unheld)
            ddp_buf_puts(b, ", \"gpu_holders\": []");
        return;
    }
    ddp_buf_printf(b, ", \"gpu_memory_used\": %lld, \"gpu_memory_total\": %lld, \"gpu_holders\": [", g->mem_used,
                   g->mem_total);
    for (int p = 0; p < g->nprocs; p++) {
        ddp_buf_printf(b, "%s{\"pid\": %u, \"memory_used\": %lld, \"user\": ", p ? ", " : "", g->procs[p].pid,
                       g->procs[p].mem_used);
        ddp_buf_json_str(b, g->procs[p].user[0] ? g->procs[p].user : NULL);
        ddp_buf_puts(b, ", \"command\": ");
        ddp_buf_json_str(b, g->procs[p].comm[0] ? g->procs[p].comm : NULL);
        ddp_buf_puts(b, "}");
    }
    ddp_buf_puts(b, "]");
}

static void print_json(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a)
{
    const struct ddp_spec *s = ctx->spec;
    struct ddp_buf b = {0};
    ddp_buf_puts(&b, "{\n  \"spec\": {");
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        const char *note;
        char *v = key_value_used(ctx, i, &note);
        ddp_buf_printf(&b, "%s\n    \"%s.%s\": {\"value\": ", i ? "," : "", ddp_spec_keys[i].section,
                       ddp_spec_keys[i].name);
        ddp_buf_json_str(&b, v);
        ddp_buf_printf(&b, ", \"origin\": \"%s\"}", ddp_origin_name(s->origin[i]));
        free(v);
    }
    const struct ddp_kvlist *lists[] = {&s->nccl, &s->env};
    const char *names[] = {"nccl", "env"};
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            ddp_buf_printf(&b, ",\n    \"%s.%s\": {\"value\": ", names[l], lists[l]->v[i].key);
            ddp_buf_json_str(&b, lists[l]->v[i].value);
            ddp_buf_printf(&b, ", \"origin\": \"%s\"}", ddp_origin_name(lists[l]->v[i].origin));
        }
    ddp_buf_puts(&b, "\n  },\n");
    ddp_buf_printf(&b, "  \"nnodes\": %d,\n  \"node_rank\": %d,\n  \"nproc_per_node\": %d,\n  \"world_size\": %d,\n",
                   ctx->nnodes, ctx->node_rank, a->nproc, a->world_size);
    ddp_buf_puts(&b, "  \"rendezvous\": ");
    ddp_buf_json_str(&b, ctx->rdzv_source ? ctx->rdzv_source : "single node");
    ddp_buf_puts(&b, ",\n  \"master_addr\": ");
    ddp_buf_json_str(&b, a->master_addr);
    ddp_buf_printf(&b, ",\n  \"master_port\": %d,\n  \"run_id\": ", a->master_port);
    ddp_buf_json_str(&b, a->run_id);
    ddp_buf_puts(&b, ",\n  \"gpu_choice\": ");
    ddp_buf_json_str(&b, a->gpu_reason);
    ddp_buf_puts(&b, ",\n  \"python\": ");
    ddp_buf_json_str(&b, uses_python(s) ? ctx->python : NULL);
    ddp_buf_puts(&b, ",\n  \"python_why\": ");
    ddp_buf_json_str(&b, uses_python(s) ? ctx->python_why : NULL);
    ddp_buf_printf(&b, ",\n  \"console\": \"%s\"", console_framed(a) ? "lines" : "raw");
    ddp_buf_puts(&b, ",\n  \"workers\": [");
    for (size_t i = 0; i < a->nworkers; i++) {
        const struct ddp_worker *w = &a->workers[i];
        ddp_buf_printf(&b, "%s\n    {\"local_rank\": %d, \"rank\": %d, \"gpu\": %d, \"gpu_busid\": ", i ? "," : "",
                       w->local_rank, w->rank, w->gpu);
        ddp_buf_json_str(&b, w->gpu_busid);
        gpu_state_json(&b, ctx, w->gpu);
        ddp_buf_printf(&b, ", \"numa_node\": %d, \"cpus\": ", w->numa_node);
        ddp_buf_json_str(&b, w->cpus);
        ddp_buf_puts(&b, ", \"mems\": ");
        ddp_buf_json_str(&b, w->mems);
        ddp_buf_puts(&b, ",\n     \"argv\": [");
        for (size_t j = 0; j < w->argv.n; j++) {
            if (j)
                ddp_buf_puts(&b, ", ");
            ddp_buf_json_str(&b, w->argv.v[j]);
        }
        ddp_buf_puts(&b, "],\n     \"cwd\": ");
        ddp_buf_json_str(&b, w->cwd);
        ddp_buf_puts(&b, ",\n     \"env\": {");
        bool first = true;
        for (size_t j = 0; j < w->envp.n; j++) {
            const char *e = w->envp.v[j];
            if (!env_changed(ctx, e))
                continue;
            const char *eq = strchr(e, '=');
            char *name = ddp_xstrndup(e, (size_t)(eq - e));
            ddp_buf_puts(&b, first ? "\n       " : ",\n       ");
            ddp_buf_json_str(&b, name);
            ddp_buf_puts(&b, ": ");
            ddp_buf_json_str(&b, eq + 1);
            free(name);
            first = false;
        }
        ddp_buf_puts(&b, "}}");
    }
    ddp_buf_puts(&b, "\n  ]\n}\n");
    fputs(b.data, f);
    ddp_buf_free(&b);
}

void ddp_plan_print(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a, bool json)
{
    if (json) {
        print_json(f, ctx, a);
        return;
    }
    const struct ddp_spec *s = ctx->spec;
    fprintf(f, "Job spec (value, and where it came from):\n");
    const char *section = "";
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        const struct ddp_key *k = &ddp_spec_keys[i];
        if (strcmp(section, k->section) != 0) {
            section = k->section;
            fprintf(f, "  [%s]\n", section);
        }
        const char *note;
        char *v = key_value_used(ctx, i, &note);
        char where[300] = "";
        if (s->set_file[i])
            snprintf(where, sizeof where, " %s:%d", s->set_file[i], s->set_line[i]);
        else if (note)
            snprintf(where, sizeof where, " %s", note);
        fprintf(f, "    %-20s = %-30s (%s%s)\n", k->name, v, ddp_origin_name(s->origin[i]), where);
        free(v);
    }
    const struct ddp_kvlist *lists[] = {&s->nccl, &s->env};
    const char *names[] = {"nccl", "env"};
    for (size_t l = 0; l < 2; l++) {
        if (!lists[l]->n)
            continue;
        fprintf(f, "  [%s] variables\n", names[l]);
        for (size_t i = 0; i < lists[l]->n; i++)
            fprintf(f, "    %-20s = %-30s (%s)\n", lists[l]->v[i].key, lists[l]->v[i].value,
                    ddp_origin_name(lists[l]->v[i].origin));
    }
    if (ctx->etcd_endpoints)
        fprintf(f, "\nNodes: %d, rendezvous: etcd-v3 at %s (node ranks are taken at join), %d workers here\n",
                ctx->nnodes, ctx->etcd_endpoints, a->nproc);
    else if (ctx->coord_dynamic)
        fprintf(f,
                "\nNodes: %d, rendezvous: %s at %s:%d (the agent on that host serves; node ranks are given at "
                "join), %d workers here\n",
                ctx->nnodes, ctx->rdzv_source, ctx->master_addr, ctx->coord_port, a->nproc);
    else
        fprintf(f, "\nNodes: %d (this is node %d; node rank from: %s), %d workers here, world size %d\n", ctx->nnodes,
                ctx->node_rank, ctx->rdzv_source ? ctx->rdzv_source : "single node", a->nproc, a->world_size);
    if (ctx->nnodes > 1)
        fprintf(f, "Can be lost: %s\n",
                ctx->etcd_endpoints ? "any node, node 0 included, and one etcd member (decisions are in etcd)"
                                    : "any node but node 0 (it serves the rendezvous and decides restarts)");
    fprintf(f, "Master: %s:%d%s   run id: %s\n", a->master_addr, a->master_port,
            s->master_port.is_auto ? " (auto: free now; reserved when the job starts)" : "", a->run_id);
    if (a->gpu_reason)
        fprintf(f, "GPUs: %s\n", a->gpu_reason);
    if (uses_python(s))
        fprintf(f, "Python: %s (%s)\n", ctx->python ? ctx->python : "python3",
                ctx->python_why ? ctx->python_why : "python3 from PATH");
    const struct ddp_worker *cw = console_framed(a);
    if (!cw)
        fprintf(f, "Console: raw (the worker's bytes as they come)\n");
    else if (!*cw->prefix[0] && !*cw->prefix[1])
        fprintf(f, "Console: lines (whole lines, no prefix: stdout is not a terminal)\n");
    else
        fprintf(f, "Console: lines (whole lines, with the prefix, e.g. \"%s\")\n",
                *cw->prefix[0] ? cw->prefix[0] : cw->prefix[1]);
    fprintf(f, "\n%-6s %-6s %-14s %-5s %-16s %-8s\n", "LOCAL", "RANK", "GPU", "NUMA", "CPUS", "MEMS");
    for (size_t i = 0; i < a->nworkers; i++) {
        const struct ddp_worker *w = &a->workers[i];
        char numa[16] = "-";
        if (w->numa_node >= 0)
            snprintf(numa, sizeof numa, "%d", w->numa_node);
        fprintf(f, "%-6d %-6d %-14s %-5s %-16s %-8s\n", w->local_rank, w->rank, w->gpu_busid ? w->gpu_busid : "-", numa,
                w->cpus ? w->cpus : "-", w->mems ? w->mems : "-");
    }
    print_gpu_state(f, ctx, a);
    for (size_t i = 0; i < a->nworkers; i++) {
        const struct ddp_worker *w = &a->workers[i];
        fprintf(f, "\nlocal rank %d:\n  command:", w->local_rank);
        for (size_t j = 0; j < w->argv.n; j++)
            fprintf(f, " %s", w->argv.v[j]);
        if (i == 0) {
            fprintf(f, "\n  environment (set or changed by ddplaunch):\n");
            for (size_t j = 0; j < w->envp.n; j++)
                if (env_changed(ctx, w->envp.v[j]))
                    fprintf(f, "    %s\n", w->envp.v[j]);
            continue;
        }
        /* the others: only what differs from local rank 0 (an environment is some 30 lines a rank) */
        const struct ddp_worker *w0 = &a->workers[0];
        fprintf(f, "\n  environment: as local rank %d's, except:\n", w0->local_rank);
        for (size_t j = 0; j < w->envp.n; j++)
            if (env_changed(ctx, w->envp.v[j]) && !strv_has(&w0->envp, w->envp.v[j]))
                fprintf(f, "    %s\n", w->envp.v[j]);
        for (size_t j = 0; j < w0->envp.n; j++) {
            const char *e = w0->envp.v[j], *eq = strchr(e, '=');
            char *name = ddp_xstrndup(e, eq ? (size_t)(eq - e) : strlen(e));
            if (env_changed(ctx, e) && ddp_strv_env_find(&w->envp, name) < 0)
                fprintf(f, "    (no %s)\n", name);
            free(name);
        }
    }
}
