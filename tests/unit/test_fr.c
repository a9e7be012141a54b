/* Unit tests for fr.c: torch's flight recorder JSON as recorded on the GPU machine (tests/fixtures/fr, see
 * MANIFEST there) and the sampler's "ddplaunch-fr" line; the verdict rules as a table over those recordings. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/fr.h"
#include "watch/sample.h"

static char *slurp(const char *name, size_t *len)
{
    const char *src = getenv("DDP_SRCDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fixtures/fr/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void load(const char *name, struct ddp_fr_state *st)
{
    size_t len;
    char *text = slurp(name, &len);
    cr_assert_eq(ddp_fr_parse(text, len, st), 0, "%s", name);
    free(text);
}

static void parse_line(const char *line, struct ddp_fr_state *st)
{
    cr_assert_eq(ddp_fr_parse(line, strlen(line), st), 0, "%s", line);
}

Test(recorder, parses_torch_gloo_document)
{
    struct ddp_fr_state st;
    load("healthy.rank0.json", &st);
    cr_assert_eq(st.ngroups, 1);
    cr_expect_str_eq(st.g[0].id, "0");
    cr_expect_eq(st.g[0].enqueued, 20);
    cr_expect_eq(st.g[0].completed, 20);
    cr_expect_str_eq(st.g[0].ranks, "0-2", "gloo's one group is named \"\" in pg_config");
    cr_expect(st.has_entries);
    cr_assert_eq(st.g[0].nentries, DDP_FR_PER_GROUP, "the last entries of the group are kept");
    cr_expect_eq(st.g[0].e[DDP_FR_PER_GROUP - 1].seq, 20);
    cr_expect_eq(st.g[0].e[0].seq, 21 - DDP_FR_PER_GROUP);
    cr_expect_str_eq(st.g[0].e[DDP_FR_PER_GROUP - 1].op, "gloo:all_reduce");
    cr_expect_str_eq(st.g[0].e[DDP_FR_PER_GROUP - 1].shape, "[[1]] Float");
    cr_expect_gt(st.g[0].e[DDP_FR_PER_GROUP - 1].created_ns, st.g[0].e[DDP_FR_PER_GROUP - 2].created_ns);
    cr_expect_str_eq(st.g[0].key, "0");
    cr_expect_str_eq(st.g[0].desc, "default_pg");
}

Test(recorder, sampler_line_beside_stacks)
{
    static const char text[] =
        "Current thread 0x00007f (most recent call first):\n"
        "  File \"train.py\", line 3 in main\n\n"
        "ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"5\",\"last_completed_collective\":\"4\"},"
        "\"1\":{\"last_enqueued_collective\":\"2\",\"last_completed_collective\":\"2\"}},"
        "\"pg_config\":{\"\":{\"ranks\":\"[0, 1, 2, 3]\"}},\"ddp_groups\":{\"0\":[0,1,2,3],\"3\":[0,2]},"
        "\"ddp_pgmap\":{\"1\":[\"3\",\"mesh_dp\"]}}\n";
    struct ddp_fr_state st;
    cr_assert_eq(ddp_fr_parse(text, sizeof(text) - 1, &st), 0);
    cr_assert_eq(st.ngroups, 2);
    cr_expect_not(st.has_entries, "the status only: no entries before a standstill");
    const struct ddp_fr_group *g = ddp_fr_group(&st, "3");
    cr_assert(g, "pg_status key \"1\" is group \"3\" in this rank (ddp_pgmap, from its entries' pg_id)");
    cr_expect_str_eq(g->key, "1");
    cr_expect_str_eq(g->desc, "mesh_dp");
    cr_expect_eq(g->enqueued, 2);
    cr_expect_str_eq(g->ranks, "0,2", "ddp_groups (torch.distributed's own map) names a subgroup's ranks");
    cr_expect_null(ddp_fr_group(&st, "1"), "the key is no name");
    cr_expect_str_eq(ddp_fr_group(&st, "0")->ranks, "0-3");
    cr_expect_null(ddp_fr_group(&st, "7"));
}

Test(recorder, absent_or_broken)
{
    struct ddp_fr_state st;
    static const char stacks[] = "Current thread 0x1 (most recent call first):\n  File \"a.py\", line 1 in f\n";
    cr_expect_eq(ddp_fr_parse(stacks, sizeof(stacks) - 1, &st), -ENOENT, "torch 1.x: stacks only");
    cr_expect_eq(ddp_fr_parse("", 0, &st), -ENOENT);
    static const char broken[] = "ddplaunch-fr {\"pg_status\":{\"0\":\n";
    cr_expect_eq(ddp_fr_parse(broken, sizeof(broken) - 1, &st), -EINVAL, "a line cut short");
    static const char other[] = "{\"version\": \"2.10\"}";
    cr_expect_eq(ddp_fr_parse(other, sizeof(other) - 1, &st), -EINVAL, "no pg_status: not a recorder document");
}

Test(recorder, moved)
{
    struct ddp_fr_state a, b;
    parse_line("ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"5\"}}}", &a);
    parse_line("ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"5\"}}}", &b);
    cr_expect_not(ddp_fr_moved(&a, &b));
    parse_line("ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"6\"}}}", &b);
    cr_expect(ddp_fr_moved(&a, &b));
    parse_line("ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"5\"},\"1\":{}}}", &b);
    cr_expect(ddp_fr_moved(&a, &b), "a new group");
}

Test(recorder, healthy_run_names_nobody)
{
    struct ddp_fr_state st[3];
    struct ddp_fr_input in[3];
    bool culprit[3];
    struct ddp_fr_verdict v;
    for (int r = 0; r < 3; r++) {
        char name[64];
        snprintf(name, sizeof(name), "healthy.rank%d.json", r);
        load(name, &st[r]);
        in[r] = (struct ddp_fr_input){r, &st[r], 40000, NULL};
    }
    ddp_fr_decide(in, 3, culprit, &v);
    cr_expect_eq(v.kind, DDP_FR_NONE, "every rank completed #20: %s", v.why);
    cr_expect_not(culprit[0] || culprit[1] || culprit[2]);
}

/* two ranks, one each side, no majority: a mismatch with no culprit */
Test(recorder, two_ranks_op_mismatch_has_no_majority)
{
    static const char *const line[2] = {
        "ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"6\",\"last_completed_collective\":\"5\"}},"
        "\"entries\":[{\"process_group\":[\"0\",\"default_pg\"],\"collective_seq_id\":6,\"profiling_name\":"
        "\"nccl:all_reduce\",\"input_sizes\":[[4]],\"input_dtypes\":[\"Float\"],\"is_p2p\":false}]}",
        "ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"6\",\"last_completed_collective\":\"5\"}},"
        "\"entries\":[{\"process_group\":[\"0\",\"default_pg\"],\"collective_seq_id\":6,\"profiling_name\":"
        "\"nccl:broadcast\",\"input_sizes\":[[4]],\"input_dtypes\":[\"Float\"],\"is_p2p\":false}]}"};
    struct ddp_fr_state st[2];
    struct ddp_fr_input in[2];
    bool culprit[2];
    struct ddp_fr_verdict v;
    for (int r = 0; r < 2; r++) {
        parse_line(line[r], &st[r]);
        in[r] = (struct ddp_fr_input){r, &st[r], 31000, NULL};
    }
    ddp_fr_decide(in, 2, culprit, &v);
    cr_expect_eq(v.kind, DDP_FR_OP);
    cr_expect_eq(v.nculprits, 0);
    cr_expect_not(culprit[0] || culprit[1]);
    cr_expect(strstr(v.why, "nccl:broadcast") && strstr(v.why, "nccl:all_reduce"), "%s", v.why);
    cr_expect(strstr(v.why, "no majority"), "%s", v.why);
}

Test(recorder, a_rank_without_recorder_is_not_blamed)
{
    struct ddp_fr_state st[2];
    parse_line("ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"9\",\"last_completed_collective\":"
               "\"8\"}}}",
               &st[0]);
    parse_line("ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"9\",\"last_completed_collective\":"
               "\"8\"}}}",
               &st[1]);
    struct ddp_fr_input in[3] = {{0, &st[0], 35000, NULL}, {1, &st[1], 35000, NULL}, {2, NULL, 0, "t.py:3 in f"}};
    bool culprit[3];
    struct ddp_fr_verdict v;
    ddp_fr_decide(in, 3, culprit, &v);
    cr_expect_eq(v.kind, DDP_FR_NONE, "no evidence against rank 2 from the recorder: the stacks decide");
}

static void load_case(const char *c, struct ddp_fr_state *st, struct ddp_fr_input *in, size_t n)
{
    for (size_t r = 0; r < n; r++) {
        char name[64];
        snprintf(name, sizeof(name), "%s.rank%zu.json", c, r);
        load(name, &st[r]);
        in[r] = (struct ddp_fr_input){(int)r, &st[r], 41000, NULL};
    }
}

/* The recorded cases: the verdict, the culprits (one bit per rank) and what the line must say. */
static const struct {
    const char *name;
    enum ddp_fr_kind kind;
    unsigned culprits;
    const char *says[4];
} cases[] = {
    {"stuck",
     DDP_FR_BEHIND,
     1u << 2,
     {"rank 2 never entered gloo:all_reduce #6 of group 0 (ranks 0-2; its last there is #5), where ranks 0, 1 wait",
      "for 41 s", "rank 2 is at loader.py:9 in load_batch", NULL}},
    {"op",
     DDP_FR_OP,
     1u << 1,
     {"op mismatch at gloo:all_reduce #6 of group 0 (ranks 0-2)", "rank 1 is in gloo:broadcast",
      "ranks 0, 2 in gloo:all_reduce", NULL}},
    {"shape",
     DDP_FR_SHAPE,
     1u << 1,
     {"shape mismatch at gloo:all_reduce #6 of group 0 (ranks 0-2)", "rank 1 has [[2]] Float",
      "ranks 0, 2 have [[1]] Float", NULL}},
    {"subgroup",
     DDP_FR_BEHIND,
     1u << 1,
     {"rank 1 never entered gloo:all_reduce #4 of group 1 (ranks 0-1; its last there is #3), where rank 0 waits; "
      "rank 2 waits in group 0's #5 for ranks 0, 1",
      NULL}},
    {"healthy", DDP_FR_NONE, 0, {NULL}},
    {"p2p", DDP_FR_NONE, 0, {NULL}},
};

Test(recorder, recorded_cases)
{
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct ddp_fr_state st[3];
        struct ddp_fr_input in[3];
        bool culprit[3];
        struct ddp_fr_verdict v;
        load_case(cases[c].name, st, in, 3);
        for (int r = 0; r < 3; r++)
            in[r].frame = (cases[c].culprits >> r) & 1 ? "loader.py:9 in load_batch" : "train.py:50 in wait_for";
        ddp_fr_decide(in, 3, culprit, &v);
        cr_expect_eq(v.kind, cases[c].kind, "%s: %s (%s)", cases[c].name, ddp_fr_kind_name(v.kind), v.why);
        for (int r = 0; r < 3; r++)
            cr_expect_eq(culprit[r], (cases[c].culprits >> r) & 1, "%s: rank %d (%s)", cases[c].name, r, v.why);
        for (size_t k = 0; cases[c].says[k]; k++)
            cr_expect(strstr(v.why, cases[c].says[k]), "%s: '%s' not in '%s'", cases[c].name, cases[c].says[k], v.why);
    }
}

/* As the live watch saw the shape mismatch on the GPU machine: ranks 0 and 2 got through #6 (gloo) and enqueued #7;
 * rank 1 still waits in #6. The culprit stays rank 1, named for the shapes at #6, not for never reaching #7. */
Test(recorder, shape_mismatch_after_the_others_went_on)
{
    struct ddp_fr_state st[3];
    struct ddp_fr_input in[3];
    bool culprit[3];
    struct ddp_fr_verdict v;
    load_case("shape", st, in, 3);
    for (int r = 0; r < 3; r += 2) {
        struct ddp_fr_group *g = &st[r].g[0];
        struct ddp_fr_entry next = g->e[g->nentries - 1];
        memmove(&g->e[0], &g->e[1], sizeof(g->e[0]) * (DDP_FR_PER_GROUP - 1));
        next.seq = 7;
        snprintf(next.shape, sizeof(next.shape), "[[4160]] Float");
        g->e[DDP_FR_PER_GROUP - 1] = next;
        g->enqueued = 7;
    }
    ddp_fr_decide(in, 3, culprit, &v);
    cr_expect_eq(v.kind, DDP_FR_SHAPE, "%s", v.why);
    cr_expect(!culprit[0] && culprit[1] && !culprit[2], "%s", v.why);
    cr_expect_eq(v.seq, 6);
    cr_expect_str_eq(v.other, "[[2]] Float");
    cr_expect_str_eq(v.shape, "[[1]] Float");
}

/* Several groups: the subgroup's #4 was enqueued before the world's #5, so the subgroup is the cause; the world
 * group alone would blame ranks 0-1. The stack of the culprit still says where it is. */
Test(recorder, several_groups_the_first_stalled_wins)
{
    struct ddp_fr_state st[3];
    struct ddp_fr_input in[3];
    bool culprit[3];
    struct ddp_fr_verdict v;
    load_case("subgroup", st, in, 3);
    cr_assert(ddp_fr_group(&st[0], "1") && !ddp_fr_group(&st[2], "1"), "rank 2 is no member of group 1");
    ddp_fr_decide(in, 3, culprit, &v);
    cr_expect_str_eq(v.group, "1");
    cr_expect(!culprit[0] && culprit[1] && !culprit[2], "%s", v.why);
    struct ddp_fr_input world[3] = {in[0], in[1], in[2]};
    struct ddp_fr_state only0[3];
    for (int r = 0; r < 3; r++) { /* without the subgroup: the world group blames ranks 0-1 */
        only0[r] = st[r];
        only0[r].ngroups = 1;
        world[r].fr = &only0[r];
    }
    ddp_fr_decide(world, 3, culprit, &v);
    cr_expect(culprit[0] && culprit[1] && !culprit[2], "%s", v.why);
}

Test(recorder, nccl_one_rank)
{
    struct ddp_fr_state st;
    load("nccl.rank0.json", &st);
    cr_assert_eq(st.ngroups, 1);
    cr_expect_eq(st.g[0].enqueued, 301);
    cr_expect_eq(st.g[0].completed, 301);
    cr_expect_str_eq(st.g[0].ranks, "0");
    cr_expect_str_eq(st.g[0].e[DDP_FR_PER_GROUP - 1].op, "nccl:all_reduce");
    struct ddp_fr_input in = {0, &st, 60000, NULL};
    bool culprit;
    struct ddp_fr_verdict v;
    ddp_fr_decide(&in, 1, &culprit, &v);
    cr_expect_eq(v.kind, DDP_FR_NONE, "one rank: nobody to wait for");
}

/* The sampler's Python (watch/sitecustomize.py) run by python3 against stand-in torch modules: it never imports torch,
 * writes nothing before a process group exists or where the API is missing (torch 1.x), and otherwise a line
 * this module parses, with entries only after a standstill (or when asked). */
Test(recorder, sampler_python)
{
    char dir[] = "/tmp/ddp-test-recorder-XXXXXX";
    cr_assert(mkdtemp(dir));
    char py[4200], out[4200];
    snprintf(py, sizeof(py), "%s/t.py", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    FILE *f = fopen(py, "w");
    cr_assert(f);
    fputs(ddp_sample_sitecustomize(), f); /* run as __main__: only its functions are defined */
    fputs("import json, sys, types\n"
          "st = _ddplaunch_fr_state()\n"
          "print('no-torch', repr(_ddplaunch_fr_line(st, True)), 'torch' in sys.modules)\n"
          "torch = types.ModuleType('torch'); dist = types.ModuleType('torch.distributed')\n"
          "sys.modules['torch'] = torch; sys.modules['torch.distributed'] = dist\n"
          "dist.is_available = lambda: True; init = [False]; dist.is_initialized = lambda: init[0]\n"
          "torch._C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace())\n"
          "print('no-pg', repr(_ddplaunch_fr_line(st, True)))\n"
          "init[0] = True\n"
          "print('no-api', repr(_ddplaunch_fr_line(st, True)), st['off'])\n"
          "doc = open(sys.argv[1]).read()\n"
          "def fr(includeCollectives, onlyActive):\n"
          "    d = json.loads(doc)\n"
          "    if not includeCollectives: d.pop('entries')\n"
          "    return json.dumps(d).encode()\n"
          "torch._C._distributed_c10d._dump_fr_trace_json = fr\n"
          "st = _ddplaunch_fr_state()\n"
          "sys.stdout.write(_ddplaunch_fr_line(st, False))\n"
          "st['since'] -= 11\n"
          "sys.stdout.write(_ddplaunch_fr_line(st, False))\n",
          f);
    fclose(f);
    const char *src = getenv("DDP_SRCDIR");
    char cmd[16384];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -S %s %s/tests/fixtures/fr/op.rank1.json > %s 2>&1", py,
             src ? src : ".", out);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    size_t len;
    FILE *o = fopen(out, "rb");
    cr_assert(o);
    static char text[1 << 16];
    len = fread(text, 1, sizeof(text) - 1, o);
    text[len] = 0;
    fclose(o);
    cr_expect(strstr(text, "no-torch '' False\n"), "%s", text);
    cr_expect(strstr(text, "no-pg ''\n"), "%s", text);
    cr_expect(strstr(text, "no-api '' True\n"), "%s", text);
    const char *first = strstr(text, "ddplaunch-fr ");
    cr_assert(first, "%s", text);
    const char *second = strstr(first + 1, "ddplaunch-fr ");
    cr_assert(second, "%s", text);
    struct ddp_fr_state st;
    cr_assert_eq(ddp_fr_parse(first, (size_t)(second - first), &st), 0);
    cr_expect_not(st.has_entries, "the first sample: status only");
    cr_expect_eq(st.g[0].enqueued, 6);
    cr_expect_str_eq(st.g[0].desc, "default_pg", "a new pg_status key is joined to its group name at once");
    cr_assert_eq(ddp_fr_parse(second, strlen(second), &st), 0);
    cr_expect(st.has_entries, "after 10 s standing still: the last entries");
    cr_expect_eq(st.g[0].nentries, 6, "all 6 of the group (at most DDP_FR_PER_GROUP)");
    cr_expect_str_eq(st.g[0].e[5].op, "gloo:broadcast");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

/* The sampler across process groups: a rank's pg_status key is its own backend counter, so the line carries the
 * join of each key to its group name (ddp_pgmap, read from the entries once when a key first shows a collective)
 * and torch's own member map by name (ddp_groups): rank 2 of the pair-group case (tests/fixtures/fr/groups) has
 * key "1" for group "2" = ranks 2-3, and no group "1". */
Test(recorder, sampler_python_groups)
{
    char dir[] = "/tmp/ddp-test-recorder-XXXXXX";
    cr_assert(mkdtemp(dir));
    char py[4200], out[4200], cmd[16384];
    snprintf(py, sizeof(py), "%s/t.py", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    FILE *f = fopen(py, "w");
    cr_assert(f);
    fputs(ddp_sample_sitecustomize(), f); /* run as __main__: only its functions are defined */
    fputs(
        "import json, sys, types\n"
        "torch = types.ModuleType('torch'); dist = types.ModuleType('torch.distributed')\n"
        "sys.modules['torch'] = torch; sys.modules['torch.distributed'] = dist\n"
        "dist.is_available = lambda: True; dist.is_initialized = lambda: True\n"
        "world, pair = object(), object()\n"
        "dist.distributed_c10d = types.SimpleNamespace(_world=types.SimpleNamespace(\n"
        "    pg_names={world: '0', pair: '2'}, pg_group_ranks={world: {0: 0, 1: 1, 2: 2, 3: 3}, pair: {2: 0, 3: 1}}))\n"
        "doc = json.load(open(sys.argv[1]))\n"
        "def fr(includeCollectives, onlyActive):\n"
        "    d = dict(doc)\n"
        "    if not includeCollectives: d.pop('entries')\n"
        "    return json.dumps(d).encode()\n"
        "torch._C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(_dump_fr_trace_json=fr))\n"
        "sys.stdout.write(_ddplaunch_fr_line(_ddplaunch_fr_state(), False))\n",
        f);
    fclose(f);
    const char *src = getenv("DDP_SRCDIR");
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -S %s %s/tests/fixtures/fr/groups/pair2.rank2.json > %s 2>&1", py,
             src ? src : ".", out);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    FILE *o = fopen(out, "rb");
    cr_assert(o);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof(text) - 1, o);
    text[len] = 0;
    fclose(o);
    struct ddp_fr_state st;
    cr_assert_eq(ddp_fr_parse(text, len, &st), 0, "%s", text);
    cr_expect_not(st.has_entries, "status only: the entries were read for the join, not sent");
    const struct ddp_fr_group *g = ddp_fr_group(&st, "2");
    cr_assert(g, "%s", text);
    cr_expect_str_eq(g->key, "1");
    cr_expect_str_eq(g->desc, "undefined");
    cr_expect_str_eq(g->ranks, "2-3", "torch's own map, joined by name");
    cr_expect_eq(g->enqueued, 4);
    cr_expect_null(ddp_fr_group(&st, "1"), "key \"1\" is no name: %s", text);
    cr_expect_str_eq(ddp_fr_group(&st, "0")->ranks, "0-3");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}

/* Places for stragglers: the recorded stuck case (ranks 0-1 wait in #6, rank 2 behind) and the healthy one (all
 * completed: nobody waits); a rank without a recorder is not placed. */
Test(recorder, places_for_stragglers)
{
    struct ddp_fr_state st[3];
    struct ddp_fr_input in[3];
    const struct ddp_fr_state *fr[3];
    enum ddp_suspect_place place[3] = {DDP_SUSPECT_NONE, DDP_SUSPECT_NONE, DDP_SUSPECT_NONE};
    load_case("stuck", st, in, 3);
    for (int r = 0; r < 3; r++)
        fr[r] = &st[r];
    cr_assert(ddp_fr_places(fr, 3, place));
    cr_expect(place[0] == DDP_SUSPECT_INSIDE && place[1] == DDP_SUSPECT_INSIDE && place[2] == DDP_SUSPECT_OUTSIDE);
    load_case("healthy", st, in, 3);
    cr_assert(ddp_fr_places(fr, 3, place));
    cr_expect(place[0] == DDP_SUSPECT_OUTSIDE && place[1] == DDP_SUSPECT_OUTSIDE && place[2] == DDP_SUSPECT_OUTSIDE);
    fr[1] = fr[2] = NULL;
    place[0] = DDP_SUSPECT_INSIDE;
    cr_expect_not(ddp_fr_places(fr, 3, place), "one rank with a recorder: the stacks decide");
    cr_expect_eq(place[0], DDP_SUSPECT_INSIDE, "untouched");
}

/* issue 39 item 1: strings from the recorder (written by the program: a group name, an op) longer than their
 * buffers are cut on a character boundary and made printable: the verdict's text stays valid UTF-8 (jansson
 * refuses anything else, and the record lost every field) and carries no escape sequence */
static bool valid_utf8(const char *s)
{
    json_t *j = json_string(s);
    bool ok = j != NULL;
    json_decref(j);
    return ok;
}

Test(recorder, strings_cut_on_a_character_boundary_and_printable)
{
    char op[512] = "nccl:\\u001b[2J"; /* an escape, as JSON writes it */
    for (int i = 0; i < 100; i++)
        strcat(op, "\xc3\xa9"); /* U+00E9, 2 bytes: an odd buffer size cuts one in two */
    char line[2][2048];
    for (int r = 0; r < 2; r++)
        snprintf(line[r], sizeof line[r],
                 "ddplaunch-fr {\"pg_status\":{\"0\":{\"last_enqueued_collective\":\"6\",\"last_completed_collective\":"
                 "\"5\"}},\"entries\":[{\"process_group\":[\"0\",\"default_pg\"],\"collective_seq_id\":6,"
                 "\"profiling_name\":\"%s%s\",\"input_sizes\":[[4]],\"input_dtypes\":[\"Float\"],\"is_p2p\":false}]}",
                 r ? "x" : "", op);
    struct ddp_fr_state st[2];
    struct ddp_fr_input in[2];
    bool culprit[2];
    struct ddp_fr_verdict v;
    for (int r = 0; r < 2; r++) {
        parse_line(line[r], &st[r]);
        in[r] = (struct ddp_fr_input){r, &st[r], 31000, NULL};
        cr_expect(valid_utf8(st[r].g[0].e[0].op), "rank %d op '%s'", r, st[r].g[0].e[0].op);
        cr_expect_null(strchr(st[r].g[0].e[0].op, '\033'));
    }
    ddp_fr_decide(in, 2, culprit, &v);
    cr_expect_eq(v.kind, DDP_FR_OP);
    cr_expect(valid_utf8(v.why), "%s", v.why);
    cr_expect(valid_utf8(v.op) && valid_utf8(v.other), "%s / %s", v.op, v.other);
    cr_expect_null(strchr(v.why, '\033'));
}
