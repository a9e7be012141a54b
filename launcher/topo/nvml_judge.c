/* nvml_judge: NVML's answers in words and the pure judgements of them (the largest foreign process, a holder's
 * description and age, a recovery action, the health faults, clock-event reasons, the Xid catalog): see nvml.h.
 * What a GPU's state means for the job is fitness.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "topo/nvml.h"

const struct ddp_nvml_proc *ddp_nvml_foreign(const struct ddp_nvml_gpu *g, long long threshold, const int *pids,
                                             size_t npids)
{
    const struct ddp_nvml_proc *best = NULL;
    for (int i = 0; g && i < g->nprocs; i++) {
        const struct ddp_nvml_proc *p = &g->procs[i];
        bool ours = false;
        for (size_t k = 0; k < npids; k++)
            ours |= pids[k] > 0 && (unsigned)pids[k] == p->pid;
        if (!ours && p->mem_used > threshold && (!best || p->mem_used > best->mem_used))
            best = p;
    }
    return best;
}

const char *ddp_nvml_proc_describe(const struct ddp_nvml_proc *p, char *buf, size_t size)
{
    double gib = p->mem_used >= 0 ? (double)p->mem_used / 1073741824.0 : 0;
    if (p->other_ns)
        snprintf(buf, size, "pid %u in the host's pid namespace (%.1f GiB)", p->pid, gib);
    else if (p->comm[0] || p->user[0])
        snprintf(buf, size, "pid %u (%s, %s, %.1f GiB)", p->pid, p->user[0] ? p->user : "?", p->comm[0] ? p->comm : "?",
                 gib);
    else
        snprintf(buf, size, "pid %u (not visible here: another pid namespace, %.1f GiB)", p->pid, gib);
    return buf;
}

int ddp_nvml_proc_age_ms(unsigned pid, long long *age_ms)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    FILE *fp = fopen(path, "re");
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    if (fp)
        fclose(fp);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    unsigned long long start = 0;
    struct timespec up;
    /* after ") ": state is field 3, starttime field 22 */
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) !=
            1 ||
        clock_gettime(CLOCK_BOOTTIME, &up) != 0)
        return -ENOENT;
    long hz = sysconf(_SC_CLK_TCK);
    *age_ms = (long long)up.tv_sec * 1000 + up.tv_nsec / 1000000 - (long long)(start * 1000 / (hz > 0 ? hz : 100));
    return 0;
}

const char *ddp_nvml_recovery_name(int action, char *buf, size_t size)
{
    static const char *const names[] = {
        "none", "GPU reset", "node reboot", "drain peer-to-peer traffic", "drain and reset", "GPU bus reset"};
    if (action >= 0 && (size_t)action < sizeof names / sizeof names[0])
        return names[action];
    snprintf(buf, size, "action %d", action);
    return buf;
}

const char *ddp_nvml_health_fault(const struct ddp_nvml_health *h, char *buf, size_t size)
{
    struct ddp_buf b = {0};
    char name[32];
    ddp_buf_puts(&b, "");
    if (h->recovery > 0)
        ddp_buf_printf(&b, "NVML's recovery action: %s", ddp_nvml_recovery_name(h->recovery, name, sizeof name));
    if (h->remap_failure > 0)
        ddp_buf_printf(&b, "%sa row remapping failed (retire the GPU)", b.len ? "; " : "");
    if (h->remap_pending > 0)
        ddp_buf_printf(&b, "%sa row remapping waits for a GPU reset", b.len ? "; " : "");
    if (h->retired_pending > 0)
        ddp_buf_printf(&b, "%sa page retirement waits for a GPU reset", b.len ? "; " : "");
    if (h->ecc_uncorrected > 0)
        ddp_buf_printf(&b, "%s%lld uncorrectable ECC error%s since the driver loaded", b.len ? "; " : "",
                       h->ecc_uncorrected, h->ecc_uncorrected == 1 ? "" : "s");
    snprintf(buf, size, "%s", b.data);
    ddp_buf_free(&b);
    return buf;
}

const char *ddp_nvml_clocks_describe(long long bits, char *buf, size_t size)
{
    static const struct {
        unsigned long long bit;
        const char *name;
    } names[] = {
        {DDP_NVML_CLOCKS_HW_SLOWDOWN, "HW slowdown"},
        {DDP_NVML_CLOCKS_SW_THERMAL, "SW thermal slowdown"},
        {DDP_NVML_CLOCKS_HW_THERMAL, "HW thermal slowdown"},
        {DDP_NVML_CLOCKS_HW_POWER_BRAKE, "HW power brake"},
    };
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; bits > 0 && i < sizeof names / sizeof names[0]; i++)
        if ((unsigned long long)bits & names[i].bit) {
            int w = snprintf(buf + at, size > at ? size - at : 0, "%s%s", at ? ", " : "", names[i].name);
            at += w > 0 ? (size_t)w : 0;
            if (at >= size)
                break;
        }
    return buf;
}

/* From NVIDIA's Xid catalog ("Analyzing Xid Errors with the Xid Catalog",
 * https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and the Xid table of "Xid Errors" in the
 * same deploy documentation): the description of the Xids a training job meets. gpu_fault: the catalog's
 * resolution is a GPU reset, a node reboot or support (the hardware failed), not restarting the application. */
static const struct {
    unsigned xid;
    bool gpu_fault;
    const char *meaning;
} xids[] = {
    {13, false, "Graphics Engine Exception (usually the application's fault: restart it)"},
    {31, false, "GPU memory page fault (usually an illegal address in the application: restart it)"},
    {43, false, "GPU stopped processing (the application's fault: restart it)"},
    {45, false, "Preemptive cleanup, due to previous errors"},
    {48, true, "Double Bit ECC Error (uncorrectable GPU memory error: reset the GPU)"},
    {61, true, "Internal micro-controller breakpoint/warning"},
    {62, true, "Internal micro-controller halt"},
    {63, true, "ECC page retirement or row remapping recording event (reset the GPU to apply it)"},
    {64, true, "ECC page retirement or row remapper recording failure (the GPU needs service)"},
    {74, true, "NVLink Error"},
    {79, true, "GPU has fallen off the bus (the GPU is gone until it is reset or the node rebooted)"},
    {92, true, "High single-bit ECC error rate"},
    {94, true, "Contained ECC error (the affected application must restart; reset the GPU when possible)"},
    {95, true, "Uncontained ECC error (every application on the GPU is affected: reset the GPU)"},
    {119, true, "GSP RPC Timeout"},
    {120, true, "GSP Error"},
};

const char *ddp_nvml_xid_meaning(unsigned long long xid, bool *gpu_fault)
{
    for (size_t i = 0; i < sizeof xids / sizeof xids[0]; i++)
        if (xids[i].xid == xid) {
            if (gpu_fault)
                *gpu_fault = xids[i].gpu_fault;
            return xids[i].meaning;
        }
    if (gpu_fault)
        *gpu_fault = false;
    return NULL;
}
