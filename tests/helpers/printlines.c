/* printlines N [out|err|both] [PAD]: prints N lines "r<RANK> <i> <padding>", each with a single write()
 * (so lines of different processes can never splice inside the pipe), on stdout, stderr or alternating.
 * PAD adds that many 'x' to every line (PAD of 1048576 = 1 MiB lines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10;
    const char *where = argc > 2 ? argv[2] : "out";
    size_t pad = argc > 3 ? (size_t)atol(argv[3]) : 0;
    const char *rank = getenv("RANK");
    char *buf = malloc(pad + 64);
    if (!buf)
        return 1;
    for (long i = 0; i < n; i++) {
        int len = snprintf(buf, 64, "r%s %ld ", rank ? rank : "-", i);
        memset(buf + len, 'x', pad);
        buf[(size_t)len + pad] = '\n';
        int fd = strcmp(where, "err") == 0 ? 2 : strcmp(where, "both") == 0 ? (i % 2 ? 2 : 1) : 1;
        if (write_all(fd, buf, (size_t)len + pad + 1) != 0)
            return 1;
    }
    free(buf);
    return 0;
}
