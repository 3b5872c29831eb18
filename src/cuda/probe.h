/* Internal: a probe kernel for the GPU tests of SM partitions (src/cuda/probe.cu): which SM ran
 * each block. Callable from C. */
#ifndef ZBPP_CUDA_PROBE_H
#define ZBPP_CUDA_PROBE_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queue `blocks` blocks of 32 threads on `stream`; block b writes the id of the SM it ran on to
 * smid_dev[b] after spinning about `spin_cycles` clock cycles (so the blocks spread over every SM
 * the stream may use instead of finishing on the first few). Returns cudaGetLastError(). */
cudaError_t zb_cu_smid_probe(cudaStream_t stream, int *smid_dev, int blocks, long long spin_cycles);

#ifdef __cplusplus
}
#endif

#endif
