/* nvml: dlopen'd NVML (its entry points: nvml_internal.h), the reads of its facts, with a deadline, off the caller's
 * thread, and the topology cache's form of them; the judgements of what was read are in nvml_judge.c, the event
 * set in nvml_events.c. */
#include "topo/nvml.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "topo/holders.h"

#include "topo/nvml_internal.h"

void ddp_nvml_busid_norm(const char *in, char *out, size_t outsz)
{
    char tmp[64];
    const char *colon = strchr(in, ':');
    size_t i;

    /* domain:bus:dev.fn; reduce a long domain to its last 4 digits */
    if (colon && strchr(colon + 1, ':') && colon - in > 4)
        in = colon - 4;
    snprintf(tmp, sizeof tmp, "%s", in);
    for (i = 0; tmp[i]; i++)
        tmp[i] = (char)tolower((unsigned char)tmp[i]);
    snprintf(out, outsz, "%s", tmp);
}

static void *sym(void *lib, const char *name, const char *fallback)
{
    void *p = dlsym(lib, name);

    return p || !fallback ? p : dlsym(lib, fallback);
}

#define SYM(field, name, fallback) f->field = (__typeof__(f->field))sym(lib, name, fallback)
/* Every entry point we use; a missing one stays NULL (that feature is off). */
static void load_fns(void *lib, struct nvml_fns *f)
{
    memset(f, 0, sizeof *f);
    SYM(init, "nvmlInit_v2", "nvmlInit");
    SYM(shutdown, "nvmlShutdown", NULL);
    SYM(error_string, "nvmlErrorString", NULL);
    SYM(driver_version, "nvmlSystemGetDriverVersion", NULL);
    SYM(count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    SYM(pci, "nvmlDeviceGetPciInfo_v3", NULL);
    SYM(uuid, "nvmlDeviceGetUUID", NULL);
    SYM(name, "nvmlDeviceGetName", NULL);
    SYM(memory, "nvmlDeviceGetMemoryInfo", NULL);
    SYM(utilization, "nvmlDeviceGetUtilizationRates", NULL);
    SYM(processes, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
    SYM(link_state, "nvmlDeviceGetNvLinkState", NULL);
    SYM(link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2", NULL);
    SYM(link_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType", NULL);
    SYM(persistence, "nvmlDeviceGetPersistenceMode", NULL);
    SYM(mig, "nvmlDeviceGetMigMode", NULL);
    SYM(ecc_mode, "nvmlDeviceGetEccMode", NULL);
    SYM(ecc_total, "nvmlDeviceGetTotalEccErrors", NULL);
    SYM(remapped, "nvmlDeviceGetRemappedRows", NULL);
    SYM(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus", NULL);
    SYM(clocks_event, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    SYM(temperature, "nvmlDeviceGetTemperature", NULL);
    SYM(field_values, "nvmlDeviceGetFieldValues", NULL);
    SYM(pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration", NULL);
    SYM(pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration", NULL);
    SYM(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth", NULL);
    SYM(pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth", NULL);
    SYM(set_create, "nvmlEventSetCreate", NULL);
    SYM(set_free, "nvmlEventSetFree", NULL);
    SYM(supported_events, "nvmlDeviceGetSupportedEventTypes", NULL);
    SYM(register_events, "nvmlDeviceRegisterEvents", NULL);
    SYM(set_wait, "nvmlEventSetWait_v2", NULL);
}
#undef SYM

/* The GPU's health; NOT_SUPPORTED (and a missing call) leaves a fact at -1. */
static void read_health(const struct nvml_fns *f, nvml_device d, struct ddp_nvml_health *h)
{
    int a = 0, b = 0;
    unsigned ua = 0, ub = 0, uc = 0, ud = 0;
    unsigned long long n = 0;

    memset(h, 0xff, sizeof *h); /* every field -1 */
    if (f->persistence && f->persistence(d, &a) == 0)
        h->persistence = a != 0;
    if (f->mig && f->mig(d, &ua, &ub) == 0)
        h->mig = ua != 0;
    if (f->ecc_mode && f->ecc_mode(d, &a, &b) == 0) {
        h->ecc = a != 0;
        h->ecc_pending = b != 0;
    }
    /* error type 0 corrected, 1 uncorrected; counter type 0 volatile, 1 aggregate */
    if (f->ecc_total && f->ecc_total(d, 0, 0, &n) == 0)
        h->ecc_corrected = (long long)n;
    if (f->ecc_total && f->ecc_total(d, 1, 0, &n) == 0)
        h->ecc_uncorrected = (long long)n;
    if (f->ecc_total && f->ecc_total(d, 1, 1, &n) == 0)
        h->ecc_uncorrected_aggr = (long long)n;
    if (f->remapped && f->remapped(d, &ua, &ub, &uc, &ud) == 0) {
        h->remap_corr = (int)ua;
        h->remap_unc = (int)ub;
        h->remap_pending = uc != 0;
        h->remap_failure = ud != 0;
    }
    if (f->retired_pending && f->retired_pending(d, &a) == 0)
        h->retired_pending = a != 0;
    if (f->clocks_event && f->clocks_event(d, &n) == 0)
        h->clocks_event = (long long)n;
    if (f->temperature && f->temperature(d, 0, &ua) == 0)
        h->temp_c = (int)ua;
    struct nvml_field_value fv = {.field_id = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION};
    if (f->field_values && f->field_values(d, 1, &fv) == 0 && fv.ret == 0)
        h->recovery = fv.value_type == 1 ? (int)fv.value.ui : (int)fv.value.ull;
    if (f->pcie_gen && f->pcie_gen(d, &ua) == 0)
        h->pcie_gen = (int)ua;
    if (f->pcie_gen_max && f->pcie_gen_max(d, &ua) == 0)
        h->pcie_gen_max = (int)ua;
    if (f->pcie_width && f->pcie_width(d, &ua) == 0)
        h->pcie_width = (int)ua;
    if (f->pcie_width_max && f->pcie_width_max(d, &ua) == 0)
        h->pcie_width_max = (int)ua;
}

/* user and command of pid from /proc. NVML answers with the host's pids: in a container's own pid namespace the
 * pid is translated where /proc shows how (holders.h), else it is the host's only and not looked up here (the
 * process this namespace numbers so is an unrelated one); on a host with NVIDIA devices, a pid whose process
 * here holds none is not the holder either */
static void proc_owner(struct ddp_nvml_proc *p)
{
    char path[64], line[256];
    FILE *fp;
    unsigned here = 0;

    if (ddp_holders_host_pid("/proc", p->pid, &here) != 1 ||
        (access("/dev/nvidiactl", F_OK) == 0 && ddp_holders_pid("/proc", here) == 0)) {
        p->other_ns = true;
        return;
    }
    p->pid = here;

    snprintf(path, sizeof path, "/proc/%u/comm", p->pid);
    if ((fp = fopen(path, "re")) != NULL) {
        if (fgets(p->comm, sizeof p->comm, fp))
            p->comm[strcspn(p->comm, "\n")] = '\0';
        ddp_printable(p->comm); /* another user names it; the kernel cut it at 15 bytes, maybe mid-character */
        fclose(fp);
    }
    snprintf(path, sizeof path, "/proc/%u/status", p->pid);
    if ((fp = fopen(path, "re")) == NULL)
        return;
    while (fgets(line, sizeof line, fp)) {
        unsigned uid;
        if (sscanf(line, "Uid: %u", &uid) == 1) {
            struct passwd pw, *res = NULL;
            char buf[1024];
            if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
                ddp_text_copy(p->user, sizeof p->user, res->pw_name);
            else
                snprintf(p->user, sizeof p->user, "uid %u", uid);
            break;
        }
    }
    fclose(fp);
}

/* libnvidia-ml.so.1, opened once per process and never closed (a launch reads it, then the event thread and
 * the restart check use it again: each dlopen would map and relocate the library anew). NULL with why when
 * it is missing or lacks the calls every reader needs. */
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static void *lib_handle;
static struct nvml_fns lib_fns;
static char lib_why[200];

static void lib_open(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(lib_why, sizeof lib_why, "not found (%s)", dlerror());
        return;
    }
    load_fns(lib, &lib_fns);
    if (!lib_fns.init || !lib_fns.shutdown || !lib_fns.count || !lib_fns.handle || !lib_fns.pci) {
        snprintf(lib_why, sizeof lib_why,
                 "unusable (libnvidia-ml.so.1 lacks nvmlInit_v2 or nvmlDeviceGetPciInfo_v3: driver too old)");
        dlclose(lib);
        return;
    }
    lib_handle = lib;
}

const struct nvml_fns *ddp_nvml_lib_get(const char **why)
{
    pthread_once(&lib_once, lib_open);
    *why = lib_why;
    return lib_handle ? &lib_fns : NULL;
}

/* nvmlInit; NVML counts them, so one held for the process (keep) makes every later one cheap. 0, or the
 * NVML error with status set. */
nvml_return ddp_nvml_init_lib(const struct nvml_fns *f, bool keep, char *status, size_t size)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static bool kept;
    nvml_return r = f->init();
    if (r != 0) {
        snprintf(status, size, "NVML: nvmlInit failed: %s (error %d)", f->error_string ? f->error_string(r) : "?", r);
        return r;
    }
    pthread_mutex_lock(&mu);
    if (keep && !kept && f->init() == 0) /* the process's own reference, never shut down */
        kept = true;
    pthread_mutex_unlock(&mu);
    return 0;
}

/* The device count, or -EIO with status set when NVML fails it or answers a count no machine has (a broken
 * driver answered 2^32-1: allocating and walking that many would abort or spin). */
int ddp_nvml_device_count(const struct nvml_fns *f, unsigned *n, char *status, size_t size)
{
    *n = 0;
    if (f->count(n) != 0) {
        *n = 0;
        return 0;
    }
    if (*n > DDP_NVML_MAX_DEVICES) {
        snprintf(status, size, "NVML: broken (nvmlDeviceGetCount answered %u devices, more than %d)", *n,
                 DDP_NVML_MAX_DEVICES);
        *n = 0;
        return -EIO;
    }
    return 0;
}

/* Memory of device d into g, and (procs) its compute processes. */
static void read_memory(const struct nvml_fns *f, nvml_device d, struct ddp_nvml_gpu *g, bool procs)
{
    struct nvml_memory mem;
    struct nvml_process pr[DDP_NVML_MAX_PROCS];
    unsigned n = DDP_NVML_MAX_PROCS;

    memset(pr, 0, sizeof pr);
    g->mem_used = -1;
    g->nprocs = 0;
    nvml_return r = f->memory ? f->memory(d, &mem) : 3;
    if (r == 0) {
        g->mem_used = (long long)mem.used;
        g->mem_total = (long long)mem.total;
    }
    g->lost |= r == NVML_ERROR_GPU_IS_LOST;
    if (!procs || !f->processes || (r = f->processes(d, &n, pr)) != 0) {
        g->lost |= r == NVML_ERROR_GPU_IS_LOST;
        return;
    }
    if (n > DDP_NVML_MAX_PROCS) { /* "OK" with more entries than the buffer holds: only the buffer is NVML's */
        ddp_debug("NVML: %s: %u compute processes in a buffer of %d", g->busid, n, DDP_NVML_MAX_PROCS);
        n = DDP_NVML_MAX_PROCS;
    }
    for (unsigned k = 0; k < n; k++) {
        if (pr[k].pid == 0) /* an entry NVML did not fill (the buffer was zeroed): no phantom holder */
            continue;
        g->procs[g->nprocs] = (struct ddp_nvml_proc){
            .pid = pr[k].pid,
            .mem_used = pr[k].used != ~0ULL ? (long long)pr[k].used : -1,
        };
        proc_owner(&g->procs[g->nprocs++]);
    }
}

/* The active NVLinks of device d into g. */
static void read_links(const struct nvml_fns *f, nvml_device d, struct ddp_nvml_gpu *g)
{
    for (unsigned l = 0; f->link_state && f->link_remote_pci && l < DDP_NVML_MAX_LINKS; l++) {
        int active = 0, type = -1;
        struct nvml_pci rp;

        if (f->link_state(d, l, &active) != 0 || !active || f->link_remote_pci(d, l, &rp) != 0)
            continue;
        ddp_nvml_busid_norm(rp.bus_id, g->link_peer[g->nlinks], sizeof g->link_peer[0]);
        /* NVML_NVLINK_DEVICE_TYPE_SWITCH = 2 */
        g->link_to_switch[g->nlinks] = f->link_remote_type && f->link_remote_type(d, l, &type) == 0 && type == 2;
        g->nlinks++;
    }
}

void ddp_nvml_read_what(struct ddp_nvml *out, unsigned what)
{
    const char *why;
    const struct nvml_fns *f = ddp_nvml_lib_get(&why);
    struct nvml_utilization u;
    unsigned n = 0;

    memset(out, 0, sizeof *out);
    if (!f) {
        snprintf(out->status, sizeof out->status, "NVML: %s", why);
        return;
    }
    if (ddp_nvml_init_lib(f, false, out->status, sizeof out->status) != 0)
        return;
    if (f->driver_version)
        f->driver_version(out->driver, sizeof out->driver);
    out->driver[sizeof out->driver - 1] = '\0';
    ddp_printable(out->driver);
    if (ddp_nvml_device_count(f, &n, out->status, sizeof out->status) != 0) {
        f->shutdown();
        return;
    }
    out->gpus = ddp_xcalloc(n ? n : 1, sizeof *out->gpus);
    for (unsigned i = 0; i < n; i++) {
        struct ddp_nvml_gpu *g = &out->gpus[out->ngpus];
        struct nvml_pci pci;
        nvml_device d;

        if (f->handle(i, &d) != 0 || f->pci(d, &pci) != 0)
            continue;
        ddp_nvml_busid_norm(pci.bus_id, g->busid, sizeof g->busid);
        g->mem_used = g->mem_total = -1;
        g->util = -1;
        memset(&g->health, 0xff, sizeof g->health); /* every field -1: not read */
        if (what & DDP_NVML_STATIC) {
            if (f->uuid)
                f->uuid(d, g->uuid, sizeof g->uuid);
            if (f->name)
                f->name(d, g->name, sizeof g->name);
            g->uuid[sizeof g->uuid - 1] = g->name[sizeof g->name - 1] = '\0';
            ddp_printable(g->uuid); /* the driver's text: the topology cache's JSON must take it */
            ddp_printable(g->name);
            read_links(f, d, g);
        }
        if (what & (DDP_NVML_STATIC | DDP_NVML_MEMORY)) /* total memory is a static fact too */
            read_memory(f, d, g, what & DDP_NVML_MEMORY);
        if (!(what & DDP_NVML_MEMORY))
            g->mem_used = -1;
        if (what & DDP_NVML_HEALTH) {
            g->util = f->utilization && f->utilization(d, &u) == 0 ? (int)u.gpu : -1;
            read_health(f, d, &g->health);
        }
        out->ngpus++;
    }
    /* A peer that is no GPU NVML lists is a switch (old drivers cannot say). */
    for (size_t i = 0; i < out->ngpus; i++)
        for (int l = 0; l < out->gpus[i].nlinks; l++) {
            bool gpu = false;

            for (size_t j = 0; j < out->ngpus; j++)
                gpu |= !strcmp(out->gpus[i].link_peer[l], out->gpus[j].busid);
            if (!gpu)
                out->gpus[i].link_to_switch[l] = true;
        }
    out->found = true;
    snprintf(out->status, sizeof out->status, "NVML: found, driver %s, %zu GPU%s", out->driver[0] ? out->driver : "?",
             out->ngpus, out->ngpus == 1 ? "" : "s");
    f->shutdown();
}

void ddp_nvml_read(struct ddp_nvml *out)
{
    ddp_nvml_read_what(out, DDP_NVML_STATIC | DDP_NVML_MEMORY | DDP_NVML_HEALTH);
}

int ddp_nvml_read_memory(struct ddp_nvml *n, const char *const *busids, size_t nbusids)
{
    const char *why;
    const struct nvml_fns *f = ddp_nvml_lib_get(&why);
    char status[256];
    unsigned count = 0;
    size_t done = 0;

    if (!f)
        return -ENOENT;
    if (ddp_nvml_init_lib(f, true, status, sizeof status) != 0)
        return -EIO;
    if (ddp_nvml_device_count(f, &count, status, sizeof status) != 0) {
        f->shutdown();
        return -EIO;
    }
    for (unsigned i = 0; i < count && done < nbusids; i++) {
        struct nvml_pci pci;
        nvml_device d;
        char bus[32];

        if (f->handle(i, &d) != 0 || f->pci(d, &pci) != 0)
            continue;
        ddp_nvml_busid_norm(pci.bus_id, bus, sizeof bus);
        for (size_t k = 0; k < nbusids; k++) {
            struct ddp_nvml_gpu *g = (struct ddp_nvml_gpu *)ddp_nvml_find(n, busids[k]);
            if (!g || strcasecmp(busids[k], bus) != 0)
                continue;
            read_memory(f, d, g, true);
            done++;
        }
    }
    f->shutdown();
    return 0;
}

/* ---- reading off the caller's thread ---- */

struct ddp_nvml_reader {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;     /* the thread and the caller */
    bool done;    /* the read returned */
    bool dropped; /* the caller let go: no done() */
    unsigned what;
    bool memory; /* a memory read into a copy of the caller's base */
    char **busids;
    size_t nbusids;
    int rc;
    struct ddp_nvml out;
    ddp_nvml_reader_fn *fn;
    void *arg;
};

static pthread_mutex_t stuck_mu = PTHREAD_MUTEX_INITIALIZER;
static int stuck_n;   /* readers let go of while their thread was inside NVML */
static int opening_n; /* event sets being opened (the library loading, nvmlInit) */

int ddp_nvml_deadline_ms(void)
{
    const char *v = getenv("DDPLAUNCH_NVML_TIMEOUT");
    char *end;
    double s = v && *v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(s > 0) || s > 3600)
        s = DDP_NVML_DEADLINE_S;
    return (int)(s * 1000);
}

static void reader_unref(struct ddp_nvml_reader *r)
{
    pthread_mutex_lock(&r->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last)
        return;
    for (size_t i = 0; i < r->nbusids; i++)
        free(r->busids[i]);
    free(r->busids);
    ddp_nvml_free(&r->out);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static void *reader_thread(void *p)
{
    struct ddp_nvml_reader *r = p;
    if (r->memory)
        r->rc = ddp_nvml_read_memory(&r->out, (const char *const *)r->busids, r->nbusids);
    else
        ddp_nvml_read_what(&r->out, r->what);
    pthread_mutex_lock(&r->mu);
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    if (r->dropped) {
        pthread_mutex_lock(&stuck_mu);
        stuck_n--;
        pthread_mutex_unlock(&stuck_mu);
    } else if (r->fn) {
        r->fn(r->arg);
    }
    pthread_mutex_unlock(&r->mu);
    reader_unref(r);
    return NULL;
}

struct ddp_nvml_reader *ddp_nvml_reader_start(unsigned what, const struct ddp_nvml *base, const char *const *busids,
                                              size_t nbusids, ddp_nvml_reader_fn *done, void *arg)
{
    struct ddp_nvml_reader *r = ddp_xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 2;
    r->what = what;
    r->fn = done;
    r->arg = arg;
    if (base) {
        r->memory = true;
        r->out = *base;
        r->out.gpus = ddp_xcalloc(base->ngpus + 1, sizeof *r->out.gpus);
        memcpy(r->out.gpus, base->gpus, base->ngpus * sizeof *base->gpus);
        r->busids = ddp_xcalloc(nbusids + 1, sizeof *r->busids);
        for (size_t i = 0; i < nbusids; i++)
            r->busids[r->nbusids++] = ddp_xstrdup(busids[i]);
    }
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits it: signals stay the caller's */
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, reader_thread, r);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        r->refs = 1;
        reader_unref(r);
        return NULL;
    }
    return r;
}

int ddp_nvml_reader_wait(struct ddp_nvml_reader *r, int timeout_ms, struct ddp_nvml *out, int *rc)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (!r->done && timeout_ms > 0 && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0)
        ;
    bool done = r->done;
    if (done) {
        *out = r->out;
        memset(&r->out, 0, sizeof r->out);
        if (rc)
            *rc = r->rc;
    }
    pthread_mutex_unlock(&r->mu);
    return done;
}

void ddp_nvml_reader_drop(struct ddp_nvml_reader *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->dropped = true;
    if (!r->done) {
        pthread_mutex_lock(&stuck_mu);
        stuck_n++;
        pthread_mutex_unlock(&stuck_mu);
    }
    pthread_mutex_unlock(&r->mu);
    reader_unref(r);
}

void ddp_nvml_opening(int delta)
{
    pthread_mutex_lock(&stuck_mu);
    opening_n += delta;
    pthread_mutex_unlock(&stuck_mu);
}

bool ddp_nvml_stuck(void)
{
    pthread_mutex_lock(&stuck_mu);
    bool stuck = stuck_n > 0 || opening_n > 0;
    pthread_mutex_unlock(&stuck_mu);
    return stuck;
}

static void late(struct ddp_nvml *n, int ms)
{
    n->found = false;
    n->late = true;
    snprintf(n->status, sizeof n->status, "NVML: did not answer in %g s", ms / 1000.0);
}

void ddp_nvml_read_deadline(struct ddp_nvml *out, unsigned what)
{
    int ms = ddp_nvml_deadline_ms();
    struct ddp_nvml_reader *r = ddp_nvml_reader_start(what, NULL, NULL, 0, NULL, NULL);
    memset(out, 0, sizeof *out);
    if (!r) {
        ddp_nvml_read_what(out, what);
        return;
    }
    if (!ddp_nvml_reader_wait(r, ms, out, NULL))
        late(out, ms);
    ddp_nvml_reader_drop(r);
}

int ddp_nvml_read_memory_deadline(struct ddp_nvml *n, const char *const *busids, size_t nbusids)
{
    int ms = ddp_nvml_deadline_ms(), rc = 0;
    struct ddp_nvml_reader *r = ddp_nvml_reader_start(0, n, busids, nbusids, NULL, NULL);
    struct ddp_nvml got;
    if (!r)
        return ddp_nvml_read_memory(n, busids, nbusids);
    if (ddp_nvml_reader_wait(r, ms, &got, &rc)) {
        ddp_nvml_free(n);
        *n = got;
    } else {
        late(n, ms);
        rc = -ETIMEDOUT;
    }
    ddp_nvml_reader_drop(r);
    return rc;
}

const struct ddp_nvml_gpu *ddp_nvml_find(const struct ddp_nvml *n, const char *busid)
{
    for (size_t i = 0; i < n->ngpus; i++)
        if (!strcasecmp(n->gpus[i].busid, busid))
            return &n->gpus[i];
    return NULL;
}

static int switch_links(const struct ddp_nvml_gpu *g)
{
    int k = 0;

    for (int l = 0; l < g->nlinks; l++)
        k += g->link_to_switch[l];
    return k;
}

int ddp_nvml_links(const struct ddp_nvml *n, const char *a, const char *b)
{
    const struct ddp_nvml_gpu *ga = ddp_nvml_find(n, a), *gb = ddp_nvml_find(n, b);
    int links = 0, sa, sb;

    if (!ga || !gb || ga == gb)
        return 0;
    for (int l = 0; l < ga->nlinks; l++)
        links += !ga->link_to_switch[l] && !strcasecmp(ga->link_peer[l], gb->busid);
    sa = switch_links(ga), sb = switch_links(gb);
    if (sa && sb)
        links += sa < sb ? sa : sb;
    return links;
}

void ddp_nvml_free(struct ddp_nvml *n)
{
    free(n->gpus);
    memset(n, 0, sizeof *n);
}

char *ddp_nvml_static_json(const struct ddp_nvml *n)
{
    json_t *gpus = json_array();
    for (size_t i = 0; i < n->ngpus; i++) {
        const struct ddp_nvml_gpu *g = &n->gpus[i];
        json_t *links = json_array();
        for (int l = 0; l < g->nlinks; l++)
            json_array_append_new(links, json_pack("[s, b]", g->link_peer[l], g->link_to_switch[l]));
        json_array_append_new(gpus, json_pack("{s:s, s:s, s:s, s:I, s:o}", "busid", g->busid, "uuid", g->uuid, "name",
                                              g->name, "mem_total", (json_int_t)g->mem_total, "links", links));
    }
    json_t *o =
        json_pack("{s:b, s:s, s:s, s:o}", "found", n->found, "status", n->status, "driver", n->driver, "gpus", gpus);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        abort();
    return s;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int ddp_nvml_static_parse(const char *text, struct ddp_nvml *out)
{
    memset(out, 0, sizeof *out);
    json_t *o = json_loads(text, 0, NULL), *gpus = NULL;
    int found = 0;
    const char *status = NULL, *driver = NULL;
    if (!o ||
        json_unpack(o, "{s:b, s:s, s:s, s:o}", "found", &found, "status", &status, "driver", &driver, "gpus", &gpus) <
            0 ||
        !json_is_array(gpus)) {
        json_decref(o);
        return -EBADMSG;
    }
    out->found = found;
    copy_str(out->status, sizeof out->status, status);
    copy_str(out->driver, sizeof out->driver, driver);
    size_t n = json_array_size(gpus);
    out->gpus = ddp_xcalloc(n ? n : 1, sizeof *out->gpus);
    for (size_t i = 0; i < n; i++) {
        struct ddp_nvml_gpu *g = &out->gpus[i];
        const char *busid, *uuid, *name;
        json_int_t total;
        json_t *links;
        if (json_unpack(json_array_get(gpus, i), "{s:s, s:s, s:s, s:I, s:o}", "busid", &busid, "uuid", &uuid, "name",
                        &name, "mem_total", &total, "links", &links) < 0 ||
            !json_is_array(links) || json_array_size(links) > DDP_NVML_MAX_LINKS) {
            json_decref(o);
            ddp_nvml_free(out);
            return -EBADMSG;
        }
        copy_str(g->busid, sizeof g->busid, busid);
        copy_str(g->uuid, sizeof g->uuid, uuid);
        copy_str(g->name, sizeof g->name, name);
        g->mem_total = total;
        g->mem_used = -1;
        g->util = -1;
        memset(&g->health, 0xff, sizeof g->health); /* live state: unknown */
        for (size_t l = 0; l < json_array_size(links); l++) {
            const char *peer;
            int sw;
            if (json_unpack(json_array_get(links, l), "[s, b]", &peer, &sw) < 0) {
                json_decref(o);
                ddp_nvml_free(out);
                return -EBADMSG;
            }
            copy_str(g->link_peer[g->nlinks], sizeof g->link_peer[0], peer);
            g->link_to_switch[g->nlinks++] = sw;
        }
        out->ngpus++;
    }
    json_decref(o);
    return 0;
}
