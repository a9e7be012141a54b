/* Unit tests for launcher/select (pure GPU choice) and ddp_place over real hwloc XML topologies
 * (tests/fixtures/topo, copied with provenance in MANIFEST.md) and our own (tests/fixtures/topo): same-NUMA choice,
 * closest nodes, tightest links, inherited CUDA_VISIBLE_DEVICES, Slurm lists, exclude, busy and leased GPUs, errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topo/place.h"
#include "topo/select.h"
#include "topo/topo.h"

static char *fixture(const char *name)
{
    const char *src = getenv("DDP_SRCDIR");

    cr_assert(src, "DDP_SRCDIR is not set (run through `make unit`)");
    if (!strncmp(name, "own:", 4))
        return ddp_xasprintf("%s/tests/fixtures/topo/%s", src, name + 4);
    return ddp_xasprintf("%s/tests/fixtures/topo/%s", src, name);
}

static struct ddp_topo *load(const char *name)
{
    char *path = fixture(name);
    struct ddp_topo *t = NULL;
    struct ddp_err err = {0};
    int rc = ddp_topo_load(path, &t, &err);

    cr_assert_eq(rc, 0, "load %s: %d %s", path, rc, err.msg);
    free(path);
    return t;
}

static struct ddp_place_req gpu_req(int n)
{
    return (struct ddp_place_req){
        .nproc = n,
        .want_gpus = true,
        .policy = DDP_POLICY_SAME_NUMA,
        .visible = DDP_VISIBLE_PER_JOB,
        .bind = DDP_BIND_NODE,
        .mem = DDP_MEM_LOCAL,
    };
}

/* "0,1,2" from a placement */
static char *gpus_of(const struct ddp_placement *p)
{
    struct ddp_buf b = {0};

    ddp_buf_puts(&b, "");
    for (size_t i = 0; i < p->nranks; i++)
        ddp_buf_printf(&b, i ? ",%d" : "%d", p->ranks[i].gpu);
    return b.data;
}

/* Place req on fixture and compare the GPU list; returns the placement for more checks (caller frees). */
static struct ddp_placement place_ok(struct ddp_topo *t, const struct ddp_place_req *req, const char *want)
{
    struct ddp_placement p;
    struct ddp_err err = {0};
    int rc = ddp_place_ranks(t, req, &p, &err);
    char *got;

    cr_assert_eq(rc, 0, "place %d: %d %s", req->nproc, rc, err.msg);
    got = gpus_of(&p);
    cr_expect_str_eq(got, want, "GPUs for %d workers (reason: %s)", req->nproc, p.reason);
    free(got);
    return p;
}

static void expect_pick(const char *fixture_name, int n, const char *want, const char *reason_part)
{
    struct ddp_topo *t = load(fixture_name);
    struct ddp_place_req req = gpu_req(n);
    struct ddp_placement p = place_ok(t, &req, want);

    if (reason_part)
        cr_expect(strstr(p.reason, reason_part), "%s, %d GPUs: reason '%s' lacks '%s'", fixture_name, n, p.reason,
                  reason_part);
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

/* ---- the real topologies ---- */

Test(select_real, g4dn_same_numa_node_then_both)
{
    expect_pick("2s-8gpu-aws-g4dn-metal-t4.xml", 1, "0", "1 GPU on NUMA node 0");
    expect_pick("2s-8gpu-aws-g4dn-metal-t4.xml", 2, "0,1", "2 GPUs on NUMA node 0, same PCIe host bridge (PHB)");
    expect_pick("2s-8gpu-aws-g4dn-metal-t4.xml", 4, "0,1,2,3", "NUMA node 0, across PCIe host bridges");
    expect_pick("2s-8gpu-aws-g4dn-metal-t4.xml", 5, "0,1,2,3,4", "NUMA nodes 0,1, across NUMA nodes (SYS)");
    expect_pick("2s-8gpu-aws-g4dn-metal-t4.xml", 8, "0,1,2,3,4,5,6,7", "8 GPUs on NUMA nodes 0,1");
}

Test(select_real, dgx2_eight_on_one_baseboard_nvlink)
{
    expect_pick("2s-16gpu-dgx2h-v100-nvswitch.xml", 8, "0,1,2,3,4,5,6,7", "NUMA node 0, NVLink (NV6)");
    expect_pick("2s-16gpu-dgx2h-v100-nvswitch.xml", 16, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "NUMA nodes 0,1");
}

Test(select_real, mi250x_bus_order_is_not_numa_order)
{
    struct ddp_topo *t = load("1s-4numa-8gcd-hpe-ex235a-mi250x.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;
    int ex[] = {0};

    /* GCDs 0,1 (c1, c6) are on NUMA node 3 */
    p = place_ok(t, &req, "0,1");
    cr_expect_eq(p.ranks[0].numa_node, 3);
    cr_expect_str_eq(p.ranks[0].cpus, "48-63,112-127");
    cr_expect_str_eq(p.ranks[0].mems, "3");
    cr_expect(strstr(p.reason, "XGMI"), "%s", p.reason);
    ddp_place_free(&p);
    /* without GCD 0, the next whole node is node 1 (GCDs 2,3), not GCD 1 with another */
    req.exclude_idx = ex, req.nexclude_idx = 1;
    p = place_ok(t, &req, "2,3");
    cr_expect_eq(p.ranks[1].numa_node, 1);
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_real, jureca_one_gpu_per_node_closest_nodes)
{
    /* GPUs on NUMA 3,1,7,5; 2 GPUs need 2 nodes: 1 and 3 share a socket (distance 12, not 32) */
    expect_pick("2s-8numa-4gpu-jureca-dc-a100.xml", 2, "0,1", "2 GPUs on NUMA nodes 1,3");
    struct ddp_topo *t = load("2s-8numa-4gpu-jureca-dc-a100.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;
    int ex[] = {0};

    /* without GPU 0 (node 3): GPUs 2 (node 7) and 3 (node 5) share socket 1; 1+2 or 1+3 would cross */
    req.exclude_idx = ex, req.nexclude_idx = 1;
    p = place_ok(t, &req, "2,3");
    cr_expect(strstr(p.reason, "NUMA nodes 5,7"), "%s", p.reason);
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_real, sierra_hwloc1_and_gpu_memory_nodes)
{
    struct ddp_topo *t = load("2s-p9-4gpu-sierra-v100-gpumem-numa-hwloc1.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p = place_ok(t, &req, "0,1");

    cr_expect_eq(p.ranks[0].numa_node, 0);
    cr_expect_str_eq(p.ranks[0].cpus, "0-87");
    ddp_place_free(&p);
    /* CPU workers go to the nodes with CPUs (0 and 8), never to the GPU-memory nodes 252-255 */
    req = gpu_req(4);
    req.want_gpus = false;
    p = place_ok(t, &req, "-1,-1,-1,-1");
    cr_expect_eq(p.ranks[0].numa_node, 0);
    cr_expect_eq(p.ranks[1].numa_node, 0);
    cr_expect_eq(p.ranks[2].numa_node, 8);
    cr_expect_eq(p.ranks[3].numa_node, 8);
    cr_expect_str_eq(p.ranks[3].cpus, "88-175");
    cr_expect_str_eq(p.ranks[3].cvd, "", "CPU workers on a GPU machine get an empty CUDA_VISIBLE_DEVICES");
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_real, p5_without_cpu_objects_still_binds)
{
    struct ddp_topo *t = load("2s-8gpu-aws-p5-h100-nocpus.xml");
    struct ddp_place_req req = gpu_req(4);
    struct ddp_placement p;

    req.bind = DDP_BIND_EXCLUSIVE;
    p = place_ok(t, &req, "0,1,2,3");
    /* no Core/PU objects: node 0's 48 CPUs split one CPU at a time */
    cr_expect_str_eq(p.ranks[0].cpus, "0-11");
    cr_expect_str_eq(p.ranks[3].cpus, "36-47");
    cr_expect_str_eq(p.ranks[3].mems, "0");
    ddp_place_free(&p);
    cr_expect_eq(ddp_topo_ncpus(t), 96);
    ddp_topo_destroy(t);
}

Test(select_real, h200_vm_unknown_locality)
{
    struct ddp_topo *t = load("vm-2gpu-h200-nonuma.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p = place_ok(t, &req, "0,1");

    cr_expect(strstr(p.reason, "unknown NUMA locality"), "%s", p.reason);
    /* local to every node: bound to the one node there is */
    cr_expect_eq(p.ranks[1].numa_node, 0);
    cr_expect_str_eq(p.ranks[1].cpus, "0-31");
    cr_expect_str_eq(p.ranks[0].cvd, "0,1");
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

/* ---- own topologies ---- */

Test(select_own, two_sockets_tightest_link_wins_over_bus_order)
{
    /* socket 1 has an NV4 pair (GPUs 6,7); it beats the PIX pair 0,1 of socket 0 */
    expect_pick("own:2s-8gpu-switches-nvlink.xml", 2, "6,7", "2 GPUs on NUMA node 1, NVLink (NV4)");
    expect_pick("own:2s-8gpu-switches-nvlink.xml", 3, "4,6,7", "NUMA node 1");
    expect_pick("own:2s-8gpu-switches-nvlink.xml", 8, "0,1,2,3,4,5,6,7", "NUMA nodes 0,1");
}

Test(select_own, pix_pxb_phb_classification)
{
    struct ddp_topo *t = load("own:2s-8gpu-switches-nvlink.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;
    struct ddp_strv sel = {0};

    ddp_strv_push(&sel, "none-placeholder");
    ddp_strv_clear(&sel);
    /* only socket 0's GPUs: PIX pair 0,1 beats PXB pair 2,3 */
    ddp_strv_push(&sel, "4"), ddp_strv_push(&sel, "5"), ddp_strv_push(&sel, "6"), ddp_strv_push(&sel, "7");
    req.exclude = &sel;
    p = place_ok(t, &req, "0,1");
    cr_expect(strstr(p.reason, "same PCIe switch (PIX)"), "%s", p.reason);
    ddp_place_free(&p);
    ddp_strv_clear(&sel);
    ddp_strv_push(&sel, "0000:1a:00.0"), ddp_strv_push(&sel, "1b:00.0");
    for (int g = 4; g < 8; g++)
        ddp_strv_pushf(&sel, "%d", g);
    p = place_ok(t, &req, "2,3");
    cr_expect(strstr(p.reason, "across PCIe switches (PXB)"), "%s", p.reason);
    ddp_place_free(&p);
    ddp_strv_clear(&sel);
    ddp_topo_destroy(t);
}

Test(select_own, two_sockets_binding_modes)
{
    struct ddp_topo *t = load("own:2s-8gpu-switches-nvlink.xml");
    struct ddp_place_req req = gpu_req(4);
    struct ddp_placement p;

    /* node: the node's CPUs; exclusive: node 1's 8 cores (SMT2) split in 4 */
    p = place_ok(t, &req, "4,5,6,7");
    cr_expect_str_eq(p.ranks[0].cpus, "8-15,24-31");
    cr_expect_str_eq(p.ranks[0].mems, "1");
    ddp_place_free(&p);
    req.bind = DDP_BIND_EXCLUSIVE;
    p = place_ok(t, &req, "4,5,6,7");
    cr_expect_str_eq(p.ranks[0].cpus, "8-9,24-25");
    cr_expect_str_eq(p.ranks[1].cpus, "10-11,26-27");
    cr_expect_str_eq(p.ranks[3].cpus, "14-15,30-31");
    ddp_place_free(&p);
    /* core-complex: 2 L3s on node 1 for 4 ranks: two ranks per L3 */
    req.bind = DDP_BIND_CORE_COMPLEX;
    p = place_ok(t, &req, "4,5,6,7");
    cr_expect_str_eq(p.ranks[0].cpus, "8-11,24-27");
    cr_expect_str_eq(p.ranks[1].cpus, "8-11,24-27");
    cr_expect_str_eq(p.ranks[2].cpus, "12-15,28-31");
    ddp_place_free(&p);
    /* one rank: one L3 (not the whole node) */
    req.nproc = 1;
    p = place_ok(t, &req, "0");
    cr_expect_str_eq(p.ranks[0].cpus, "0-3,16-19");
    ddp_place_free(&p);
    req.nproc = 4;
    /* none: no binding at all; memory none: no mems */
    req.bind = DDP_BIND_NONE;
    p = place_ok(t, &req, "4,5,6,7");
    cr_expect_null(p.ranks[0].cpus);
    cr_expect_null(p.ranks[0].mems);
    cr_expect_eq(p.ranks[0].numa_node, 1, "the GPU's node is still reported");
    ddp_place_free(&p);
    req.bind = DDP_BIND_NODE, req.mem = DDP_MEM_NONE;
    p = place_ok(t, &req, "4,5,6,7");
    cr_expect_str_eq(p.ranks[0].cpus, "8-15,24-31");
    cr_expect_null(p.ranks[0].mems);
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_own, four_numa_closest_nodes_not_lowest_bus_ids)
{
    /* bus order interleaves sockets (nodes 0,2,1,3): 4 GPUs go to nodes 0 and 1 (distance 12), GPUs 0,1,4,5 */
    expect_pick("own:2s-4numa-8gpu.xml", 4, "0,1,4,5", "4 GPUs on NUMA nodes 0,1");
    expect_pick("own:2s-4numa-8gpu.xml", 2, "0,1", "2 GPUs on NUMA node 0");

    struct ddp_topo *t = load("own:2s-4numa-8gpu.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;
    struct ddp_strv ex = {0};

    /* GPU 0 excluded: 2 GPUs stay on one node (node 2: GPUs 2,3), not GPU 1 plus another node */
    ddp_strv_push(&ex, "0000:10:00.0");
    req.exclude = &ex;
    p = place_ok(t, &req, "2,3");
    ddp_place_free(&p);
    /* socket binding: the package's CPUs and both its nodes */
    req.exclude = NULL, req.bind = DDP_BIND_SOCKET;
    p = place_ok(t, &req, "0,1");
    cr_expect_str_eq(p.ranks[0].cpus, "0-7");
    cr_expect_str_eq(p.ranks[0].mems, "0-1");
    ddp_place_free(&p);
    /* spread: as many nodes as possible */
    req = gpu_req(4);
    req.policy = DDP_POLICY_SPREAD;
    p = place_ok(t, &req, "0,2,4,6");
    cr_expect(strstr(p.reason, "policy spread"), "%s", p.reason);
    ddp_place_free(&p);
    /* any: lowest bus ids */
    req.policy = DDP_POLICY_ANY;
    p = place_ok(t, &req, "0,1,2,3");
    ddp_place_free(&p);
    ddp_strv_clear(&ex);
    ddp_topo_destroy(t);
}

Test(select_own, cpu_workers_spread_over_nodes)
{
    struct ddp_topo *t = load("own:2s-4numa-8gpu.xml");
    struct ddp_place_req req = gpu_req(8);
    struct ddp_placement p;

    req.want_gpus = false;
    req.bind = DDP_BIND_EXCLUSIVE;
    p = place_ok(t, &req, "-1,-1,-1,-1,-1,-1,-1,-1");
    for (int i = 0; i < 8; i++) {
        cr_expect_eq(p.ranks[i].numa_node, i / 2, "rank %d", i);
        cr_expect_str_eq(p.ranks[i].cvd, "");
    }
    /* node 0 = CPUs 0-3, two ranks: 2 cores each */
    cr_expect_str_eq(p.ranks[0].cpus, "0-1");
    cr_expect_str_eq(p.ranks[1].cpus, "2-3");
    cr_expect_str_eq(p.ranks[7].cpus, "14-15");
    cr_expect_str_eq(p.ranks[7].mems, "3");
    cr_expect(strstr(p.reason, "8 CPU workers on NUMA nodes 0,1,2,3"), "%s", p.reason);
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_own, no_locality_gpus_count_as_local_everywhere)
{
    struct ddp_topo *t = load("own:2s-4gpu-nolocality.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;

    /* known locality preferred among equal choices */
    p = place_ok(t, &req, "2,3");
    ddp_place_free(&p);
    /* 3 GPUs fit "one node": node 1's two plus one of unknown locality */
    req.nproc = 3;
    p = place_ok(t, &req, "0,2,3");
    cr_expect(strstr(p.reason, "3 GPUs on NUMA node 1 (1 of unknown NUMA locality)"), "%s", p.reason);
    /* the rank on the unknown-locality GPU is bound to some node (spread), not left unbound */
    cr_expect_str_eq(p.ranks[0].cpus, "0-3");
    cr_expect_str_eq(p.ranks[1].cpus, "4-7");
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

/* ---- candidates: CVD, Slurm, select, exclude, leases ---- */

Test(select_candidates, inherited_cvd_subset_and_composition)
{
    struct ddp_topo *t = load("2s-8gpu-aws-g4dn-metal-t4.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;
    struct ddp_err err = {0};

    req.inherited_cvd = "4,5,6,7";
    p = place_ok(t, &req, "4,5");
    cr_expect_str_eq(p.ranks[0].cvd, "4,5");
    cr_expect_str_eq(p.ranks[1].cvd, "4,5");
    ddp_place_free(&p);
    req.visible = DDP_VISIBLE_PER_RANK;
    p = place_ok(t, &req, "4,5");
    cr_expect_str_eq(p.ranks[0].cvd, "4");
    cr_expect_str_eq(p.ranks[1].cvd, "5");
    ddp_place_free(&p);
    /* order in CVD does not matter for the choice; CUDA stops at the first bad entry (9) */
    req.visible = DDP_VISIBLE_PER_JOB;
    req.inherited_cvd = "6, 2,9,3";
    cr_expect_eq(ddp_place_count_usable(t, &req), 2);
    p = place_ok(t, &req, "2,6");
    cr_expect_str_eq(p.ranks[0].cvd, "2,6");
    ddp_place_free(&p);
    /* empty CVD: nothing usable */
    req.inherited_cvd = "";
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "asked for 2 GPUs, but only 0 of the 8 GPUs here are usable"), "%s", err.msg);
    cr_expect(strstr(err.msg, "GPUs 0-7 not in CUDA_VISIBLE_DEVICES=''"), "%s", err.msg);
    /* too many for the subset: the error says how many and why */
    req.inherited_cvd = "0,1,2,3";
    req.nproc = 5;
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "asked for 5 GPUs, but only 4 of the 8 GPUs here are usable; left out: GPUs 4-7 not in"
                              " CUDA_VISIBLE_DEVICES='0,1,2,3'"),
              "%s", err.msg);
    ddp_topo_destroy(t);
}

Test(select_candidates, slurm_select_exclude_downsize)
{
    struct ddp_topo *t = load("2s-8gpu-aws-g4dn-metal-t4.xml");
    struct ddp_place_req req = gpu_req(2);
    struct ddp_placement p;
    struct ddp_strv sel = {0}, ex = {0};
    struct ddp_err err = {0};
    int down[] = {5};

    req.sched_gpus = "1,4-6";
    cr_expect_eq(ddp_place_count_usable(t, &req), 4);
    p = place_ok(t, &req, "4,5");
    ddp_place_free(&p);
    req.exclude_idx = down, req.nexclude_idx = 1;
    p = place_ok(t, &req, "4,6");
    ddp_place_free(&p);
    ddp_strv_push(&ex, "0000:E7:00.0"); /* bus ids compare case-insensitively */
    req.exclude = &ex;
    req.nproc = 3;
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "only 2 of the 8"), "%s", err.msg);
    cr_expect(strstr(err.msg, "not in the scheduler's GPU list (1,4-6)"), "%s", err.msg);
    cr_expect(strstr(err.msg, "GPU 4 excluded by [gpus] exclude"), "%s", err.msg);
    cr_expect(strstr(err.msg, "GPU 5 left out after failures (downsizing)"), "%s", err.msg);
    /* an explicit select keeps the user's order */
    req = gpu_req(2);
    ddp_strv_push(&sel, "3"), ddp_strv_push(&sel, "0000:19:00.0");
    req.select = &sel;
    p = place_ok(t, &req, "3,1");
    cr_expect_str_eq(p.ranks[0].cvd, "3,1");
    cr_expect(strstr(p.reason, "selected by [gpus] select"), "%s", p.reason);
    ddp_place_free(&p);
    /* a GPU that does not exist is a configuration error */
    ddp_strv_clear(&sel);
    ddp_strv_push(&sel, "9");
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -EINVAL);
    cr_expect(strstr(err.msg, "[gpus] select: '9' is not a GPU of this machine"), "%s", err.msg);
    ddp_strv_clear(&sel);
    ddp_strv_push(&sel, "GPU-1234");
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -EINVAL);
    cr_expect(strstr(err.msg, "need NVML"), "%s", err.msg);
    ddp_strv_clear(&sel);
    ddp_strv_clear(&ex);
    ddp_topo_destroy(t);
}

Test(select_candidates, leased_gpus_are_left_out)
{
    struct ddp_topo *t = load("2s-8gpu-aws-g4dn-metal-t4.xml");
    struct ddp_place_req req = gpu_req(4);
    struct ddp_placement p;
    struct ddp_err err = {0};

    const char *holders[8] = {[1] = "job 'bert' (pid 4242)"};

    req.holders = holders;
    /* node 0 has only 3 free now: node 1 */
    p = place_ok(t, &req, "4,5,6,7");
    ddp_place_free(&p);
    req.nproc = 8;
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "GPU 1 in use by another ddplaunch job (GPU 1: job 'bert' (pid 4242))"), "%s", err.msg);
    holders[1] = NULL;
    p = place_ok(t, &req, "0,1,2,3,4,5,6,7");
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

/* ---- pure select over a hand-built description (UUIDs and memory need NVML, absent here) ---- */

static const struct ddp_sel_gpu synth_gpus[4] = {
    {0, "0000:17:00.0", "GPU-aaaa1111-0000", 0, 70LL << 30, 80LL << 30, NULL, false},
    {1, "0000:65:00.0", "GPU-bbbb2222-0000", 0, 1LL << 30, 80LL << 30, NULL, false},
    {2, "0000:ca:00.0", "GPU-cccc3333-0000", 1, 1LL << 30, 80LL << 30, NULL, false},
    {3, "0000:e3:00.0", "GPU-dddd4444-0000", 1, -1, -1, NULL, false},
};
static const enum ddp_link synth_link[16] = {
    DDP_LINK_SELF, DDP_LINK_NV, DDP_LINK_NV,   DDP_LINK_NV, DDP_LINK_NV, DDP_LINK_SELF, DDP_LINK_NV, DDP_LINK_NV,
    DDP_LINK_NV,   DDP_LINK_NV, DDP_LINK_SELF, DDP_LINK_NV, DDP_LINK_NV, DDP_LINK_NV,   DDP_LINK_NV, DDP_LINK_SELF,
};
static const int synth_nv[16] = {0, 18, 18, 18, 18, 0, 18, 18, 18, 18, 0, 18, 18, 18, 18, 0};
static const int synth_os[2] = {0, 1};

static struct ddp_sel_topo synth(void)
{
    return (struct ddp_sel_topo){synth_gpus, 4, synth_link, synth_nv, 2, synth_os, NULL};
}

Test(select_pure, uuid_cvd_composes_with_uuids)
{
    struct ddp_sel_topo t = synth();
    struct ddp_sel_req r = {.n = 2, .inherited_cvd = "GPU-dddd4444,GPU-cccc3333-0000"};
    int out[2];
    char *reason = NULL, *cvd[4];
    struct ddp_err err = {0};

    cr_assert_eq(ddp_select_choose(&t, &r, out, &reason, cvd, &err), 0, "%s", err.msg);
    cr_expect_eq(out[0], 2);
    cr_expect_eq(out[1], 3);
    /* the worker's value is the launcher's own entry, prefix UUID included */
    cr_expect_str_eq(cvd[2], "GPU-cccc3333-0000");
    cr_expect_str_eq(cvd[3], "GPU-dddd4444");
    cr_expect_str_eq(reason, "2 GPUs on NUMA node 1, NVLink (NV18)");
    free(reason);
    for (int i = 0; i < 4; i++)
        free(cvd[i]);
}

Test(select_pure, busy_gpus_over_max_memory_used)
{
    struct ddp_sel_topo t = synth();
    struct ddp_sel_req r = {.n = 2, .max_memory_used = {.percent = 50}};
    bool usable[4];
    char *why = NULL;
    int out[3];
    char *reason = NULL;
    struct ddp_err err = {0};

    /* GPU 0 uses 70 of 80 GiB; GPU 3's memory is unknown (kept) */
    cr_expect_eq(ddp_select_usable(&t, &r, usable, NULL, &why, &err), 3);
    cr_expect(!usable[0] && usable[1] && usable[2] && usable[3]);
    cr_expect_str_eq(why, "GPU 0 over [gpus] max_memory_used (GPU 0: 70.0 of 80.0 GiB in use)");
    free(why);
    /* 2 GPUs: node 1 (2,3) is whole; node 0 has one left */
    cr_assert_eq(ddp_select_choose(&t, &r, out, &reason, NULL, &err), 0, "%s", err.msg);
    cr_expect_eq(out[0], 2);
    free(reason);
    r.max_memory_used = (struct ddp_mem_limit){.bytes = 512ULL << 20};
    r.n = 3;
    cr_expect_eq(ddp_select_choose(&t, &r, out, &reason, NULL, &err), -ENODEV);
    cr_expect(strstr(err.msg, "asked for 3 GPUs, but only 1 of the 4 GPUs here is usable; left out: GPUs 0-2 over"),
              "%s", err.msg);
}

Test(select_pure, deterministic_and_mig_stops_cvd)
{
    struct ddp_sel_topo t = synth();
    struct ddp_sel_req r = {.n = 1, .inherited_cvd = "1,MIG-abc,2"};
    int out[1];
    char *reason = NULL;
    struct ddp_err err = {0};

    cr_expect_eq(ddp_select_usable(&t, &r, NULL, NULL, NULL, &err), 1);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(ddp_select_choose(&t, &r, out, &reason, NULL, &err), 0);
        cr_expect_eq(out[0], 1);
        free(reason);
    }
    r.inherited_cvd = NULL;
    r.sched_gpus = "0,x";
    cr_expect_eq(ddp_select_usable(&t, &r, NULL, NULL, NULL, &err), -EINVAL);
    cr_expect(strstr(err.msg, "the scheduler's GPU list '0,x'"), "%s", err.msg);
    cr_expect_str_eq(ddp_link_name(DDP_LINK_PXB), "PXB");
}

Test(select_pure, no_gpus_at_all)
{
    struct ddp_sel_topo t = {NULL, 0, NULL, NULL, 0, NULL, NULL};
    struct ddp_sel_req r = {.n = 2};
    int out[2];
    struct ddp_err err = {0};

    cr_expect_eq(ddp_select_choose(&t, &r, out, NULL, NULL, &err), -ENODEV);
    cr_expect(strstr(err.msg, "asked for 2 GPUs, but this machine has none"), "%s", err.msg);
}

Test(select_pure, large_counts_use_greedy_and_stay_on_nodes)
{
    /* 64 GPUs on 2 nodes, ask 32: C(64,32) is too many to enumerate */
    struct ddp_sel_gpu g[64];
    enum ddp_link *link = calloc(64 * 64, sizeof *link);
    char bus[64][16];
    int os[2] = {0, 1}, out[32];
    struct ddp_sel_topo t;
    struct ddp_sel_req r = {.n = 32};
    char *reason = NULL;
    struct ddp_err err = {0};

    for (int i = 0; i < 64; i++) {
        snprintf(bus[i], sizeof bus[i], "0000:%02x:00.0", i);
        g[i] = (struct ddp_sel_gpu){i, bus[i], NULL, i % 2, -1, -1, NULL, false};
        for (int j = 0; j < 64; j++)
            link[i * 64 + j] = i == j ? DDP_LINK_SELF : (i % 2 == j % 2 ? DDP_LINK_NODE : DDP_LINK_SYS);
    }
    t = (struct ddp_sel_topo){g, 64, link, NULL, 2, os, NULL};
    cr_assert_eq(ddp_select_choose(&t, &r, out, &reason, NULL, &err), 0, "%s", err.msg);
    for (int i = 0; i < 32; i++)
        cr_expect_eq(out[i] % 2, 0, "all on node 0");
    cr_expect_str_eq(reason, "32 GPUs on NUMA node 0, across PCIe host bridges of one NUMA node (NODE)");
    free(reason);
    free(link);
}

/* ---- more workers than GPUs: [gpus] share ---- */

Test(select_share, refused_without_share_naming_the_setting)
{
    struct ddp_topo *t = load("own:1s-1gpu.xml");
    struct ddp_place_req req = gpu_req(3);
    struct ddp_placement p;
    struct ddp_err err = {0};

    cr_expect_eq(ddp_place_count_gpus(t, &req), 3);
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "asked for 3 GPUs, but only 1 of the 1 GPUs here is usable"), "%s", err.msg);
    cr_expect(strstr(err.msg, "--share-gpus ([gpus] share = yes)"), "the refusal names the setting: %s", err.msg);
    /* nothing usable: sharing cannot help, so it is not offered */
    req.inherited_cvd = "";
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect_null(strstr(err.msg, "share"), "%s", err.msg);
    req.share = true;
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "only 0 of the 1 GPUs here"), "%s", err.msg);
    ddp_topo_destroy(t);
}

Test(select_share, one_gpu_three_workers)
{
    struct ddp_topo *t = load("own:1s-1gpu.xml");
    struct ddp_place_req req = gpu_req(3);
    struct ddp_placement p;

    req.share = true;
    cr_expect_eq(ddp_place_count_gpus(t, &req), 1);
    p = place_ok(t, &req, "0,0,0");
    for (int i = 0; i < 3; i++) {
        cr_expect_str_eq(p.ranks[i].cvd, "0", "rank %d sees the GPU once", i);
        cr_expect_str_eq(p.ranks[i].busid, "0000:3b:00.0");
        cr_expect_eq(p.ranks[i].numa_node, 0);
        cr_expect_str_eq(p.ranks[i].cpus, "0-7");
    }
    cr_expect(strstr(p.reason, "1 GPU on NUMA node 0; 3 workers share it, round-robin ([gpus] share)"), "%s", p.reason);
    ddp_place_free(&p);
    /* exclusive binding: the three split the node's 4 cores, as three ranks of three GPUs would */
    req.bind = DDP_BIND_EXCLUSIVE;
    p = place_ok(t, &req, "0,0,0");
    cr_expect_str_eq(p.ranks[0].cpus, "0,4");
    cr_expect_str_eq(p.ranks[1].cpus, "1,5");
    cr_expect_str_eq(p.ranks[2].cpus, "2-3,6-7");
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_share, round_robin_follows_the_gpu_numa_node)
{
    struct ddp_topo *t = load("2s-8gpu-aws-g4dn-metal-t4.xml");
    struct ddp_place_req req = gpu_req(5);
    struct ddp_placement p;
    struct ddp_strv sel = {0};

    ddp_strv_push(&sel, "0"), ddp_strv_push(&sel, "4");
    req.select = &sel;
    req.share = true;
    p = place_ok(t, &req, "0,4,0,4,0");
    for (int i = 0; i < 5; i++) {
        cr_expect_eq(p.ranks[i].numa_node, i % 2, "rank %d on its GPU's node", i);
        cr_expect_str_eq(p.ranks[i].cpus, i % 2 ? "24-47,72-95" : "0-23,48-71", "rank %d", i);
        cr_expect_str_eq(p.ranks[i].cvd, "0,4", "per-job: each picked GPU once");
    }
    ddp_place_free(&p);
    req.visible = DDP_VISIBLE_PER_RANK;
    p = place_ok(t, &req, "0,4,0,4,0");
    cr_expect_str_eq(p.ranks[2].cvd, "0");
    cr_expect_str_eq(p.ranks[3].cvd, "4");
    cr_expect_str_eq(p.ranks[3].busid, "0000:e7:00.0");
    ddp_place_free(&p);
    /* enough GPUs: nothing is shared, the choice is the one without share */
    req.select = NULL;
    req.visible = DDP_VISIBLE_PER_JOB;
    req.nproc = 4;
    cr_expect_eq(ddp_place_count_gpus(t, &req), 4);
    p = place_ok(t, &req, "0,1,2,3");
    cr_expect_null(strstr(p.reason, "share"), "%s", p.reason);
    ddp_place_free(&p);
    /* 9 workers on 8 GPUs: all 8, rank 8 back on GPU 0 */
    req.nproc = 9;
    p = place_ok(t, &req, "0,1,2,3,4,5,6,7,0");
    cr_expect_str_eq(p.ranks[8].cvd, "0,1,2,3,4,5,6,7");
    ddp_place_free(&p);
    ddp_strv_clear(&sel);
    ddp_topo_destroy(t);
}

Test(select_share, leased_gpus_are_waited_for_not_shared)
{
    struct ddp_topo *t = load("vm-2gpu-h200-nonuma.xml");
    struct ddp_place_req req = gpu_req(3);
    struct ddp_placement p;
    struct ddp_err err = {0};
    const char *holders[] = {NULL, "another ddplaunch job"};

    req.share = true;
    req.holders = holders;
    /* both GPUs count; the held one makes placement fail (-ENODEV: the lease code waits), not a 3-on-1 job */
    cr_expect_eq(ddp_place_count_gpus(t, &req), 2);
    cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
    cr_expect(strstr(err.msg, "asked for 2 GPUs, but only 1 of the 2 GPUs here is usable"), "%s", err.msg);
    cr_expect(strstr(err.msg, "another ddplaunch job"), "%s", err.msg);
    req.holders = NULL;
    p = place_ok(t, &req, "0,1,0");
    cr_expect_str_eq(p.ranks[2].cvd, "0,1");
    ddp_place_free(&p);
    ddp_topo_destroy(t);
}

Test(select_pure, busy_skip_leaves_out_gpus_another_process_holds)
{
    struct ddp_sel_gpu gpus[4];
    static struct ddp_nvml_gpu nv[4];
    memcpy(gpus, synth_gpus, sizeof gpus);
    for (int i = 0; i < 4; i++) {
        nv[i].mem_used = nv[i].mem_total = 40LL << 30;
        nv[i].nprocs = 1;
        gpus[i].nvml = &nv[i];
    }
    nv[2].procs[0] = (struct ddp_nvml_proc){.pid = 7, .mem_used = 30LL << 30};  /* a process holds 30 GiB */
    nv[1].procs[0] = (struct ddp_nvml_proc){.pid = 8, .mem_used = 500LL << 20}; /* a bare CUDA context */
    struct ddp_sel_topo t = synth();
    t.gpus = gpus;
    struct ddp_sel_req r = {.n = 2, .busy = DDP_BUSY_SKIP};
    bool usable[4];
    char *why = NULL;
    struct ddp_err err = {0};

    cr_expect_eq(ddp_select_usable(&t, &r, usable, NULL, &why, &err), 3);
    cr_expect(usable[0] && usable[1] && !usable[2] && usable[3]);
    cr_expect_str_eq(why, "GPU 2 held by another process ([gpus] busy = skip) (GPU 2: 30.0 GiB)");
    free(why);
    r.busy = DDP_BUSY_WARN; /* busy = warn or fail: the choice is not changed */
    cr_expect_eq(ddp_select_usable(&t, &r, usable, NULL, NULL, &err), 4);
    r.busy = DDP_BUSY_FAIL;
    cr_expect_eq(ddp_select_usable(&t, &r, usable, NULL, NULL, &err), 4);
    /* issue 52 item 14: a GPU the judge finds lost or faulty is left out whatever busy says, with its reason */
    nv[3].lost = true;
    nv[0].health.remap_failure = 1;
    cr_expect_eq(ddp_select_usable(&t, &r, usable, NULL, &why, &err), 2);
    cr_expect(!usable[0] && usable[1] && usable[2] && !usable[3]);
    cr_expect_str_eq(why, "GPUs 0,3 unfit (GPU 0: a row remapping failed (retire the GPU)) (GPU 3: NVML says the GPU "
                          "is lost (GPU_IS_LOST: fallen off the bus))");
    free(why);
}
