/* nvml: optional NVIDIA facts (UUIDs, memory in use, utilisation, the processes using each GPU, NVLink pairs,
 * driver version) read through NVML, which is
 * loaded at run time with dlopen("libnvidia-ml.so.1"): no build-time dependency. It does not find GPUs (hwloc does). */
#ifndef DDP_NVML_H
#define DDP_NVML_H

#include <stdbool.h>
#include <stddef.h>

#define DDP_NVML_MAX_LINKS 18
#define DDP_NVML_MAX_PROCS 64
#define DDP_NVML_MAX_DEVICES 4096 /* a device count above it is a broken driver's */

/* A compute process on a GPU. */
struct ddp_nvml_proc {
    unsigned pid;       /* this pid namespace's (holders.h translates NVML's); NVML's own when other_ns */
    long long mem_used; /* bytes, -1 unknown */
    char user[32];      /* its owner from /proc/PID, "" when the pid is not visible here */
    char comm[64];      /* its command (/proc/PID/comm), "" when not visible */
    bool other_ns;      /* pid is the host's and names no process here that holds the GPU: never looked up */
};

/* A GPU's health as NVML says it now; -1 wherever the call is missing (an older NVML) or answers NOT_SUPPORTED.
 * None of it is a failure by itself: doctor and the restart check judge it. */
struct ddp_nvml_health {
    int persistence;                  /* 1 on, 0 off */
    int mig;                          /* current MIG mode: 1 on */
    int ecc, ecc_pending;             /* ECC mode now and after the next reset: 1 on */
    long long ecc_corrected;          /* volatile (since the last driver load) counts */
    long long ecc_uncorrected;        /* volatile double-bit (uncorrectable) errors */
    long long ecc_uncorrected_aggr;   /* the same over the GPU's life */
    int remap_corr, remap_unc;        /* rows remapped for correctable / uncorrectable errors */
    int remap_pending, remap_failure; /* a remapping waits for a reset / a remapping failed: retire the GPU */
    int retired_pending;              /* page retirement waits for a reset (pre-Ampere GPUs) */
    long long clocks_event;           /* clock-event (throttle) reason bits, DDP_NVML_CLOCKS_* */
    int temp_c;                       /* GPU temperature, Celsius */
    int recovery;                     /* NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (drivers 570+): DDP_NVML_RECOVERY_* */
    int pcie_gen, pcie_gen_max;       /* PCIe link generation now / the most device and host support */
    int pcie_width, pcie_width_max;   /* PCIe link width (lanes) now / at most */
};

/* NVML's recovery action for a GPU (nvmlDeviceGpuRecoveryAction_t) */
#define DDP_NVML_RECOVERY_NONE 0
#define DDP_NVML_RECOVERY_GPU_RESET 1
#define DDP_NVML_RECOVERY_NODE_REBOOT 2
#define DDP_NVML_RECOVERY_DRAIN_P2P 3
#define DDP_NVML_RECOVERY_DRAIN_AND_RESET 4
/* "GPU reset", "node reboot", ... for a recovery action; "none" for 0, "action N" when unknown. Static or buf. */
const char *ddp_nvml_recovery_name(int action, char *buf, size_t size);

/* Clock-event reason bits (nvmlClocksEventReasons): the ones that mean hardware trouble. */
#define DDP_NVML_CLOCKS_IDLE 0x1ULL
#define DDP_NVML_CLOCKS_HW_SLOWDOWN 0x8ULL
#define DDP_NVML_CLOCKS_SW_THERMAL 0x20ULL
#define DDP_NVML_CLOCKS_HW_THERMAL 0x40ULL
#define DDP_NVML_CLOCKS_HW_POWER_BRAKE 0x80ULL
#define DDP_NVML_CLOCKS_HW (DDP_NVML_CLOCKS_HW_SLOWDOWN | DDP_NVML_CLOCKS_HW_THERMAL | DDP_NVML_CLOCKS_HW_POWER_BRAKE)

struct ddp_nvml_gpu {
    char busid[32]; /* "0000:18:00.0" (lower case, 4-digit domain) */
    char uuid[96];  /* "GPU-..." */
    char name[96];
    long long mem_used, mem_total; /* bytes, -1 unknown */
    int util;                      /* GPU utilisation percent over NVML's last sample period, -1 unknown */
    struct ddp_nvml_proc procs[DDP_NVML_MAX_PROCS]; /* compute processes using it */
    int nprocs;
    int nlinks;                              /* active NVLinks */
    char link_peer[DDP_NVML_MAX_LINKS][32];  /* bus id at the other end of each active link */
    bool link_to_switch[DDP_NVML_MAX_LINKS]; /* the other end is an NVSwitch (or not a GPU NVML knows) */
    struct ddp_nvml_health health;
    bool lost; /* a call answered NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus */
};

struct ddp_nvml {
    bool found;       /* the library loaded and nvmlInit succeeded */
    bool late;        /* a read did not answer within NVML's deadline (status says so): nothing known */
    char status[256]; /* "NVML: not found (libnvidia-ml.so.1: cannot open ...)" or "NVML 12.535 driver ..." */
    char driver[80];
    struct ddp_nvml_gpu *gpus;
    size_t ngpus;
};

/* What ddp_nvml_read_what() reads of each device besides its bus id. */
#define DDP_NVML_STATIC 0x1u /* UUID, name, total memory, NVLinks: the topology cache's facts */
#define DDP_NVML_MEMORY 0x2u /* memory in use and total, compute processes (the busy check) */
#define DDP_NVML_HEALTH 0x4u /* utilisation and ddp_nvml_health (doctor, the check before a restart) */

/* Load NVML and read every device's facts in what (DDP_NVML_*; the others stay unknown: -1, "", none); never
 * fails: when NVML is missing or broken, found is false and status says why. The library stays loaded for the
 * process (later reads and the event set use it again). Caller owns; free with ddp_nvml_free(). */
void ddp_nvml_read_what(struct ddp_nvml *out, unsigned what);
/* ddp_nvml_read_what() of everything. */
void ddp_nvml_read(struct ddp_nvml *out);
/* The launch's read: memory in use and total and the compute processes, into those GPUs of n (from the
 * topology cache) whose bus ids are busids[0..nbusids), and nothing else. NVML stays initialised for the
 * process, so that the event set's nvmlInit (ddp_nvml_events_open) costs nothing more. 0, or -ENOENT (no usable
 * NVML) or -EIO (nvmlInit failed), n unchanged. */
int ddp_nvml_read_memory(struct ddp_nvml *n, const char *const *busids, size_t nbusids);
void ddp_nvml_free(struct ddp_nvml *n);

/* ---- reading off the caller's thread, with a deadline ----
 * A hung NVML call (a GPU that fell off the bus, a stuck driver) must never hang the launcher: each read runs in
 * a thread of its own, and the caller waits at most NVML's deadline for it. A thread still inside NVML when its
 * caller lets go finishes (or stays blocked) on its own, holding only its own copies. */

/* NVML's deadline in ms: DDPLAUNCH_NVML_TIMEOUT seconds (a decimal, > 0), else DDP_NVML_DEADLINE_S. */
#define DDP_NVML_DEADLINE_S 5
int ddp_nvml_deadline_ms(void);
/* ddp_nvml_read_what() within the deadline; when it passes, found is false, late is true and status says
 * "NVML: did not answer in N s". */
void ddp_nvml_read_deadline(struct ddp_nvml *out, unsigned what);
/* ddp_nvml_read_memory() within the deadline: 0, -ENOENT, -EIO as it, or -ETIMEDOUT (n's GPUs keep their memory
 * unknown; n->late set, n->found cleared, n->status says so). */
int ddp_nvml_read_memory_deadline(struct ddp_nvml *n, const char *const *busids, size_t nbusids);

struct ddp_nvml_reader;
typedef void ddp_nvml_reader_fn(void *arg); /* called from the reader's thread when it has read */
/* Start reading in a thread: with base, ddp_nvml_read_memory() of busids[0..nbusids) into a copy of base; else
 * ddp_nvml_read_what(what). done(arg) (may be NULL) runs in that thread once read, never after
 * ddp_nvml_reader_drop(). NULL when no thread could be started. */
struct ddp_nvml_reader *ddp_nvml_reader_start(unsigned what, const struct ddp_nvml *base, const char *const *busids,
                                              size_t nbusids, ddp_nvml_reader_fn *done, void *arg);
/* Wait up to timeout_ms (0: do not wait) for the read: 1 with *out (caller owns; ddp_nvml_free), and for a memory
 * read *rc its result; 0 while still reading. */
int ddp_nvml_reader_wait(struct ddp_nvml_reader *r, int timeout_ms, struct ddp_nvml *out, int *rc);
/* Let go (NULL is a no-op): the thread frees what it holds when its read returns. */
void ddp_nvml_reader_drop(struct ddp_nvml_reader *r);
/* A reader's thread is still inside NVML, or the event thread is loading it: the process must end with _exit()
 * (exit() would wait for the loader, and the library's destructors could wait for that thread for ever). */
bool ddp_nvml_stuck(void);

/* The GPU with PCI bus id busid (any case), or NULL when NVML does not list it. Owned by n. */
const struct ddp_nvml_gpu *ddp_nvml_find(const struct ddp_nvml *n, const char *busid);

/* NVLinks between the GPUs with bus ids a and b, as nvidia-smi counts them (NV#): links from a straight to b,
 * plus, when both reach NVSwitches, the smaller of their switch link counts. 0 when not linked or unknown. */
int ddp_nvml_links(const struct ddp_nvml *n, const char *a, const char *b);

/* The facts of n that do not change while the machine runs (found, status, driver; per GPU bus id, UUID, name,
 * total memory, NVLinks), as one line of JSON for the topology cache (topo_cache.h). Memory in use,
 * utilisation and processes are live state and are left out. Caller owns; free(). */
char *ddp_nvml_static_json(const struct ddp_nvml *n);
/* The reverse: *out from such a line, with memory in use and utilisation unknown (-1) and no processes.
 * 0, or -EBADMSG (out zeroed) when text is not such a line. Caller owns *out; free with ddp_nvml_free(). */
int ddp_nvml_static_parse(const char *text, struct ddp_nvml *out);

/* The largest process on g whose memory exceeds threshold bytes, or NULL. Processes in pids[0..npids) (this
 * job's own workers) are not counted. Owned by g. */
const struct ddp_nvml_proc *ddp_nvml_foreign(const struct ddp_nvml_gpu *g, long long threshold, const int *pids,
                                             size_t npids);
/* "pid 11661 (alice, python3, 139.5 GiB)" for p; "pid 11661 (not visible here: another pid namespace, 139.5 GiB)"
 * when /proc does not show it; "pid 11661 in the host's pid namespace (139.5 GiB)" when the process this pid
 * names here holds no NVIDIA device (a container's own pid namespace). Writes at most size bytes; returns buf. */
const char *ddp_nvml_proc_describe(const struct ddp_nvml_proc *p, char *buf, size_t size);
/* How long pid has been running, from /proc/PID/stat's start time: 0 with *age_ms, or -ENOENT when there is no
 * such process here (it exited, or lives in another pid namespace). */
int ddp_nvml_proc_age_ms(unsigned pid, long long *age_ms);
/* One line of the hardware faults in h that make a GPU unfit for a new attempt (a recovery action NVML asks for:
 * a reset, a reboot or a drain; a row remapping failure, a remapping or page retirement waiting for a reset,
 * uncorrectable ECC errors since the driver loaded), or "" when none. Returns buf. */
const char *ddp_nvml_health_fault(const struct ddp_nvml_health *h, char *buf, size_t size);
/* The clock-event reasons in bits as words ("HW slowdown, HW thermal"), "" for none. Returns buf. */
const char *ddp_nvml_clocks_describe(long long bits, char *buf, size_t size);

/* ---- events: NVML's event set, read from a thread (nvmlEventSetWait_v2 blocks) ---- */

#define DDP_NVML_EV_ECC_DBE 0x2ULL /* nvmlEventTypeDoubleBitEccError */
#define DDP_NVML_EV_XID 0x8ULL     /* nvmlEventTypeXidCriticalError: data is the Xid */
#define DDP_NVML_EV_CLOCK                                                                                              \
    0x10ULL /* hardware clock-event reasons set (nvmlEventTypeClock, or seen by the poll                               \
               between waits): data the reason bits */

struct ddp_nvml_events;
struct ddp_nvml_event {
    int gpu;                 /* index into the bus ids given to ddp_nvml_events_open() */
    unsigned long long type; /* DDP_NVML_EV_* */
    unsigned long long data; /* the Xid for DDP_NVML_EV_XID, the reasons for a clocks event */
};
/* Load NVML and register busids[0..n) for Xid critical errors, double-bit ECC errors and, where the driver
 * offers them, clock events. 0 with *out; -ENOENT (no NVML), -ENOTSUP (this NVML lacks the event calls or none
 * of the GPUs supports them: the feature is off) with why set. Thread-safe to wait on from one thread.
 * Caller owns; ddp_nvml_events_close(). */
int ddp_nvml_events_open(const char *const *busids, size_t n, struct ddp_nvml_events **out, char *why, size_t whysz);
/* Wait up to timeout_ms for one event: 1 with *ev, 0 on a timeout, negative on an error. Blocks. */
int ddp_nvml_events_wait(struct ddp_nvml_events *e, int timeout_ms, struct ddp_nvml_event *ev);
void ddp_nvml_events_close(struct ddp_nvml_events *e); /* NULL is a no-op */

/* What Xid xid means, from NVIDIA's Xid catalog, or NULL when the table does not know it; *gpu_fault (may be NULL)
 * is set when the Xid says the GPU itself failed (it is left out until reset), not the application. */
const char *ddp_nvml_xid_meaning(unsigned long long xid, bool *gpu_fault);

/* Normalise a PCI bus id to "dddd:bb:dd.f" lower case (NVML writes an 8-digit domain). */
void ddp_nvml_busid_norm(const char *in, char *out, size_t outsz);

#endif
