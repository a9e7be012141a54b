/* Unit tests for rundir: the shared lease info directory and the private directory refuse planted symlinks,
 * wrong owners and unsafe modes; info files of others are not written. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host/rundir.h"
#include "scratch.h"

static char *in_base(const char *name)
{
    return ddp_xasprintf("%s/%s", base, name);
}

SCRATCH_SUITE(rundir);

Test(rundir, shared_dir_created_sticky_1777_whatever_the_umask)
{
    char *p = in_base("locks");
    mode_t old = umask(077);
    int fd = -1;
    struct ddp_err err = {0};
    int rc = ddp_rundir_open_shared(p, &fd, &err);
    umask(old);
    cr_assert_eq(rc, 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(lstat(p, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 01777, "mode %o", st.st_mode & 07777);
    cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    /* opening it again (as another job would) works */
    cr_assert_eq(ddp_rundir_open_shared(p, &fd, &err), 0, "%s", err.msg);
    close(fd);
    free(p);
}

Test(rundir, shared_dir_symlink_refused)
{
    char *target = in_base("attacker");
    char *p = in_base("locks");
    cr_assert_eq(mkdir(target, 01777), 0);
    cr_assert_eq(symlink(target, p), 0);
    int fd = -1;
    struct ddp_err err = {0};
    int rc = ddp_rundir_open_shared(p, &fd, &err);
    cr_expect_eq(rc, -ELOOP, "rc %d: %s", rc, err.msg);
    cr_expect(strstr(err.msg, "symlink") && strstr(err.msg, p), "%s", err.msg);
    free(target);
    free(p);
}

Test(rundir, shared_dir_of_another_user_refused)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to chown");
    char *p = in_base("locks");
    cr_assert_eq(mkdir(p, 0755), 0);
    cr_assert_eq(chown(p, 4321, 4321), 0);
    int fd = -1;
    struct ddp_err err = {0};
    cr_expect_eq(ddp_rundir_open_shared(p, &fd, &err), -EPERM);
    cr_expect(strstr(err.msg, "owned by uid 4321 with mode 0755"), "%s", err.msg);
    /* the same directory in the shared form (another user's job created it first): accepted */
    cr_assert_eq(chmod(p, 01777), 0);
    cr_expect_eq(ddp_rundir_open_shared(p, &fd, &err), 0, "%s", err.msg);
    close(fd);
    free(p);
}

Test(rundir, shared_dir_world_writable_without_sticky_refused)
{
    char *p = in_base("locks");
    cr_assert_eq(mkdir(p, 0700), 0);
    cr_assert_eq(chmod(p, 0777), 0);
    int fd = -1;
    struct ddp_err err = {0};
    cr_expect_eq(ddp_rundir_open_shared(p, &fd, &err), -EPERM);
    cr_expect(strstr(err.msg, "0777") && strstr(err.msg, "sticky"), "%s", err.msg);
    free(p);
}

Test(rundir, info_file_of_another_user_not_written)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to chown");
    char *p = in_base("locks");
    int dfd;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_rundir_open_shared(p, &dfd, &err), 0, "%s", err.msg);
    char *f = ddp_xasprintf("%s/gpu-0000:01:00.0.0.info", p);
    int fd = open(f, O_CREAT | O_WRONLY, 0666);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fchown(fd, 4321, 4321), 0);
    cr_assert_eq(write(fd, "forged\n", 7), 7);
    close(fd);
    cr_expect_eq(ddp_rundir_write_owned(dfd, "gpu-0000:01:00.0.0.info", "pid=1\n", &err), -EPERM);
    char *text = NULL;
    cr_assert_eq(ddp_rundir_read_small(dfd, "gpu-0000:01:00.0.0.info", 100, &text), 0);
    cr_expect_str_eq(text, "forged\n");
    free(text);
    close(dfd);
    free(p);
    free(f);
}

Test(rundir, private_dir_created_0700_and_verified)
{
    char *p = in_base("priv");
    int dfd = -1;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_rundir_make_private(p, &dfd, &err), 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0700);
    close(dfd);
    free(p);
}

Test(rundir, run_dirs_fresh_locked_and_stale_ones_swept)
{
    char xdg[96];
    snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", base);
    char *envp[] = {xdg, NULL};
    char *a = NULL, *b = NULL;
    int fa = -1, fb = -1;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_rundir_run_create(envp, geteuid(), &a, &fa, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_rundir_run_create(envp, geteuid(), &b, &fb, &err), 0, "%s", err.msg);
    cr_expect_str_neq(a, b);
    char *parent = in_base("ddplaunch/run-");
    cr_expect(strncmp(a, parent, strlen(parent)) == 0, "%s", a);
    struct stat st;
    cr_assert_eq(stat(a, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0700);
    /* b's launcher "was SIGKILLed": its lock is gone, a is still in use */
    close(fb);
    char *f = ddp_xasprintf("%s/heartbeat.0", b);
    FILE *fp = fopen(f, "w");
    fclose(fp);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 60), 0, "a directory just made was swept");
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), 1);
    cr_expect_eq(stat(b, &st), -1, "the stale run directory is still there");
    cr_expect_eq(stat(a, &st), 0, "a run directory in use was swept");
    ddp_rundir_run_remove(a, fa);
    cr_expect_eq(stat(a, &st), -1);
    free(f);
    free(parent);
    free(a);
    free(b);
}

/* A launch whose stale run directory is left, as a SIGKILLed launcher's is: its lock closed. */
static char *stale_run_dir(char *const *envp)
{
    char *p = NULL;
    int fd = -1;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_rundir_run_create(envp, geteuid(), &p, &fd, &err), 0, "%s", err.msg);
    close(fd);
    return p;
}

Test(rundir, sweep_of_many_live_launches_runs_once_in_a_while)
{
    enum { LIVE = 70 }; /* more than the 64 below which every launch sweeps */
    char xdg[96];
    snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", base);
    char *envp[] = {xdg, NULL};
    char *live[LIVE];
    int fds[LIVE];
    struct ddp_err err = {0};
    struct stat st;
    for (int i = 0; i < LIVE; i++)
        cr_assert_eq(ddp_rundir_run_create(envp, geteuid(), &live[i], &fds[i], &err), 0, "%s", err.msg);
    char *a = stale_run_dir(envp);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), 1, "no stamp yet: the first launch sweeps");
    cr_expect_eq(stat(a, &st), -1, "%s was not swept", a);
    char *stamp = in_base("ddplaunch/run-sweep");
    cr_assert_eq(lstat(stamp, &st), 0, "no stamp after a sweep of %d", LIVE + 1);
    cr_expect_eq(st.st_size, LIVE + 1, "the stamp says %lld entries", (long long)st.st_size);

    char *b = stale_run_dir(envp);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), -EALREADY, "swept again at once");
    cr_expect_eq(stat(b, &st), 0, "%s was swept", b);
    struct timespec old[2] = {{.tv_sec = time(NULL) - 10}, {.tv_sec = time(NULL) - 10}};
    cr_assert_eq(utimensat(AT_FDCWD, stamp, old, AT_SYMLINK_NOFOLLOW), 0);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), 1, "the last sweep was 10 s ago");
    cr_expect_eq(stat(b, &st), -1, "%s was not swept", b);

    /* a stamp reached through a symlink is not believed, nor written */
    char *target = in_base("planted");
    FILE *fp = fopen(target, "w");
    cr_assert(fp);
    fclose(fp);
    cr_assert_eq(truncate(target, 1000), 0);
    cr_assert_eq(unlink(stamp), 0);
    cr_assert_eq(symlink(target, stamp), 0);
    char *c = stale_run_dir(envp);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), 1, "a symlinked stamp stopped the sweep");
    cr_expect_eq(stat(c, &st), -1, "%s was not swept", c);
    cr_assert_eq(stat(target, &st), 0);
    cr_expect_eq(st.st_size, 1000, "the symlink's target was written");

    /* few launches: every launch sweeps, whatever the stamp's time */
    cr_assert_eq(unlink(stamp), 0);
    for (int i = 0; i < LIVE; i++) {
        ddp_rundir_run_remove(live[i], fds[i]);
        free(live[i]);
    }
    char *d = stale_run_dir(envp);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), 1);
    char *e = stale_run_dir(envp);
    cr_expect_eq(ddp_rundir_sweep(envp, geteuid(), 0), 1, "a small directory was not swept at once");
    cr_expect_eq(lstat(stamp, &st), -1, "a stamp for a small directory");
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(target);
    free(stamp);
}

Test(rundir, run_dir_without_xdg_is_a_fresh_name_in_tmp)
{
    char *envp[] = {NULL};
    char *a = NULL;
    int fa = -1;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_rundir_run_create(envp, geteuid(), &a, &fa, &err), 0, "%s", err.msg);
    char want[64];
    snprintf(want, sizeof want, "/tmp/ddplaunch-%u-", (unsigned)geteuid());
    cr_expect(strncmp(a, want, strlen(want)) == 0 && strlen(a) == strlen(want) + 6, "%s", a);
    ddp_rundir_run_remove(a, fa);
    free(a);
}

Test(rundir, private_dir_wrong_mode_refused)
{
    char *p = in_base("priv");
    cr_assert_eq(mkdir(p, 0700), 0);
    cr_assert_eq(chmod(p, 0755), 0);
    struct ddp_err err = {0};
    cr_expect_eq(ddp_rundir_make_private(p, NULL, &err), -EPERM);
    cr_expect(strstr(err.msg, "0755") && strstr(err.msg, "0700"), "%s", err.msg);
    free(p);
}

Test(rundir, private_dir_symlink_refused)
{
    char *t = in_base("elsewhere");
    char *p = in_base("priv");
    cr_assert_eq(mkdir(t, 0700), 0);
    cr_assert_eq(symlink(t, p), 0);
    struct ddp_err err = {0};
    cr_expect_eq(ddp_rundir_make_private(p, NULL, &err), -ELOOP);
    cr_expect(strstr(err.msg, "symlink"), "%s", err.msg);
    free(t);
    free(p);
}

Test(rundir, private_dir_wrong_owner_refused)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to chown");
    char *p = in_base("priv");
    cr_assert_eq(mkdir(p, 0700), 0);
    cr_assert_eq(chown(p, 4321, 4321), 0);
    struct ddp_err err = {0};
    cr_expect_eq(ddp_rundir_make_private(p, NULL, &err), -EPERM);
    cr_expect(strstr(err.msg, "owned by uid 4321"), "%s", err.msg);
    free(p);
}

Test(rundir, paths_from_envp)
{
    char *env1[] = {"DDPLAUNCH_LOCK_DIR=/x/locks", NULL};
    cr_expect_str_eq(ddp_rundir_lock_dir(env1), "/x/locks");
    const char *spellings[] = {"DDPLAUNCH_LOCK_DIR=/x/locks/", "DDPLAUNCH_LOCK_DIR=/x//locks",
                               "DDPLAUNCH_LOCK_DIR=/x/./locks", "DDPLAUNCH_LOCK_DIR=/x/y/../locks"};
    for (size_t i = 0; i < 4; i++) {
        char *envs[] = {(char *)spellings[i], NULL};
        cr_expect_str_eq(ddp_rundir_lock_dir(envs), "/x/locks", "%s", spellings[i]);
    }
    char *env0[] = {NULL};
    const char *d = ddp_rundir_lock_dir(env0);
    cr_expect(strcmp(d, DDP_RUNDIR_LOCK_DIR) == 0 || strcmp(d, DDP_RUNDIR_LOCK_DIR_FALLBACK) == 0, "%s", d);
    char *env2[] = {"XDG_RUNTIME_DIR=/nonexistent-ddp/run/user/1000", NULL};
    char *p = ddp_rundir_private_path(env2, 1000);
    cr_expect_str_eq(p, "/nonexistent-ddp/run/user/1000/ddplaunch");
    free(p);
    char *env3[] = {"XDG_RUNTIME_DIR=relative", NULL};
    p = ddp_rundir_private_path(env3, 1000);
    cr_expect_str_eq(p, "/tmp");
    free(p);
}

Test(rundir, xdg_runtime_dir_of_another_user_not_used)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to chown");
    char *x = in_base("xdg");
    cr_assert_eq(mkdir(x, 0700), 0);
    char *e = ddp_xasprintf("XDG_RUNTIME_DIR=%s", x);
    char *env[] = {e, NULL};
    char *p = ddp_rundir_private_path(env, 0);
    char *want = ddp_xasprintf("%s/ddplaunch", x);
    cr_expect_str_eq(p, want, "%s", p);
    free(want);
    cr_expect(ddp_rundir_path_trusted(x));
    free(p);
    cr_assert_eq(chown(x, 4321, 4321), 0); /* as after a plain `su` from uid 4321 */
    cr_expect_not(ddp_rundir_path_trusted(x));
    p = ddp_rundir_private_path(env, 0);
    cr_expect_str_eq(p, "/tmp");
    free(p);
    free(e);
    free(x);
}
