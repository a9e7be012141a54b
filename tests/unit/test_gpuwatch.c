/* Unit tests for gpuwatch.c's pure parts: the words of an event and the rate limit per (GPU, type, data). */
#include <criterion/criterion.h>

#include "topo/nvml.h"
#include "watch/gpuwatch.h"

/* issue 39 item 3: an Xid storm is the first event, then one count a minute per (GPU, type, data) */
Test(gpuwatch, limit_first_then_a_count_a_minute)
{
    static struct ddp_gpuwatch_limit l;
    unsigned long long rep = 99, type, data;
    int gpu;
    cr_expect(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 13, 1000, &rep));
    cr_expect_eq(rep, 0);
    int passed = 0;
    for (int i = 0; i < 100000; i++)
        passed += ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 13, 1000 + i / 10, &rep);
    cr_expect_eq(passed, 0, "a storm within the minute is counted, not handed on");
    /* another Xid, another GPU: their own first line */
    cr_expect(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 79, 2000, &rep));
    cr_expect(ddp_gpuwatch_limit_event(&l, 1, DDP_NVML_EV_XID, 13, 2000, &rep));
    cr_expect_not(ddp_gpuwatch_limit_due(&l, 60999, &gpu, &type, &data, &rep), "not due before the minute");
    cr_expect(ddp_gpuwatch_limit_due(&l, 61000, &gpu, &type, &data, &rep));
    cr_expect_eq(gpu, 0);
    cr_expect_eq(data, 13);
    cr_expect_eq(rep, 100000);
    cr_expect_not(ddp_gpuwatch_limit_due(&l, 61000, &gpu, &type, &data, &rep), "the count starts again");
    /* the same again a minute after the count: handed on with what was counted since (none) */
    cr_expect(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 13, 121000, &rep));
    cr_expect_eq(rep, 0);
    cr_expect_not(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 13, 121001, &rep));
    cr_expect(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 13, 181001, &rep));
    cr_expect_eq(rep, 1);
}

Test(gpuwatch, limit_table_full_counts_the_rest)
{
    static struct ddp_gpuwatch_limit l;
    unsigned long long rep;
    for (int i = 0; i < DDP_GPUWATCH_KEYS; i++)
        cr_expect(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, (unsigned long long)i, 0, &rep));
    cr_expect_not(ddp_gpuwatch_limit_event(&l, 0, DDP_NVML_EV_XID, 999, 0, &rep));
    cr_expect_eq(l.overflow, 1);
}
