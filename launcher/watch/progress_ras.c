/* progress_ras: NCCL's RAS asked where no rank has a flight recorder (progress_internal.h): the query (rasq.h),
 * whether the answer is the job's own (port.h), and what it says of the ranks, as a line and a `ras` event. Judges
 * no hang itself (progress_judge.c reads what it kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "host/port.h"
#include "records/jsonlog.h"
#include "watch/progress_internal.h"
#include "watch/ras.h"
#include "watch/rasq.h"

#define RAS_MS 2000 /* the longest wait for NCCL RAS's answer */

/* The job's RAS port: the first rank's that has one, else 0. */
static int ras_port(const struct ddp_progress *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->rk[i].r.ras_port)
            return w->rk[i].r.ras_port;
    return 0;
}

/* An answer is the job's own only when every socket listening on its RAS port is open in a process of the job's
 * ranks (their shims' and programs' process groups; port.h): another user may bind the port first (it shows in
 * the lock names) and name an innocent rank. Otherwise one line, and the answer is not believed. */
static bool ras_from_job(const struct ddp_progress *w)
{
    int port = ras_port(w);
    pid_t *groups = ddp_xcalloc(2 * w->n + 1, sizeof(*groups));
    for (size_t i = 0; i < w->n; i++) {
        groups[2 * i] = w->rk[i].groups[0];
        groups[2 * i + 1] = w->rk[i].groups[1];
    }
    struct ddp_port_holder h;
    int rc = ddp_port_listener_owned(port, groups, 2 * w->n, &h);
    free(groups);
    if (rc == 1)
        return true;
    if (rc == 0 && h.pid > 0)
        ddp_warn("attempt %d: NCCL RAS: answer on port %d ignored: pid %d (%s, user %s) listens there, not one of "
                 "the job's ranks",
                 w->attempt, port, (int)h.pid, h.comm[0] ? h.comm : "?", h.user);
    else if (rc == 0)
        ddp_warn("attempt %d: NCCL RAS: answer on port %d ignored: a process not visible here (%s) listens there, "
                 "not one of the job's ranks",
                 w->attempt, port, h.user);
    else
        ddp_warn("attempt %d: NCCL RAS: answer on port %d ignored: no socket of the job's ranks listens there now",
                 w->attempt, port);
    return false;
}

/* NCCL RAS answered (rasq.h): what it says of the job's ranks, as a line and a `ras` event, when it is the job's
 * own RAS that answered (ras_from_job). */
static void ras_answered(void *arg, int rc, const struct ddp_ras *ras)
{
    struct ddp_progress *w = arg;
    w->rasq = NULL;
    if (rc < 0) {
        ddp_debug("attempt %d: NCCL RAS did not answer: %s", w->attempt, strerror(-rc));
        return;
    }
    if (!ras_from_job(w))
        return;
    size_t n = w->n ? w->n : 1;
    pid_t *pid = ddp_xcalloc(n, sizeof(*pid));
    int *rank = ddp_xcalloc(n, sizeof(*rank));
    bool *culprit = ddp_xcalloc(n, sizeof(*culprit));
    char why[1024];
    for (size_t i = 0; i < w->n; i++) {
        pid[i] = w->rk[i].groups[1];
        rank[i] = w->rk[i].r.rank;
    }
    ddp_ras_judge(ras, pid, rank, w->n, culprit, why, sizeof(why));
    memcpy(w->ras_named, culprit, w->n * sizeof(*culprit)); /* the next verdict's evidence where the stacks name
                                                               nobody */
    ddp_text_copy(w->ras_why, sizeof(w->ras_why), why);
    json_t *named = json_array();
    for (size_t i = 0; i < w->n; i++)
        if (culprit[i])
            json_array_append_new(named, json_integer(w->rk[i].r.rank));
    if (!why[0])
        snprintf(why, sizeof(why), "NCCL RAS: no rank behind, missing or failed in %zu communicator%s", ras->ncomms,
                 ras->ncomms == 1 ? "" : "s");
    ddp_warn("attempt %d: %s", w->attempt, why);
    ddp_jsonlog_event(w->rec, "ras",
                      ddp_jsonlog_pack("{s:i, s:s, s:o, s:i}", "attempt", w->attempt, "why", why, "ranks", named,
                                       "communicators", (int)ras->ncomms));
    free(pid);
    free(rank);
    free(culprit);
}

/* No rank has a flight recorder (torch 1.x, the recorder off, a stuck Python): ask NCCL's RAS, if the job has a
 * port of its own. */
void ddp_progress_ras_ask(struct ddp_progress *w)
{
    int port = ras_port(w);
    bool recorder = false;
    for (size_t i = 0; i < w->n; i++)
        recorder |= w->rk[i].running && w->rk[i].fr;
    if (recorder || !port || w->rasq)
        return;
    w->rasq = ddp_rasq_start(w->tick.loop, port, RAS_MS, ras_answered, w);
}
