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
    /* issue 52: a --no-python program named python*, and the options that keep site or PYTHONPATH away */
    cr_assert_eq(split((const char *const[]){"./python_job.sh", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3-wrapper", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-E", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-I", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"python3", "-S", "t.py", NULL}, &m), -1);
    cr_assert_eq(split((const char *const[]){"/usr/bin/python3.11", "t.py", NULL}, &m), 1);
}

Test(standby, env_drops_the_rank_and_attempt)
{
    struct ddp_strv env = argv_of((const char *const[]){
        "PATH=/usr/bin", "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", "MASTER_PORT=29500", "MASTER_ADDR=h",
        "TORCHELASTIC_RESTART_COUNT=0", "CUDA_VISIBLE_DEVICES=0,1", "DDPLAUNCH_HEARTBEAT_FILE=/x",
        "DDPLAUNCH_PYTHONPATH=+/a", "PYTHONPATH=/run/python:/a", "OMP_NUM_THREADS=1", "NCCL_DEBUG=WARN",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/r/0/fr_", "RANKING=keep", NULL});
    struct ddp_strv out = {0};
    ddp_standby_env(&env, NULL, &out);
    const char *want[] = {"PATH=/usr/bin", "DDPLAUNCH_PYTHONPATH=+/a", "OMP_NUM_THREADS=1", "NCCL_DEBUG=WARN",
                          "RANKING=keep",  "PYTHONPATH=/run/python:/a"};
    cr_assert_eq(out.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < out.n; i++)
        cr_assert_str_eq(out.v[i], want[i]);
    cr_assert_null(out.v[out.n]);
    /* the launcher's directory: kept first where the workers sample, else put first; the hold asked for */
    ddp_standby_env(&env, "/run/python", &out);
    cr_assert_str_eq(out.v[out.n - 2], "PYTHONPATH=/run/python:/a");
    cr_assert_str_eq(out.v[out.n - 1], "DDPLAUNCH_STANDBY=1");
    ddp_standby_env(&env, "/run/py", &out);
    cr_assert_str_eq(out.v[out.n - 2], "PYTHONPATH=/run/py:/run/python:/a");
    struct ddp_strv none = argv_of((const char *const[]){"PATH=/usr/bin", "=odd", NULL});
    ddp_standby_env(&none, "/run/py", &out);
    cr_assert_eq(out.n, 4);
    cr_assert_str_eq(out.v[1], "=odd");
    cr_assert_str_eq(out.v[2], "PYTHONPATH=/run/py");
    ddp_strv_clear(&none);
    ddp_strv_clear(&env);
    ddp_strv_clear(&out);
}

/* issue 52: what python runs otherwise than source text is refused (the rank starts cold) */
Test(standby, refuse_what_python_runs_otherwise)
{
    char dir[] = "/tmp/ddp_test_standby_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    FILE *f;
    snprintf(path, sizeof path, "%s/t.py", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs("print(1)\n", f);
    fclose(f);
    cr_assert_null(ddp_standby_refuse(dir, "t.py"));
    cr_assert_null(ddp_standby_refuse(NULL, path));
    cr_assert_not_null(ddp_standby_refuse(dir, "."));
    cr_assert_not_null(ddp_standby_refuse(dir, "missing.py"));
    cr_assert_not_null(ddp_standby_refuse(dir, "t.pyc"));
    snprintf(path, sizeof path, "%s/app.pyz", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs("#!/usr/bin/env python3\nPK\003\004....", f);
    fwrite("PK\005\006\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 1, 22, f);
    fclose(f);
    cr_assert_str_eq(ddp_standby_refuse(dir, "app.pyz"), "a zip archive (zipapp)");
    snprintf(path, sizeof path, "%s/compiled", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fwrite("\x6f\x0d\r\n\0\0\0\0", 1, 8, f);
    fclose(f);
    cr_assert_str_eq(ddp_standby_refuse(dir, "compiled"), "a compiled file (.pyc)");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* issue 52: the memory rule counts the cgroup's limit (v2 and v1, every level up) and Slurm's allocation */
Test(standby, memory_room)
{
    char dir[] = "/tmp/ddp_test_sbmem_XXXXXX", p[512];
    cr_assert_not_null(mkdtemp(dir));
    struct {
        const char *file, *text;
    } files[] = {{"cg2", "0::/job/leaf\n"},
                 {"cg1", "5:cpu,cpuacct:/x\n4:memory:/job/leaf\n"},
                 {"root/job/memory.max", "1073741824\n"},
                 {"root/job/memory.current", "805306368\n"},
                 {"root/job/leaf/memory.max", "max\n"},
                 {"root/job/leaf/memory.current", "1\n"},
                 {"root/memory/job/memory.limit_in_bytes", "9223372036854771712\n"},
                 {"root/memory/job/memory.usage_in_bytes", "5\n"},
                 {"root/memory/job/leaf/memory.limit_in_bytes", "2097152\n"},
                 {"root/memory/job/leaf/memory.usage_in_bytes", "1048576\n"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char cmd[700];
        snprintf(p, sizeof p, "%s/%s", dir, files[i].file);
        snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", p);
        cr_assert_eq(system(cmd), 0);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f);
        fputs(files[i].text, f);
        fclose(f);
    }
    char cg[512], root[512];
    snprintf(cg, sizeof cg, "%s/cg2", dir);
    snprintf(root, sizeof root, "%s/root", dir);
    cr_assert_eq(ddp_standby_cgroup_room_kib(cg, root), 256 * 1024); /* 1 GiB - 768 MiB, a level up */
    snprintf(cg, sizeof cg, "%s/cg1", dir);
    cr_assert_eq(ddp_standby_cgroup_room_kib(cg, root), 1024);
    snprintf(cg, sizeof cg, "%s/none", dir);
    cr_assert_eq(ddp_standby_cgroup_room_kib(cg, root), -1);
    const char *which;
    struct ddp_standby_mem m = {.avail_kib = 8 << 20, .cgroup_room_kib = -1, .sched_kib = -1, .tree_kib = -1};
    cr_assert_eq(ddp_standby_mem_room(&m, &which), 8 << 20);
    cr_assert_str_eq(which, "MemAvailable");
    m.cgroup_room_kib = 1 << 20;
    cr_assert_eq(ddp_standby_mem_room(&m, &which), 1 << 20);
    cr_assert_str_eq(which, "the job's cgroup memory.max leaves");
    m.sched_kib = 2 << 20;
    m.tree_kib = (2 << 20) - 1000;
    cr_assert_eq(ddp_standby_mem_room(&m, &which), 1000);
    cr_assert_str_eq(which, "Slurm's allocation leaves");
    /* the scheduler's allocation (nodes/slurm.c reads Slurm's: test_slurm.c), and the launcher's own tree (this
     * test: its resident memory) */
    ddp_standby_mem_read(&m, 1000 * 1024);
    cr_assert_eq(m.sched_kib, 1000 * 1024);
    cr_assert_gt(m.tree_kib, 0);
    ddp_standby_mem_read(&m, 0);
    cr_assert_eq(m.sched_kib, -1);
    cr_assert_eq(m.tree_kib, -1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
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
    ddp_standby_message(&w, 2, true, "/work", false, &b);
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
