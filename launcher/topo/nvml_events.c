/* nvml_events: NVML's event set for the job's GPUs (Xid critical errors, double-bit ECC errors, clock events, and
 * the hardware clock-event reasons polled between waits): see nvml.h. Waiting blocks: gpuwatch.c calls it from a
 * thread of its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "topo/nvml.h"
#include "topo/nvml_internal.h"

struct ddp_nvml_events {
    struct nvml_fns f;
    nvml_event_set set;
    size_t n;
    nvml_device *dev;       /* [n], NULL where the GPU was not found */
    unsigned long long *hw; /* [n] hardware clock-event reasons last seen */
};

static int events_open(const char *const *busids, size_t n, struct ddp_nvml_events **out, char *why, size_t whysz)
{
    struct ddp_nvml_events *e = ddp_xcalloc(1, sizeof *e);
    unsigned count = 0;
    int registered = 0, rc = -ENOTSUP;

    *out = NULL;
    snprintf(why, whysz, "?");
    const char *lwhy;
    const struct nvml_fns *f = ddp_nvml_lib_get(&lwhy);
    if (!f) {
        snprintf(why, whysz, "NVML %s", lwhy);
        free(e);
        return -ENOENT;
    }
    e->f = *f;
    if (!e->f.set_create || !e->f.set_free || !e->f.register_events || !e->f.set_wait) {
        snprintf(why, whysz, "this NVML has no event set (nvmlEventSetWait_v2 missing: driver too old)");
        free(e);
        return -ENOTSUP;
    }
    char status[256];
    if (ddp_nvml_init_lib(&e->f, false, status, sizeof status) != 0) {
        snprintf(why, whysz, "nvmlInit failed");
        free(e);
        return -ENOENT;
    }
    e->n = n;
    e->dev = ddp_xcalloc(n ? n : 1, sizeof *e->dev);
    e->hw = ddp_xcalloc(n ? n : 1, sizeof *e->hw);
    if (e->f.set_create(&e->set) != 0) {
        snprintf(why, whysz, "nvmlEventSetCreate failed");
        goto fail;
    }
    if (ddp_nvml_device_count(&e->f, &count, status, sizeof status) != 0) {
        snprintf(why, whysz, "%s", status);
        goto fail;
    }
    for (unsigned i = 0; i < count; i++) {
        nvml_device d;
        struct nvml_pci pci;
        char bus[32];
        if (e->f.handle(i, &d) != 0 || e->f.pci(d, &pci) != 0)
            continue;
        ddp_nvml_busid_norm(pci.bus_id, bus, sizeof bus);
        for (size_t k = 0; k < n; k++) {
            unsigned long long supported = DDP_NVML_EV_XID | DDP_NVML_EV_ECC_DBE | DDP_NVML_EV_CLOCK;
            if (strcasecmp(busids[k], bus) != 0)
                continue;
            e->dev[k] = d;
            if (e->f.supported_events && e->f.supported_events(d, &supported) != 0)
                supported = 0;
            supported &= DDP_NVML_EV_XID | DDP_NVML_EV_ECC_DBE | DDP_NVML_EV_CLOCK;
            if (supported && e->f.register_events(d, supported, e->set) == 0)
                registered++;
        }
    }
    if (!registered) {
        snprintf(why, whysz, "none of the job's GPUs takes NVML events");
        goto fail;
    }
    *out = e;
    return 0;
fail:
    if (e->set)
        e->f.set_free(e->set);
    e->f.shutdown();
    free(e->dev);
    free(e->hw);
    free(e);
    return rc;
}

/* Hardware clock-event reasons newly set on a GPU since the last look: 1 with *ev. */
static int poll_clocks(struct ddp_nvml_events *e, struct ddp_nvml_event *ev)
{
    for (size_t k = 0; e->f.clocks_event && k < e->n; k++) {
        unsigned long long bits = 0;
        if (!e->dev[k] || e->f.clocks_event(e->dev[k], &bits) != 0)
            continue;
        bits &= DDP_NVML_CLOCKS_HW | DDP_NVML_CLOCKS_SW_THERMAL;
        unsigned long long fresh = bits & ~e->hw[k];
        e->hw[k] = bits;
        if (fresh) {
            *ev = (struct ddp_nvml_event){.gpu = (int)k, .type = DDP_NVML_EV_CLOCK, .data = bits};
            return 1;
        }
    }
    return 0;
}

/* The event thread loads NVML and calls nvmlInit here, at the job's start: counted as inside NVML, so that a job
 * that ends meanwhile does not wait for the loader (ddp_nvml_stuck). */
int ddp_nvml_events_open(const char *const *busids, size_t n, struct ddp_nvml_events **out, char *why, size_t whysz)
{
    ddp_nvml_opening(1);
    int rc = events_open(busids, n, out, why, whysz);
    ddp_nvml_opening(-1);
    return rc;
}

int ddp_nvml_events_wait(struct ddp_nvml_events *e, int timeout_ms, struct ddp_nvml_event *ev)
{
    struct nvml_event_data d;
    memset(&d, 0, sizeof d);
    int r = e->f.set_wait(e->set, &d, (unsigned)(timeout_ms > 0 ? timeout_ms : 0));
    if (r == 10) /* NVML_ERROR_TIMEOUT: nothing happened; look at the clock-event reasons */
        return poll_clocks(e, ev);
    if (r != 0)
        return -EIO;
    for (size_t k = 0; k < e->n; k++)
        if (e->dev[k] && e->dev[k] == d.device) {
            *ev = (struct ddp_nvml_event){.gpu = (int)k, .type = d.type, .data = d.data};
            if (d.type == DDP_NVML_EV_CLOCK) { /* a clock change: news only with a hardware reason */
                ev->data = 0;
                return poll_clocks(e, ev);
            }
            return 1;
        }
    return 0;
}

void ddp_nvml_events_close(struct ddp_nvml_events *e)
{
    if (!e)
        return;
    e->f.set_free(e->set);
    e->f.shutdown();
    free(e->dev);
    free(e->hw);
    free(e);
}
