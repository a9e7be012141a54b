/* Unit tests for ras.c: NCCL's RAS STATUS answer, as recorded on the GPU machine (tests/fixtures/ras, NCCL 2.28.9:
 * the text and the JSON form of a 1-rank job) and synthesized in the same JSON format (a rank behind, a rank
 * missing). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/ras.h"

static char buf[1 << 16];

static size_t load(const char *name)
{
    char path[512];
    const char *src = getenv("DDP_SRCDIR");
    snprintf(path, sizeof(path), "%s/tests/fixtures/ras/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = 0;
    return len;
}

Test(ras, recorded_json_one_rank)
{
    size_t len = load("status-nccl-2.28.9.txt");
    const char *json = strstr(buf, "== STATUS json");
    cr_assert(json);
    struct ddp_ras ras;
    cr_assert_eq(ddp_ras_parse(json, len - (size_t)(json - buf), &ras), 0);
    cr_assert(ras.json);
    cr_assert_str_eq(ras.version, "2.28.9");
    cr_assert_eq(ras.ncomms, 1);
    cr_assert_str_eq(ras.c[0].hash, "0xe06ea772e6078d80");
    cr_assert_eq(ras.c[0].size, 1);
    cr_assert_eq(ras.c[0].nranks, 1);
    cr_assert_eq(ras.c[0].r[0].pid, 1796);
    cr_assert_eq(ras.c[0].r[0].count[4], 0); /* AllReduce */
    cr_assert_str_eq(ddp_ras_op_name(4), "AllReduce");
    pid_t pid = 1796;
    int rank = 0;
    bool culprit = false;
    char why[512];
    cr_assert_eq(ddp_ras_judge(&ras, &pid, &rank, 1, &culprit, why, sizeof(why)), 0);
    cr_assert_str_eq(why, "");
    ddp_ras_free(&ras);
}

Test(ras, recorded_text_table)
{
    size_t len = load("status-nccl-2.28.9.txt");
    char *json = strstr(buf, "< SERVER PROTOCOL 2\n< OK");
    cr_assert(json);
    struct ddp_ras ras;
    cr_assert_eq(ddp_ras_parse(buf, (size_t)(json - buf), &ras), 0);
    cr_assert(!ras.json);
    cr_assert_str_eq(ras.version, "2.28.9");
    cr_assert_eq(ras.ncomms, 1);
    cr_assert_str_eq(ras.c[0].status, "RUNNING");
    cr_assert_str_eq(ras.c[0].errors, "OK");
    cr_assert_eq(ras.c[0].size, 1);
    (void)len;
    ddp_ras_free(&ras);
}

/* pids map to the job's ranks (here ranks 4-6 of a job whose node runs them); RAS's own rank where none does. */
Test(ras, behind_and_missing_named_by_the_jobs_ranks)
{
    size_t len = load("behind-missing.json");
    struct ddp_ras ras;
    cr_assert_eq(ddp_ras_parse(buf, len, &ras), 0);
    pid_t pid[3] = {4100, 4101, 4102};
    int rank[3] = {4, 5, 6};
    bool culprit[3] = {false, false, false};
    char why[512];
    cr_assert_eq(ddp_ras_judge(&ras, pid, rank, 3, culprit, why, sizeof(why)), 2);
    cr_assert_str_eq(why, "NCCL RAS: communicator 0x1111222233334444 (3 ranks): rank 5 (pid 4101) is behind: "
                          "AllReduce 9 where rank 4 has 10; rank 6 (pid 4102, 192.0.2.3) is missing");
    cr_assert(!culprit[0] && culprit[1] && culprit[2]);
    bool none[1] = {false};
    cr_assert_eq(ddp_ras_judge(&ras, NULL, NULL, 0, none, why, sizeof(why)), 2);
    cr_assert_str_eq(why, "NCCL RAS: communicator 0x1111222233334444 (3 ranks): rank 1 (pid 4101) is behind: "
                          "AllReduce 9 where rank 0 has 10; rank 2 (pid 4102, 192.0.2.3) is missing");
    ddp_ras_free(&ras);
}

Test(ras, error_flag_and_not_ras)
{
    const char *doc = "{\"nccl_version\":\"2.28.9\",\"communicators\":[{\"hash\":\"0x1\",\"size\":2,\"ranks\":["
                      "{\"rank\":0,\"pid\":7,\"status\":{\"async_error\":6},\"collective_counts\":{\"AllReduce\":3}},"
                      "{\"rank\":1,\"pid\":8,\"status\":{\"abort_flag\":false},\"collective_counts\":{\"AllReduce\":3}}"
                      "],\"missing_ranks\":[]}]}";
    struct ddp_ras ras;
    cr_assert_eq(ddp_ras_parse(doc, strlen(doc), &ras), 0);
    pid_t pid[2] = {7, 8};
    int rank[2] = {0, 1};
    bool culprit[2] = {false, false};
    char why[256];
    cr_assert_eq(ddp_ras_judge(&ras, pid, rank, 2, culprit, why, sizeof(why)), 1);
    cr_assert_str_eq(why, "NCCL RAS: communicator 0x1 (2 ranks): rank 0 (pid 7) reports an error (async_error 6)");
    ddp_ras_free(&ras);
    cr_assert_eq(ddp_ras_parse("{\"a\": 1}", 8, &ras), -EINVAL);
    cr_assert_eq(ddp_ras_parse("nothing here\n", 13, &ras), -ENOENT);
}
