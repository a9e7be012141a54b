/* logdir: the job's log directory in torchrun's layout, LOG_DIR/<run_id>_<random>/attempt_N/LOCAL_RANK/
 * {stdout.log,stderr.log,error.json}, made without following an untrusted symlink and without ever reusing
 * what exists: LOG_DIR is walked one component at a time from "/" (openat, O_NOFOLLOW; a symlink is followed
 * only when it and its directory belong to root or this user and nobody else may replace it; every directory
 * on the way must belong to root or this user and be unwritable by group and others unless sticky, since
 * workers get paths through it, not descriptors), every directory below
 * LOG_DIR is created fresh by this job (mkdirat; an existing one is an error), every file is created with
 * O_CREAT|O_EXCL relative to a directory this job made. It does not decide what is logged (supervise.c). */
#ifndef DDP_LOGDIR_H
#define DDP_LOGDIR_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/util.h"

struct ddp_logdir;

/* Open LOG_DIR (creating missing components, 0755) and create the run directory "<run_id>_XXXXXXXX" in it
 * (mode 0700, as torchrun's mkdtemp; characters of run_id outside [A-Za-z0-9._-] become '_'). Returns 0 with
 * *out (caller frees with ddp_logdir_close), or a negative errno with err ("log_dir DIR: what is wrong"). */
int ddp_logdir_create(const char *log_dir, const char *run_id, struct ddp_logdir **out, struct ddp_err *err);
/* ddp_logdir_create, where trust ([job] trust_log_dir) accepts every directory on the way and follows every
 * symlink: the user's explicit word that nobody hostile can change them (root in a container workspace of
 * another uid). Without it, a user other than root may use a directory of their own below one that another
 * user owns or a group may write (a setgid 2775 project directory): nothing is refused there while a private
 * directory of theirs is below it; a refusal ends naming --trust-log-dir. */
int ddp_logdir_make(const char *log_dir, const char *run_id, bool trust, struct ddp_logdir **out, struct ddp_err *err);

/* Whether LOG_DIR could be made, making nothing (`plan`, `doctor`, and a run before anything starts): its
 * nearest existing ancestor must be a directory this process may write, on a file system that takes new
 * directories (not read-only, not /proc or /sys). 0, or a negative errno with err in ddp_logdir_create's words
 * ("log_dir DIR: cannot create 'COMPONENT': why"). */
int ddp_logdir_check(const char *log_dir, struct ddp_err *err);

/* The run directory's path: LOG_DIR/<run_id>_XXXXXXXX, LOG_DIR as given (prefixed with the working directory
 * when relative), not canonicalised. */
const char *ddp_logdir_path(const struct ddp_logdir *ld);

/* The run directory, open (O_DIRECTORY); for files of the whole run (openat). Owned by ld. */
int ddp_logdir_fd(const struct ddp_logdir *ld);

/* Create attempt_N and its local rank directories 0..nranks-1 (0755). An attempt_N that exists already
 * (this job did not make it) is -EEXIST: nothing is written through it. 0 or a negative errno with err. */
int ddp_logdir_attempt(struct ddp_logdir *ld, int attempt, int nranks, struct ddp_err *err);

/* Create the new file rel ("attempt_0/1/stdout.log", "events.jsonl") in the run directory: every directory
 * of rel opened with O_NOFOLLOW and checked to be this user's, the file made with O_CREAT|O_EXCL|O_NOFOLLOW,
 * mode 0644, opened write-only and close-on-exec. Returns the fd (caller closes), or a negative errno with
 * err. */
int ddp_logdir_create_file(const struct ddp_logdir *ld, const char *rel, struct ddp_err *err);

/* Closes the directory and frees ld (NULL is fine). Removes nothing. */
void ddp_logdir_close(struct ddp_logdir *ld);

#endif
