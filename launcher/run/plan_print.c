/* plan_print: ddp_plan_print and ddp_plan_print_brief (plan.h): a built attempt as `ddplaunch plan` shows it,
 * in text (full, or one screen) or JSON. It builds nothing (plan.c). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/plan.h"
#include "topo/nvml.h"
#include "topo/topo.h"

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
    for (char *const *e = ctx->job.base_env; e && *e; e++)
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
    const struct ddp_spec *s = ctx->job.spec;
    const struct ddp_key *k = &ddp_spec_keys[i];
    *note = NULL;
    if (s->origin[i] == DDP_ORIGIN_DEFAULT && strcmp(k->section, "job") == 0) {
        if (strcmp(k->name, "join_timeout") == 0) { /* 0 on one node, which waits for no other */
            *note = "0 = 600s with c10d, 900s static";
            return ddp_xasprintf("%llds", ctx->coord.join_timeout_ms / 1000);
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
    if (!ctx->job.topo || g < 0 || ddp_topo_gpu_facts(ctx->job.topo, (size_t)g, &facts) < 0)
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
    const struct ddp_spec *s = ctx->job.spec;
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
    ddp_buf_json_str(&b, ctx->coord.rdzv_source ? ctx->coord.rdzv_source : "single node");
    ddp_buf_puts(&b, ",\n  \"master_addr\": ");
    ddp_buf_json_str(&b, a->master_addr);
    ddp_buf_printf(&b, ",\n  \"master_port\": %d,\n  \"run_id\": ", a->master_port);
    ddp_buf_json_str(&b, a->run_id);
    ddp_buf_puts(&b, ",\n  \"gpu_choice\": ");
    ddp_buf_json_str(&b, a->gpu_reason);
    ddp_buf_puts(&b, ",\n  \"python\": ");
    ddp_buf_json_str(&b, ddp_plan_uses_python(s) ? ctx->python : NULL);
    ddp_buf_puts(&b, ",\n  \"python_why\": ");
    ddp_buf_json_str(&b, ddp_plan_uses_python(s) ? ctx->python_why : NULL);
    ddp_buf_printf(&b, ",\n  \"console\": \"%s\"", ddp_plan_console_framed(a) ? "lines" : "raw");
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

/* With a job spec or a workdir: where the workers start, and why there (one rule, ddplaunch.ini(5)). */
static void print_directory(FILE *f, const struct ddp_spec *s)
{
    if (!s->spec_path && !s->workdir)
        return;
    int k = ddp_spec_key_find("job", "workdir");
    bool implicit = !s->workdir || (s->origin[k] == DDP_ORIGIN_SPEC && !s->set_file[k]);
    fprintf(f, "Directory: %s (%s)\n", s->workdir ? s->workdir : ".",
            implicit ? "the job spec's: its relative script, program, log_dir and workdir are taken from there, and "
                       "the workers start there"
                     : "workdir: the workers start there");
}

/* The spec's values and where each came from; brief: only those not at their default. */
static void print_spec(FILE *f, const struct ddp_plan_ctx *ctx, bool brief)
{
    const struct ddp_spec *s = ctx->job.spec;
    if (brief)
        fprintf(f, "Job spec (the settings not at their default; --full lists every one):\n");
    else
        fprintf(f, "Job spec (value, and where it came from):\n");
    const char *section = "";
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        const struct ddp_key *k = &ddp_spec_keys[i];
        const char *note;
        char *v = key_value_used(ctx, i, &note);
        if (brief && (s->origin[i] == DDP_ORIGIN_DEFAULT || !*v)) { /* an empty one: cleared by the command line */
            free(v);
            continue;
        }
        if (strcmp(section, k->section) != 0) {
            section = k->section;
            fprintf(f, "  [%s]\n", section);
        }
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
}

/* Nodes, master, GPUs, interpreter, directory, console, and the table of ranks. */
static void print_head(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a)
{
    const struct ddp_spec *s = ctx->job.spec;
    if (ctx->coord.etcd_endpoints)
        fprintf(f, "\nNodes: %d, rendezvous: etcd-v3 at %s (node ranks are taken at join), %d workers here\n",
                ctx->nnodes, ctx->coord.etcd_endpoints, a->nproc);
    else if (ctx->coord.dynamic)
        fprintf(f,
                "\nNodes: %d, rendezvous: %s at %s:%d (the agent on that host serves; node ranks are given at "
                "join), %d workers here\n",
                ctx->nnodes, ctx->coord.rdzv_source, ctx->master_addr, ctx->coord.port, a->nproc);
    else
        fprintf(f, "\nNodes: %d (this is node %d; node rank from: %s), %d workers here, world size %d\n", ctx->nnodes,
                ctx->node_rank, ctx->coord.rdzv_source ? ctx->coord.rdzv_source : "single node", a->nproc,
                a->world_size);
    if (ctx->nnodes > 1)
        fprintf(f, "Can be lost: %s\n",
                ctx->coord.etcd_endpoints ? "any node, node 0 included, and one etcd member (decisions are in etcd)"
                                          : "any node but node 0 (it serves the rendezvous and decides restarts)");
    fprintf(f, "Master: %s:%d%s   run id: %s\n", a->master_addr, a->master_port,
            s->master_port.is_auto ? " (auto: free now; reserved when the job starts)" : "", a->run_id);
    if (a->gpu_reason)
        fprintf(f, "GPUs: %s\n", a->gpu_reason);
    if (ddp_plan_uses_python(s))
        fprintf(f, "Python: %s (%s)\n", ctx->python ? ctx->python : "python3",
                ctx->python_why ? ctx->python_why : "python3 from PATH");
    print_directory(f, s);
    const struct ddp_worker *cw = ddp_plan_console_framed(a);
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
}

/* Each rank's command and environment (the others only what differs from rank 0's). */
static void print_ranks(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a)
{
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

void ddp_plan_print(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a, bool json)
{
    if (json) {
        print_json(f, ctx, a);
        return;
    }
    print_spec(f, ctx, false);
    print_head(f, ctx, a);
    print_ranks(f, ctx, a);
}

void ddp_plan_print_brief(FILE *f, const struct ddp_plan_ctx *ctx, const struct ddp_attempt *a)
{
    print_spec(f, ctx, true);
    print_head(f, ctx, a);
    if (a->nworkers) {
        fprintf(f, "\ncommand of local rank 0:");
        for (size_t j = 0; j < a->workers[0].argv.n; j++)
            fprintf(f, " %s", a->workers[0].argv.v[j]);
        fprintf(f, "\n");
    }
    fprintf(f, "\nddplaunch plan --full (or plan piped): every setting, and the environment of each rank\n");
}
