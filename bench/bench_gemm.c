/* Matrix-product GFLOP/s on GPT-2 124M shapes (B·T = 256 rows), single-threaded, through the
 * same entry points the kernels use. Prints a table of medians over several runs.
 *
 * fp32: zb_sgemm (OpenBLAS). Where bf16 products run on this CPU (AVX512-BF16/AMX and oneDNN:
 * docs/compute.md, "bf16 on the CPU"), two more columns: the bf16 product as a layer runs it
 * without the weight cache (both operands rounded, then oneDNN), and oneDNN's product alone on
 * operands rounded beforehand, so the rounding's share and the kernel's own rate show apart.
 * Usage: bench_gemm [runs]   (OPENBLAS_CORETYPE etc. may be set in the environment to compare;
 * a line says when OpenBLAS runs below the CPU's best kernel, which zbpp train would fix) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/gemm.h"
#include "bench_common.h"
#include "zbpp/nn.h"
#include "zbpp/util.h"

typedef bench_gemm_shape_t shape_t;

enum { FP32, BF16, BF16_KERNEL, COLUMNS };

typedef struct {
    const shape_t *sh;
    const float *A, *B;
    const uint16_t *A16, *B16; /* the operands rounded beforehand (BF16_KERNEL) */
    float *C;
    int lda, ldb;
} product_t;

static void run_once(const product_t *p, int column)
{
    const shape_t *sh = p->sh;
    if (column == BF16_KERNEL)
        zb_gemm_bf16_packed(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, p->A16, p->lda, p->B16,
                            p->ldb, 1, p->C, sh->N);
    else
        zb_sgemm(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, p->A, p->lda, p->B, p->ldb, 1, p->C,
                 sh->N);
}

/* Median seconds of `runs` products after a warm-up, in the column's mode. */
static double median_time(const product_t *p, int column, int runs, double *t)
{
    zb_err_t err;
    zb_cpu_gemm_set_precision(column == FP32 ? ZB_CPU_GEMM_FP32 : ZB_CPU_GEMM_BF16, &err);
    run_once(p, column);
    for (int r = 0; r < runs; r++) {
        double t0 = zb_now();
        run_once(p, column);
        t[r] = zb_now() - t0;
    }
    zb_sort_doubles(t, (size_t)runs);
    return t[runs / 2];
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "bench_gemm: runs must be in [1, 1000]\n");
        return 2;
    }
    zb_err_t err;
    bool bf16 = zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &err) == ZB_OK;
    printf("BLAS: %s, single-threaded, median of %d runs\n", zb_blas_init(), runs);
    const zb_blas_kernel_t *k = zb_blas_kernel();
    if (k->state == ZB_BLAS_CORE_LOW)
        printf("note: OpenBLAS chose %s, below this CPU's best (%s), which zbpp train sets "
               "itself: rerun with OPENBLAS_CORETYPE=%s\n", k->in_use, k->best, k->best);
    if (bf16)
        printf("bf16 products: %s\n", zb_cpu_bf16_backend());
    else
        printf("bf16 products: not here (%s)\n", err.msg);
    zb_cpu_gemm_set_precision(ZB_CPU_GEMM_FP32, &err);
    printf("%-32s %10s %10s", "shape (M x N x K, op)", "fp32 ms", "GFLOP/s");
    if (bf16)
        printf(" %10s %10s %12s %10s", "bf16 ms", "GFLOP/s", "kernel GF/s", "bf16/fp32");
    printf("\n");
    /* forward: out = inp · W^T (NT); B: dinp = dout · W (NN); W: dW = dout^T · inp (TN) */
    double *t = malloc((size_t)runs * sizeof(double));
    for (size_t s = 0; s < BENCH_GPT2_GEMM_SHAPES; s++) {
        const shape_t *sh = &bench_gpt2_gemm_shapes[s];
        size_t na = (size_t)sh->M * sh->K, nb = (size_t)sh->K * sh->N, nc = (size_t)sh->M * sh->N;
        float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float)),
              *C = calloc(nc, sizeof(float));
        uint16_t *A16 = malloc(na * sizeof(uint16_t)), *B16 = malloc(nb * sizeof(uint16_t));
        if (!A || !B || !C || !A16 || !B16 || !t) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < na; i++)
            A[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < nb; i++)
            B[i] = (float)(i % 5) * 0.1f;
        product_t p = {.sh = sh, .A = A, .B = B, .A16 = A16, .B16 = B16, .C = C,
                       .lda = sh->ta ? sh->M : sh->K, .ldb = sh->tb ? sh->K : sh->N};
        zb_bf16_pack(A16, A, sh->ta ? sh->K : sh->M, p.lda, p.lda);
        zb_bf16_pack(B16, B, sh->tb ? sh->N : sh->K, p.ldb, p.ldb);
        double flop = 2.0 * sh->M * sh->N * sh->K, sec[COLUMNS];
        for (int col = 0; col < (bf16 ? COLUMNS : 1); col++)
            sec[col] = median_time(&p, col, runs, t);
        printf("%-32s %10.3f %10.1f", sh->what, sec[FP32] * 1e3, flop / sec[FP32] / 1e9);
        if (bf16)
            printf(" %10.3f %10.1f %12.1f %10.2f", sec[BF16] * 1e3, flop / sec[BF16] / 1e9,
                   flop / sec[BF16_KERNEL] / 1e9, sec[FP32] / sec[BF16]);
        printf("\n");
        free(A), free(B), free(C), free(A16), free(B16);
    }
    zb_cpu_gemm_set_precision(ZB_CPU_GEMM_FP32, &err);
    free(t);
    return 0;
}
