/* libFuzzer harness for torch's error file reader (launcher/records/report.c): whatever a worker left in
 * TORCHELASTIC_ERROR_FILE parses or is refused without a crash, a leak or a read past len. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "records/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *msg = NULL, *tb = NULL;
    long long ts = 0;
    char *copy = malloc(size ? size : 1);
    if (size)
        memcpy(copy, data, size);
    int rc = ddp_report_parse_error_json(copy, size, &msg, &tb, &ts);
    if (rc == 0 && !msg && !tb)
        abort();
    if (rc != 0 && (msg || tb))
        abort();
    free(msg);
    free(tb);
    free(copy);
    return 0;
}
