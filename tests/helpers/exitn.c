/* exitn N [MESSAGE]: writes MESSAGE (if any) as one line on stderr, then exits with status N.
 * With EXITN_RANK=R set, only the worker whose RANK is R exits N; the others exit 0 after EXITN_DELAY_MS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int code = argc > 1 ? atoi(argv[1]) : 1;
    const char *only = getenv("EXITN_RANK"), *rank = getenv("RANK");
    if (only && rank && strcmp(only, rank) != 0) {
        const char *d = getenv("EXITN_DELAY_MS");
        long ms = d ? atol(d) : 0;
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
    }
    if (argc > 2) {
        char buf[4096];
        int n = snprintf(buf, sizeof(buf), "%s\n", argv[2]);
        if (write(2, buf, (size_t)n) < 0)
            return 99;
    }
    return code;
}
