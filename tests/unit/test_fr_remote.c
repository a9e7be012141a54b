/* Unit tests for fr_remote.c: a rank's flight-recorder summary as it travels to node 0 (encoded, decoded
 * strictly), node 0's store of the remote ranks per attempt, and fr.h's rules over local and remote ranks
 * together, on the recordings of tests/fixtures/fr (see MANIFEST there): the culprit on another node is named
 * with its node and host. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/fr_remote.h"

static void load(const char *name, struct ddp_fr_state *st)
{
    const char *src = getenv("DDP_SRCDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fixtures/fr/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    cr_assert_eq(ddp_fr_parse(buf, n, st), 0, "%s", name);
}

static void same_state(const struct ddp_fr_state *a, const struct ddp_fr_state *b)
{
    cr_assert_eq(a->ngroups, b->ngroups);
    cr_expect_eq(a->has_entries, b->has_entries);
    for (size_t i = 0; i < a->ngroups; i++) {
        const struct ddp_fr_group *x = &a->g[i], *y = &b->g[i];
        cr_expect_str_eq(x->id, y->id);
        cr_expect_str_eq(x->ranks, y->ranks);
        cr_expect_eq(x->enqueued, y->enqueued);
        cr_expect_eq(x->started, y->started);
        cr_expect_eq(x->completed, y->completed);
        cr_assert_eq(x->nentries, y->nentries);
        for (size_t k = 0; k < x->nentries; k++) {
            cr_expect_eq(x->e[k].seq, y->e[k].seq);
            cr_expect_eq(x->e[k].p2p_seq, y->e[k].p2p_seq);
            cr_expect_eq(x->e[k].p2p, y->e[k].p2p);
            cr_expect_str_eq(x->e[k].op, y->e[k].op);
            cr_expect_str_eq(x->e[k].shape, y->e[k].shape);
            cr_expect_eq(x->e[k].created_ns, y->e[k].created_ns);
        }
    }
}

Test(fr_remote, round_trip_of_every_recording)
{
    const char *names[] = {"stuck.rank2.json", "shape.rank1.json",   "subgroup.rank0.json",
                           "nccl.rank0.json",  "healthy.rank1.json", "p2p.rank1.json"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct ddp_fr_state st, back;
        struct ddp_fr_remote_rank where = {3, 1, "0000:17:00.0"}, got;
        char json[DDP_FR_GROUPS * 1024];
        load(names[i], &st);
        int n = ddp_fr_remote_encode(&st, &where, json, sizeof(json));
        cr_assert_gt(n, 0, "%s", names[i]);
        cr_expect_eq((size_t)n, strlen(json));
        cr_expect_null(strchr(json, '\n'), "one line");
        cr_assert_eq(ddp_fr_remote_decode(json, &back, &got), 0, "%s: %s", names[i], json);
        same_state(&st, &back);
        cr_expect_eq(got.local_rank, 3);
        cr_expect_eq(got.gpu, 1);
        cr_expect_str_eq(got.busid, "0000:17:00.0");
    }
}

Test(fr_remote, a_small_cap_drops_the_oldest_entries_first)
{
    struct ddp_fr_state st, back;
    struct ddp_fr_remote_rank got;
    char json[4096];
    load("shape.rank0.json", &st);
    int full = ddp_fr_remote_encode(&st, NULL, json, sizeof(json));
    cr_assert_gt(full, 0);
    int n = ddp_fr_remote_encode(&st, NULL, json, (size_t)full); /* one byte short */
    cr_assert_gt(n, 0);
    cr_assert_lt(n, full);
    cr_assert_eq(ddp_fr_remote_decode(json, &back, &got), 0);
    cr_assert_eq(back.g[0].nentries, st.g[0].nentries - 1);
    cr_expect_eq(back.g[0].e[back.g[0].nentries - 1].seq, st.g[0].e[st.g[0].nentries - 1].seq, "the newest stays");
    cr_expect_eq(back.g[0].enqueued, st.g[0].enqueued);
    cr_expect_eq(ddp_fr_remote_encode(&st, NULL, json, 20), -ENOSPC);
}

Test(fr_remote, decode_is_strict)
{
    struct ddp_fr_state st;
    struct ddp_fr_remote_rank w;
    const char *good =
        "{\"v\":2,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[{\"id\":\"0\",\"k\":\"0\",\"d\":\"\",\"r\":\"0-1\","
        "\"q\":6,\"s\":-1,\"c\":5,\"e\":[]}]}";
    cr_assert_eq(ddp_fr_remote_decode(good, &st, &w), 0);
    cr_expect_eq(st.g[0].enqueued, 6);
    char longop[300];
    snprintf(
        longop, sizeof(longop),
        "{\"v\":2,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":true,\"g\":[{\"id\":\"0\",\"k\":\"0\",\"d\":\"\",\"r\":\"\",\"q\":1,\"s\":-1,"
        "\"c\":0,\"e\":[{\"n\":1,\"p\":0,\"pp\":false,\"o\":\"%0100d\",\"sh\":\"\",\"t\":0}]}]}",
        0);
    const char *bad[] = {
        "",
        "[]",
        "{}",
        "not json",
        "{\"v\":9,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[]}",         /* another version */
        "{\"v\":2,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[],\"x\":1}", /* unknown key */
        "{\"v\":2,\"lr\":\"0\",\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[]}",     /* wrong type */
        "{\"v\":2,\"lr\":-7,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[]}",        /* no such local rank */
        "{\"v\":2,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[{\"id\":\"\",\"k\":\"\",\"d\":\"\",\"r\":\"\",\"q\":1,\"s\":1,"
        "\"c\":1,\"e\":[]}]}", /* no name and no key */
        "{\"v\":2,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[{\"id\":\"0\",\"k\":\"0\",\"d\":\"\",\"r\":\"\",\"q\":1,\"s\":1,"
        "\"c\":1,\"e\":[]},{\"id\":\"0\",\"k\":\"0\",\"d\":\"\",\"r\":\"\",\"q\":1,\"s\":1,\"c\":1,\"e\":[]}]}", /* one
                                                                                                                    group
                                                                                                                    twice
                                                                                                                  */
        longop,
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(ddp_fr_remote_decode(bad[i], &st, &w), -EINVAL, "accepted %s", bad[i]);
    /* more groups than the state holds */
    struct ddp_buf b = {0};
    ddp_buf_puts(&b, "{\"v\":2,\"lr\":0,\"gpu\":-1,\"bus\":\"\",\"he\":false,\"g\":[");
    for (int i = 0; i <= DDP_FR_GROUPS; i++)
        ddp_buf_printf(&b, "%s{\"id\":\"%d\",\"k\":\"\",\"d\":\"\",\"r\":\"\",\"q\":1,\"s\":1,\"c\":1,\"e\":[]}",
                       i ? "," : "", i);
    ddp_buf_puts(&b, "]}");
    cr_expect_eq(ddp_fr_remote_decode(b.data, &st, &w), -EINVAL);
    ddp_buf_free(&b);
}

/* node 0 runs rank 0 (n0), the other ranks are remote on node k (rank k on node k, host "host-k") */
static void put_remote(struct ddp_fr_remote *r, int attempt, const char *c, int rank, long long still)
{
    struct ddp_fr_state st;
    char name[64], json[DDP_FR_GROUPS * 1024], host[16];
    snprintf(name, sizeof(name), "%s.rank%d.json", c, rank);
    snprintf(host, sizeof(host), "host-%d", rank);
    load(name, &st);
    struct ddp_fr_remote_rank w = {0, -1, ""};
    cr_assert_gt(ddp_fr_remote_encode(&st, &w, json, sizeof(json)), 0);
    cr_assert_eq(ddp_fr_remote_put(r, attempt, rank, host, rank, still, json, 1000, NULL), 0);
}

static const struct {
    const char *name;
    enum ddp_fr_kind kind;
    unsigned culprits; /* one bit per rank */
    const char *says;
} cases[] = {
    {"stuck", DDP_FR_BEHIND, 1u << 2,
     "its last there is #5), where ranks 0, 1 wait; no progress in the recorders for 41 s; rank 2 is on node 2 "
     "(host-2)"},
    {"op", DDP_FR_OP, 1u << 1,
     "rank 1 is in gloo:broadcast, ranks 0, 2 in gloo:all_reduce; no progress in the recorders for 41 s; rank 1 is on "
     "node 1 (host-1)"},
    {"shape", DDP_FR_SHAPE, 1u << 1,
     "rank 1 has [[2]] Float, ranks 0, 2 have [[1]] Float; no progress in the recorders for 41 s; rank 1 is on node 1"},
    {"subgroup", DDP_FR_BEHIND, 1u << 1,
     "its last there is #3), where rank 0 waits; rank 2 waits in group 0's #5 for ranks 0, 1; no progress in the "
     "recorders for 41 s; rank 1 is on node 1"},
    {"healthy", DDP_FR_NONE, 0, ""},
};

Test(fr_remote, the_culprit_on_another_node_is_named_on_node_0)
{
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct ddp_fr_remote *r = ddp_fr_remote_new();
        struct ddp_fr_state local;
        char name[64];
        snprintf(name, sizeof(name), "%s.rank0.json", cases[c].name);
        load(name, &local);
        put_remote(r, 4, cases[c].name, 1, 40000);
        put_remote(r, 4, cases[c].name, 2, 40000);
        cr_expect_eq(ddp_fr_remote_count(r, 4), 2);
        struct ddp_fr_input in[1] = {{0, &local, 41000, "train.py:50 in wait_for"}};
        bool culprit[1] = {true};
        struct ddp_fr_verdict v;
        struct ddp_fr_remote_named named;
        ddp_fr_remote_decide(r, 4, 2000, in, 1, culprit, &v, &named);
        cr_expect_eq(v.kind, cases[c].kind, "%s: %s (%s)", cases[c].name, ddp_fr_kind_name(v.kind), v.why);
        cr_expect_eq(culprit[0], cases[c].culprits & 1, "%s", cases[c].name);
        cr_expect(strstr(v.why, cases[c].says), "%s: '%s' not in '%s'", cases[c].name, cases[c].says, v.why);
        int who = cases[c].culprits & 4 ? 2 : cases[c].culprits & 2 ? 1 : -1;
        if (who < 0) {
            cr_expect_eq(named.n, 0);
        } else {
            char want[128];
            snprintf(want, sizeof(want), "rank %d on node %d (local 0, host host-%d, GPU none)", who, who, who);
            cr_expect_eq(named.n, 1, "%s", cases[c].name);
            cr_expect_str_eq(named.text.data, want);
            json_t *j = json_array_get(named.culprits, 0);
            cr_expect_eq(json_integer_value(json_object_get(j, "rank")), who);
            cr_expect_eq(json_integer_value(json_object_get(j, "node")), who);
            cr_expect(json_is_null(json_object_get(j, "pid")), "node 0 knows no pid of a remote rank");
            const char *coll = json_string_value(json_object_get(j, "collective"));
            if (cases[c].kind == DDP_FR_BEHIND)
                cr_expect_null(coll, "%s: behind, in no known collective", cases[c].name);
            else
                cr_expect_str_eq(coll, cases[c].kind == DDP_FR_OP ? "gloo:broadcast" : "gloo:all_reduce");
            cr_expect_str_eq(json_string_value(json_object_get(j, "host")), who == 1 ? "host-1" : "host-2");
            struct ddp_buf b = {0};
            json_t *all = json_array();
            ddp_buf_puts(&b, "rank 0 (local 0)");
            ddp_fr_remote_named_take(&named, &b, all);
            cr_expect(strstr(b.data, "rank 0 (local 0); rank "), "%s", b.data);
            cr_expect_eq(json_array_size(all), 1);
            json_decref(all);
            ddp_buf_free(&b);
        }
        ddp_fr_remote_named_free(&named);
        ddp_fr_remote_free(r);
    }
}

/* The remote ranks' time standing still grows on node 0 from what was sent: the waiters' wait is theirs. */
Test(fr_remote, still_grows_from_what_was_sent)
{
    struct ddp_fr_remote *r = ddp_fr_remote_new();
    struct ddp_fr_state local;
    load("stuck.rank2.json", &local);
    put_remote(r, 0, "stuck", 0, 30000);
    put_remote(r, 0, "stuck", 1, 30000);
    struct ddp_fr_input in[1] = {{2, &local, 0, NULL}};
    bool culprit[1];
    struct ddp_fr_verdict v;
    struct ddp_fr_remote_named named;
    ddp_fr_remote_decide(r, 0, 1000 + 12000, in, 1, culprit, &v, &named);
    cr_expect_eq(v.kind, DDP_FR_BEHIND);
    cr_expect(culprit[0], "the local rank 2 is the culprit: %s", v.why);
    cr_expect_eq(named.n, 0);
    cr_expect_eq(v.waited_ms, 42000, "30 s when sent, 12 s since");
    cr_expect(strstr(v.why, "where ranks 0, 1 wait; no progress in the recorders for 42 s"), "%s", v.why);
    ddp_fr_remote_named_free(&named);
    ddp_fr_remote_free(r);
}

Test(fr_remote, per_attempt_and_local_ranks_win)
{
    struct ddp_fr_remote *r = ddp_fr_remote_new();
    struct ddp_fr_state local;
    load("stuck.rank0.json", &local);
    put_remote(r, 1, "stuck", 2, 0);
    cr_expect_eq(ddp_fr_remote_count(r, 1), 1);
    cr_expect_eq(ddp_fr_remote_count(r, 0), 0);
    /* an earlier attempt's message arriving late is ignored; a later attempt clears the store */
    char json[4096];
    cr_assert_gt(ddp_fr_remote_encode(&local, NULL, json, sizeof(json)), 0);
    cr_expect_eq(ddp_fr_remote_put(r, 0, 1, "h", 1, 0, json, 0, NULL), -ESTALE);
    cr_expect_eq(ddp_fr_remote_put(r, 1, 1, "h", 1, 0, "{\"v\":1}", 0, NULL), -EINVAL);
    cr_expect_eq(ddp_fr_remote_count(r, 1), 1);
    struct ddp_fr_input in[1] = {{0, &local, 41000, NULL}};
    bool culprit[1];
    struct ddp_fr_verdict v;
    struct ddp_fr_remote_named named;
    ddp_fr_remote_decide(r, 2, 0, in, 1, culprit, &v, &named);
    cr_expect_eq(v.kind, DDP_FR_NONE, "attempt 2: nothing remote yet, one local rank decides nothing");
    ddp_fr_remote_named_free(&named);
    cr_expect_eq(ddp_fr_remote_put(r, 2, 1, "h", 1, 0, json, 0, NULL), 0);
    cr_expect_eq(ddp_fr_remote_count(r, 2), 1, "attempt 1's rank 2 is gone");
    /* a remote rank claiming a local rank's number is left out */
    cr_expect_eq(ddp_fr_remote_put(r, 2, 1, "h", 0, 0, json, 0, NULL), 0);
    struct ddp_fr_state st2;
    load("stuck.rank2.json", &st2);
    struct ddp_fr_input in2[2] = {{0, &local, 41000, NULL}, {2, &st2, 41000, NULL}};
    bool c2[2];
    ddp_fr_remote_decide(r, 2, 0, in2, 2, c2, &v, &named);
    cr_expect_eq(v.kind, DDP_FR_BEHIND);
    cr_expect(!c2[0] && c2[1], "%s", v.why);
    cr_expect(strstr(v.why, "where ranks 0, 1 wait"), "ranks 0 (local) and 1 (remote) wait: %s", v.why);
    ddp_fr_remote_named_free(&named);
    /* summary.json's flight_recorder gets the remote rank */
    json_t *rec = json_object();
    cr_expect_eq(ddp_fr_remote_put(r, 2, 1, "h", 1, 0, json, 0, rec), 0);
    cr_expect_eq(json_integer_value(json_object_get(rec, "attempt")), 2);
    json_t *one = json_array_get(json_object_get(json_object_get(rec, "ranks"), "1"), 0);
    cr_expect_eq(json_integer_value(json_object_get(one, "last_enqueued")), 6);
    json_decref(rec);
    ddp_fr_remote_free(r);
}

/* A thousand nodes' ranks: each kept once, found again by its number; no rank beyond any job's. */
Test(fr_remote, many_ranks)
{
    struct ddp_fr_remote *r = ddp_fr_remote_new();
    struct ddp_fr_state st;
    char json[4096];
    load("stuck.rank2.json", &st);
    cr_assert_gt(ddp_fr_remote_encode(&st, NULL, json, sizeof(json)), 0);
    for (int k = 0; k < 2; k++)
        for (int rank = 8191; rank >= 8; rank -= 3)
            cr_assert_eq(ddp_fr_remote_put(r, 0, 1 + rank / 8, "h", rank, 0, json, 0, NULL), 0);
    cr_expect_eq(ddp_fr_remote_count(r, 0), (8191 - 8) / 3 + 1);
    cr_expect_eq(ddp_fr_remote_put(r, 0, 1, "h", -1, 0, json, 0, NULL), -EINVAL);
    cr_expect_eq(ddp_fr_remote_put(r, 0, 1, "h", 1 << 30, 0, json, 0, NULL), -EINVAL);
    ddp_fr_remote_clear(r);
    cr_expect_eq(ddp_fr_remote_count(r, 0), 0);
    cr_expect_eq(ddp_fr_remote_put(r, 0, 1, "h", 8191, 0, json, 0, NULL), 0);
    cr_expect_eq(ddp_fr_remote_count(r, 0), 1);
    ddp_fr_remote_free(r);
}
