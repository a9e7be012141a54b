/* Unit tests for launcher/plan: the worker environment (torchrun's full variable set for every rank of every
 * node, defaults that never override inherited values, [nccl]/[env] with ${VAR} expansion), CUDA_VISIBLE_DEVICES
 * for per-job, per-rank and CPU workers on a real hwloc fixture, argv for command/script/module/program,
 * console prefixes, local_ranks_filter, log and attempt directories, and the printed plan. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/plan.h"
#include "topo/topo.h"

static char *base_env[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "DATA=/data", NULL};

struct fixture {
    struct ddp_spec spec;
    struct ddp_plan_ctx ctx;
    struct ddp_attempt a;
    struct ddp_topo *topo;
};

static void setup_spec(struct fixture *f, const char *ini)
{
    struct ddp_err err = {0};
    memset(f, 0, sizeof *f);
    ddp_spec_init(&f->spec);
    cr_assert_eq(ddp_spec_load_string(&f->spec, "job.ini", ini, strlen(ini), DDP_ORIGIN_SPEC, &err), 0, "%s", err.msg);
    f->ctx.job.spec = &f->spec;
    f->ctx.job.base_env = base_env;
    f->ctx.job.hostname = "node7";
    f->ctx.job.run_id = "run42";
    f->ctx.master_addr = "10.0.0.1";
    f->ctx.master_port = 29501;
    f->ctx.nnodes = 1;
    f->ctx.node_rank = 0;
    f->ctx.nproc = 1;
    f->ctx.python = "/usr/bin/python3";
    f->ctx.console_tty[0] = f->ctx.console_tty[1] = true;
}

static void build(struct fixture *f, int attempt, int nproc)
{
    struct ddp_err err = {0};
    int rc = ddp_plan_build(&f->ctx, attempt, nproc, NULL, 0, &f->a, &err);
    cr_assert_eq(rc, 0, "ddp_plan_build: %s", err.msg);
    cr_assert_eq(f->a.nworkers, (size_t)nproc);
}

static void teardown_fixture(struct fixture *f)
{
    ddp_attempt_free(&f->a);
    if (f->topo)
        ddp_topo_destroy(f->topo);
    ddp_spec_free(&f->spec);
}

/* The value of NAME in a worker's environment, or NULL. */
static const char *wenv(const struct ddp_worker *w, const char *name)
{
    int i = ddp_strv_env_find(&w->envp, name);
    return i >= 0 ? w->envp.v[i] + strlen(name) + 1 : NULL;
}

static void expect_env(const struct ddp_worker *w, const char *name, const char *want)
{
    const char *got = wenv(w, name);
    if (!want) {
        cr_expect_null(got, "rank %d: %s=%s, want unset", w->rank, name, got);
        return;
    }
    cr_expect_not_null(got, "rank %d: %s unset, want %s", w->rank, name, want);
    if (got)
        cr_expect_str_eq(got, want, "rank %d: %s=%s, want %s", w->rank, name, got, want);
}

static void expect_envf(const struct ddp_worker *w, const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%d", v);
    expect_env(w, name, buf);
}

static void expect_argv(const struct ddp_worker *w, const char *const *want)
{
    size_t n = 0;
    while (want[n])
        n++;
    cr_expect_eq(w->argv.n, n, "argv has %zu words, want %zu", w->argv.n, n);
    for (size_t i = 0; i < n && i < w->argv.n; i++)
        cr_expect_str_eq(w->argv.v[i], want[i], "argv[%zu] = '%s', want '%s'", i, w->argv.v[i], want[i]);
    cr_expect_null(w->argv.v[w->argv.n]);
}

/* No variable twice, every entry NAME=VALUE, the inherited environment kept. */
static void expect_sane_env(const struct ddp_worker *w)
{
    for (size_t i = 0; i < w->envp.n; i++) {
        const char *eq = strchr(w->envp.v[i], '=');
        cr_assert_not_null(eq, "entry without '=': %s", w->envp.v[i]);
        for (size_t j = i + 1; j < w->envp.n; j++)
            cr_expect(strncmp(w->envp.v[i], w->envp.v[j], (size_t)(eq - w->envp.v[i]) + 1) != 0, "rank %d: %.*s twice",
                      w->rank, (int)(eq - w->envp.v[i]), w->envp.v[i]);
    }
    cr_expect_null(w->envp.v[w->envp.n]);
    expect_env(w, "PATH", "/usr/bin:/bin");
    expect_env(w, "HOME", "/home/u");
}

/* ---- torchrun's variables, every rank of every node ---- */

Test(plan_env, full_torchrun_set_for_each_rank_of_each_node)
{
    const int nnodes = 3, nproc = 4;
    for (int node = 0; node < nnodes; node++) {
        struct fixture f;
        setup_spec(&f, "[job]\nscript = train.py\nnnodes = 3\nrole = trainer\n[restart]\nmax_restarts = 5\n");
        f.ctx.nnodes = nnodes;
        f.ctx.node_rank = node;
        f.ctx.nproc = nproc;
        build(&f, 2, nproc);
        cr_expect_eq(f.a.world_size, 12);
        cr_expect_eq(f.a.attempt, 2);
        for (int lr = 0; lr < nproc; lr++) {
            const struct ddp_worker *w = &f.a.workers[lr];
            cr_expect_eq(w->local_rank, lr);
            cr_expect_eq(w->rank, node * nproc + lr);
            expect_sane_env(w);
            expect_envf(w, "RANK", node * nproc + lr);
            expect_envf(w, "LOCAL_RANK", lr);
            expect_envf(w, "GROUP_RANK", node);
            expect_envf(w, "ROLE_RANK", node * nproc + lr);
            expect_env(w, "ROLE_NAME", "trainer");
            expect_envf(w, "LOCAL_WORLD_SIZE", nproc);
            expect_envf(w, "WORLD_SIZE", nnodes * nproc);
            expect_envf(w, "GROUP_WORLD_SIZE", nnodes);
            expect_envf(w, "ROLE_WORLD_SIZE", nnodes * nproc);
            expect_env(w, "MASTER_ADDR", "10.0.0.1");
            expect_env(w, "MASTER_PORT", "29501");
            expect_env(w, "TORCHELASTIC_RESTART_COUNT", "2");
            expect_env(w, "TORCHELASTIC_MAX_RESTARTS", "5");
            expect_env(w, "TORCHELASTIC_RUN_ID", "run42");
            expect_env(w, "TORCHELASTIC_USE_AGENT_STORE", "False");
            expect_env(w, "TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
            expect_env(w, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
            expect_env(w, "OMP_NUM_THREADS", "1");
            expect_env(w, "DDPLAUNCH_ATTEMPT", "2");
            expect_env(w, "DDPLAUNCH_ORIG_WORLD_SIZE", "12");
            expect_env(w, "LANG", "C.UTF-8");
            /* no topology: no GPU variables invented */
            expect_env(w, "CUDA_VISIBLE_DEVICES", NULL);
            expect_env(w, "DDPLAUNCH_GPU_BUSID", NULL);
            cr_expect_eq(w->gpu, -1);
            cr_expect_eq(w->numa_node, -1);
            cr_expect_null(w->cpus);
        }
        teardown_fixture(&f);
    }
}

Test(plan_env, launcher_variables_are_replaced_not_duplicated)
{
    /* A launcher started by another launcher (or a stale shell) has RANK etc. set: the worker gets ours. */
    static char *env[] = {
        "RANK=99", "WORLD_SIZE=99", "MASTER_PORT=1", "LOCAL_RANK=7", "PATH=/usr/bin:/bin", "HOME=/home/u", NULL};
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.job.base_env = env;
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    for (int lr = 0; lr < 2; lr++) {
        expect_sane_env(&f.a.workers[lr]);
        expect_envf(&f.a.workers[lr], "RANK", lr);
        expect_envf(&f.a.workers[lr], "LOCAL_RANK", lr);
        expect_env(&f.a.workers[lr], "WORLD_SIZE", "2");
        expect_env(&f.a.workers[lr], "MASTER_PORT", "29501");
    }
    teardown_fixture(&f);
}

Test(plan_env, defaults_do_not_override_inherited_values)
{
    static char *env[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "OMP_NUM_THREADS=8",
                          "TORCH_NCCL_ASYNC_ERROR_HANDLING=0", NULL};
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.job.base_env = env;
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    expect_env(&f.a.workers[0], "OMP_NUM_THREADS", "8");
    expect_env(&f.a.workers[1], "TORCH_NCCL_ASYNC_ERROR_HANDLING", "0");
    expect_sane_env(&f.a.workers[1]);
    teardown_fixture(&f);
}

Test(plan_env, omp_default_only_with_several_workers)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    build(&f, 0, 1);
    expect_env(&f.a.workers[0], "OMP_NUM_THREADS", NULL); /* as torchrun: only when nproc > 1 */
    expect_env(&f.a.workers[0], "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    teardown_fixture(&f);
}

Test(plan_env, explicit_settings_win_over_defaults_and_inherited)
{
    static char *env[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "OMP_NUM_THREADS=8", "NCCL_DEBUG=WARN", NULL};
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n[nccl]\nNCCL_DEBUG = INFO\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 3\n"
                   "[env]\nOMP_NUM_THREADS = 4\n");
    f.ctx.job.base_env = env;
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    for (int lr = 0; lr < 2; lr++) {
        expect_env(&f.a.workers[lr], "OMP_NUM_THREADS", "4");
        expect_env(&f.a.workers[lr], "NCCL_DEBUG", "INFO");
        expect_env(&f.a.workers[lr], "TORCH_NCCL_ASYNC_ERROR_HANDLING", "3");
        expect_sane_env(&f.a.workers[lr]);
    }
    teardown_fixture(&f);
}

Test(plan_env, expansion)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n"
                   "[nccl]\nNCCL_DEBUG_FILE = ${DATA}/nccl.%h.%p\n"
                   "[env]\n"
                   "A = ${HOME}/x\n"
                   "B = ${UNSET_VAR:-fallback}-${DATA:-unused}\n"
                   "C = $$HOME and $ alone and $HOME\n"
                   "D = rank${RANK}of${WORLD_SIZE}\n"
                   "E = ${A}/more\n"
                   "F = ${UNSET_VAR:-}\n"
                   "G = ${NCCL_DEBUG_FILE}\n");
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    for (int lr = 0; lr < 2; lr++) {
        const struct ddp_worker *w = &f.a.workers[lr];
        expect_env(w, "NCCL_DEBUG_FILE", "/data/nccl.%h.%p");
        expect_env(w, "A", "/home/u/x");
        expect_env(w, "B", "fallback-/data");
        expect_env(w, "C", "$HOME and $ alone and $HOME");
        char want[32];
        snprintf(want, sizeof want, "rank%dof2", lr);
        expect_env(w, "D", want); /* the worker's own variables expand too */
        expect_env(w, "E", "/home/u/x/more");
        expect_env(w, "F", "");
        expect_env(w, "G", "/data/nccl.%h.%p");
    }
    teardown_fixture(&f);
}

Test(plan_env, expansion_errors_name_file_line_and_key)
{
    struct fixture f;
    struct ddp_err err = {0};
    setup_spec(&f, "[job]\nscript = t.py\n[env]\nOK = 1\nBAD = ${NOPE}/x\n");
    cr_expect_eq(ddp_plan_build(&f.ctx, 0, 1, NULL, 0, &f.a, &err), -EINVAL);
    cr_expect_str_eq(err.msg, "job.ini:5: BAD: ${NOPE} is not set (write ${NOPE:-default} for a default)");
    cr_expect_eq(f.a.nworkers, 0u);
    teardown_fixture(&f);
    setup_spec(&f, "[job]\nscript = t.py\n[env]\nBAD = ${HOME\n");
    cr_expect_eq(ddp_plan_build(&f.ctx, 0, 1, NULL, 0, &f.a, &err), -EINVAL);
    cr_expect_str_eq(err.msg, "job.ini:4: BAD: unterminated ${ in '${HOME'");
    teardown_fixture(&f);
    /* set from the command line: no file:line, the key names it */
    setup_spec(&f, "[job]\nscript = t.py\n");
    cr_assert_eq(ddp_spec_set(&f.spec, "env", "X", "${NOPE}", DDP_ORIGIN_CLI, "--set", &err), 0);
    cr_expect_eq(ddp_plan_build(&f.ctx, 0, 1, NULL, 0, &f.a, &err), -EINVAL);
    cr_expect_str_eq(err.msg, "X: ${NOPE} is not set (write ${NOPE:-default} for a default)");
    teardown_fixture(&f);
}

Test(plan_env, downsized_attempt_keeps_the_original_world_size)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\nnnodes = 2\n");
    f.ctx.nnodes = 2;
    f.ctx.node_rank = 1;
    f.ctx.nproc = 4;
    build(&f, 3, 2);
    cr_expect_eq(f.a.world_size, 4);
    cr_expect_eq(f.a.orig_world_size, 8);
    expect_env(&f.a.workers[1], "RANK", "3");
    expect_env(&f.a.workers[1], "WORLD_SIZE", "4");
    expect_env(&f.a.workers[1], "LOCAL_WORLD_SIZE", "2");
    expect_env(&f.a.workers[1], "DDPLAUNCH_ORIG_WORLD_SIZE", "8");
    expect_env(&f.a.workers[1], "TORCHELASTIC_RESTART_COUNT", "3");
    teardown_fixture(&f);
}

Test(plan_env, directories_heartbeat_timer_and_error_files)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\nlog_dir = /var/log/job\nworkdir = /work/dir\n");
    f.ctx.watch.run_dir = "/run/user/0/ddplaunch-1-abc";
    f.ctx.watch.timer_file = "/run/user/0/ddplaunch-1-abc/timer";
    f.ctx.nproc = 2;
    build(&f, 1, 2);
    cr_expect_str_eq(f.a.dir, "/var/log/job/run42_XXXXXXXX/attempt_1");
    const struct ddp_worker *w = &f.a.workers[1];
    cr_expect_str_eq(w->log_dir, "/var/log/job/run42_XXXXXXXX/attempt_1/1");
    cr_expect_str_eq(w->cwd, "/work/dir");
    expect_env(w, "TORCHELASTIC_ERROR_FILE", "/var/log/job/run42_XXXXXXXX/attempt_1/1/error.json");
    expect_env(w, "TORCHELASTIC_TIMER_FILE", "/run/user/0/ddplaunch-1-abc/timer");
    expect_env(w, "DDPLAUNCH_HEARTBEAT_FILE", "/run/user/0/ddplaunch-1-abc/heartbeat.1");
    expect_env(w, "DDPLAUNCH_ATTEMPT_DIR", "/var/log/job/run42_XXXXXXXX/attempt_1");
    teardown_fixture(&f);
    /* no log_dir: error files go to the private run dir */
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.watch.run_dir = "/tmp/rd";
    build(&f, 0, 1);
    expect_env(&f.a.workers[0], "TORCHELASTIC_ERROR_FILE", "/tmp/rd/attempt_0/0/error.json");
    cr_expect_null(f.a.workers[0].cwd);
    teardown_fixture(&f);
    /* `plan`: neither */
    setup_spec(&f, "[job]\nscript = t.py\n");
    build(&f, 0, 1);
    cr_expect_null(f.a.dir);
    expect_env(&f.a.workers[0], "TORCHELASTIC_ERROR_FILE", NULL);
    expect_env(&f.a.workers[0], "DDPLAUNCH_HEARTBEAT_FILE", NULL);
    teardown_fixture(&f);
}

/* ---- argv ---- */

Test(plan_argv, script_module_program_command)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = train.py\nargs = --lr 0.1 'a b'\n");
    build(&f, 0, 1);
    const char *want1[] = {"/usr/bin/python3", "-u", "train.py", "--lr", "0.1", "a b", NULL};
    expect_argv(&f.a.workers[0], want1);
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nmodule = pkg.train\nargs = -x\n");
    build(&f, 0, 1);
    const char *want2[] = {"/usr/bin/python3", "-u", "-m", "pkg.train", "-x", NULL};
    expect_argv(&f.a.workers[0], want2);
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nprogram = ./bin/train\nargs = --steps 3\n");
    build(&f, 0, 1);
    const char *want3[] = {"./bin/train", "--steps", "3", NULL};
    expect_argv(&f.a.workers[0], want3);
    teardown_fixture(&f);

    setup_spec(&f, "[job]\ncommand = torch_app \"--name=a b\" ';' '$HOME'\nargs = extra\n");
    build(&f, 0, 1);
    const char *want4[] = {"torch_app", "--name=a b", ";", "$HOME", "extra", NULL};
    expect_argv(&f.a.workers[0], want4);
    teardown_fixture(&f);

    /* no interpreter given: python3 from PATH */
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.python = NULL;
    build(&f, 0, 1);
    const char *want5[] = {"python3", "-u", "t.py", NULL};
    expect_argv(&f.a.workers[0], want5);
    teardown_fixture(&f);
}

/* ---- output settings per rank ---- */

Test(plan_out, prefixes)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.node_rank = 1;
    f.ctx.nnodes = 2;
    build(&f, 0, 2);
    cr_expect_str_eq(f.a.workers[0].prefix[0], "[rank2]: ");
    cr_expect_str_eq(f.a.workers[1].prefix[0], "[rank3]: ");
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nscript = t.py\nrole = trainer\n");
    cr_assert_eq(ddp_spec_set(&f.spec, "job", "log_line_prefix", "${role_name}${local_rank}@${host} r=${rank} ${x} $",
                              DDP_ORIGIN_CLI, "--set", NULL),
                 0);
    build(&f, 0, 2);
    cr_expect_str_eq(f.a.workers[1].prefix[0], "trainer1@node7 r=1 ${x} $");
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nscript = t.py\nlog_line_prefix =\n");
    build(&f, 0, 1);
    cr_expect_str_eq(f.a.workers[0].prefix[0], "");
    teardown_fixture(&f);
}

Test(plan_out, local_ranks_filter_and_std)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\nlocal_ranks_filter = 0,2\nredirects = 0:1,2:3\ntee = 2\n");
    build(&f, 0, 4);
    bool want[] = {true, false, true, false};
    int redir[] = {1, 0, 3, 0};
    for (int lr = 0; lr < 4; lr++) {
        cr_expect_eq(f.a.workers[lr].console, want[lr], "local rank %d console", lr);
        cr_expect_eq(f.a.workers[lr].std_redirect, redir[lr], "local rank %d redirects", lr);
        cr_expect_eq(f.a.workers[lr].std_tee, 2, "local rank %d tee", lr);
    }
    teardown_fixture(&f);
    setup_spec(&f, "[job]\nscript = t.py\n");
    build(&f, 0, 3);
    for (int lr = 0; lr < 3; lr++) {
        cr_expect(f.a.workers[lr].console);
        cr_expect_eq(f.a.workers[lr].std_redirect, 0);
    }
    teardown_fixture(&f);
}

Test(plan_out, bad_nproc)
{
    struct fixture f;
    struct ddp_err err = {0};
    setup_spec(&f, "[job]\nscript = t.py\n");
    cr_expect_eq(ddp_plan_build(&f.ctx, 0, 0, NULL, 0, &f.a, &err), -EINVAL);
    teardown_fixture(&f);
}

/* ---- GPUs on a real topology (AWS g4dn.metal: 8 T4, 4 per NUMA node, bus order) ---- */

static void load_topo(struct fixture *f, const char *name)
{
    const char *src = getenv("DDP_SRCDIR");
    cr_assert_not_null(src, "DDP_SRCDIR is not set (run through `make unit`)");
    char *path = ddp_xasprintf("%s/tests/fixtures/topo/%s", src, name);
    struct ddp_err err = {0};
    int rc = ddp_topo_load(path, &f->topo, &err);
    free(path);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(ddp_topo_ngpus(f->topo), 8u);
    f->ctx.job.topo = f->topo;
}

#define G4DN "2s-8gpu-aws-g4dn-metal-t4.xml"

Test(plan_gpu, per_job_every_worker_sees_the_jobs_gpus)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    load_topo(&f, G4DN);
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    for (int lr = 0; lr < 2; lr++) {
        const struct ddp_worker *w = &f.a.workers[lr];
        expect_env(w, "CUDA_VISIBLE_DEVICES", "0,1");
        expect_env(w, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        expect_envf(w, "LOCAL_RANK", lr);
        expect_env(w, "DDPLAUNCH_NUMA_NODE", "0");
        cr_expect_eq(w->gpu, lr);
        cr_expect_eq(w->numa_node, 0);
        cr_expect_not_null(w->cpus);
        expect_sane_env(w);
    }
    expect_env(&f.a.workers[0], "DDPLAUNCH_GPU_BUSID", "0000:18:00.0");
    expect_env(&f.a.workers[1], "DDPLAUNCH_GPU_BUSID", "0000:19:00.0");
    cr_expect_not_null(f.a.gpu_reason);
    teardown_fixture(&f);
}

Test(plan_gpu, per_rank_each_worker_sees_only_its_gpu)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n[gpus]\nvisible = per-rank\n");
    load_topo(&f, G4DN);
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    expect_env(&f.a.workers[0], "CUDA_VISIBLE_DEVICES", "0");
    expect_env(&f.a.workers[1], "CUDA_VISIBLE_DEVICES", "1");
    teardown_fixture(&f);
}

Test(plan_gpu, inherited_cuda_visible_devices_limits_the_choice)
{
    static char *env[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "CUDA_VISIBLE_DEVICES=5,6,7", NULL};
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    load_topo(&f, G4DN);
    f.ctx.job.base_env = env;
    f.ctx.gpus.inherited_cvd = "5,6,7";
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    for (int lr = 0; lr < 2; lr++) {
        const char *cvd = wenv(&f.a.workers[lr], "CUDA_VISIBLE_DEVICES");
        cr_assert_not_null(cvd);
        cr_expect(strcmp(cvd, "5,6") == 0 || strcmp(cvd, "6,7") == 0 || strcmp(cvd, "5,7") == 0,
                  "CUDA_VISIBLE_DEVICES=%s is not two of 5,6,7", cvd);
        expect_env(&f.a.workers[lr], "DDPLAUNCH_NUMA_NODE", "1");
        expect_sane_env(&f.a.workers[lr]);
    }
    teardown_fixture(&f);
}

Test(plan_gpu, cpu_workers_see_no_gpu)
{
    static char *env[] = {"PATH=/usr/bin:/bin", "HOME=/home/u", "CUDA_VISIBLE_DEVICES=0,1", NULL};
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n[gpus]\nselect = none\n");
    load_topo(&f, G4DN);
    f.ctx.job.base_env = env;
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    for (int lr = 0; lr < 2; lr++) {
        const struct ddp_worker *w = &f.a.workers[lr];
        expect_env(w, "CUDA_VISIBLE_DEVICES", ""); /* hidden, even though the launcher had some */
        expect_env(w, "CUDA_DEVICE_ORDER", NULL);
        expect_env(w, "DDPLAUNCH_GPU_BUSID", NULL);
        cr_expect_eq(w->gpu, -1);
        expect_sane_env(w);
    }
    teardown_fixture(&f);
    setup_spec(&f, "[job]\nscript = t.py\nnproc_per_node = cpu\n");
    load_topo(&f, G4DN);
    build(&f, 0, 2);
    expect_env(&f.a.workers[1], "CUDA_VISIBLE_DEVICES", "");
    teardown_fixture(&f);
}

Test(plan_gpu, excluded_gpus_are_left_out_of_a_downsized_attempt)
{
    struct fixture f;
    struct ddp_err err = {0};
    setup_spec(&f, "[job]\nscript = t.py\n");
    load_topo(&f, G4DN);
    f.ctx.nproc = 4;
    int exclude[] = {0, 1};
    cr_assert_eq(ddp_plan_build(&f.ctx, 1, 2, exclude, 2, &f.a, &err), 0, "%s", err.msg);
    for (int lr = 0; lr < 2; lr++) {
        cr_expect(f.a.workers[lr].gpu != 0 && f.a.workers[lr].gpu != 1, "rank %d got excluded GPU %d", lr,
                  f.a.workers[lr].gpu);
        expect_env(&f.a.workers[lr], "WORLD_SIZE", "2");
        expect_env(&f.a.workers[lr], "DDPLAUNCH_ORIG_WORLD_SIZE", "4");
    }
    teardown_fixture(&f);
}

Test(plan_gpu, too_many_gpus_is_an_error)
{
    struct fixture f;
    struct ddp_err err = {0};
    setup_spec(&f, "[job]\nscript = t.py\n");
    load_topo(&f, G4DN);
    cr_expect(ddp_plan_build(&f.ctx, 0, 9, NULL, 0, &f.a, &err) < 0);
    cr_expect_not_null(strstr(err.msg, "9"), "%s", err.msg);
    cr_expect_eq(f.a.nworkers, 0u);
    teardown_fixture(&f);
}

/* ---- printing ---- */

static char *print(struct fixture *f, bool json)
{
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    ddp_plan_print(m, &f->ctx, &f->a, json);
    fclose(m);
    return out;
}

Test(plan_print, text_and_json)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\nnproc_per_node = 2\n[env]\nQ = say \"hi\"\\ttab\n");
    f.ctx.nproc = 2;
    build(&f, 0, 2);
    char *text = print(&f, false);
    cr_expect_not_null(strstr(text, "nproc_per_node       = 2"), "%s", text);
    cr_expect_not_null(strstr(text, "(spec job.ini:3)"), "%s", text);
    cr_expect_not_null(strstr(text, "RANK=1\n"), "%s", text);
    cr_expect_not_null(strstr(text, "command: /usr/bin/python3 -u t.py"), "%s", text);
    cr_expect_null(strstr(text, "PATH=/usr/bin"), "inherited variables are not listed");
    free(text);
    char *json = print(&f, true);
    cr_expect_eq(json[0], '{');
    cr_expect_not_null(strstr(json, "\"RANK\": \"1\""), "%s", json);
    cr_expect_not_null(strstr(json, "\"LOCAL_RANK\": \"0\""), "%s", json);
    cr_expect_not_null(strstr(json, "\"MASTER_PORT\": \"29501\""), "%s", json);
    cr_expect_not_null(strstr(json, "\"Q\": \"say \\\"hi\\\"\\\\ttab\""), "%s", json);
    cr_expect_not_null(strstr(json, "\"job.nproc_per_node\": {\"value\": \"2\", \"origin\": \"spec\"}"), "%s", json);
    /* balanced braces and brackets outside strings */
    int depth = 0;
    bool in_str = false;
    for (const char *p = json; *p; p++) {
        if (in_str) {
            if (*p == '\\')
                p++;
            else if (*p == '"')
                in_str = false;
            continue;
        }
        if (*p == '"')
            in_str = true;
        else if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']')
            cr_assert(--depth >= 0);
    }
    cr_expect_eq(depth, 0);
    cr_expect(!in_str);
    free(json);
    teardown_fixture(&f);
}

/* ---- issue 16: console mode, tee/redirects precedence, virtual local rank, interpreter ---- */

Test(plan_console, raw_when_one_worker_reaches_the_console_and_tee_wins_over_redirects)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n");
    build(&f, 0, 1);
    cr_expect(f.a.workers[0].raw[0], "one worker: raw");
    cr_expect(f.a.workers[0].to_console[0] && f.a.workers[0].to_console[1]);
    ddp_attempt_free(&f.a);
    build(&f, 0, 2);
    cr_expect(!f.a.workers[0].raw[0] && !f.a.workers[1].raw[0], "two workers on the console: lines");
    teardown_fixture(&f);

    /* Megatron-LM's --tee 0:3 --redirects 3: rank 0 shown (tee wins), rank 1 only logged: raw */
    setup_spec(&f, "[job]\nscript = t.py\ntee = 0:3\nredirects = 3\nlog_dir = /l\n");
    build(&f, 0, 2);
    cr_expect(f.a.workers[0].to_console[0] && f.a.workers[0].to_console[1]);
    cr_expect(!f.a.workers[1].to_console[0] && !f.a.workers[1].to_console[1]);
    cr_expect(!f.a.workers[0].raw[0] && !f.a.workers[0].raw[1], "a --tee copy: lines, as torchrun");
    cr_expect_str_eq(f.a.workers[0].prefix[0], "[default0]:");
    cr_expect_str_eq(f.a.workers[0].prefix[1], "[default0]:");
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nscript = t.py\nredirects = 1\ntee = 0:2\n");
    build(&f, 0, 2);
    cr_expect(!f.a.workers[0].to_console[0] && f.a.workers[0].to_console[1], "stdout redirected, stderr shown");
    cr_expect(!f.a.workers[0].raw[1], "rank 0's stderr is a --tee copy: lines");
    cr_expect(!f.a.workers[1].raw[1], "both workers' stderr reaches the console: lines");
    cr_expect_str_eq(f.a.workers[0].prefix[1], "[default0]:");
    cr_expect_str_eq(f.a.workers[1].prefix[1], "[rank1]: ");
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nscript = t.py\nlocal_ranks_filter = 1\nconsole = lines\n");
    build(&f, 0, 3);
    cr_expect(!f.a.workers[1].raw[0], "console = lines: framed even for one worker");
    cr_expect(f.a.workers[1].to_console[0] && !f.a.workers[0].to_console[0]);
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nscript = t.py\nlog_line_prefix = ${rank}| \n");
    build(&f, 0, 1);
    cr_expect(!f.a.workers[0].raw[0], "a prefix asked for: lines even for one worker");
    teardown_fixture(&f);

    setup_spec(&f, "[job]\nscript = t.py\nconsole = raw\n");
    build(&f, 0, 4);
    cr_expect(f.a.workers[3].raw[0], "console = raw: raw for four");
    teardown_fixture(&f);
}

/* issue 23 items 3 and 4: torchrun's --tee prefix anywhere; prefixes by default only on a terminal */
Test(plan_console, tee_prefix_as_torchrun_and_plain_lines_off_a_terminal)
{
    struct fixture f;
    /* torchtitan's line: --local-ranks-filter 0 --role rank --tee 3 */
    setup_spec(&f, "[job]\nscript = t.py\nlocal_ranks_filter = 0\nrole = rank\ntee = 3\n");
    f.ctx.console_tty[0] = f.ctx.console_tty[1] = false;
    build(&f, 0, 4);
    cr_expect(f.a.workers[0].to_console[0] && !f.a.workers[1].to_console[0]);
    cr_expect(!f.a.workers[0].raw[0] && !f.a.workers[0].raw[1]);
    cr_expect_str_eq(f.a.workers[0].prefix[0], "[rank0]:");
    cr_expect_str_eq(f.a.workers[0].prefix[1], "[rank0]:");
    teardown_fixture(&f);

    /* > out.json with two workers: whole lines, no prefix */
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.console_tty[0] = f.ctx.console_tty[1] = false;
    build(&f, 0, 2);
    cr_expect(!f.a.workers[0].raw[0] && !f.a.workers[1].raw[1], "two workers: whole lines");
    cr_expect_str_eq(f.a.workers[0].prefix[0], "");
    cr_expect_str_eq(f.a.workers[1].prefix[1], "");
    teardown_fixture(&f);

    /* --console lines: prefixes anywhere; a prefix asked for is shown anywhere */
    setup_spec(&f, "[job]\nscript = t.py\nconsole = lines\n");
    f.ctx.console_tty[0] = f.ctx.console_tty[1] = false;
    build(&f, 0, 2);
    cr_expect_str_eq(f.a.workers[1].prefix[0], "[rank1]: ");
    teardown_fixture(&f);
    setup_spec(&f, "[job]\nscript = t.py\nlog_line_prefix = r${rank}|\n");
    f.ctx.console_tty[0] = f.ctx.console_tty[1] = false;
    build(&f, 0, 2);
    cr_expect_str_eq(f.a.workers[1].prefix[0], "r1|");
    teardown_fixture(&f);

    /* issue 23 item 5: a pseudo-terminal for a stream whose console is a terminal, a pipe otherwise */
    setup_spec(&f, "[job]\nscript = t.py\nredirects = 1:1\n");
    f.ctx.console_tty[1] = false;
    build(&f, 0, 2);
    cr_expect(f.a.workers[0].tty[0] && !f.a.workers[0].tty[1], "stdout on a terminal, stderr on a file");
    cr_expect(!f.a.workers[1].tty[0], "rank 1's stdout goes only to its log file");
    teardown_fixture(&f);
    setup_spec(&f, "[job]\nscript = t.py\n");
    f.ctx.console_tty[0] = f.ctx.console_tty[1] = false;
    build(&f, 0, 1);
    cr_expect(!f.a.workers[0].tty[0] && !f.a.workers[0].tty[1], "no terminal: pipes");
    teardown_fixture(&f);

    /* --console raw: even a --tee copy is raw */
    setup_spec(&f, "[job]\nscript = t.py\nconsole = raw\ntee = 3\n");
    build(&f, 0, 2);
    cr_expect(f.a.workers[0].raw[0] && f.a.workers[1].raw[1]);
    teardown_fixture(&f);
}

Test(plan_console, virtual_local_rank_gives_local_rank_zero)
{
    struct fixture f;
    setup_spec(&f, "[job]\nscript = t.py\n[gpus]\nvisible = virtual\n");
    build(&f, 0, 3);
    for (int i = 0; i < 3; i++) {
        expect_env(&f.a.workers[i], "LOCAL_RANK", "0");
        expect_envf(&f.a.workers[i], "RANK", i);
    }
    teardown_fixture(&f);
}

Test(plan_console, interpreter_choice)
{
    char *with[] = {"PYTHON_EXEC=/opt/py/bin/python3", NULL};
    char *empty[] = {"PYTHON_EXEC=", NULL};
    char *none[] = {NULL};
    const char *why = NULL;
    cr_expect_str_eq(ddp_plan_python(with, "/venv/bin/python3", "/t/python3", "/usr/bin/python3", &why),
                     "/opt/py/bin/python3");
    cr_expect_str_eq(why, "PYTHON_EXEC");
    cr_expect_str_eq(ddp_plan_python(empty, "/venv/bin/python3", "/t/python3", NULL, &why), "/venv/bin/python3");
    cr_expect_str_eq(why, "the Python environment ddplaunch is installed in");
    /* issue 23 item 7: the Python that torchrun runs with, before python3 from PATH */
    cr_expect_str_eq(ddp_plan_python(none, NULL, "/opt/conda/bin/python3.11", "/usr/bin/python3", &why),
                     "/opt/conda/bin/python3.11");
    cr_expect_str_eq(why, "the interpreter of torchrun on PATH, its #! line");
    cr_expect_str_eq(ddp_plan_python(none, NULL, NULL, "/usr/bin/python3", &why), "/usr/bin/python3");
    cr_expect_str_eq(why, "python3 from PATH");
    cr_expect_str_eq(ddp_plan_python(none, NULL, NULL, NULL, &why), "python3");
    cr_expect_str_eq(why, "python3 from PATH");
    cr_expect_str_eq(ddp_plan_python(none, "", "", "", NULL), "python3");
}

Test(plan_console, shebang_python)
{
    static const struct {
        const char *line, *want;
    } cases[] = {
        {"#!/usr/bin/python3.11\n", "/usr/bin/python3.11"},
        {"#! /opt/py/bin/python3 -u\n", "/opt/py/bin/python3"},
        {"#!/usr/bin/env python3\n", "python3"},
        {"#!/usr/bin/env -S python3 -u\n", "python3"},
        {"#!/bin/sh\n", NULL},
        {"#!/usr/bin/env\n", NULL},
        {"#!\n", NULL},
        {"import sys\n", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = ddp_plan_shebang_python(cases[i].line);
        if (cases[i].want)
            cr_expect_str_eq(got, cases[i].want, "'%s'", cases[i].line);
        else
            cr_expect_null(got, "'%s': %s", cases[i].line, got);
        free(got);
    }
}
