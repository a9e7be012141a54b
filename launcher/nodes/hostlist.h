/* hostlist: Slurm hostlist expressions ("gpu[001-004,010],rack[1-2]n[01-02]") expanded to host names.
 * Pure string work, bounded in size; it resolves no names. */
#ifndef DDP_HOSTLIST_H
#define DDP_HOSTLIST_H

#include "base/util.h"

/* Expansion refuses to produce more hosts than this, or host names longer than DDP_HOSTLIST_NAME_MAX. */
#define DDP_HOSTLIST_MAX_HOSTS 65536
#define DDP_HOSTLIST_NAME_MAX 255

/* Expand a Slurm hostlist expression, appending the host names to out in order (duplicates kept).
 * Grammar (Slurm's): tokens separated by ',', ' ' or '\t' outside brackets; a token is text with any number
 * of bracket groups "[ITEM,ITEM...]", ITEM = N or LO-HI (decimal, LO <= HI, zero padding = width of LO);
 * several groups are a cartesian product, leftmost outermost: "rack[1-2]n[01-02]" -> rack1n01 rack1n02
 * rack2n01 rack2n02. Text after the last ']' is allowed (Slurm >= 23.02).
 * Returns the number of hosts appended (>= 1), or -EINVAL (malformed or empty expression; err names the
 * offending column) or -E2BIG (more than DDP_HOSTLIST_MAX_HOSTS hosts, or a name too long); on error out is
 * left as it was. Never loops or allocates in proportion to a range it refuses. */
int ddp_hostlist_expand(const char *expr, struct ddp_strv *out, struct ddp_err *err);

#endif
