/* libFuzzer harness for the stack parser (launcher/watch/hang.c): whatever a worker wrote to its stderr (a faulthandler
 * dump, a traceback, anything) parses without a crash or a read past len, into NUL-terminated fields. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "watch/hang.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ddp_hang_view v;
    char *copy = malloc(size ? size : 1);
    if (size)
        memcpy(copy, data, size);
    ddp_hang_parse_stack(copy, size, &v);
    if (v.nframes < 0 || memchr(v.op, '\0', sizeof(v.op)) == NULL || memchr(v.frame, '\0', sizeof(v.frame)) == NULL)
        abort();
    if (v.nframes == 0 && (v.op[0] || v.frame[0]))
        abort();
    struct ddp_hang_input in[2] = {{0, &v, false, true, 0}, {1, NULL, true, true, 5000}};
    bool c[2];
    struct ddp_hang_verdict vd;
    ddp_hang_decide(in, 2, c, &vd);
    if (vd.nculprits == 2)
        abort();
    free(copy);
    return 0;
}
