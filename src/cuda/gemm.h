/* Internal: the typed cuBLASLt matrix product with epilogues (src/cuda/gemm.c), beside the
 * fp32 zb_cu_gemm of ctx.h. The bf16 stage path calls it; plans are cached in the context like
 * zb_cu_gemm's (the key adds the types and the epilogue).
 *
 * Row-major, as zb_cu_gemm: C[M,N] = alpha·op(A)·op(B) + beta·C, then the epilogue, per row of
 * C for the bias (bias[N]) and elementwise for GELU. Accumulation is always fp32. */
#ifndef ZBPP_CUDA_GEMM_H
#define ZBPP_CUDA_GEMM_H

#include "cuda/ctx.h"

typedef enum { ZB_CU_F32, ZB_CU_BF16 } zb_cu_dtype_t;

typedef enum {
    ZB_CU_EPI_NONE,
    ZB_CU_EPI_BIAS,          /* C += bias (bias [N], of bias_type) */
    ZB_CU_EPI_GELU_AUX_BIAS, /* aux = C + bias (pre-activation, C's type); C = gelu(aux) */
    ZB_CU_EPI_DGELU,         /* C = (A·B)·gelu'(aux) (aux: the forward's pre-activation) */
} zb_cu_epilogue_t;

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    const void *A, *B;
    void *C;
    int lda, ldb, ldc;
    zb_cu_dtype_t ta_type, tc_type; /* A and B share ta_type; C (and D) tc_type */
    zb_cu_epilogue_t epilogue;
    /* ZB_CU_EPI_BIAS, ZB_CU_EPI_GELU_AUX_BIAS. cuBLASLt fuses a bias of D's type: with bf16
     * output and an fp32 bias its heuristic finds no algorithm (seen on an H100, CUDA 13.0) and
     * the epilogue runs as a separate kernel, so the bf16 stage passes its bf16 weight copy's
     * bias */
    const void *bias;
    zb_cu_dtype_t bias_type; /* ZB_CU_F32 (the zero default) or ZB_CU_BF16 */
    void *aux;         /* ZB_CU_EPI_GELU_AUX_BIAS (written), ZB_CU_EPI_DGELU (read) */
    int ldaux;         /* elements between aux rows (its type is tc_type) */
} zb_cu_gemm_args_t;

/* One product; failures are recorded in the context (sticky, as every op). The compute type is
 * the context's precision (bf16 operands: CUBLAS_COMPUTE_32F). */
void zb_cu_gemm_ex(zb_cu_ctx_t *c, const zb_cu_gemm_args_t *g);

#endif
