/* check: doctor's checks (`ddplaunch doctor`): the report they fill (one line per check, the worst status is the
 * exit status), and the checks of GPUs picked (NUMA span, busy GPUs), other jobs' leases, CPUs and memory nodes
 * and the open-files limit. The network checks are in check_net.h, the GPU software's in check_host.h.
 * The checks here, in check_gpu.h, check_net.h and check_host.h are functions of the facts passed in (tests feed
 * faults) and read nothing (the GPU checks ask the judge, fitness.h, which reads nothing either); doctor.c
 * gathers the live facts, and makes the few checks that are about the live system itself (state-dir,
 * port-locks, nccl-ras) with ddp_check_add. It starts nothing and changes nothing. */
#ifndef DDP_CHECK_H
#define DDP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "host/lease.h"
#include "host/port.h"
#include "spec/spec.h"
#include "topo/nvml.h"

/* Worst first: the report's status is the highest one seen. skip = nothing to check here (counts as ok). */
enum ddp_check_status { DDP_CHECK_OK, DDP_CHECK_SKIP, DDP_CHECK_WARN, DDP_CHECK_FAIL };
const char *ddp_check_status_name(enum ddp_check_status s); /* "ok", "skip", "warn", "fail" */

/* One check's outcome. Strings owned by the report. */
struct ddp_check_result {
    enum ddp_check_status status;
    char check[16]; /* "gpus", "master-port", ... */
    char *found;    /* what was found, one line */
    char *todo;     /* what to do, or NULL */
};

struct ddp_check_report {
    struct ddp_check_result *v;
    size_t n, cap;
};

/* Append a result (found/todo are printf formats; todo may be NULL). */
void ddp_check_add(struct ddp_check_report *r, enum ddp_check_status st, const char *check, const char *todo,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void ddp_check_report_free(struct ddp_check_report *r);
/* "a, b, c": the n strings joined for a message. Caller frees. */
char *ddp_check_join(const char *const *v, size_t n);
/* 0 when every result is ok or skip, 1 when some warn and none fail, 2 when some fail. */
int ddp_check_exit_status(const struct ddp_check_report *r);
/* Text: one line per check, "STATUS CHECK       FOUND; TODO". JSON: one document
 * {"status":"warn","exit_status":1,"counts":{...},"checks":[{"check":..,"status":..,"found":..,"todo":..}]}. */
void ddp_check_print(const struct ddp_check_report *r, bool json, FILE *out);

/* ---- GPUs: visible, picked, NUMA span, busy (checks "gpus", "numa", "gpu-busy") ---- */

struct ddp_check_gpu {
    char busid[32];
    unsigned vendor;    /* PCI vendor: 0x10de NVIDIA, 0x1002 AMD */
    int numa;           /* OS index of its NUMA node, -1 unknown */
    int package;        /* OS index of the socket of that node, -1 unknown */
    long long mem_used; /* bytes, -1 unknown (no NVML) */
    long long mem_total;
    int util;                      /* GPU utilisation percent, -1 unknown */
    char users[256];               /* who uses it ("pid 1234 (python3, 30.0 GiB)"), "" none or unknown */
    bool have_health;              /* NVML answered for it: health and lost are meaningful (check_gpu.h) */
    bool lost;                     /* NVML says it is lost (GPU_IS_LOST) */
    struct ddp_nvml_health health; /* -1 where NVML does not say */
};

struct ddp_check_gpus {
    bool have_topo;                  /* false: the topology could not be read */
    const struct ddp_check_gpu *all; /* every GPU of the topology, by topology index */
    size_t nall;
    bool want_gpus;    /* false: CPU workers */
    int nproc;         /* local workers */
    bool share;        /* [gpus] share: workers may share GPUs when fewer are usable */
    int nusable;       /* GPUs the request may use (select/exclude/CVD/Slurm/memory/leases applied) */
    const int *picked; /* topology indices the plan would use, or NULL when placement failed */
    size_t npicked;
    const char *reason; /* the placement's one-line reason, or NULL */
    const char *error;  /* why placement failed, or NULL */
    const int *better;  /* the same-numa automatic choice of nproc usable GPUs, or NULL */
    size_t nbetter;
    bool nvlink;             /* every pair of picked GPUs is joined by NVLink/XGMI (from the placement) */
    bool nvml;               /* NVML answered (mem_used/util/users are meaningful) */
    const char *nvml_status; /* why not, when !nvml */
    const char *unfit;       /* the GPUs the judge finds lost or faulty (fitness.h), with why, or NULL */
};
/* "gpus": fail when placement failed; warn when a GPU is unfit (g->unfit: a launch leaves it out); else ok. */
void ddp_check_gpus(struct ddp_check_report *r, const struct ddp_check_gpus *g);
void ddp_check_numa(struct ddp_check_report *r, const struct ddp_check_gpus *g);
/* Warn when a picked GPU has >= 1 GiB or >= 10% of its memory in use, or >= 10% utilisation; fail at >= 80%
 * memory (the job would run out). */
void ddp_check_gpu_busy(struct ddp_check_report *r, const struct ddp_check_gpus *g);

/* ---- GPU leases of other ddplaunch jobs (check "leases") ---- */
void ddp_check_leases(struct ddp_check_report *r, const struct ddp_lease_info *leases, size_t n, pid_t self,
                      int lease_rc);

/* ---- CPUs and memory nodes (check "cpus") ---- */
struct ddp_check_cpus {
    const char *cpus_allowed; /* list ("0-7,16"): the topology's allowed CPUs or Cpus_allowed_list */
    const char *mems_allowed; /* Mems_allowed_list, NULL when unknown (XML topology) */
    int nproc;
    enum ddp_bind bind;
    const char *const *rank_cpus; /* per rank CPU list from the placement (NULL entry: unbound), or NULL */
    const char *const *rank_mems; /* per rank memory nodes, or NULL */
    size_t nranks;
};
void ddp_check_cpus(struct ddp_check_report *r, const struct ddp_check_cpus *c);
/* Number of CPUs in a list string "0-3,8,10-11", or -EINVAL when it is malformed (or NULL). Pure. */
int ddp_check_list_count(const char *list);

/* ---- open files (check "nofile") ----
 * Rule: the launcher keeps about 6 descriptors per worker (2 output pipes, the shim's report pipe, 2 log files,
 * the heartbeat file) plus 32; fail below that. Workers inherit the soft limit: torch's DataLoader workers pass
 * tensors as file descriptors and NCCL opens sockets per peer, and 1024 is the usual "Too many open files" trap,
 * so warn below 4096 (and say the hard limit allows more when it does). */
#define DDP_CHECK_NOFILE_WANT 4096ULL
void ddp_check_nofile(struct ddp_check_report *r, unsigned long long soft, unsigned long long hard, int nproc);

#endif
