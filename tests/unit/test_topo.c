/* Unit tests for launcher/topo: loading every real hwloc XML topology in tests/fixtures/topo (hwloc 1.x
 * XML and a topology without CPU objects included), GPU bus order and NUMA locality, the `nvidia-smi topo -m`
 * style link matrix (PHB/NODE/SYS on g4dn, NV# on DGX-2, XGMI on MI250X, PIX/PXB/NV4 on our own fixture), the
 * JSON variant, and the live machine (no GPUs here, NVML not found). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/nvml.h"
#include "topo/place.h"
#include "topo/topo.h"
#include "topo/topo_print.h"

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
    char *path = name ? fixture(name) : NULL;
    struct ddp_topo *t = NULL;
    struct ddp_err err = {0};
    int rc = ddp_topo_load(path, &t, &err);

    cr_assert_eq(rc, 0, "load %s: %d %s", path ? path : "live", rc, err.msg);
    free(path);
    return t;
}

/* The output of `ddplaunch topo` for a fixture (NULL = live), with the given environment. Caller frees. */
static char *topo_output(const char *name, const struct ddp_spec *spec, char *const *envp, bool json)
{
    struct ddp_topo *t = load(name);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    char *empty[] = {NULL};

    cr_assert_eq(ddp_topo_print(t, spec, envp ? envp : empty, NULL, NULL, json, f), 0);
    fclose(f);
    ddp_topo_destroy(t);
    return buf;
}

/* The whitespace-separated cells of the matrix row that starts with `row` ("GPU3"), joined by one space. */
static char *matrix_row(const char *out, const char *row)
{
    char *pat = ddp_xasprintf("\n%s ", row);
    const char *p = strstr(out, pat), *e;
    struct ddp_buf b = {0};
    char *line, *tok, *save = NULL;

    free(pat);
    cr_assert(p, "no matrix row %s in:\n%s", row, out);
    p++;
    e = strchr(p, '\n');
    line = ddp_xstrndup(p, (size_t)(e - p));
    ddp_buf_puts(&b, "");
    for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        ddp_buf_printf(&b, "%s%s", b.len ? " " : "", tok);
    free(line);
    return b.data;
}

static void expect_row(const char *out, const char *row, const char *want)
{
    char *got = matrix_row(out, row);

    cr_expect_str_eq(got, want, "row %s", row);
    free(got);
}

struct expect_fixture {
    const char *file;
    size_t ngpus;
    int ncpus;
};

Test(topo, all_shared_fixtures_load)
{
    static const struct expect_fixture fx[] = {
        {"1s-4numa-8gcd-hpe-ex235a-mi250x.xml", 8, 128},
        {"2s-16gpu-dgx2h-v100-nvswitch.xml", 16, 4},
        {"2s-8gpu-aws-g4dn-metal-t4.xml", 8, 96},
        {"2s-8gpu-aws-p5-h100-nocpus.xml", 8, 96},
        {"2s-8numa-4gpu-jureca-dc-a100.xml", 4, 256},
        {"2s-p9-4gpu-sierra-v100-gpumem-numa-hwloc1.xml", 4, 176},
        {"vm-2gpu-h200-nonuma.xml", 2, 32},
    };

    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        struct ddp_topo *t = load(fx[i].file);

        cr_expect_eq(ddp_topo_ngpus(t), fx[i].ngpus, "%s: GPUs", fx[i].file);
        cr_expect_eq(ddp_topo_ncpus(t), fx[i].ncpus, "%s: CPUs", fx[i].file);
        ddp_topo_destroy(t);
    }
}

Test(topo, missing_or_bad_file_is_an_error)
{
    struct ddp_topo *t = (struct ddp_topo *)1;
    struct ddp_err err = {0};
    char path[] = "/tmp/ddp-topo-test-XXXXXX";
    int fd = mkstemp(path);

    cr_expect_lt(ddp_topo_load("/nonexistent/topo.xml", &t, &err), 0);
    cr_expect_null(t);
    cr_expect(strstr(err.msg, "/nonexistent/topo.xml"), "%s", err.msg);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "<topology>", 10), 10);
    close(fd);
    cr_expect_lt(ddp_topo_load(path, &t, &err), 0);
    cr_expect(strstr(err.msg, path), "%s", err.msg);
    unlink(path);
}

Test(topo, g4dn_matrix_phb_node_sys)
{
    char *out = topo_output("2s-8gpu-aws-g4dn-metal-t4.xml", NULL, NULL, false);

    expect_row(out, "GPU0", "GPU0 X PHB NODE NODE SYS SYS SYS SYS 0-23,48-71 0");
    expect_row(out, "GPU3", "GPU3 NODE NODE PHB X SYS SYS SYS SYS 0-23,48-71 0");
    expect_row(out, "GPU6", "GPU6 SYS SYS SYS SYS NODE NODE X PHB 24-47,72-95 1");
    cr_expect(strstr(out, "GPU0   0000:18:00.0  10de:1eb8  NUMA 0"), "%s", out);
    cr_expect(strstr(out, "GPU7   0000:f5:00.0"), "bus order");
    cr_expect(strstr(out, "node 1   CPUs 24-47,72-95"), "%s", out);
    cr_expect(strstr(out, "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge"), "legend");
    cr_expect(strstr(out, "NVML: not used (XML topology)"), "%s", out);
    cr_expect(strstr(out,
                     "2 workers:  GPUs 0,1  (2 GPUs on NUMA node 0, same PCIe host bridge (PHB)); CPUs 0-23,48-71 |"
                     " 0-23,48-71"),
              "%s", out);
    cr_expect(strstr(out, "8 workers:  GPUs 0,1,2,3,4,5,6,7  (8 GPUs on NUMA nodes 0,1, across NUMA nodes (SYS))"),
              "%s", out);
    free(out);
}

Test(topo, link_types_of_other_machines)
{
    char *out = topo_output("2s-16gpu-dgx2h-v100-nvswitch.xml", NULL, NULL, false);

    expect_row(out, "GPU0", "GPU0 X NV6 NV6 NV6 NV6 NV6 NV6 NV6 SYS SYS SYS SYS SYS SYS SYS SYS 0-1 0");
    cr_expect(strstr(out, "(NVLink/XGMI pairs from hwloc NVLinkBandwidth)"), "%s", out);
    free(out);
    out = topo_output("1s-4numa-8gcd-hpe-ex235a-mi250x.xml", NULL, NULL, false);
    expect_row(out, "GPU4", "GPU4 XGMI XGMI XGMI XGMI X XGMI XGMI XGMI 0-15,64-79 0");
    free(out);
    out = topo_output("2s-8numa-4gpu-jureca-dc-a100.xml", NULL, NULL, false);
    expect_row(out, "GPU1", "GPU1 SYS X SYS SYS 16-31,144-159 1");
    cr_expect(strstr(out, "8 workers:  cannot: asked for 8 GPUs, but only 4 of the 4 GPUs here are usable"), "%s", out);
    free(out);
    out = topo_output("2s-p9-4gpu-sierra-v100-gpumem-numa-hwloc1.xml", NULL, NULL, false);
    expect_row(out, "GPU2", "GPU2 SYS SYS X PHB 88-175 8");
    cr_expect(strstr(out, "node 255 CPUs (none)"), "%s", out);
    free(out);
    out = topo_output("vm-2gpu-h200-nonuma.xml", NULL, NULL, false);
    expect_row(out, "GPU1", "GPU1 PHB X 0-31 N/A");
    free(out);
    out = topo_output("own:2s-8gpu-switches-nvlink.xml", NULL, NULL, false);
    expect_row(out, "GPU0", "GPU0 X PIX NODE NODE SYS SYS SYS SYS 0-7,16-23 0");
    expect_row(out, "GPU2", "GPU2 NODE NODE X PXB SYS SYS SYS SYS 0-7,16-23 0");
    expect_row(out, "GPU7", "GPU7 SYS SYS SYS SYS NODE NODE NV4 X 8-15,24-31 1");
    free(out);
}

Test(topo, picks_follow_spec_and_environment)
{
    struct ddp_spec spec;
    char *env[] = {"CUDA_VISIBLE_DEVICES=5,6,7", "PATH=/bin", NULL};
    char *out;

    ddp_spec_init(&spec);
    spec.numa_bind = DDP_BIND_EXCLUSIVE;
    out = topo_output("2s-8gpu-aws-g4dn-metal-t4.xml", &spec, env, false);
    cr_expect(strstr(out, "Picks (policy same-numa, binding exclusive, memory local):"), "%s", out);
    /* node 1 = 24 cores x SMT2; 2 ranks: 12 cores each */
    /* of 5,6,7 the pair on one host bridge (6,7: PHB) beats the lower bus ids 5,6 (NODE) */
    cr_expect(strstr(out, "2 workers:  GPUs 6,7  (2 GPUs on NUMA node 1, same PCIe host bridge (PHB)); CPUs"
                          " 24-35,72-83 | 36-47,84-95"),
              "%s", out);
    cr_expect(strstr(out, "4 workers:  cannot: asked for 4 GPUs, but only 3 of the 8 GPUs here are usable; left out:"
                          " GPUs 0-4 not in CUDA_VISIBLE_DEVICES='5,6,7'"),
              "%s", out);
    free(out);
    ddp_spec_free(&spec);
}

Test(topo, json_document)
{
    char *out = topo_output("2s-8gpu-aws-g4dn-metal-t4.xml", NULL, NULL, true);

    cr_expect_eq(out[0], '{');
    cr_expect(strstr(out, "\"links\":[[\"X\",\"PHB\",\"NODE\",\"NODE\",\"SYS\",\"SYS\",\"SYS\",\"SYS\"],"), "%s", out);
    cr_expect(strstr(out, "{\"index\":4,\"busid\":\"0000:e7:00.0\",\"vendor\":\"10de\",\"device\":\"1eb8\""), "%s",
              out);
    cr_expect(strstr(out, "{\"os_index\":1,\"cpus\":\"24-47,72-95\""), "%s", out);
    cr_expect(strstr(out, "{\"nproc\":2,\"ok\":true,\"reason\":\"2 GPUs on NUMA node 0, same PCIe host bridge (PHB)\","
                          "\"ranks\":[{\"gpu\":0,\"busid\":\"0000:18:00.0\",\"cuda_visible_devices\":\"0,1\","
                          "\"numa_node\":0,\"cpus\":\"0-23,48-71\",\"mems\":\"0\"}"),
              "%s", out);
    cr_expect_eq(out[strlen(out) - 1], '\n');
    cr_expect_eq(out[strlen(out) - 2], '}');
    free(out);
}

Test(topo, live_machine_without_gpus)
{
    struct ddp_topo *t = load(NULL);
    char *allowed = ddp_topo_allowed_cpus(t), *out;
    cpu_set_t cs;
    int n = 0;

    cr_assert_eq(sched_getaffinity(0, sizeof cs, &cs), 0);
    for (int i = 0; i < CPU_SETSIZE; i++)
        n += CPU_ISSET(i, &cs);
    cr_expect_eq(ddp_topo_ncpus(t), n, "allowed CPUs = our affinity");
    cr_expect_neq(allowed[0], '\0');
    free(allowed);
    if (ddp_topo_ngpus(t) == 0) {
        struct ddp_place_req req = {.nproc = 2, .want_gpus = false, .bind = DDP_BIND_NODE, .mem = DDP_MEM_LOCAL};
        struct ddp_placement p;
        struct ddp_err err = {0};

        cr_assert_eq(ddp_place_ranks(t, &req, &p, &err), 0, "%s", err.msg);
        cr_expect_null(p.ranks[0].cvd, "no GPUs and CPU workers: CUDA_VISIBLE_DEVICES left alone");
        cr_expect_not_null(p.ranks[0].cpus);
        ddp_place_free(&p);
        req.want_gpus = true;
        cr_expect_eq(ddp_place_ranks(t, &req, &p, &err), -ENODEV);
        cr_expect(strstr(err.msg, "this machine has none"), "%s", err.msg);
    }
    ddp_topo_destroy(t);
    out = topo_output(NULL, NULL, NULL, false);
    cr_expect(strstr(out, "Topology: live machine"), "%s", out);
    cr_expect(strstr(out, "NVML: "), "%s", out);
    if (!strstr(out, "NVML: found"))
        cr_expect(strstr(out, "NVML: not found (libnvidia-ml.so.1"), "%s", out);
    free(out);
}

/* ---- nvml: the parts that do not need a GPU ---- */

Test(nvml, busid_normalisation)
{
    char out[32];

    ddp_nvml_busid_norm("00000000:1A:00.0", out, sizeof out);
    cr_expect_str_eq(out, "0000:1a:00.0");
    ddp_nvml_busid_norm("0004:04:00.0", out, sizeof out);
    cr_expect_str_eq(out, "0004:04:00.0");
}

Test(nvml, link_counts_direct_and_through_switches)
{
    /* GPUs a,b bonded by 4 direct links; c,d reach NVSwitches by 18 and 12 links (H100/H200 HGX style) */
    struct ddp_nvml_gpu g[4] = {0};
    struct ddp_nvml n = {.found = true, .gpus = g, .ngpus = 4};

    strcpy(g[0].busid, "0000:17:00.0"), strcpy(g[1].busid, "0000:65:00.0");
    strcpy(g[2].busid, "0000:ca:00.0"), strcpy(g[3].busid, "0000:e3:00.0");
    for (int l = 0; l < 4; l++) {
        strcpy(g[0].link_peer[l], "0000:65:00.0");
        strcpy(g[1].link_peer[l], "0000:17:00.0");
    }
    g[0].nlinks = g[1].nlinks = 4;
    for (int l = 0; l < 18; l++) {
        strcpy(g[2].link_peer[l], "0000:05:00.0");
        g[2].link_to_switch[l] = true;
        if (l < 12) {
            strcpy(g[3].link_peer[l], "0000:06:00.0");
            g[3].link_to_switch[l] = true;
        }
    }
    g[2].nlinks = 18, g[3].nlinks = 12;
    cr_expect_eq(ddp_nvml_links(&n, "0000:17:00.0", "0000:65:00.0"), 4);
    cr_expect_eq(ddp_nvml_links(&n, "0000:65:00.0", "0000:17:00.0"), 4);
    cr_expect_eq(ddp_nvml_links(&n, "0000:CA:00.0", "0000:e3:00.0"), 12);
    cr_expect_eq(ddp_nvml_links(&n, "0000:17:00.0", "0000:ca:00.0"), 0, "no shared fabric");
    cr_expect_eq(ddp_nvml_links(&n, "0000:17:00.0", "0000:17:00.0"), 0);
    cr_expect_eq(ddp_nvml_links(&n, "0000:17:00.0", "0000:99:00.0"), 0);
}

Test(nvml, missing_library_is_not_an_error)
{
    struct ddp_nvml n;
    void *probe = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);

    if (probe) {
        dlclose(probe);
        cr_skip_test("NVML is installed here");
    }
    ddp_nvml_read(&n);
    cr_expect(!n.found);
    cr_expect_eq(n.ngpus, 0);
    cr_expect(!strncmp(n.status, "NVML: not found (libnvidia-ml.so.1", 34), "%s", n.status);
    ddp_nvml_free(&n);
}
