/* Unit tests for sample.c: the sitecustomize's header, its installation, and one poke/take round with a child
 * process that registers the way the sitecustomize does (it answers the sample signal by writing into the file). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"
#include "watch/sample.h"

SCRATCH_SUITE(sample);

Test(sample, header)
{
    struct ddp_sample_head h = {0};
    char ok[160];
    snprintf(ok, sizeof(ok), "ddplaunch-stacks pid=%010d signal=%03d start=%020llu tid=%010d err=%03d\nThread 0x1\n",
             4242, 39, 123456789ull, 4243, 28);
    cr_expect_eq(strchr(ok, '\n') + 1 - ok, DDP_SAMPLE_HEAD_LEN, "the header has its fixed length");
    cr_expect(ddp_sample_parse_header(ok, strlen(ok), &h));
    cr_expect_eq(h.pid, 4242);
    cr_expect_eq(h.signo, 39);
    cr_expect_eq(h.start, 123456789ull);
    cr_expect_eq(h.tid, 4243);
    cr_expect_eq(h.err, 28);
    static const char *const bad[] = {
        "ddplaunch-stacks pid=4242 signal=39 start=1 tid=4242 err=000",    /* no newline yet: being written */
        "ddplaunch-stacks pid= signal=39 start=1 tid=4242 err=000\n",      /* no pid */
        "ddplaunch-stacks pid=1 signal=39 start=1 tid=4242 err=000\n",     /* init: never */
        "ddplaunch-stacks pid=4242 signal=39\n",                           /* the old header: no start, no tid */
        "ddplaunch-stacks pid=4242 signal=39 start=1 tid=4242 err=000x\n", /* trailing junk */
        "Thread 0x1 (most recent call first):\n"                           /* a dump without the header */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_not(ddp_sample_parse_header(bad[i], strlen(bad[i]), &h), "%s", bad[i]);
    cr_expect_neq(ddp_sample_signal(), SIGRTMIN + 3, "not the exec shim's launcher-died signal");
    cr_expect_neq(ddp_sample_signal(), SIGRTMIN + 4, "not the exec shim's kill signal");
}

Test(sample, install_writes_sitecustomize_privately)
{
    struct ddp_err e = {0};
    char *pydir = NULL, *path;
    struct stat st;
    cr_assert_eq(ddp_sample_install(base, &pydir, &e), 0, "%s", e.msg);
    path = ddp_xasprintf("%s/sitecustomize.py", pydir);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600);
    cr_expect_eq((size_t)st.st_size, strlen(ddp_sample_sitecustomize()));
    cr_expect(strstr(ddp_sample_sitecustomize(), "signal.sigwaitinfo({sig})"));
    cr_expect(strstr(ddp_sample_sitecustomize(), "pthread_sigmask(signal.SIG_BLOCK"), "never interrupts a syscall");
    cr_expect(strstr(ddp_sample_sitecustomize(), "find_spec('sitecustomize'"), "chains to the user's");
    cr_assert_eq(stat(pydir, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700);
    free(path);
    free(pydir);
}

static const char dump[] = "Current thread 0x1 (most recent call first):\n  File \"t.py\", line 3 in f\n";

static unsigned long long start_of(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long t = 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &t);
    return t;
}

static void write_head(const char *path, pid_t pid, unsigned long long start, pid_t tid, int sig)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dprintf(fd, "ddplaunch-stacks pid=%010d signal=%03d start=%020llu tid=%010d err=000\n", (int)pid, sig, start,
            (int)tid);
    close(fd);
}

static volatile pid_t idle_tid;

static void *idle_thread(void *arg)
{
    idle_tid = gettid();
    for (;;)
        pause();
    return arg;
}

enum child_kind { ANSWERS, UNBLOCKED, NEVER_TAKES };

/* A child in a process group of its own that registers the way the sitecustomize does; ANSWERS: it takes the
 * signal with sigwait and writes the dump after the header; UNBLOCKED: it does not block the signal (it would die
 * of it); NEVER_TAKES: it blocks it but never takes it (an exec'd rank). */
static pid_t child(const char *path, enum child_kind kind)
{
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t set;
        int sig = ddp_sample_signal();
        setpgid(0, 0);
        sigemptyset(&set);
        sigaddset(&set, sig);
        pid_t tid = getpid();
        sigprocmask(SIG_BLOCK, &set, NULL);
        if (kind == UNBLOCKED) { /* a sampler thread that blocks it, and a main thread that unblocked it since */
            pthread_t t;
            pthread_create(&t, NULL, idle_thread, NULL);
            while (!(tid = idle_tid))
                usleep(1000);
            sigprocmask(SIG_UNBLOCK, &set, NULL);
        }
        write_head(path, getpid(), start_of(getpid()), tid, sig);
        (void)!write(pipefd[1], "x", 1);
        for (;;) {
            if (kind != ANSWERS) {
                pause();
                continue;
            }
            sigwait(&set, &sig);
            int fd = open(path, O_WRONLY);
            (void)!pwrite(fd, dump, sizeof(dump) - 1, DDP_SAMPLE_HEAD_LEN);
            close(fd);
        }
    }
    char c;
    cr_assert_eq(read(pipefd[0], &c, 1), 1);
    close(pipefd[0]);
    close(pipefd[1]);
    return pid;
}

static long take_within(struct ddp_sample_file *f, struct ddp_buf *b)
{
    long n = 0;
    for (int i = 0; i < 200 && n == 0; i++) {
        usleep(5000);
        n = ddp_sample_take(f, b);
    }
    return n;
}

Test(sample, poke_and_take)
{
    char *path = ddp_xasprintf("%s/stacks.0", base);
    struct ddp_sample_file f;
    struct ddp_buf b = {0};
    ddp_sample_file_init(&f, path);
    pid_t none = 0;
    cr_expect_eq(ddp_sample_poke(&f, &none, 1, 0), -EAGAIN, "no file: not registered, never signalled");
    pid_t pid = child(path, ANSWERS);
    pid_t groups[2] = {getpgid(0), 0};
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ESRCH, "not in the group it should be in");
    cr_expect_eq(ddp_sample_poke(&f, groups, 0, 0), -ESRCH, "no group given: never signalled");
    groups[0] = 0;
    groups[1] = pid; /* the program's own group, as the shim makes it */
    cr_assert_eq(ddp_sample_poke(&f, groups, 2, 5), 0);
    cr_expect_eq(f.pid, pid);
    cr_expect(f.pending);
    cr_expect_eq(take_within(&f, &b), (long)sizeof(dump) - 1);
    cr_expect(b.len == sizeof(dump) - 1 && memcmp(b.data, dump, b.len) == 0, "the dump after the header");
    cr_expect_not(f.pending);
    /* a second round: the file is emptied down to the header first */
    b.len = 0;
    cr_assert_eq(ddp_sample_poke(&f, groups, 2, 6), 0);
    cr_expect_eq(take_within(&f, &b), (long)sizeof(dump) - 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ESRCH, "gone");
    ddp_buf_free(&b);
    ddp_sample_file_free(&f);
    free(path);
}

/* Issue 34 items 2 and 3: a process that does not block the signal is never sent it (it would die), and one that
 * does not take it is sent it once, never a second time while it is pending. */
Test(sample, never_signals_one_that_cannot_take_it)
{
    char *path = ddp_xasprintf("%s/stacks.0", base);
    struct ddp_sample_file f;
    int st;
    ddp_sample_file_init(&f, path);
    pid_t pid = child(path, UNBLOCKED), groups[2] = {0, pid};
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ECANCELED);
    cr_expect(strstr(f.why, "does not block signal"), "%s", f.why);
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ECANCELED, "stays stopped");
    usleep(20000);
    cr_expect_eq(waitpid(pid, &st, WNOHANG), 0, "still alive: never signalled");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ddp_sample_file_free(&f);

    ddp_sample_file_init(&f, path);
    pid = child(path, NEVER_TAKES);
    groups[1] = pid;
    cr_assert_eq(ddp_sample_poke(&f, groups, 2, 0), 0, "the first is sent");
    for (int i = 1; i < DDP_SAMPLE_BUSY_MAX; i++)
        cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -EBUSY, "never a second while the first is pending");
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ECANCELED);
    cr_expect(strstr(f.why, "stopped answering"), "%s", f.why);
    char p[64], buf[4096];
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    FILE *s = fopen(p, "r");
    size_t n = fread(buf, 1, sizeof(buf) - 1, s);
    fclose(s);
    buf[n] = 0;
    cr_expect(strstr(buf, "\nShdPnd:\t00000040"), "the one sent is still pending: %s", strstr(buf, "ShdPnd"));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ddp_sample_file_free(&f);
    free(path);
}

/* Items 4 and 5: a registration naming a reused pid (another start time) or the shim is never signalled; a new
 * registration (a later Python of the same rank) replaces the one in use. */
Test(sample, revalidates_every_registration)
{
    char *path = ddp_xasprintf("%s/stacks.0", base);
    struct ddp_sample_file f;
    struct ddp_buf b = {0};
    int st;
    ddp_sample_file_init(&f, path);
    pid_t pid = child(path, UNBLOCKED), groups[2] = {0, pid};
    /* the same pid, another start time: a process that never registered */
    write_head(path, pid, start_of(pid) + 1, pid, ddp_sample_signal());
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ESRCH);
    /* the shim, or its group: refused */
    groups[0] = pid;
    write_head(path, pid, start_of(pid), pid, ddp_sample_signal());
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ECANCELED);
    cr_expect(strstr(f.why, "exec shim"), "%s", f.why);
    usleep(20000);
    cr_expect_eq(waitpid(pid, &st, WNOHANG), 0, "still alive: never signalled");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* a later registration in the same file is taken */
    pid_t next = child(path, ANSWERS);
    groups[0] = 0;
    groups[1] = next;
    cr_assert_eq(ddp_sample_poke(&f, groups, 2, 0), 0, "%s", f.why);
    cr_expect_eq(f.pid, next);
    cr_expect_eq(take_within(&f, &b), (long)sizeof(dump) - 1);
    kill(next, SIGKILL);
    waitpid(next, NULL, 0);
    ddp_buf_free(&b);
    ddp_sample_file_free(&f);
    free(path);
}

/* A registration whose sampler thread is gone while the process is still there: Python's exit ends its threads a
 * moment before the process ends (the first poke that sees it is "gone", said by nobody: the launcher warned
 * "exec'd another program" for ranks that had merely exited), an exec leaves the process without it for good (the
 * next poke stops sampling and says so). */
Test(sample, a_sampler_thread_gone_once_is_an_exit_twice_an_exec)
{
    char *path = ddp_xasprintf("%s/stacks.0", base);
    struct ddp_sample_file f;
    ddp_sample_file_init(&f, path);
    pid_t pid = child(path, NEVER_TAKES), groups[2] = {0, pid};
    write_head(path, pid, start_of(pid), getpid(), ddp_sample_signal()); /* a tid that is not one of its threads */
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ESRCH, "the first time: gone, silently (%s)", f.why);
    cr_expect_eq(f.why[0], 0, "%s", f.why);
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ECANCELED, "still there at the next poke: an exec");
    cr_expect(strstr(f.why, "is gone (it exec'd another program)"), "%s", f.why);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ddp_sample_file_free(&f);
    free(path);
}
