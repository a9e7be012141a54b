/* Unit tests for sample.c: the sitecustomize's header, its installation, and one poke/take round with a child
 * process that registers the way the sitecustomize does (it answers the sample signal by writing into the file). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
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
    pid_t pid = 0;
    int sig = 0;
    const char *ok = "ddplaunch-stacks pid=4242 signal=37\nThread 0x1 (most recent call first):\n";
    cr_expect(ddp_sample_parse_header(ok, strlen(ok), &pid, &sig));
    cr_expect_eq(pid, 4242);
    cr_expect_eq(sig, 37);
    static const char *const bad[] = {
        "ddplaunch-stacks pid=4242 signal=37",   /* no newline yet: being written */
        "ddplaunch-stacks pid= signal=37\n",     /* no pid */
        "ddplaunch-stacks pid=1 signal=37\n",    /* init: never */
        "ddplaunch-stacks pid=42 signal=37x\n",  /* trailing junk */
        "Thread 0x1 (most recent call first):\n" /* a dump without the header */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_not(ddp_sample_parse_header(bad[i], strlen(bad[i]), &pid, &sig), "%s", bad[i]);
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
    cr_expect(strstr(ddp_sample_sitecustomize(), "signal.sigwait({sig})"));
    cr_expect(strstr(ddp_sample_sitecustomize(), "pthread_sigmask(signal.SIG_BLOCK"), "never interrupts a syscall");
    cr_expect(strstr(ddp_sample_sitecustomize(), "find_spec('sitecustomize'"), "chains to the user's");
    cr_assert_eq(stat(pydir, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700);
    free(path);
    free(pydir);
}

static const char *child_path;
static const char dump[] = "Current thread 0x1 (most recent call first):\n  File \"t.py\", line 3 in f\n";

static void on_sample(int sig)
{
    (void)sig;
    int fd = open(child_path, O_WRONLY | O_APPEND);
    (void)!write(fd, dump, sizeof(dump) - 1);
    close(fd);
}

Test(sample, poke_and_take)
{
    char *path = ddp_xasprintf("%s/stacks.0", base);
    struct ddp_sample_file f;
    struct ddp_buf b = {0};
    int pipefd[2];
    ddp_sample_file_init(&f, path);
    pid_t none = 0;
    cr_expect_eq(ddp_sample_poke(&f, &none, 1, 0), -EAGAIN, "no file: not registered, never signalled");
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        child_path = path;
        setpgid(0, 0);
        signal(ddp_sample_signal(), on_sample);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dprintf(fd, "ddplaunch-stacks pid=%d signal=%d\n", getpid(), ddp_sample_signal());
        close(fd);
        (void)!write(pipefd[1], "x", 1);
        for (;;)
            pause();
    }
    char c;
    cr_assert_eq(read(pipefd[0], &c, 1), 1);
    pid_t groups[2] = {getpgid(0), 0};
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ESRCH, "not in the group it should be in");
    cr_expect_eq(ddp_sample_poke(&f, groups, 0, 0), -ESRCH, "no group given: never signalled");
    groups[1] = pid; /* the program's own group, as the shim makes it */
    cr_assert_eq(ddp_sample_poke(&f, groups, 2, 5), 0);
    cr_expect_eq(f.pid, pid);
    cr_expect(f.pending);
    long n = 0;
    for (int i = 0; i < 200 && n == 0; i++) {
        usleep(5000);
        n = ddp_sample_take(&f, &b);
    }
    cr_expect_eq(n, (long)sizeof(dump) - 1);
    cr_expect(b.len == sizeof(dump) - 1 && memcmp(b.data, dump, b.len) == 0, "the header was emptied before the poke");
    cr_expect_not(f.pending);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_expect_eq(ddp_sample_poke(&f, groups, 2, 0), -ESRCH, "gone");
    ddp_buf_free(&b);
    ddp_sample_file_free(&f);
    free(path);
}
