/* libFuzzer harness for launcher/classify: any bytes (NULs included) classify without a crash or a read past
 * len, and the answer does not depend on bytes after len. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "records/recognise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1); /* exact size: ASan catches reads past len */
    if (size)
        memcpy(copy, data, size);
    enum ddp_class c = ddp_recognise_line(copy, size);
    if ((unsigned)c >= DDP_CLASS__COUNT)
        abort();
    if (c != DDP_CLASS_NONE && (ddp_class_name(c)[0] == '\0' || ddp_class_hint(c)[0] == '\0'))
        abort();
    if (ddp_class_merge(c, DDP_CLASS_NONE) != c)
        abort();
    free(copy);
    return 0;
}
