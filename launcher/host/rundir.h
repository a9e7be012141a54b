/* rundir: safe creation and opening of runtime directories and files: the private per-user directory (0700,
 * owner checked) and the shared host-wide sticky lease info directory (files 0644), never following symlinks.
 * It does not decide what is written there (lease.h), holds no locks (klock.h) and never removes anything. */
#ifndef DDP_RUNDIR_H
#define DDP_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/util.h"

/* The shared lock directory: $DDPLAUNCH_LOCK_DIR from envp when set (tests, sites), else
 * DDP_RUNDIR_LOCK_DIR ("/run/lock/ddplaunch") when /run/lock is a directory, else "/tmp/ddplaunch-locks".
 * Every user of a host gets the same answer, so jobs of root and of other users see each other. The setting
 * is made absolute and normalized (ddp_path_normalize), so that every spelling of one directory is one lock
 * namespace (symlinks are not resolved: the directory itself must not be one). Returns a static string (the last
 * call's); never NULL. */
#define DDP_RUNDIR_LOCK_DIR "/run/lock/ddplaunch"
#define DDP_RUNDIR_LOCK_DIR_FALLBACK "/tmp/ddplaunch-locks"
const char *ddp_rundir_lock_dir(char *const *envp);

/* Open (creating when missing, mode 01777) the shared lock directory at path. The last component must not be
 * a symlink; it must be a directory, sticky when writable by others, owned by root or by this user (or by
 * another user with mode exactly 1777: the directory another user's job created first).
 * Returns 0 with *dirfd_out (O_CLOEXEC; caller closes), or a negative errno with err naming path, owner
 * and mode, and what was expected. */
int ddp_rundir_open_shared(const char *path, int *dirfd_out, struct ddp_err *err);

/* Replace the content of name in dirfd with text (a small file readable by all, owned by this user:
 * created 0644 when missing; refused when it is a symlink, hard-linked or owned by someone else).
 * 0 or negative errno with err. */
int ddp_rundir_write_owned(int dirfd, const char *name, const char *text, struct ddp_err *err);
/* Open name in dirfd for writing as ddp_rundir_write_owned does (the same checks, mode 0644), to rewrite it
 * many times (ddp_rundir_rewrite). Returns 0 with *fd_out (O_CLOEXEC; caller closes), or a negative errno. */
int ddp_rundir_open_owned(int dirfd, const char *name, int *fd_out, struct ddp_err *err);
/* Replace what fd holds with text: written over the old text from the start, then cut to its length. A reader
 * may catch the new text followed by the rest of the old one (never an empty file); nothing is truncated to
 * zero, which on ext4 makes the next close() write the file out to disk at once. 0 or a negative errno. */
int ddp_rundir_rewrite(int fd, const char *text);

/* Read a small regular file name in dirfd (no symlink following) into a new NUL-terminated string of at
 * most max bytes. Returns 0 with *text_out (caller frees), or a negative errno (no message). */
int ddp_rundir_read_small(int dirfd, const char *name, size_t max, char **text_out);

/* Remove what SIGKILLed jobs left in the shared lock directory dirfd (a killed launcher cannot remove its own
 * files): each file that map() names a lock for (map fills what, e.g. "job-123", and returns 1; 0: not such a
 * file) whose lock (ddp_klock_name(ns, what)) nobody holds now, read from /proc/net/unix (nothing is probed:
 * no live job sees its name taken even for a moment). Only this user's files (root: anyone's), regular or
 * not. Returns how many were removed, or a negative errno (/proc/net/unix unreadable: nothing removed). */
int ddp_rundir_sweep_stale(int dirfd, const char *ns, int (*map)(const char *file, char *what, size_t cap));

/* Whether the absolute directory path can be changed by nobody but root and this user: every component, from
 * "/", a directory (no symlink) owned by root or this user and not writable by group or others unless sticky.
 * False when any is missing or not so. */
bool ddp_rundir_path_trusted(const char *path);

/* Where this user's run directories go (see ddp_rundir_run_create): "$XDG_RUNTIME_DIR/ddplaunch" when
 * XDG_RUNTIME_DIR in envp is an absolute path that is missing or trusted (ddp_rundir_path_trusted; not another
 * user's, as a plain `su` keeps it), else "/tmp" (the run directory itself is then a fresh name).
 * Builds the path only (and looks at XDG_RUNTIME_DIR's owners). Caller owns; free(). */
char *ddp_rundir_private_path(char *const *envp, uid_t uid);

/* Create (mode 0700) or verify the private directory path: the last component must not be a symlink, must
 * be a directory owned by this user with no group/other permissions. Returns 0 with *dirfd_out when dirfd_out
 * is non-NULL (O_CLOEXEC; caller closes), or a negative errno with err saying what was wrong. */
int ddp_rundir_make_private(const char *path, int *dirfd_out, struct ddp_err *err);

/* A launch's fresh run directory, made so that no other user can squat or pre-plant it: without
 * XDG_RUNTIME_DIR, mkdtemp("/tmp/ddplaunch-UID-XXXXXX") itself (a fresh name each launch, never a fixed
 * shared path); with it, "$XDG_RUNTIME_DIR/ddplaunch/run-XXXXXX" (the parent verified as above). Mode 0700,
 * owner checked, and flock'ed by the returned fd for as long as it is open, so that ddp_rundir_sweep() knows
 * it is in use. Returns 0 with *path_out (caller frees) and *lock_fd_out (O_CLOEXEC; keep it open while the
 * directory is in use), or a negative errno with err. */
int ddp_rundir_run_create(char *const *envp, uid_t uid, char **path_out, int *lock_fd_out, struct ddp_err *err);
/* Remove a run directory made by ddp_rundir_run_create() and everything in it (no symlink following, same
 * file system only), then close lock_fd (-1: none). */
void ddp_rundir_run_remove(const char *path, int lock_fd);
/* Remove this user's stale run directories (those no live launch holds: left by a SIGKILLed launcher) that
 * were not modified for min_age_s seconds, where ddp_rundir_run_create() puts them. Only directories owned by uid
 * with mode 0700 are touched. Returns how many were removed, or -EALREADY when this launch does not sweep: the
 * last sweep, less than a few seconds ago, saw more than 64 live launches of this user (a thousand agents
 * starting on one host would otherwise each read every other's entry); the caller then skips its other sweeps
 * of leftovers too (ps files, attempt cgroups), which grow with the same launches. */
int ddp_rundir_sweep(char *const *envp, uid_t uid, long long min_age_s);

/* The command name (/proc/PID/comm) and user name of a process, for "held by pid N (comm, user)" messages.
 * Either out may be NULL. Returns 0, or -ESRCH when the process is gone. */
int ddp_rundir_proc_identity(pid_t pid, char *comm, size_t comm_len, char *user, size_t user_len);

#endif
