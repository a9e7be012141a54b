/* fake_nvml: a stand-in libnvidia-ml.so.1 for the tests (built by `make integration` as
 * build/helpers/fake_nvml/libnvidia-ml.so.1, and without the newer calls as build/helpers/fake_nvml_old/...: an
 * older NVML). Put its directory on LD_LIBRARY_PATH, name a config file in FAKE_NVML_CONFIG and pair it with a
 * topology fixture with DDPLAUNCH_TOPOLOGY_NVML=1. The config is read again at every nvmlInit (a test may change
 * it between a launch and a restart); its events only once. One fact a line ('#' starts a comment); GPU is the
 * index of a gpu line, SIZE bytes or a number with G (GiB), AT seconds after the process's first nvmlInit:
 *   gpu BUSID TOTAL_SIZE [USED_SIZE]      a GPU (NVML's order is the order of these lines)
 *   proc GPU PID SIZE                      a compute process holding SIZE on GPU
 *   ecc GPU CORRECTED UNCORRECTED [AGGREGATE_UNCORRECTED]
 *   remap GPU CORR UNC PENDING FAILURE     nvmlDeviceGetRemappedRows
 *   throttle GPU BITS [AT]                 clock-event reasons (hex or decimal), from AT on
 *   persistence GPU 0|1 / mig GPU 0|1 / ecc_mode GPU 0|1
 *   event GPU AT xid N | event GPU AT ecc  what nvmlEventSetWait_v2 delivers once AT has come
 *   storm GPU AT xid N COUNT               that Xid COUNT times, as fast as the waits ask (an Xid storm)
 *   lost GPU [AT]                          from AT on, its memory and processes calls answer GPU_IS_LOST (15)
 *   recovery GPU N                         NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (0 none, 1 reset, 2 reboot, 3/4 drain)
 *   pcie GPU GEN GEN_MAX WIDTH WIDTH_MAX   the PCIe link now and at most (default 5 5 16 16)
 *   name GPU BYTES                         nvmlDeviceGetName's answer (default "Fake H200"), any bytes but blanks
 *   unsupported CALL                       that call answers NOT_SUPPORTED (remap, retired, ecc, clocks, events)
 *   count N                                garbage: nvmlDeviceGetCount answers N (4294967295), whatever is listed
 *   proc_count GPU N                       garbage: the processes call answers OK and count N, filling only its
 *                                          own entries (a driver that says more than it gave)
 *   slow CALL MS                           that call (init, memory, procs, count) sleeps MS ms first: a hung driver
 * FAKE_NVML_SLEEP_MS=MS with FAKE_NVML_SLEEP_CALL=CALL (default init) does the same from the environment, and
 * FAKE_NVML_LOADED=FILE appends "loaded PID" to FILE when the library is loaded (a test that NVML is not).
 * Never used by the launcher itself. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXG 16
#define MAXP 16
#define MAXE 32

struct proc {
    unsigned pid;
    unsigned long long used;
};
struct gpu {
    char busid[32];
    unsigned long long total, used;
    struct proc procs[MAXP];
    int nprocs;
    unsigned long long ecc_corr, ecc_unc, ecc_unc_aggr;
    unsigned remap[4];
    unsigned long long throttle;
    double throttle_at;
    long long proc_count; /* >= 0: the count the processes call answers */
    double lost_at;       /* >= 0: lost from then on */
    unsigned recovery, pcie[4];
    char name[64];
    int persistence, mig, ecc_mode;
};
struct event {
    int gpu;
    double at;
    unsigned long long type, data;
    int delivered;
    long long left; /* a storm: deliveries still to come */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gpu gpus[MAXG];
static int ngpus;
static struct event events[MAXE];
static int nevents, events_read, inits;
static double t0 = -1;
static char unsupported[512];
static long long count_says = -1; /* "count N" */
static char slow_call[32];
static long slow_ms;

__attribute__((constructor)) static void loaded(void)
{
    const char *path = getenv("FAKE_NVML_LOADED");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "loaded %ld\n", (long)getpid());
        fclose(f);
    }
}

/* the knob: call sleeps, outside the lock (a hung driver call) */
static void maybe_slow(const char *call)
{
    const char *env = getenv("FAKE_NVML_SLEEP_MS"), *which = getenv("FAKE_NVML_SLEEP_CALL");
    long ms = 0;
    pthread_mutex_lock(&mu);
    if (slow_ms > 0 && !strcmp(slow_call, call))
        ms = slow_ms;
    pthread_mutex_unlock(&mu);
    if (env && !strcmp(which && *which ? which : "init", call))
        ms = atol(env);
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long long size_of(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    return *end == 'G' ? (unsigned long long)(v * 1073741824.0) : (unsigned long long)v;
}

static int off(const char *call)
{
    char word[64];
    snprintf(word, sizeof word, " %s ", call);
    return strstr(unsupported, word) != NULL;
}

static void load(void)
{
    const char *path = getenv("FAKE_NVML_CONFIG");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[512];
    int read_events = !events_read;

    ngpus = 0;
    count_says = -1;
    slow_ms = 0;
    snprintf(unsupported, sizeof unsupported, " ");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char a[64] = "", b[64] = "", c[64] = "", d[64] = "", e[64] = "";
        char *hash = strchr(line, '#');
        int g;
        if (hash)
            *hash = '\0';
        if (sscanf(line, "gpu %63s %63s %63s", a, b, c) >= 2 && ngpus < MAXG) {
            struct gpu *x = &gpus[ngpus++];
            memset(x, 0, sizeof *x);
            snprintf(x->busid, sizeof x->busid, "0000%s", a); /* NVML's 8-digit domain */
            x->total = size_of(b);
            x->used = c[0] ? size_of(c) : 0;
            x->persistence = 1;
            x->ecc_mode = 1;
            x->proc_count = -1;
            x->lost_at = -1;
            x->pcie[0] = x->pcie[1] = 5, x->pcie[2] = x->pcie[3] = 16;
            snprintf(x->name, sizeof x->name, "Fake H200");
        } else if (sscanf(line, "proc %d %63s %63s", &g, a, b) == 3 && g >= 0 && g < ngpus && gpus[g].nprocs < MAXP) {
            gpus[g].procs[gpus[g].nprocs++] = (struct proc){(unsigned)atoi(a), size_of(b)};
            gpus[g].used += size_of(b);
        } else if (sscanf(line, "ecc %d %63s %63s %63s", &g, a, b, c) >= 3 && g >= 0 && g < ngpus) {
            gpus[g].ecc_corr = strtoull(a, NULL, 0);
            gpus[g].ecc_unc = strtoull(b, NULL, 0);
            gpus[g].ecc_unc_aggr = c[0] ? strtoull(c, NULL, 0) : gpus[g].ecc_unc;
        } else if (sscanf(line, "remap %d %63s %63s %63s %63s", &g, a, b, c, d) == 5 && g >= 0 && g < ngpus) {
            gpus[g].remap[0] = (unsigned)atoi(a), gpus[g].remap[1] = (unsigned)atoi(b);
            gpus[g].remap[2] = (unsigned)atoi(c), gpus[g].remap[3] = (unsigned)atoi(d);
        } else if (sscanf(line, "throttle %d %63s %63s", &g, a, b) >= 2 && g >= 0 && g < ngpus) {
            gpus[g].throttle = strtoull(a, NULL, 0);
            gpus[g].throttle_at = b[0] ? atof(b) : 0;
        } else if (sscanf(line, "persistence %d %63s", &g, a) == 2 && g >= 0 && g < ngpus) {
            gpus[g].persistence = atoi(a);
        } else if (sscanf(line, "mig %d %63s", &g, a) == 2 && g >= 0 && g < ngpus) {
            gpus[g].mig = atoi(a);
        } else if (sscanf(line, "ecc_mode %d %63s", &g, a) == 2 && g >= 0 && g < ngpus) {
            gpus[g].ecc_mode = atoi(a);
        } else if (sscanf(line, "event %d %63s %63s %63s", &g, a, b, e) >= 3 && read_events && nevents < MAXE) {
            struct event *v = &events[nevents++];
            v->gpu = g;
            v->at = atof(a);
            v->type = !strcmp(b, "xid") ? 0x8 : !strcmp(b, "ecc") ? 0x2 : 0x10;
            v->data = e[0] ? strtoull(e, NULL, 0) : 0;
        } else if (sscanf(line, "lost %d %63s", &g, a) >= 1 && g >= 0 && g < ngpus) {
            gpus[g].lost_at = a[0] ? atof(a) : 0;
        } else if (sscanf(line, "name %d %63s", &g, a) == 2 && g >= 0 && g < ngpus) {
            snprintf(gpus[g].name, sizeof gpus[g].name, "%s", a);
        } else if (sscanf(line, "recovery %d %63s", &g, a) == 2 && g >= 0 && g < ngpus) {
            gpus[g].recovery = (unsigned)atoi(a);
        } else if (sscanf(line, "pcie %d %63s %63s %63s %63s", &g, a, b, c, d) == 5 && g >= 0 && g < ngpus) {
            gpus[g].pcie[0] = (unsigned)atoi(a), gpus[g].pcie[1] = (unsigned)atoi(b);
            gpus[g].pcie[2] = (unsigned)atoi(c), gpus[g].pcie[3] = (unsigned)atoi(d);
        } else if (sscanf(line, "count %63s", a) == 1) {
            count_says = strtoll(a, NULL, 0);
        } else if (sscanf(line, "proc_count %d %63s", &g, a) == 2 && g >= 0 && g < ngpus) {
            gpus[g].proc_count = strtoll(a, NULL, 0);
        } else if (sscanf(line, "storm %d %63s xid %63s %63s", &g, a, b, c) == 4 && read_events && nevents < MAXE) {
            events[nevents++] = (struct event){g, atof(a), 0x8, strtoull(b, NULL, 0), 0, atoll(c)};
        } else if (sscanf(line, "slow %31s %63s", slow_call, a) == 2) {
            slow_ms = atol(a);
        } else if (sscanf(line, "unsupported %63s", a) == 1) {
            size_t n = strlen(unsupported);
            snprintf(unsupported + n, sizeof unsupported - n, "%s ", a);
        }
    }
    events_read = 1;
    fclose(f);
}

static struct gpu *dev(void *d)
{
    struct gpu *g = d;
    return g >= gpus && g < gpus + ngpus ? g : NULL;
}

static int lost(const struct gpu *g)
{
    return g->lost_at >= 0 && now_s() - t0 >= g->lost_at;
}

EXPORT int nvmlInit_v2(void)
{
    pthread_mutex_lock(&mu);
    if (t0 < 0)
        t0 = now_s();
    inits++;
    load();
    pthread_mutex_unlock(&mu);
    maybe_slow("init");
    return 0;
}
EXPORT int nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    inits--;
    pthread_mutex_unlock(&mu);
    return 0;
}
EXPORT const char *nvmlErrorString(int r)
{
    return r == 3 ? "Not Supported" : r == 10 ? "Timeout" : "fake error";
}
EXPORT int nvmlSystemGetDriverVersion(char *v, unsigned n)
{
    snprintf(v, n, "999.99-fake");
    return 0;
}
EXPORT int nvmlDeviceGetCount_v2(unsigned *n)
{
    maybe_slow("count");
    *n = count_says >= 0 ? (unsigned)count_says : (unsigned)ngpus;
    return 0;
}
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d)
{
    if (i >= (unsigned)ngpus)
        return 2;
    *d = &gpus[i];
    return 0;
}
struct pci {
    char legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};
EXPORT int nvmlDeviceGetPciInfo_v3(void *d, struct pci *p)
{
    struct gpu *g = dev(d);
    if (!g)
        return 2;
    memset(p, 0, sizeof *p);
    snprintf(p->bus_id, sizeof p->bus_id, "%s", g->busid);
    return 0;
}
EXPORT int nvmlDeviceGetUUID(void *d, char *u, unsigned n)
{
    struct gpu *g = dev(d);
    snprintf(u, n, "GPU-fake-%d", g ? (int)(g - gpus) : -1);
    return g ? 0 : 2;
}
EXPORT int nvmlDeviceGetName(void *d, char *s, unsigned n)
{
    struct gpu *g = dev(d);
    snprintf(s, n, "%s", g ? g->name : "?");
    return g ? 0 : 2;
}
struct memory {
    unsigned long long total, free, used;
};
EXPORT int nvmlDeviceGetMemoryInfo(void *d, struct memory *m)
{
    struct gpu *g = dev(d);
    if (!g)
        return 2;
    if (lost(g))
        return 15; /* GPU_IS_LOST */
    maybe_slow("memory");
    m->total = g->total;
    m->used = g->used < g->total ? g->used : g->total;
    m->free = m->total - m->used;
    return 0;
}
struct procinfo {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
};
EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *n, struct procinfo *out)
{
    struct gpu *g = dev(d);
    if (!g)
        return 2;
    if (lost(g))
        return 15;
    maybe_slow("procs");
    if (*n < (unsigned)g->nprocs) {
        *n = (unsigned)g->nprocs;
        return 7; /* INSUFFICIENT_SIZE */
    }
    for (int i = 0; i < g->nprocs; i++)
        out[i] = (struct procinfo){g->procs[i].pid, g->procs[i].used, ~0u, ~0u};
    *n = g->proc_count >= 0 ? (unsigned)g->proc_count : (unsigned)g->nprocs;
    return 0;
}
EXPORT int nvmlDeviceGetPersistenceMode(void *d, int *m)
{
    struct gpu *g = dev(d);
    return g ? (*m = g->persistence, 0) : 2;
}
EXPORT int nvmlDeviceGetEccMode(void *d, int *cur, int *pend)
{
    struct gpu *g = dev(d);
    if (!g || off("ecc"))
        return g ? 3 : 2;
    *cur = *pend = g->ecc_mode;
    return 0;
}
EXPORT int nvmlDeviceGetTotalEccErrors(void *d, int type, int counter, unsigned long long *n)
{
    struct gpu *g = dev(d);
    if (!g || off("ecc"))
        return g ? 3 : 2;
    *n = type == 0 ? g->ecc_corr : counter == 0 ? g->ecc_unc : g->ecc_unc_aggr;
    return 0;
}
EXPORT int nvmlDeviceGetRetiredPagesPendingStatus(void *d, int *p)
{
    (void)p;
    return dev(d) ? 3 : 2; /* as on H100/H200: they remap rows instead */
}
EXPORT int nvmlDeviceGetTemperature(void *d, int sensor, unsigned *t)
{
    (void)sensor;
    return dev(d) ? (*t = 40, 0) : 2;
}
static int clocks(void *d, unsigned long long *bits)
{
    struct gpu *g = dev(d);
    if (!g || off("clocks"))
        return g ? 3 : 2;
    pthread_mutex_lock(&mu);
    *bits = g->throttle && now_s() - t0 >= g->throttle_at ? g->throttle : 0x1;
    pthread_mutex_unlock(&mu);
    return 0;
}
EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *bits)
{
    return clocks(d, bits);
}
#ifndef FAKE_NVML_OLD
EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *bits)
{
    return clocks(d, bits);
}
EXPORT int nvmlDeviceGetMigMode(void *d, unsigned *cur, unsigned *pend)
{
    struct gpu *g = dev(d);
    return g ? (*cur = *pend = (unsigned)g->mig, 0) : 2;
}
EXPORT int nvmlDeviceGetRemappedRows(void *d, unsigned *corr, unsigned *unc, unsigned *pend, unsigned *fail)
{
    struct gpu *g = dev(d);
    if (!g || off("remap"))
        return g ? 3 : 2;
    *corr = g->remap[0], *unc = g->remap[1], *pend = g->remap[2], *fail = g->remap[3];
    return 0;
}
struct field_value {
    unsigned id, scope;
    long long ts, latency;
    int type, ret;
    unsigned long long value;
};
EXPORT int nvmlDeviceGetFieldValues(void *d, int n, struct field_value *v)
{
    struct gpu *g = dev(d);
    if (!g)
        return 2;
    for (int i = 0; i < n; i++) {
        v[i].ret = v[i].id == 230 ? 0 : 3; /* NVML_FI_DEV_GET_GPU_RECOVERY_ACTION */
        v[i].type = 1;                     /* unsigned int */
        v[i].value = 0;
        memcpy(&v[i].value, &g->recovery, sizeof g->recovery);
    }
    return 0;
}
static int pcie(void *d, int k, unsigned *out)
{
    struct gpu *g = dev(d);
    return g ? (*out = g->pcie[k], 0) : 2;
}
EXPORT int nvmlDeviceGetCurrPcieLinkGeneration(void *d, unsigned *v)
{
    return pcie(d, 0, v);
}
EXPORT int nvmlDeviceGetMaxPcieLinkGeneration(void *d, unsigned *v)
{
    return pcie(d, 1, v);
}
EXPORT int nvmlDeviceGetCurrPcieLinkWidth(void *d, unsigned *v)
{
    return pcie(d, 2, v);
}
EXPORT int nvmlDeviceGetMaxPcieLinkWidth(void *d, unsigned *v)
{
    return pcie(d, 3, v);
}
#endif

/* ---- events ---- */
struct set {
    unsigned long long mask[MAXG];
};
struct event_data {
    void *device;
    unsigned long long type, data;
    unsigned gi, ci;
};
EXPORT int nvmlEventSetCreate(void **s)
{
    if (off("events"))
        return 3;
    *s = calloc(1, sizeof(struct set));
    return *s ? 0 : 2;
}
EXPORT int nvmlEventSetFree(void *s)
{
    free(s);
    return 0;
}
EXPORT int nvmlDeviceGetSupportedEventTypes(void *d, unsigned long long *types)
{
    return dev(d) ? (*types = 0xff9f, 0) : 2;
}
EXPORT int nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *s)
{
    struct gpu *g = dev(d);
    if (!g || !s)
        return 2;
    ((struct set *)s)->mask[g - gpus] |= types;
    return 0;
}
#ifndef FAKE_NVML_OLD
EXPORT int nvmlEventSetWait_v2(void *s, struct event_data *out, unsigned timeout_ms)
{
    struct set *set = s;
    double until = now_s() + timeout_ms / 1000.0;
    for (;;) {
        pthread_mutex_lock(&mu);
        double t = now_s() - t0;
        static int next; /* round robin: two storms interleave */
        for (int k = 0; k < nevents; k++) {
            int i = (next + k) % nevents;
            struct event *v = &events[i];
            if (v->delivered || v->at > t || v->gpu < 0 || v->gpu >= ngpus || !(set->mask[v->gpu] & v->type))
                continue;
            next = i + 1;
            v->delivered = --v->left <= 0;
            *out = (struct event_data){&gpus[v->gpu], v->type, v->data, ~0u, ~0u};
            pthread_mutex_unlock(&mu);
            return 0;
        }
        pthread_mutex_unlock(&mu);
        if (now_s() >= until)
            return 10; /* TIMEOUT */
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
#endif
