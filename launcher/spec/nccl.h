/* nccl: checks NCCL_* and torch's TORCH_NCCL_* / TORCH_FR_* variables ([nccl] keys and the inherited environment)
 * before launch, and expands [nccl] presets. Pure: it reads no environment of its own, sets nothing, talks to no GPU.
 */
#ifndef DDP_NCCL_H
#define DDP_NCCL_H

#include "base/util.h"
#include "spec/spec.h"

/* Check every [nccl] key and every NCCL_* / TORCH_NCCL_* / TORCH_FR_* / TORCH_DISTRIBUTED_DEBUG /
 * TORCH_CPP_LOG_LEVEL variable of envp (the environment the workers inherit; entries shadowed by an [nccl] key
 * are skipped, the key wins). nccl and envp may be NULL.
 * Returns 0, or -EINVAL with err for the first impossible value, e.g.
 *   "job.ini:7: NCCL_IB_TIMEOUT=600: expected an exponent 0-31 (4.096 us * 2^v; 20 = 4.3 s, 22 = 17 s)"
 *   "environment: NCCL_DEBUG=FOO: expected VERSION, WARN, INFO, ABORT or TRACE".
 * Appends one line per warning to warnings (may be NULL; caller owns, ddp_strv_clear()): variables that do not
 * exist ("NCCL_SOCKET_TIMEOUT does not exist in NCCL: no effect ..."), deprecated names with their replacement,
 * unknown NCCL_* and TORCH_NCCL_* names with a did-you-mean, and doubtful values. Warning lines carry no
 * "ddplaunch: " prefix and no newline. Values containing ${...} (expanded per worker later) are checked only
 * where the syntax allows. */
int ddp_nccl_validate(const struct ddp_kvlist *nccl, char *const *envp, struct ddp_strv *warnings, struct ddp_err *err);

/* Preset names, NULL-terminated: "debug", "robust". */
const char *const *ddp_nccl_preset_names(void);

/* Add the keys of preset name to nccl that are not already set there (explicit keys beat the preset), with
 * origin DDP_ORIGIN_DEFAULT and file "preset NAME" (line 0). log_dir is the job's [job] log_dir or NULL: without
 * it the debug preset leaves NCCL_DEBUG_FILE and the flight-recorder dump path unset (NCCL then logs to the
 * worker's stdout, which ddplaunch prefixes by rank; torch dumps to /tmp/nccl_trace_rank_N).
 * name NULL or "" or "none" adds nothing. Returns 0, or -EINVAL with err for an unknown name
 * ("[nccl] preset = debgu: unknown preset (did you mean 'debug'? presets: debug, robust)"). */
int ddp_nccl_preset_apply(const char *name, const char *log_dir, struct ddp_kvlist *nccl, struct ddp_err *err);

/* The variables of a preset as "NAME=VALUE" lines for documentation (--help-keys, man page check),
 * NULL-terminated, static; NULL for an unknown name. with_log_dir selects the log-dir variant. */
const char *const *ddp_nccl_preset_vars(const char *name, bool with_log_dir);

#endif
