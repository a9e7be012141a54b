/* nvml: dlopen'd NVML; the few entry points we use are declared here with their documented ABI. */
#include "topo/nvml.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

typedef int nvml_return;
typedef void *nvml_device;
/* nvmlPciInfo_t (v3 layout) */
struct nvml_pci {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_utilization {
    unsigned gpu, memory;
};
/* nvmlProcessInfo_t as the _v2/_v3 calls fill it; usedGpuMemory is ~0ULL when unavailable */
struct nvml_process {
    unsigned pid;
    unsigned long long used;
    unsigned gpu_instance, compute_instance;
};

struct nvml_fns {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*driver_version)(char *, unsigned);
    nvml_return (*count)(unsigned *);
    nvml_return (*handle)(unsigned, nvml_device *);
    nvml_return (*pci)(nvml_device, struct nvml_pci *);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*memory)(nvml_device, struct nvml_memory *);
    nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
    nvml_return (*processes)(nvml_device, unsigned *, struct nvml_process *);
    nvml_return (*link_state)(nvml_device, unsigned, int *);
    nvml_return (*link_remote_pci)(nvml_device, unsigned, struct nvml_pci *);
    nvml_return (*link_remote_type)(nvml_device, unsigned, int *); /* may be missing (old drivers) */
};

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

/* Utilisation and the compute processes of device d. */
static void read_usage(const struct nvml_fns *f, nvml_device d, struct ddp_nvml_gpu *g)
{
    struct nvml_utilization u;
    struct nvml_process pr[DDP_NVML_MAX_PROCS];
    unsigned n = DDP_NVML_MAX_PROCS;

    g->util = f->utilization && f->utilization(d, &u) == 0 ? (int)u.gpu : -1;
    if (!f->processes || f->processes(d, &n, pr) != 0)
        return;
    for (unsigned k = 0; k < n && k < DDP_NVML_MAX_PROCS; k++)
        g->procs[g->nprocs++] = (struct ddp_nvml_proc){
            .pid = pr[k].pid,
            .mem_used = pr[k].used != ~0ULL ? (long long)pr[k].used : -1,
        };
}

void ddp_nvml_read(struct ddp_nvml *out)
{
    struct nvml_fns f;
    void *lib;
    unsigned n = 0;
    nvml_return r;

    memset(out, 0, sizeof *out);
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(out->status, sizeof out->status, "NVML: not found (%s)", dlerror());
        return;
    }
    memset(&f, 0, sizeof f);
    f.init = (nvml_return(*)(void))sym(lib, "nvmlInit_v2", "nvmlInit");
    f.shutdown = (nvml_return(*)(void))sym(lib, "nvmlShutdown", NULL);
    f.error_string = (const char *(*)(nvml_return))sym(lib, "nvmlErrorString", NULL);
    f.driver_version = (nvml_return(*)(char *, unsigned))sym(lib, "nvmlSystemGetDriverVersion", NULL);
    f.count = (nvml_return(*)(unsigned *))sym(lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    f.handle = (nvml_return(*)(unsigned, nvml_device *))sym(lib, "nvmlDeviceGetHandleByIndex_v2",
                                                            "nvmlDeviceGetHandleByIndex");
    f.pci = (nvml_return(*)(nvml_device, struct nvml_pci *))sym(lib, "nvmlDeviceGetPciInfo_v3", NULL);
    f.uuid = (nvml_return(*)(nvml_device, char *, unsigned))sym(lib, "nvmlDeviceGetUUID", NULL);
    f.name = (nvml_return(*)(nvml_device, char *, unsigned))sym(lib, "nvmlDeviceGetName", NULL);
    f.memory = (nvml_return(*)(nvml_device, struct nvml_memory *))sym(lib, "nvmlDeviceGetMemoryInfo", NULL);
    f.utilization =
        (nvml_return(*)(nvml_device, struct nvml_utilization *))sym(lib, "nvmlDeviceGetUtilizationRates", NULL);
    f.processes = (nvml_return(*)(nvml_device, unsigned *, struct nvml_process *))sym(
        lib, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
    f.link_state = (nvml_return(*)(nvml_device, unsigned, int *))sym(lib, "nvmlDeviceGetNvLinkState", NULL);
    f.link_remote_pci =
        (nvml_return(*)(nvml_device, unsigned, struct nvml_pci *))sym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", NULL);
    f.link_remote_type =
        (nvml_return(*)(nvml_device, unsigned, int *))sym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", NULL);
    if (!f.init || !f.shutdown || !f.count || !f.handle || !f.pci) {
        snprintf(out->status, sizeof out->status,
                 "NVML: unusable (libnvidia-ml.so.1 lacks nvmlInit_v2 or"
                 " nvmlDeviceGetPciInfo_v3: driver too old)");
        dlclose(lib);
        return;
    }
    if ((r = f.init()) != 0) {
        snprintf(out->status, sizeof out->status, "NVML: nvmlInit failed: %s (error %d)",
                 f.error_string ? f.error_string(r) : "?", r);
        dlclose(lib);
        return;
    }
    if (f.driver_version)
        f.driver_version(out->driver, sizeof out->driver);
    if (f.count(&n) != 0)
        n = 0;
    out->gpus = ddp_xcalloc(n ? n : 1, sizeof *out->gpus);
    for (unsigned i = 0; i < n; i++) {
        struct ddp_nvml_gpu *g = &out->gpus[out->ngpus];
        struct nvml_pci pci;
        struct nvml_memory mem;
        nvml_device d;

        if (f.handle(i, &d) != 0 || f.pci(d, &pci) != 0)
            continue;
        ddp_nvml_busid_norm(pci.bus_id, g->busid, sizeof g->busid);
        if (f.uuid)
            f.uuid(d, g->uuid, sizeof g->uuid);
        if (f.name)
            f.name(d, g->name, sizeof g->name);
        g->mem_used = g->mem_total = -1;
        if (f.memory && f.memory(d, &mem) == 0) {
            g->mem_used = (long long)mem.used;
            g->mem_total = (long long)mem.total;
        }
        read_usage(&f, d, g);
        for (unsigned l = 0; f.link_state && f.link_remote_pci && l < DDP_NVML_MAX_LINKS; l++) {
            int active = 0, type = -1;
            struct nvml_pci rp;

            if (f.link_state(d, l, &active) != 0 || !active || f.link_remote_pci(d, l, &rp) != 0)
                continue;
            ddp_nvml_busid_norm(rp.bus_id, g->link_peer[g->nlinks], sizeof g->link_peer[0]);
            /* NVML_NVLINK_DEVICE_TYPE_SWITCH = 2 */
            g->link_to_switch[g->nlinks] = f.link_remote_type && f.link_remote_type(d, l, &type) == 0 && type == 2;
            g->nlinks++;
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
    f.shutdown();
    dlclose(lib);
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
