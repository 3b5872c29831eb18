/* Flash attention (src/cuda/flash_attn.cu, bf16 in/out), the fp32 flash attention of the fp32
 * stage (src/cuda/flash_attn32.cu, fp32 in/out, FMA on the CUDA cores), the tf32 stage's
 * (src/cuda/flash_attn_tf32.cu, fp32 in/out, TF32 tensor cores), the same file's 3xTF32 kernels
 * (the fp32 stage's --fp32-attention 3xtf32) and the materialised
 * attention of cuda/ops.c (fp32 storage, the T×T probabilities stored, products in the given
 * precision) on one GPU: forward and backward time (CUDA events, median of `reps` after 3 warm-up runs),
 * TFLOP/s, and the device memory each needs beyond q/k/v and the output.
 * FLOPs (the FlashAttention papers' convention, causal half): forward 2 products of T·T·hs per
 * head, 4·B·NH·T²·hs / 2; backward 5 products (the scores recomputed), 2.5 × the forward. The
 * flash backward's three launches (D, dK/dV, dQ) are also timed apart.
 * Usage: bench_flash [B=8] [T=1024] [NH=12] [hs=64] [reps=20] [materialised precision=bf16]
 * (GPT-2 124M's attention shape by default). A bad argument is a usage error (exit 2); exit 77
 * with "skipped: no CUDA device" where there is none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/cuda.h"

#include "bench_common.h"

typedef struct {
    int B, T, NH, hs, reps;
    const char *prec_name;
    zb_cuda_precision_t prec;
} args_t;

static args_t parse_args(int argc, char **argv)
{
    args_t a;
    a.B = bench_int_arg("bench_flash", argc, argv, 1, 8, 1, 4096, "B");
    a.T = bench_int_arg("bench_flash", argc, argv, 2, 1024, 1, 1 << 20, "T");
    a.NH = bench_int_arg("bench_flash", argc, argv, 3, 12, 1, 1024, "NH");
    a.hs = bench_int_arg("bench_flash", argc, argv, 4, 64, 16, 128, "hs");
    a.reps = bench_int_arg("bench_flash", argc, argv, 5, 20, 1, 10000, "reps");
    a.prec_name = argc > 6 ? argv[6] : "bf16";
    zb_err_t e;
    if (a.hs != 16 && a.hs != 32 && a.hs != 64 && a.hs != 128) {
        fprintf(stderr, "bench_flash: head size %d has no kernel (16, 32, 64 or 128)\n", a.hs);
        exit(2);
    }
    if (zb_cuda_precision_parse(a.prec_name, &a.prec, &e) != ZB_OK) {
        fprintf(stderr, "bench_flash: %s\n", e.msg);
        exit(2);
    }
    return a;
}

#ifndef ZB_HAVE_CUDA
int main(int argc, char **argv)
{
    parse_args(argc, argv);
    printf("skipped: no CUDA device (built without CUDA)\n");
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "cuda/ctx.h"
#include "cuda/flash_attn.h"
#include "cuda/flash_attn32.h"
#include "cuda/flash_attn_tf32.h"

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(void *arg);

/* Median milliseconds of reps runs of fn on stream s (3 warm-up runs first). */
static float median_ms(cudaStream_t s, bench_fn fn, void *arg, int reps)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; i++)
        fn(arg);
    float *ms = malloc((size_t)reps * sizeof *ms);
    for (int i = 0; i < reps; i++) {
        cudaEventRecord(a, s);
        fn(arg);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms[i], a, b);
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_f);
    float med = ms[reps / 2];
    free(ms);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

/* Median milliseconds of the flash backward's three phases (D, dK/dV, dQ) over reps runs. */
static void backward_phases(cudaStream_t s, void *arg, int reps, float med[3]);

typedef struct {
    zb_cu_ctx_t *ctx;
    int B, T, NH, hs;
    /* flash */
    zb_bf16_t *qkv16, *out16, *dout16, *dqkv16;
    float *lse;
    void *scratch;
    /* materialised, and the fp32 flash (its own lse and scratch) */
    float *qkv, *out, *dout, *dqkv, *att, *att_scratch;
    float *lse32;
    void *scratch32;
} rig_t;

static void flash_fwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash_forward(r->ctx->stream, r->out16, r->lse, r->qkv16, r->B, r->T, r->NH, r->hs);
}

static void flash_bwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash_backward(r->ctx->stream, r->dqkv16, r->scratch, r->dout16, r->qkv16, r->out16,
                          r->lse, r->B, r->T, r->NH, r->hs);
}

static void flash32_fwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash32_forward(r->ctx->stream, r->out, r->lse32, r->qkv, r->B, r->T, r->NH, r->hs);
}

static void flash32_bwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash32_backward(r->ctx->stream, r->dqkv, r->scratch32, r->dout, r->qkv, r->out,
                            r->lse32, r->B, r->T, r->NH, r->hs);
}

static void tf32_fwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash_tf32_forward(r->ctx->stream, r->out, r->lse32, r->qkv, r->B, r->T, r->NH, r->hs);
}

static void tf32_bwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash_tf32_backward(r->ctx->stream, r->dqkv, r->scratch32, r->dout, r->qkv, r->out,
                               r->lse32, r->B, r->T, r->NH, r->hs);
}

static void x3_fwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash_3xtf32_forward(r->ctx->stream, r->out, r->lse32, r->qkv, r->B, r->T, r->NH,
                                r->hs);
}

static void x3_bwd(void *p)
{
    rig_t *r = p;
    zb_cuk_flash_3xtf32_backward(r->ctx->stream, r->dqkv, r->scratch32, r->dout, r->qkv, r->out,
                                 r->lse32, r->B, r->T, r->NH, r->hs);
}

static void backward_phases(cudaStream_t s, void *arg, int reps, float med[3])
{
    rig_t *r = arg;
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++)
        cudaEventCreate(&ev[i]);
    float *ms = malloc(3 * (size_t)reps * sizeof *ms);
    for (int i = 0; i < reps; i++) {
        zb_cuk_flash_backward_marked(s, ev, r->dqkv16, r->scratch, r->dout16, r->qkv16, r->out16,
                                     r->lse, r->B, r->T, r->NH, r->hs);
        cudaEventSynchronize(ev[3]);
        for (int p = 0; p < 3; p++)
            cudaEventElapsedTime(&ms[p * reps + i], ev[p], ev[p + 1]);
    }
    for (int p = 0; p < 3; p++) {
        qsort(ms + p * reps, (size_t)reps, sizeof *ms, cmp_f);
        med[p] = ms[p * reps + reps / 2];
    }
    free(ms);
    for (int i = 0; i < 4; i++)
        cudaEventDestroy(ev[i]);
}

static void mat_fwd(void *p)
{
    rig_t *r = p;
    zb_cu_attention_forward(r->ctx, r->out, r->att, r->qkv, r->B, r->T, r->NH * r->hs, r->NH);
}

static void mat_bwd(void *p)
{
    rig_t *r = p;
    zb_cu_attention_backward_input(r->ctx, r->dqkv, r->att_scratch, r->dout, r->qkv, r->att, r->B,
                                   r->T, r->NH * r->hs, r->NH);
}

static void *dev(size_t bytes, int *ok)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess) {
        *ok = 0;
        return NULL;
    }
    cudaMemset(d, 0, bytes); /* zeros: finite inputs, timing does not depend on values */
    return d;
}

int main(int argc, char **argv)
{
    args_t a = parse_args(argc, argv);
    int B = a.B, T = a.T, NH = a.NH, hs = a.hs, reps = a.reps;
    const char *prec_name = a.prec_name;
    zb_err_t e;
    int ndev = 0;
    if (zb_cuda_device_count(&ndev, &e) != ZB_OK || ndev == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    zb_cu_ctx_t ctx;
    if (zb_cu_ctx_init(&ctx, 0, a.prec, &e) != ZB_OK) {
        fprintf(stderr, "bench_flash: %s\n", e.msg);
        return 1;
    }
    size_t C = (size_t)NH * hs, n1 = (size_t)B * T * C, stats = (size_t)B * NH * T * 4;
    size_t att_bytes = (size_t)B * NH * T * T * 4,
           att_scr_bytes = zb_cu_attention_scratch_floats(T, NH) * 4,
           flash_scr_bytes = zb_cuk_flash_backward_scratch_bytes(B, T, NH, hs),
           flash32_scr_bytes = zb_cuk_flash32_backward_scratch_bytes(B, T, NH, hs);
    int ok = 1;
    rig_t r = {.ctx = &ctx, .B = B, .T = T, .NH = NH, .hs = hs};
    r.qkv16 = dev(3 * n1 * 2, &ok), r.out16 = dev(n1 * 2, &ok), r.dout16 = dev(n1 * 2, &ok);
    r.dqkv16 = dev(3 * n1 * 2, &ok), r.lse = dev(stats, &ok), r.scratch = dev(flash_scr_bytes, &ok);
    r.qkv = dev(3 * n1 * 4, &ok), r.out = dev(n1 * 4, &ok), r.dout = dev(n1 * 4, &ok);
    r.dqkv = dev(3 * n1 * 4, &ok), r.att = dev(att_bytes, &ok);
    r.att_scratch = dev(att_scr_bytes, &ok);
    r.lse32 = dev(stats, &ok), r.scratch32 = dev(flash32_scr_bytes, &ok);
    if (!ok) {
        fprintf(stderr, "bench_flash: out of device memory\n");
        return 1;
    }
    double fwd_flop = 2.0 * B * NH * (double)T * T * hs, bwd_flop = 2.5 * fwd_flop;
    float ff = median_ms(ctx.stream, flash_fwd, &r, reps);
    float fb = median_ms(ctx.stream, flash_bwd, &r, reps);
    float f32f = median_ms(ctx.stream, flash32_fwd, &r, reps);
    float f32b = median_ms(ctx.stream, flash32_bwd, &r, reps);
    const bool tf32 = zb_cuk_flash_tf32_supported(hs);
    float t32f = tf32 ? median_ms(ctx.stream, tf32_fwd, &r, reps) : 0.0f;
    float t32b = tf32 ? median_ms(ctx.stream, tf32_bwd, &r, reps) : 0.0f;
    float x3f = tf32 ? median_ms(ctx.stream, x3_fwd, &r, reps) : 0.0f;
    float x3b = tf32 ? median_ms(ctx.stream, x3_bwd, &r, reps) : 0.0f;
    float mf = median_ms(ctx.stream, mat_fwd, &r, reps);
    float mb = median_ms(ctx.stream, mat_bwd, &r, reps);
    float phase[3];
    backward_phases(ctx.stream, &r, reps, phase);
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess || zb_cu_ctx_check(&ctx, "materialised attention", &e) != ZB_OK) {
        fprintf(stderr, "bench_flash: %s\n", ce != cudaSuccess ? cudaGetErrorString(ce) : e.msg);
        return 1;
    }
    char desc[256] = "";
    zb_cuda_device_describe(0, desc, sizeof desc, &e);
    printf("bench_flash: %s; B %d T %d NH %d hs %d, median of %d\n", desc, B, T, NH, hs, reps);
    printf("%-22s %10s %10s %10s %10s %8s\n", "path", "fwd ms", "fwd TF/s", "bwd ms", "bwd TF/s",
           "MiB");
    printf("%-22s %10.3f %10.1f %10.3f %10.1f %8.1f\n", "flash (bf16)", ff, fwd_flop / ff / 1e9, fb,
           bwd_flop / fb / 1e9, (2.0 * stats + flash_scr_bytes) / 1048576.0);
    printf("%-22s D %.3f ms, dK/dV %.3f ms, dQ %.3f ms (medians, timed apart)\n",
           "flash backward", phase[0], phase[1], phase[2]);
    printf("%-22s %10.3f %10.1f %10.3f %10.1f %8.1f\n", "flash (fp32 FMA)", f32f,
           fwd_flop / f32f / 1e9, f32b, bwd_flop / f32b / 1e9,
           (2.0 * stats + flash32_scr_bytes) / 1048576.0);
    if (tf32)
        printf("%-22s %10.3f %10.1f %10.3f %10.1f %8.1f\n", "flash (tf32 mma)", t32f,
               fwd_flop / t32f / 1e9, t32b, bwd_flop / t32b / 1e9,
               (2.0 * stats + flash32_scr_bytes) / 1048576.0);
    if (tf32)
        printf("%-22s %10.3f %10.1f %10.3f %10.1f %8.1f\n", "flash (3xtf32 mma)", x3f,
               fwd_flop / x3f / 1e9, x3b, bwd_flop / x3b / 1e9,
               (2.0 * stats + flash32_scr_bytes) / 1048576.0);
    char name[40];
    snprintf(name, sizeof name, "materialised (%s)", prec_name);
    printf("%-22s %10.3f %10.1f %10.3f %10.1f %8.1f\n", name, mf, fwd_flop / mf / 1e9, mb,
           bwd_flop / mb / 1e9, (att_bytes + att_scr_bytes) / 1048576.0);
    printf("speed-up: forward %.2fx, backward %.2fx; fp32 flash vs materialised: forward %.2fx, "
           "backward %.2fx; memory: flash keeps lse (+ D in the backward), the materialised path "
           "the B·NH·T² probabilities (+ an NH·T² scratch)\n",
           mf / ff, mb / fb, mf / f32f, mb / f32b);
    if (tf32)
        printf("tf32 flash vs fp32 flash: forward %.2fx, backward %.2fx; 3xtf32 flash vs fp32 "
               "flash: forward %.2fx, backward %.2fx\n",
               f32f / t32f, f32b / t32b, f32f / x3f, f32b / x3b);
    zb_cu_ctx_destroy(&ctx);
    return 0;
}

#endif
