/* Unit tests for jobs.c: a published job is listed (with the kernel's view of its user), updated, and gone once
 * closed; a file without a live lock holder is not believed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/jobs.h"

Test(jobs, publish_update_list_close)
{
    char dir[] = "/tmp/ddp_test_jobs_XXXXXX";
    cr_assert(mkdtemp(dir));
    char *ld = NULL;
    cr_assert(asprintf(&ld, "%s/locks", dir) > 0);
    json_t *st = json_pack("{s:s, s:i, s:i}", "job", "alpha", "nproc", 2, "ranks_alive", 0);
    struct ddp_jobs *j = NULL;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_jobs_publish(ld, st, &j, &err), 0, "%s", err.msg);
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
        char c = ddp_jobs_publish(ld, st, &j, &err) == 0 ? 'y' : 'n';
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
    cr_assert_eq(ddp_jobs_publish(ld, st, &j, &err), 0, "%s", err.msg);
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
