/* Threads inside a rank, for the GPT-2 124M matrix products (B·T = 256 rows): one plain
 * single-threaded sgemm, the tiled product (zb_sgemm_tiled) on worker groups of 1 and N threads,
 * and (OpenBLAS builds) OpenBLAS's own N threads on one plain call. Runs interleaved, medians.
 * Also checks that the tiled product's bits do not depend on the thread count ("1 vs N" must say
 * yes) and says whether they equal one plain call's ("= plain", informative: OpenBLAS's edge
 * kernels may round differently).
 * Usage: bench_gemm_threads [runs] [threads]   (defaults 7, 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "nn/gemm.h"
#include "zbpp/util.h"
#include "zbpp/workers.h"

typedef bench_gemm_shape_t shape_t;

enum { PLAIN, TILED_1, TILED_N, BLAS_N, MODES };

static void blas_threads(int n)
{
#if defined(ZB_BLAS_OPENBLAS)
    openblas_set_num_threads(n);
#else
    (void)n;
#endif
}

int main(int argc, char **argv)
{
    int runs = bench_int_arg("bench_gemm_threads", argc, argv, 1, 7, 1, 1000, "runs");
    int nt = bench_int_arg("bench_gemm_threads", argc, argv, 2, 2, 2, 64, "threads");
    const shape_t *shapes = bench_gpt2_gemm_shapes;
    zb_err_t err;
    zb_workers_t *one = NULL, *many = NULL;
    if (zb_workers_new(1, NULL, &one, &err) != ZB_OK ||
        zb_workers_new_for_rank(0, nt, true, &many, &err) != ZB_OK) {
        fprintf(stderr, "bench_gemm_threads: %s\n", err.msg);
        return 1;
    }
    printf("BLAS: %s; %d threads; median of %d interleaved runs; ms (GFLOP/s)\n", zb_blas_init(),
           nt, runs);
    printf("%-31s %5s %15s %15s %15s %15s %9s %9s\n", "shape (M x N x K, op)", "tiles",
           "plain 1 thr", "tiled 1 thr", "tiled N thr", "OpenBLAS N thr", "1 vs N", "= plain");
    double *t = malloc((size_t)runs * MODES * sizeof(double));
    for (size_t s = 0; s < BENCH_GPT2_GEMM_SHAPES; s++) {
        const shape_t *sh = &shapes[s];
        size_t na = (size_t)sh->M * sh->K, nb = (size_t)sh->K * sh->N, nc = (size_t)sh->M * sh->N;
        float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float)),
              *C = calloc(nc, sizeof(float)), *C1 = malloc(nc * sizeof(float)),
              *C2 = malloc(nc * sizeof(float));
        for (size_t i = 0; i < na; i++)
            A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (size_t i = 0; i < nb; i++)
            B[i] = (float)((i * 40503u) % 997) * 1e-3f - 0.5f;
        int lda = sh->ta ? sh->M : sh->K, ldb = sh->tb ? sh->K : sh->N;
        /* bits: tiled on 1 thread vs N threads (beta 0) */
        zb_workers_enter(one);
        zb_sgemm_tiled(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 0, C1, sh->N);
        zb_workers_enter(many);
        zb_sgemm_tiled(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 0, C2, sh->N);
        int same = memcmp(C1, C2, nc * sizeof(float)) == 0;
        zb_workers_enter(NULL);
        zb_sgemm(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 0, C2, sh->N);
        int as_plain = memcmp(C1, C2, nc * sizeof(float)) == 0;
        for (int r = 0; r < runs; r++)
            for (int m = 0; m < MODES; m++) {
                zb_workers_enter(m == TILED_N ? many : one);
                blas_threads(m == BLAS_N ? nt : 1);
                double t0 = zb_now();
                if (m == PLAIN || m == BLAS_N)
                    zb_sgemm(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 1, C, sh->N);
                else
                    zb_sgemm_tiled(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 1, C,
                                   sh->N);
                t[(size_t)m * runs + r] = zb_now() - t0;
            }
        blas_threads(1);
        printf("%-31s %5d", sh->what, zb_sgemm_tile_count(sh->M, sh->N, sh->K));
        for (int m = 0; m < MODES; m++) {
            double med = zb_median(t + (size_t)m * runs, (size_t)runs);
            printf(" %7.2f (%5.0f)", med * 1e3, 2.0 * sh->M * sh->N * sh->K / med / 1e9);
        }
        printf(" %9s %9s\n", same ? "yes" : "NO", as_plain ? "yes" : "no");
        free(A), free(B), free(C), free(C1), free(C2);
    }
    zb_workers_enter(NULL);
    zb_workers_free(one);
    zb_workers_free(many);
    free(t);
    return 0;
}
