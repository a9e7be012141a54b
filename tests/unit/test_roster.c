/* Unit tests for driver/roster.c: the control channel's events as the node agent's events. Node 0 over a real
 * channel on 127.0.0.1 with a stand-in node 1 (a bare coord.h agent): JOINED (all in), START laid out and sent
 * (node 1 gets its ranks and MASTER_PORT), node 1's REPORT (fresh, the round not done until node 0's own
 * workers end), EXIT sent at close. A follower fed made-up events: START, STOP of this or an earlier attempt,
 * EXIT, LOST. Node 0 fed a node out of range and a lost node; join timeout with nobody in. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/exit.h"
#include "driver/parts.h"
#include "driver/roster.h"
#include "scratch.h"

SCRATCH_SUITE(nodes);

#define SECRET "0123456789abcdef0123456789abcdef"

struct world {
    uv_loop_t loop;
    uv_timer_t guard;
    struct ddp_spec spec;
    struct ddp_plan_ctx ctx;
    char *env[2];
    struct ddp_output out;
    struct ddp_records *rec;
    struct ddp_roster *n;
    struct ddp_coord *peer; /* node 1, a bare channel agent */
    int listen_fd;
    /* what node 0's agent was told */
    int nae;
    struct ddp_agent_event_data ae[8];
    char why[8][128];
    /* what node 1 heard */
    struct ddp_coord_event start;
    bool got_start, got_exit;
    int exit_status;
    bool closed;
};

static void finish(struct world *w)
{
    if (w->closed)
        return;
    w->closed = true;
    if (w->peer)
        ddp_coord_close(w->peer, NULL, NULL);
    w->peer = NULL;
    ddp_roster_close(w->n, 3);
    if (!uv_is_closing((uv_handle_t *)&w->guard))
        uv_close((uv_handle_t *)&w->guard, NULL);
}

static void on_guard(uv_timer_t *t)
{
    struct world *w = t->data;
    cr_expect_fail("the exchange did not end within 5 s");
    finish(w);
}

/* node 0's channel: every event through ddp_roster_translate, then what the driver would do next */
static void leader_cb(struct ddp_coord *c, const struct ddp_coord_event *ev, void *arg)
{
    struct world *w = arg;
    (void)c;
    struct ddp_roster_view v = {.agent = w->nae ? DDP_AS_RUNNING : DDP_AS_JOINING, .attempt = w->nae ? 0 : -1};
    struct ddp_agent_event_data ae;
    char why[128];
    if (!ddp_roster_translate(w->n, ev, &v, &ae, why, sizeof why) || w->nae == 8)
        return;
    w->ae[w->nae] = ae;
    snprintf(w->why[w->nae], sizeof w->why[0], "%s", why);
    w->nae++;
    if (ae.kind == DDP_AE_JOINED && ae.all) {
        struct ddp_roster_place place;
        struct ddp_err err = {0};
        cr_expect_eq(ddp_roster_start(w->n, 0, 2, 29555, &place, &err), 0, "%s", err.msg);
        cr_expect_eq(place.world_size, 4, "2 nodes x 2 workers");
        cr_expect_eq(place.node_rank, 0);
        cr_expect_eq(place.rank_base, 0);
        cr_expect_eq(ddp_roster_round_attempt(w->n), 0);
    }
}

static void peer_cb(struct ddp_coord *c, const struct ddp_coord_event *ev, void *arg)
{
    struct world *w = arg;
    switch (ev->kind) {
    case DDP_COORD_START:
        w->start = *ev;
        w->got_start = true;
        ddp_coord_report(c, ev->attempt, 3, "rank 2 exited with code 3");
        break;
    case DDP_COORD_EXIT:
        w->got_exit = true;
        w->exit_status = ev->status;
        finish(w);
        break;
    default:
        break;
    }
}

static void world_init(struct world *w, int coord_node)
{
    struct ddp_err err = {0};
    memset(w, 0, sizeof *w);
    cr_assert_eq(uv_loop_init(&w->loop), 0);
    uv_timer_init(&w->loop, &w->guard);
    w->guard.data = w;
    uv_timer_start(&w->guard, on_guard, 5000, 0);
    ddp_spec_init(&w->spec);
    w->spec.name = ddp_xstrdup("train");
    w->env[0] = ddp_xasprintf("DDPLAUNCH_LOCK_DIR=%s", lockdir);
    cr_assert_eq(ddp_coord_listen("127.0.0.1", 0, &w->listen_fd, &err), 0, "%s", err.msg);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    cr_assert_eq(getsockname(w->listen_fd, (struct sockaddr *)&sa, &len), 0);
    w->ctx = (struct ddp_plan_ctx){.job = {.spec = &w->spec,
                                           .base_env = w->env,
                                           .hostname = coord_node == 0 ? "node-a" : "node-b",
                                           .run_id = "rid"},
                                   .master_addr = "127.0.0.1",
                                   .nnodes = 2,
                                   .node_rank = coord_node,
                                   .nproc = 2,
                                   .coord = {.node = coord_node,
                                             .port = ntohs(sa.sin_port),
                                             .listen_fd = coord_node == 0 ? w->listen_fd : -1,
                                             .secret = SECRET,
                                             .job = "job-1",
                                             .min_nnodes = 2,
                                             .join_timeout_ms = 3000,
                                             .lost_after_ms = 2000}};
    ddp_output_init(&w->out, -1, -1);
    w->rec = ddp_records_open(ddp_parts_records(&w->ctx), &w->out);
}

static void world_end(struct world *w)
{
    uv_run(&w->loop, UV_RUN_DEFAULT);
    cr_expect_eq(uv_loop_close(&w->loop), 0, "every handle closed");
    ddp_roster_free(w->n);
    ddp_records_close(w->rec);
    ddp_output_free(&w->out);
    ddp_spec_free(&w->spec);
    free(w->env[0]);
    close(w->listen_fd);
}

Test(nodes, leader_over_a_real_channel, .init = cr_redirect_stderr)
{
    struct world w;
    struct ddp_err err = {0};
    world_init(&w, 0);
    struct ddp_roster_config rcfg = ddp_parts_roster(&w.ctx);
    cr_assert_eq(ddp_roster_new(&w.loop, &rcfg, w.rec, leader_cb, &w, &w.n, &err), 0, "%s", err.msg);
    cr_expect_eq(ddp_roster_last_call(w.n), 0, "static: no last call");
    struct ddp_coord_config pc = {.node_rank = 1,
                                  .nnodes = 2,
                                  .addr = "127.0.0.1",
                                  .port = w.ctx.coord.port,
                                  .listen_fd = -1,
                                  .secret = SECRET,
                                  .job = "job-1",
                                  .nproc = 2,
                                  .host = "node-b",
                                  .lost_after_ms = 2000,
                                  .join_timeout_ms = 3000};
    cr_assert_eq(ddp_coord_start(&w.loop, &pc, peer_cb, &w, &w.peer, &err), 0, "%s", err.msg);
    /* run until node 1's report arrived, then end node 0's own workers and close (EXIT 3) */
    while (w.nae < 2 && !w.closed)
        uv_run(&w.loop, UV_RUN_ONCE);
    cr_assert_eq(w.nae, 2, "JOINED and REPORT, got %d events", w.nae);
    cr_expect_eq(w.ae[0].kind, DDP_AE_JOINED);
    cr_expect(w.ae[0].all, "every node is in");
    cr_expect_not(ddp_roster_join_progress(w.n, 100), "nobody missing");
    cr_expect(w.got_start, "node 1 got START");
    cr_expect_eq(w.start.attempt, 0);
    cr_expect_eq(w.start.world_size, 4);
    cr_expect_eq(w.start.rank_base, 2, "node 1's ranks follow node 0's 2");
    cr_expect_eq(w.start.group_rank, 1);
    cr_expect_eq(w.start.master_port, 29555, "the master port node 0 chose");
    cr_expect_eq(w.ae[1].kind, DDP_AE_NODE_REPORT);
    cr_expect_eq(w.ae[1].status, 3);
    cr_expect(w.ae[1].fresh, "the first end of the round");
    cr_expect_not(w.ae[1].round_done, "node 0's own workers still run");
    cr_expect(strstr(w.why[1], "node 1 failed (status 3): rank 2 exited with code 3"), "%s", w.why[1]);
    cr_expect(ddp_roster_local_end(w.n, 0), "with node 0's end the round is done");
    ddp_roster_close(w.n, 3);
    w.closed = true;
    while (!w.got_exit && uv_loop_alive(&w.loop))
        uv_run(&w.loop, UV_RUN_ONCE);
    cr_expect(w.got_exit, "node 1 heard EXIT");
    cr_expect_eq(w.exit_status, 3);
    if (w.peer)
        ddp_coord_close(w.peer, NULL, NULL);
    w.peer = NULL;
    if (!uv_is_closing((uv_handle_t *)&w.guard))
        uv_close((uv_handle_t *)&w.guard, NULL);
    world_end(&w);
}

static bool feed(struct world *w, enum ddp_coord_event_kind kind, int node, int attempt, int status,
                 struct ddp_roster_view v, struct ddp_agent_event_data *ae, char *why)
{
    struct ddp_coord_event ev = {
        .kind = kind, .node = node, .attempt = attempt, .status = status, .host = "node-x", .reason = "made up"};
    return ddp_roster_translate(w->n, &ev, &v, ae, why, 128);
}

static void ignore_cb(struct ddp_coord *c, const struct ddp_coord_event *ev, void *arg)
{
    (void)c, (void)ev, (void)arg;
}

Test(nodes, follower_made_up_events, .init = cr_redirect_stderr)
{
    struct world w;
    struct ddp_err err = {0};
    struct ddp_agent_event_data ae;
    char why[128];
    world_init(&w, 1); /* joins w.listen_fd, which never answers */
    struct ddp_roster_config rcfg = ddp_parts_roster(&w.ctx);
    cr_assert_eq(ddp_roster_new(&w.loop, &rcfg, w.rec, ignore_cb, &w, &w.n, &err), 0, "%s", err.msg);
    struct ddp_roster_view idle = {.agent = DDP_AS_WAITING, .attempt = -1};
    struct ddp_roster_view running = {.agent = DDP_AS_RUNNING, .attempt = 1};

    cr_expect(feed(&w, DDP_COORD_START, 0, 1, 0, idle, &ae, why));
    cr_expect_eq(ae.kind, DDP_AE_START);
    cr_expect_not(feed(&w, DDP_COORD_START, 0, 2, 0, running, &ae, why), "start while an attempt runs: ignored");
    cr_expect(feed(&w, DDP_COORD_STOP, 0, 1, 0, running, &ae, why));
    cr_expect_eq(ae.kind, DDP_AE_STOP);
    cr_expect_not(feed(&w, DDP_COORD_STOP, 0, 0, 0, running, &ae, why), "an earlier attempt's stop");
    cr_expect_not(feed(&w, DDP_COORD_STOP, 0, 1, 0, idle, &ae, why), "nothing runs");
    cr_expect(feed(&w, DDP_COORD_EXIT, 0, 0, 7, running, &ae, why));
    cr_expect_eq(ae.kind, DDP_AE_EXIT);
    cr_expect_eq(ae.status, 7);
    cr_expect(feed(&w, DDP_COORD_LOST, 0, 0, 0, running, &ae, why));
    cr_expect_eq(ae.kind, DDP_AE_COORD_LOST);
    cr_expect_not(feed(&w, DDP_COORD_REPORT, 2, 1, 1, running, &ae, why), "a report is node 0's");
    ddp_roster_close(w.n, 0);
    uv_close((uv_handle_t *)&w.guard, NULL);
    world_end(&w);
    fflush(stderr);
    char buf[4096] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, cr_get_redirected_stderr());
    buf[got] = '\0';
    cr_expect(strstr(buf, "node 0 says start while attempt 1 still runs here; ignored"), "%s", buf);
    cr_expect(strstr(buf, "node 0 is gone (made up): stopping the workers here and exiting"), "%s", buf);
}

Test(nodes, leader_made_up_events_and_join_timeout, .init = cr_redirect_stderr)
{
    struct world w;
    struct ddp_err err = {0};
    struct ddp_agent_event_data ae;
    char why[128];
    world_init(&w, 0);
    struct ddp_roster_config rcfg = ddp_parts_roster(&w.ctx);
    cr_assert_eq(ddp_roster_new(&w.loop, &rcfg, w.rec, ignore_cb, &w, &w.n, &err), 0, "%s", err.msg);
    struct ddp_roster_view joining = {.agent = DDP_AS_JOINING, .attempt = -1};
    cr_expect(ddp_roster_join_progress(w.n, 1000), "node 1 missing");
    cr_expect_not(feed(&w, DDP_COORD_JOINED, 2, 0, 0, joining, &ae, why), "node 2 of a 2-node job");
    cr_expect_not(feed(&w, DDP_COORD_JOINED, 0, 0, 0, joining, &ae, why), "node 0 is this one");
    cr_expect_not(feed(&w, DDP_COORD_REPORT, 1, 0, 1, joining, &ae, why), "no round is live");
    cr_expect(feed(&w, DDP_COORD_LOST, 1, 0, 0, joining, &ae, why));
    cr_expect_eq(ae.kind, DDP_AE_NODE_LOST);
    cr_expect_eq(ae.status, DDP_EXIT_LAUNCHER);
    cr_expect_not(ae.fresh, "no round to end");
    cr_expect_str_eq(why, "node 1 lost: made up");
    ddp_roster_join_timeout(w.n, &ae, &err);
    cr_expect_eq(ae.kind, DDP_AE_JOIN_TIMEOUT);
    cr_expect_not(ae.all, "1 of 2 nodes up, 2 needed");
    cr_expect_str_eq(err.msg, "only 1 of 2 nodes joined within 3s (join_timeout)");
    ddp_roster_close(w.n, 1);
    uv_close((uv_handle_t *)&w.guard, NULL);
    world_end(&w);
}
