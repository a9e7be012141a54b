/* dumpenv DIR: writes its environment to DIR/env.<RANK> (one VAR=value a line, sorted by the test) and the
 * Cpus_allowed_list / Mems_allowed_list / PPid / Pgid lines of /proc/self/status to DIR/status.<RANK>. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    char path[4096], line[4096];
    const char *rank = getenv("RANK");
    if (argc < 2)
        return 2;
    snprintf(path, sizeof(path), "%s/env.%s", argv[1], rank ? rank : "x");
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    for (char **e = environ; *e; e++)
        fprintf(f, "%s\n", *e);
    fclose(f);
    snprintf(path, sizeof(path), "%s/status.%s", argv[1], rank ? rank : "x");
    f = fopen(path, "w");
    FILE *st = fopen("/proc/self/status", "r");
    if (!f || !st)
        return 1;
    while (fgets(line, sizeof(line), st))
        if (!strncmp(line, "Cpus_allowed_list", 17) || !strncmp(line, "Mems_allowed_list", 17) ||
            !strncmp(line, "PPid", 4) || !strncmp(line, "Pid", 3))
            fputs(line, f);
    fprintf(f, "Pgid:\t%d\nSid:\t%d\n", (int)getpgrp(), (int)getsid(0));
    fclose(st);
    fclose(f);
    return 0;
}
