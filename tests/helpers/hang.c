/* hang [SECONDS] [PIDDIR]: optionally writes its pid to PIDDIR/pid.<RANK>, prints "started" (with
 * HANG_QUIET=1: nothing), then sleeps SECONDS (default 3600). SIGTERM ends it normally (default action). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 3600;
    const char *rank = getenv("RANK");
    if (argc > 2) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/pid.%s", argv[2], rank ? rank : "x");
        FILE *f = fopen(path, "w");
        if (!f)
            return 1;
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    if (!getenv("HANG_QUIET") && write(1, "started\n", 8) < 0)
        return 1;
    while (secs > 0)
        secs = sleep(secs);
    return 0;
}
