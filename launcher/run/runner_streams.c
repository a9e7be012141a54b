/* runner_streams: a worker's output before the runner reads it: its pipes or pseudo-terminals and the shim's report
 * pipe (ddp_runner_open_pipes), its line streams and log files (ddp_runner_open_streams). It opens; the runner reads,
 * and closes them when the worker's handles close. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/logdir.h"
#include "run/pty.h"
#include "run/runner_internal.h"

/* Kernel buffer of each worker output pipe: fewer wake-ups than the 64 KiB default when a worker floods. */
#define PIPE_SIZE (256 * 1024)

static const char *const log_names[3] = {"stdout.log", "stderr.log", "timed.log"};

/* Stream s (which 0 stdout, 1 stderr) of worker k also copies the lines that match [job] dup_stdout_filters /
 * dup_stderr_filters to its attempt's filtered_stdout.log / filtered_stderr.log (torchrun 2.9's), made by the attempt's
 * first worker. */
static int open_filtered(const struct ddp_runner_config *cfg, struct ddp_runner_worker *k, int which,
                         struct ddp_stream *s, struct ddp_err *err)
{
    const char *filters = cfg->dup_filters[which];
    struct ddp_logfile *f = &k->run->filtered[which];
    if (!filters || !*filters)
        return 0;
    if (!f->name) {
        char *rel = ddp_xasprintf("attempt_%d/filtered_%s.log", k->run->plan.attempt, which ? "stderr" : "stdout");
        int fd = ddp_logdir_create_file(cfg->logdir, rel, err);
        ddp_logfile_init(f, fd, -1, rel);
        free(rel);
        if (fd < 0)
            return fd;
    }
    s->dup = f;
    s->dup_filters = filters;
    s->dup_prefix = ddp_xasprintf("[rank%d]: ", k->w->rank);
    return 0;
}

int ddp_runner_open_streams(const struct ddp_runner_config *cfg, struct ddp_runner_worker *k, struct ddp_err *err)
{
    const struct ddp_worker *w = k->w;
    struct ddp_logdir *ld = cfg->logdir;
    int rc;

    if (w->log_dir && !ld) { /* error files in the private run directory */
        rc = ddp_mkdir_p(w->log_dir, 0755);
        if (rc < 0)
            return ddp_errf(err, rc, "rank %d: cannot create log dir %s: %s", w->rank, w->log_dir, strerror(-rc));
    }
    ddp_stream_init(&k->io->s_out, 0, w->prefix[0], w->to_console[0], w->raw[0], -1);
    ddp_stream_init(&k->io->s_err, 1, w->prefix[1], w->to_console[1], w->raw[1], -1);
    struct ddp_logfile *files[3] = {&k->io->s_out.file, &k->io->s_err.file, &k->io->timed};
    for (int i = 0; ld && i < 3; i++) { /* run_free() closes them, also after a failure here */
        char *rel = ddp_xasprintf("attempt_%d/%d/%s", k->run->plan.attempt, w->local_rank, log_names[i]);
        rc = ddp_logdir_create_file(ld, rel, err);
        ddp_logfile_init(files[i], rc, w->rank, rel);
        free(rel);
        if (rc < 0)
            return rc;
    }
    if (ld)
        k->io->s_out.timed = k->io->s_err.timed = &k->io->timed;
    for (int i = 0; ld && i < 2; i++) /* the attempt's filtered copy, made with its first worker's streams */
        if ((rc = open_filtered(cfg, k, i, i ? &k->io->s_err : &k->io->s_out, err)) < 0)
            return rc;
    return 0;
}

/* stdout (which 0) or stderr (1): a pseudo-terminal of the console's size when the plan says so (the console
 * is a terminal: pty.h), else a real pipe. [0] is read here, [1] becomes the worker's fd. 0 or -errno. */
static int open_out(const struct ddp_worker *w, int which, int p[2], struct ddp_err *err)
{
    if (w->tty[which]) {
        int rc = ddp_pty_open(which ? STDERR_FILENO : STDOUT_FILENO, &p[0], &p[1], err);
        if (rc < 0)
            errno = -rc;
        return rc;
    }
    return pipe2(p, O_CLOEXEC) != 0 ? -errno : 0;
}

/* Real pipes (libuv's UV_CREATE_PIPE makes socketpairs, whose per-write skbs cost both sides dearly when
 * a worker prints many short lines), or pseudo-terminals for a terminal console. Close-on-exec here; libuv
 * dup2s them onto 1, 2 and 3 in the child. */
int ddp_runner_open_pipes(const struct ddp_worker *w, int rp[2], int op[2], int ep[2], struct ddp_err *err)
{
    if (pipe2(rp, O_CLOEXEC) != 0)
        return ddp_errf(err, -errno, "rank %d: pipe: %s", w->rank, strerror(errno));
    if (open_out(w, 0, op, err) != 0) {
        int e = errno;
        close(rp[0]);
        close(rp[1]);
        return ddp_errf(err, -e, "rank %d: pipe: %s", w->rank, strerror(e));
    }
    if (open_out(w, 1, ep, err) != 0) {
        int e = errno;
        close(rp[0]);
        close(rp[1]);
        close(op[0]);
        close(op[1]);
        return ddp_errf(err, -e, "rank %d: pipe: %s", w->rank, strerror(e));
    }
    fcntl(op[0], F_SETPIPE_SZ, PIPE_SIZE);
    fcntl(ep[0], F_SETPIPE_SZ, PIPE_SIZE);
    return 0;
}
