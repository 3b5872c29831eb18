/* Internal: launchers of the bf16-storage kernels (src/cuda/kernels_bf16.cu), callable from C.
 * The contract the bf16 stage path is written against; the fake device of the host tests
 * implements the same functions with the CPU kernels and bf16 rounding.
 *
 * Storage: zb_bf16_t is the raw 16 bits of an IEEE bfloat16 (C has no bf16 type). Activations
 * and the weight copies the GEMMs read are bf16; LayerNorm statistics, losses, gradients of the
 * parameters and the optimizer state stay fp32. Every kernel does its arithmetic in fp32 and
 * rounds to bf16 (round to nearest even) once, when it stores. Rows of C channels are read and
 * written with 128-bit accesses (8 bf16): C must be a multiple of 8 and every row pointer
 * 16-byte aligned (zb_cuda_stage_check refuses other shapes in bf16).
 *
 * Determinism as in kernels.h: no atomics; fixed reduction trees and fixed row chunks. */
#ifndef ZBPP_CUDA_KERNELS_BF16_H
#define ZBPP_CUDA_KERNELS_BF16_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda/bf16_type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = bf16(src[i]) / dst[i] = float(src[i]). */
void zb_cuk16_from_f32(cudaStream_t s, zb_bf16_t *dst, const float *src, size_t n);
void zb_cuk16_to_f32(cudaStream_t s, float *dst, const zb_bf16_t *src, size_t n);

/* out[B,T,C] = bf16(wte[tokens[b,t]] + wpe[t]) (fp32 master tables). */
void zb_cuk16_encoder_forward(cudaStream_t s, zb_bf16_t *out, const int *tokens, const float *wte,
                              const float *wpe, int B, int T, int C);

/* The residual add fused with the next LayerNorm, per row of C:
 *   x = a + b (b NULL: x = a); res_out = bf16(x) unless res_out is NULL;
 *   ln_out = bf16((x − mean)·rstd·weight + bias); mean/rstd fp32, computed from the rounded
 *   bf16(x) that res_out stores, so the backward (which reads res_out) sees the statistics of
 *   exactly its input.
 * weight/bias: fp32 master parameters. N rows. res_out may be a (the residual stream updated
 * in place). */
void zb_cuk16_residual_layernorm_forward(cudaStream_t s, zb_bf16_t *res_out, zb_bf16_t *ln_out,
                                         float *mean, float *rstd, const zb_bf16_t *a,
                                         const zb_bf16_t *b, const float *weight,
                                         const float *bias, int N, int C);

/* dinp = bf16(dres + LayerNorm-backward(dout; inp, mean, rstd, weight)) — written, not
 * accumulated; dres NULL: no residual term. The residual branch's gradient joins here, so the
 * residual backward needs no kernel of its own. dinp may be dres or dout (in place). */
void zb_cuk16_layernorm_backward_input(cudaStream_t s, zb_bf16_t *dinp, const zb_bf16_t *dres,
                                       const zb_bf16_t *dout, const zb_bf16_t *inp,
                                       const float *mean, const float *rstd, const float *weight,
                                       int N, int C);

/* part_w/part_b[chunks, C] (fp32) = per-chunk sums of dout·xhat and dout over
 * ZB_CU_COLSUM_ROWS rows (kernels.h); zb_cuk_colsum_finish adds them into the fp32 gradients. */
void zb_cuk16_layernorm_weight_partials(cudaStream_t s, float *part_w, float *part_b,
                                        const zb_bf16_t *dout, const zb_bf16_t *inp,
                                        const float *mean, const float *rstd, int N, int C);
/* part[chunks, OC] (fp32) = per-chunk column sums of a[N, OC] (a bias gradient's partials). */
void zb_cuk16_colsum_partials(cudaStream_t s, float *part, const zb_bf16_t *a, int N, int OC);

/* GELU (tanh form, the CPU kernel's formula) where the GEMM epilogue is not used:
 * out = bf16(gelu(inp)); dinp = bf16(dout·gelu'(inp)) (written). */
void zb_cuk16_gelu_forward(cudaStream_t s, zb_bf16_t *out, const zb_bf16_t *inp, size_t n);
void zb_cuk16_gelu_backward_input(cudaStream_t s, zb_bf16_t *dinp, const zb_bf16_t *inp,
                                  const zb_bf16_t *dout, size_t n);
/* out = bf16(a + b) (the last block's output, when no LayerNorm follows it on this stage). */
void zb_cuk16_residual_forward(cudaStream_t s, zb_bf16_t *out, const zb_bf16_t *a,
                               const zb_bf16_t *b, size_t n);

/* The classifier in one kernel, one block per row of logits[N, Vp] (bf16, in place):
 * losses[n] = −log softmax(logits[n, 0..V))[targets[n]] (fp32 math, online max/sum), and the
 * row is overwritten with its gradient bf16((p − onehot(target))·dloss), padded columns 0.
 * No probabilities buffer. */
void zb_cuk16_crossentropy_fused(cudaStream_t s, float *losses, zb_bf16_t *logits,
                                 const int *targets, float dloss, int N, int V, int Vp);

/* The epilogue of zb_cu_gemm_ex (gemm.h) as a kernel, for products cuBLASLt has no fused
 * epilogue for: on row-major C[M,N] (ldc elements between rows; bf16 when c_bf16, else fp32),
 * epilogue 1 (bias): C += bias[N]; 2 (GELU, aux out): aux = C + bias, C = gelu(aux);
 * 3 (GELU gradient): C = C·gelu'(aux). aux has C's type and ldaux elements between rows;
 * every result is rounded to C's type once. The values are zb_cu_epilogue_t's. */
void zb_cuk16_epilogue_apply(cudaStream_t s, int epilogue, void *C, int ldc, int c_bf16,
                             void *aux, int ldaux, const void *bias, int bias_bf16, int M,
                             int N);

#ifdef __cplusplus
}
#endif

#endif
