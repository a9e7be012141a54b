/* recognise: failure classes (class.h) recognised from exit statuses and output lines.
 * The literals below were collected from torch 1.13.1 (Debian python3-torch, libtorch_cpu, libgloo), from real
 * gloo runs on this machine (tests/fixtures/logs/torch113-*), and from torch 2.x logs quoted in public issues
 * (tests/fixtures/logs/torch2x-*, sources in tests/fixtures/logs/SOURCES). */
#include "records/recognise.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

struct pattern {
    const char *lit;  /* must occur in the line */
    const char *also; /* and this too, or NULL */
    enum ddp_class cls;
    bool fatal_only; /* ignored in torch/glog warning and info lines ("[W socket.cpp:426] ...") */
};

/* First match wins, so more specific patterns come first. */
static const struct pattern patterns[] = {
    /* Collective timeouts. torch 1.13 and 2.x NCCL watchdog:
     * "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, ...)" */
    {"Watchdog caught collective operation timeout", NULL, DDP_CLASS_NCCL_TIMEOUT, false},
    /* torch 2.x: "[PG 1 Rank 4] Timeout at NCCL work: 9141, last enqueued NCCL work: ..." */
    {"Timeout at NCCL work", NULL, DDP_CLASS_NCCL_TIMEOUT, false},
    /* torch 2.x heartbeat monitor: "Heartbeat monitor timed out! Process will be terminated after dumping ..." and
     * "ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress ..." */
    {"Heartbeat monitor timed out", NULL, DDP_CLASS_NCCL_TIMEOUT, false},
    {"watchdog got stuck for", NULL, DDP_CLASS_NCCL_TIMEOUT, false},
    /* torch 2.x, on the ranks that did not time out themselves (seen on H200s, torch 2.11): "[PG ID 0 PG GUID
     * 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from  rank 0 and we will ..." */
    {"dump signal due to a collective timeout", NULL, DDP_CLASS_NCCL_TIMEOUT, false},
    /* gloo (libgloo unbound_buffer.cc): "Timed out waiting 3000ms for recv operation to complete" */
    {"Timed out waiting ", " operation to complete", DDP_CLASS_NCCL_TIMEOUT, false},
    /* torch 1.13 monitored_barrier: "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms" */
    {"failed to pass monitoredBarrier", NULL, DDP_CLASS_NCCL_TIMEOUT, false},
    {"timed out in monitoredBarrier", NULL, DDP_CLASS_NCCL_TIMEOUT, false},

    /* Out of memory. torch: "CUDA out of memory. Tried to allocate ..."; CUDA runtime: "CUDA error: out of
     * memory"; torch 2.x type names "torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError"; NCCL:
     * "NCCL WARN Cuda failure 'out of memory'". */
    /* "ModuleNotFoundError: No module named 'torch'": the interpreter lacks what the script imports */
    {"ModuleNotFoundError: No module named ", NULL, DDP_CLASS_MISSING_MODULE, false},
    /* Host memory, torch's CPU allocator (c10/core/impl/alloc_cpu.cpp): "RuntimeError: [enforce fail at
     * alloc_cpu.cpp:75] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate 8000000000
     * bytes. Error code 12 (Cannot allocate memory)"; older builds: "DefaultCPUAllocator: not enough memory". */
    {"DefaultCPUAllocator: can't allocate memory", NULL, DDP_CLASS_CPU_OOM, false},
    {"DefaultCPUAllocator: not enough memory", NULL, DDP_CLASS_CPU_OOM, false},
    /* An old launch-style script under torchrun (argparse): "train.py: error: the following arguments are
     * required: --local_rank", or torch 2.x's launch passing "--local-rank=0" to a script that defines only
     * --local_rank: "train.py: error: unrecognized arguments: --local-rank=0". */
    {"the following arguments are required: ", "--local_rank", DDP_CLASS_LOCAL_RANK_ARG, false},
    {"the following arguments are required: ", "--local-rank", DDP_CLASS_LOCAL_RANK_ARG, false},
    {"unrecognized arguments: ", "--local-rank", DDP_CLASS_LOCAL_RANK_ARG, false},
    {"unrecognized arguments: ", "--local_rank", DDP_CLASS_LOCAL_RANK_ARG, false},
    {"CUDA out of memory", NULL, DDP_CLASS_CUDA_OOM, false},
    {"CUDA error: out of memory", NULL, DDP_CLASS_CUDA_OOM, false},
    {"OutOfMemoryError", NULL, DDP_CLASS_CUDA_OOM, false},
    {"Cuda failure 'out of memory'", NULL, DDP_CLASS_CUDA_OOM, false},
    {"CUBLAS_STATUS_ALLOC_FAILED", NULL, DDP_CLASS_CUDA_OOM, false},

    /* Port in use. torch 1.13 TCPStore: "... failed to bind to 0.0.0.0:29732 (errno: 98 - Address already in
     * use)"; torch 2.x: "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use".
     * The per-address warnings before it ("[W socket.cpp:426] [c10d] The server socket has failed to bind to
     * [::]:29500 (errno: 98 - Address already in use).") are not failures: another address may still work. */
    {"EADDRINUSE", NULL, DDP_CLASS_PORT_IN_USE, true},
    {"Address already in use", NULL, DDP_CLASS_PORT_IN_USE, true},
    {"address already in use", NULL, DDP_CLASS_PORT_IN_USE, true},

    /* Store / rendezvous timeouts. torch 1.13: "RuntimeError: Socket Timeout" (store get during PG init),
     * "The client socket has timed out after 3s while trying to connect to (127.0.0.1, 29734)."; torch 2.x:
     * "DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     * "DistStoreError: wait timeout after 30000ms, keys: ...". Not torch 2.x's retry warning "[W socket.cpp:663]
     * [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - ...)": it is benign. */
    {"Socket Timeout", NULL, DDP_CLASS_RENDEZVOUS_TIMEOUT, true},
    {"The client socket has timed out", NULL, DDP_CLASS_RENDEZVOUS_TIMEOUT, true},
    {"waiting for clients", NULL, DDP_CLASS_RENDEZVOUS_TIMEOUT, true},
    {"wait timeout after", NULL, DDP_CLASS_RENDEZVOUS_TIMEOUT, true},
    {"Timeout waiting for key", NULL, DDP_CLASS_RENDEZVOUS_TIMEOUT, true},

    /* Communication errors that are not timeouts (often the consequence of a peer dying).
     * torch: "NCCL error in: .../ProcessGroupNCCL.cpp:1691, unhandled system error", "NCCL error: remote process
     * exited"; NCCL result names; torch 2.x "DistBackendError"; "NCCL communicator was aborted on rank 1";
     * gloo: "[./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:27035", "Read error". */
    {"NCCL error", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"ncclRemoteError", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"ncclSystemError", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"ncclInternalError", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"ncclUnhandledCudaError", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"ncclInvalidUsage", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"DistBackendError", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"NCCL communicator was aborted", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"Some NCCL operations have failed or timed out", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"Connection closed by peer", NULL, DDP_CLASS_NCCL_ERROR, false},
    {"gloo/transport/tcp/", NULL, DDP_CLASS_NCCL_ERROR, false},

    /* Python's fault handler on a fatal signal (Modules/faulthandler.c): "Fatal Python error: Segmentation
     * fault", then every thread's stack; the process then dies by that signal. Its "Aborted" is not here: the
     * hang capture's SIGABRT prints it too. */
    {"Fatal Python error: Segmentation fault", NULL, DDP_CLASS_SEGFAULT, false},
    {"Fatal Python error: Bus error", NULL, DDP_CLASS_SEGFAULT, false},
    {"Fatal Python error: Illegal instruction", NULL, DDP_CLASS_SEGFAULT, false},
    {"Fatal Python error: Floating point exception", NULL, DDP_CLASS_SEGFAULT, false},
};

#define NPATTERNS (sizeof(patterns) / sizeof(patterns[0]))

/* A glog-style warning or info line of torch/c10d: "[W socket.cpp:426] ...", "[I1129 00:01:02.3 ...] ...",
 * possibly after rank prefixes like "[rank0]:". Such lines report retries, not the failure itself. */
static bool is_log_warning(const char *line, size_t len)
{
    size_t lim = len < 48 ? len : 48;
    for (size_t i = 0; i + 2 < lim; i++)
        if (line[i] == '[' && (line[i + 1] == 'W' || line[i + 1] == 'I') &&
            (line[i + 2] == ' ' || (line[i + 2] >= '0' && line[i + 2] <= '9')))
            return true;
    return false;
}

/* Patterns by first byte, so a line is scanned once: at each byte only the few patterns starting with it are
 * compared. Built on first use (the supervisor calls this from its one loop thread; the build is idempotent). */
static unsigned char by_first[256][8];
static unsigned char nby_first[256];
static size_t lit_len[NPATTERNS];
static bool index_built;

static void build_index(void)
{
    for (size_t i = 0; i < NPATTERNS; i++) {
        unsigned char c = (unsigned char)patterns[i].lit[0];
        lit_len[i] = strlen(patterns[i].lit);
        if (nby_first[c] < sizeof(by_first[c]))
            by_first[c][nby_first[c]++] = (unsigned char)i;
    }
    index_built = true;
}

enum ddp_class ddp_recognise_line(const char *line, size_t len)
{
    if (line == NULL || len < 10)
        return DDP_CLASS_NONE;
    if (!index_built)
        build_index();
    size_t best = NPATTERNS; /* lowest table index that matched: first match wins */
    bool warning_line = is_log_warning(line, len);
    for (size_t pos = 0; pos < len; pos++) {
        unsigned char c = (unsigned char)line[pos];
        for (unsigned k = 0; k < nby_first[c]; k++) {
            size_t i = by_first[c][k];
            if (i >= best || lit_len[i] > len - pos || memcmp(line + pos, patterns[i].lit, lit_len[i]) != 0)
                continue;
            if (patterns[i].fatal_only && warning_line)
                continue;
            if (patterns[i].also != NULL && memmem(line, len, patterns[i].also, strlen(patterns[i].also)) == NULL)
                continue;
            best = i;
        }
    }
    return best < NPATTERNS ? patterns[best].cls : DDP_CLASS_NONE;
}

static bool has(const char *line, size_t len, const char *lit)
{
    return memmem(line, len, lit, strlen(lit)) != NULL;
}

const char *ddp_recognise_backend(const char *line, size_t len)
{
    if (line == NULL)
        return NULL;
    if (has(line, len, "gloo") || has(line, len, "monitoredBarrier") || has(line, len, "Connection closed by peer") ||
        (has(line, len, "Timed out waiting ") && has(line, len, " operation to complete")))
        return "gloo";
    if (has(line, len, "NCCL") || has(line, len, "nccl") || has(line, len, "Watchdog caught collective operation"))
        return "nccl";
    return NULL;
}

enum ddp_class ddp_recognise_status(int exit_code, int signo)
{
    if (signo > 0) {
        switch (signo) {
        case SIGSEGV:
        case SIGBUS:
        case SIGILL:
        case SIGFPE:
            return DDP_CLASS_SEGFAULT;
        case SIGABRT:
            return DDP_CLASS_ABORT;
        case SIGKILL:
            return DDP_CLASS_KILLED;
        default:
            return DDP_CLASS_SIGNAL;
        }
    }
    return exit_code != 0 ? DDP_CLASS_EXIT : DDP_CLASS_NONE;
}
