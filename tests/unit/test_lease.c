/* Unit tests for lease: all-or-nothing takes, probes, who-holds-what messages and listings, the acquisition
 * loop (four 2-GPU jobs on 8 GPUs get disjoint pairs, a fifth fails or waits), and SIGKILL freeing a lease. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/lease.h"
#include "scratch.h"

SCRATCH_SUITE(lease);

/* the 8 GPUs of the AWS g4dn.metal fixture */
static const char *const gpus8[] = {"0000:18:00.0", "0000:19:00.0", "0000:35:00.0", "0000:36:00.0",
                                    "0000:e7:00.0", "0000:e8:00.0", "0000:f4:00.0", "0000:f5:00.0"};

static const char *me(void)
{
    struct passwd *pw = getpwuid(geteuid());
    return pw ? pw->pw_name : "?";
}

Test(lease, busid_forms)
{
    cr_expect(ddp_lease_busid_ok("0000:17:00.0"));
    cr_expect(ddp_lease_busid_ok("00000000:17:00.0")); /* NVML's form */
    cr_expect(ddp_lease_busid_ok("17:00.0"));
    cr_expect(ddp_lease_busid_ok("0000:AF:00.0"));
    cr_expect(!ddp_lease_busid_ok("../../etc/passwd"));
    cr_expect(!ddp_lease_busid_ok("0000:17:00"));
    cr_expect(!ddp_lease_busid_ok("GPU-1234"));
    cr_expect(!ddp_lease_busid_ok(""));
    cr_expect(!ddp_lease_busid_ok(NULL));
    struct ddp_lease *l;
    struct ddp_err err = {0};
    const char *bad[] = {"../x"};
    cr_expect_eq(ddp_lease_take(lockdir, bad, 1, "j", &l, &err), -EINVAL);
    cr_expect(strstr(err.msg, "'../x'"), "%s", err.msg);
}

Test(lease, parse_info)
{
    struct ddp_lease_info in;
    cr_assert_eq(ddp_lease_parse_info("pid=42\njob=train bert\nuser=alice\nuid=1000\nstart=1764460000\n", &in), 0);
    cr_expect_eq(in.pid, 42);
    cr_expect_str_eq(in.job, "train bert");
    cr_expect_str_eq(in.user, "alice");
    cr_expect_eq(in.start_unix, 1764460000);
    cr_expect_eq(ddp_lease_parse_info("job=x\n", &in), -EINVAL);
    cr_expect_eq(ddp_lease_parse_info("pid=abc\n", &in), -EINVAL);
    cr_expect_eq(ddp_lease_parse_info("", &in), -EINVAL);
}

Test(lease, take_is_all_or_nothing_and_names_holders)
{
    struct ddp_lease *a, *b;
    struct ddp_err err = {0};
    cr_assert_eq(ddp_lease_take(lockdir, gpus8, 2, "job-a", &a, &err), 0, "%s", err.msg);
    bool held[8];
    cr_assert_eq(ddp_lease_probe(lockdir, gpus8, 8, held, &err), 0, "%s", err.msg);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(held[i], i < 2, "gpu %d", i);
    /* overlapping set {1, 2}: refused, and 2 must not stay leased */
    cr_expect_eq(ddp_lease_take(lockdir, gpus8 + 1, 2, "job-b", &b, &err), -EBUSY);
    char want[160];
    snprintf(want, sizeof want, "gpu 0000:19:00.0: job 'job-a' (pid %d, user %s, command test_lease, since ",
             (int)getpid(), me());
    cr_expect(strstr(err.msg, want), "got: %s\nwant: %s", err.msg, want);
    cr_expect_null(strstr(err.msg, "0000:18:00.0"), "only the GPUs asked for are listed: %s", err.msg);
    cr_assert_eq(ddp_lease_probe(lockdir, gpus8, 8, held, &err), 0);
    cr_expect(!held[2], "a failed take left gpu 2 leased");
    /* a disjoint set works */
    cr_assert_eq(ddp_lease_take(lockdir, gpus8 + 2, 2, "job-b", &b, &err), 0, "%s", err.msg);
    ddp_lease_release(a);
    ddp_lease_release(b);
    cr_assert_eq(ddp_lease_probe(lockdir, gpus8, 8, held, &err), 0);
    for (int i = 0; i < 8; i++)
        cr_expect(!held[i]);
}

Test(lease, list_shows_job_pid_user_and_release_cleans_up)
{
    struct ddp_lease *a;
    struct ddp_err err = {0};
    const char *two[] = {"0000:E8:00.0", "e7:00.0"}; /* other spellings of gpus 4 and 5 */
    cr_assert_eq(ddp_lease_take(lockdir, two, 2, "bert\nuser=forged", &a, &err), 0, "%s", err.msg);
    struct ddp_lease_info *v;
    size_t n;
    cr_assert_eq(ddp_lease_list(lockdir, &v, &n), 0);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(v[0].busid, "0000:e7:00.0");
    cr_expect_str_eq(v[1].busid, "0000:e8:00.0");
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(v[i].pid, getpid());
        cr_expect_str_eq(v[i].job, "bert user=forged");
        cr_expect_str_eq(v[i].user, me());
        cr_expect_gt(v[i].start_unix, 1700000000);
    }
    free(v);
    char *d = ddp_lease_describe(lockdir, NULL, 0);
    cr_expect(strstr(d, "gpu 0000:e7:00.0, 0000:e8:00.0: job 'bert user=forged' (pid "), "%s", d);
    free(d);
    ddp_lease_release(a);
    cr_assert_eq(ddp_lease_list(lockdir, &v, &n), 0);
    cr_expect_eq(n, 0);
    free(v);
    /* no info file left behind */
    char *info = ddp_xasprintf("%s/gpu-0000:e7:00.0.%u.info", lockdir, (unsigned)geteuid());
    struct stat st;
    cr_expect_eq(stat(info, &st), -1);
    free(info);
}

Test(lease, list_of_missing_dir_is_empty)
{
    struct ddp_lease_info *v;
    size_t n = 99;
    cr_expect_eq(ddp_lease_list("/nonexistent/ddplaunch-locks", &v, &n), 0);
    cr_expect_eq(n, 0);
}

/* Fork a child that takes busids and waits; returns its pid once it holds them. */
static pid_t child_leasing(const char *const *busids, size_t n, const char *job, long long hold_ms)
{
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        struct ddp_lease *l;
        struct ddp_err err = {0};
        char ok = ddp_lease_take(lockdir, busids, n, job, &l, &err) == 0;
        if (write(pfd[1], &ok, 1) != 1)
            _exit(1);
        if (hold_ms > 0) {
            usleep((useconds_t)hold_ms * 1000);
            _exit(0); /* exit without releasing: the kernel ends the lease */
        }
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char ok = 0;
    cr_assert_eq(read(pfd[0], &ok, 1), 1);
    close(pfd[0]);
    cr_assert(ok, "child could not take its lease");
    return pid;
}

Test(lease, kill9_of_the_holder_frees_its_gpus)
{
    pid_t child = child_leasing(gpus8, 2, "victim", 0);
    struct ddp_lease *l;
    struct ddp_err err = {0};
    cr_expect_eq(ddp_lease_take(lockdir, gpus8, 2, "next", &l, &err), -EBUSY);
    char want[96];
    snprintf(want, sizeof want, "job 'victim' (pid %d", (int)child);
    cr_expect(strstr(err.msg, want), "%s", err.msg);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    cr_assert_eq(ddp_lease_take(lockdir, gpus8, 2, "next", &l, &err), 0, "%s", err.msg);
    /* the dead job's info file is not taken for the new holder's */
    struct ddp_lease_info *v;
    size_t n;
    cr_assert_eq(ddp_lease_list(lockdir, &v, &n), 0);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(v[0].job, "next");
    cr_expect_eq(v[0].pid, getpid());
    free(v);
    ddp_lease_release(l);
}

/* choose(): the first `want` GPUs that are not held, as placement would with the held ones excluded. */
struct pick {
    int want;
    int calls;
};
static int choose_first_free(void *ctx, const char *const *held, size_t nheld, struct ddp_strv *chosen,
                             struct ddp_err *err)
{
    struct pick *pk = ctx;
    pk->calls++;
    for (size_t i = 0; i < 8 && (int)chosen->n < pk->want; i++) {
        bool h = false;
        for (size_t j = 0; j < nheld; j++)
            h = h || strcmp(held[j], gpus8[i]) == 0;
        if (!h)
            ddp_strv_push(chosen, gpus8[i]);
    }
    if ((int)chosen->n < pk->want)
        return ddp_errf(err, -ENODEV, "%d GPUs asked for, %zu usable", pk->want, chosen->n);
    return 0;
}

Test(lease, four_jobs_get_disjoint_pairs_fifth_fails_or_waits)
{
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        kids[k] = fork();
        if (kids[k] == 0) {
            close(pfd[0]);
            struct pick pk = {2, 0};
            struct ddp_lease *l;
            struct ddp_strv chosen = {0};
            struct ddp_err err = {0};
            char *job = ddp_xasprintf("job%d", k);
            int rc = ddp_lease_acquire(lockdir, gpus8, 8, choose_first_free, &pk, job, 5000, &l, &chosen, &err);
            char msg[64] = "";
            if (rc == 0)
                snprintf(msg, sizeof msg, "%s %s", chosen.v[0], chosen.v[1]);
            if (write(pfd[1], msg, sizeof msg) != sizeof msg)
                _exit(1);
            pause();
            _exit(0);
        }
        close(pfd[1]);
        char msg[64];
        cr_assert_eq(read(pfd[0], msg, sizeof msg), (ssize_t)sizeof msg);
        close(pfd[0]);
        cr_assert(msg[0], "job %d got no GPUs", k);
    }
    bool held[8];
    struct ddp_err err = {0};
    cr_assert_eq(ddp_lease_probe(lockdir, gpus8, 8, held, &err), 0);
    for (int i = 0; i < 8; i++)
        cr_expect(held[i], "gpu %d not leased: the four pairs overlap", i);
    /* a fifth job without waiting: fails, naming who holds what */
    struct pick pk = {2, 0};
    struct ddp_lease *l;
    struct ddp_strv chosen = {0};
    long long t0 = ddp_now_ms();
    cr_expect_eq(ddp_lease_acquire(lockdir, gpus8, 8, choose_first_free, &pk, "fifth", 0, &l, &chosen, &err), -EBUSY);
    cr_expect_lt(ddp_now_ms() - t0, 500);
    cr_expect(strstr(err.msg, "2 GPUs asked for, 0 usable") && strstr(err.msg, "job 'job0'") &&
                  strstr(err.msg, "job 'job3'") && strstr(err.msg, "lease_wait"),
              "%s", err.msg);
    /* waiting: kill -9 job 2 after ~400 ms; the fifth gets exactly its pair */
    pid_t killer = fork();
    if (killer == 0) {
        usleep(400 * 1000);
        kill(kids[2], SIGKILL);
        _exit(0);
    }
    t0 = ddp_now_ms();
    int rc = ddp_lease_acquire(lockdir, gpus8, 8, choose_first_free, &pk, "fifth", 5000, &l, &chosen, &err);
    long long waited = ddp_now_ms() - t0;
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_expect(waited >= 350 && waited < 2000, "waited %lld ms", waited);
    cr_assert_eq(chosen.n, 2);
    cr_expect_str_eq(chosen.v[0], gpus8[4]);
    cr_expect_str_eq(chosen.v[1], gpus8[5]);
    ddp_strv_clear(&chosen);
    ddp_lease_release(l);
    waitpid(killer, NULL, 0);
    for (int k = 0; k < 4; k++) {
        kill(kids[k], SIGKILL);
        waitpid(kids[k], NULL, 0);
    }
}

Test(lease, too_many_gpus_fails_at_once_without_waiting)
{
    struct pick pk = {9, 0};
    struct ddp_lease *l;
    struct ddp_strv chosen = {0};
    struct ddp_err err = {0};
    long long t0 = ddp_now_ms();
    cr_expect_eq(ddp_lease_acquire(lockdir, gpus8, 8, choose_first_free, &pk, "big", 5000, &l, &chosen, &err), -ENODEV);
    cr_expect_lt(ddp_now_ms() - t0, 500);
    cr_expect_eq(pk.calls, 1);
}

Test(lease, planted_files_neither_block_nor_break_a_lease)
{
    struct ddp_lease *l, *l2;
    struct ddp_err err = {0};
    cr_assert_eq(mkdir(lockdir, 01777), 0);
    /* what used to block everyone: a symlinked and a mode-000 lock file, a job name with escapes */
    char *victim = ddp_xasprintf("%s/victim", base);
    char *link = ddp_xasprintf("%s/gpu-0000:18:00.0.lock", lockdir);
    char *plant = ddp_xasprintf("%s/gpu-0000:19:00.0.lock", lockdir);
    cr_assert_eq(symlink(victim, link), 0);
    int fd = open(plant, O_CREAT | O_WRONLY, 0);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(ddp_lease_take(lockdir, gpus8, 2, "j\033]0;owned\a\033[2J", &l, &err), 0, "%s", err.msg);
    struct stat st;
    cr_expect_eq(lstat(victim, &st), -1, "a symlinked lock file was followed");
    /* the lease holds although its files are gone */
    unlink(link);
    unlink(plant);
    cr_expect_eq(ddp_lease_take(lockdir, gpus8, 2, "k", &l2, &err), -EBUSY);
    cr_expect(strchr(err.msg, '\033') == NULL, "escape shown raw: %s", err.msg);
    cr_expect(strstr(err.msg, "job 'j?]0;owned??[2J'"), "%s", err.msg);
    ddp_lease_release(l);
    free(victim);
    free(link);
    free(plant);
}
