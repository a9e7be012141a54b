/* Unit tests for gpuset, the job's GPUs from attempt to attempt, on a real topology (AWS g4dn.metal: 8 T4): a GPU
 * left out for a fault stays out (said once), the restart check leaves out what the judge finds unfit and names
 * who holds a GPU now, and the next attempt is fitted to the GPUs left: downsized, or the job ends when none is
 * left, naming each faulty GPU. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "driver/gpuset.h"
#include "topo/topo.h"

struct fixture {
    struct ddp_spec spec;
    struct ddp_plan_ctx ctx;
    struct ddp_topo *topo;
    struct ddp_gpuset *g;
};

static void setup_fixture(struct fixture *f)
{
    struct ddp_err err = {0};
    const char *ini = "[job]\nscript = t.py\n";
    memset(f, 0, sizeof *f);
    ddp_spec_init(&f->spec);
    cr_assert_eq(ddp_spec_load_string(&f->spec, "job.ini", ini, strlen(ini), DDP_ORIGIN_SPEC, &err), 0, "%s", err.msg);
    const char *src = getenv("DDP_SRCDIR");
    cr_assert_not_null(src, "DDP_SRCDIR is not set (run through `make unit`)");
    char *path = ddp_xasprintf("%s/tests/fixtures/topo/2s-8gpu-aws-g4dn-metal-t4.xml", src);
    int rc = ddp_topo_load(path, &f->topo, &err);
    free(path);
    cr_assert_eq(rc, 0, "%s", err.msg);
    f->ctx.job.spec = &f->spec;
    f->ctx.job.topo = f->topo;
    f->ctx.nnodes = 1;
    f->ctx.nproc = 8;
    f->g = ddp_gpuset_new(&f->ctx.job, &f->ctx.gpus);
}

static void teardown_fixture(struct fixture *f)
{
    ddp_gpuset_free(f->g);
    ddp_topo_destroy(f->topo);
    ddp_spec_free(&f->spec);
}

Test(gpuset, a_faulty_gpu_stays_out_and_is_said_once)
{
    struct fixture f;
    setup_fixture(&f);
    char *text = ddp_gpuset_left_out(f.g, 3, "0000:5e:00.0", "Xid 79");
    cr_expect_str_eq(text, "GPU 3 (0000:5e:00.0) is left out of a restart: Xid 79");
    free(text);
    cr_expect_null(ddp_gpuset_left_out(f.g, 3, "0000:5e:00.0", "Xid 79"), "said twice");
    ddp_gpuset_exclude(f.g, 5); /* a stalled rank's: it may come back */
    size_t n, nf;
    const int *all = ddp_gpuset_excluded(f.g, false, &n);
    const int *faulted = ddp_gpuset_excluded(f.g, true, &nf);
    cr_expect_eq(n, 2u);
    cr_expect_eq(all[0], 3);
    cr_expect_eq(all[1], 5);
    cr_expect_eq(nf, 1u);
    cr_expect_eq(faulted[0], 3);
    teardown_fixture(&f);
}

/* A GPU fault often shows first as a hang: the stalled rank's GPU is left out (it may come back), then the restart
 * check finds the GPU faulty. It is left out for its fault all the same: said, kept out for good, and the next
 * attempt is fitted to the GPUs left (the GPU left out as a stall was not, and the fault went unsaid). */
Test(gpuset, a_stalled_ranks_gpu_found_faulty_is_left_out_for_its_fault)
{
    struct fixture f;
    setup_fixture(&f);
    ddp_gpuset_exclude(f.g, 2); /* the stalled rank's */
    char *text = ddp_gpuset_left_out(f.g, 2, "0000:5e:00.0", "Xid 79");
    cr_expect_not_null(text, "the fault was not said");
    free(text);
    size_t n, nf;
    const int *all = ddp_gpuset_excluded(f.g, false, &n);
    const int *faulted = ddp_gpuset_excluded(f.g, true, &nf);
    cr_expect_eq(n, 1u, "left out once");
    cr_expect_eq(all[0], 2);
    cr_expect_eq(nf, 1u, "not kept out for its fault");
    cr_expect_eq(nf ? faulted[0] : -1, 2);
    teardown_fixture(&f);
}

struct seen {
    int unfit[8], held[8];
    char why[8][384];
};
static void on_unfit(void *arg, int gpu, const char *busid, const char *why)
{
    struct seen *s = arg;
    (void)busid;
    s->unfit[gpu]++;
    snprintf(s->why[gpu], sizeof s->why[gpu], "%s", why);
}
static void on_held(void *arg, int gpu, const char *who)
{
    struct seen *s = arg;
    (void)who;
    s->held[gpu]++;
}

Test(gpuset, the_restart_check_judges_only_the_gpus_the_job_holds)
{
    struct fixture f;
    setup_fixture(&f);
    struct ddp_worker w[2] = {{.gpu = 0}, {.gpu = 1}};
    struct ddp_attempt a = {.workers = w, .nworkers = 2};
    ddp_gpuset_ran(f.g, &a);
    cr_expect(ddp_gpuset_holds(f.g, 1));
    cr_expect_not(ddp_gpuset_holds(f.g, 2));
    struct ddp_nvml_gpu gpus[3] = {0};
    for (int i = 0; i < 3; i++) {
        snprintf(gpus[i].busid, sizeof gpus[i].busid, "%s", ddp_topo_gpu_busid(f.topo, (size_t)i));
        gpus[i].mem_total = 16LL << 30;
        gpus[i].mem_used = 10LL << 30;
        memset(&gpus[i].health, 0xff, sizeof gpus[i].health);
        gpus[i].nprocs = 1;
        gpus[i].procs[0] = (struct ddp_nvml_proc){.pid = 4242, .mem_used = 10LL << 30};
    }
    gpus[1].health.remap_failure = 1;
    struct ddp_nvml nv = {.found = true, .gpus = gpus, .ngpus = 3};
    struct seen s = {0};
    ddp_gpuset_recheck(f.g, &nv, on_held, on_unfit, &s);
    cr_expect_eq(s.unfit[0], 1, "a holder the launch did not see");
    cr_expect(strstr(s.why[0], "which was not there at launch"), "%s", s.why[0]);
    cr_expect_eq(s.unfit[1], 1, "a row remapping failure");
    cr_expect_str_eq(s.why[1], "a row remapping failed (retire the GPU)");
    cr_expect_eq(s.unfit[2], 0, "not the job's GPU");
    cr_expect_eq(s.held[0] + s.held[1], 2);
    cr_expect_eq(s.held[2], 0);
    teardown_fixture(&f);
}

Test(gpuset, the_next_attempt_fits_the_gpus_left)
{
    struct fixture f;
    setup_fixture(&f);
    char why[512] = "";
    cr_expect_eq(ddp_gpuset_fit(f.g, &f.ctx.gpus, 8, why, sizeof why), 8, "nothing left out");
    free(ddp_gpuset_left_out(f.g, 2, "0000:1a:00.0", "Xid 79"));
    cr_expect_eq(ddp_gpuset_fit(f.g, &f.ctx.gpus, 8, why, sizeof why), 7, "one GPU fewer: the policy downsizes");
    cr_expect_eq(ddp_gpuset_fit(f.g, &f.ctx.gpus, 7, why, sizeof why), 7, "asked again: no news");
    for (int i = 0; i < 8; i++)
        free(ddp_gpuset_left_out(f.g, i, "x", "lost"));
    cr_expect_eq(ddp_gpuset_fit(f.g, &f.ctx.gpus, 7, why, sizeof why), 0);
    cr_expect(strncmp(why, "no usable GPU left: GPU 2 (0000:1a:00.0): Xid 79; GPU 0 (x): lost", 64) == 0, "%s", why);
    teardown_fixture(&f);
}
