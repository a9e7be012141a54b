/* libFuzzer harness for the timer FIFO request parser (launcher/watch/ft_server.c): a line another process wrote parses
 * or is refused without a crash, a leak or a read past len; what it accepts satisfies the documented contract. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "watch/ft_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ddp_ft_request r;
    const char *why = NULL;
    char *copy = malloc(size ? size : 1); /* exact size: ASan catches reads past len */
    if (size)
        memcpy(copy, data, size);
    if (ddp_ft_server_parse_request(copy, size, &r, &why) == 0) {
        if (r.pid <= 0 || r.version != 1 || r.signo < 0 || r.signo > 64 || !r.scope)
            abort();
        free(r.scope);
    } else if (!why || !*why) {
        abort();
    }
    free(copy);
    return 0;
}
