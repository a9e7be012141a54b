/* Unit tests for records.c: a job's events fed in as the driver feeds them (an attempt of two workers, one
 * exits 3, the other is stopped by SIGTERM; a restart; a recognised line; a timeout's root cause told how its
 * rank ended), then events.jsonl and summary.json read back with jansson and the console summary as printed.
 * The workers are stand-ins: struct ddp_runner_attempt/ddp_runner_worker as the runner fills them, without processes
 * (fake_runner_attempt.h).
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_runner_attempt.h"
#include "host/logdir.h"
#include "records/records.h"
#include "scratch.h"

SCRATCH_SUITE(records);

struct job {
    struct ddp_spec spec;
    struct ddp_plan_job job;
    struct ddp_logdir *logdir;
    char *env[3];
    struct ddp_output out;
    struct ddp_records *r;
};

static void job_open(struct job *j)
{
    struct ddp_err err = {0};
    memset(j, 0, sizeof *j);
    ddp_spec_init(&j->spec);
    j->spec.name = ddp_xstrdup("train");
    j->spec.program = ddp_xstrdup("/bin/train");
    j->spec.max_restarts = 1;
    cr_assert_eq(ddp_logdir_create(base, "rid", &j->logdir, &err), 0, "%s", err.msg);
    j->env[0] = ddp_xasprintf("DDPLAUNCH_LOCK_DIR=%s", lockdir);
    j->env[1] = ddp_xasprintf("XDG_RUNTIME_DIR=%s", base);
    j->job = (struct ddp_plan_job){
        .spec = &j->spec, .base_env = j->env, .hostname = "node-a", .run_id = "rid", .logdir = j->logdir};
    ddp_output_init(&j->out, -1, -1);
    struct ddp_records_config cfg = {
        .job = &j->job, .master_addr = "127.0.0.1", .master_port = 29511, .nnodes = 1, .nproc = 2};
    j->r = ddp_records_open(cfg, &j->out);
    cr_assert_not_null(j->r);
}

static void job_close(struct job *j)
{
    ddp_records_close(j->r);
    ddp_output_free(&j->out);
    ddp_logdir_close(j->logdir);
    ddp_spec_free(&j->spec);
    free(j->env[0]);
    free(j->env[1]);
}

static json_t *read_events(size_t *n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cat %s/rid_*/events.jsonl", base);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    json_t *all = json_array();
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *ev = json_loads(line, 0, &e);
        cr_assert_not_null(ev, "events.jsonl: not JSON: %s (%s)", line, e.text);
        json_array_append_new(all, ev);
    }
    pclose(f);
    *n = json_array_size(all);
    return all;
}

static json_t *read_summary(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cat %s/rid_*/summary.json", base);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    json_error_t e;
    json_t *s = json_loadf(f, 0, &e);
    pclose(f);
    cr_assert_not_null(s, "summary.json: %s", e.text);
    return s;
}

static const char *ev_name(json_t *evs, size_t i)
{
    return json_string_value(json_object_get(json_array_get(evs, i), "event"));
}

/* the first event named name at or after *from (advanced past it) */
static json_t *ev_find(json_t *evs, const char *name, size_t *from)
{
    for (size_t i = *from; i < json_array_size(evs); i++)
        if (strcmp(ev_name(evs, i), name) == 0) {
            *from = i + 1;
            return json_array_get(evs, i);
        }
    cr_assert_fail("no event %s after %zu", name, *from);
    return NULL;
}

static json_int_t int_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "%s is not an integer", key);
    return json_integer_value(v);
}

static const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

Test(records, failure_restart_failure, .init = cr_redirect_stderr)
{
    struct job j;
    job_open(&j);

    /* attempt 0: rank 1 exits 3 (the root cause), rank 0 is stopped */
    struct ddp_runner_attempt *a0 = fake_attempt(0, 2);
    ddp_records_attempt_begin(j.r, a0);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 1), 3, 0);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 1));
    ddp_records_root(j.r, ddp_runner_attempt_worker(a0, 1), "exited with code 3", DDP_CLASS_NONE);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 0), 0, SIGTERM);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 0));
    ddp_records_decision(j.r, 0, "restart", 1, 2, 1000, 0, "restarting with 2 workers (restart 1 of 1)");

    /* attempt 1: rank 0 prints a CUDA out-of-memory line and exits 1, rank 1 is stopped */
    struct ddp_runner_attempt *a1 = fake_attempt(1, 2);
    ddp_records_attempt_begin(j.r, a1);
    const char *oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
    ddp_records_recognised(j.r, ddp_runner_attempt_worker(a1, 0), DDP_CLASS_CUDA_OOM, oom, strlen(oom));
    fake_worker_ended(ddp_runner_attempt_worker(a1, 0), 1, 0);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a1, 0));
    ddp_records_root(j.r, ddp_runner_attempt_worker(a1, 0), "exited with code 1", DDP_CLASS_NONE);
    fake_worker_ended(ddp_runner_attempt_worker(a1, 1), 0, SIGTERM);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a1, 1));
    char line[256];
    ddp_records_root_line(j.r, line, sizeof line);
    cr_expect(strstr(line, "rank 0") && strstr(line, "cuda-oom"), "root line: %s", line);
    ddp_records_decision(j.r, 1, "exit", 0, 0, 0, 1, "no restarts left");
    ddp_records_job_end(j.r, 1, "failed", NULL);
    ddp_records_job_end(j.r, 1, "failed", NULL); /* once */
    ddp_records_print_summary(j.r, 1, &j.out);
    job_close(&j);

    size_t n;
    json_t *evs = read_events(&n);
    const char *want[] = {"job_start",     "attempt_start", "worker_exit", "worker_exit", "decision",
                          "attempt_start", "worker_exit",   "worker_exit", "decision",    "job_end"};
    cr_assert_eq(n, sizeof want / sizeof *want, "%zu events", n);
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(ev_name(evs, i), want[i], "event %zu", i);
    size_t at = 0;
    json_t *js = ev_find(evs, "job_start", &at);
    cr_expect_str_eq(str_of(js, "run_id"), "rid");
    cr_expect_str_eq(str_of(js, "host"), "node-a");
    cr_expect_eq(int_of(js, "master_port"), 29511);
    cr_expect_eq(int_of(js, "nproc"), 2);
    json_t *as = ev_find(evs, "attempt_start", &at);
    json_t *w1 = json_array_get(json_object_get(as, "workers"), 1);
    cr_expect_eq(int_of(w1, "pid"), 1002, "the program's pid");
    json_t *x = ev_find(evs, "worker_exit", &at);
    cr_expect_eq(int_of(x, "rank"), 1);
    cr_expect_eq(int_of(x, "exit_code"), 3);
    cr_expect(json_is_null(json_object_get(x, "signal")));
    cr_expect_str_eq(str_of(x, "class"), "exit-3");
    x = ev_find(evs, "worker_exit", &at);
    cr_expect_eq(int_of(x, "rank"), 0);
    cr_expect(json_is_null(json_object_get(x, "exit_code")));
    cr_expect_str_eq(str_of(x, "signal"), "SIGTERM");
    json_t *d = ev_find(evs, "decision", &at);
    cr_expect_str_eq(str_of(d, "action"), "restart");
    cr_expect_eq(int_of(d, "next_attempt"), 1);
    ev_find(evs, "attempt_start", &at);
    x = ev_find(evs, "worker_exit", &at);
    cr_expect_eq(int_of(x, "attempt"), 1);
    cr_expect_str_eq(str_of(x, "class"), "cuda-oom", "the recognised line's class");
    d = ev_find(evs, "decision", &at);
    cr_expect_str_eq(str_of(d, "action"), "exit");
    json_t *je = ev_find(evs, "job_end", &at);
    cr_expect_eq(int_of(je, "exit_status"), 1);
    cr_expect_eq(int_of(je, "attempts"), 2);
    json_decref(evs);

    json_t *s = read_summary();
    cr_expect_str_eq(str_of(s, "result"), "failed");
    cr_expect_eq(int_of(s, "exit_status"), 1);
    cr_expect_eq(int_of(s, "attempts"), 2);
    cr_expect_str_eq(str_of(s, "job"), "train");
    json_t *root = json_object_get(s, "root_cause");
    cr_assert(json_is_object(root), "a root cause");
    cr_expect_eq(int_of(root, "rank"), 0, "attempt 1's rank 0: the restart forgot attempt 0's");
    cr_expect_str_eq(str_of(root, "class"), "cuda-oom");
    json_decref(s);

    fflush(stderr);
    char buf[8192] = "";
    FILE *e = cr_get_redirected_stderr();
    size_t got = fread(buf, 1, sizeof buf - 1, e);
    buf[got] = '\0';
    /* the job's name, as report and the SVG say it (issue 54), not the program's path */
    cr_expect(strstr(buf, "\ntrain FAILED (exit status 1)"), "%s", buf);
    cr_expect(strstr(buf, "rank      : 0 (local_rank: 0)"), "%s", buf);
    cr_expect(strstr(buf, "class     : cuda-oom"), "%s", buf);
    fake_attempt_free(a0);
    fake_attempt_free(a1);
}

Test(records, timeout_root_told_how_it_ended)
{
    struct job j;
    job_open(&j);
    struct ddp_runner_attempt *a0 = fake_attempt(0, 2);
    ddp_records_attempt_begin(j.r, a0);
    /* a stall timeout blames rank 1 while both still run; then both are stopped */
    ddp_records_timeout(j.r, 0, DDP_CLASS_HANG, ddp_runner_attempt_worker(a0, 1), "no heartbeat for 2s");
    ddp_records_root(j.r, ddp_runner_attempt_worker(a0, 1), "no heartbeat for 2s", DDP_CLASS_HANG);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 0), 0, SIGTERM);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 0));
    ddp_records_exited(j.r, ddp_runner_attempt_worker(a0, 0), DDP_CLASS_HANG);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 1), 0, SIGKILL);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 1));
    ddp_records_exited(j.r, ddp_runner_attempt_worker(a0, 1), DDP_CLASS_HANG);
    ddp_records_decision(j.r, 0, "exit", 0, 0, 0, 124, "timeout");
    ddp_records_job_end(j.r, 124, "timeout", "no heartbeat for 2s");
    job_close(&j);

    size_t n, at = 0;
    json_t *evs = read_events(&n);
    json_t *t = ev_find(evs, "timeout", &at);
    cr_expect_eq(int_of(t, "rank"), 1);
    cr_expect_str_eq(str_of(t, "class"), ddp_class_name(DDP_CLASS_HANG));
    json_decref(evs);
    json_t *s = read_summary();
    cr_expect_str_eq(str_of(s, "result"), "timeout");
    cr_expect_str_eq(str_of(s, "timeout"), "no heartbeat for 2s");
    json_t *root = json_object_get(s, "root_cause");
    cr_assert(json_is_object(root));
    cr_expect_eq(int_of(root, "rank"), 1);
    cr_expect_str_eq(str_of(root, "class"), ddp_class_name(DDP_CLASS_HANG));
    cr_expect_str_eq(str_of(root, "signal"), "SIGKILL", "the root cause says how rank 1 ended");
    json_decref(s);
    fake_attempt_free(a0);
}

Test(records, success_has_no_root_cause)
{
    struct job j;
    job_open(&j);
    struct ddp_runner_attempt *a0 = fake_attempt(0, 1);
    ddp_records_attempt_begin(j.r, a0);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 0), 0, 0);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 0));
    ddp_records_job_end(j.r, 0, "succeeded", NULL);
    job_close(&j);
    json_t *s = read_summary();
    cr_expect_str_eq(str_of(s, "result"), "succeeded");
    cr_expect(json_is_null(json_object_get(s, "root_cause")));
    cr_expect_eq(json_array_size(json_object_get(s, "failures")), 0u);
    cr_expect_str_eq(str_of(s, "run_id"), "rid");
    json_decref(s);
    fake_attempt_free(a0);
}

/* CI, ASan build: rank 1 failed before rank 0's shim had started its program; attempt_start was written at that
 * failure and named rank 0's shim, worker_exit its program. Now attempt_start waits for the late program, keeps
 * its place before the failure's events, and names the pid worker_exit names. */
Test(records, attempt_start_waits_for_a_late_program, .init = cr_redirect_stderr)
{
    struct job j;
    job_open(&j);
    struct ddp_runner_attempt *a0 = fake_attempt(0, 2);
    fake_worker_pid(ddp_runner_attempt_worker(a0, 0),
                    ddp_runner_worker_pgid(
                        ddp_runner_attempt_worker(a0, 0))); /* rank 0's shim has not said its program's pid yet */
    ddp_records_attempt_begin(j.r, a0);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 1), 3, 0); /* rank 1 fails first */
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 1));
    ddp_records_root(j.r, ddp_runner_attempt_worker(a0, 1), "exited with code 3", DDP_CLASS_NONE);
    ddp_records_event(j.r, "probe", json_pack("{s:i}", "attempt", 0));
    fake_worker_pid(ddp_runner_attempt_worker(a0, 0),
                    ddp_runner_worker_pgid(ddp_runner_attempt_worker(a0, 0)) + 7); /* now its program started */
    ddp_records_attempt_flush(j.r, a0);
    fake_worker_ended(ddp_runner_attempt_worker(a0, 0), 0, SIGTERM);
    ddp_records_worker_exit(j.r, ddp_runner_attempt_worker(a0, 0));
    ddp_records_job_end(j.r, 3, "failed", NULL);
    job_close(&j);

    size_t n;
    json_t *evs = read_events(&n);
    size_t from = 0;
    json_t *start = ev_find(evs, "attempt_start", &from);
    cr_expect_eq(from, 2u, "attempt_start comes right after job_start, not after the failure");
    json_t *w0 = json_array_get(json_object_get(start, "workers"), 0);
    cr_expect_eq(int_of(w0, "pid"), ddp_runner_worker_pgid(ddp_runner_attempt_worker(a0, 0)) + 7,
                 "attempt_start names rank 0's program, not its shim");
    json_t *x1 = ev_find(evs, "worker_exit", &from);
    cr_expect_eq(int_of(x1, "rank"), 1);
    ev_find(evs, "probe", &from);
    json_t *x0 = ev_find(evs, "worker_exit", &from);
    cr_expect_eq(int_of(x0, "pid"), int_of(w0, "pid"), "one pid for rank 0 in attempt_start and worker_exit");
    cr_expect(strcmp(str_of(start, "ts"), str_of(x1, "ts")) <= 0, "attempt_start is stamped when it began");
    ev_find(evs, "job_end", &from);
    json_decref(evs);
    fake_attempt_free(a0);
}
