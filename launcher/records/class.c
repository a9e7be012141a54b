/* class: names, priorities and hints of the failure classes (class.h). */
#include "records/class.h"

#include <stdio.h>
#include <string.h>

bool ddp_class_is_timeout(enum ddp_class c)
{
    return c == DDP_CLASS_NCCL_TIMEOUT || c == DDP_CLASS_HANG || c == DDP_CLASS_INIT_TIMEOUT ||
           c == DDP_CLASS_WALL_TIMEOUT || c == DDP_CLASS_RENDEZVOUS_TIMEOUT;
}

struct class_info {
    const char *name;
    int priority; /* for ddp_class_merge: higher explains more */
    const char *hint;
};

static const struct class_info infos[DDP_CLASS__COUNT] = {
    [DDP_CLASS_NONE] = {"none", 0, ""},
    [DDP_CLASS_EXIT] = {"exit", 20, "the worker exited with an error: read its traceback above"},
    [DDP_CLASS_SEGFAULT] =
        {"segfault", 62,
         "the worker crashed in native code: an extension/ABI mismatch or a CUDA driver problem; rerun with "
         "PYTHONFAULTHANDLER=1 ([env]) to get the Python stack"},
    [DDP_CLASS_ABORT] =
        {"abort", 40,
         "the worker aborted (SIGABRT), often torch's NCCL watchdog taking the process down after a collective "
         "timeout or error: look for 'Watchdog' or 'NCCL error' lines above"},
    [DDP_CLASS_KILLED] =
        {"killed", 35,
         "the worker was killed (SIGKILL): the kernel OOM killer (check dmesg; host memory, DataLoader workers) or "
         "someone else"},
    [DDP_CLASS_SIGNAL] = {"signal", 30, "the worker died by a signal it does not handle"},
    [DDP_CLASS_NCCL_TIMEOUT] =
        {"collective-timeout", 80,
         "a collective timed out: one rank stopped (hang, crash, slow input) or GPUs talk badly; keep GPUs on one "
         "NUMA node ([gpus] policy = same-numa), get NCCL logs with [nccl] preset = debug, and let [restart] "
         "on_timeout = downsize retry on fewer GPUs"},
    [DDP_CLASS_NCCL_ERROR] =
        {"communication-error", 60,
         "communication between ranks (NCCL or gloo) failed, usually because a peer process died or was stopped "
         "first (see the root cause); else network or driver trouble: rerun with [nccl] preset = debug"},
    [DDP_CLASS_HANG] =
        {"hang", 65,
         "a rank made no progress (no heartbeat/output for [timeout] stall, or a torch timer.expires() block ran "
         "out): the Hang verdict says where each rank stood when it was stopped; raise the limit if a step is just "
         "slow"},
    [DDP_CLASS_INIT_TIMEOUT] =
        {"init-timeout", 64,
         "a rank showed no sign of life within [timeout] init: slow imports or data loading before the first "
         "heartbeat, or stuck in init_process_group; raise init or check master_addr/master_port"},
    [DDP_CLASS_WALL_TIMEOUT] = {"wall-timeout", 63,
                                "the attempt ran longer than [timeout] wall: raise wall if the job is simply long"},
    [DDP_CLASS_CUDA_OOM] =
        {"cuda-oom", 100,
         "CUDA out of memory: lower the per-GPU batch size or use activation checkpointing; skip GPUs others are "
         "using with [gpus] max_memory_used"},
    [DDP_CLASS_PORT_IN_USE] =
        {"port-in-use", 95,
         "the master port is already in use (another job or a leftover process): use master_port = auto"},
    [DDP_CLASS_EXEC_FAILED] =
        {"exec-failed", 90,
         "the worker program could not be started: check the path, its permissions and the interpreter"},
    [DDP_CLASS_MISSING_MODULE] =
        {"missing-module", 85,
         "the workers' Python could not import a module: install it for that python, or run with "
         "PYTHON_EXEC=<a python that has it> (`ddplaunch doctor` names one for torch)"},
    [DDP_CLASS_COLL_MISMATCH] =
        {"collective-mismatch", 83,
         "ranks of one process group called the same collective with different ops, shapes or dtypes (the flight "
         "recorders, read when it failed, show both sides): make every member pass the same tensors in the same "
         "order"},
    [DDP_CLASS_CPU_OOM] =
        {"cpu-oom", 99,
         "host memory ran out (torch's CPU allocator): fewer DataLoader workers or ranks per node, a smaller batch "
         "or dataset cache, or more memory for the job (Slurm --mem); dmesg shows the cgroup's limit if one was "
         "hit"},
    [DDP_CLASS_LOCAL_RANK_ARG] =
        {"local-rank-arg", 92,
         "the script's argparse expects --local_rank, which torch.distributed.launch passed and torchrun and "
         "ddplaunch do not: read LOCAL_RANK from the environment (torchrun's migration note: "
         "parser.add_argument('--local_rank', '--local-rank', type=int, default=int(os.environ['LOCAL_RANK']))), "
         "or pass it unchanged: ddplaunch --no-python sh -c 'exec python3 SCRIPT --local_rank=$LOCAL_RANK \"$@\"' "
         "sh ARGS"},
    [DDP_CLASS_RENDEZVOUS_TIMEOUT] =
        {"rendezvous-timeout", 70,
         "a rank never reached the rendezvous (TCP store at master_addr:master_port): another rank died or hung "
         "during start-up, or the address is unreachable; see the root cause"},
};

enum ddp_class ddp_class_merge(enum ddp_class a, enum ddp_class b)
{
    if ((unsigned)a >= DDP_CLASS__COUNT)
        return b;
    if ((unsigned)b >= DDP_CLASS__COUNT)
        return a;
    return infos[b].priority > infos[a].priority ? b : a;
}

const char *ddp_class_name(enum ddp_class c)
{
    if ((unsigned)c >= DDP_CLASS__COUNT)
        return "unknown";
    return infos[c].name;
}

const char *ddp_class_hint(enum ddp_class c)
{
    if ((unsigned)c >= DDP_CLASS__COUNT)
        return "";
    return infos[c].hint;
}

/* Two GPUs of the attempt on different known NUMA nodes, or false. */
static bool numa_split(const struct ddp_class_facts *f, int *a, int *b)
{
    if (f->gpu_numa == NULL)
        return false;
    for (int i = 0; i < f->ngpus; i++) {
        if (f->gpu_numa[i] < 0)
            continue;
        for (int j = i + 1; j < f->ngpus; j++) {
            if (f->gpu_numa[j] >= 0 && f->gpu_numa[j] != f->gpu_numa[i]) {
                *a = i;
                *b = j;
                return true;
            }
        }
    }
    return false;
}

static bool nccl_debug_on(const char *v)
{
    return v != NULL && (strcmp(v, "INFO") == 0 || strcmp(v, "TRACE") == 0);
}

const char *ddp_class_hint_facts(enum ddp_class c, const struct ddp_class_facts *facts, char *buf, size_t size)
{
    if (buf == NULL || size == 0)
        return ddp_class_hint(c);
    snprintf(buf, size, "%s", ddp_class_hint(c));
    if (facts == NULL)
        return buf;
    char stalled[64] = "";
    if (facts->stalled_rank >= 0)
        snprintf(stalled, sizeof(stalled), "rank %d stopped first; ", facts->stalled_rank);
    int a, b;
    switch (c) {
    case DDP_CLASS_NCCL_TIMEOUT:
    case DDP_CLASS_NCCL_ERROR:
    case DDP_CLASS_HANG:
        if (numa_split(facts, &a, &b)) {
            int ga = facts->gpu_index ? facts->gpu_index[a] : a;
            int gb = facts->gpu_index ? facts->gpu_index[b] : b;
            snprintf(buf, size, "%sGPUs %d and %d are on different NUMA nodes (%d and %d)%s%s", stalled, ga, gb,
                     facts->gpu_numa[a], facts->gpu_numa[b],
                     facts->numa_policy_same ? ": too few GPUs on one node; use fewer GPUs ([job] nproc_per_node)"
                                             : "; set [gpus] policy = same-numa",
                     nccl_debug_on(facts->nccl_debug) ? "" : "; [nccl] preset = debug keeps NCCL logs");
        } else if (c != DDP_CLASS_HANG && !nccl_debug_on(facts->nccl_debug)) {
            snprintf(buf, size, "%s%s; NCCL_DEBUG is %s: set [nccl] preset = debug to keep per-rank NCCL logs", stalled,
                     ddp_class_hint(c), facts->nccl_debug ? facts->nccl_debug : "unset");
        } else if (stalled[0] != '\0') {
            snprintf(buf, size, "%s%s", stalled, ddp_class_hint(c));
        }
        break;
    case DDP_CLASS_PORT_IN_USE:
        if (facts->port > 0)
            snprintf(buf, size,
                     "port %d is already in use (another job or a leftover process; ss -ltnp 'sport = :%d' names "
                     "it): use master_port = auto",
                     facts->port, facts->port);
        break;
    default:
        break;
    }
    return buf;
}
