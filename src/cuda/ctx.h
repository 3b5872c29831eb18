/* Internal: the per-stage CUDA context (stream, cuBLASLt handle and workspace, reduction scratch)
 * and the op layer over device pointers that mirrors include/zbpp/nn.h (same names with zb_cu_,
 * same argument order, same += contract) plus the context as first argument.
 *
 * Errors are sticky: an op that fails (a launch, cuBLASLt, a scratch allocation) records the
 * first failure in ctx->status / ctx->msg and later ops become no-ops; zb_cu_ctx_check turns
 * that (and any pending asynchronous CUDA error) into a zb_status_t. */
#ifndef ZBPP_CUDA_CTX_H
#define ZBPP_CUDA_CTX_H

#include <stddef.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "zbpp/cuda.h"
#include "zbpp/error.h"

#define ZB_CU_GEMM_CACHE 128

/* What a cached plan is valid for (compared as bytes: build it from a zeroed struct). */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, batch, beta_zero, sm_target;
    int ab_type, c_type;  /* cudaDataType_t of A and B, of C (CUDA_R_32F = 0: zb_cu_gemm) */
    int epilogue, ldaux;  /* cublasLtEpilogue_t (0: none set), the aux leading dimension */
    unsigned align_a, align_b, align_c; /* bytes: the plan is valid for pointers this aligned */
    unsigned align_aux, align_bias;
    int bias_type; /* cudaDataType_t of the bias (0 where the epilogue has none) */
    long long sa, sb, sc;
} zb_cu_gemm_key_t;

typedef struct {
    zb_cu_gemm_key_t key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} zb_cu_gemm_plan_t;

typedef struct {
    int device;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    zb_cuda_precision_t prec;
    zb_cuda_fp32_attention_t fp32_attn; /* prec fp32: the attention's kernel (FMA / 3xTF32) */
    float *part; /* column-sum partials */
    size_t part_cap;
    int sm_target; /* SMs the stream runs on (a partition), 0 = all: cuBLASLt plans target it */
    struct zb_cu_prof *prof; /* the kernel-class time breakdown (cuda/prof.h), NULL = off */
    struct zb_cu_ring *ring; /* small transfers' page-locked slots (cuda/small_copy.h) */
    zb_cu_gemm_plan_t plans[ZB_CU_GEMM_CACHE];
    int nplans;
    /* zb_cu_gemm_ex (gemm.h): products whose epilogue ran as a separate kernel because cuBLASLt
     * had no fused one, and a switch (tests) that makes every epilogue take that path */
    long gemm_epilogue_fallbacks;
    int gemm_epilogue_off;
    zb_status_t status;
    char msg[256];
} zb_cu_ctx_t;

/* cuBLASLt's workspace, one per context (stage): part of the stage's memory table. */
#define ZB_CU_LT_WS_BYTES ((size_t)32 << 20)

/* Create the context on `device` (stream, handle, ZB_CU_LT_WS_BYTES of cuBLASLt workspace). */
zb_status_t zb_cu_ctx_init(zb_cu_ctx_t *c, int device, zb_cuda_precision_t prec, zb_err_t *err);
void zb_cu_ctx_destroy(zb_cu_ctx_t *c);
/* ZB_OK, or the first recorded failure / pending CUDA error as a message naming `what`. */
zb_status_t zb_cu_ctx_check(zb_cu_ctx_t *c, const char *what, zb_err_t *err);
/* Record a failure (first one wins). */
void zb_cu_fail(zb_cu_ctx_t *c, zb_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record cudaGetLastError() if it is an error; returns 1 when the context is failed. */
int zb_cu_launch_check(zb_cu_ctx_t *c, const char *what);
/* The small transfers' ring (cuda/small_copy.c), freed by zb_cu_ctx_destroy. */
void zb_cu_small_free(zb_cu_ctx_t *c);
/* Make ctx->part hold at least n floats (cudaMalloc outside the timed path: it grows once). */
int zb_cu_part_reserve(zb_cu_ctx_t *c, size_t n);

/* Row-major C[M,N] = alpha·op(A)·op(B) + beta·C through cuBLASLt, `batch` independent products
 * whose operands are sa/sb/sc floats apart (batch 1: strides ignored). Compute type from
 * ctx->prec: fp32 (no TF32), TF32 or bf16 tensor cores, always fp32 accumulation and storage. */
void zb_cu_gemm(zb_cu_ctx_t *c, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C,
                int ldc, long long sc, int batch);

/* The cached plan for `key` (key->sm_target is filled from the context), created on first use
 * with the bias and aux pointers given (cuBLASLt's heuristic reads their alignment; the caller
 * sets them on the descriptor before each product). A bias makes the descriptor's bias fp32, an
 * aux gives it key->ldaux; the epilogue must use them. NULL when cuBLASLt has no algorithm: with
 * quiet, the context is not failed (the caller has a fallback) and the answer is cached too. */
zb_cu_gemm_plan_t *zb_cu_gemm_plan(zb_cu_ctx_t *c, const zb_cu_gemm_key_t *key, const void *bias,
                                   const void *aux, int quiet);
/* Point a plan's descriptor at this product's bias / aux (NULL: left as it is); 0 on failure. */
int zb_cu_gemm_set_pointers(cublasLtMatmulDesc_t d, const void *bias, const void *aux);
/* The alignment (bytes, at most 16) cuBLASLt may assume for an operand of elem_bytes elements:
 * of its pointer, of every column (ld) and of every batch (stride). */
unsigned zb_cu_align_of(const void *p, int ld, long long stride, int batch, size_t elem_bytes);

/* ---- ops: the contract of include/zbpp/nn.h on device pointers ---- */
void zb_cu_encoder_forward(zb_cu_ctx_t *c, float *out, const int *tokens, const float *wte,
                           const float *wpe, int B, int T, int C);
/* tokens_host: the same tokens on the host (the row buckets are built there). */
void zb_cu_encoder_backward_weight(zb_cu_ctx_t *c, float *dwte, float *dwpe, const float *dout,
                                   const int *tokens_host, int *bucket_dev, int B, int T, int C,
                                   int V);
void zb_cu_layernorm_forward(zb_cu_ctx_t *c, float *out, float *mean, float *rstd,
                             const float *inp, const float *weight, const float *bias, int N,
                             int C);
void zb_cu_layernorm_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                    const float *inp, const float *mean, const float *rstd,
                                    const float *weight, int N, int C);
void zb_cu_layernorm_backward_weight(zb_cu_ctx_t *c, float *dweight, float *dbias,
                                     const float *dout, const float *inp, const float *mean,
                                     const float *rstd, int N, int C);
void zb_cu_matmul_forward(zb_cu_ctx_t *c, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC);
void zb_cu_matmul_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                 const float *weight, int N, int C, int OC);
void zb_cu_matmul_backward_weight(zb_cu_ctx_t *c, float *dweight, float *dbias, const float *dout,
                                  const float *inp, int N, int C, int OC);
void zb_cu_gelu_forward(zb_cu_ctx_t *c, float *out, const float *inp, size_t n);
/* The fp32 MLP's linear layers with GELU in the product's epilogue (cuda/ops_linear_fused.c):
 * pre[N,OC] = inp·weightᵀ + bias and out = gelu(pre), both written; and
 * dinp[N,C] = (dout[N,OC]·weight[OC,C]) ∘ gelu'(pre[N,C]), written (not accumulated). */
void zb_cu_matmul_gelu_forward(zb_cu_ctx_t *c, float *pre, float *out, const float *inp,
                               const float *weight, const float *bias, int N, int C, int OC);
void zb_cu_matmul_dgelu_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                       const float *weight, const float *pre, int N, int C,
                                       int OC);
void zb_cu_gelu_backward_input(zb_cu_ctx_t *c, float *dinp, const float *inp, const float *dout,
                               size_t n);
void zb_cu_residual_forward(zb_cu_ctx_t *c, float *out, const float *a, const float *b, size_t n);
void zb_cu_residual_backward_input(zb_cu_ctx_t *c, float *da, float *db, const float *dout,
                                   size_t n);
/* Scratch floats zb_cu_attention_backward_input needs: NH·T·T (one sequence, all heads). */
size_t zb_cu_attention_scratch_floats(int T, int NH);
void zb_cu_attention_forward(zb_cu_ctx_t *c, float *out, float *att, const float *qkv, int B,
                             int T, int C, int NH);
void zb_cu_attention_backward_input(zb_cu_ctx_t *c, float *dqkv, float *scratch,
                                    const float *dout, const float *qkv, const float *att, int B,
                                    int T, int C, int NH);
/* The memory-efficient attention (flash_attn32.h; head sizes zb_cuk_flash32_supported): out and
 * lse[B, NH, T] instead of att; its backward writes (not accumulates) dqkv, from scratch of
 * zb_cu_flash32_scratch_floats(B, T, NH, hs). */
size_t zb_cu_flash32_scratch_floats(int B, int T, int NH, int hs);
void zb_cu_flash32_forward(zb_cu_ctx_t *c, float *out, float *lse, const float *qkv, int B, int T,
                           int C, int NH);
void zb_cu_flash32_backward_input(zb_cu_ctx_t *c, float *dqkv, float *scratch, const float *dout,
                                  const float *qkv, const float *out, const float *lse, int B,
                                  int T, int C, int NH);
/* dloss != 0: probs ends as the logits' gradient, as zb_cu_crossentropy_backward would leave it */
void zb_cu_crossentropy_forward(zb_cu_ctx_t *c, float *losses, float *probs, const int *targets,
                                int N, int V, int Vp, float dloss);
void zb_cu_crossentropy_backward(zb_cu_ctx_t *c, float *probs, const int *targets, float dloss,
                                 int N, int V, int Vp);

/* Ints of device scratch zb_cu_encoder_backward_weight needs for B·T tokens: 3·N + 1. */
size_t zb_cu_encoder_bucket_ints(int B, int T);

#endif
