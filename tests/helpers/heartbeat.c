/* heartbeat ITERATIONS INTERVAL_MS [STALL_RANK [STALL_IF_WORLD_ABOVE]]: touches $DDPLAUNCH_HEARTBEAT_FILE every
 * INTERVAL_MS, ITERATIONS times, then prints "done r<RANK> world <WORLD_SIZE>" and exits 0. The worker whose
 * RANK is STALL_RANK stops touching after 2 iterations and sleeps forever, but only while WORLD_SIZE is above
 * STALL_IF_WORLD_ABOVE (default 0): a downsized job then completes. The others keep touching. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
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
    long iters = argc > 1 ? atol(argv[1]) : 10, interval = argc > 2 ? atol(argv[2]) : 100;
    int stall_rank = argc > 3 ? atoi(argv[3]) : -1, above = argc > 4 ? atoi(argv[4]) : 0;
    const char *hb = getenv("DDPLAUNCH_HEARTBEAT_FILE");
    int rank = getenv("RANK") ? atoi(getenv("RANK")) : 0;
    int world = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
    if (!hb) {
        fprintf(stderr, "heartbeat: DDPLAUNCH_HEARTBEAT_FILE is not set\n");
        return 2;
    }
    for (long i = 0; i < iters; i++) {
        if (stall_rank >= 0 && i == 2 && world > above) {
            if (rank == stall_rank)
                for (;;)
                    sleep(3600);
        }
        int fd = open(hb, O_WRONLY | O_CREAT, 0600);
        if (fd >= 0) {
            futimens(fd, NULL);
            close(fd);
        }
        sleep_ms(interval);
    }
    printf("done r%d world %d\n", rank, world);
    return 0;
}
