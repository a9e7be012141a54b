/* klock: kernel named locks: one holder at a time, freed when the holder dies (even SIGKILL), holder pid and
 * uid from the kernel, long namespaces hashed, /proc/net/unix parsing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/klock.h"

static void unique(char *out, const char *what)
{
    char ns[64];
    snprintf(ns, sizeof ns, "/test-klock-%d", (int)getpid());
    ddp_klock_name(ns, what, out);
}

Test(klock, names)
{
    char n[DDP_KLOCK_NAME_MAX + 1], m[DDP_KLOCK_NAME_MAX + 1];
    ddp_klock_name("/run/lock/ddplaunch", "gpu-0000:17:00.0", n);
    cr_expect_str_eq(n, "ddplaunch/run/lock/ddplaunch/gpu-0000:17:00.0");
    char longns[200];
    memset(longns, 'x', sizeof longns - 1);
    longns[sizeof longns - 1] = '\0';
    ddp_klock_name(longns, "port-29500", n);
    cr_expect(strncmp(n, "ddplaunch/h", 11) == 0 && strstr(n, "/port-29500"), "%s", n);
    cr_expect_leq(strlen(n), DDP_KLOCK_NAME_MAX);
    longns[0] = 'y';
    ddp_klock_name(longns, "port-29500", m);
    cr_expect_str_neq(n, m);
}

Test(klock, one_holder_pid_uid_from_kernel_and_freed_by_sigkill)
{
    char name[DDP_KLOCK_NAME_MAX + 1];
    int fd, fd2;
    struct ddp_klock_holder h;
    unique(name, "a");
    cr_expect_eq(ddp_klock_probe(name), 0);
    cr_expect_eq(ddp_klock_holder(name, &h), -ENOENT);
    cr_assert_eq(ddp_klock_take(name, &fd), 1);
    cr_expect_eq(ddp_klock_take(name, &fd2), 0);
    cr_expect_eq(ddp_klock_probe(name), 1);
    cr_assert_eq(ddp_klock_holder(name, &h), 0);
    cr_expect(h.known);
    cr_expect_eq(h.pid, getpid());
    cr_expect_eq(h.uid, geteuid());
    close(fd);
    cr_expect_eq(ddp_klock_probe(name), 0);

    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t c = fork();
    if (c == 0) {
        int cfd;
        char ok = ddp_klock_take(name, &cfd) == 1;
        (void)!write(p[1], &ok, 1);
        pause();
        _exit(0);
    }
    char ok = 0;
    cr_assert_eq(read(p[0], &ok, 1), 1);
    cr_assert(ok);
    cr_expect_eq(ddp_klock_take(name, &fd2), 0);
    cr_assert_eq(ddp_klock_holder(name, &h), 0);
    cr_expect_eq(h.pid, c);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    cr_expect_eq(ddp_klock_take(name, &fd2), 1, "the kernel did not free the lock of a SIGKILLed holder");
    close(fd2);
    close(p[0]);
    close(p[1]);
}

Test(klock, list)
{
    const char *text = "Num       RefCount Protocol Flags    Type St Inode Path\n"
                       "0000000000000000: 00000002 00000000 00010000 0001 01 101 @ddplaunch/x/gpu-0000:18:00.0\n"
                       "0000000000000000: 00000002 00000000 00010000 0001 01 102 @ddplaunch/x/gpu-0000:17:00.0\n"
                       "0000000000000000: 00000002 00000000 00010000 0001 01 103 @ddplaunch/y/gpu-0000:17:00.0\n"
                       "0000000000000000: 00000003 00000000 00000000 0001 03 104 /run/systemd/notify\n"
                       "0000000000000000: 00000002 00000000 00000000 0001 03 105 @ddplaunch/x/gpu-0000:18:00.0\n"
                       "0000000000000000: 00000002 00000000 00000000 0001 03 106\n";
    struct ddp_strv v = {0};
    ddp_klock_parse_list(text, "ddplaunch/x/gpu-", &v);
    cr_assert_eq(v.n, 2);
    cr_expect_str_eq(v.v[0], "ddplaunch/x/gpu-0000:17:00.0");
    cr_expect_str_eq(v.v[1], "ddplaunch/x/gpu-0000:18:00.0");
    cr_expect_null(v.v[2]);
    cr_expect(ddp_klock_listed(&v, "ddplaunch/x/gpu-0000:17:00.0"));
    cr_expect(ddp_klock_listed(&v, "ddplaunch/x/gpu-0000:18:00.0"));
    cr_expect(!ddp_klock_listed(&v, "ddplaunch/y/gpu-0000:17:00.0"));
    ddp_strv_clear(&v);
    cr_expect(!ddp_klock_listed(&v, "ddplaunch/x/gpu-0000:17:00.0"), "an empty list holds nothing");

    /* a thousand agents' locks, each listed up to three times, in reverse order: sorted, each once */
    struct ddp_buf many = {0};
    ddp_buf_printf(&many, "Num       RefCount Protocol Flags    Type St Inode Path\n");
    for (int i = 999; i >= 0; i--)
        for (int k = 0; k <= i % 3; k++)
            ddp_buf_printf(&many, "0000000000000000: 00000002 00000000 00010000 0001 01 %d @ddplaunch/x/job-%04d\n", i,
                           i);
    ddp_klock_parse_list(many.data, "ddplaunch/x/job-", &v);
    ddp_buf_free(&many);
    cr_assert_eq(v.n, 1000);
    for (size_t i = 0; i + 1 < v.n; i++)
        cr_assert(strcmp(v.v[i], v.v[i + 1]) < 0, "%s before %s", v.v[i], v.v[i + 1]);
    cr_expect(ddp_klock_listed(&v, "ddplaunch/x/job-0517"));
    cr_expect(!ddp_klock_listed(&v, "ddplaunch/x/job-1000"));
    ddp_strv_clear(&v);

    char name[DDP_KLOCK_NAME_MAX + 1], prefix[DDP_KLOCK_NAME_MAX + 1];
    int fd;
    unique(name, "gpu-0000:17:00.0");
    unique(prefix, "gpu-");
    cr_assert_eq(ddp_klock_take(name, &fd), 1);
    cr_assert_eq(ddp_klock_list(prefix, &v), 0);
    cr_assert_eq(v.n, 1);
    cr_expect_str_eq(v.v[0], name);
    ddp_strv_clear(&v);
    close(fd);
}
