// The SM-id probe of src/cuda/probe.h (GPU tests of SM partitions).
#include "cuda/probe.h"

static __global__ void smid_kernel(int *smid, long long spin)
{
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    if (threadIdx.x == 0)
        smid[blockIdx.x] = (int)id;
}

extern "C" cudaError_t zb_cu_smid_probe(cudaStream_t stream, int *smid_dev, int blocks,
                                        long long spin_cycles)
{
    smid_kernel<<<blocks, 32, 0, stream>>>(smid_dev, spin_cycles);
    return cudaGetLastError();
}
