/* ft_server: torch's FileTimerServer on a libuv loop. Workers using torch.distributed.elastic.timer.FileTimerClient
 * (TORCHELASTIC_TIMER_FILE) write JSON lines {"version":1,"pid":P,"scope_id":"S","expiration_time":T,"signal":N}
 * to a FIFO; a deadline that passes is reported to the caller. It does not kill anything itself: the supervisor
 * decides (it treats an expiry as a hang). */
#ifndef DDP_FT_SERVER_H
#define DDP_FT_SERVER_H

#include <stddef.h>
#include <uv.h>

#include "base/util.h"

struct ddp_ft_server;

/* Called from the loop when (pid, scope_id) passed its expiration_time and its request carried signal signo > 0
 * (torch semantics: of a pid's expired timers, the earliest one with a signal counts; all timers of that pid are
 * then cleared). pid is the client's pid: a worker or one of its children (look it up by process group).
 * scope_id is valid only during the call. Timers with signal <= 0 expire silently (torch does not reap them). */
typedef void (*ddp_ft_server_expired_cb)(void *arg, int pid, int signo, const char *scope_id);

/* Create the FIFO fifo_path (mode 0600) and serve it on loop. The directory of fifo_path must be a private
 * directory of ours (owned by the effective uid, no group/other access, not a symlink); an old FIFO of ours at
 * fifo_path is replaced (as torch does), anything else there is an error. The FIFO never reaches EOF: the server
 * holds a write end itself, so clients may come and go. Both descriptors are close-on-exec.
 * Returns 0 with *out set (caller owns; ddp_ft_server_server_close()), or a negative errno with err
 * ("/run/x/timer: mkfifo: File exists"). */
int ddp_ft_server_server_start(uv_loop_t *loop, const char *fifo_path, ddp_ft_server_expired_cb on_expired, void *arg,
                               struct ddp_ft_server **out, struct ddp_err *err);

/* One request line, parsed (the pure part of the server, fuzzed: tests/fuzz/fuzz_ft_server.c). */
struct ddp_ft_request {
    long long version, pid, signo;
    char *scope;    /* caller owns on success */
    double expires; /* unix time, seconds; negative = release */
};

/* Parse one request line of len bytes (no NUL needed). Returns 0 (r->scope to free()), or -EINVAL with a short
 * reason in *why (static) and nothing to free. Required: pid > 0, scope_id (a string), expiration_time; version 1
 * when present; a signal outside 0-64 counts as 0 (no kill), as in torch. */
int ddp_ft_server_parse_request(const char *line, size_t len, struct ddp_ft_request *r, const char **why);

/* Forget every timer (a new attempt starts). */
void ddp_ft_server_server_clear_all(struct ddp_ft_server *s);
/* Number of timers set now; requests served since start (including releases and malformed lines). The server's
 * observable state, for its tests (nothing in the launcher decides by them). */
size_t ddp_ft_server_server_count(const struct ddp_ft_server *s);
size_t ddp_ft_server_server_requests(const struct ddp_ft_server *s);

/* Stop serving, remove the FIFO, and free s once libuv has closed its handles (the loop must run on for that).
 * No callback is made after this returns. NULL is a no-op. Safe to call from inside on_expired. */
void ddp_ft_server_server_close(struct ddp_ft_server *s);

#endif
