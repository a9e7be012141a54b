/* check_gpu: see check_gpu.h. */
#include "doctor/check_gpu.h"

#include <stdio.h>
#include <string.h>

#include "topo/fitness.h"

/* The judge's verdict on x from what doctor read of it (fitness.h): the same as a launch's and a restart's. */
static void judge(const struct ddp_check_gpu *x, struct ddp_fitness_verdict *v)
{
    struct ddp_nvml_gpu g; /* holders are gpu-busy's: memory and processes stay unknown here */
    memset(&g, 0, sizeof g);
    snprintf(g.busid, sizeof g.busid, "%s", x->busid);
    g.mem_used = -1;
    g.health = x->health;
    g.lost = x->lost;
    ddp_fitness_judge(&(struct ddp_fitness_in){.busid = x->busid, .gpu = &g}, v);
}

void ddp_check_gpu_health(struct ddp_check_report *r, const struct ddp_check_gpus *g)
{
    enum ddp_check_status st = DDP_CHECK_OK;
    struct ddp_buf bad = {0}, info = {0};
    size_t n = 0;
    const char *todo = NULL;

    if (!g->nvml || !g->picked) {
        ddp_check_add(r, DDP_CHECK_SKIP, "gpu-health", NULL, "no NVML facts for the picked GPUs (%s)",
                      g->nvml_status ? g->nvml_status : "no GPU picked");
        return;
    }
    ddp_buf_puts(&bad, "");
    ddp_buf_puts(&info, "");
    int ecc_on = 0, ecc_known = 0, pers_off = 0, remap_known = 0, mig_known = 0, recovery_known = 0, pcie_known = 0;
    int gen = 0, gen_max = 0, width = 0, width_max = 0; /* the slowest link's */
    for (size_t i = 0; i < g->npicked; i++) {
        const struct ddp_check_gpu *x = &g->all[g->picked[i]];
        const struct ddp_nvml_health *h = &x->health;
        char clocks[160];
        struct ddp_fitness_verdict v;
        if (!x->have_health)
            continue;
        n++;
        ecc_known += h->ecc >= 0;
        ecc_on += h->ecc == 1;
        pers_off += h->persistence == 0;
        mig_known += h->mig >= 0;
        remap_known += h->remap_failure >= 0;
        recovery_known += h->recovery >= 0;
        judge(x, &v);
        if (!ddp_fitness_usable(&v)) { /* a launch and a restart leave it out */
            st = DDP_CHECK_FAIL;
            todo = h->recovery == DDP_NVML_RECOVERY_NODE_REBOOT
                       ? "reboot the node (NVML's recovery action); until then leave the GPU out ([gpus] exclude)"
                       : "have the GPU reset or serviced; until then a launch and a restart leave it out";
            ddp_buf_printf(&bad, "%s%s: %s", bad.len ? "; " : "", x->busid, v.why);
        }
        if (h->pcie_gen > 0 && h->pcie_gen_max > 0 && h->pcie_width > 0 && h->pcie_width_max > 0) {
            if (!pcie_known++ || h->pcie_width * h->pcie_gen < width * gen)
                gen = h->pcie_gen, gen_max = h->pcie_gen_max, width = h->pcie_width, width_max = h->pcie_width_max;
            if (h->pcie_width < h->pcie_width_max) { /* lanes do not train down when idle: a degraded link */
                if (st < DDP_CHECK_WARN)
                    st = DDP_CHECK_WARN, todo = "reseat the GPU or check its riser and slot (lspci -vv: LnkSta)";
                ddp_buf_printf(&bad, "%s%s: PCIe link x%d of x%d (gen %d of %d): every host transfer is slower",
                               bad.len ? "; " : "", x->busid, h->pcie_width, h->pcie_width_max, h->pcie_gen,
                               h->pcie_gen_max);
            } else if (h->pcie_gen < h->pcie_gen_max) {
                ddp_buf_printf(&info, "; %s: PCIe gen %d of %d now (an idle GPU may train down; compare under load)",
                               x->busid, h->pcie_gen, h->pcie_gen_max);
            }
        }
        if (h->ecc >= 0 && h->ecc_pending >= 0 && h->ecc != h->ecc_pending) {
            if (st < DDP_CHECK_WARN)
                st = DDP_CHECK_WARN, todo = "reset the GPU (nvidia-smi -r) to apply the ECC mode";
            ddp_buf_printf(&bad, "%s%s: ECC mode %s after the next reset", bad.len ? "; " : "", x->busid,
                           h->ecc_pending ? "on" : "off");
        }
        if (h->mig == 1) {
            if (st < DDP_CHECK_WARN)
                st = DDP_CHECK_WARN, todo = "MIG splits the GPU into instances that ddplaunch does not pick: "
                                            "disable it (nvidia-smi -mig 0) or give the instances' UUIDs in "
                                            "CUDA_VISIBLE_DEVICES";
            ddp_buf_printf(&bad, "%s%s: MIG on", bad.len ? "; " : "", x->busid);
        }
        if (h->clocks_event > 0 && (h->clocks_event & (long long)(DDP_NVML_CLOCKS_HW | DDP_NVML_CLOCKS_SW_THERMAL))) {
            if (st < DDP_CHECK_WARN)
                st = DDP_CHECK_WARN, todo = "check cooling and power (nvidia-smi -q -d PERFORMANCE)";
            ddp_buf_printf(&bad, "%s%s: clocks slowed down now (%s)", bad.len ? "; " : "", x->busid,
                           ddp_nvml_clocks_describe(h->clocks_event, clocks, sizeof clocks));
        }
        if (h->ecc_corrected > 0)
            ddp_buf_printf(&info, "; %s: %lld corrected ECC errors", x->busid, h->ecc_corrected);
    }
    if (n == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "gpu-health", NULL, "NVML gave no health facts for the picked GPUs");
    } else if (bad.len) {
        ddp_check_add(r, st, "gpu-health", todo, "%s%s", bad.data, info.data);
    } else {
        char ecc[64] = "ECC not reported";
        if (ecc_known)
            snprintf(ecc, sizeof ecc, "ECC on %d of %d, no uncorrectable errors", ecc_on, ecc_known);
        char pcie[96] = "PCIe link not reported";
        if (pcie_known)
            snprintf(pcie, sizeof pcie, "PCIe link gen %d of %d, x%d of x%d%s", gen, gen_max, width, width_max,
                     pcie_known > 1 ? " (the slowest)" : "");
        ddp_check_add(r, DDP_CHECK_OK, "gpu-health", NULL, "%zu GPU%s: %s, %s, %s, clocks not slowed, %s, %s%s%s", n,
                      n == 1 ? "" : "s", ecc,
                      remap_known ? "no row remapping failed or pending" : "row remapping not reported",
                      mig_known ? "MIG off" : "MIG not reported",
                      recovery_known ? "recovery action none" : "recovery action not reported", pcie,
                      pers_off ? ", persistence mode off (each job's first CUDA call is slower; nvidia-smi -pm 1)" : "",
                      info.data);
    }
    ddp_buf_free(&bad);
    ddp_buf_free(&info);
}
