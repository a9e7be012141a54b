/* Unit tests for nccl: [nccl]/environment validation and presets. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "spec/nccl.h"

struct fx {
    struct ddp_kvlist nccl;
    struct ddp_strv warn;
    struct ddp_err err;
};

static void fx_free(struct fx *f)
{
    ddp_kvlist_free(&f->nccl);
    ddp_strv_clear(&f->warn);
}

static void set(struct fx *f, const char *k, const char *v, int line)
{
    ddp_kvlist_set(&f->nccl, k, v, DDP_ORIGIN_SPEC, "job.ini", line);
}

/* Validate one [nccl] key. */
static int one(struct fx *f, const char *k, const char *v)
{
    fx_free(f);
    memset(f, 0, sizeof(*f));
    set(f, k, v, 7);
    return ddp_nccl_validate(&f->nccl, NULL, &f->warn, &f->err);
}

/* Validate one inherited variable. */
static int env1(struct fx *f, const char *entry)
{
    fx_free(f);
    memset(f, 0, sizeof(*f));
    char *envp[] = {(char *)"PATH=/usr/bin", (char *)entry, NULL};
    return ddp_nccl_validate(NULL, envp, &f->warn, &f->err);
}

static bool any_warning(const struct fx *f, const char *needle)
{
    for (size_t i = 0; i < f->warn.n; i++)
        if (strstr(f->warn.v[i], needle))
            return true;
    return false;
}

#define ERR_HAS(f, s) cr_expect(strstr((f).err.msg, (s)) != NULL, "message '%s' lacks '%s'", (f).err.msg, (s))

Test(nccl, ib_timeout_is_an_exponent)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "NCCL_IB_TIMEOUT", "600"), -EINVAL);
    ERR_HAS(f, "job.ini:7: NCCL_IB_TIMEOUT=600: expected an exponent 0-31 (4.096 us * 2^v");
    cr_expect_eq(one(&f, "NCCL_IB_TIMEOUT", "22"), 0);
    cr_expect_eq(one(&f, "NCCL_IB_TIMEOUT", "0x16"), 0); /* NCCL reads strtoll base 0 */
    cr_expect_eq(one(&f, "NCCL_IB_TIMEOUT", "-1"), -EINVAL);
    cr_expect_eq(one(&f, "NCCL_IB_TIMEOUT", "20s"), -EINVAL);
    fx_free(&f);
}

Test(nccl, impossible_values_from_the_environment)
{
    struct fx f = {0};
    cr_expect_eq(env1(&f, "NCCL_DEBUG=FOO"), -EINVAL);
    ERR_HAS(f, "environment: NCCL_DEBUG=FOO: expected VERSION, WARN, INFO, ABORT or TRACE");
    cr_expect_eq(env1(&f, "NCCL_DEBUG=info"), 0); /* NCCL compares case-insensitively */
    cr_expect_eq(env1(&f, "NCCL_P2P_LEVEL=XYZ"), -EINVAL);
    ERR_HAS(f, "NCCL_P2P_LEVEL=XYZ: expected LOC, NVL, PIX, PXB, PHB, SYS");
    ERR_HAS(f, "legacy 0-5");
    cr_expect_eq(env1(&f, "NCCL_P2P_LEVEL=NVL"), 0);
    cr_expect_eq(env1(&f, "NCCL_P2P_LEVEL=3"), 0);
    cr_expect_eq(env1(&f, "NCCL_P2P_LEVEL=9"), -EINVAL);
    cr_expect_eq(env1(&f, "NCCL_P2P_LEVEL=SIS"), -EINVAL);
    ERR_HAS(f, "did you mean 'SYS'");
    cr_expect_eq(env1(&f, "NCCL_NVLS_ENABLE=5"), -EINVAL);
    ERR_HAS(f, "expected 0, 1 or 2");
    cr_expect_eq(env1(&f, "NCCL_IB_RETRY_CNT=9"), -EINVAL);
    ERR_HAS(f, "0-7");
    cr_expect_eq(env1(&f, "TORCH_NCCL_ASYNC_ERROR_HANDLING=7"), -EINVAL);
    ERR_HAS(f, "expected 0-3");
    cr_expect_eq(env1(&f, "TORCH_NCCL_ASYNC_ERROR_HANDLING=3"), 0);
    cr_expect_eq(env1(&f, "NCCL_NTHREADS=100"), -EINVAL);
    cr_expect_eq(env1(&f, "NCCL_NTHREADS=256"), 0);
    cr_expect_eq(env1(&f, "TORCH_DISTRIBUTED_DEBUG=DETAIL"), 0);
    cr_expect_eq(env1(&f, "TORCH_DISTRIBUTED_DEBUG=VERBOSE"), -EINVAL);
    fx_free(&f);
}

Test(nccl, booleans_nccl_reads_as_numbers)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "NCCL_P2P_DISABLE", "true"), -EINVAL);
    ERR_HAS(f, "counts as 0");
    cr_expect_eq(one(&f, "NCCL_P2P_DISABLE", "1"), 0);
    cr_expect_eq(one(&f, "NCCL_SHM_DISABLE", "2"), -EINVAL);
    /* torch flags: 0/1; words work in torch 2.x only. */
    cr_expect_eq(one(&f, "TORCH_NCCL_BLOCKING_WAIT", "true"), 0);
    cr_expect(any_warning(&f, "torch 1.13 throws"));
    cr_expect_eq(one(&f, "TORCH_NCCL_BLOCKING_WAIT", "2"), -EINVAL);
    fx_free(&f);
}

Test(nccl, word_lists)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "NCCL_DEBUG_SUBSYS", "INIT,NET"), 0);
    cr_expect_eq(one(&f, "NCCL_DEBUG_SUBSYS", "^INIT,COLL"), 0);
    cr_expect_eq(one(&f, "NCCL_DEBUG_SUBSYS", "init,graph"), 0);
    cr_expect_eq(one(&f, "NCCL_DEBUG_SUBSYS", "INIT,NETWORK"), -EINVAL);
    ERR_HAS(f, "unknown word 'NETWORK'");
    cr_expect_eq(one(&f, "NCCL_DEBUG_SUBSYS", "INIT,"), -EINVAL);
    cr_expect_eq(one(&f, "NCCL_DEBUG_SUBSYS", "INIT,,NET"), -EINVAL);
    cr_expect_eq(one(&f, "NCCL_PROTO", "^LL128"), 0);
    cr_expect_eq(one(&f, "NCCL_ALGO", "Ring,Tree"), 0);
    cr_expect_eq(one(&f, "NCCL_ALGO", "allreduce:tree,ring;broadcast:ring"), 0);
    cr_expect_eq(one(&f, "NCCL_ALGO", "Rign"), -EINVAL);
    ERR_HAS(f, "did you mean 'Ring'");
    cr_expect_eq(one(&f, "NCCL_ALGO", "allreduce:"), -EINVAL);
    fx_free(&f);
}

Test(nccl, interface_lists)
{
    struct fx f = {0};
    const char *good[] = {"eth0", "eth", "^docker,lo", "=eth0", "=eth0,eth1", "^=docker0", "ib"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        cr_expect_eq(one(&f, "NCCL_SOCKET_IFNAME", good[i]), 0, "%s: %s", good[i], f.err.msg);
    const char *bad[] = {"",      "^",     "=",         "eth0,,eth1", "eth0,",
                         "eth 0", "eth0=", "eth0;eth1", "eth0:1",     "averyveryverylongname0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(one(&f, "NCCL_SOCKET_IFNAME", bad[i]), -EINVAL, "'%s' accepted", bad[i]);
    cr_expect_eq(one(&f, "NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1"), 0, "%s", f.err.msg);
    cr_expect_eq(one(&f, "NCCL_IB_HCA", "=mlx5_0"), 0);
    cr_expect_eq(one(&f, "NCCL_IB_HCA", "mlx5_0:x"), -EINVAL);
    fx_free(&f);
}

Test(nccl, variables_that_do_not_exist_warn)
{
    struct fx f = {0};
    const char *fake[] = {"NCCL_SOCKET_TIMEOUT", "NCCL_TIMEOUT", "NCCL_SOCKET_TIMEOUT_MS"};
    for (size_t i = 0; i < 3; i++) {
        cr_expect_eq(one(&f, fake[i], "600"), 0);
        cr_expect_eq(f.warn.n, 1);
        cr_expect(any_warning(&f, "no effect"), "%s", f.warn.n ? f.warn.v[0] : "(none)");
        cr_expect(any_warning(&f, "job.ini:7: "));
    }
    cr_expect_eq(env1(&f, "NCCL_SOCKET_TIMEOUT=600"), 0);
    cr_expect(any_warning(&f, "environment: NCCL_SOCKET_TIMEOUT=600: NCCL has no such variable"));
    fx_free(&f);
}

Test(nccl, deprecated_names)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "NCCL_ASYNC_ERROR_HANDLING", "1"), 0);
    cr_expect(any_warning(&f, "deprecated name of TORCH_NCCL_ASYNC_ERROR_HANDLING"));
    cr_expect_eq(one(&f, "NCCL_BLOCKING_WAIT", "1"), 0);
    cr_expect(any_warning(&f, "TORCH_NCCL_BLOCKING_WAIT"));
    cr_expect_eq(one(&f, "NCCL_DESYNC_DEBUG", "1"), 0);
    cr_expect(any_warning(&f, "TORCH_NCCL_DESYNC_DEBUG"));
    /* The old name is checked with the new name's rule. */
    cr_expect_eq(one(&f, "NCCL_ASYNC_ERROR_HANDLING", "7"), -EINVAL);
    ERR_HAS(f, "expected 0-3");
    /* Both names with one value: deliberate (mixed torch versions), no warning. */
    fx_free(&f);
    memset(&f, 0, sizeof(f));
    set(&f, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", 3);
    set(&f, "NCCL_ASYNC_ERROR_HANDLING", "1", 4);
    cr_expect_eq(ddp_nccl_validate(&f.nccl, NULL, &f.warn, &f.err), 0);
    cr_expect_eq(f.warn.n, 0, "%s", f.warn.n ? f.warn.v[0] : "");
    /* Different values: say which one each torch reads. */
    char *envp[] = {(char *)"TORCH_NCCL_ASYNC_ERROR_HANDLING=3", (char *)"NCCL_ASYNC_ERROR_HANDLING=1", NULL};
    ddp_strv_clear(&f.warn);
    cr_expect_eq(ddp_nccl_validate(NULL, envp, &f.warn, &f.err), 0);
    cr_expect(any_warning(&f, "torch >= 2.2 uses that one"));
    cr_expect_eq(one(&f, "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"), 0);
    cr_expect(any_warning(&f, "deprecated name of TORCH_FR_BUFFER_SIZE (torch 2.11 warns"));
    cr_expect_eq(one(&f, "TORCH_NCCL_TRACE_BUFFER_SIZE", "lots"), -EINVAL);
    cr_expect_eq(one(&f, "NCCL_MAX_NRINGS", "4"), 0);
    cr_expect(any_warning(&f, "NCCL_MAX_NCHANNELS"));
    fx_free(&f);
}

Test(nccl, unknown_names_get_did_you_mean)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "NCCL_IB_TIMOUT", "22"), 0);
    cr_expect(any_warning(&f, "did you mean NCCL_IB_TIMEOUT?"), "%s", f.warn.n ? f.warn.v[0] : "");
    cr_expect_eq(env1(&f, "TORCH_NCCL_BLOCKNG_WAIT=1"), 0);
    cr_expect(any_warning(&f, "did you mean TORCH_NCCL_BLOCKING_WAIT?"));
    cr_expect_eq(env1(&f, "NCCL_SOCKET_IFNAM=eth0"), 0);
    cr_expect(any_warning(&f, "did you mean NCCL_SOCKET_IFNAME?"));
    /* Not ours: plugin variables, other torch variables, everything else. */
    cr_expect_eq(env1(&f, "NCCL_SHARP_ENABLE=1"), 0);
    cr_expect_eq(f.warn.n, 0);
    cr_expect_eq(env1(&f, "TORCH_HOME=/x"), 0);
    cr_expect_eq(f.warn.n, 0);
    cr_expect_eq(env1(&f, "NCCL_VERSION=2.28.3-1"), 0); /* NVIDIA container images set it (seen on the H200s) */
    cr_expect_eq(f.warn.n, 0);
    cr_expect_eq(env1(&f, "HOME=/root"), 0);
    cr_expect_eq(f.warn.n, 0);
    fx_free(&f);
}

Test(nccl, spec_key_wins_over_environment)
{
    struct fx f = {0};
    set(&f, "NCCL_DEBUG", "INFO", 2);
    char *envp[] = {(char *)"NCCL_DEBUG=FOO", NULL};
    cr_expect_eq(ddp_nccl_validate(&f.nccl, envp, &f.warn, &f.err), 0, "%s", f.err.msg);
    fx_free(&f);
}

Test(nccl, where_names_the_source)
{
    struct fx f = {0};
    ddp_kvlist_set(&f.nccl, "NCCL_IB_RETRY_CNT", "8", DDP_ORIGIN_CLI, "--set", 0);
    cr_expect_eq(ddp_nccl_validate(&f.nccl, NULL, &f.warn, &f.err), -EINVAL);
    ERR_HAS(f, "--set: NCCL_IB_RETRY_CNT=8: ");
    fx_free(&f);
    memset(&f, 0, sizeof(f));
    ddp_kvlist_set(&f.nccl, "NCCL_IB_RETRY_CNT", "8", DDP_ORIGIN_ENV, NULL, 0);
    cr_expect_eq(ddp_nccl_validate(&f.nccl, NULL, &f.warn, &f.err), -EINVAL);
    ERR_HAS(f, "DDPLAUNCH_NCCL_NCCL_IB_RETRY_CNT: NCCL_IB_RETRY_CNT=8");
    fx_free(&f);
    memset(&f, 0, sizeof(f));
    ddp_kvlist_set(&f.nccl, "NCCL_IB_RETRY_CNT", "8", DDP_ORIGIN_CLI, NULL, 0);
    cr_expect_eq(ddp_nccl_validate(&f.nccl, NULL, &f.warn, &f.err), -EINVAL);
    ERR_HAS(f, "--set nccl.NCCL_IB_RETRY_CNT: NCCL_IB_RETRY_CNT=8: expected 0-7");
    fx_free(&f);
}

Test(nccl, non_nccl_key_in_section_is_an_error)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "OMP_NUM_THREADS", "4"), -EINVAL);
    ERR_HAS(f, "put it in [env]");
    fx_free(&f);
}

Test(nccl, placeholders_are_not_judged_early)
{
    struct fx f = {0};
    cr_expect_eq(one(&f, "NCCL_IB_TIMEOUT", "${IBT}"), 0);
    cr_expect_eq(one(&f, "NCCL_DEBUG_FILE", "/tmp/nccl.log"), 0);
    cr_expect(any_warning(&f, "overwrite each other"));
    cr_expect_eq(one(&f, "NCCL_DEBUG_FILE", "/tmp/nccl.%h.%p.log"), 0);
    cr_expect_eq(f.warn.n, 0);
    cr_expect_eq(one(&f, "NCCL_DEBUG_FILE", "${DDPLAUNCH_ATTEMPT_DIR}/nccl.${RANK}.log"), 0);
    cr_expect_eq(f.warn.n, 0);
    fx_free(&f);
}

Test(nccl, preset_names_and_unknown)
{
    const char *const *n = ddp_nccl_preset_names();
    cr_expect_str_eq(n[0], "debug");
    cr_expect_str_eq(n[1], "robust");
    cr_expect_null(n[2]);
    struct ddp_kvlist l = {0};
    struct ddp_err err = {0};
    cr_expect_eq(ddp_nccl_preset_apply("debgu", "/logs", &l, &err), -EINVAL);
    cr_expect(strstr(err.msg, "did you mean 'debug'") != NULL, "%s", err.msg);
    cr_expect_eq(l.n, 0);
    cr_expect_eq(ddp_nccl_preset_apply("none", "/logs", &l, &err), 0);
    cr_expect_eq(ddp_nccl_preset_apply(NULL, NULL, &l, &err), 0);
    cr_expect_eq(l.n, 0);
}

Test(nccl, debug_preset_keeps_explicit_keys)
{
    struct ddp_kvlist l = {0};
    struct ddp_err err = {0};
    ddp_kvlist_set(&l, "NCCL_DEBUG", "WARN", DDP_ORIGIN_SPEC, "job.ini", 3);
    cr_expect_eq(ddp_nccl_preset_apply("debug", "/logs", &l, &err), 0);
    cr_expect_str_eq(ddp_kvlist_get(&l, "NCCL_DEBUG")->value, "WARN");
    cr_expect_eq(ddp_kvlist_get(&l, "NCCL_DEBUG")->origin, DDP_ORIGIN_SPEC);
    const struct ddp_kv *f = ddp_kvlist_get(&l, "NCCL_DEBUG_FILE");
    cr_assert_not_null(f);
    cr_expect(strstr(f->value, "${DDPLAUNCH_ATTEMPT_DIR}/") == f->value);
    cr_expect(strstr(f->value, "${RANK}") && strstr(f->value, "%p"));
    cr_expect_str_eq(f->file, "preset debug");
    cr_expect_eq(f->origin, DDP_ORIGIN_DEFAULT);
    cr_expect_str_eq(ddp_kvlist_get(&l, "TORCH_NCCL_DUMP_ON_TIMEOUT")->value, "1");
    cr_expect_not_null(ddp_kvlist_get(&l, "TORCH_NCCL_TRACE_BUFFER_SIZE"));
    cr_expect_not_null(ddp_kvlist_get(&l, "TORCH_FR_DUMP_TEMP_FILE"));
    ddp_kvlist_free(&l);

    /* Without a log dir: no per-rank files (NCCL logs to the prefixed stdout). */
    cr_expect_eq(ddp_nccl_preset_apply("debug", NULL, &l, &err), 0);
    cr_expect_str_eq(ddp_kvlist_get(&l, "NCCL_DEBUG")->value, "INFO");
    cr_expect_null(ddp_kvlist_get(&l, "NCCL_DEBUG_FILE"));
    cr_expect_null(ddp_kvlist_get(&l, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"));
    ddp_kvlist_free(&l);
}

Test(nccl, presets_pass_their_own_validation)
{
    const char *const *n = ddp_nccl_preset_names();
    for (; *n; n++)
        for (int ld = 0; ld < 2; ld++) {
            struct ddp_kvlist l = {0};
            struct ddp_strv w = {0};
            struct ddp_err err = {0};
            cr_expect_eq(ddp_nccl_preset_apply(*n, ld ? "/logs" : NULL, &l, &err), 0);
            cr_expect_gt(l.n, 2);
            cr_expect_eq(ddp_nccl_validate(&l, NULL, &w, &err), 0, "%s: %s", *n, err.msg);
            cr_expect_eq(w.n, 0, "%s: %s", *n, w.n ? w.v[0] : "");
            const char *const *vars = ddp_nccl_preset_vars(*n, ld);
            size_t nv = 0;
            while (vars && vars[nv])
                nv++;
            cr_expect_eq(nv, l.n, "preset_vars and apply disagree for %s", *n);
            ddp_kvlist_free(&l);
            ddp_strv_clear(&w);
        }
    const struct ddp_kvlist *none = NULL;
    (void)none;
    struct ddp_kvlist l = {0};
    struct ddp_err err = {0};
    ddp_nccl_preset_apply("robust", NULL, &l, &err);
    cr_expect_str_eq(ddp_kvlist_get(&l, "TORCH_NCCL_ASYNC_ERROR_HANDLING")->value, "1");
    cr_expect_str_eq(ddp_kvlist_get(&l, "NCCL_ASYNC_ERROR_HANDLING")->value, "1");
    cr_expect_str_eq(ddp_kvlist_get(&l, "TORCH_NCCL_ENABLE_MONITORING")->value, "1");
    ddp_kvlist_free(&l);
    cr_expect_null(ddp_nccl_preset_vars("nope", true));
}
