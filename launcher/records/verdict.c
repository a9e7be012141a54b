/* verdict: see verdict.h. */
#include "records/verdict.h"

#include <string.h>

#include "base/exit.h"
#include "base/util.h"
#include "records/jsonlog.h"

json_t *ddp_verdict_json(int status, const char *result, bool root_set, int root_rank, int root_status)
{
    bool worker = status == DDP_EXIT_OK || (root_set && strcmp(result, "failed") == 0 && root_status == status);
    return ddp_jsonlog_pack("{s:i, s:s, s:o, s:s}", "code", status, "source", worker ? "worker" : "launcher", "rank",
                            worker && status != 0 ? json_integer(root_rank) : json_null(), "reason", result);
}

void ddp_verdict_refused(const struct ddp_verdict_refusal *v)
{
    struct ddp_err err = {0};
    struct ddp_logdir *made = NULL, *ld = v->ld;
    struct ddp_jsonlog *rec = NULL;
    char now[32];
    if (!v->log_dir || !*v->log_dir)
        return;
    if (!ld && ddp_logdir_create(v->log_dir, v->run_id ? v->run_id : "refused", &made, &err) < 0) {
        ddp_debug("refusal not recorded: %s", err.msg);
        return;
    }
    ld = ld ? ld : made;
    if (ddp_jsonlog_open(ddp_logdir_fd(ld), ddp_logdir_path(ld), &rec, &err) < 0) {
        ddp_debug("refusal not recorded: %s", err.msg);
        goto out;
    }
    const char *reason = v->reason && *v->reason ? v->reason : "refused";
    ddp_jsonlog_event(rec, "job_refused", ddp_jsonlog_pack("{s:i, s:s}", "exit_status", v->status, "reason", reason));
    json_t *exit =
        ddp_jsonlog_pack("{s:i, s:s, s:n, s:s}", "code", v->status, "source", "launcher", "rank", "reason", "refused");
    ddp_time_iso(NULL, now);
    json_t *sum = ddp_jsonlog_pack("{s:s?, s:s?, s:s?, s:s?, s:o, s:i, s:s, s:i, s:s, s:s, s:I, s:n, s:n, s:[], "
                                   "s:s, s:s, s:o}",
                                   "program", v->program, "job", v->job, "host", v->host, "run_id", v->run_id,
                                   "node_rank", v->node_rank >= 0 ? json_integer(v->node_rank) : json_null(),
                                   "exit_status", v->status, "result", "refused", "attempts", 0, "started", now,
                                   "ended", now, "duration_ms", (json_int_t)0, "timeout", "root_cause", "failures",
                                   "log_dir", ddp_logdir_path(ld), "error", reason, "exit", exit);
    json_object_set_new(sum, "nnodes", json_integer(v->nnodes > 0 ? v->nnodes : 1));
    json_object_set_new(sum, "ranks", json_null());
    json_object_set_new(sum, "hang", json_null());
    json_object_set_new(sum, "mismatch", json_null());
    json_object_set_new(sum, "recovery", json_null());
    json_object_set_new(sum, "flight_recorder", json_null());
    const char *arrays[] = {"stragglers", "gpus_left_out", "warm_starts", "logs_stopped"};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
        json_object_set_new(sum, arrays[i], json_array());
    if (ddp_jsonlog_summary(rec, sum) == 0)
        ddp_info("the refusal is recorded in %s/summary.json", ddp_logdir_path(ld));
    ddp_jsonlog_close(rec);
out:
    ddp_logdir_close(made);
}
