/* Unit tests for jobs.c: a published job is listed (with the kernel's view of its user), updated, and gone once
 * closed; a file without a live lock holder is not believed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/jobs.h"
#include "scratch.h"

Test(jobs, publish_update_list_close)
{
    char dir[] = "/tmp/ddp_test_jobs_XXXXXX";
    cr_assert(mkdtemp(dir));
    char *ld = NULL;
    cr_assert(asprintf(&ld, "%s/locks", dir) > 0);
    json_t *st = json_pack("{s:s, s:i, s:i}", "job", "alpha", "nproc", 2, "ranks_alive", 0);
    struct ddp_jobs *j = NULL;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_jobs_publish(ld, st, true, &j, &err), 0, "%s", err.msg);
    json_decref(st);
    json_t *ch = json_pack("{s:i}", "ranks_alive", 2);
    ddp_jobs_update(j, ch);
    json_decref(ch);
    json_t *a = ddp_jobs_list(ld, NULL, 0);
    cr_assert_eq(json_array_size(a), 1);
    json_t *o = json_array_get(a, 0);
    cr_expect_str_eq(json_string_value(json_object_get(o, "job")), "alpha");
    cr_expect_eq(json_integer_value(json_object_get(o, "ranks_alive")), 2);
    cr_expect_eq(json_integer_value(json_object_get(o, "pid")), getpid());
    cr_expect_eq(json_integer_value(json_object_get(o, "uid")), getuid());
    json_decref(a);

    /* a file nobody's lock backs (a crashed job's leftover, or planted) is not listed */
    char *forged = NULL;
    cr_assert(asprintf(&forged, "%s/job-%d.json", ld, (int)getppid()) > 0);
    FILE *f = fopen(forged, "w");
    cr_assert(f);
    fputs("{\"job\":\"forged\"}", f);
    fclose(f);
    a = ddp_jobs_list(ld, NULL, 0);
    cr_expect_eq(json_array_size(a), 1, "only the live job");
    json_decref(a);
    unlink(forged);
    free(forged);

    ddp_jobs_close(j);
    a = ddp_jobs_list(ld, NULL, 0);
    cr_expect_eq(json_array_size(a), 0);
    json_decref(a);
    a = ddp_jobs_list("/nonexistent/ddplaunch-locks", NULL, 0);
    cr_expect_eq(json_array_size(a), 0);
    json_decref(a);
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "rm -rf %s", dir) > 0);
    cr_expect_eq(system(cmd), 0);
    free(cmd);
    free(ld);
}

/* issue 34 item 14: a live job's file that cannot be read (planted unreadable, cut short) hides only itself, and
 * the listing says so */
Test(jobs, a_bad_job_file_hides_only_itself)
{
    char dir[] = "/tmp/ddp_test_jobs_XXXXXX";
    cr_assert(mkdtemp(dir));
    char *ld = NULL;
    cr_assert(asprintf(&ld, "%s/locks", dir) > 0);
    int ready[2], stop[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(stop), 0);
    fflush(NULL);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) { /* a second job */
        json_t *st = json_pack("{s:s}", "job", "beta");
        struct ddp_jobs *j = NULL;
        struct ddp_err err = {0};
        char c = ddp_jobs_publish(ld, st, true, &j, &err) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        if (read(stop[0], &c, 1) < 0)
            _exit(1);
        ddp_jobs_close(j);
        _exit(0);
    }
    char c = 0;
    cr_assert_eq(read(ready[0], &c, 1), 1);
    cr_assert_eq(c, 'y');
    json_t *st = json_pack("{s:s}", "job", "alpha");
    struct ddp_jobs *j = NULL;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_jobs_publish(ld, st, true, &j, &err), 0, "%s", err.msg);
    json_decref(st);
    char *mine = NULL;
    cr_assert(asprintf(&mine, "%s/job-%d.json", ld, (int)getpid()) > 0);
    FILE *f = fopen(mine, "w");
    cr_assert(f);
    fputs("{\"job\": \"alp", f); /* cut short */
    fclose(f);
    char skipped[256];
    json_t *a = ddp_jobs_list(ld, skipped, sizeof skipped);
    cr_expect_eq(json_array_size(a), 1, "the other job is still listed");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(a, 0), "job")), "beta");
    char want[128];
    snprintf(want, sizeof want, "1 job file skipped (job-%d.json: not a JSON object)", (int)getpid());
    cr_expect_str_eq(skipped, want);
    json_decref(a);
    ddp_jobs_close(j);
    a = ddp_jobs_list(ld, skipped, sizeof skipped);
    cr_expect_str_eq(skipped, "", "nothing skipped");
    json_decref(a);
    cr_assert_eq(write(stop[1], "x", 1), 1);
    int ws;
    waitpid(child, &ws, 0);
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "rm -rf %s", dir) > 0);
    cr_expect_eq(system(cmd), 0);
    free(cmd);
    free(mine);
    free(ld);
}

SCRATCH_SUITE(jobs_scratch);

/* issue 40: the job's file is rewritten in place (never cut to zero, which on ext4 makes close() write it out at
 * once): a shorter state leaves exactly its text, and a reader that catches the new text before the old tail is
 * cut still lists the job with the new values. */
Test(jobs_scratch, rewritten_in_place_and_read_before_the_cut)
{
    const char *ld = lockdir;
    char *file = NULL;
    json_t *st = json_pack("{s:s, s:i, s:s}", "job", "beta", "ranks_alive", 0, "pad", "a long value to shrink from");
    struct ddp_jobs *j = NULL;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_jobs_publish(ld, st, true, &j, &err), 0, "%s", err.msg);
    json_decref(st);
    cr_assert(asprintf(&file, "%s/job-%d.json", ld, (int)getpid()) > 0);
    struct stat before;
    cr_assert_eq(stat(file, &before), 0);
    json_t *ch = json_pack("{s:i, s:s}", "ranks_alive", 3, "pad", "");
    ddp_jobs_update(j, ch);
    json_decref(ch);
    struct stat after;
    cr_assert_eq(stat(file, &after), 0);
    cr_expect_eq(after.st_ino, before.st_ino, "the same file, rewritten");
    char buf[512] = {0};
    int fd = open(file, O_RDONLY);
    cr_assert_geq(fd, 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    cr_assert_gt(n, 0);
    cr_expect_str_eq(buf, "{\"job\":\"beta\",\"ranks_alive\":3,\"pad\":\"\"}");
    /* what a reader sees between the write and the cut: the new text, then the old one's tail */
    FILE *f = fopen(file, "a");
    cr_assert(f);
    fputs("o shrink from\"}", f);
    fclose(f);
    json_t *a = ddp_jobs_list(ld, NULL, 0);
    cr_assert_eq(json_array_size(a), 1);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(a, 0), "ranks_alive")), 3);
    json_decref(a);
    /* a file removed meanwhile (a sweep that could not see the job's lock) is made again by the next update */
    cr_assert_eq(unlink(file), 0);
    ch = json_pack("{s:i}", "ranks_alive", 2);
    ddp_jobs_update(j, ch);
    json_decref(ch);
    a = ddp_jobs_list(ld, NULL, 0);
    cr_assert_eq(json_array_size(a), 1, "the job's file came back");
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(a, 0), "ranks_alive")), 2);
    json_decref(a);
    ddp_jobs_close(j);
    free(file);
}

/* issue 40: publishing sweeps the file of a job whose pid is gone; while no pid is gone it looks at nothing more
 * (the lock list, /proc/net/unix, is read only then) */
Test(jobs_scratch, swept_only_when_a_pid_is_gone)
{
    const char *ld = lockdir;
    char *live = NULL, *gone = NULL;
    struct ddp_jobs *j = NULL;
    struct ddp_err err = {0};
    json_t *st = json_pack("{s:s}", "job", "first");
    cr_assert_eq(ddp_jobs_publish(ld, st, true, &j, &err), 0, "%s", err.msg);
    ddp_jobs_close(j);
    pid_t dead = scratch_gone_pid();
    cr_assert(asprintf(&live, "%s/job-%d.json", ld, (int)getppid()) > 0);
    cr_assert(asprintf(&gone, "%s/job-%d.json", ld, (int)dead) > 0);
    FILE *f = fopen(live, "w");
    cr_assert(f);
    fclose(f);
    /* no pid gone: nothing is looked at (a file whose pid lives, launcher or not, waits for that pid) */
    cr_assert_eq(ddp_jobs_publish(ld, st, true, &j, &err), 0, "%s", err.msg);
    cr_expect_eq(access(live, F_OK), 0, "a live pid's file is left");
    ddp_jobs_close(j);
    f = fopen(gone, "w");
    cr_assert(f);
    fclose(f);
    /* a launch told not to sweep (another swept a moment ago: rundir.h) leaves it */
    cr_assert_eq(ddp_jobs_publish(ld, st, false, &j, &err), 0, "%s", err.msg);
    cr_expect_eq(access(gone, F_OK), 0, "swept though told not to");
    ddp_jobs_close(j);
    cr_assert_eq(ddp_jobs_publish(ld, st, true, &j, &err), 0, "%s", err.msg);
    cr_expect_neq(access(gone, F_OK), 0, "the gone job's file is swept");
    ddp_jobs_close(j);
    json_decref(st);
    free(live);
    free(gone);
}
