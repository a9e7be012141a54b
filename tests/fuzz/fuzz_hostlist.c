/* libFuzzer harness for launcher/nodes/hostlist.c: any input must expand without a crash, leak or runaway
 * allocation, into as many names as it reports, or fail with a message.
 * Run: tests/fuzz/run.sh SECONDS hostlist (make fuzz). Built as
 *   clang -fsanitize=fuzzer,address,undefined -Ilauncher tests/fuzz/fuzz_hostlist.c \
 *     launcher/nodes/hostlist.c launcher/base/util.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nodes/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *expr = ddp_xstrndup((const char *)data, size);
    struct ddp_strv hosts = {0};
    struct ddp_err err = {0};
    int n = ddp_hostlist_expand(expr, &hosts, &err);
    if (n < 0) {
        if (hosts.n != 0 || err.msg[0] == '\0' || err.code != n)
            abort();
    } else {
        if ((size_t)n != hosts.n || n < 1 || n > DDP_HOSTLIST_MAX_HOSTS)
            abort();
    }
    ddp_strv_clear(&hosts);
    free(expr);
    return 0;
}
