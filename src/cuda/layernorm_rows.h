/* Internal: the fp32 LayerNorm forward and input gradient with one warp a row, the row in
 * registers (src/cuda/layernorm_rows.cu), for zb_cuk_layernorm_forward / backward_input
 * (kernels.h), which fall back to their one-block-a-row kernels where these decline. Same
 * formulas as those (forward statistics in double); only the order of the sums differs. */
#ifndef ZBPP_CUDA_LAYERNORM_ROWS_H
#define ZBPP_CUDA_LAYERNORM_ROWS_H

#include <stdbool.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launched and true for rows of C <= 1024 channels, C a multiple of 4, every pointer 16-byte
 * aligned and N > 0; false (nothing launched) otherwise. */
bool zb_cuk_layernorm_rows_forward(cudaStream_t s, float *out, float *mean, float *rstd,
                                   const float *inp, const float *weight, const float *bias,
                                   int N, int C);
/* dinp += the input gradient (dinp read and written), under the same conditions. */
bool zb_cuk_layernorm_rows_backward_input(cudaStream_t s, float *dinp, const float *dout,
                                          const float *inp, const float *mean, const float *rstd,
                                          const float *weight, int N, int C);

#ifdef __cplusplus
}
#endif

#endif
