/* Unit tests for jsonlog.c: events.jsonl lines and summary.json, and the time format they share with the logs. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "records/jsonlog.h"

Test(record, time_format_sorts)
{
    char a[32], b[32];
    struct timespec t1 = {.tv_sec = 1795992869, .tv_nsec = 5000000}, t2 = {.tv_sec = 1795992869, .tv_nsec = 999999999};
    cr_expect_str_eq(ddp_time_iso(&t1, a), "2026-11-29T22:54:29.005Z");
    cr_expect_str_eq(ddp_time_iso(&t2, b), "2026-11-29T22:54:29.999Z");
    cr_expect(strcmp(a, b) < 0);
}

Test(record, events_are_lines_and_summary_is_atomic)
{
    char dir[] = "/tmp/ddp_test_record_XXXXXX";
    cr_assert(mkdtemp(dir));
    char *sub = strdup(dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    struct ddp_jsonlog *r;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_jsonlog_open(dfd, dir, &r, &err), 0, "%s", err.msg);
    cr_expect_str_eq(ddp_jsonlog_dir(r), dir);
    ddp_jsonlog_event(r, "one", json_pack("{s:i, s:s}", "x", 1, "s", "line\nbreak"));
    ddp_jsonlog_event(r, "two", NULL);
    ddp_jsonlog_event(NULL, "none", json_object()); /* no record: frees, does nothing */
    cr_assert_eq(ddp_jsonlog_summary(r, json_pack("{s:i}", "exit_status", 3)), 0);
    ddp_jsonlog_close(r);
    close(dfd);

    char *p = NULL;
    cr_assert(asprintf(&p, "%s/events.jsonl", sub) > 0);
    FILE *f = fopen(p, "r");
    cr_assert(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        cr_assert(o, "line %d is not JSON: %s", n + 1, line);
        cr_expect_eq(json_integer_value(json_object_get(o, "v")), 1);
        cr_expect_eq(strlen(json_string_value(json_object_get(o, "ts"))), 24u);
        cr_expect_str_eq(json_string_value(json_object_get(o, "event")), n == 0 ? "one" : "two");
        if (n == 0)
            cr_expect_str_eq(json_string_value(json_object_get(o, "s")), "line\nbreak");
        json_decref(o);
        n++;
    }
    fclose(f);
    cr_expect_eq(n, 2);
    free(p);
    cr_assert(asprintf(&p, "%s/summary.json", sub) > 0);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    cr_assert(s, "%s", je.text);
    cr_expect_eq(json_integer_value(json_object_get(s, "exit_status")), 3);
    cr_expect_eq(json_integer_value(json_object_get(s, "v")), 1);
    json_decref(s);
    free(p);
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "ls -A %s | tr '\\n' ' '", sub) > 0);
    FILE *ls = popen(cmd, "r");
    char got[256] = "";
    cr_assert(fgets(got, sizeof(got), ls));
    pclose(ls);
    cr_expect_str_eq(got, "events.jsonl summary.json ", "no temporary file left");
    free(cmd);
    cr_assert(asprintf(&cmd, "rm -rf %s", dir) > 0);
    cr_expect_eq(system(cmd), 0);
    free(cmd);
    free(sub);
}

Test(record, refuses_a_symlinked_events_file)
{
    char dir[] = "/tmp/ddp_test_record_XXXXXX";
    cr_assert(mkdtemp(dir));
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/events.jsonl", dir) > 0);
    cr_assert_eq(symlink("/etc/passwd", p), 0);
    struct ddp_jsonlog *r = NULL;
    struct ddp_err err = {0};
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    cr_expect_lt(ddp_jsonlog_open(dfd, dir, &r, &err), 0);
    close(dfd);
    cr_expect_null(r);
    cr_expect(strstr(err.msg, "events.jsonl") != NULL, "%s", err.msg);
    unlink(p);
    rmdir(dir);
    free(p);
}

/* Issue 24 item 5: summary.json's room is taken at open (a disk that fills during the run still takes the
 * summary); a record closed without a summary leaves no temporary file. */
Test(record, the_summary_has_its_room_reserved)
{
    char dir[] = "/tmp/ddp_test_record_XXXXXX";
    cr_assert(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    struct ddp_jsonlog *r;
    struct ddp_err err = {0};
    char tmp[64];
    struct stat st;
    snprintf(tmp, sizeof(tmp), ".summary.json.%d", (int)getpid());
    for (int with_summary = 0; with_summary < 2; with_summary++) {
        cr_assert_eq(ddp_jsonlog_open(dfd, dir, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(fstatat(dfd, tmp, &st, 0), 0, "the reserve is there while the job runs");
        cr_expect_geq((long long)st.st_blocks * 512, (long long)DDP_JSONLOG_RESERVE, "its blocks are allocated");
        if (with_summary) {
            cr_assert_eq(ddp_jsonlog_summary(r, json_pack("{s:i}", "exit_status", 0)), 0);
            cr_assert_eq(fstatat(dfd, "summary.json", &st, 0), 0);
            cr_expect_lt(st.st_size, 200, "cut to its text");
        }
        ddp_jsonlog_close(r);
        cr_expect_neq(fstatat(dfd, tmp, &st, 0), 0, "no reserve left");
        unlinkat(dfd, "events.jsonl", 0);
        unlinkat(dfd, "summary.json", 0);
    }
    close(dfd);
    cr_expect_eq(rmdir(dir), 0);
}

/* issue 39 item 1: a field that is not valid UTF-8 (a command name cut at 15 bytes mid-character) costs that
 * field its bad bytes, never the record its other fields (json_pack returns NULL for it) */
Test(record, pack_keeps_every_field_when_one_is_not_utf8)
{
    const char *bad = "py\xe2\x80"; /* cut mid-character */
    cr_expect_null(json_pack("{s:i, s:s}", "gpu", 0, "reason", bad));
    json_t *o = ddp_jsonlog_pack("{s:i, s:s, s:s?, s:I, s:b, s:o, s:n, s:[], s:{s:f}}", "gpu", 0, "reason", bad, "none",
                                 NULL, "big", (json_int_t)1 << 40, "yes", 1, "arr", json_pack("[i]", 7), "null",
                                 "empty", "sub", "x", 1.5);
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(text, "{\"arr\":[7],\"big\":1099511627776,\"empty\":[],\"gpu\":0,\"none\":null,\"null\":null,"
                           "\"reason\":\"py\xef\xbf\xbd\xef\xbf\xbd\",\"sub\":{\"x\":1.5},\"yes\":true}");
    free(text);
    json_decref(o);
}
