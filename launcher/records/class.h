/* class: the ways an attempt can end (the failure classes), with their short names, which of them are timeouts,
 * which explains more when several were seen, and a one-line hint of what to do. Pure. It does not recognise a
 * class from an exit status or an output line (recognise.h). */
#ifndef DDP_CLASS_H
#define DDP_CLASS_H

#include <stdbool.h>
#include <stddef.h>

enum ddp_class {
    DDP_CLASS_NONE,               /* nothing recognised */
    DDP_CLASS_EXIT,               /* nonzero exit code; the caller formats "exit-N" */
    DDP_CLASS_SEGFAULT,           /* SIGSEGV, SIGBUS, SIGILL, SIGFPE */
    DDP_CLASS_ABORT,              /* SIGABRT */
    DDP_CLASS_KILLED,             /* SIGKILL (OOM killer, us, or someone else) */
    DDP_CLASS_SIGNAL,             /* any other signal */
    DDP_CLASS_NCCL_TIMEOUT,       /* "collective-timeout": a collective timed out (NCCL watchdog, gloo,
                                     monitored barrier); which backend: ddp_recognise_backend() */
    DDP_CLASS_NCCL_ERROR,         /* "communication-error": NCCL/gloo communication error that is not a
                                     timeout (a peer died or was stopped, network, driver) */
    DDP_CLASS_HANG,               /* heartbeat or output silence for [timeout] stall; FileTimer expiry */
    DDP_CLASS_INIT_TIMEOUT,       /* no sign of life within [timeout] init */
    DDP_CLASS_WALL_TIMEOUT,       /* attempt ran past [timeout] wall */
    DDP_CLASS_CUDA_OOM,           /* CUDA out of memory */
    DDP_CLASS_PORT_IN_USE,        /* EADDRINUSE at rendezvous / store creation */
    DDP_CLASS_EXEC_FAILED,        /* the worker program could not be started */
    DDP_CLASS_RENDEZVOUS_TIMEOUT, /* the TCP store/rendezvous timed out: a rank never arrived or the master was
                                     unreachable */
    DDP_CLASS_MISSING_MODULE,     /* the workers' Python could not import a module (ModuleNotFoundError) */
    DDP_CLASS_COLL_MISMATCH,      /* "collective-mismatch": at a collective failure, the flight recorders show ranks
                                     that enqueued other ops, shapes or dtypes (watch/mismatch.h); never from a
                                     line */
    DDP_CLASS_CPU_OOM,            /* host memory: torch's CPU allocator could not allocate ("DefaultCPUAllocator") */
    DDP_CLASS_LOCAL_RANK_ARG,     /* "local-rank-arg": an old script's argparse wants --local_rank (as
                                     torch.distributed.launch passed it) or refuses --local-rank */
    DDP_CLASS__COUNT
};

/* True for classes that are timeout events for [restart] on_timeout: NCCL_TIMEOUT, HANG, INIT_TIMEOUT,
 * WALL_TIMEOUT, RENDEZVOUS_TIMEOUT. */
bool ddp_class_is_timeout(enum ddp_class c);

/* The class that better explains an attempt when several were seen (across lines and ranks): the root
 * cause wins over its consequences. Order: CUDA_OOM, PORT_IN_USE, EXEC_FAILED, NCCL_TIMEOUT,
 * RENDEZVOUS_TIMEOUT, NCCL_ERROR, then the rest. E.g. a gloo timeout on ranks 0,2,3 and "Connection closed by
 * peer" on rank 1 -> NCCL_TIMEOUT; an OOM on one rank and NCCL errors on the others -> CUDA_OOM. */
enum ddp_class ddp_class_merge(enum ddp_class a, enum ddp_class b);

/* Short stable name: "collective-timeout", "hang", "init-timeout", ... ("exit" for DDP_CLASS_EXIT: the caller
 * writes "exit-N"). Static string; never NULL ("unknown" out of range). */
const char *ddp_class_name(enum ddp_class c);

/* One line of what to do. Static string; never NULL ("" for NONE). */
const char *ddp_class_hint(enum ddp_class c);

/* What a hint may use about the failed attempt; zero-initialise, fill what is known. */
struct ddp_class_facts {
    int ngpus;              /* GPUs of this node's attempt, 0 if none/unknown */
    const int *gpu_index;   /* [ngpus] GPU indexes as the user knows them (nvidia-smi order) */
    const int *gpu_numa;    /* [ngpus] NUMA node of each GPU, -1 unknown */
    bool numa_policy_same;  /* [gpus] policy was same-numa already */
    int port;               /* master port, 0 unknown */
    const char *nccl_debug; /* NCCL_DEBUG value in effect, or NULL */
    int stalled_rank;       /* rank that stopped, -1 unknown */
};

/* A hint made specific with facts, e.g. "GPUs 0 and 4 are on different NUMA nodes (0 and 1); set [gpus]
 * policy = same-numa". Falls back to ddp_class_hint(). Writes at most size bytes (NUL-terminated) into buf;
 * returns buf. */
const char *ddp_class_hint_facts(enum ddp_class c, const struct ddp_class_facts *facts, char *buf, size_t size);

#endif
