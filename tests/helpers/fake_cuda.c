/* fake_cuda: a stand-in libcuda.so.1 for the tests (built by `make integration` as
 * build/helpers/fake_cuda/libcuda.so.1). Loading it is what a test needs: a process that maps a library of that
 * name looks as one that loaded CUDA's driver (test 92: a standby's preload that does is caught). cuInit answers
 * CUDA_ERROR_NO_DEVICE (100), as the real one on a host without a GPU. */
__attribute__((visibility("default"))) int cuInit(unsigned int flags);

int cuInit(unsigned int flags)
{
    (void)flags;
    return 100;
}
