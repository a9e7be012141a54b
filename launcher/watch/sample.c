/* sample: see sample.h. */
#include "watch/sample.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/rundir.h"
#include "watch/recorder.h"

int ddp_sample_signal(void)
{
    return SIGRTMIN + DDP_SAMPLE_SIGNAL_OFFSET;
}

/* The Python the workers run first (kept short: it runs at the start of every Python process of the job). The
 * registration is once per process that got DDPLAUNCH_STACKS_FILE (popped, so the program's own Python
 * subprocesses do not register); the chained import is what Python would have done without this directory. */
static const char sitecustomize[] =
    "# Written by ddplaunch (ddplaunch(1), LIVE HANG WATCH): lets ddplaunch sample this rank's Python stacks while it\n"
    "# runs, into a file of the attempt's private directory (never the console), then runs the sitecustomize this one\n"
    "# hides, if there is one further down sys.path. The signal is blocked in every thread; one idle thread of its own\n"
    "# takes it with sigwait and writes every other thread's stack (faulthandler's format) holding the GIL, so that\n"
    "# the signal never interrupts a system call of the program or of torch (a TCPStore connect fails on EINTR) and\n"
    "# no frame is read while its thread changes it (faulthandler's own handler does, and crashed a rank in import).\n" DDP_RECORDER_PY
    "def _ddplaunch_register():\n"
    "    import os\n"
    "    path = os.environ.pop('DDPLAUNCH_STACKS_FILE', None)\n"
    "    sig = os.environ.pop('DDPLAUNCH_STACKS_SIGNAL', None)\n"
    "    if not path or not sig:\n"
    "        return None\n"
    "    try:\n"
    "        import signal, sys, threading\n"
    "        sig = int(sig)\n"
    "        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)\n"
    "        signal.pthread_sigmask(signal.SIG_BLOCK, {sig})\n"
    "        main = threading.main_thread().ident\n"
    "\n"
    "        def _ddplaunch_wait():\n"
    "            me = threading.get_ident()\n"
    "            fr = _ddplaunch_fr_state()\n"
    "            while True:\n"
    "                signal.sigwait({sig})\n"
    "                out = []\n"
    "                for ident, frame in sys._current_frames().items():\n"
    "                    if ident == me:\n"
    "                        continue\n"
    "                    out.append('%s 0x%016x (most recent call first):\\n'\n"
    "                               % ('Current thread' if ident == main else 'Thread', ident))\n"
    "                    depth = 0\n"
    "                    while frame is not None and depth < 100:\n"
    "                        out.append('  File \"%s\", line %s in %s\\n'\n"
    "                                   % (frame.f_code.co_filename, frame.f_lineno or 0, frame.f_code.co_name))\n"
    "                        frame = frame.f_back\n"
    "                        depth += 1\n"
    "                    out.append('\\n')\n"
    "                out.append(_ddplaunch_fr_line(fr, False))\n"
    "                os.write(fd, ''.join(out).encode('utf-8', 'backslashreplace'))\n"
    "\n"
    "        threading.Thread(target=_ddplaunch_wait, name='ddplaunch-stacks', daemon=True).start()\n"
    "        os.write(fd, ('ddplaunch-stacks pid=%d signal=%d\\n' % (os.getpid(), sig)).encode())\n"
    "        return fd\n"
    "    except Exception:\n"
    "        return None\n"
    "\n"
    "\n"
    "def _ddplaunch_chain():\n"
    "    import os, sys, importlib.machinery, importlib.util\n"
    "    here = os.path.dirname(os.path.abspath(__file__))\n"
    "    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]\n"
    "    rest = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep)\n"
    "            if p and os.path.abspath(p) != here]\n"
    "    if rest:\n"
    "        os.environ['PYTHONPATH'] = os.pathsep.join(rest)\n"
    "    else:\n"
    "        os.environ.pop('PYTHONPATH', None)\n"
    "    spec = importlib.machinery.PathFinder.find_spec('sitecustomize', sys.path)\n"
    "    if spec is None or spec.loader is None:\n"
    "        return\n"
    "    mod = importlib.util.module_from_spec(spec)\n"
    "    sys.modules['sitecustomize'] = mod\n"
    "    spec.loader.exec_module(mod)\n"
    "\n"
    "\n"
    "_ddplaunch_stacks = _ddplaunch_register()\n"
    "_ddplaunch_chain()\n";

const char *ddp_sample_sitecustomize(void)
{
    return sitecustomize;
}

int ddp_sample_install(const char *dir, char **pydir_out, struct ddp_err *err)
{
    char *pydir = ddp_xasprintf("%s/" DDP_SAMPLE_PYDIR, dir);
    int dfd = -1, rc = ddp_rundir_make_private(pydir, &dfd, err);
    if (rc < 0) {
        free(pydir);
        return rc;
    }
    int fd = openat(dfd, "sitecustomize.py", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t len = strlen(sitecustomize);
    if (fd < 0 || write(fd, sitecustomize, len) != (ssize_t)len) {
        rc = ddp_errf(err, -errno, "%s/sitecustomize.py: %s", pydir, strerror(errno));
        free(pydir);
        pydir = NULL;
    }
    if (fd >= 0)
        close(fd);
    close(dfd);
    *pydir_out = pydir;
    return rc < 0 ? rc : 0;
}

bool ddp_sample_parse_header(const char *text, size_t len, pid_t *pid, int *signo)
{
    static const char tag[] = "ddplaunch-stacks pid=";
    const char *nl = memchr(text, '\n', len);
    long long p = 0, s = 0;
    size_t i = sizeof(tag) - 1;
    if (!nl || len < i || memcmp(text, tag, i) != 0)
        return false;
    size_t end = (size_t)(nl - text);
    size_t d0 = i;
    while (i < end && text[i] >= '0' && text[i] <= '9' && p < 1 << 30)
        p = p * 10 + (text[i++] - '0');
    if (i == d0 || end - i < 8 || memcmp(text + i, " signal=", 8) != 0)
        return false;
    i += 8;
    d0 = i;
    while (i < end && text[i] >= '0' && text[i] <= '9' && s < 1 << 16)
        s = s * 10 + (text[i++] - '0');
    if (i == d0 || i != end || p <= 1)
        return false;
    *pid = (pid_t)p;
    *signo = (int)s;
    return true;
}

void ddp_sample_file_init(struct ddp_sample_file *f, const char *path)
{
    memset(f, 0, sizeof(*f));
    f->path = ddp_xstrdup(path);
    f->fd = -1;
}

void ddp_sample_file_free(struct ddp_sample_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    memset(f, 0, sizeof(*f));
    f->fd = -1;
}

static int announce(struct ddp_sample_file *f)
{
    char head[128];
    int signo = 0;
    if (f->fd < 0) {
        f->fd = open(f->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (f->fd < 0)
            return errno == ENOENT ? -EAGAIN : -errno;
    }
    ssize_t n = pread(f->fd, head, sizeof(head), 0);
    if (n <= 0 || !ddp_sample_parse_header(head, (size_t)n, &f->pid, &signo))
        return -EAGAIN;
    if (signo != ddp_sample_signal()) {
        f->pid = 0;
        return -EINVAL;
    }
    return 0;
}

int ddp_sample_poke(struct ddp_sample_file *f, const pid_t *groups, size_t n, long long now_ms)
{
    bool ours = false;
    if (!f->pid) {
        int rc = announce(f);
        if (rc < 0)
            return rc;
    }
    pid_t g = getpgid(f->pid);
    for (size_t i = 0; i < n && g > 0; i++)
        ours |= groups[i] > 0 && groups[i] == g;
    if (!ours)
        return -ESRCH;
    if (ftruncate(f->fd, 0) != 0)
        return -errno;
    if (kill(f->pid, ddp_sample_signal()) != 0)
        return -errno;
    f->pending = true;
    f->poked_ms = now_ms;
    return 0;
}

long ddp_sample_take(struct ddp_sample_file *f, struct ddp_buf *out)
{
    char buf[16384];
    long total = 0;
    off_t off = 0;
    f->pending = false;
    if (f->fd < 0)
        return 0;
    for (;;) {
        ssize_t n = pread(f->fd, buf, sizeof(buf), off);
        if (n < 0)
            return -errno;
        if (n == 0 || total > (4L << 20))
            break;
        ddp_buf_add(out, buf, (size_t)n);
        off += n;
        total += n;
    }
    return total;
}
