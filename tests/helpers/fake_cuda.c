/* fake_cuda: a stand-in libcuda.so.1 for the tests (built by `make integration` as
 * build/helpers/fake_cuda/libcuda.so.1). As the real driver: loading it initialises nothing (torch 2.11's
 * `import torch` maps libcuda.so with no descriptor open, measured on the H200 host); cuInit opens the driver's
 * control device, here the file FAKE_NVIDIACTL names (a test makes it under /dev as /dev/nvidia...), and keeps it
 * open. cuInit answers CUDA_ERROR_NO_DEVICE (100) when FAKE_NVIDIACTL is unset or cannot be opened, as the real
 * one on a host without a GPU, else 0. */
#include <fcntl.h>
#include <stdlib.h>

__attribute__((visibility("default"))) int cuInit(unsigned int flags);

int cuInit(unsigned int flags)
{
    const char *ctl = getenv("FAKE_NVIDIACTL");
    (void)flags;
    if (!ctl || open(ctl, O_RDWR | O_CLOEXEC) < 0)
        return 100;
    return 0;
}
