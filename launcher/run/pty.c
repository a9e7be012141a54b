/* pty: see pty.h. */
#include "run/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

int ddp_pty_resize(int master, int size_fd)
{
    struct winsize ws;
    if (ioctl(size_fd, TIOCGWINSZ, &ws) != 0)
        return -errno;
    if (ioctl(master, TIOCSWINSZ, &ws) != 0)
        return -errno;
    return 0;
}

int ddp_pty_open(int size_fd, int *master, int *slave, struct ddp_err *err)
{
    char name[128];
    struct termios t;
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return ddp_errf(err, -errno, "posix_openpt: %s", strerror(errno));
    if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name, sizeof name) != 0) {
        int e = errno;
        close(m);
        return ddp_errf(err, -e, "pseudo-terminal: %s", strerror(e));
    }
    int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0) {
        int e = errno;
        close(m);
        return ddp_errf(err, -e, "%s: %s", name, strerror(e));
    }
    /* the worker's bytes unchanged: no '\n' -> "\r\n" (OPOST); nothing typed here echoes back */
    if (tcgetattr(s, &t) == 0) {
        t.c_oflag &= ~(tcflag_t)OPOST;
        t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
        (void)tcsetattr(s, TCSANOW, &t);
    }
    (void)ddp_pty_resize(m, size_fd);
    *master = m;
    *slave = s;
    return 0;
}
