/* Unit tests for launcher/topo_cache (and the NVML facts it keeps, nvml.c): the file format round trip, a key
 * that differs is a miss, a damaged file is not used, a symlink is not followed, and the live machine loaded
 * from the cache prints as the live machine discovered now (topo_print, minus the NVML line). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topo/nvml.h"
#include "topo/topo.h"
#include "topo/topo_cache.h"
#include "topo/topo_print.h"

static const char xml[] = "<?xml version=\"1.0\"?>\n<topology/>\n";

Test(topo_cache, format_and_parse_round_trip)
{
    size_t len, xlen = 0;
    char *buf = ddp_topo_cache_format("key\nline 2\n", "{\"found\":false}", xml, sizeof xml, &len);
    const char *nvml = NULL, *x = NULL;
    cr_assert_eq(ddp_topo_cache_parse(buf, len, "key\nline 2\n", &nvml, &x, &xlen), 0);
    cr_expect_str_eq(nvml, "{\"found\":false}");
    cr_expect_str_eq(x, xml);
    cr_expect_eq(xlen, sizeof xml);
    free(buf);
}

Test(topo_cache, another_key_is_stale_and_damage_is_refused)
{
    size_t len, xlen = 0;
    const char *nvml = NULL, *x = NULL;
    char *buf = ddp_topo_cache_format("boot A", "{}", xml, sizeof xml, &len);
    cr_expect_eq(ddp_topo_cache_parse(buf, len, "boot B", &nvml, &x, &xlen), -ESTALE);
    free(buf);
    buf = ddp_topo_cache_format("boot A", "{}", xml, sizeof xml, &len);
    cr_expect_eq(ddp_topo_cache_parse(buf, len - 1, "boot A", &nvml, &x, &xlen), -EBADMSG); /* cut short */
    free(buf);
    char junk[] = "DDPTOPO 2 99999 1 1\nx";
    cr_expect_eq(ddp_topo_cache_parse(junk, sizeof junk - 1, "x", &nvml, &x, &xlen), -EBADMSG);
    /* an older format (version 1 kept the L1 and L2 caches): stale, rediscovered once under the cache's lock */
    char older[] = "DDPTOPO 1 6 2 22\nboot A\0{}\0<?xml version=\"1.0\"?>";
    cr_expect_eq(ddp_topo_cache_parse(older, sizeof older, "boot A", &nvml, &x, &xlen), -ESTALE);
    char other[] = "<?xml version=\"1.0\"?>";
    cr_expect_eq(ddp_topo_cache_parse(other, sizeof other - 1, "x", &nvml, &x, &xlen), -EBADMSG);
}

Test(topo_cache, nvml_static_facts_round_trip_without_live_state)
{
    struct ddp_nvml n = {.found = true, .ngpus = 2};
    snprintf(n.status, sizeof n.status, "NVML: found, driver 550.1, 2 GPUs");
    snprintf(n.driver, sizeof n.driver, "550.1");
    n.gpus = ddp_xcalloc(2, sizeof *n.gpus);
    for (int i = 0; i < 2; i++) {
        snprintf(n.gpus[i].busid, sizeof n.gpus[i].busid, "0000:%02x:00.0", 0x18 + i);
        snprintf(n.gpus[i].uuid, sizeof n.gpus[i].uuid, "GPU-%d", i);
        snprintf(n.gpus[i].name, sizeof n.gpus[i].name, "NVIDIA H200");
        n.gpus[i].mem_total = 150LL << 30;
        n.gpus[i].mem_used = 7LL << 30;
        n.gpus[i].util = 93;
        n.gpus[i].nprocs = 1;
        n.gpus[i].nlinks = 1;
        snprintf(n.gpus[i].link_peer[0], sizeof n.gpus[i].link_peer[0], "0000:%02x:00.0", 0x19 - i);
    }
    char *json = ddp_nvml_static_json(&n);
    cr_expect_null(strstr(json, "93"), "utilisation is live state: %s", json);
    struct ddp_nvml back;
    cr_assert_eq(ddp_nvml_static_parse(json, &back), 0);
    cr_expect(back.found);
    cr_expect_str_eq(back.status, n.status);
    cr_expect_eq(back.ngpus, 2);
    cr_expect_str_eq(back.gpus[1].uuid, "GPU-1");
    cr_expect_eq(back.gpus[1].mem_total, 150LL << 30);
    cr_expect_eq(back.gpus[1].mem_used, -1);
    cr_expect_eq(back.gpus[1].util, -1);
    cr_expect_eq(back.gpus[1].nprocs, 0);
    cr_expect_eq(ddp_nvml_links(&back, "0000:18:00.0", "0000:19:00.0"), 1);
    ddp_nvml_free(&back);
    cr_expect_eq(ddp_nvml_static_parse("{\"found\":true}", &back), -EBADMSG);
    free(json);
    ddp_nvml_free(&n);
}

/* `ddplaunch topo` of t without the NVML line (a cached topology has not read NVML). Caller frees. */
static char *print(const struct ddp_topo *t, char *const *envp)
{
    struct ddp_spec spec;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_topo_print(t, &spec, envp, NULL, NULL, false, f), 0);
    fclose(f);
    ddp_spec_free(&spec);
    char *nv = strstr(buf, "\nNVML");
    cr_assert(nv, "no NVML line in:\n%s", buf);
    char *end = strchrnul(nv + 1, '\n');
    memmove(nv, end, strlen(end) + 1);
    return buf;
}

static struct ddp_topo *load(char *const *envp, bool refresh)
{
    struct ddp_topo_opts o = {.envp = envp, .refresh = refresh};
    struct ddp_topo *t = NULL;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_topo_load_opts(&o, &t, &err), 0, "%s", err.msg);
    return t;
}

/* Remove a test's cache file and the directories ddp_topo_cache made for it under dir. */
static void remove_cache(const char *dir, const char *path)
{
    unlink(path);
    char *sub = ddp_xasprintf("%s/ddplaunch", dir);
    rmdir(sub);
    rmdir(dir);
    free(sub);
}

Test(topo_cache, live_machine_from_the_cache_is_the_live_machine)
{
    char dir[] = "/tmp/ddp-topo-cache-XXXXXX";
    cr_assert(mkdtemp(dir));
    char *xdg = ddp_xasprintf("XDG_RUNTIME_DIR=%s", dir);
    char *envp[] = {xdg, NULL};
    char *path = ddp_xasprintf("%s/ddplaunch/topology", dir);

    struct ddp_topo *live = load(envp, true); /* discovers, writes the cache */
    cr_expect_not(ddp_topo_cached(live));
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "no cache file %s", path);
    cr_expect_eq(st.st_mode & 0777, 0600);
    struct ddp_topo *cached = load(envp, false);
    cr_expect(ddp_topo_cached(cached));
    char *a = print(live, envp), *b = print(cached, envp);
    cr_expect_str_eq(b, a);
    char *ca = ddp_topo_allowed_cpus(live), *cb = ddp_topo_allowed_cpus(cached);
    cr_expect_str_eq(cb, ca);
    free(ca);
    free(cb);
    free(b);
    ddp_topo_destroy(cached);

    /* another HWLOC_* variable: another key, a miss (then the file is rewritten for it) */
    char *envp2[] = {xdg, "HWLOC_DEBUG_VERBOSE=0", NULL};
    cached = load(envp2, false);
    cr_expect_not(ddp_topo_cached(cached));
    ddp_topo_destroy(cached);

    /* a symlink in the cache's place is not followed */
    char *target = ddp_xasprintf("%s/elsewhere", dir);
    cr_assert_eq(rename(path, target), 0);
    cr_assert_eq(symlink(target, path), 0);
    cached = load(envp2, false);
    cr_expect_not(ddp_topo_cached(cached));
    ddp_topo_destroy(cached);

    /* the cache off: never read */
    char *envp3[] = {xdg, "DDPLAUNCH_TOPOLOGY_CACHE=off", NULL};
    cr_expect_null(ddp_topo_cache_key(envp3));

    ddp_topo_destroy(live);
    free(a);
    unlink(target);
    remove_cache(dir, path);
    free(target);
    free(path);
    free(xdg);
}

/* Launches that miss at once (a thousand agents after a boot): one discovers under the cache directory's lock,
 * the others wait for it without taking it (so that they read side by side, not in turn) and read what it wrote;
 * the wait is bounded. */
Test(topo_cache, a_miss_waits_for_the_launch_that_discovers)
{
    char dir[] = "/tmp/ddp-topo-lock-XXXXXX";
    cr_assert(mkdtemp(dir));
    char *xdg = ddp_xasprintf("XDG_RUNTIME_DIR=%s", dir);
    char *envp[] = {xdg, NULL};
    char *path = ddp_xasprintf("%s/ddplaunch/topology", dir);

    int held = ddp_topo_cache_lock(envp);
    cr_assert_geq(held, 0, "no discovery lock");
    cr_expect_eq(ddp_topo_cache_lock(envp), -1, "a second discovery lock while one is held");
    cr_expect_eq(ddp_topo_cache_wait(envp, 50), -ETIMEDOUT, "the wait for a held lock did not run out");

    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) { /* a launch that missed: it must wait, then find the cache written */
        close(p[0]);
        close(held); /* the same open file: its lock is the parent's, as another launch's would be */
        struct ddp_topo *t = load(envp, false);
        char c = ddp_topo_cached(t) ? 'y' : 'n';
        (void)!write(p[1], &c, 1);
        _exit(0);
    }
    close(p[1]);
    usleep(200000);                           /* the child is waiting now */
    struct ddp_topo *live = load(envp, true); /* the launch that holds the lock discovers and writes */
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "no cache file %s", path);
    close(held);
    char c = 0;
    cr_expect_eq(read(p[0], &c, 1), 1);
    cr_expect_eq(c, 'y', "the launch that waited discovered again instead of reading the cache");
    close(p[0]);
    waitpid(child, NULL, 0);
    int again = ddp_topo_cache_lock(envp);
    cr_expect_geq(again, 0, "the lock was not released");
    close(again);
    cr_expect_eq(ddp_topo_cache_wait(envp, 0), 0, "a wait for no lock at all did not return at once");
    int waiting = ddp_topo_cache_lock(envp);
    cr_expect_geq(waiting, 0, "a wait left a lock behind");
    close(waiting);

    ddp_topo_destroy(live);
    remove_cache(dir, path);
    free(path);
    free(xdg);
}

/* A launch that waits for the discovering one wakes when the cache is renamed into place, even while the
 * discoverer still holds the lock (a thousand waiters then read it at once instead of polling the lock). */
Test(topo_cache, a_wait_ends_when_the_cache_is_renamed_in)
{
    char dir[] = "/tmp/ddp-topo-wait-XXXXXX";
    cr_assert(mkdtemp(dir));
    char *xdg = ddp_xasprintf("XDG_RUNTIME_DIR=%s", dir);
    char *envp[] = {xdg, NULL};
    int held = ddp_topo_cache_lock(envp);
    cr_assert_geq(held, 0, "no discovery lock");
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) { /* the discoverer: writes the cache 100 ms on and keeps the lock (the parent's) a while */
        usleep(100000);
        _exit(ddp_topo_cache_write(envp, "key", "{}", "<topology/>", 11) == 0 ? 0 : 1);
    }
    long long t0 = ddp_now_ms();
    int rc = ddp_topo_cache_wait(envp, 3000);
    long long waited = ddp_now_ms() - t0;
    int st = 0;
    waitpid(child, &st, 0);
    cr_expect_eq(WEXITSTATUS(st), 0, "the cache was not written");
    cr_expect_eq(rc, 0, "the wait ran out (%lld ms) although the cache was renamed in", waited);
    cr_expect_lt(waited, 2000, "woke %lld ms after the rename", waited);
    close(held);
    char *path = ddp_xasprintf("%s/ddplaunch/topology", dir);
    remove_cache(dir, path);
    free(path);
    free(xdg);
}

/* Every launch parses the cache's XML: it holds the L3 caches that placement splits a node by, not the L1 and
 * L2 caches that are most of a many-core machine's objects. HWLOC_XMLFILE makes a 128-PU machine with AMD GPUs
 * (no NVML facts to wait for) the "live" one that a discovery reads. */
Test(topo_cache, the_cache_keeps_l3_caches_and_drops_the_others)
{
    const char *src = getenv("DDP_SRCDIR");
    cr_assert(src, "DDP_SRCDIR is not set (run through `make unit`)");
    char *machine = ddp_xasprintf("%s/tests/fixtures/topo/1s-4numa-8gcd-hpe-ex235a-mi250x.xml", src);
    struct ddp_buf whole = {0}, cache = {0};
    cr_assert_eq(ddp_read_regular(machine, 1u << 20, &whole), 0, "%s", machine);
    ddp_buf_add(&whole, "", 1);
    cr_assert(strstr(whole.data, "type=\"L2Cache\"") && strstr(whole.data, "type=\"L1Cache\""), "no L1/L2 there");

    char dir[] = "/tmp/ddp-topo-cache-XXXXXX";
    cr_assert(mkdtemp(dir));
    char *xdg = ddp_xasprintf("XDG_RUNTIME_DIR=%s", dir);
    char *envp[] = {xdg, NULL};
    char *path = ddp_xasprintf("%s/ddplaunch/topology", dir);
    cr_assert_eq(setenv("HWLOC_XMLFILE", machine, 1), 0);
    struct ddp_topo *live = load(envp, true);
    unsetenv("HWLOC_XMLFILE");
    cr_assert_eq(ddp_read_regular(path, 1u << 20, &cache), 0, "no cache file %s", path);
    const char *x = memmem(cache.data, cache.len, "<?xml", 5); /* the file's XML: after its key and NVML facts */
    cr_assert(x, "no XML in the cache");
    cr_expect(strstr(x, "type=\"L3Cache\""), "no L3 cache in the cache");
    for (const char *p = x; (p = strstr(p, "type=\"L")); p++)
        cr_expect(strncmp(p, "type=\"L3Cache\"", 14) == 0, "a cache placement does not use: %.20s", p);
    cr_expect_lt(cache.len, whole.len / 2, "cache %zu bytes of a %zu-byte machine", cache.len, whole.len);

    ddp_topo_destroy(live);
    remove_cache(dir, path);
    ddp_buf_free(&cache);
    ddp_buf_free(&whole);
    free(path);
    free(xdg);
    free(machine);
}
