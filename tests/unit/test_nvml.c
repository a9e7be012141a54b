/* Unit tests for nvml's pure judgements and doctor's gpu-health check (check_gpu.h): who counts as a foreign
 * holder, how one is described, which health facts are a fault, the Xid table, the clock-event words, and
 * gpus.h's restart judgement. The NVML calls themselves are driven by the fake NVML in
 * tests/integration/82-gpu-health.sh. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_expect.h"
#include "doctor/check_gpu.h"
#include "driver/gpus.h"
#include "topo/fitness.h"
#include "topo/nvml.h"

static struct ddp_nvml_health healthy(void)
{
    struct ddp_nvml_health h;
    memset(&h, 0xff, sizeof h);
    h.persistence = 1, h.mig = 0, h.ecc = h.ecc_pending = 1;
    h.ecc_corrected = h.ecc_uncorrected = h.ecc_uncorrected_aggr = 0;
    h.remap_corr = h.remap_unc = h.remap_pending = h.remap_failure = 0;
    h.clocks_event = DDP_NVML_CLOCKS_IDLE;
    return h;
}

Test(nvml, foreign_is_the_largest_process_over_the_threshold_not_ours)
{
    struct ddp_nvml_gpu g = {.nprocs = 3};
    g.procs[0] = (struct ddp_nvml_proc){.pid = 10, .mem_used = 500LL << 20};
    g.procs[1] = (struct ddp_nvml_proc){.pid = 11, .mem_used = 30LL << 30};
    g.procs[2] = (struct ddp_nvml_proc){.pid = 12, .mem_used = 2LL << 30};
    cr_expect_eq(ddp_nvml_foreign(&g, 1LL << 30, NULL, 0)->pid, 11);
    int ours[] = {11};
    cr_expect_eq(ddp_nvml_foreign(&g, 1LL << 30, ours, 1)->pid, 12);
    int all[] = {11, 12};
    cr_expect_null(ddp_nvml_foreign(&g, 1LL << 30, all, 2), "a bare context (500 MiB) is not a holder");
    cr_expect_null(ddp_nvml_foreign(NULL, 0, NULL, 0));
}

Test(nvml, holder_described_with_user_and_command_or_its_namespace)
{
    char buf[160];
    struct ddp_nvml_proc p = {.pid = 11661, .mem_used = (long long)(139.5 * 1073741824.0)};
    snprintf(p.user, sizeof p.user, "alice");
    snprintf(p.comm, sizeof p.comm, "python3");
    cr_expect_str_eq(ddp_nvml_proc_describe(&p, buf, sizeof buf), "pid 11661 (alice, python3, 139.5 GiB)");
    p.user[0] = p.comm[0] = '\0';
    cr_expect_str_eq(ddp_nvml_proc_describe(&p, buf, sizeof buf),
                     "pid 11661 (not visible here: another pid namespace, 139.5 GiB)");
}

Test(nvml, health_faults_and_unknowns)
{
    char buf[256];
    struct ddp_nvml_health h = healthy();
    cr_expect_str_eq(ddp_nvml_health_fault(&h, buf, sizeof buf), "");
    memset(&h, 0xff, sizeof h); /* nothing known (an old NVML, NOT_SUPPORTED everywhere): no fault */
    cr_expect_str_eq(ddp_nvml_health_fault(&h, buf, sizeof buf), "");
    /* issue 39 item 7: the GPU's own verdict: a reset or a drain NVML asks for makes it unfit */
    h = healthy();
    h.recovery = DDP_NVML_RECOVERY_DRAIN_AND_RESET;
    cr_expect_str_eq(ddp_nvml_health_fault(&h, buf, sizeof buf), "NVML's recovery action: drain and reset");
    h.recovery = DDP_NVML_RECOVERY_NONE;
    cr_expect_str_eq(ddp_nvml_health_fault(&h, buf, sizeof buf), "");
    h = healthy();
    h.remap_failure = 1;
    h.ecc_uncorrected = 3;
    ddp_nvml_health_fault(&h, buf, sizeof buf);
    cr_expect(strstr(buf, "a row remapping failed (retire the GPU)"), "%s", buf);
    cr_expect(strstr(buf, "3 uncorrectable ECC errors since the driver loaded"), "%s", buf);
    h = healthy();
    h.remap_pending = 1;
    cr_expect_str_eq(ddp_nvml_health_fault(&h, buf, sizeof buf), "a row remapping waits for a GPU reset");
}

Test(nvml, xid_table)
{
    bool fault = false;
    cr_expect(strstr(ddp_nvml_xid_meaning(79, &fault), "GPU has fallen off the bus"));
    cr_expect(fault);
    cr_expect(strstr(ddp_nvml_xid_meaning(48, &fault), "Double Bit ECC Error"));
    cr_expect(fault);
    cr_expect(strstr(ddp_nvml_xid_meaning(13, &fault), "Graphics Engine Exception"));
    cr_expect_not(fault, "Xid 13 is the application's");
    cr_expect_null(ddp_nvml_xid_meaning(100000, &fault));
    cr_expect_not(fault);
}

Test(nvml, clock_reasons_in_words)
{
    char buf[160];
    cr_expect_str_eq(ddp_nvml_clocks_describe(0x48, buf, sizeof buf), "HW slowdown, HW thermal slowdown");
    cr_expect_str_eq(ddp_nvml_clocks_describe(0x1, buf, sizeof buf), "");
    cr_expect_str_eq(ddp_nvml_clocks_describe(-1, buf, sizeof buf), "");
}

/* The judge's restart verdict, as gpuset's check before a restart asks it: true with why when unfit. */
static bool unfit(const struct ddp_nvml *nv, const char *busid, const char *held_at_launch, char *why, size_t size)
{
    struct ddp_fitness_verdict v;
    ddp_fitness_judge_restart(nv, busid, held_at_launch, &v);
    snprintf(why, size, "%s", v.why);
    return !ddp_fitness_usable(&v);
}

Test(gpus, unfit_before_a_restart)
{
    struct ddp_nvml_gpu g = {.busid = "0000:00:07.0", .health = healthy(), .mem_used = 0, .mem_total = 1LL << 37};
    struct ddp_nvml nv = {.found = true, .gpus = &g, .ngpus = 1};
    char why[512];
    cr_expect_not(unfit(&nv, "0000:00:07.0", NULL, why, sizeof why));
    /* issue 39 item 4: a GPU NVML no longer lists (it fell off the bus) or reports lost is unfit */
    cr_expect(unfit(&nv, "0000:00:08.0", NULL, why, sizeof why), "not listed any more: unfit");
    cr_expect(strstr(why, "no longer lists"), "%s", why);
    struct ddp_nvml none = {.found = false};
    cr_expect_not(unfit(&none, "0000:00:08.0", NULL, why, sizeof why), "no NVML: nothing known");
    g.lost = true;
    cr_expect(unfit(&nv, "0000:00:07.0", NULL, why, sizeof why));
    cr_expect(strstr(why, "lost"), "%s", why);
    g.lost = false;
    g.nprocs = 1;
    g.procs[0] = (struct ddp_nvml_proc){.pid = 7, .mem_used = 20LL << 30, .user = "bob", .comm = "python3"};
    cr_expect(unfit(&nv, "0000:00:07.0", NULL, why, sizeof why));
    cr_expect_str_eq(why, "now held by pid 7 (bob, python3, 20.0 GiB), which was not there at launch");
    cr_expect_not(unfit(&nv, "0000:00:07.0", "pid 7 (bob, python3, 20.0 GiB)", why, sizeof why),
                  "a holder the launch saw (busy = warn) is no reason to leave the GPU out now");
    g.health.remap_failure = 1;
    cr_expect(unfit(&nv, "0000:00:07.0", "x", why, sizeof why));
    cr_expect(strstr(why, "row remapping failed"));
}

Test(check_gpu, healthy_h200_is_ok_and_unknowns_are_not_failures)
{
    struct ddp_check_gpu all[2] = {{.busid = "0000:00:06.0", .have_health = true, .health = healthy()},
                                   {.busid = "0000:00:07.0", .have_health = true, .health = healthy()}};
    int picked[] = {0, 1};
    struct ddp_check_gpus g = {.have_topo = true, .all = all, .nall = 2, .picked = picked, .npicked = 2, .nvml = true};
    struct ddp_check_report r = {0};
    ddp_check_gpu_health(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_OK, "2 GPUs: ECC on 2 of 2, no uncorrectable errors");
    ddp_check_report_free(&r);
    /* as on the H200: retired pages NOT_SUPPORTED (-1), NVLink none; an older NVML without remapped rows */
    all[0].health.retired_pending = -1;
    all[1].health.remap_failure = all[1].health.remap_pending = -1;
    ddp_check_gpu_health(&r, &g);
    cr_expect_eq(r.v[0].status, DDP_CHECK_OK, "%s", r.v[0].found);
    ddp_check_report_free(&r);
    all[1].health = healthy();
    all[1].health.clocks_event = DDP_NVML_CLOCKS_HW_POWER_BRAKE;
    all[0].health.mig = 1;
    ddp_check_gpu_health(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_WARN, "0000:00:07.0: clocks slowed down now (HW power brake)");
    expect_result(&r.v[0], DDP_CHECK_WARN, "0000:00:06.0: MIG on");
    ddp_check_report_free(&r);
    all[1].health.ecc_uncorrected = 1;
    ddp_check_gpu_health(&r, &g);
    expect_result(&r.v[0], DDP_CHECK_FAIL, "1 uncorrectable ECC error since the driver loaded");
    ddp_check_report_free(&r);
    g.nvml = false;
    g.nvml_status = "NVML: not found";
    ddp_check_gpu_health(&r, &g);
    cr_expect_eq(r.v[0].status, DDP_CHECK_SKIP);
    ddp_check_report_free(&r);
}

/* The busy check against an NVML read of its own (ddp_gpus_check_with: the check beside the spawn): the same
 * warning as at launch; when NVML did not answer in time, one line saying the GPUs were not checked, and
 * busy = fail refuses. */
Test(nvml, check_with_a_late_nvml_says_so_and_fail_refuses)
{
    const char *src = getenv("DDP_SRCDIR");
    cr_assert(src, "DDP_SRCDIR is not set (run through `make unit`)");
    char *path = ddp_xasprintf("%s/tests/fixtures/topo/2s-8gpu-aws-g4dn-metal-t4.xml", src);
    struct ddp_topo *topo = NULL;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_topo_load(path, &topo, &err), 0, "%s", err.msg);
    free(path);
    struct ddp_worker w = {.gpu = 0};
    struct ddp_attempt a = {.workers = &w, .nworkers = 1};
    struct ddp_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.gpus_busy = DDP_BUSY_WARN;

    struct ddp_nvml late = {.late = true};
    snprintf(late.status, sizeof late.status, "NVML: did not answer in 5 s");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct ddp_gpus_found found;
    cr_expect_eq(ddp_gpus_check_with(topo, &late, &spec, &a, f, false, &found, &err), 0);
    fclose(f);
    cr_expect_str_eq(text, "ddplaunch: warning: NVML: did not answer in 5 s: the job's GPUs were not checked for "
                           "other processes\n");
    free(text);
    ddp_gpus_held_free(found.held, ddp_topo_ngpus(topo));
    ddp_gpus_held_free(found.unfit, ddp_topo_ngpus(topo));
    spec.gpus_busy = DDP_BUSY_FAIL;
    cr_expect_eq(ddp_gpus_check_with(topo, &late, &spec, &a, NULL, false, NULL, &err), -EBUSY);
    cr_expect(strstr(err.msg, "did not answer in 5 s") && strstr(err.msg, "busy = fail, so nothing was started"), "%s",
              err.msg);

    /* an answer naming a holder: the launch's warning, word for word */
    struct ddp_nvml_gpu g = {.mem_used = 139LL << 30, .mem_total = 140LL << 30, .nprocs = 1};
    snprintf(g.busid, sizeof g.busid, "%s", ddp_topo_gpu_busid(topo, 0));
    g.procs[0] = (struct ddp_nvml_proc){.pid = 4242, .mem_used = 139LL << 30};
    struct ddp_nvml nv = {.found = true, .gpus = &g, .ngpus = 1};
    spec.gpus_busy = DDP_BUSY_WARN;
    f = open_memstream(&text, &len);
    cr_expect_eq(ddp_gpus_check_with(topo, &nv, &spec, &a, f, false, &found, &err), 0);
    fclose(f);
    cr_expect(strstr(text, "ddplaunch: warning: GPU 0 (") && strstr(text, ") is held by pid 4242 (") &&
                  strstr(text, "139.0 of 140.0 GiB in use, the job may run out of memory ([gpus] busy = skip "
                               "chooses other GPUs, fail refuses)\n"),
              "%s", text);
    cr_expect(found.held && found.held[0] && strstr(found.held[0], "pid 4242"));
    free(text);
    ddp_gpus_held_free(found.held, ddp_topo_ngpus(topo));
    ddp_gpus_held_free(found.unfit, ddp_topo_ngpus(topo));

    /* issue 52 item 14: a GPU NVML lost is never started on, whatever busy says; once started (the check beside
     * the spawn) it is warned of and handed on as unfit (a restart leaves it out) */
    g.nprocs = 0;
    g.lost = true;
    cr_expect_eq(ddp_gpus_check_with(topo, &nv, &spec, &a, NULL, false, &found, &err), -EBUSY);
    cr_expect(strstr(err.msg, "is unfit: NVML says the GPU is lost") && strstr(err.msg, "nothing was started"), "%s",
              err.msg);
    f = open_memstream(&text, &len);
    cr_expect_eq(ddp_gpus_check_with(topo, &nv, &spec, &a, f, true, &found, &err), 0);
    fclose(f);
    cr_expect(strstr(text, ") is unfit: NVML says the GPU is lost (GPU_IS_LOST: fallen off the bus); a restart "
                           "leaves it out\n"),
              "%s", text);
    cr_expect(found.unfit && found.unfit[0] && !found.held[0]);
    free(text);
    ddp_gpus_held_free(found.held, ddp_topo_ngpus(topo));
    ddp_gpus_held_free(found.unfit, ddp_topo_ngpus(topo));
    ddp_topo_destroy(topo);
}
