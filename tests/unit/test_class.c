/* Unit tests for class: which classes are timeouts, their stable names and hints, which class explains an
 * attempt when several were seen, and hints made specific with facts. */
#include <criterion/criterion.h>
#include <string.h>

#include "records/class.h"

Test(class, timeouts_and_names)
{
    cr_expect(ddp_class_is_timeout(DDP_CLASS_NCCL_TIMEOUT));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_HANG));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_INIT_TIMEOUT));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_WALL_TIMEOUT));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_RENDEZVOUS_TIMEOUT));
    cr_expect_not(ddp_class_is_timeout(DDP_CLASS_NCCL_ERROR));
    cr_expect_not(ddp_class_is_timeout(DDP_CLASS_CUDA_OOM));
    cr_expect_not(ddp_class_is_timeout(DDP_CLASS_EXIT));
    cr_expect_str_eq(ddp_class_name(DDP_CLASS_NCCL_TIMEOUT), "collective-timeout");
    cr_expect_str_eq(ddp_class_name(DDP_CLASS_PORT_IN_USE), "port-in-use");
    cr_expect_str_eq(ddp_class_name(DDP_CLASS_CUDA_OOM), "cuda-oom");
    cr_expect_str_eq(ddp_class_name((enum ddp_class)999), "unknown");
    /* Every class but NONE has a name and a hint, and names are unique. */
    for (int a = 1; a < DDP_CLASS__COUNT; a++) {
        cr_expect(strlen(ddp_class_hint((enum ddp_class)a)) > 10, "class %d has no hint", a);
        for (int b = a + 1; b < DDP_CLASS__COUNT; b++)
            cr_expect_str_neq(ddp_class_name((enum ddp_class)a), ddp_class_name((enum ddp_class)b));
    }
}

Test(class, merge_prefers_root_cause)
{
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NCCL_ERROR, DDP_CLASS_NCCL_TIMEOUT), DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NCCL_TIMEOUT, DDP_CLASS_NCCL_ERROR), DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NCCL_TIMEOUT, DDP_CLASS_CUDA_OOM), DDP_CLASS_CUDA_OOM);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_RENDEZVOUS_TIMEOUT, DDP_CLASS_PORT_IN_USE), DDP_CLASS_PORT_IN_USE);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_ABORT, DDP_CLASS_NCCL_TIMEOUT), DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NONE, DDP_CLASS_EXIT), DDP_CLASS_EXIT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_EXIT, DDP_CLASS_NONE), DDP_CLASS_EXIT);
}

Test(class, hint_names_the_numa_split)
{
    int idx[] = {0, 1, 4, 5};
    int numa[] = {0, 0, 1, 1};
    struct ddp_class_facts f = {.ngpus = 4, .gpu_index = idx, .gpu_numa = numa, .stalled_rank = -1};
    char buf[512];
    const char *h = ddp_class_hint_facts(DDP_CLASS_NCCL_TIMEOUT, &f, buf, sizeof(buf));
    cr_expect(strstr(h, "GPUs 0 and 4 are on different NUMA nodes (0 and 1)") != NULL, "%s", h);
    cr_expect(strstr(h, "set [gpus] policy = same-numa") != NULL, "%s", h);
    cr_expect(strstr(h, "preset = debug") != NULL, "%s", h);

    f.nccl_debug = "INFO";
    f.stalled_rank = 2;
    h = ddp_class_hint_facts(DDP_CLASS_NCCL_TIMEOUT, &f, buf, sizeof(buf));
    cr_expect(strncmp(h, "rank 2 stopped first; ", 22) == 0, "%s", h);
    cr_expect(strstr(h, "preset = debug") == NULL, "%s", h);

    int same[] = {1, 1, 1, 1};
    f.gpu_numa = same;
    h = ddp_class_hint_facts(DDP_CLASS_NCCL_TIMEOUT, &f, buf, sizeof(buf));
    cr_expect(strstr(h, "NUMA nodes (") == NULL, "%s", h);
    cr_expect(strstr(h, "collective timed out") != NULL, "%s", h);

    struct ddp_class_facts p = {.port = 29500, .stalled_rank = -1};
    h = ddp_class_hint_facts(DDP_CLASS_PORT_IN_USE, &p, buf, sizeof(buf));
    cr_expect(strstr(h, "port 29500 is already in use") != NULL, "%s", h);

    /* Truncation is safe. */
    char tiny[8];
    h = ddp_class_hint_facts(DDP_CLASS_PORT_IN_USE, &p, tiny, sizeof(tiny));
    cr_expect_eq(strlen(h), 7);
}
