/* Internal: causal flash attention on the tensor cores in TF32 (src/cuda/flash_attn_tf32.cu) for
 * the fp32-storage stage: fp32 q/k/v in and out, the products on TF32 tensor cores with fp32
 * accumulation, fp32 softmax and log-sum-exp statistics; the T×T matrix is never stored.
 *   zb_cuk_flash_tf32_*: operands rounded to TF32 (the tf32 precision);
 *   zb_cuk_flash_3xtf32_*: each operand split into two TF32 parts and three products taken
 *     (3xTF32): products within ~2^-20 relative, sums in fp32 — the fp32 precision's
 *     tensor-core attention (--fp32-attention 3xtf32); flash_attn32.cu runs it on fp32 FMAs.
 *
 * Layout and contract as zb_cuk_flash32_* (flash_attn32.h): qkv[B, T, 3C], out[B, T, C],
 * lse[B, NH, T], dqkv written, not accumulated. Head sizes 16, 32 and 64
 * (zb_cuk_flash_tf32_supported); any T >= 1; another head size or an empty shape is refused as a
 * launch error (an empty grid).
 *
 * Determinism: no atomics; dK, dV per key tile walking the query tiles in order, dQ per query
 * tile walking the key tiles in order: same inputs, same bits, on the same GPU model. */
#ifndef ZBPP_CUDA_FLASH_ATTN_TF32_H
#define ZBPP_CUDA_FLASH_ATTN_TF32_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when head size hs has a kernel. */
int zb_cuk_flash_tf32_supported(int hs);

void zb_cuk_flash_tf32_forward(cudaStream_t s, float *out, float *lse, const float *qkv, int B,
                               int T, int NH, int hs);

/* Bytes of device scratch the backward needs: D = rowsum(dO∘O), B·NH·T floats (as fp32's). */
size_t zb_cuk_flash_tf32_backward_scratch_bytes(int B, int T, int NH, int hs);

void zb_cuk_flash_tf32_backward(cudaStream_t s, float *dqkv, void *scratch, const float *dout,
                                const float *qkv, const float *out, const float *lse, int B,
                                int T, int NH, int hs);

/* The same contract, scratch and head sizes in 3xTF32. */
void zb_cuk_flash_3xtf32_forward(cudaStream_t s, float *out, float *lse, const float *qkv, int B,
                                 int T, int NH, int hs);
void zb_cuk_flash_3xtf32_backward(cudaStream_t s, float *dqkv, void *scratch, const float *dout,
                                  const float *qkv, const float *out, const float *lse, int B,
                                  int T, int NH, int hs);

/* Test hook: the kernels' TF32 rounding (an integer add and mask, flash_attn_tf32.cu) against
 * the hardware's cvt.rna.tf32.f32 over all 2^32 fp32 bit patterns. Adds to *mismatches_dev the
 * finite inputs where the two differ and the non-finite inputs the rounding makes finite.
 * Returns the launch's error. */
cudaError_t zb_cuk_tf32_rounding_check(cudaStream_t s, unsigned long long *mismatches_dev);

#ifdef __cplusplus
}
#endif

#endif
