/* Internal: causal memory-efficient attention in fp32 on the CUDA cores (src/cuda/flash_attn32.cu)
 * for the fp32-storage stage (precisions fp32 and tf32): fp32 q/k/v in and out, fp32 FMA only
 * (no TF32), fp32 log-sum-exp statistics; the T×T matrix is never stored.
 *
 * Layout: the stage's qkv[B, T, 3C] (fp32) holds per row the C query, C key and C value
 * channels; head h's slice of each is channels h·hs .. h·hs+hs (hs = C / NH).
 * Head sizes: 16, 32, 64 and 128 (zb_cuk_flash32_supported); any T >= 1. Another head size or
 * an empty shape is refused as a launch error (an empty grid), which the caller's launch check
 * reports.
 *
 * Determinism: no atomics. The backward computes dK and dV per key tile by walking the query
 * tiles in order, and dQ per query tile by walking the key tiles in order (two kernels), each
 * entry summed by one thread in a fixed order: same inputs, same bits, on the same GPU model. */
#ifndef ZBPP_CUDA_FLASH_ATTN32_H
#define ZBPP_CUDA_FLASH_ATTN32_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when head size hs has a kernel. */
int zb_cuk_flash32_supported(int hs);

/* out[B, T, C] = softmax(q·kᵀ/√hs, causal)·v per head; lse[B, NH, T] = the rows' log-sum-exp of
 * the scaled scores (the backward's statistics). */
void zb_cuk_flash32_forward(cudaStream_t s, float *out, float *lse, const float *qkv, int B, int T,
                            int NH, int hs);

/* Bytes of device scratch zb_cuk_flash32_backward needs: D = rowsum(dO∘O), B·NH·T floats. */
size_t zb_cuk_flash32_backward_scratch_bytes(int B, int T, int NH, int hs);

/* dqkv[B, T, 3C] = the gradients of q, k, v given dout[B, T, C], written (not accumulated), from
 * the forward's qkv, out and lse. */
void zb_cuk_flash32_backward(cudaStream_t s, float *dqkv, void *scratch, const float *dout,
                             const float *qkv, const float *out, const float *lse, int B, int T,
                             int NH, int hs);

#ifdef __cplusplus
}
#endif

#endif
