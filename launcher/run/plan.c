/* plan: see plan.h. Builds each worker's argv and environment (never calling setenv: the environment is
 * data). plan_print.c prints it. */
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

bool ddp_plan_uses_python(const struct ddp_spec *s)
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
    const struct ddp_spec *s = ctx->job.spec;
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
    const struct ddp_spec *s = ctx->job.spec;
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
            w->prefix[k] = prefix_for(t, w->rank, w->local_rank, s->role, ctx->job.hostname);
            w->tty[k] = w->to_console[k] && ctx->console_tty[k];
        }
    }
}

/* The first worker whose console output is framed lines, or NULL when all of it is raw bytes. */
const struct ddp_worker *ddp_plan_console_framed(const struct ddp_attempt *a)
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

void ddp_plan_place_req(const struct ddp_plan_job *job, const struct ddp_plan_gpus *gpus, int nproc,
                        struct ddp_place_req *req)
{
    const struct ddp_spec *s = job->spec;
    static const struct ddp_strv empty;
    memset(req, 0, sizeof *req);
    req->nproc = nproc;
    bool auto_select = s->gpus_select.n == 0 || select_is(s, "auto");
    req->want_gpus = s->nproc_per_node.kind != DDP_NPROC_CPU && !select_is(s, "none") &&
                     (!auto_select || (job->topo && ddp_topo_ngpus(job->topo) > 0));
    req->select = auto_select || select_is(s, "none") ? &empty : &s->gpus_select;
    req->exclude = &s->gpus_exclude;
    req->policy = s->gpus_policy;
    req->visible = s->gpus_visible;
    req->share = s->gpus_share;
    req->bind = s->numa_bind;
    req->mem = s->numa_memory;
    req->max_memory_used = s->gpus_max_memory_used;
    req->busy = s->gpus_busy;
    req->inherited_cvd = gpus->inherited_cvd;
    req->sched_gpus = gpus->sched;
    req->holders = gpus->holders;
}

/* LOG_DIR/<run>/attempt_N, or the run directory's attempt_N without a log dir, or NULL. Caller owns. */
static char *attempt_dir(const struct ddp_plan_ctx *ctx, int attempt)
{
    if (ctx->job.logdir)
        return ddp_xasprintf("%s/attempt_%d", ddp_logdir_path(ctx->job.logdir), attempt);
    if (ctx->job.spec->log_dir) /* `plan`: the run directory is made when the job starts */
        return ddp_xasprintf("%s/%s_XXXXXXXX/attempt_%d", ctx->job.spec->log_dir, ctx->job.run_id, attempt);
    if (ctx->watch.run_dir)
        return ddp_xasprintf("%s/attempt_%d", ctx->watch.run_dir, attempt);
    return NULL;
}

/* The variables torchrun gives every worker (rank, sizes, master, restart count, run id, error and timer files),
 * and the defaults it sets unless inherited. */
static void set_torchrun_env(struct ddp_kvlist *env, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *out,
                             int rank, int lr, const char *signals, const char *log_dir)
{
    env_setf(env, "RANK", "%d", rank);
    env_setf(env, "LOCAL_RANK", "%d", ctx->job.spec->gpus_visible == DDP_VISIBLE_VIRTUAL ? 0 : lr);
    env_setf(env, "GROUP_RANK", "%d", ctx->node_rank);
    env_setf(env, "ROLE_RANK", "%d", rank);
    env_set(env, "ROLE_NAME", ctx->job.spec->role);
    env_setf(env, "LOCAL_WORLD_SIZE", "%d", out->nproc);
    env_setf(env, "WORLD_SIZE", "%d", out->world_size);
    env_setf(env, "GROUP_WORLD_SIZE", "%d", ctx->nnodes);
    env_setf(env, "ROLE_WORLD_SIZE", "%d", out->world_size);
    env_set(env, "MASTER_ADDR", ctx->master_addr);
    env_setf(env, "MASTER_PORT", "%d", ctx->master_port);
    env_setf(env, "TORCHELASTIC_RESTART_COUNT", "%d", out->attempt);
    env_setf(env, "TORCHELASTIC_MAX_RESTARTS", "%d", ctx->job.spec->max_restarts);
    env_set(env, "TORCHELASTIC_RUN_ID", ctx->job.run_id);
    env_set(env, "TORCHELASTIC_USE_AGENT_STORE", "False");
    env_set(env, "TORCHELASTIC_SIGNALS_TO_HANDLE", signals);
    if (log_dir)
        env_setf(env, "TORCHELASTIC_ERROR_FILE", "%s/error.json", log_dir);
    if (ctx->watch.timer_file)
        env_set(env, "TORCHELASTIC_TIMER_FILE", ctx->watch.timer_file);
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
    const struct ddp_spec *s = ctx->job.spec;

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
    w->python = ddp_plan_uses_python(s) || argv0_is_python(&w->argv);
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
    if (!ctx->job.spec->timeout_sample || !ctx->watch.sample_pydir || !a->dir)
        return;
    /* the user's PYTHONPATH is kept verbatim after ours (an empty entry is the current directory), and given to
     * the sitecustomize, which puts it back into the environment byte for byte ("-": there was none) */
    const char *old = env_lookup(env, "PYTHONPATH");
    if (old)
        env_setf(env, "DDPLAUNCH_PYTHONPATH", "+%s", old);
    else
        env_set(env, "DDPLAUNCH_PYTHONPATH", "-");
    if (old && *old)
        env_setf(env, "PYTHONPATH", "%s:%s", ctx->watch.sample_pydir, old);
    else
        env_set(env, "PYTHONPATH", ctx->watch.sample_pydir);
    w->stacks_file = ddp_xasprintf("%s/stacks.%d", a->dir, lr);
    env_set(env, "DDPLAUNCH_STACKS_FILE", w->stacks_file);
    env_setf(env, "DDPLAUNCH_STACKS_SIGNAL", "%d", ctx->watch.sample_signal);
    /* torch 2.x's on-demand flight-recorder dump (NCCL): progress.c writes to the FIFO when it suspects a hang */
    char *stem = ddp_xasprintf("%s/fr_pipe_", a->dir);
    env_default(env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", stem);
    w->fr_pipe = ddp_xasprintf("%s%d.pipe", env_lookup(env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"), w->rank);
    free(stem);
}

int ddp_plan_build(const struct ddp_plan_ctx *ctx, int attempt, int nproc, const int *exclude, size_t nexclude,
                   struct ddp_attempt *out, struct ddp_err *err)
{
    const struct ddp_spec *s = ctx->job.spec;
    struct ddp_placement place = {0};
    int rc;

    memset(out, 0, sizeof *out);
    if (nproc < 1)
        return ddp_errf(err, -EINVAL, "internal: attempt with %d workers", nproc);

    if (ctx->job.topo) {
        struct ddp_place_req req;
        ddp_plan_place_req(&ctx->job, &ctx->gpus, nproc, &req);
        req.exclude_idx = exclude;
        req.nexclude_idx = nexclude;
        rc = ddp_place_ranks(ctx->job.topo, &req, &place, err);
        if (rc < 0)
            return rc;
    }

    out->attempt = attempt;
    out->nproc = nproc;
    out->world_size = ctx->world_size > 0 ? ctx->world_size : nproc * ctx->nnodes;
    out->orig_world_size = ctx->nproc * ctx->nnodes;
    out->run_id = ddp_xstrdup(ctx->job.run_id);
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

        env_load(env, ctx->job.base_env);
        set_torchrun_env(env, ctx, out, rank, lr, signals, w->log_dir);

        if (ctx->job.topo)
            apply_placement(w, &place.ranks[lr], env);
        env_setf(env, "DDPLAUNCH_ATTEMPT", "%d", attempt);
        env_setf(env, "DDPLAUNCH_ORIG_WORLD_SIZE", "%d", out->orig_world_size);
        if (out->dir)
            env_set(env, "DDPLAUNCH_ATTEMPT_DIR", out->dir);
        if (ctx->watch.run_dir)
            env_setf(env, "DDPLAUNCH_HEARTBEAT_FILE", "%s/heartbeat.%d", ctx->watch.run_dir, lr);

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
    if (ctx->job.topo)
        ddp_place_free(&place);
    decide_console(ctx, out);
    return 0;
}
