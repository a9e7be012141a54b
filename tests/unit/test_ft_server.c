/* Unit tests for timer: a real libuv loop, a real FIFO, writers in this process and in a forked child. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "watch/ft_server.h"

#define LINE_BIG 10000

struct hit {
    int pid, signo;
    char scope[256];
    double at;
};

struct fx {
    uv_loop_t loop;
    char dir[128];
    char path[160];
    struct ddp_ft_server *srv;
    struct hit hits[16];
    int nhits;
    bool close_in_callback;
};

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_expired(void *arg, int pid, int signo, const char *scope)
{
    struct fx *f = arg;
    if (f->nhits < 16) {
        struct hit *h = &f->hits[f->nhits];
        h->pid = pid;
        h->signo = signo;
        snprintf(h->scope, sizeof(h->scope), "%s", scope);
        h->at = wall();
    }
    f->nhits++;
    if (f->close_in_callback) {
        ddp_ft_server_server_close(f->srv);
        f->srv = NULL;
    }
}

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    uv_loop_init(&f->loop);
    snprintf(f->dir, sizeof(f->dir), "/tmp/ddp-timer-test.XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/timer", f->dir);
}

static void fx_start(struct fx *f)
{
    struct ddp_err err = {0};
    int rc = ddp_ft_server_server_start(&f->loop, f->path, on_expired, f, &f->srv, &err);
    cr_assert_eq(rc, 0, "start: %s", err.msg);
}

static void on_deadline(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Run the loop for ms milliseconds. */
static void run_for(struct fx *f, unsigned ms)
{
    uv_timer_t t;
    uv_timer_init(&f->loop, &t);
    uv_timer_start(&t, on_deadline, ms, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void fx_done(struct fx *f)
{
    ddp_ft_server_server_close(f->srv);
    f->srv = NULL;
    uv_run(&f->loop, UV_RUN_DEFAULT); /* close callbacks free the server */
    cr_expect_eq(uv_loop_close(&f->loop), 0, "handles left open");
    struct stat st;
    cr_expect_neq(lstat(f->path, &st), 0, "FIFO not removed");
    rmdir(f->dir);
}

/* What FileTimerClient._send_request does: open O_WRONLY|O_NONBLOCK, write one line, close. */
static void send_line(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    size_t n = strlen(line);
    cr_assert_eq(write(fd, line, n), (ssize_t)n);
    close(fd);
}

static void send_req(const char *path, int pid, const char *scope, double exp, int sig)
{
    char line[512];
    snprintf(line, sizeof(line),
             "{\"version\": 1, \"pid\": %d, \"scope_id\": \"%s\", \"expiration_time\": %.6f, \"signal\": %d}\n", pid,
             scope, exp, sig);
    send_line(path, line);
}

Test(timer, acquire_expires_and_reports_once)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    double t0 = wall();
    send_req(f.path, 4242, "train_step", t0 + 0.3, 9);
    run_for(&f, 100);
    cr_expect_eq(f.nhits, 0, "fired early");
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 1);
    run_for(&f, 700);
    cr_assert_eq(f.nhits, 1);
    cr_expect_eq(f.hits[0].pid, 4242);
    cr_expect_eq(f.hits[0].signo, 9);
    cr_expect_str_eq(f.hits[0].scope, "train_step");
    double late = f.hits[0].at - (t0 + 0.3);
    cr_expect(late >= 0 && late < 0.2, "fired %.3f s after the deadline", late);
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 0);
    fx_done(&f);
}

Test(timer, release_cancels)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    send_req(f.path, 77, "s", wall() + 0.2, 9);
    run_for(&f, 50);
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 1);
    send_req(f.path, 77, "s", -1, 0); /* FileTimerClient.release() */
    run_for(&f, 400);
    cr_expect_eq(f.nhits, 0);
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 0);
    cr_expect_eq(ddp_ft_server_server_requests(f.srv), 2);
    fx_done(&f);
}

Test(timer, reacquire_moves_the_deadline)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    send_req(f.path, 5, "loop", wall() + 0.2, 9);
    run_for(&f, 100);
    send_req(f.path, 5, "loop", wall() + 0.5, 9); /* same (pid, scope): replaced */
    run_for(&f, 250);
    cr_expect_eq(f.nhits, 0, "old deadline still active");
    run_for(&f, 500);
    cr_expect_eq(f.nhits, 1);
    fx_done(&f);
}

Test(timer, torch_rules_for_several_timers_of_a_pid)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    double now = wall();
    /* pid 10: two expired scopes; the earliest with a signal counts, then all of pid 10 are cleared. */
    send_req(f.path, 10, "a", now + 0.10, 0);
    send_req(f.path, 10, "b", now + 0.15, 15);
    send_req(f.path, 10, "c", now + 0.20, 9);
    send_req(f.path, 10, "later", now + 30, 9);
    /* pid 11: no signal -> never reported. */
    send_req(f.path, 11, "quiet", now + 0.1, 0);
    run_for(&f, 600);
    cr_assert_eq(f.nhits, 1, "got %d callbacks", f.nhits);
    cr_expect_eq(f.hits[0].pid, 10);
    cr_expect_eq(f.hits[0].signo, 15);
    cr_expect_str_eq(f.hits[0].scope, "b");
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 0);
    fx_done(&f);
}

Test(timer, malformed_lines_are_skipped_and_escapes_decoded)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    send_line(f.path, "not json\n{\"pid\": 3}\n{\"version\": 2, \"pid\": 3, \"scope_id\": \"x\", "
                      "\"expiration_time\": 1, \"signal\": 9}\n[1,2]\n\n");
    char line[256];
    snprintf(line, sizeof(line),
             "{\"version\": 1, \"pid\": 99, \"scope_id\": \"a\\\"b\\u00e9\\n\", \"expiration_time\": %.3f, "
             "\"signal\": 9, \"extra\": null}\n",
             wall() + 0.1);
    send_line(f.path, line);
    run_for(&f, 500);
    cr_assert_eq(f.nhits, 1);
    cr_expect_eq(f.hits[0].pid, 99);
    cr_expect_str_eq(f.hits[0].scope, "a\"b\xc3\xa9\n");
    cr_expect_eq(ddp_ft_server_server_requests(f.srv), 5);
    fx_done(&f);
}

Test(timer, split_writes_and_writers_that_come_and_go)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    /* A line arriving in two writes, then many short-lived writers: the FIFO must not hit EOF. */
    int fd = open(f.path, O_WRONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "{\"version\": 1, \"pid\": 1", 23), 23);
    run_for(&f, 50);
    char rest[128];
    int n = snprintf(rest, sizeof(rest), "23, \"scope_id\": \"s\", \"expiration_time\": %.3f, \"signal\": 9}\n",
                     wall() + 60);
    cr_assert_eq(write(fd, rest, (size_t)n), n);
    close(fd);
    run_for(&f, 50);
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 1);
    for (int i = 0; i < 50; i++) {
        char scope[16];
        snprintf(scope, sizeof(scope), "s%d", i);
        send_req(f.path, 2000 + i, scope, wall() + 60, 9);
        if (i % 10 == 0)
            run_for(&f, 5);
    }
    run_for(&f, 100);
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 51);
    ddp_ft_server_server_clear_all(f.srv);
    cr_expect_eq(ddp_ft_server_server_count(f.srv), 0);
    fx_done(&f);
}

Test(timer, a_child_process_writer)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        char line[256];
        int n = snprintf(line, sizeof(line),
                         "{\"version\": 1, \"pid\": %d, \"scope_id\": \"child\", \"expiration_time\": %.3f, "
                         "\"signal\": 9}\n",
                         (int)getpid(), wall() + 0.2);
        int fd = open(f.path, O_WRONLY | O_NONBLOCK);
        if (fd < 0 || write(fd, line, (size_t)n) != n)
            _exit(1);
        close(fd);
        pause(); /* "hangs" until killed */
        _exit(0);
    }
    run_for(&f, 700);
    cr_assert_eq(f.nhits, 1);
    cr_expect_eq(f.hits[0].pid, child);
    /* The supervisor's part, done here: kill the reported pid with the requested signal. */
    cr_expect_eq(kill(f.hits[0].pid, f.hits[0].signo), 0);
    int st;
    cr_expect_eq(waitpid(child, &st, 0), child);
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    fx_done(&f);
}

Test(timer, close_from_inside_the_callback)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    f.close_in_callback = true;
    double now = wall();
    send_req(f.path, 1, "x", now + 0.05, 9);
    send_req(f.path, 2, "y", now + 0.05, 9);
    run_for(&f, 300);
    cr_expect_eq(f.nhits, 1, "a callback after close");
    cr_expect_null(f.srv);
    fx_done(&f);
}

Test(timer, refuses_unsafe_places)
{
    struct fx f;
    fx_init(&f);
    struct ddp_err err = {0};
    struct ddp_ft_server *s = NULL;
    /* Directory readable by others. */
    chmod(f.dir, 0755);
    cr_expect_eq(ddp_ft_server_server_start(&f.loop, f.path, on_expired, &f, &s, &err), -EPERM);
    cr_expect(strstr(err.msg, "private") != NULL, "%s", err.msg);
    chmod(f.dir, 0700);
    /* A regular file where the FIFO goes. */
    int fd = open(f.path, O_WRONLY | O_CREAT, 0600);
    close(fd);
    cr_expect_eq(ddp_ft_server_server_start(&f.loop, f.path, on_expired, &f, &s, &err), -EEXIST);
    unlink(f.path);
    /* A symlinked directory. */
    char link[200];
    snprintf(link, sizeof(link), "%s-link", f.dir);
    cr_assert_eq(symlink(f.dir, link), 0);
    char via[220];
    snprintf(via, sizeof(via), "%s/timer", link);
    cr_expect_eq(ddp_ft_server_server_start(&f.loop, via, on_expired, &f, &s, &err), -ENOTDIR);
    unlink(link);
    cr_expect_null(s);
    /* An old FIFO of ours is replaced, as torch does. */
    cr_assert_eq(mkfifo(f.path, 0600), 0);
    fx_start(&f);
    struct stat st;
    cr_expect_eq(stat(f.path, &st), 0);
    cr_expect(S_ISFIFO(st.st_mode) && (st.st_mode & 0777) == 0600);
    fx_done(&f);
}

/* The real client: torch.distributed.elastic.timer.FileTimerClient from Debian's python3-torch. */
static pid_t spawn_python(const char *fifo, const char *code)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TORCHELASTIC_TIMER_FILE", fifo, 1);
        execl("/usr/bin/python3", "python3", "-c", code, (char *)NULL);
        _exit(127);
    }
    return pid;
}

Test(timer, torch_file_timer_client)
{
    if (access("/usr/bin/python3", X_OK) != 0 ||
        system("/usr/bin/python3 -c 'import torch.distributed.elastic.timer' >/dev/null 2>&1") != 0) {
        cr_skip_test("no torch in /usr/bin/python3");
        return;
    }
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    /* acquire + release around a quick block, then a block that overruns its 0.5 s. */
    const char *code = "import os, time\n"
                       "import torch.distributed.elastic.timer as timer\n"
                       "timer.configure(timer.FileTimerClient(os.environ['TORCHELASTIC_TIMER_FILE']))\n"
                       "with timer.expires(after=5, scope='quick'):\n"
                       "    pass\n"
                       "print('quick done', flush=True)\n"
                       "with timer.expires(after=0.5, scope='slow_step'):\n"
                       "    time.sleep(60)\n";
    pid_t child = spawn_python(f.path, code);
    cr_assert_gt(child, 0);
    for (int i = 0; i < 900 && f.nhits == 0; i++)
        run_for(&f, 100); /* python + torch import: a few seconds, tens on a busy machine */
    cr_assert_eq(f.nhits, 1, "no expiry reported");
    cr_expect_eq(f.hits[0].pid, child);
    cr_expect_eq(f.hits[0].signo, SIGKILL);
    cr_expect_str_eq(f.hits[0].scope, "slow_step");
    cr_expect_eq(ddp_ft_server_server_requests(f.srv), 3, "acquire, release, acquire");
    kill(child, f.hits[0].signo);
    int st;
    waitpid(child, &st, 0);
    cr_expect(WIFSIGNALED(st));
    fx_done(&f);
}

Test(timer, survives_garbage_then_serves)
{
    struct fx f;
    fx_init(&f);
    fx_start(&f);
    static const char *const bits[] = {
        "{",     "}", "\"", "\\", "\\u",  "d800", ":",    ",",    "pid",   "scope_id",    "expiration_time", "signal",
        "1e308", "-", "9",  " ",  "null", "[",    "\x01", "\xff", "1e999", "\"\\u0000\"", "version"};
    unsigned seed = 12345;
    char line[600];
    int fd = open(f.path, O_WRONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0);
    for (int i = 0; i < 3000; i++) {
        size_t len = 0;
        int parts = (int)(rand_r(&seed) % 30);
        for (int k = 0; k < parts; k++) {
            const char *b = bits[rand_r(&seed) % (sizeof(bits) / sizeof(bits[0]))];
            size_t bl = strlen(b);
            if (len + bl + 2 >= sizeof(line))
                break;
            memcpy(line + len, b, bl);
            len += bl;
        }
        line[len++] = '\n';
        if (write(fd, line, len) < 0 && errno == EAGAIN)
            run_for(&f, 5); /* the pipe is full: let the server read */
        if (i % 200 == 0)
            run_for(&f, 1);
    }
    /* One overlong line too. */
    char big[LINE_BIG];
    memset(big, 'x', sizeof(big));
    big[sizeof(big) - 1] = '\n';
    run_for(&f, 20);
    cr_assert_eq(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
    close(fd);
    run_for(&f, 50);
    send_req(f.path, 31337, "after_garbage", wall() + 0.05, 9);
    run_for(&f, 400);
    cr_expect_eq(f.hits[f.nhits > 0 ? f.nhits - 1 : 0].pid, 31337);
    cr_expect_geq(f.nhits, 1);
    fx_done(&f);
}

Test(timer, request_parser_contract)
{
    struct ddp_ft_request r;
    const char *why;
    const char *ok = "{\"version\": 1, \"pid\": 42, \"scope_id\": \"s\\u00e9\", \"expiration_time\": 5.5, "
                     "\"signal\": 99, \"extra\": [1, {\"x\": null}]}";
    cr_assert_eq(ddp_ft_server_parse_request(ok, strlen(ok), &r, &why), 0);
    cr_expect_eq(r.pid, 42);
    cr_expect_str_eq(r.scope, "s\xc3\xa9");
    cr_expect_eq(r.signo, 0, "a signal outside 0-64 does not kill");
    cr_expect(r.expires > 5.4 && r.expires < 5.6);
    free(r.scope);
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"[1]", "not a JSON object"},
        {"{\"pid\": 1, \"scope_id\": \"s\"}", "pid, scope_id and expiration_time are required"},
        {"{\"pid\": 0, \"scope_id\": \"s\", \"expiration_time\": 1}", "pid must be positive"},
        {"{\"pid\": 1.5, \"scope_id\": \"s\", \"expiration_time\": 1}", "malformed JSON"},
        {"{\"pid\": 1, \"pid\": 2, \"scope_id\": \"s\", \"expiration_time\": 1}", "malformed JSON"},
        {"{\"pid\": 1, \"scope_id\": 3, \"expiration_time\": 1}", "malformed JSON"},
        {"{\"version\": 2, \"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1}",
         "unsupported version (expected 1)"},
        {"{\"pid\": 1, \"scope_id\": \"a\\u0000b\", \"expiration_time\": 1}", "malformed JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        cr_expect_eq(ddp_ft_server_parse_request(bad[i].line, strlen(bad[i].line), &r, &why), -EINVAL, "%s",
                     bad[i].line);
        cr_expect_str_eq(why ? why : "", bad[i].why, "%s", bad[i].line);
    }
}
