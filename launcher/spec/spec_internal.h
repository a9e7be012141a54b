/* spec_internal: what spec.c (keys and layers), spec_value.c (one value's text <-> field) and spec_file.c (INI
 * files) share about the key table; nothing outside those three includes it. */
#ifndef DDP_SPEC_INTERNAL_H
#define DDP_SPEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/util.h"
#include "spec/spec.h"

/* Whether s names a section of the key table ("job", ..., "nccl", "env"). */
bool ddp_spec_is_section(const char *s);

/* spec_value.c works on one row k of the key table (an element of ddp_spec_keys) and never reads the table
 * itself: the table is spec.c's, which calls down into spec_value.c (tests/deps-check.py: no call cycle). */

/* Free key k's value in spec and leave the field empty (NULL string, empty list). */
void ddp_spec_free_value(struct ddp_spec *spec, const struct ddp_key *k);

/* Parse v into key k's field, replacing its value. 0, or a negative errno with err->msg saying only what was
 * expected ("expected a number, gpu, cpu or auto, got 'x'"): the caller adds where. */
int ddp_spec_parse_value(struct ddp_spec *spec, const struct ddp_key *k, const char *v, struct ddp_err *err);

/* Key k's value, formatted as it would be written in a file (ddp_spec_format's work). Caller owns; free(). */
char *ddp_spec_format_key(const struct ddp_spec *spec, const struct ddp_key *k);

/* Set section.key to value at origin (ddp_spec_set's work). file/line locate it for messages and duplicate
 * detection (file NULL: where names the source, as "--set" or a variable). 0 or a negative errno, err->msg
 * starting with where. */
int ddp_spec_set_key(struct ddp_spec *spec, const char *section, const char *key, const char *value,
                     enum ddp_origin origin, const char *file, int line, const char *where, struct ddp_err *err);

#endif
