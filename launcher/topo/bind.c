/* bind: CPU affinity with sched_setaffinity, memory policy with libnuma's set_mempolicy wrapper. */
#include "topo/bind.h"

#include <errno.h>
#include <hwloc.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libnuma reports through these two hooks (weak symbols in libnuma): route them to our logger instead of
 * its own perror, and remember that something failed so callers can check after a void setter. */
static int numa_failed;

void numa_error(char *where)
{
    numa_failed = errno ? errno : EINVAL;
    ddp_debug("libnuma: %s: %s", where, strerror(numa_failed));
}

/* libnuma's prototype lacks the format attribute; it is a printf format. */
void numa_warn(int num, char *fmt, ...) __attribute__((format(printf, 2, 3)));
void numa_warn(int num, char *fmt, ...)
{
    char msg[512];
    va_list ap;

    (void)num;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    msg[strcspn(msg, "\n")] = '\0';
    ddp_debug("libnuma: %s", msg);
}

static char *list_of(hwloc_const_bitmap_t set)
{
    char *s = NULL;

    if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s)
        abort();
    return s;
}

/* Parse a list string into a new bitmap; NULL when it is not a list. */
static hwloc_bitmap_t parse_list(const char *s)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    const char *p;

    if (!set)
        abort();
    for (p = s; *p; p++)
        if (!strchr("0123456789,- ", *p))
            goto bad;
    if (hwloc_bitmap_list_sscanf(set, s) < 0 || hwloc_bitmap_weight(set) < 0)
        goto bad;
    return set;
bad:
    hwloc_bitmap_free(set);
    return NULL;
}

/* The current affinity as a bitmap. 0 or negative errno. */
static int get_affinity(hwloc_bitmap_t out)
{
    int ncpu = 1024;

    for (;;) {
        cpu_set_t *cs = CPU_ALLOC(ncpu);
        size_t sz = CPU_ALLOC_SIZE(ncpu);

        if (!cs)
            abort();
        CPU_ZERO_S(sz, cs);
        if (sched_getaffinity(0, sz, cs) == 0) {
            hwloc_bitmap_zero(out);
            for (int i = 0; i < ncpu; i++)
                if (CPU_ISSET_S(i, sz, cs))
                    hwloc_bitmap_set(out, (unsigned)i);
            CPU_FREE(cs);
            return 0;
        }
        CPU_FREE(cs);
        if (errno != EINVAL || ncpu >= (1 << 20))
            return -errno;
        ncpu *= 2;
    }
}

char *ddp_bind_current_cpus(void)
{
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    char *s = NULL;

    if (!cur)
        abort();
    if (get_affinity(cur) == 0)
        s = list_of(cur);
    hwloc_bitmap_free(cur);
    return s;
}

/* use = the part of want that is allowed. None of it: -EINVAL with err naming what is allowed ("cpus 8-11:
 * none of them is allowed here (allowed: 0-7)"); only some of it: a warning naming what is used. */
static int allowed_part(hwloc_bitmap_t use, hwloc_const_bitmap_t want, hwloc_const_bitmap_t allowed, const char *what,
                        const char *list, const char *them, const char *using, struct ddp_err *err)
{
    hwloc_bitmap_and(use, want, allowed);
    if (hwloc_bitmap_iszero(use)) {
        char *a = list_of(allowed);
        int rc = ddp_errf(err, -EINVAL, "%s %s: none of %s is allowed here (allowed: %s)", what, list, them, a);

        free(a);
        return rc;
    }
    if (!hwloc_bitmap_isequal(use, want)) {
        char *u = list_of(use);

        ddp_warn("%s %s: not all of %s are allowed here; %s %s", what, list, them, using, u);
        free(u);
    }
    return 0;
}

static int bind_cpus(const char *cpus, struct ddp_err *err)
{
    hwloc_bitmap_t want = parse_list(cpus), cur = NULL, use = NULL;
    cpu_set_t *cs = NULL;
    int rc = 0, last;

    if (!want)
        return ddp_errf(err, -EINVAL, "cpus '%s': not a CPU list (expected e.g. 0-3,8)", cpus);
    cur = hwloc_bitmap_alloc();
    use = hwloc_bitmap_alloc();
    if (!cur || !use)
        abort();
    if ((rc = get_affinity(cur)) < 0) {
        rc = ddp_errf(err, rc, "cpus %s: sched_getaffinity: %s", cpus, strerror(-rc));
        goto out;
    }
    if ((rc = allowed_part(use, want, cur, "cpus", cpus, "them", "binding to", err)) < 0)
        goto out;
    last = hwloc_bitmap_last(use);
    cs = CPU_ALLOC(last + 1);
    if (!cs)
        abort();
    CPU_ZERO_S(CPU_ALLOC_SIZE(last + 1), cs);
    {
        unsigned i;

        hwloc_bitmap_foreach_begin(i, use) CPU_SET_S(i, CPU_ALLOC_SIZE(last + 1), cs);
        hwloc_bitmap_foreach_end();
    }
    if (sched_setaffinity(0, CPU_ALLOC_SIZE(last + 1), cs) < 0) {
        int e = errno;
        char *u = list_of(use);

        rc = ddp_errf(err, -e, "cpus %s: sched_setaffinity: %s", u, strerror(e));
        free(u);
    }
out:
    if (cs)
        CPU_FREE(cs);
    hwloc_bitmap_free(want);
    hwloc_bitmap_free(cur);
    hwloc_bitmap_free(use);
    return rc;
}

static int bind_mems(const char *mems, enum ddp_membind mode, struct ddp_err *err)
{
    hwloc_bitmap_t want = parse_list(mems), allowed = NULL, use = NULL;
    struct bitmask *mask = NULL, *mems_allowed = NULL;
    int rc = 0, policy;
    unsigned i;

    if (!want)
        return ddp_errf(err, -EINVAL, "mems '%s': not a NUMA node list (expected e.g. 0 or 0-1)", mems);
    if (numa_available() < 0) {
        rc = ddp_errf(err, -ENOSYS, "mems %s: this kernel has no NUMA support (numa_available failed)", mems);
        goto out;
    }
    allowed = hwloc_bitmap_alloc();
    use = hwloc_bitmap_alloc();
    if (!allowed || !use)
        abort();
    numa_failed = 0;
    errno = 0;
    mems_allowed = numa_get_mems_allowed();
    if (!mems_allowed || numa_failed) {
        int e = numa_failed ? numa_failed : (errno ? errno : EINVAL);

        rc = ddp_errf(err, -e, "mems %s: numa_get_mems_allowed: %s", mems, strerror(e));
        goto out;
    }
    for (i = 0; i < mems_allowed->size; i++)
        if (numa_bitmask_isbitset(mems_allowed, i))
            hwloc_bitmap_set(allowed, i);
    if ((rc = allowed_part(use, want, allowed, "mems", mems, "these NUMA nodes", "using", err)) < 0)
        goto out;
    mask = numa_allocate_nodemask();
    hwloc_bitmap_foreach_begin(i, use)
    {
        if (i < mask->size)
            numa_bitmask_setbit(mask, i);
    }
    hwloc_bitmap_foreach_end();
    /* set_mempolicy (libnuma's wrapper of the system call) rather than the void numa_set_membind(): it
     * returns a status, so a failure cannot be missed. maxnode is size + 1: the kernel ignores the last bit. */
    policy = mode == DDP_MEM_INTERLEAVE ? MPOL_INTERLEAVE : MPOL_BIND;
    if (set_mempolicy(policy, mask->maskp, mask->size + 1) < 0) {
        int e = errno;
        char *u = list_of(use);

        rc = ddp_errf(err, -e, "mems %s: set_mempolicy(%s): %s", u, policy == MPOL_BIND ? "bind" : "interleave",
                      strerror(e));
        free(u);
    }
out:
    if (mask)
        numa_bitmask_free(mask);
    if (mems_allowed)
        numa_bitmask_free(mems_allowed);
    hwloc_bitmap_free(want);
    hwloc_bitmap_free(allowed);
    hwloc_bitmap_free(use);
    return rc;
}

int ddp_bind_self(const char *cpus, const char *mems, enum ddp_membind mode, struct ddp_err *err)
{
    int rc;

    if (cpus && *cpus && (rc = bind_cpus(cpus, err)) < 0)
        return rc;
    if (mode != DDP_MEM_NONE && mems && *mems && (rc = bind_mems(mems, mode, err)) < 0)
        return rc;
    return 0;
}
