/* Internal: bf16 matrix products on the CPU (`--precision bf16` without a GPU; docs/compute.md,
 * "bf16 on the CPU"). The operands are rounded to bf16 (round to nearest even, as on the GPU),
 * the products are exact in fp32 and summed in fp32 into an fp32 C: autocast's numerics. The
 * backend is oneDNN's matmul (gemm_bf16_onednn.c) on CPUs with AVX512-BF16 or AMX; the tests may
 * ask for an emulation instead (fp32 sgemm on the rounded operands, ZB_CPU_BF16_TEST_ENV). */
#ifndef ZBPP_NN_GEMM_BF16_H
#define ZBPP_NN_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* How matrix products run now (zb_cpu_gemm_set_precision, cpu_bf16.c). */
enum {
    ZB_GEMM_MODE_FP32,
    ZB_GEMM_MODE_BF16,           /* the backend */
    ZB_GEMM_MODE_BF16_EMULATED,  /* test hook "emulate": sgemm on the widened operands */
    ZB_GEMM_MODE_BF16_ONEDNN_F32 /* test hook "onednn-f32": oneDNN's fp32 matmul on them */
};
int zb_gemm_mode(void);
static inline int zb_gemm_bf16_on(void) { return zb_gemm_mode() != ZB_GEMM_MODE_FP32; }

/* zb_sgemm's contract with bf16 products: the fp32 operands are rounded into per-thread
 * buffers first. Single-threaded. */
void zb_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* The same on operands already in bf16 (views into packed operands). Single-threaded. */
void zb_gemm_bf16_packed(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                         float *C, int ldc);

/* rows x cols of a row-major fp32 matrix with leading dimension ld, rounded into a dense bf16
 * matrix (leading dimension cols), shared over the current worker group (inline inside a
 * chunk). */
void zb_bf16_pack(uint16_t *dst, const float *src, int rows, int cols, int ld);
/* The calling thread's bf16 buffer `slot` (0 or 1), at least n elements (without the memory the
 * process ends with one line). Valid until the thread asks for that slot again or exits. */
uint16_t *zb_bf16_buffer(int slot, size_t n);

/* The rounded copy of weight w (rows x cols, leading dimension ld), dense, from the weight cache
 * open on this thread (zb_bf16_weight_cache_open; rounded at its first use in the open span);
 * NULL when no cache is open (or without memory for it): the caller rounds it itself.
 * gemm_bf16_weights.c. */
const uint16_t *zb_bf16_weight_rounded(const float *w, int rows, int cols, int ld);
/* Test hook: set (not "0"), the weight cache is never used, so a test can compare the bits. */
#define ZB_CPU_BF16_NO_WEIGHT_CACHE_ENV "ZBPP_TEST_CPU_BF16_NO_WEIGHT_CACHE"

/* ---- the backend (gemm_bf16_onednn.c; without oneDNN, gemm_bf16.c says why not) ---- */

/* 0 when the backend runs bf16 products on this CPU, with what runs them in desc ("oneDNN 2.6.3
 * brg:avx512_core_amx"); -1 with the reason in why. */
int zb_bf16_backend_probe(char *desc, size_t desc_n, char *why, size_t why_n);
/* C = alpha·op(A)·op(B) + beta·C on the calling thread; 0, or -1 when the backend failed (the
 * caller then emulates the product, with the same numerics). Deterministic for a shape. */
int zb_bf16_backend_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                         float *C, int ldc);
/* The same calls with fp32 operands (the widened bf16 ones): the test hook that runs everything
 * of the backend but the bf16 data type (descriptors, transposes, alpha, beta, the primitive
 * table, streams, scratchpads, threads) on CPUs without bf16. */
int zb_bf16_backend_gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb, float beta,
                             float *C, int ldc);

#endif
