/* standby.c's pure parts: which Python argv a standby interpreter can run (where the program starts), the
 * environment it is started with (the worker's less the rank's and the attempt's variables), its memory estimate
 * and the "go" message standby.py reads. No loop, no processes. */
#include <criterion/criterion.h>
#include <string.h>

#include "run/standby.h"

static struct ddp_strv argv_of(const char *const *v)
{
    struct ddp_strv sv = {0};
    for (; *v; v++)
        ddp_strv_push(&sv, *v);
    return sv;
}

static int split(const char *const *v, bool *module)
{
    struct ddp_strv sv = argv_of(v);
    int at = ddp_standby_split(&sv, module);
    ddp_strv_clear(&sv);
    return at;
}

Test(standby, split_script_and_module)
{
    bool m;
    cr_assert_eq(split((const char *const[]){"python3", "-u", "train.py", "--lr", "1", NULL}, &m), 2);
    cr_assert_not(m);
    cr_assert_eq(split((const char *const[]){"/usr/bin/python3.11", "-u", "-m", "pkg.train", "-x", NULL}, &m), 2);
    cr_assert(m);
    cr_assert_eq(split((const char *const[]){"python", "-W", "ignore", "-X", "dev", "-OO", "t.py", NULL}, &m), 6);
    cr_assert_eq(split((const char *const[]){"python", "-Wignore", "t.py", NULL}, &m), 2);
}

Test(standby, split_refuses_what_it_cannot_run)
{
    bool m;
    cr_assert_eq(split((const char *const[]){"python3", "-c", "print(1)", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-P", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-i", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-m", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-u", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"./train.sh", "t.py", NULL}, &m), -1); /* --no-python */
    cr_assert_eq(split((const char *const[]){"/opt/bin/mypython", "t.py", NULL}, &m), -1);
}

Test(standby, env_drops_the_rank_and_attempt)
{
    struct ddp_strv env = argv_of((const char *const[]){
        "PATH=/usr/bin", "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", "MASTER_PORT=29500", "MASTER_ADDR=h",
        "TORCHELASTIC_RESTART_COUNT=0", "CUDA_VISIBLE_DEVICES=0,1", "DDPLAUNCH_HEARTBEAT_FILE=/x",
        "DDPLAUNCH_PYTHONPATH=+/a", "PYTHONPATH=/run/python:/a", "OMP_NUM_THREADS=1", "NCCL_DEBUG=WARN",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/r/0/fr_", "RANKING=keep", NULL});
    struct ddp_strv out = {0};
    ddp_standby_env(&env, &out);
    const char *want[] = {"PATH=/usr/bin",     "DDPLAUNCH_PYTHONPATH=+/a", "PYTHONPATH=/run/python:/a",
                          "OMP_NUM_THREADS=1", "NCCL_DEBUG=WARN",          "RANKING=keep"};
    cr_assert_eq(out.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < out.n; i++)
        cr_assert_str_eq(out.v[i], want[i]);
    cr_assert_null(out.v[out.n]);
    ddp_strv_clear(&env);
    ddp_strv_clear(&out);
}

Test(standby, estimate)
{
    struct ddp_strv a = argv_of((const char *const[]){"numpy", "torch.distributed", NULL});
    struct ddp_strv b = argv_of((const char *const[]){"numpy", "torchvision", NULL});
    cr_assert_eq(ddp_standby_estimate_mib(&a), 256);
    cr_assert_eq(ddp_standby_estimate_mib(&b), 32);
    ddp_strv_clear(&a);
    ddp_strv_clear(&b);
}

/* The message standby.py parses: 8 digits of length, then NUL-separated fields. */
Test(standby, message_fields)
{
    struct ddp_worker w = {0};
    w.argv = argv_of((const char *const[]){"python3", "-u", "-m", "pkg.main", "a b", "", NULL});
    w.envp = argv_of((const char *const[]){"RANK=1", "X=y=z", NULL});
    struct ddp_buf b = {0};
    ddp_standby_message(&w, 2, true, "/work", NULL, &b);
    cr_assert_geq(b.len, 8);
    char head[9];
    memcpy(head, b.data, 8);
    head[8] = '\0';
    cr_assert_eq((size_t)atoi(head), b.len - 8);
    static const char want[] = "/work\0m\0pkg.main\0\0"
                               "2\0a b\0\0"
                               "2\0RANK=1\0X=y=z\0"
                               "6\0python3\0-u\0-m\0pkg.main\0a b\0\0";
    cr_assert_eq(b.len - 8, sizeof want - 1);
    cr_assert(memcmp(b.data + 8, want, sizeof want - 1) == 0);
    ddp_buf_free(&b);
    ddp_strv_clear(&w.argv);
    ddp_strv_clear(&w.envp);
}
