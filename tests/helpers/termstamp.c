/* termstamp DIR [FAIL_AFTER_MS]: for failure-to-SIGTERM latency. RANK 0 waits FAIL_AFTER_MS (default 300),
 * writes CLOCK_REALTIME nanoseconds to DIR/fail and exits 1. Every other rank waits for SIGTERM, writes the
 * time it arrived to DIR/term.<RANK> and exits 143. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char path[4096];

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void stamp(const char *p, long long t)
{
    FILE *f = fopen(p, "w");
    if (f) {
        fprintf(f, "%lld\n", t);
        fclose(f);
    }
}

static void on_term(int sig)
{
    (void)sig;
    stamp(path, now_ns()); /* not async-signal-safe, but the main thread only sleeps */
    _exit(143);
}

int main(int argc, char **argv)
{
    const char *rank = getenv("RANK");
    long ms = argc > 2 ? atol(argv[2]) : 300;
    if (argc < 2 || !rank)
        return 2;
    if (strcmp(rank, "0") == 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        snprintf(path, sizeof(path), "%s/fail", argv[1]);
        stamp(path, now_ns());
        return 1;
    }
    snprintf(path, sizeof(path), "%s/term.%s", argv[1], rank);
    signal(SIGTERM, on_term);
    for (;;)
        pause();
}
