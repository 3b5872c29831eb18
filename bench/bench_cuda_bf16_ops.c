/* The bf16-storage kernels and typed products against the fp32-storage ones they replace, side
 * by side on one GPU at GPT-2 124M's shapes (rows = B·T, C = 768, hidden 3072, vocabulary
 * padded to 50304). Each line: median time of `reps` launches (CUDA events) of the bf16 op and
 * of the fp32 op(s) doing the same work today, the bytes each moves by design (GB/s) or its
 * FLOP rate (TFLOP/s), and fp32 time / bf16 time.
 * Usage: bench_cuda_bf16_ops [rows=8192] [reps=20]
 * Exit 77 with "skipped: no CUDA device" where there is none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "zbpp/cuda.h"

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: no CUDA device (built without CUDA)\n");
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "cuda/ctx.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/kernels_bf16.h"

enum { C = 768, H = 3072, V = 50257, VP = 50304, MAX_REPS = 200 };

static int reps;
static cudaEvent_t ev0, ev1;
static zb_cu_ctx_t ctx;

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* median milliseconds of `reps` runs of stmt on the context's stream, after two warm-ups */
#define MEDIAN_MS(out, stmt)                                                                       \
    do {                                                                                           \
        float t_[MAX_REPS];                                                                        \
        for (int w_ = 0; w_ < 2; w_++) {                                                           \
            stmt;                                                                                  \
        }                                                                                          \
        for (int r_ = 0; r_ < reps; r_++) {                                                        \
            cudaEventRecord(ev0, ctx.stream);                                                      \
            stmt;                                                                                  \
            cudaEventRecord(ev1, ctx.stream);                                                      \
            cudaEventSynchronize(ev1);                                                             \
            cudaEventElapsedTime(&t_[r_], ev0, ev1);                                               \
        }                                                                                          \
        qsort(t_, (size_t)reps, sizeof t_[0], cmp_f);                                              \
        (out) = t_[reps / 2];                                                                      \
    } while (0)

static void report_bytes(const char *what, float ms16, double bytes16, float ms32, double bytes32)
{
    printf("%-34s bf16 %8.3f ms %7.0f GB/s | fp32 %8.3f ms %7.0f GB/s | fp32/bf16 %5.2f\n",
           what, ms16, bytes16 / ms16 / 1e6, ms32, bytes32 / ms32 / 1e6, ms32 / ms16);
}

static void report_flops(const char *what, float ms16, float ms32, double flops)
{
    printf("%-34s bf16 %8.3f ms %7.1f TFLOP/s | fp32 storage %8.3f ms %7.1f TFLOP/s | "
           "fp32/bf16 %5.2f\n",
           what, ms16, flops / ms16 / 1e9, ms32, flops / ms32 / 1e9, ms32 / ms16);
}

static void *dev(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        fprintf(stderr, "bench_cuda_bf16_ops: cannot allocate %zu bytes on the GPU\n", bytes);
        exit(1);
    }
    return p;
}

/* Random fp32 values in [-1, 1) on the device (and their bf16 copy), n elements. */
static float *dev_random(size_t n, zb_bf16_t **copy16)
{
    float *h = malloc(n * sizeof(float));
    unsigned long long s = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = (float)((s >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
    }
    float *d = dev(n * sizeof(float));
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    if (copy16) {
        *copy16 = dev(n * sizeof(zb_bf16_t));
        zb_cuk16_from_f32(ctx.stream, *copy16, d, n);
    }
    return d;
}

static void bench_norms(int N)
{
    size_t nc = (size_t)N * C;
    zb_bf16_t *a16, *b16, *d16;
    float *a = dev_random(nc, &a16), *b = dev_random(nc, &b16), *d = dev_random(nc, &d16);
    float *w = dev_random(C, NULL), *bias = dev_random(C, NULL);
    float *mean = dev((size_t)N * 4), *rstd = dev((size_t)N * 4), *out = dev(nc * 4),
          *res = dev(nc * 4);
    zb_bf16_t *out16 = dev(nc * 2), *res16 = dev(nc * 2);
    int chunks = zb_cu_colsum_chunks(N);
    float *pw = dev((size_t)chunks * C * 4), *pb = dev((size_t)chunks * C * 4);
    float ms16, ms32;

    MEDIAN_MS(ms16, zb_cuk16_residual_layernorm_forward(ctx.stream, res16, out16, mean, rstd, a16,
                                                        b16, w, bias, N, C));
    MEDIAN_MS(ms32, (zb_cuk_residual_forward(ctx.stream, res, a, b, nc),
                     zb_cuk_layernorm_forward(ctx.stream, out, mean, rstd, res, w, bias, N, C)));
    report_bytes("residual + layernorm forward", ms16, 8.0 * nc, ms32, 20.0 * nc);

    MEDIAN_MS(ms16, zb_cuk16_layernorm_backward_input(ctx.stream, out16, d16, b16, res16, mean,
                                                      rstd, w, N, C));
    /* fp32 today: dinp += LayerNorm backward (dinp already holds the residual gradient) */
    MEDIAN_MS(ms32, zb_cuk_layernorm_backward_input(ctx.stream, out, b, res, mean, rstd, w, N, C));
    report_bytes("layernorm backward_input (+ dres)", ms16, 8.0 * nc, ms32, 16.0 * nc);

    MEDIAN_MS(ms16, zb_cuk16_layernorm_weight_partials(ctx.stream, pw, pb, b16, res16, mean, rstd,
                                                       N, C));
    MEDIAN_MS(ms32,
              zb_cuk_layernorm_weight_partials(ctx.stream, pw, pb, b, res, mean, rstd, N, C));
    report_bytes("layernorm weight partials", ms16, 4.0 * nc, ms32, 8.0 * nc);
    cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(a16), cudaFree(b16), cudaFree(d16);
    cudaFree(w), cudaFree(bias), cudaFree(mean), cudaFree(rstd), cudaFree(out), cudaFree(res);
    cudaFree(out16), cudaFree(res16), cudaFree(pw), cudaFree(pb);
}

static void bench_elementwise(int N)
{
    size_t nh = (size_t)N * H;
    zb_bf16_t *x16, *y16;
    float *x = dev_random(nh, &x16), *y = dev_random(nh, &y16), *o = dev(nh * 4);
    zb_bf16_t *o16 = dev(nh * 2);
    int chunks = zb_cu_colsum_chunks(N);
    float *part = dev((size_t)chunks * H * 4);
    float ms16, ms32;
    MEDIAN_MS(ms16, zb_cuk16_gelu_forward(ctx.stream, o16, x16, nh));
    MEDIAN_MS(ms32, zb_cuk_gelu_forward(ctx.stream, o, x, nh));
    report_bytes("gelu forward", ms16, 4.0 * nh, ms32, 8.0 * nh);
    MEDIAN_MS(ms16, zb_cuk16_gelu_backward_input(ctx.stream, o16, x16, y16, nh));
    MEDIAN_MS(ms32, zb_cuk_gelu_backward_input(ctx.stream, o, x, y, nh));
    report_bytes("gelu backward_input", ms16, 6.0 * nh, ms32, 16.0 * nh);
    MEDIAN_MS(ms16, zb_cuk16_colsum_partials(ctx.stream, part, x16, N, H));
    MEDIAN_MS(ms32, zb_cuk_colsum_partials(ctx.stream, part, x, N, H));
    report_bytes("bias-gradient column sums", ms16, 2.0 * nh, ms32, 4.0 * nh);
    cudaFree(x), cudaFree(y), cudaFree(o), cudaFree(x16), cudaFree(y16), cudaFree(o16);
    cudaFree(part);
}

static void bench_classifier(int N)
{
    size_t n = (size_t)N * VP;
    zb_bf16_t *l16;
    float *l = dev_random(n, &l16), *losses = dev((size_t)N * 4);
    int *tgt_h = malloc((size_t)N * sizeof(int)), *tgt = dev((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++)
        tgt_h[i] = (int)((i * 7919L) % V);
    cudaMemcpy(tgt, tgt_h, (size_t)N * sizeof(int), cudaMemcpyHostToDevice);
    free(tgt_h);
    float ms16, ms32;
    /* in place: later runs see earlier gradients as logits, which costs the same */
    MEDIAN_MS(ms16, zb_cuk16_crossentropy_fused(ctx.stream, losses, l16, tgt, 0.01f, N, V, VP));
    MEDIAN_MS(ms32, (zb_cuk_crossentropy_forward(ctx.stream, losses, l, tgt, N, V, VP, 0.0f),
                     zb_cuk_crossentropy_backward(ctx.stream, l, tgt, 0.01f, N, V, VP)));
    report_bytes("softmax + cross-entropy + dlogits", ms16, 6.0 * n, ms32, 24.0 * n);
    cudaFree(l), cudaFree(l16), cudaFree(losses), cudaFree(tgt);
}

static void bench_products(int N)
{
    size_t nc = (size_t)N * C, nh = (size_t)N * H;
    zb_bf16_t *x16, *w16, *dh16;
    float *x = dev_random(nc, &x16), *w = dev_random((size_t)H * C, &w16);
    float *dh = dev_random(nh, &dh16), *bias = dev_random(H, NULL);
    float *pre = dev(nh * 4), *g = dev(nh * 4), *dw = dev((size_t)H * C * 4);
    zb_bf16_t *pre16 = dev(nh * 2), *g16 = dev(nh * 2);
    double flops = 2.0 * N * H * C;
    float ms16, ms32;

    /* fc forward: fp32 storage does it as zb_cu_matmul_gelu_forward (fp32 operands, the bias
     * and GELU in the product's epilogue or one kernel after it) */
    zb_cu_gemm_args_t fc = {.ta = 0, .tb = 1, .M = N, .N = H, .K = C, .alpha = 1.0f,
                            .beta = 0.0f, .A = x16, .B = w16, .C = g16, .lda = C, .ldb = C,
                            .ldc = H, .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_BF16,
                            .epilogue = ZB_CU_EPI_GELU_AUX_BIAS, .bias = bias, .aux = pre16,
                            .ldaux = H};
    long f0 = ctx.gemm_epilogue_fallbacks;
    MEDIAN_MS(ms16, zb_cu_gemm_ex(&ctx, &fc));
    int fc_fused = ctx.gemm_epilogue_fallbacks == f0;
    MEDIAN_MS(ms32, zb_cu_matmul_gelu_forward(&ctx, pre, g, x, w, bias, N, C, H));
    report_flops(fc_fused ? "fc forward + bias + GELU (fused)" : "fc forward + bias + GELU (kernel)",
                 ms16, ms32, flops);

    zb_cu_gemm_args_t plain = fc;
    plain.epilogue = ZB_CU_EPI_NONE, plain.C = pre16;
    MEDIAN_MS(ms16, zb_cu_gemm_ex(&ctx, &plain));
    MEDIAN_MS(ms32, zb_cu_gemm(&ctx, 0, 1, N, H, C, 1.0f, x, C, 0, w, C, 0, 0.0f, pre, H, 0, 1));
    report_flops("fc forward, product only", ms16, ms32, flops);

    zb_cu_gemm_args_t dgelu = {.ta = 0, .tb = 0, .M = N, .N = H, .K = C, .alpha = 1.0f,
                               .beta = 0.0f, .A = x16, .B = w16, .C = g16, .lda = C,
                               .ldb = H, .ldc = H, .ta_type = ZB_CU_BF16,
                               .tc_type = ZB_CU_BF16, .epilogue = ZB_CU_EPI_DGELU,
                               .aux = pre16, .ldaux = H};
    /* (the C x H weight read as [C, H]: the proj weight's shape, same FLOPs) */
    f0 = ctx.gemm_epilogue_fallbacks;
    MEDIAN_MS(ms16, zb_cu_gemm_ex(&ctx, &dgelu));
    int dgelu_fused = ctx.gemm_epilogue_fallbacks == f0;
    MEDIAN_MS(ms32, zb_cu_matmul_dgelu_backward_input(&ctx, g, x, w, pre, N, H, C));
    report_flops(dgelu_fused ? "proj backward_input + dGELU (fused)"
                             : "proj backward_input + dGELU (kernel)",
                 ms16, ms32, flops);

    zb_cu_gemm_args_t wg = {.ta = 1, .tb = 0, .M = H, .N = C, .K = N, .alpha = 1.0f,
                            .beta = 1.0f, .A = dh16, .B = x16, .C = dw, .lda = H, .ldb = C,
                            .ldc = C, .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_F32};
    MEDIAN_MS(ms16, zb_cu_gemm_ex(&ctx, &wg));
    MEDIAN_MS(ms32, zb_cu_gemm(&ctx, 1, 0, H, C, N, 1.0f, dh, H, 0, x, C, 0, 1.0f, dw, C, 0, 1));
    report_flops("fc weight gradient (fp32 dW, beta 1)", ms16, ms32, flops);
    cudaFree(x), cudaFree(w), cudaFree(dh), cudaFree(bias), cudaFree(pre), cudaFree(g);
    cudaFree(dw), cudaFree(x16), cudaFree(w16), cudaFree(dh16), cudaFree(pre16), cudaFree(g16);
}

int main(int argc, char **argv)
{
    int N = bench_int_arg(argv[0], argc, argv, 1, 8192, 8, 1 << 20, "rows");
    reps = bench_int_arg(argv[0], argc, argv, 2, 20, 1, MAX_REPS, "reps");
    int ndev = 0;
    zb_err_t e;
    if (zb_cuda_device_count(&ndev, &e) != ZB_OK || ndev == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    if (zb_cu_ctx_init(&ctx, 0, ZB_CUDA_BF16, &e) != ZB_OK) {
        fprintf(stderr, "bench_cuda_bf16_ops: %s\n", e.msg);
        return 1;
    }
    char desc[256];
    if (zb_cuda_device_describe(0, desc, sizeof desc, &e) == ZB_OK)
        printf("device: %s; rows %d (B·T), C %d, hidden %d, vocabulary %d; median of %d\n", desc,
               N, C, H, VP, reps);
    cudaEventCreate(&ev0), cudaEventCreate(&ev1);
    bench_norms(N);
    bench_elementwise(N);
    bench_classifier(N);
    bench_products(N);
    zb_status_t st = zb_cu_ctx_check(&ctx, "bench", &e);
    if (st != ZB_OK)
        fprintf(stderr, "bench_cuda_bf16_ops: %s\n", e.msg);
    cudaEventDestroy(ev0), cudaEventDestroy(ev1);
    zb_cu_ctx_destroy(&ctx);
    return st == ZB_OK ? 0 : 1;
}

#endif
