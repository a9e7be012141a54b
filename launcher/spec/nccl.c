/* nccl: NCCL/torch variable checks and presets. Facts: NCCL env docs (2.3-2.2x) and source (params are read with
 * strtoll(..., 0) and no range check; unknown words are ignored), torch ProcessGroupNCCL.hpp (TORCH_NCCL_* names,
 * deprecated NCCL_* aliases; torch 1.13 reads only NCCL_ASYNC_ERROR_HANDLING / NCCL_BLOCKING_WAIT). */
#include "spec/nccl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum kind {
    K_ANY,        /* known, value not checked */
    K_INT,        /* integer in [min, max] (NCCL accepts 0x.. too) */
    K_BOOL,       /* NCCL 0 or 1 */
    K_WORD,       /* one of words (case-insensitive); legacy integers in [min, max] when max > min */
    K_WORDLIST,   /* comma list of words, optional leading ^ */
    K_IFLIST,     /* NCCL_SOCKET_IFNAME / NCCL_IB_HCA syntax */
    K_NTHREADS,   /* 64, 128, 256 or 512 */
    K_DEBUG_FILE, /* a path that must differ per process */
    K_TORCH_BOOL, /* torch flag: 0 or 1 (1.13 throws on anything else) */
    K_ALGO,       /* NCCL_ALGO: list of algorithms, or the per-collective "allreduce:tree,ring;..." syntax */
    K_NOT_EXIST,  /* no such variable: warning, no effect */
    K_DEPRECATED, /* old name of repl: warning; value checked with repl's rule */
    K_REMOVED,    /* existed once, ignored by current versions: warning */
};

struct var {
    const char *name;
    enum kind kind;
    long long min, max;
    const char *const *words;
    const char *repl; /* K_DEPRECATED: new name; K_NOT_EXIST / K_REMOVED: what to use instead */
};

static const char *const w_debug[] = {"VERSION", "WARN", "INFO", "ABORT", "TRACE", NULL};
static const char *const w_subsys[] = {"INIT", "COLL",    "P2P",        "SHM",     "NET",   "GRAPH", "TUNING",
                                       "ENV",  "ALLOC",   "ALLOC_HOST", "CALL",    "PROXY", "NVLS",  "BOOTSTRAP",
                                       "REG",  "PROFILE", "RAS",        "DESTROY", "ALL",   NULL};
static const char *const w_p2p[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NVB", "C2C", "P2C", "PXN", NULL};
static const char *const w_gdr[] = {"LOC", "PIX", "PXB", "PHB", "SYS", "NVL", "C2C", "P2C", NULL};
static const char *const w_algo[] = {"Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT", NULL};
static const char *const w_proto[] = {"LL", "LL128", "Simple", NULL};
static const char *const w_launch[] = {"PARALLEL", "GROUP", NULL};
static const char *const w_family[] = {"AF_INET", "AF_INET6", NULL};
static const char *const w_tdebug[] = {"OFF", "INFO", "DETAIL", NULL};
static const char *const w_cpplog[] = {"INFO", "WARNING", "ERROR", "FATAL", NULL};

#define BIG (1LL << 62)

static const struct var vars[] = {
    /* Debugging and logs */
    {"NCCL_DEBUG", K_WORD, 0, 0, w_debug, NULL},
    {"NCCL_DEBUG_SUBSYS", K_WORDLIST, 0, 0, w_subsys, NULL},
    {"NCCL_DEBUG_FILE", K_DEBUG_FILE, 0, 0, NULL, NULL},
    {"NCCL_DEBUG_TIMESTAMP_FORMAT", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_DEBUG_TIMESTAMP_LEVELS", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_CONF_FILE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_SET_THREAD_NAME", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_SET_STACK_SIZE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_CHECK_POINTERS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_CHECKS_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_TOPO_FILE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_TOPO_DUMP_FILE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_TOPO_DUMP_FILE_RANK", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_GRAPH_FILE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_GRAPH_DUMP_FILE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_GRAPH_DUMP_FILE_RANK", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_PROXY_PROFILE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_PROFILE_EVENT_MASK", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_RAS_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_RAS_ADDR", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_RAS_TIMEOUT_FACTOR", K_INT, 1, BIG, NULL, NULL},
    /* Sockets and bootstrap */
    {"NCCL_SOCKET_IFNAME", K_IFLIST, 0, 0, NULL, NULL},
    {"NCCL_SOCKET_FAMILY", K_WORD, 0, 0, w_family, NULL},
    {"NCCL_SOCKET_NTHREADS", K_INT, 1, 16, NULL, NULL},
    {"NCCL_NSOCKS_PERTHREAD", K_INT, 1, 64, NULL, NULL},
    {"NCCL_SOCKET_RETRY_CNT", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_SOCKET_RETRY_SLEEP_MSEC", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_SOCKET_INLINE", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_SOCKET_MIN_TASKSIZE", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_OOB_NET_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_OOB_NET_IFNAME", K_IFLIST, 0, 0, NULL, NULL},
    {"NCCL_COMM_ID", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_HOSTID", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_UID_STAGGER_THRESHOLD", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_UID_STAGGER_RATE", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_CROSS_NIC", K_INT, 0, 2, NULL, NULL},
    {"NCCL_IGNORE_CPU_AFFINITY", K_BOOL, 0, 0, NULL, NULL},
    /* InfiniBand / RoCE */
    {"NCCL_IB_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_HCA", K_IFLIST, 0, 0, NULL, NULL},
    {"NCCL_IB_TIMEOUT", K_INT, 0, 31, NULL, NULL},
    {"NCCL_IB_RETRY_CNT", K_INT, 0, 7, NULL, NULL},
    {"NCCL_IB_GID_INDEX", K_INT, -1, 1023, NULL, NULL},
    {"NCCL_IB_ADDR_FAMILY", K_WORD, 0, 0, w_family, NULL},
    {"NCCL_IB_ADDR_RANGE", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_IB_ROCE_VERSION_NUM", K_INT, 1, 2, NULL, NULL},
    {"NCCL_IB_SL", K_INT, 0, 15, NULL, NULL},
    {"NCCL_IB_TC", K_INT, 0, 255, NULL, NULL},
    {"NCCL_IB_FIFO_TC", K_INT, 0, 255, NULL, NULL},
    {"NCCL_IB_RETURN_ASYNC_EVENTS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_PKEY", K_INT, 0, 0xffff, NULL, NULL},
    {"NCCL_IB_USE_INLINE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_QPS_PER_CONNECTION", K_INT, 1, 128, NULL, NULL},
    {"NCCL_IB_SPLIT_DATA_ON_QPS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_CUDA_SUPPORT", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_PCI_RELAXED_ORDERING", K_INT, 0, 2, NULL, NULL},
    {"NCCL_IB_ADAPTIVE_ROUTING", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_AR_THRESHOLD", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_IB_ECE_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_MERGE_VFS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_MERGE_NICS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_MQP_RETRY_ALL", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_IB_MQP_RETRY_CNT", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_IB_MQP_RETRY_SLEEP_MSEC", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_IB_GDR_LEVEL", K_DEPRECATED, 0, 0, NULL, "NCCL_NET_GDR_LEVEL"},
    /* Network plugins and GPU Direct RDMA */
    {"NCCL_NET", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_NET_PLUGIN", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_TUNER_PLUGIN", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_PROFILER_PLUGIN", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_ENV_PLUGIN", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_NET_GDR_LEVEL", K_WORD, 0, 5, w_gdr, NULL},
    {"NCCL_NET_GDR_READ", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NET_GDR_C2C", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NET_SHARED_BUFFERS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NET_SHARED_COMMS", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NET_FORCE_FLUSH", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NET_DISABLE_INTRA", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NET_MERGE_LEVEL", K_WORD, 0, 5, w_gdr, NULL},
    {"NCCL_NET_OVERHEAD", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_NCHANNELS_PER_NET_PEER", K_INT, 1, 64, NULL, NULL},
    {"NCCL_COLLNET_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_COLLNET_NODE_THRESHOLD", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_DMABUF_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_GDRCOPY_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_GDRCOPY_FLUSH_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_GDRCOPY_SYNC_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    /* Transports inside a node */
    {"NCCL_P2P_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_P2P_LEVEL", K_WORD, 0, 5, w_p2p, NULL},
    {"NCCL_P2P_DIRECT_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_P2P_USE_CUDA_MEMCPY", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_P2P_NET_CHUNKSIZE", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_P2P_NVL_CHUNKSIZE", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_P2P_PCI_CHUNKSIZE", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_P2P_LL_THRESHOLD", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_P2P_PXN_LEVEL", K_INT, 0, 2, NULL, NULL},
    {"NCCL_PXN_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_PXN_C2C", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_SHM_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_SHM_USE_CUDA_MEMCPY", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_SHM_MEMCPY_MODE", K_INT, 0, 3, NULL, NULL},
    {"NCCL_NVB_DISABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NVB_PRECONNECT", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_NVLS_ENABLE", K_INT, 0, 2, NULL, NULL},
    {"NCCL_NVLS_NCHANNELS", K_INT, 1, 64, NULL, NULL},
    {"NCCL_NVLS_CHUNKSIZE", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_NVLSTREE_MAX_CHUNKSIZE", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_MNNVL_ENABLE", K_INT, 0, 2, NULL, NULL},
    {"NCCL_MNNVL_UUID", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_MNNVL_CLIQUE_ID", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_CUMEM_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_CUMEM_HOST_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_MEM_SYNC_DOMAIN", K_INT, 0, 1, NULL, NULL},
    /* Algorithms, sizes, kernels */
    {"NCCL_ALGO", K_ALGO, 0, 0, w_algo, NULL},
    {"NCCL_PROTO", K_WORDLIST, 0, 0, w_proto, NULL},
    {"NCCL_BUFFSIZE", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_NTHREADS", K_NTHREADS, 0, 0, NULL, NULL},
    {"NCCL_LL128_NTHREADS", K_NTHREADS, 0, 0, NULL, NULL},
    {"NCCL_MAX_NCHANNELS", K_INT, 1, 64, NULL, NULL},
    {"NCCL_MIN_NCHANNELS", K_INT, 1, 64, NULL, NULL},
    {"NCCL_MAX_CTAS", K_INT, 1, 64, NULL, NULL},
    {"NCCL_MIN_CTAS", K_INT, 1, 64, NULL, NULL},
    {"NCCL_CGA_CLUSTER_SIZE", K_INT, 0, 8, NULL, NULL},
    {"NCCL_CTA_POLICY", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_SINGLE_RING_THRESHOLD", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_LAUNCH_MODE", K_WORD, 0, 0, w_launch, NULL},
    {"NCCL_WORK_FIFO_DEPTH", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_WORK_FIFO_BYTES", K_INT, 1, BIG, NULL, NULL},
    {"NCCL_PROGRESS_APPENDOP_FREQ", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_PROXY_APPEND_BATCH_SIZE", K_INT, 0, BIG, NULL, NULL},
    {"NCCL_CREATE_THREAD_CONTEXT", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_COMM_BLOCKING", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_COMM_SPLIT_SHARE_RESOURCES", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_RUNTIME_CONNECT", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_GRAPH_REGISTER", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_GRAPH_MIXING_SUPPORT", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_LOCAL_REGISTER", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_LEGACY_CUDA_REGISTER", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_WIN_ENABLE", K_BOOL, 0, 0, NULL, NULL},
    {"NCCL_ALLOC_P2P_NET_LL_BUFFERS", K_BOOL, 0, 0, NULL, NULL},
    /* Not read by NCCL at run time but commonly present: NVIDIA container images export NCCL_VERSION; build
     * systems (PyTorch's setup.py, CMake) read NCCL_ROOT, NCCL_HOME, NCCL_INCLUDE_DIR, NCCL_LIB_DIR... */
    {"NCCL_VERSION", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_HOME", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_ROOT", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_ROOT_DIR", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_DIR", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_INCLUDE_DIR", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_LIB_DIR", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_LIBRARY", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_LIBRARIES", K_ANY, 0, 0, NULL, NULL},
    {"NCCL_PKG_VERSION", K_ANY, 0, 0, NULL, NULL},
    /* Names that were never NCCL's (timeouts belong to torch), removed ones and old aliases. */
    {"NCCL_SOCKET_TIMEOUT", K_NOT_EXIST, 0, 0, NULL, NULL},
    {"NCCL_SOCKET_TIMEOUT_MS", K_NOT_EXIST, 0, 0, NULL, NULL},
    {"NCCL_TIMEOUT", K_NOT_EXIST, 0, 0, NULL, NULL},
    {"NCCL_LL_THRESHOLD", K_REMOVED, 0, 0, NULL, "NCCL_PROTO"},
    {"NCCL_TREE_THRESHOLD", K_REMOVED, 0, 0, NULL, "NCCL_ALGO"},
    {"NCCL_RINGS", K_REMOVED, 0, 0, NULL, "NCCL_ALGO"},
    {"NCCL_MAX_NRINGS", K_DEPRECATED, 0, 0, NULL, "NCCL_MAX_NCHANNELS"},
    {"NCCL_MIN_NRINGS", K_DEPRECATED, 0, 0, NULL, "NCCL_MIN_NCHANNELS"},
    {"NCCL_ASYNC_ERROR_HANDLING", K_DEPRECATED, 0, 0, NULL, "TORCH_NCCL_ASYNC_ERROR_HANDLING"},
    {"NCCL_BLOCKING_WAIT", K_DEPRECATED, 0, 0, NULL, "TORCH_NCCL_BLOCKING_WAIT"},
    {"NCCL_DESYNC_DEBUG", K_DEPRECATED, 0, 0, NULL, "TORCH_NCCL_DESYNC_DEBUG"},
    {"NCCL_ENABLE_TIMING", K_DEPRECATED, 0, 0, NULL, "TORCH_NCCL_ENABLE_TIMING"},
    {"NCCL_AVOID_RECORD_STREAMS", K_DEPRECATED, 0, 0, NULL, "TORCH_NCCL_AVOID_RECORD_STREAMS"},
    /* torch ProcessGroupNCCL and c10d */
    {"TORCH_NCCL_ASYNC_ERROR_HANDLING", K_INT, 0, 3, NULL, NULL},
    {"TORCH_NCCL_BLOCKING_WAIT", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_DESYNC_DEBUG", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_ENABLE_TIMING", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_AVOID_RECORD_STREAMS", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_ENABLE_MONITORING", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", K_INT, 1, BIG, NULL, NULL},
    {"TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", K_INT, 0, BIG, NULL, NULL},
    {"TORCH_NCCL_COORD_CHECK_MILSEC", K_INT, 1, BIG, NULL, NULL},
    {"TORCH_NCCL_DUMP_ON_TIMEOUT", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_TRACE_BUFFER_SIZE", K_DEPRECATED, 0, 0, NULL, "TORCH_FR_BUFFER_SIZE"},
    {"TORCH_NCCL_TRACE_CPP_STACK", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", K_DEPRECATED, 0, 0, NULL, "TORCH_FR_DUMP_TEMP_FILE"},
    {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", K_ANY, 0, 0, NULL, NULL},
    {"TORCH_NCCL_HIGH_PRIORITY", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_USE_COMM_NONBLOCKING", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_NAN_CHECK", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_ABORT_IN_DESTROY_PG", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_RETHROW_CUDA_ERRORS", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_PROPAGATE_ERROR", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_CUDA_EVENT_CACHE", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_EXTRA_DUMP_ON_EXEC", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_NCCL_ENABLE_NAN_CHECK", K_TORCH_BOOL, 0, 0, NULL, NULL},
    {"TORCH_FR_BUFFER_SIZE", K_INT, 0, BIG, NULL, NULL},
    {"TORCH_FR_DUMP_TEMP_FILE", K_ANY, 0, 0, NULL, NULL},
    {"TORCH_DISTRIBUTED_DEBUG", K_WORD, 0, 0, w_tdebug, NULL},
    {"TORCH_CPP_LOG_LEVEL", K_WORD, 0, 3, w_cpplog, NULL},
    {"TORCH_SHOW_CPP_STACKTRACES", K_TORCH_BOOL, 0, 0, NULL, NULL},
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

static const struct var *var_find(const char *name)
{
    for (size_t i = 0; i < NVARS; i++)
        if (strcmp(vars[i].name, name) == 0)
            return &vars[i];
    return NULL;
}

/* Names we check: NCCL_* and torch's distributed ones. Other TORCH_* (TORCH_HOME, TORCH_LOGS...) are not ours. */
static bool checked_name(const char *name)
{
    return strncmp(name, "NCCL_", 5) == 0 || strncmp(name, "TORCH_NCCL_", 11) == 0 ||
           strncmp(name, "TORCH_FR_", 9) == 0 || strcmp(name, "TORCH_DISTRIBUTED_DEBUG") == 0 ||
           strcmp(name, "TORCH_CPP_LOG_LEVEL") == 0 || strcmp(name, "TORCH_SHOW_CPP_STACKTRACES") == 0;
}

/* Plugins read their own NCCL_<PLUGIN>_* variables; we cannot know them all. */
static bool plugin_name(const char *name)
{
    static const char *const prefixes[] = {
        "NCCL_SHARP_",      "NCCL_UCX_", "NCCL_OFI_",     "NCCL_TUNER_", "NCCL_PROFILER_",
        "NCCL_NET_PLUGIN_", "NCCL_GIN_", "NCCL_COLLNET_", "NCCL_TESTS_", NULL};
    for (const char *const *p = prefixes; *p; p++)
        if (strncmp(name, *p, strlen(*p)) == 0)
            return true;
    return false;
}

static bool parse_ll(const char *s, long long *out)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno != 0 || end == s)
        return false;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end != '\0')
        return false;
    *out = v;
    return true;
}

static bool word_in(const char *w, size_t n, const char *const *words)
{
    for (const char *const *p = words; *p; p++)
        if (strlen(*p) == n && strncasecmp(*p, w, n) == 0)
            return true;
    return false;
}

static char *words_joined(const char *const *words)
{
    struct ddp_buf b = {0};
    for (const char *const *p = words; *p; p++) {
        if (p != words)
            ddp_buf_puts(&b, p[1] ? ", " : " or ");
        ddp_buf_puts(&b, *p);
    }
    return b.data ? b.data : ddp_xstrdup("");
}

struct ctx {
    const char *where; /* "job.ini:7", "environment", "--set", "preset debug" */
    const char *name;
    const char *value;
    struct ddp_strv *warnings;
    struct ddp_err *err;
};

#define FAIL(c, ...) fail_at((c), __VA_ARGS__)

static int fail_at(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_at(struct ctx *c, const char *fmt, ...)
{
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return ddp_errf(c->err, -EINVAL, "%s: %s=%s: %s", c->where, c->name, c->value, what);
}

static void warn_at(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_at(struct ctx *c, const char *fmt, ...)
{
    if (c->warnings == NULL)
        return;
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    ddp_strv_pushf(c->warnings, "%s: %s=%s: %s", c->where, c->name, c->value, what);
}

static int check_int(struct ctx *c, const struct var *v)
{
    long long n;
    if (!parse_ll(c->value, &n))
        return FAIL(c, "expected an integer%s", strcmp(v->name, "NCCL_IB_TIMEOUT") == 0 ? " exponent 0-31" : "");
    if (n >= v->min && n <= v->max)
        return 0;
    if (strcmp(v->name, "NCCL_IB_TIMEOUT") == 0)
        return FAIL(c, "expected an exponent 0-31 (4.096 us * 2^v; 20 = 4.3 s is the default, 22 = 17 s); "
                       "NCCL does not range-check it");
    if (strcmp(v->name, "NCCL_IB_RETRY_CNT") == 0)
        return FAIL(c, "expected 0-7 (a 3-bit InfiniBand field; 7 is the default)");
    if (strcmp(v->name, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == 0)
        return FAIL(c, "expected 0-3 (0 no handling, 1 tear down the process, 2 clean up only, 3 skip cleanup)");
    if (strcmp(v->name, "NCCL_NVLS_ENABLE") == 0)
        return FAIL(c, "expected 0, 1 or 2 (0 off, 1 on, 2 auto)");
    if (v->max == BIG)
        return FAIL(c, "expected an integer >= %lld", v->min);
    return FAIL(c, "expected an integer %lld-%lld", v->min, v->max);
}

static int check_bool(struct ctx *c)
{
    long long n;
    if (parse_ll(c->value, &n) && (n == 0 || n == 1))
        return 0;
    if (strcasecmp(c->value, "true") == 0 || strcasecmp(c->value, "yes") == 0 || strcasecmp(c->value, "on") == 0)
        return FAIL(c, "expected 0 or 1 (NCCL reads numbers only: '%s' counts as 0, the opposite of what it says)",
                    c->value);
    return FAIL(c, "expected 0 or 1");
}

static int check_torch_bool(struct ctx *c)
{
    if (strcmp(c->value, "0") == 0 || strcmp(c->value, "1") == 0)
        return 0;
    static const char *const words[] = {"true", "false", "yes", "no", "y", "n", "on", "off", NULL};
    if (word_in(c->value, strlen(c->value), words)) {
        warn_at(c, "torch 2.x accepts this word but torch 1.13 throws 'Invalid value for environment variable'; "
                   "write 1 or 0");
        return 0;
    }
    return FAIL(c, "expected 0 or 1");
}

static int check_word(struct ctx *c, const struct var *v)
{
    if (word_in(c->value, strlen(c->value), v->words))
        return 0;
    long long n;
    if (v->max > v->min && parse_ll(c->value, &n) && n >= v->min && n <= v->max)
        return 0;
    char *all = words_joined(v->words);
    const char *dym = ddp_did_you_mean(c->value, v->words);
    int rc;
    if (v->max > v->min)
        rc = FAIL(c, "expected %s (or legacy %lld-%lld)%s%s%s; NCCL ignores unknown words silently", all, v->min,
                  v->max, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
    else
        rc = FAIL(c, "expected %s%s%s%s", all, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
    free(all);
    return rc;
}

/* "A,B,^C" style lists: an optional leading ^, then words separated by commas. */
static int check_wordlist(struct ctx *c, const struct var *v)
{
    const char *p = c->value;
    if (*p == '^')
        p++;
    if (*p == '\0')
        return FAIL(c, "empty list");
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0)
            return FAIL(c, "empty item in the comma-separated list");
        if (!word_in(p, n, v->words)) {
            char *w = ddp_xstrndup(p, n);
            char *all = words_joined(v->words);
            const char *dym = ddp_did_you_mean(w, v->words);
            int rc = FAIL(c,
                          "unknown word '%s'%s%s%s (expected a comma-separated list of %s, optionally starting "
                          "with ^ to invert)",
                          w, dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "", all);
            free(w);
            free(all);
            return rc;
        }
        p += n;
        if (*p == ',') {
            p++;
            if (*p == '\0')
                return FAIL(c, "empty item in the comma-separated list");
        }
    }
    return 0;
}

/* NCCL_ALGO: a plain list (as NCCL_PROTO), or since NCCL 2.24 "allreduce:tree,ring;broadcast:ring". */
static int check_algo(struct ctx *c, const struct var *v)
{
    if (strchr(c->value, ':') == NULL && strchr(c->value, ';') == NULL)
        return check_wordlist(c, v);
    char *copy = ddp_xstrdup(c->value);
    int rc = 0;
    char *save = NULL;
    for (char *part = strtok_r(copy, ";", &save); part && rc == 0; part = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(part, ':');
        if (colon == NULL || colon == part || colon[1] == '\0') {
            rc = FAIL(c, "expected 'collective:algo,algo;...' (for example allreduce:tree,ring), got '%s'", part);
            break;
        }
        struct ctx sub = *c;
        sub.value = colon + 1;
        rc = check_wordlist(&sub, v);
    }
    free(copy);
    return rc;
}

/* NCCL_SOCKET_IFNAME: [^][=]name[,name...]; NCCL_IB_HCA also allows name:port. */
static int check_iflist(struct ctx *c, const struct var *v)
{
    const char *p = c->value;
    if (*p == '^')
        p++;
    if (*p == '=')
        p++;
    if (*p == '\0')
        return FAIL(c, "empty interface list (expected e.g. eth0, =eth0, ^docker,lo)");
    bool hca = strcmp(v->name, "NCCL_IB_HCA") == 0;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0)
            return FAIL(c, "empty name in the comma-separated list");
        size_t name_len = n;
        const char *colon = memchr(p, ':', n);
        if (colon) {
            if (!hca)
                return FAIL(c, "':' is not allowed in interface names (a port suffix belongs to NCCL_IB_HCA)");
            name_len = (size_t)(colon - p);
            long long port;
            char *ps = ddp_xstrndup(colon + 1, n - name_len - 1);
            bool ok = parse_ll(ps, &port) && port >= 1 && port <= 255;
            free(ps);
            if (!ok)
                return FAIL(c, "expected NAME or NAME:PORT (port 1-255) in the list");
        }
        for (size_t i = 0; i < name_len; i++) {
            unsigned char ch = (unsigned char)p[i];
            if (ch <= ' ' || ch == '/' || ch == ';' || ch == '^' || ch == '=' || ch >= 0x7f)
                return FAIL(c,
                            "bad character '%c' in a name (NCCL matches prefixes of names like eth0, ib0, "
                            "mlx5_0; ^ and = only at the very start)",
                            ch > ' ' && ch < 0x7f ? ch : '?');
        }
        if (!hca && name_len > 15)
            return FAIL(c, "interface names are at most 15 characters");
        p += n;
        if (*p == ',') {
            p++;
            if (*p == '\0')
                return FAIL(c, "empty name in the comma-separated list");
        }
    }
    return 0;
}

static int check_nthreads(struct ctx *c)
{
    long long n;
    if (parse_ll(c->value, &n) && (n == 64 || n == 128 || n == 256 || n == 512))
        return 0;
    return FAIL(c, "expected 64, 128, 256 or 512");
}

static int check_debug_file(struct ctx *c)
{
    if (c->value[0] == '\0')
        return FAIL(c, "empty path");
    if (strstr(c->value, "%p") == NULL && strstr(c->value, "${RANK}") == NULL &&
        strstr(c->value, "${LOCAL_RANK}") == NULL)
        warn_at(c, "every process opens the same file and they overwrite each other; add %%p (pid) or ${RANK}");
    return 0;
}

static int check_value(struct ctx *c, const struct var *v)
{
    /* ${...} is expanded per worker later; only a path's uniqueness can be judged before. */
    if (strstr(c->value, "${") != NULL && v->kind != K_DEBUG_FILE)
        return 0;
    switch (v->kind) {
    case K_ANY:
        return 0;
    case K_INT:
        return check_int(c, v);
    case K_BOOL:
        return check_bool(c);
    case K_TORCH_BOOL:
        return check_torch_bool(c);
    case K_WORD:
        return check_word(c, v);
    case K_WORDLIST:
        return check_wordlist(c, v);
    case K_ALGO:
        return check_algo(c, v);
    case K_IFLIST:
        return check_iflist(c, v);
    case K_NTHREADS:
        return check_nthreads(c);
    case K_DEBUG_FILE:
        return check_debug_file(c);
    default:
        return 0;
    }
}

static const char *const *known_names(void)
{
    static const char *names[NVARS + 1];
    if (names[0] == NULL) {
        for (size_t i = 0; i < NVARS; i++)
            names[i] = vars[i].name;
        names[NVARS] = NULL;
    }
    return names;
}

/* other_value: the value of the same variable under the replacement name, or NULL. */
static int check_one(struct ctx *c, const char *repl_value)
{
    const struct var *v = var_find(c->name);
    if (v == NULL) {
        if (!checked_name(c->name) || plugin_name(c->name))
            return 0;
        /* Set by NVIDIA's containers to describe the bundled library, not read by NCCL. */
        if (strcmp(c->name, "NCCL_VERSION") == 0 || strcmp(c->name, "NV_LIBNCCL_DEV_PACKAGE") == 0)
            return 0;
        const char *dym = ddp_did_you_mean(c->name, known_names());
        if (dym)
            warn_at(c, "not a known NCCL/torch variable; NCCL ignores unknown names (did you mean %s?)", dym);
        else
            warn_at(c, "not a known NCCL/torch variable; NCCL ignores unknown names");
        return 0;
    }
    switch (v->kind) {
    case K_NOT_EXIST:
        warn_at(c, "NCCL has no such variable, so this has no effect. A collective's timeout is torch's "
                   "init_process_group(timeout=...) (NCCL default 10 min); a stuck watchdog is "
                   "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC; socket connect retries are NCCL_SOCKET_RETRY_CNT and "
                   "NCCL_SOCKET_RETRY_SLEEP_MSEC; ddplaunch's own hang detection is [timeout] stall");
        return 0;
    case K_REMOVED:
        warn_at(c, "removed from NCCL (ignored since 2.5); use %s if you need to steer this", v->repl);
        return 0;
    case K_DEPRECATED: {
        const struct var *nv = var_find(v->repl);
        bool torch = strncmp(v->repl, "TORCH_", 6) == 0;
        bool fr = strncmp(v->repl, "TORCH_FR_", 9) == 0;
        if (repl_value == NULL)
            warn_at(c, "deprecated name of %s%s", v->repl,
                    fr      ? " (torch 2.11 warns about this name; torch before the TORCH_FR_* names reads only this "
                              "one: set both for mixed versions)"
                    : torch ? " (torch >= 2.2 reads the new name first; torch 1.13 reads only this one: set both "
                              "for mixed versions)"
                            : "");
        else if (strcmp(repl_value, c->value) != 0)
            warn_at(c, "%s is also set, to %s: torch >= 2.2 uses that one, older versions use this one", v->repl,
                    repl_value);
        if (nv == NULL)
            return 0;
        return check_value(c, nv);
    }
    default:
        return check_value(c, v);
    }
}

static const char *kv_where(const struct ddp_kv *kv, char *buf, size_t size)
{
    if (kv->file && kv->line > 0)
        snprintf(buf, size, "%s:%d", kv->file, kv->line);
    else if (kv->file)
        snprintf(buf, size, "%s", kv->file);
    else if (kv->origin == DDP_ORIGIN_CLI)
        snprintf(buf, size, "--set nccl.%s", kv->key);
    else if (kv->origin == DDP_ORIGIN_ENV)
        snprintf(buf, size, "DDPLAUNCH_NCCL_%s", kv->key);
    else
        snprintf(buf, size, "[nccl] (%s)", ddp_origin_name(kv->origin));
    return buf;
}

/* The value of name in [nccl], else in envp, else NULL. */
static const char *effective(const struct ddp_kvlist *nccl, char *const *envp, const char *name)
{
    const struct ddp_kv *kv = nccl ? ddp_kvlist_get(nccl, name) : NULL;
    if (kv)
        return kv->value;
    return envp ? ddp_env_get(envp, name) : NULL;
}

int ddp_nccl_validate(const struct ddp_kvlist *nccl, char *const *envp, struct ddp_strv *warnings, struct ddp_err *err)
{
    char where[600];
    for (size_t i = 0; nccl && i < nccl->n; i++) {
        const struct ddp_kv *kv = &nccl->v[i];
        struct ctx c = {kv_where(kv, where, sizeof(where)), kv->key, kv->value, warnings, err};
        if (strncmp(kv->key, "NCCL_", 5) != 0 && strncmp(kv->key, "TORCH_", 6) != 0)
            return ddp_errf(err, -EINVAL, "%s: [nccl] takes NCCL_* and TORCH_* variables, got '%s' (put it in [env])",
                            c.where, kv->key);
        const struct var *v = var_find(kv->key);
        const char *repl = v && v->kind == K_DEPRECATED ? effective(nccl, envp, v->repl) : NULL;
        int rc = check_one(&c, repl);
        if (rc < 0)
            return rc;
    }
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        char *name = ddp_xstrndup(*e, (size_t)(eq - *e));
        if (!checked_name(name) || (nccl && ddp_kvlist_get(nccl, name))) {
            free(name);
            continue;
        }
        struct ctx c = {"environment", name, eq + 1, warnings, err};
        const struct var *v = var_find(name);
        const char *repl = v && v->kind == K_DEPRECATED ? effective(nccl, envp, v->repl) : NULL;
        int rc = check_one(&c, repl);
        free(name);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- presets ---- */

static const char *const preset_names[] = {"debug", "robust", NULL};

/* Entries with a NULL value end a list. "L:" prefixed names apply only with a log dir. */
struct preset_var {
    const char *name;
    const char *value;
    bool needs_log_dir;
};

static const struct preset_var preset_debug[] = {
    {"NCCL_DEBUG", "INFO", false},
    {"NCCL_DEBUG_SUBSYS", "INIT,NET,GRAPH,ENV", false},
    {"NCCL_DEBUG_FILE", "${DDPLAUNCH_ATTEMPT_DIR}/nccl.rank${RANK}.%h.%p.log", true},
    {"TORCH_DISTRIBUTED_DEBUG", "INFO", false},
    {"TORCH_NCCL_DESYNC_DEBUG", "1", false},
    {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", false},
    {"TORCH_FR_BUFFER_SIZE", "2000", false},
    {"TORCH_NCCL_DUMP_ON_TIMEOUT", "1", false},
    {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "${DDPLAUNCH_ATTEMPT_DIR}/nccl_trace_rank_", true},
    {"TORCH_FR_DUMP_TEMP_FILE", "${DDPLAUNCH_ATTEMPT_DIR}/nccl_trace_rank_", true},
    {NULL, NULL, false},
};

static const struct preset_var preset_robust[] = {
    {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", false},
    {"NCCL_ASYNC_ERROR_HANDLING", "1", false}, /* the name torch 1.13 reads */
    {"TORCH_NCCL_ENABLE_MONITORING", "1", false},
    {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "300", false},
    {"TORCH_NCCL_DUMP_ON_TIMEOUT", "1", false},
    {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", false},
    {"TORCH_FR_BUFFER_SIZE", "2000", false},
    {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "${DDPLAUNCH_ATTEMPT_DIR}/nccl_trace_rank_", true},
    {"TORCH_FR_DUMP_TEMP_FILE", "${DDPLAUNCH_ATTEMPT_DIR}/nccl_trace_rank_", true},
    {"NCCL_IB_TIMEOUT", "22", false},
    {"NCCL_IB_RETRY_CNT", "7", false},
    {NULL, NULL, false},
};

static const struct preset_var *preset_find(const char *name)
{
    if (strcmp(name, "debug") == 0)
        return preset_debug;
    if (strcmp(name, "robust") == 0)
        return preset_robust;
    return NULL;
}

const char *const *ddp_nccl_preset_names(void)
{
    return preset_names;
}

static bool no_preset(const char *name)
{
    return name == NULL || name[0] == '\0' || strcmp(name, "none") == 0;
}

int ddp_nccl_preset_apply(const char *name, const char *log_dir, struct ddp_kvlist *nccl, struct ddp_err *err)
{
    if (no_preset(name))
        return 0;
    const struct preset_var *p = preset_find(name);
    if (p == NULL) {
        const char *dym = ddp_did_you_mean(name, preset_names);
        return ddp_errf(err, -EINVAL, "[nccl] preset = %s: unknown preset (%s%s%spresets: debug, robust, none)", name,
                        dym ? "did you mean '" : "", dym ? dym : "", dym ? "'? " : "");
    }
    bool have_log_dir = log_dir != NULL && log_dir[0] != '\0';
    char *file = ddp_xasprintf("preset %s", name);
    for (; p->name; p++) {
        if (p->needs_log_dir && !have_log_dir)
            continue;
        if (ddp_kvlist_get(nccl, p->name) == NULL)
            ddp_kvlist_set(nccl, p->name, p->value, DDP_ORIGIN_DEFAULT, file, 0);
    }
    free(file);
    return 0;
}

const char *const *ddp_nccl_preset_vars(const char *name, bool with_log_dir)
{
    static const char *lines[2][2][16];
    int which = name && strcmp(name, "robust") == 0 ? 1 : 0;
    const struct preset_var *p = name ? preset_find(name) : NULL;
    if (p == NULL)
        return NULL;
    const char **out = lines[which][with_log_dir ? 1 : 0];
    if (out[0] == NULL) {
        static char store[2][2][16][160];
        size_t n = 0;
        for (; p->name && n < 15; p++) {
            if (p->needs_log_dir && !with_log_dir)
                continue;
            snprintf(store[which][with_log_dir][n], sizeof(store[0][0][0]), "%s=%s", p->name, p->value);
            out[n] = store[which][with_log_dir][n];
            n++;
        }
        out[n] = NULL;
    }
    return out;
}
