/* Internal: causal flash attention on the tensor cores (src/cuda/flash_attn.cu), bf16 in and
 * out, fp32 softmax statistics; the T×T matrix is never stored.
 *
 * Layout: the stage's qkv[B, T, 3C] (bf16) holds per row the C query, C key and C value
 * channels; head h's slice of each is channels h·hs .. h·hs+hs (hs = C / NH).
 * Head sizes: 16, 32, 64 and 128 (zb_cuk_flash_supported); any T >= 1 (the last tile masked).
 *
 * Determinism: no atomics. The backward computes dK and dV per key tile by walking the query
 * tiles in order, and dQ per query tile by walking the key tiles in order (two kernels), so
 * every sum has a fixed order: same inputs, same bits, on the same GPU model. */
#ifndef ZBPP_CUDA_FLASH_ATTN_H
#define ZBPP_CUDA_FLASH_ATTN_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "cuda/kernels_bf16.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when head size hs has a kernel. */
int zb_cuk_flash_supported(int hs);

/* out[B, T, C] (bf16) = softmax(q·kᵀ/√hs, causal)·v per head; lse[B, NH, T] (fp32) =
 * the rows' log-sum-exp of the scaled scores (the backward's statistics). */
void zb_cuk_flash_forward(cudaStream_t s, zb_bf16_t *out, float *lse, const zb_bf16_t *qkv, int B,
                          int T, int NH, int hs);

/* Bytes of device scratch zb_cuk_flash_backward needs (fp32 D = rowsum(dO∘O) per row and head,
 * and any fp32 accumulators). */
size_t zb_cuk_flash_backward_scratch_bytes(int B, int T, int NH, int hs);

/* dqkv[B, T, 3C] (bf16) = the gradients of q, k, v given dout[B, T, C] (bf16), written (not
 * accumulated), from the forward's qkv, out and lse. */
void zb_cuk_flash_backward(cudaStream_t s, zb_bf16_t *dqkv, void *scratch, const zb_bf16_t *dout,
                           const zb_bf16_t *qkv, const zb_bf16_t *out, const float *lse, int B,
                           int T, int NH, int hs);

/* zb_cuk_flash_backward with marks[0..3] recorded on s before its D, dK/dV and dQ launches and
 * after the last (marks NULL: none), so a benchmark can time the three apart. */
void zb_cuk_flash_backward_marked(cudaStream_t s, cudaEvent_t marks[4], zb_bf16_t *dqkv,
                                  void *scratch, const zb_bf16_t *dout, const zb_bf16_t *qkv,
                                  const zb_bf16_t *out, const float *lse, int B, int T, int NH,
                                  int hs);

#ifdef __cplusplus
}
#endif

#endif
