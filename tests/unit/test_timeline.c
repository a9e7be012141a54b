/* Unit tests for timeline.c: the run's timeline built from events (no files), printed and drawn. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records/timeline.h"
#include "scratch.h"

static const char *events_text =
    "[{\"v\":1,\"ts\":\"2026-12-01T01:00:00.000Z\",\"event\":\"job_start\",\"job\":\"train\",\"host\":\"gpu7\"},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:00.500Z\",\"event\":\"attempt_start\",\"attempt\":0,"
    " \"workers\":[{\"rank\":0,\"local_rank\":0,\"gpu\":0},{\"rank\":1,\"local_rank\":1,\"gpu\":1}]},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:10.000Z\",\"event\":\"timeout\",\"attempt\":0,\"class\":\"collective-timeout\","
    " \"rank\":0,\"reason\":\"rank 0 reported a collective timeout (collective-timeout)\"},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:10.100Z\",\"event\":\"worker_exit\",\"attempt\":0,\"rank\":1,\"pid\":9,"
    " \"exit_code\":null,\"signal\":\"SIGABRT\",\"class\":\"abort\"},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:10.200Z\",\"event\":\"worker_exit\",\"attempt\":0,\"rank\":0,\"pid\":8,"
    " \"exit_code\":1,\"signal\":null,\"class\":\"collective-timeout\"},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:10.300Z\",\"event\":\"hang\",\"attempt\":0,\"confidence\":\"high\","
    " \"why\":\"rank 0 waits in all_reduce; rank 1 is not in it\","
    " \"culprits\":[{\"rank\":1,\"frame\":\"t.py:18 in load_batch <x>\"}]},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:10.300Z\",\"event\":\"decision\",\"attempt\":0,\"action\":\"exit\","
    " \"why\":\"no restarts left\"},"
    "{\"v\":1,\"ts\":\"2026-12-01T01:00:10.400Z\",\"event\":\"job_end\",\"exit_status\":124,\"result\":\"timeout\"}]";

static const char *last_output(void *arg, int attempt, int local_rank, const char *before)
{
    (void)arg;
    cr_expect_eq(attempt, 0);
    cr_expect_str_eq(before ? before : "", "2026-12-01T01:00:10.000Z", "last output is taken before the timeout");
    return local_rank == 1 ? "2026-12-01T01:00:02.000Z" : "2026-12-01T01:00:09.000Z";
}

static char *render(const struct ddp_timeline *t, bool svg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (svg)
        ddp_timeline_svg(f, t);
    else
        ddp_timeline_print(f, t);
    fclose(f);
    return buf;
}

Test(timeline, text_and_svg_from_events)
{
    json_error_t je;
    json_t *ev = json_loads(events_text, 0, &je);
    cr_assert(ev, "%s", je.text);
    struct ddp_timeline *t;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_timeline_build(ev, last_output, NULL, &t, &err), 0, "%s", err.msg);
    char *txt = render(t, false);
    cr_expect(strstr(txt, "job train on gpu7: timeout, exit status 124, 1 attempt, 10.4 s\n") != NULL, "%s", txt);
    cr_expect(strstr(txt, "  0      +0.500s   +9.000s      +10.200s  collective-timeout (exit 1)\n") != NULL, "%s",
              txt);
    cr_expect(strstr(txt, "  1      +0.500s   +2.000s      +10.100s  abort (SIGABRT)  CULPRIT\n"
                          "         at t.py:18 in load_batch <x>\n") != NULL,
              "%s", txt);
    cr_expect(strstr(txt, "  +10.000s timeout: rank 0 reported") != NULL, "%s", txt);
    free(txt);
    char *svg = render(t, true);
    cr_expect(strstr(svg, "<rect class=\"rank\" data-rank=\"1\" data-attempt=\"0\"") != NULL);
    cr_expect(strstr(svg, "fill=\"#d32f2f\" rx=\"3\"><title>rank 1: abort SIGABRT at t.py:18 in load_batch &lt;x&gt;"
                          "</title>") != NULL,
              "culprit red, text escaped: %s", svg);
    cr_expect(strstr(svg, "<x>") == NULL, "no unescaped text");
    free(svg);
    ddp_timeline_free(t);
    json_decref(ev);
}

/* issue 23 item 12: an ordinary failure's root cause is marked; "decision: exit" says something; the hang mark
 * does not say "hang" twice */
Test(timeline, root_cause_of_an_ordinary_failure_and_texts)
{
    const char *text =
        "[{\"v\":1,\"ts\":\"2026-12-01T01:00:00.000Z\",\"event\":\"job_start\",\"job\":\"t\",\"host\":\"h\"},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:00.100Z\",\"event\":\"attempt_start\",\"attempt\":0,"
        " \"workers\":[{\"rank\":0,\"local_rank\":0},{\"rank\":1,\"local_rank\":1}]},"
        /* the stopped rank's record may come first: the decision's root_rank says which one failed */
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:01.000Z\",\"event\":\"worker_exit\",\"attempt\":0,\"rank\":0,"
        " \"exit_code\":null,\"signal\":\"SIGTERM\",\"class\":\"signal\"},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:01.100Z\",\"event\":\"worker_exit\",\"attempt\":0,\"rank\":1,"
        " \"exit_code\":3,\"signal\":null,\"class\":\"exit-3\"},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:01.200Z\",\"event\":\"decision\",\"attempt\":0,\"action\":\"exit\","
        " \"exit_status\":3,\"why\":\"\",\"root_rank\":1},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:01.300Z\",\"event\":\"job_end\",\"exit_status\":3,\"result\":\"failed\"}]";
    json_t *ev = json_loads(text, 0, NULL);
    cr_assert(ev);
    struct ddp_timeline *t;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_timeline_build(ev, NULL, NULL, &t, &err), 0, "%s", err.msg);
    char *txt = render(t, false);
    cr_expect(strstr(txt, "exit-3 (exit 3)  ROOT CAUSE\n") != NULL, "%s", txt);
    cr_expect(strstr(txt, "signal (SIGTERM)\n") != NULL, "the stopped rank is not the root cause: %s", txt);
    cr_expect(strstr(txt, "decision: exit with status 3\n") != NULL, "%s", txt);
    free(txt);
    char *svg = render(t, true);
    cr_expect(strstr(svg, ">rank 1 (root cause)</text>") != NULL, "%s", svg);
    cr_expect(strstr(svg, "fill=\"#e65100\" rx=\"3\"><title>rank 1: exit-3") != NULL, "%s", svg);
    free(svg);
    ddp_timeline_free(t);
    json_decref(ev);

    /* the hang mark: "hang: verdict (high confidence): ...", not "hang: hang verdict" */
    ev = json_loads(events_text, 0, NULL);
    cr_assert_eq(ddp_timeline_build(ev, NULL, NULL, &t, &err), 0, "%s", err.msg);
    txt = render(t, false);
    cr_expect(strstr(txt, "hang: verdict (high confidence): rank 0 waits") != NULL, "%s", txt);
    cr_expect(strstr(txt, "ROOT CAUSE") == NULL, "a hang's culprit is the root cause, marked CULPRIT: %s", txt);
    free(txt);
    ddp_timeline_free(t);
    json_decref(ev);
}

Test(timeline, not_a_record)
{
    json_t *ev = json_loads("[{\"event\":\"worker_exit\"}]", 0, NULL);
    struct ddp_timeline *t = NULL;
    struct ddp_err err = {0};
    cr_expect_eq(ddp_timeline_build(ev, NULL, NULL, &t, &err), -EINVAL);
    cr_expect_null(t);
    cr_expect(strstr(err.msg, "job_start") != NULL);
    json_decref(ev);
}

SCRATCH_SUITE(timeline_files);

/* issue 34 item 11: a valid attempt_start line of 101 KB (about 430 workers) is read whole, not in 64 KiB pieces */
Test(timeline_files, a_long_line_is_read_whole)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/events.jsonl", base) > 0);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"v\":1,\"ts\":\"2026-12-01T01:00:00.000Z\",\"event\":\"job_start\",\"job\":\"t\","
               "\"host\":\"h\"}\n");
    fprintf(f, "{\"v\":1,\"ts\":\"2026-12-01T01:00:00.500Z\",\"event\":\"attempt_start\",\"attempt\":0,"
               "\"argv\":[\"");
    for (int i = 0; i < 101 * 1024; i++)
        fputc('a' + i % 26, f);
    fprintf(f, "\"],\"workers\":[{\"rank\":0,\"local_rank\":0,\"gpu\":0}]}\n");
    fprintf(f, "{\"v\":1,\"ts\":\"2026-12-01T01:00:01.000Z\",\"event\":\"worker_exit\",\"attempt\":0,"
               "\"rank\":0,\"pid\":9,\"exit_code\":0,\"signal\":null,\"class\":\"ok\"}\n");
    fprintf(f, "{\"v\":1,\"ts\":\"2026-12-01T01:00:01.100Z\",\"event\":\"job_end\",\"exit_status\":0,"
               "\"result\":\"ok\"}"); /* no newline at the end: the last line still counts */
    fclose(f);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    cr_assert_eq(ddp_timeline_command(base, NULL, out), 0);
    fclose(out);
    cr_expect(strstr(buf, "1 attempt,") != NULL, "the attempt is seen: %s", buf);
    cr_expect(strstr(buf, "0 attempts") == NULL, "%s", buf);
    free(buf);
    free(path);
}

/* issue 31: a suspect event from the flight recorder says which collective each rank reached */
Test(timeline, suspect_says_the_collective_each_rank_reached)
{
    static const char text[] =
        "[{\"v\":1,\"ts\":\"2026-12-01T01:00:00.000Z\",\"event\":\"job_start\",\"job\":\"t\",\"host\":\"h\"},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:00.500Z\",\"event\":\"attempt_start\",\"attempt\":0,"
        " \"workers\":[{\"rank\":0,\"local_rank\":0,\"gpu\":0},{\"rank\":1,\"local_rank\":1,\"gpu\":1}]},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:46.000Z\",\"event\":\"suspect\",\"attempt\":0,\"quiet_ms\":31000,"
        " \"culprits\":[{\"rank\":1,\"frame\":\"t.py:36 in load_batch\"}],\"action\":\"warn\","
        " \"recorder\":{\"verdict\":\"behind\",\"pg\":\"1\",\"seq\":6},"
        " \"reached\":{\"0\":[{\"pg\":\"0\",\"last_enqueued\":9},{\"pg\":\"1\",\"last_enqueued\":6}],"
        "            \"1\":[{\"pg\":\"0\",\"last_enqueued\":9},{\"pg\":\"1\",\"last_enqueued\":5}]}},"
        "{\"v\":1,\"ts\":\"2026-12-01T01:00:50.000Z\",\"event\":\"job_end\",\"exit_status\":0,\"result\":\"ok\"}]";
    json_error_t je;
    json_t *ev = json_loads(text, 0, &je);
    cr_assert(ev, "%s", je.text);
    struct ddp_timeline *t;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_timeline_build(ev, NULL, NULL, &t, &err), 0, "%s", err.msg);
    char *txt = render(t, false);
    cr_expect(strstr(txt, "suspected hang after 31s without progress: rank 1 at t.py:36 in load_batch; reached rank 0 "
                          "#6 (pg 1) rank 1 #5 (pg 1) (warn)") != NULL,
              "%s", txt);
    free(txt);
    ddp_timeline_free(t);
    json_decref(ev);
}
