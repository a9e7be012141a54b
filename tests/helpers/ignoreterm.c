/* ignoreterm [SECONDS]: ignores SIGTERM (and SIGINT with IGNORE_INT=1), prints "ready" and sleeps SECONDS
 * (default 3600). Only SIGKILL ends it early. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 3600;
    signal(SIGTERM, SIG_IGN);
    if (getenv("IGNORE_INT"))
        signal(SIGINT, SIG_IGN);
    if (write(1, "ready\n", 6) < 0)
        return 1;
    while (secs > 0)
        secs = sleep(secs);
    return 0;
}
