/* diesig N [DELAY_MS]: after DELAY_MS (default 0) kills itself with signal N (core dumps disabled).
 * With DIESIG_RANK=R set, only the worker whose RANK is R dies; the others sleep DIESIG_OTHERS_MS then exit 0. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    int sig = argc > 1 ? atoi(argv[1]) : SIGSEGV;
    const char *only = getenv("DIESIG_RANK"), *rank = getenv("RANK");
    struct rlimit nocore = {0, 0};
    if (only && rank && strcmp(only, rank) != 0) {
        const char *d = getenv("DIESIG_OTHERS_MS");
        sleep_ms(d ? atol(d) : 0);
        return 0;
    }
    setrlimit(RLIMIT_CORE, &nocore);
    if (argc > 2)
        sleep_ms(atol(argv[2]));
    signal(sig, SIG_DFL);
    kill(getpid(), sig);
    return 100;
}
