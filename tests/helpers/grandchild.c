/* grandchild DIR [PARENT_SECONDS]: forks a child that stays in the same process group and sleeps an hour;
 * writes "<parent pid> <child pid>" to DIR/pids.<RANK>, then the parent sleeps PARENT_SECONDS (default 3600)
 * and exits 0, leaving the child behind. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char path[4096];
    const char *rank = getenv("RANK");
    unsigned psecs = argc > 2 ? (unsigned)atoi(argv[2]) : 3600;
    if (argc < 2)
        return 2;
    pid_t c = fork();
    if (c < 0)
        return 1;
    if (c == 0) {
        unsigned s = 3600;
        while (s > 0)
            s = sleep(s);
        _exit(0);
    }
    snprintf(path, sizeof(path), "%s/pids.%s", argv[1], rank ? rank : "x");
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "%d %d\n", (int)getpid(), (int)c);
    fclose(f);
    while (psecs > 0)
        psecs = sleep(psecs);
    return 0;
}
