/* sgemm GFLOP/s on GPT-2 124M shapes (B·T = 256 rows), single-threaded, through the same
 * zb_sgemm entry point the kernels use. Prints a table of medians over several runs.
 * Usage: bench_gemm [runs]   (OPENBLAS_CORETYPE etc. may be set in the environment to compare) */
#include <stdio.h>
#include <stdlib.h>

#include "nn/gemm.h"
#include "zbpp/util.h"

typedef struct {
    const char *what;
    int ta, tb, M, N, K;
} shape_t;

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "bench_gemm: runs must be in [1, 1000]\n");
        return 2;
    }
    /* forward: out = inp · W^T (NT); B: dinp = dout · W (NN); W: dW = dout^T · inp (TN) */
    const shape_t shapes[] = {
        {"qkv fwd      256x2304x768 NT", 0, 1, 256, 2304, 768},
        {"fc fwd       256x3072x768 NT", 0, 1, 256, 3072, 768},
        {"fcproj fwd   256x768x3072 NT", 0, 1, 256, 768, 3072},
        {"lm head fwd  256x50304x768 NT", 0, 1, 256, 50304, 768},
        {"fc B         256x768x3072 NN", 0, 0, 256, 768, 3072},
        {"fc W         3072x768x256 TN", 1, 0, 3072, 768, 256},
        {"lm head B    256x768x50304 NN", 0, 0, 256, 768, 50304},
        {"lm head W    50304x768x256 TN", 1, 0, 50304, 768, 256},
    };
    printf("BLAS: %s, single-threaded, median of %d runs\n", zb_blas_init(), runs);
    printf("%-32s %10s %10s\n", "shape (M x N x K, op)", "ms", "GFLOP/s");
    double *t = malloc((size_t)runs * sizeof(double));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
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
