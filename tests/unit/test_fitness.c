/* Unit tests for fitness, the one judge of a GPU: each verdict from the facts its callers bring (NVML's memory,
 * processes and health, /proc's "nobody", the holder seen at launch, another job's lease), and the order of the
 * reasons when several hold. */
#include <criterion/criterion.h>
#include <string.h>

#include "spec/spec.h"
#include "topo/fitness.h"

#define GIB (1LL << 30)

static struct ddp_nvml_gpu gpus[2];
static struct ddp_nvml nv = {.found = true, .gpus = gpus, .ngpus = 2};

static void setup(void)
{
    memset(gpus, 0, sizeof gpus);
    for (int i = 0; i < 2; i++) {
        snprintf(gpus[i].busid, sizeof gpus[i].busid, "0000:00:0%d.0", 6 + i);
        gpus[i].mem_total = 140 * GIB;
        gpus[i].mem_used = GIB / 2;
        memset(&gpus[i].health, 0xff, sizeof gpus[i].health); /* not read: unknown */
    }
    gpus[0].nprocs = 2;
    gpus[0].procs[0] = (struct ddp_nvml_proc){.pid = 836, .mem_used = 139 * GIB};
    snprintf(gpus[0].procs[0].user, sizeof gpus[0].procs[0].user, "root");
    snprintf(gpus[0].procs[0].comm, sizeof gpus[0].procs[0].comm, "python3");
    gpus[0].procs[1] = (struct ddp_nvml_proc){.pid = 900, .mem_used = GIB / 4};
}

static struct ddp_fitness_verdict judge(struct ddp_fitness_in in)
{
    struct ddp_fitness_verdict v;
    if (!in.threshold)
        in.threshold = DDP_GPU_BUSY_THRESHOLD;
    ddp_fitness_judge(&in, &v);
    return v;
}

TestSuite(fitness, .init = setup);

Test(fitness, at_launch_a_large_holder_makes_the_gpu_held)
{
    struct ddp_fitness_verdict v = judge((struct ddp_fitness_in){.busid = "0000:00:06.0", .nv = &nv});
    cr_expect_eq(v.fit, DDP_FIT_HELD);
    cr_expect_eq(v.holder->pid, 836u);
    cr_expect_eq(v.held_bytes, 139 * GIB);
    cr_expect_str_eq(v.why, "held by pid 836 (root, python3, 139.0 GiB)");
    cr_expect_not(ddp_fitness_usable(&v));
    /* a bare context under the threshold is not a holder, but its bytes still count for busy = skip */
    gpus[0].procs[0].mem_used = GIB / 2;
    v = judge((struct ddp_fitness_in){.busid = "0000:00:06.0", .nv = &nv});
    cr_expect_eq(v.fit, DDP_FIT_OK);
    cr_expect_null(v.holder);
    cr_expect_eq(v.held_bytes, GIB / 2);
}

Test(fitness, nothing_known_is_unknown_and_proc_nobody_is_ok)
{
    struct ddp_fitness_verdict v = judge((struct ddp_fitness_in){.busid = "0000:00:06.0"});
    cr_expect_eq(v.fit, DDP_FIT_UNKNOWN);
    cr_expect_eq(v.held_bytes, -1);
    cr_expect(ddp_fitness_usable(&v));
    gpus[1].mem_used = -1; /* NVML's static facts only (the cache): memory not read */
    v = judge((struct ddp_fitness_in){.busid = "0000:00:07.0", .nv = &nv});
    cr_expect_eq(v.fit, DDP_FIT_UNKNOWN);
    v = judge((struct ddp_fitness_in){.busid = "0000:00:07.0", .nv = &nv, .unheld = true});
    cr_expect_eq(v.fit, DDP_FIT_OK);
    cr_expect_eq(v.held_bytes, 0);
    /* at launch a GPU NVML does not list (another vendor's) is not lost */
    v = judge((struct ddp_fitness_in){.busid = "0000:00:09.0", .nv = &nv});
    cr_expect_eq(v.fit, DDP_FIT_UNKNOWN);
}

Test(fitness, before_a_restart_only_a_new_holder_counts)
{
    struct ddp_fitness_verdict v = judge((struct ddp_fitness_in){
        .busid = "0000:00:06.0", .nv = &nv, .restart = true, .held_at_launch = "pid 836 (root, python3, 139.0 GiB)"});
    cr_expect(ddp_fitness_usable(&v), "a holder the launch saw is no reason: %s", v.why);
    cr_expect_eq(v.holder->pid, 836u, "the holder is still named for the records");
    v = judge((struct ddp_fitness_in){.busid = "0000:00:06.0", .nv = &nv, .restart = true});
    cr_expect_eq(v.fit, DDP_FIT_HELD);
    cr_expect_str_eq(v.why, "now held by pid 836 (root, python3, 139.0 GiB), which was not there at launch");
}

Test(fitness, lost_then_fault_then_lease_then_holder)
{
    struct ddp_fitness_verdict v = judge((struct ddp_fitness_in){.busid = "0000:00:08.0", .nv = &nv, .restart = true});
    cr_expect_eq(v.fit, DDP_FIT_LOST, "no longer listed before a restart");
    cr_expect_str_eq(v.why, "NVML no longer lists it (lost: fallen off the bus or reset)");
    gpus[0].health.remap_failure = 1;
    v = judge((struct ddp_fitness_in){.busid = "0000:00:06.0", .nv = &nv, .leased_by = "job x (pid 5)"});
    cr_expect_eq(v.fit, DDP_FIT_FAULT, "a fault comes before the lease and the holder");
    cr_expect_str_eq(v.why, "a row remapping failed (retire the GPU)");
    gpus[0].lost = true;
    v = judge((struct ddp_fitness_in){.busid = "0000:00:06.0", .nv = &nv});
    cr_expect_eq(v.fit, DDP_FIT_LOST);
    v = judge((struct ddp_fitness_in){.busid = "0000:00:07.0", .nv = &nv, .leased_by = "job x (pid 5)"});
    cr_expect_eq(v.fit, DDP_FIT_LEASED);
    cr_expect_str_eq(v.why, "leased by job x (pid 5)");
    gpus[1].health.recovery = DDP_NVML_RECOVERY_GPU_RESET;
    v = judge((struct ddp_fitness_in){.busid = "0000:00:07.0", .nv = &nv, .restart = true});
    cr_expect_eq(v.fit, DDP_FIT_FAULT);
    cr_expect_str_eq(v.why, "NVML's recovery action: GPU reset");
}

/* What each caller does with a verdict (issue 53 item 1, issue 52 item 14): the pick leaves out every unusable
 * verdict but a holder, which only busy = skip leaves out; a launch refuses every unusable verdict but a holder,
 * which only busy = fail refuses: a lost GPU is never started on, whatever busy says. */
Test(fitness, every_caller_acts_on_every_verdict)
{
    static const enum ddp_gpu_busy busy[] = {DDP_BUSY_WARN, DDP_BUSY_SKIP, DDP_BUSY_FAIL};
    gpus[1].lost = true;
    struct ddp_fitness_verdict held = judge((struct ddp_fitness_in){.busid = "0000:00:06.0", .nv = &nv});
    struct ddp_fitness_verdict lost = judge((struct ddp_fitness_in){.busid = "0000:00:07.0", .nv = &nv});
    struct ddp_fitness_verdict leased =
        judge((struct ddp_fitness_in){.busid = "0000:00:09.0", .nv = &nv, .leased_by = "job x (pid 5)"});
    struct ddp_fitness_verdict ok = judge((struct ddp_fitness_in){.busid = "0000:00:09.0", .nv = &nv});
    cr_assert_eq(held.fit, DDP_FIT_HELD);
    cr_assert_eq(lost.fit, DDP_FIT_LOST);
    cr_assert_eq(leased.fit, DDP_FIT_LEASED);
    for (size_t i = 0; i < 3; i++) {
        cr_expect(ddp_fitness_leaves_out(&lost, busy[i]) && ddp_fitness_refuses(&lost, busy[i]));
        cr_expect(ddp_fitness_leaves_out(&leased, busy[i]) && ddp_fitness_refuses(&leased, busy[i]));
        cr_expect_eq(ddp_fitness_leaves_out(&held, busy[i]), busy[i] == DDP_BUSY_SKIP);
        cr_expect_eq(ddp_fitness_refuses(&held, busy[i]), busy[i] == DDP_BUSY_FAIL);
        cr_expect_not(ddp_fitness_leaves_out(&ok, busy[i]) || ddp_fitness_refuses(&ok, busy[i]));
    }
    /* a GPU given directly (select.c's and doctor's way) is judged as one looked up */
    struct ddp_fitness_verdict direct = judge((struct ddp_fitness_in){.busid = "x", .gpu = &gpus[1]});
    cr_expect_eq(direct.fit, DDP_FIT_LOST);
}

/* NVML's events: a double-bit ECC error and an Xid the catalog calls the GPU's own failure are faults; an
 * application's Xid and a clock event are not. */
Test(fitness, events_judged_by_the_judge)
{
    struct ddp_fitness_verdict v;
    ddp_fitness_judge_event(DDP_NVML_EV_XID, 79, "Xid 79: fallen off the bus", &v);
    cr_expect_eq(v.fit, DDP_FIT_FAULT);
    cr_expect_str_eq(v.why, "Xid 79: fallen off the bus");
    ddp_fitness_judge_event(DDP_NVML_EV_ECC_DBE, 0, "ecc", &v);
    cr_expect_eq(v.fit, DDP_FIT_FAULT);
    ddp_fitness_judge_event(DDP_NVML_EV_XID, 13, "Xid 13", &v);
    cr_expect(ddp_fitness_usable(&v));
    ddp_fitness_judge_event(DDP_NVML_EV_CLOCK, DDP_NVML_CLOCKS_HW_SLOWDOWN, "clocks", &v);
    cr_expect(ddp_fitness_usable(&v));
}

/* doctor's gpu-busy: how loaded a GPU is by NVML's totals, whoever loads it (one rule, the judge's) */
Test(fitness, load_by_totals_idle_shared_full)
{
    cr_expect_eq(ddp_fitness_load(GIB / 2, 80 * GIB, 0), DDP_FIT_LOAD_IDLE);
    cr_expect_eq(ddp_fitness_load(-1, -1, -1), DDP_FIT_LOAD_IDLE, "nothing known: not counted");
    cr_expect_eq(ddp_fitness_load(DDP_GPU_BUSY_THRESHOLD, 80 * GIB, 0), DDP_FIT_LOAD_SHARED, "the busy threshold");
    cr_expect_eq(ddp_fitness_load(GIB / 2, 4 * GIB, 0), DDP_FIT_LOAD_SHARED, "12.5% of a small GPU");
    cr_expect_eq(ddp_fitness_load(0, 80 * GIB, 10), DDP_FIT_LOAD_SHARED, "10% utilisation");
    cr_expect_eq(ddp_fitness_load(64 * GIB, 80 * GIB, 0), DDP_FIT_LOAD_FULL, "80% of its memory");
    cr_expect_eq(ddp_fitness_load(64 * GIB, 80 * GIB - 1, -1), DDP_FIT_LOAD_FULL);
}
