/* Internal: the one sgemm entry point of the kernels (row-major CBLAS), which makes sure the BLAS
 * is single-threaded before its first use. */
#ifndef ZBPP_NN_GEMM_H
#define ZBPP_NN_GEMM_H

#include <cblas.h>

#include "nn/gemm_bf16.h"
#include "zbpp/nn.h"

/* C[M,N] = alpha · op(A) · op(B) + beta · C, row-major, leading dimensions given; with bf16
 * products on (zb_cpu_gemm_set_precision), op(A) and op(B) are rounded to bf16 first. */
static inline void zb_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta, float *C,
                            int ldc)
{
    if (zb_gemm_bf16_on()) {
        zb_gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    zb_blas_init();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The same product cut into fixed tiles of C (by shape only) shared over the calling thread's
 * current worker group (zbpp/workers.h); same bits for any thread count. gemm_tiled.c. */
void zb_sgemm_tiled(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* The same with B a weight (its rows x cols as stored, leading dimension ldb): in bf16 mode,
 * under an open weight cache, its rounded copy is reused. gemm_tiled.c. */
void zb_sgemm_tiled_weight(int trans_a, int trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *W, int ldw, float beta, float *C,
                           int ldc);
/* How many tiles zb_sgemm_tiled cuts an M x N x K product into (1 = one plain call). */
int zb_sgemm_tile_count(int M, int N, int K);

#endif
