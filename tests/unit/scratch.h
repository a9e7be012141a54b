/* A scratch directory for each test of a suite (Criterion runs every test in its own process): base is
 * /tmp/ddp-SUITE-test.XXXXXX, lockdir base/locks (not created); both are removed with everything in them after
 * the test. Use: SCRATCH_SUITE(lease); */
#ifndef DDP_TEST_SCRATCH_H
#define DDP_TEST_SCRATCH_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[64];
static char lockdir[96];

static int scratch_remove(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static inline void scratch_make(const char *suite)
{
    snprintf(base, sizeof base, "/tmp/ddp-%s-test.XXXXXX", suite);
    cr_assert_not_null(mkdtemp(base));
    snprintf(lockdir, sizeof lockdir, "%s/locks", base);
}

/* A pid that no process has: a child that exited and was reaped (a pid is not taken again this soon). */
static inline pid_t scratch_gone_pid(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(0);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

static inline void scratch_remove_all(void)
{
    nftw(base, scratch_remove, 16, FTW_DEPTH | FTW_PHYS);
}

#define SCRATCH_SUITE(suite)                                                                                           \
    static void scratch_setup_##suite(void)                                                                            \
    {                                                                                                                  \
        scratch_make(#suite);                                                                                          \
    }                                                                                                                  \
    TestSuite(suite, .init = scratch_setup_##suite, .fini = scratch_remove_all)

#endif
