/* nonewline TEXT [ERRTEXT]: writes TEXT to stdout and ERRTEXT to stderr, with no newline at the end, and
 * exits 0 at once. */
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1 && write(1, argv[1], strlen(argv[1])) < 0)
        return 1;
    if (argc > 2 && write(2, argv[2], strlen(argv[2])) < 0)
        return 1;
    return 0;
}
