/* check_host: doctor's checks of this host's GPU software (check_host.h): driver and CUDA, device nodes,
 * libnccl. Pure functions of the facts passed in. */
#include "doctor/check_host.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "doctor/check.h"

/* ---- driver and devices ---- */

void ddp_check_driver(struct ddp_check_report *r, const struct ddp_check_driver *d)
{
    char cuda[64];

    if (d->xml || d->n_nvidia == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "driver", NULL, "%s",
                      d->xml ? "XML topology (another machine): this machine's driver is not checked"
                             : "no NVIDIA GPU in the topology");
        return;
    }
    if (d->cuda_version >= 0)
        snprintf(cuda, sizeof cuda, "CUDA driver API %d.%d", d->cuda_version / 1000, d->cuda_version % 1000 / 10);
    if (!d->nvml_found && d->cuda_version < 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "driver",
                      "install the NVIDIA driver; in a container, run it with the NVIDIA container toolkit "
                      "(--gpus all)",
                      "%zu NVIDIA GPU%s, but no driver library: %s; libcuda.so.1: %s", d->n_nvidia,
                      d->n_nvidia == 1 ? "" : "s", d->nvml_status ? d->nvml_status : "NVML not found",
                      d->cuda_error ? d->cuda_error : "not found");
    } else if (d->cuda_version < 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "driver",
                      "the driver's CUDA library is missing (container without the NVIDIA toolkit's libraries?)",
                      "driver %s, but libcuda.so.1 does not load: %s", d->driver ? d->driver : "?",
                      d->cuda_error ? d->cuda_error : "?");
    } else if (!d->nvml_found) {
        ddp_check_add(r, DDP_CHECK_WARN, "driver", "install libnvidia-ml.so.1 (part of the driver)",
                      "%s, but NVML does not load (%s): no memory-in-use or NVLink facts", cuda,
                      d->nvml_status ? d->nvml_status : "?");
    } else {
        ddp_check_add(r, DDP_CHECK_OK, "driver", NULL, "NVIDIA driver %s, %s", d->driver ? d->driver : "?", cuda);
    }
}

void ddp_check_devices(struct ddp_check_report *r, const struct ddp_check_driver *d)
{
    bool ctl = false, uvm = false;
    size_t ngpu = 0;
    char *all = ddp_check_join(d->devs, d->ndevs);

    if (d->xml || d->n_nvidia == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "devices", NULL, "%s",
                      d->xml ? "XML topology (another machine): /dev/nvidia* not checked"
                             : "no NVIDIA GPU in the topology");
        free(all);
        return;
    }
    for (size_t i = 0; i < d->ndevs; i++) {
        const char *n = d->devs[i];

        ctl |= strcmp(n, "nvidiactl") == 0;
        uvm |= strcmp(n, "nvidia-uvm") == 0;
        if (strncmp(n, "nvidia", 6) == 0 && n[6] >= '0' && n[6] <= '9')
            ngpu++;
    }
    if (!ctl || ngpu == 0)
        ddp_check_add(r, DDP_CHECK_FAIL, "devices",
                      "load the driver (nvidia-smi creates them); in a container pass the devices (--gpus all)",
                      "%s missing (found: %s)", !ctl ? "/dev/nvidiactl" : "/dev/nvidia0..N",
                      d->ndevs ? all : "no /dev/nvidia*");
    else if (!uvm)
        ddp_check_add(r, DDP_CHECK_WARN, "devices",
                      "CUDA creates it on first use through nvidia-modprobe; in a container pass /dev/nvidia-uvm",
                      "/dev/nvidia-uvm missing (found: %s)", all);
    else
        ddp_check_add(r, DDP_CHECK_OK, "devices", NULL,
                      "/dev/nvidiactl, /dev/nvidia-uvm and %zu of %zu "
                      "/dev/nvidiaN present",
                      ngpu, d->n_nvidia);
    free(all);
}

/* ---- libnccl ---- */

size_t ddp_check_ldcache_find(const char *data, size_t len, const char *name_prefix, struct ddp_strv *out)
{
    size_t added = 0, plen = strlen(name_prefix);

    for (size_t i = 0; i < len; i++) {
        if (data[i] != '/' || (i > 0 && data[i - 1] != '\0'))
            continue;
        const char *s = data + i, *end = memchr(s, '\0', len - i);

        if (!end)
            break;
        const char *base = strrchr(s, '/') + 1;
        bool dup = false;

        if (strncmp(base, name_prefix, plen) == 0) {
            for (size_t k = 0; k < out->n && !dup; k++)
                dup = strcmp(out->v[k], s) == 0;
            if (!dup) {
                ddp_strv_push(out, s);
                added++;
            }
        }
        i = (size_t)(end - data);
    }
    return added;
}

void ddp_check_nccl_lib(struct ddp_check_report *r, const struct ddp_check_nccl_lib *l)
{
    char torch[PATH_MAX + 64] = "";

    if (l->torch_dir)
        snprintf(torch, sizeof torch, "torch at %s is a %s build", l->torch_dir,
                 l->torch_cuda == 1   ? "CUDA"
                 : l->torch_cuda == 0 ? "CPU-only"
                                      : "?");
    if (l->xml || l->n_nvidia == 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "nccl-lib", NULL, "%s%s%s",
                      l->xml ? "XML topology (another machine): libnccl not checked"
                             : "no NVIDIA GPU: NCCL not needed here",
                      torch[0] ? "; " : "", torch);
        return;
    }
    if (l->torch_dir && l->torch_cuda == 0) {
        ddp_check_add(r, DDP_CHECK_WARN, "nccl-lib", "install a CUDA build of torch for these GPUs",
                      "%s (no libtorch_cuda.so): it cannot use the GPUs or NCCL", torch);
        return;
    }
    if (l->nbundled)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-lib", NULL, "%s (torch's pip dependency)%s%s", l->bundled[0],
                      torch[0] ? "; " : "", torch);
    else if (l->nsystem)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-lib", NULL, "%s%s%s", l->system[0], torch[0] ? "; " : "", torch);
    else
        ddp_check_add(r, DDP_CHECK_WARN, "nccl-lib",
                      "check with: python3 -c 'import torch; print(torch.cuda.nccl.version())'",
                      "libnccl.so not found in ld.so.cache, LD_LIBRARY_PATH or site-packages/nvidia/nccl/lib "
                      "(torch may carry it linked in)%s%s",
                      torch[0] ? "; " : "", torch);
}

/* ---- the workers' Python ---- */

void ddp_check_python(struct ddp_check_report *r, const struct ddp_check_python *p)
{
    if (!p->runs_python) {
        ddp_check_add(r, DDP_CHECK_SKIP, "python", NULL, "no Python script or module to run");
        return;
    }
    if (p->torch) {
        ddp_check_add(r, DDP_CHECK_OK, "python", NULL, "%s (%s) imports torch %s", p->python, p->why, p->torch);
        return;
    }
    char *todo = p->other ? ddp_xasprintf("run with PYTHON_EXEC=%s, which imports torch %s", p->other,
                                          p->other_torch ? p->other_torch : "")
                          : ddp_xstrdup("install torch for that python, or set PYTHON_EXEC to a python that has it "
                                        "(no python on PATH imports torch)");
    ddp_check_add(r, DDP_CHECK_FAIL, "python", todo, "%s (%s) cannot import torch: %s; every worker would fail",
                  p->python, p->why, p->error ? p->error : "it failed");
    free(todo);
}
