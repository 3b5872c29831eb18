/* sgemm GFLOP/s on GPT-2 124M shapes (B·T = 256 rows), single-threaded, through the same
 * zb_sgemm entry point the kernels use. Prints a table of medians over several runs.
 * Usage: bench_gemm [runs]   (OPENBLAS_CORETYPE etc. may be set in the environment to compare) */
#include <stdio.h>
#include <stdlib.h>

#include "nn/gemm.h"
#include "bench_common.h"
#include "zbpp/util.h"

typedef bench_gemm_shape_t shape_t;

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "bench_gemm: runs must be in [1, 1000]\n");
        return 2;
    }
    /* forward: out = inp · W^T (NT); B: dinp = dout · W (NN); W: dW = dout^T · inp (TN) */
    const shape_t *shapes = bench_gpt2_gemm_shapes;
    printf("BLAS: %s, single-threaded, median of %d runs\n", zb_blas_init(), runs);
    printf("%-32s %10s %10s\n", "shape (M x N x K, op)", "ms", "GFLOP/s");
    double *t = malloc((size_t)runs * sizeof(double));
    for (size_t s = 0; s < BENCH_GPT2_GEMM_SHAPES; s++) {
        const shape_t *sh = &shapes[s];
        size_t na = (size_t)sh->M * sh->K, nb = (size_t)sh->K * sh->N, nc = (size_t)sh->M * sh->N;
        float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float)),
              *C = calloc(nc, sizeof(float));
        for (size_t i = 0; i < na; i++)
            A[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < nb; i++)
            B[i] = (float)(i % 5) * 0.1f;
        int lda = sh->ta ? sh->M : sh->K, ldb = sh->tb ? sh->K : sh->N;
        zb_sgemm(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 0, C, sh->N); /* warm */
        for (int r = 0; r < runs; r++) {
            double t0 = zb_now();
            zb_sgemm(sh->ta, sh->tb, sh->M, sh->N, sh->K, 1, A, lda, B, ldb, 1, C, sh->N);
            t[r] = zb_now() - t0;
        }
        zb_sort_doubles(t, (size_t)runs);
        double med = t[runs / 2];
        printf("%-32s %10.3f %10.1f\n", sh->what, med * 1e3,
               2.0 * sh->M * sh->N * sh->K / med / 1e9);
        free(A), free(B), free(C);
    }
    free(t);
    return 0;
}
