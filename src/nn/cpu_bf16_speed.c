/* How fast bf16 products run on this CPU against fp32 ones, measured once (docs/compute.md,
 * "bf16 on the CPU"). bf16 instructions do not mean a faster product: an Emerald Rapids VM without
 * AMX runs AVX512-BF16 dot products at half its fp32 FMA rate, so bf16 trains slower there. The
 * CLI prints the ratio and warns when it is below 1; the numerics never depend on it. */
#include "zbpp/nn.h"

#include <stdlib.h>

#include <cblas.h>

#include "nn/gemm_bf16.h"
#include "zbpp/util.h"

/* A forward product of a GPT-2 124M layer (256 tokens, qkv-like, B transposed): big enough to
 * reach the kernels' steady rate, small enough to cost a few milliseconds. */
#define SPEED_M 256
#define SPEED_N 768
#define SPEED_K 768
#define SPEED_RUNS 3

/* Best of SPEED_RUNS after one warm-up (which also makes the backend's primitive). */
static double best_time(int bf16, const float *A, const float *B, float *C)
{
    double best = 0;
    for (int r = 0; r <= SPEED_RUNS; r++) {
        double t0 = zb_now();
        if (bf16)
            zb_gemm_bf16(0, 1, SPEED_M, SPEED_N, SPEED_K, 1.0f, A, SPEED_K, B, SPEED_K, 0.0f, C,
                         SPEED_N);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, SPEED_M, SPEED_N, SPEED_K, 1.0f,
                        A, SPEED_K, B, SPEED_K, 0.0f, C, SPEED_N);
        double t = zb_now() - t0;
        if (r > 0 && (best == 0 || t < best))
            best = t;
    }
    return best;
}

static double measure(void)
{
    float *A = malloc(sizeof(float) * SPEED_M * SPEED_K);
    float *B = malloc(sizeof(float) * SPEED_N * SPEED_K);
    float *C = malloc(sizeof(float) * SPEED_M * SPEED_N);
    double ratio = 0;
    if (A && B && C) {
        for (int i = 0; i < SPEED_M * SPEED_K; i++)
            A[i] = (float)(i % 13) * 0.05f - 0.3f;
        for (int i = 0; i < SPEED_N * SPEED_K; i++)
            B[i] = (float)(i % 11) * 0.04f - 0.2f;
        zb_blas_init(); /* the BLAS single-threaded, as the kernels run it */
        double fp32 = best_time(0, A, B, C), bf16 = best_time(1, A, B, C);
        ratio = bf16 > 0 ? fp32 / bf16 : 0;
    }
    free(A);
    free(B);
    free(C);
    return ratio;
}

double zb_cpu_bf16_speed(void)
{
    /* measured once per mode (the tests switch modes); the CLI asks from its main thread */
    static double ratio;
    static int measured_mode = ZB_GEMM_MODE_FP32;
    int mode = zb_gemm_mode();
    if (mode == ZB_GEMM_MODE_FP32)
        return 0;
    if (mode != measured_mode) {
        ratio = measure();
        measured_mode = mode;
    }
    return ratio;
}
