/* Unit tests for logdir: torchrun's layout, a fresh run directory each time, missing components created, and
 * nothing written through a symlink this job did not trust or a directory it did not make. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/logdir.h"

static char base[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void setup(void)
{
    snprintf(base, sizeof base, "/tmp/ddp-logdir-test.XXXXXX");
    cr_assert_not_null(mkdtemp(base));
}

static void teardown(void)
{
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

TestSuite(logdir, .init = setup, .fini = teardown);

Test(logdir, torchrun_layout_and_fresh_run_dirs)
{
    struct ddp_logdir *a = NULL, *b = NULL;
    struct ddp_err err = {0};
    char *dir = ddp_xasprintf("%s/x/y", base);
    cr_assert_eq(ddp_logdir_create(dir, "job/1", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_logdir_create(dir, "job/1", &b, &err), 0, "%s", err.msg);
    cr_expect_str_neq(ddp_logdir_path(a), ddp_logdir_path(b));
    char *prefix = ddp_xasprintf("%s/job_1_", dir);
    cr_expect_eq(strncmp(ddp_logdir_path(a), prefix, strlen(prefix)), 0, "%s", ddp_logdir_path(a));
    cr_expect_eq(strlen(ddp_logdir_path(a)), strlen(prefix) + 8);
    struct stat st;
    cr_assert_eq(stat(ddp_logdir_path(a), &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0700);

    cr_assert_eq(ddp_logdir_attempt(a, 0, 2, &err), 0, "%s", err.msg);
    int fd = ddp_logdir_create_file(a, "attempt_0/1/stdout.log", &err);
    cr_assert(fd >= 0, "%s", err.msg);
    cr_expect_eq(write(fd, "hi\n", 3), 3);
    close(fd);
    char *f = ddp_xasprintf("%s/attempt_0/1/stdout.log", ddp_logdir_path(a));
    cr_expect_eq(stat(f, &st), 0);
    cr_expect_eq(st.st_size, 3);
    /* never truncated: a second create of the same file fails */
    cr_expect_eq(ddp_logdir_create_file(a, "attempt_0/1/stdout.log", &err), -EEXIST);
    cr_expect_eq(stat(f, &st), 0);
    cr_expect_eq(st.st_size, 3);
    /* an attempt directory that exists already is refused */
    cr_expect_eq(ddp_logdir_attempt(a, 0, 2, &err), -EEXIST);
    cr_expect(strstr(err.msg, "attempt_0") != NULL, "%s", err.msg);
    cr_expect_eq(count_entries(dir), 2);
    free(f);
    free(prefix);
    free(dir);
    ddp_logdir_close(a);
    ddp_logdir_close(b);
}

Test(logdir, symlinked_component_below_the_run_dir_is_not_followed)
{
    struct ddp_logdir *a = NULL;
    struct ddp_err err = {0};
    char *dir = ddp_xasprintf("%s/logs", base);
    char *victim = ddp_xasprintf("%s/victim", base);
    cr_assert_eq(mkdir(victim, 0755), 0);
    cr_assert_eq(ddp_logdir_create(dir, "r", &a, &err), 0, "%s", err.msg);
    /* someone replaces attempt_1, then attempt_2/0, with a link to another directory */
    char *att1 = ddp_xasprintf("%s/attempt_1", ddp_logdir_path(a));
    cr_assert_eq(symlink(victim, att1), 0);
    cr_expect_eq(ddp_logdir_attempt(a, 1, 1, &err), -EEXIST);
    cr_expect(ddp_logdir_create_file(a, "attempt_1/0/stdout.log", &err) < 0);
    cr_assert_eq(ddp_logdir_attempt(a, 2, 1, &err), 0, "%s", err.msg);
    char *r0 = ddp_xasprintf("%s/attempt_2/0", ddp_logdir_path(a));
    cr_assert_eq(rmdir(r0), 0);
    cr_assert_eq(symlink(victim, r0), 0);
    cr_expect(ddp_logdir_create_file(a, "attempt_2/0/stdout.log", &err) < 0);
    cr_expect(strstr(err.msg, "symlink") != NULL, "%s", err.msg);
    cr_expect_eq(count_entries(victim), 0, "nothing was written through the links");
    free(att1);
    free(r0);
    free(dir);
    free(victim);
    ddp_logdir_close(a);
}

Test(logdir, own_symlink_in_log_dir_path_is_followed_and_bad_paths_refused)
{
    struct ddp_logdir *a = NULL;
    struct ddp_err err = {0};
    char *real = ddp_xasprintf("%s/real", base);
    char *link = ddp_xasprintf("%s/link", base);
    cr_assert_eq(mkdir(real, 0755), 0);
    cr_assert_eq(symlink("real", link), 0);
    char *dir = ddp_xasprintf("%s/sub", link);
    cr_assert_eq(ddp_logdir_create(dir, "r", &a, &err), 0, "%s", err.msg);
    char *sub = ddp_xasprintf("%s/sub", real);
    cr_expect_eq(count_entries(sub), 1, "the run dir was made through this user's own symlink");
    ddp_logdir_close(a);
    a = NULL;

    /* a directory others may write (not sticky) is refused on the way: nothing there is followed, nothing
     * below it is made (issue 24: they could rename the run directory away and plant links for workers) */
    char *open_dir = ddp_xasprintf("%s/open", base);
    cr_assert_eq(mkdir(open_dir, 0777), 0);
    cr_assert_eq(chmod(open_dir, 0777), 0);
    char *planted = ddp_xasprintf("%s/open/logs", base);
    cr_assert_eq(symlink(real, planted), 0);
    cr_expect_eq(ddp_logdir_create(planted, "r", &a, &err), -EPERM);
    cr_expect(strstr(err.msg, "'open' has mode 0777") != NULL, "%s", err.msg);
    cr_expect_eq(count_entries(real), 1, "nothing new in the link's target");
    char *below = ddp_xasprintf("%s/open/new", base);
    cr_expect_eq(ddp_logdir_create(below, "r", &a, &err), -EPERM);
    cr_expect_eq(access(below, F_OK), -1, "nothing made below it");
    free(below);
    /* sticky, as /tmp: fine */
    cr_assert_eq(chmod(open_dir, 01777), 0);
    below = ddp_xasprintf("%s/open/new", base);
    cr_expect_eq(ddp_logdir_create(below, "r", &a, &err), 0, "%s", err.msg);
    ddp_logdir_close(a);
    a = NULL;
    /* ... unless it belongs to another user, who may rename anything in it */
    if (geteuid() == 0) {
        cr_assert_eq(chown(open_dir, 4321, 4321), 0);
        cr_expect_eq(ddp_logdir_create(below, "r", &a, &err), -EPERM);
        cr_expect(strstr(err.msg, "'open' belongs to uid 4321") != NULL, "%s", err.msg);
    }
    free(below);

    /* a file where a directory is expected */
    char *file = ddp_xasprintf("%s/file", base);
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    close(fd);
    char *under = ddp_xasprintf("%s/x", file);
    cr_expect_eq(ddp_logdir_create(file, "r", &a, &err), -ENOTDIR);
    cr_expect(ddp_logdir_create(under, "r", &a, &err) < 0);
    cr_expect_null(a);
    free(real), free(link), free(dir), free(sub), free(open_dir), free(planted), free(file), free(under);
}
