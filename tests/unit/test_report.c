/* Unit tests for report.c: torch's @record error files, signal names, the summary block. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "records/report.h"

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/ddp_test_report_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(report, torch_record_error_file)
{
    /* as written by torch.distributed.elastic.multiprocessing.errors.record (1.13 and 2.x) */
    char *p = write_tmp("{\"message\": {\"message\": \"RuntimeError: boom \\u00e9\", \"extraInfo\": "
                        "{\"py_callstack\": \"Traceback (most recent call last):\\n  File \\\"t.py\\\", line 3\\n"
                        "RuntimeError: boom\\n\", \"timestamp\": \"1795992869\"}}}");
    char *msg, *tb;
    long long ts;
    cr_assert_eq(ddp_report_read_error_file(p, &msg, &tb, &ts), 0);
    cr_expect_str_eq(msg, "RuntimeError: boom \xc3\xa9");
    cr_expect(strstr(tb, "line 3\nRuntimeError: boom") != NULL, "%s", tb);
    cr_expect_eq(ts, 1795992869LL);
    free(msg);
    free(tb);
    unlink(p);
    free(p);
}

Test(report, plain_message_and_bad_files)
{
    char *p = write_tmp("{\"other\": [1, 2, {\"x\": null}], \"message\": \"plain text\"}");
    char *msg, *tb;
    long long ts;
    cr_assert_eq(ddp_report_read_error_file(p, &msg, &tb, &ts), 0);
    cr_expect_str_eq(msg, "plain text");
    cr_expect_null(tb);
    free(msg);
    unlink(p);
    free(p);
    cr_expect_eq(ddp_report_read_error_file("/nonexistent/error.json", &msg, &tb, &ts), -ENOENT);
    p = write_tmp("{\"message\": ");
    cr_expect_eq(ddp_report_read_error_file(p, &msg, &tb, &ts), -EINVAL);
    unlink(p);
    free(p);
    p = write_tmp("");
    cr_expect_eq(ddp_report_read_error_file(p, &msg, &tb, &ts), -EINVAL);
    unlink(p);
    free(p);
}

Test(report, signal_names)
{
    cr_expect_str_eq(ddp_report_signame(SIGSEGV), "SIGSEGV");
    cr_expect_str_eq(ddp_report_signame(SIGUSR1), "SIGUSR1");
    cr_expect_eq(ddp_report_signum("SIGUSR1"), SIGUSR1);
    cr_expect_eq(ddp_report_signum("usr2"), SIGUSR2);
    cr_expect_eq(ddp_report_signum("15"), SIGTERM);
    cr_expect_eq(ddp_report_signum("SIGNOPE"), -EINVAL);
}

Test(report, summary_root_cause_first_with_error_file)
{
    char *ef = write_tmp("{\"message\": {\"message\": \"ValueError: bad lr\", \"extraInfo\": {\"py_callstack\": "
                         "\"Traceback\\nValueError: bad lr\", \"timestamp\": \"1\"}}}");
    const char *tail[] = {"line one", "line two"};
    struct ddp_report_entry root = {.rank = 2,
                                    .local_rank = 2,
                                    .host = "node7",
                                    .pid = 4242,
                                    .exit_code = 1,
                                    .error_file = ef,
                                    .class_name = "exit-1",
                                    .hint = "read the traceback"};
    struct ddp_report_entry other = {
        .rank = 3, .local_rank = 3, .host = "node7", .pid = 4243, .signo = SIGSEGV, .tail = tail, .ntail = 2};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ddp_report_print(f, "train.py FAILED", &root, &other, 1);
    fclose(f);
    char *rc = strstr(buf, "Root Cause (first observed failure):");
    cr_assert_not_null(rc, "%s", buf);
    cr_expect(strstr(rc, "rank      : 2 (local_rank: 2)") != NULL, "%s", buf);
    cr_expect(strstr(rc, "exitcode  : 1 (pid: 4242)") != NULL, "%s", buf);
    cr_expect(strstr(rc, "message   : ValueError: bad lr") != NULL, "%s", buf);
    cr_expect(strstr(rc, "host      : node7") != NULL, "%s", buf);
    char *fails = strstr(buf, "Failures:");
    cr_assert_not_null(fails);
    cr_expect(strstr(fails, "exitcode  : -11 (pid: 4243) SIGSEGV") < rc, "%s", buf);
    cr_expect(strstr(fails, "    line two") < rc, "%s", buf);
    free(buf);
    unlink(ef);
    free(ef);
}

Test(report, escapes_decoded_as_timer_does)
{
    /* one JSON library for every reader: a surrogate pair is one 4-byte UTF-8 character, \u0000 is refused */
    const char *t = "{\"message\": \"a\\ud83d\\ude00b\\/c\"}";
    char *msg, *tb;
    long long ts;
    cr_assert_eq(ddp_report_parse_error_json(t, strlen(t), &msg, &tb, &ts), 0);
    cr_expect_str_eq(msg, "a\xf0\x9f\x98\x80"
                          "b/c");
    cr_expect_null(tb);
    free(msg);
    t = "{\"message\": \"a\\u0000b\"}";
    cr_expect_eq(ddp_report_parse_error_json(t, strlen(t), &msg, &tb, &ts), -EINVAL);
    t = "{\"message\": \"x\"} trailing";
    cr_expect_eq(ddp_report_parse_error_json(t, strlen(t), &msg, &tb, &ts), -EINVAL);
    t = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": 1795992869}}}";
    cr_assert_eq(ddp_report_parse_error_json(t, strlen(t), &msg, &tb, &ts), 0);
    cr_expect_eq(ts, 1795992869LL);
    free(msg);
}

/* issue 34 item 10: invalid UTF-8 in worker output keeps every key of the root cause; the bad bytes become U+FFFD */
Test(report, invalid_utf8_keeps_seen_and_tail)
{
    const char *tail[] = {"ok line", "bad \xff\xfe byte", "cut \xe2\x82"};
    struct ddp_report_entry e = {.rank = 1,
                                 .exit_code = 1,
                                 .class_name = "oom",
                                 .class_line = "torch.OutOfMemoryError: CUDA out of memory \xc0\xaf",
                                 .reason = "r\xed\xa0\x80",
                                 .tail = tail,
                                 .ntail = 3};
    json_t *o = ddp_report_entry_json(&e);
    json_t *seen = json_object_get(o, "seen");
    cr_assert(json_is_string(seen), "seen is kept");
    cr_expect_str_eq(json_string_value(seen), "torch.OutOfMemoryError: CUDA out of memory \xef\xbf\xbd\xef\xbf\xbd");
    cr_expect_str_eq(json_string_value(json_object_get(o, "reason")), "r\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    json_t *t = json_object_get(o, "stderr_tail");
    cr_assert_eq(json_array_size(t), 3, "every tail line is kept");
    cr_expect_str_eq(json_string_value(json_array_get(t, 0)), "ok line");
    cr_expect_str_eq(json_string_value(json_array_get(t, 1)), "bad \xef\xbf\xbd\xef\xbf\xbd byte");
    cr_expect_str_eq(json_string_value(json_array_get(t, 2)), "cut \xef\xbf\xbd\xef\xbf\xbd");
    char *dump = json_dumps(o, 0);
    cr_assert_not_null(dump, "the entry is writable JSON");
    free(dump);
    json_decref(o);
}
