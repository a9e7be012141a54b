/* Unit tests for mismatch.c: what differed at a collective failure. The inputs are the sampler's "ddplaunch-fr"
 * lines in torch 2.11's format (fr.h parses them): pg_status keyed by each process's own backend counter,
 * process_group [name, desc], the members from torch's own map (ddp_groups). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "watch/mismatch.h"

/* One rank's sampler line: its world group "0" (members 0-(world-1)) at seq wseq, and one subgroup `sub` (key "1",
 * members subranks) whose entries #1..#subseq are all_reduces of [[4]] Float, the last one op/sizes/dtype. */
static void line(struct ddp_fr_state *st, int world, int wseq, const char *sub, const char *subranks, int subseq,
                 const char *op, const char *sizes, const char *dtype)
{
    char buf[8192];
    int len = snprintf(buf, sizeof(buf),
                       "ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"%d\","
                       "\"last_completed_collective\":\"%d\"},\"1\":{\"last_enqueued_collective\":\"%d\","
                       "\"last_completed_collective\":\"%d\"}},\"pg_config\":{\"\":{\"ranks\":\"[]\"}},"
                       "\"ddp_groups\":{\"0\":\"[0-%d]\",\"%s\":%s},\"entries\":[",
                       wseq, wseq, subseq, subseq - 1, world - 1, sub, subranks);
    for (int s = 1; s <= subseq; s++)
        len += snprintf(buf + len, sizeof(buf) - (size_t)len,
                        "%s{\"pg_id\":1,\"process_group\":[\"%s\",\"undefined\"],\"collective_seq_id\":%d,"
                        "\"profiling_name\":\"%s\",\"input_sizes\":%s,\"input_dtypes\":[\"%s\"],\"is_p2p\":false}",
                        s > 1 ? "," : "", sub, s, s == subseq ? op : "gloo:all_reduce", s == subseq ? sizes : "[[4]]",
                        s == subseq ? dtype : "Float");
    len += snprintf(buf + len, sizeof(buf) - (size_t)len, "]}\n");
    cr_assert_eq(ddp_fr_parse(buf, (size_t)len, st), 0, "%s", buf);
}

static struct ddp_fr_state st[4];
static struct ddp_mismatch_input in[4];
static bool culprit[4];
static struct ddp_mismatch m;

/* issue 38's case: pair groups [0,1] ("1") and [2,3] ("2"); rank 1 all_reduces float64 in #4 of group 1 where
 * rank 0 sent float32, and gloo aborts rank 0. Rank 0's recorder as its last sample read it (it waited 10 s at
 * #4 first), the others' as they answered at the failure. */
Test(mismatch, dtype_in_a_pair_names_the_survivor_both_sides)
{
    line(&st[0], 4, 3, "1", "[0,1]", 4, "gloo:all_reduce", "[[4]]", "Float");
    line(&st[1], 4, 3, "1", "[0,1]", 4, "gloo:all_reduce", "[[4]]", "Double");
    line(&st[2], 4, 4, "2", "[2,3]", 4, "gloo:all_reduce", "[[4]]", "Float");
    line(&st[3], 4, 4, "2", "[2,3]", 4, "gloo:all_reduce", "[[4]]", "Float");
    for (int r = 0; r < 4; r++)
        in[r] = (struct ddp_mismatch_input){r, &st[r], r == 0};
    ddp_mismatch_decide(in, 4, culprit, &m);
    cr_assert(m.found);
    cr_assert_str_eq(m.why, "rank 1 sent [[4]] Double where rank 0 sent [[4]] Float in gloo:all_reduce #4 of group 1 "
                            "(ranks 0-1)");
    cr_assert(culprit[1] && !culprit[0] && !culprit[2] && !culprit[3]);
    cr_assert_eq(m.nculprits, 1);
    cr_assert_str_eq(m.group, "1");
    cr_assert_eq(m.seq, 4);
}

/* The failed rank's entry was never read (it failed at once): one side alone is no mismatch. */
Test(mismatch, one_side_known_is_no_verdict)
{
    line(&st[1], 4, 3, "1", "[0,1]", 4, "gloo:all_reduce", "[[4]]", "Double");
    line(&st[2], 4, 4, "2", "[2,3]", 4, "gloo:all_reduce", "[[4]]", "Float");
    in[0] = (struct ddp_mismatch_input){0, NULL, true};
    in[1] = (struct ddp_mismatch_input){1, &st[1], false};
    in[2] = (struct ddp_mismatch_input){2, &st[2], false};
    ddp_mismatch_decide(in, 3, culprit, &m);
    cr_assert(!m.found);
    cr_assert(!culprit[0] && !culprit[1] && !culprit[2]);
}

/* Four ranks in one group: the minority is named whoever failed (the failed rank is its ring neighbour). */
Test(mismatch, minority_of_a_group)
{
    for (int r = 0; r < 4; r++) {
        line(&st[r], 4, 2, "3", "[0,1,2,3]", 5, "gloo:all_reduce", r == 2 ? "[[8]]" : "[[4]]", "Float");
        in[r] = (struct ddp_mismatch_input){r, r == 3 ? NULL : &st[r], r == 3};
    }
    ddp_mismatch_decide(in, 4, culprit, &m);
    cr_assert(m.found);
    cr_assert_str_eq(m.why, "rank 2 sent [[8]] Float where ranks 0, 1 sent [[4]] Float in gloo:all_reduce #5 of "
                            "group 3 (ranks 0-3)");
    cr_assert(culprit[2] && !culprit[0] && !culprit[1] && !culprit[3]);
}

/* Different ops name both ops; two survivors that differ with the failed rank unknown: nobody is blamed. */
Test(mismatch, op_tie_without_the_failed_rank_blames_nobody)
{
    line(&st[0], 4, 2, "1", "[0,1,2]", 3, "gloo:broadcast", "[[4]]", "Float");
    line(&st[1], 4, 2, "1", "[0,1,2]", 3, "gloo:all_reduce", "[[4]]", "Float");
    in[0] = (struct ddp_mismatch_input){0, &st[0], false};
    in[1] = (struct ddp_mismatch_input){1, &st[1], false};
    in[2] = (struct ddp_mismatch_input){2, NULL, true};
    ddp_mismatch_decide(in, 3, culprit, &m);
    cr_assert(m.found);
    cr_assert_eq(m.nculprits, 0);
    cr_assert(!culprit[0] && !culprit[1]);
    cr_assert_str_eq(m.why, "collective mismatch: rank 1 sent gloo:all_reduce [[4]] Float where rank 0 sent "
                            "gloo:broadcast [[4]] Float in #3 of group 1 (ranks 0-2) (no majority: the program says "
                            "which side is wrong)");
}

/* Everyone sent the same: nothing found, whatever failed. */
Test(mismatch, agreement_is_no_verdict)
{
    for (int r = 0; r < 2; r++) {
        line(&st[r], 2, 2, "1", "[0,1]", 4, "gloo:all_reduce", "[[4]]", "Float");
        in[r] = (struct ddp_mismatch_input){r, &st[r], r == 0};
    }
    ddp_mismatch_decide(in, 2, culprit, &m);
    cr_assert(!m.found);
    json_t *j = ddp_mismatch_json(&m);
    cr_assert(j);
    json_decref(j);
}

/* The dtype case as recorded on the H200 (torch 2.11, gloo, 4 ranks: tests/fixtures/fr/gpu/dtype.rankN.json, torch's
 * own JSON dumps written at the failure by bench/gpu/fr_worker.py, bench/gpu/final): rank 1 all_reduced float64 in
 * #4 of the pair group [0,1] where rank 0 sent float32, and gloo aborted rank 0. torch's dumps carry no member map
 * (gloo's pg_config is empty): the members come from which ranks report the group's name. */
static void load_dump(const char *name, struct ddp_fr_state *s)
{
    const char *src = getenv("DDP_SRCDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fixtures/fr/gpu/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    cr_assert_eq(ddp_fr_parse(buf, n, s), 0, "%s", path);
}

Test(mismatch, the_h200_dtype_dumps_name_rank_1)
{
    char name[64];
    for (int r = 0; r < 4; r++) {
        snprintf(name, sizeof(name), "dtype.rank%d.json", r);
        load_dump(name, &st[r]);
        in[r] = (struct ddp_mismatch_input){r, &st[r], r == 0};
    }
    ddp_mismatch_decide(in, 4, culprit, &m);
    cr_assert(m.found, "nothing found");
    cr_expect(strstr(m.why, "rank 1 sent [[4]] Double where rank 0 sent [[4]] Float in gloo:all_reduce #4 of group 1"),
              "%s", m.why);
    cr_expect(culprit[1] && !culprit[0] && !culprit[2] && !culprit[3]);
}
