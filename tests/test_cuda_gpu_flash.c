/* Flash attention on the GPU (label gpu): src/cuda/flash_attn.cu with bf16 q/k/v/dout against
 * the materialised attention of cuda/ops.c in fp32 (TF32 off) fed the same bf16 values converted
 * to fp32: out, dq, dk, dv within tests/flash_bounds.h's bf16 bounds (derived in docs/cuda.md;
 * tests/test_flash_reference.c shows the host model of the kernel within them), lse against the
 * exact log-sum-exp of the materialised rows, two runs bit-identical, every entry of dqkv
 * written. T in {64, 100, 1024} (full, partial and many tiles), hs 64 and 32, B = 2, NH = 3;
 * hs 16 and 128 at T = 100 (and 128 at 1024) for the other kernel instances.
 * The same shapes for src/cuda/flash_attn32.cu (the fp32 stage's attention) on fp32 inputs:
 * out, dq, dk, dv within flash32_bounds (8·√T·u of the largest entry against the materialised
 * fp32 attention), lse within 1e-5 of the exact one, two runs bit-identical, every output entry
 * written; an unsupported head size refused. And src/cuda/flash_attn_tf32.cu (the tf32 stage's)
 * within flash_tf32_bounds plus the reference's own, with an error floor that an fp32-exact
 * kernel would not reach (the products must round to TF32); its 3xTF32 kernels (the fp32
 * stage's --fp32-attention 3xtf32) within flash_3xtf32_bounds, fp32-level bounds that a kernel
 * rounding its operands to TF32 once fails.
 * Skipped (exit 77) where there is no CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_testutil.h"

#ifndef ZB_HAVE_CUDA
int main(void)
{
    cuda_test_require_device();
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "cuda/ctx.h"
#include "cuda/flash_attn.h"
#include "cuda/flash_attn32.h"
#include "cuda/flash_attn_tf32.h"
#include "flash_bounds.h"
#include "flash_reference.h"

enum { B = 2, NH = 3 };

static zb_cu_ctx_t ctx;

static void *dev_alloc(size_t bytes)
{
    void *d = NULL;
    assert_int_equal(cudaMalloc(&d, bytes), cudaSuccess);
    return d;
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = dev_alloc(bytes);
    assert_int_equal(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void download(void *h, const void *d, size_t bytes)
{
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static float *bf16_to_host_f32(const zb_bf16_t *d, size_t n)
{
    uint16_t *h = malloc(n * sizeof *h);
    float *f = malloc(n * sizeof *f);
    download(h, d, n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        f[i] = zb_bf16_to_f32(h[i]);
    free(h);
    return f;
}

/* max |a − b| / max |b| over columns off..off+C of rows of `stride` floats */
static double part_err(const float *a, const float *b, size_t rows, size_t stride, size_t off,
                       size_t C)
{
    float *x = malloc(rows * C * sizeof *x), *y = malloc(rows * C * sizeof *y);
    for (size_t r = 0; r < rows; r++) {
        memcpy(x + r * C, a + r * stride + off, C * sizeof *x);
        memcpy(y + r * C, b + r * stride + off, C * sizeof *y);
    }
    double e = rel_err(x, y, rows * C);
    free(x), free(y);
    return e;
}

static void expect_within(const char *what, int T, int hs, double err, double tol)
{
    printf("  T %4d hs %3d %-4s rel err %.3g (bound %g)\n", T, hs, what, err, tol);
    if (!(err <= tol))
        fail_msg("T %d hs %d %s: relative error %g > %g", T, hs, what, err, tol);
}

/* The materialised attention of cuda/ops.c in fp32 (TF32 off) on host qkv and dout: its out
 * and dqkv, on the host. */
static void materialised(float *ref_out, float *ref_dqkv, const float *qkv, const float *dout,
                         int T, int hs)
{
    int C = NH * hs;
    size_t n1 = (size_t)B * T * C, n3 = 3 * n1;
    float *d_qkv = dev_copy(qkv, n3 * sizeof *qkv), *d_dout = dev_copy(dout, n1 * sizeof *dout);
    float *d_out = dev_alloc(n1 * sizeof(float)), *d_dqkv = dev_alloc(n3 * sizeof(float));
    float *d_att = dev_alloc((size_t)B * NH * T * T * sizeof(float));
    float *d_scr = dev_alloc(zb_cu_attention_scratch_floats(T, NH) * sizeof(float));
    assert_int_equal(cudaMemset(d_dqkv, 0, n3 * sizeof(float)), cudaSuccess);
    zb_cu_attention_forward(&ctx, d_out, d_att, d_qkv, B, T, C, NH);
    zb_cu_attention_backward_input(&ctx, d_dqkv, d_scr, d_dout, d_qkv, d_att, B, T, C, NH);
    zb_err_t e;
    if (zb_cu_ctx_check(&ctx, "materialised attention", &e) != ZB_OK)
        fail_msg("%s", e.msg);
    download(ref_out, d_out, n1 * sizeof *ref_out);
    download(ref_dqkv, d_dqkv, n3 * sizeof *ref_dqkv);
    cudaFree(d_qkv), cudaFree(d_dout), cudaFree(d_out), cudaFree(d_dqkv), cudaFree(d_att);
    cudaFree(d_scr);
}

/* max over rows of |lse − the exact log-sum-exp| / max(1, |exact|) */
static double lse_err(const float *lse, const float *qkv, int T, int hs)
{
    flash_ref_shape_t s = {.B = B, .T = T, .NH = NH, .hs = hs};
    double err = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double want = flash_ref_lse_exact(&s, qkv, b, h, t);
                double d = fabs(lse[((size_t)b * NH + h) * T + t] - want) / fmax(1.0, fabs(want));
                err = isnan(d) || d > err ? d : err;
            }
    return err;
}

typedef struct {
    zb_bf16_t *out, *dqkv;
    float *lse;
} flash_run_t;

static void flash_run(flash_run_t *r, void *scratch, const zb_bf16_t *qkv, const zb_bf16_t *dout,
                      int T, int hs)
{
    size_t n1 = (size_t)B * T * NH * hs;
    r->out = dev_alloc(n1 * sizeof(zb_bf16_t));
    r->dqkv = dev_alloc(3 * n1 * sizeof(zb_bf16_t));
    r->lse = dev_alloc((size_t)B * NH * T * sizeof(float));
    /* NaN bits everywhere: an entry the kernels leave unwritten shows */
    assert_int_equal(cudaMemset(r->dqkv, 0xff, 3 * n1 * sizeof(zb_bf16_t)), cudaSuccess);
    zb_cuk_flash_forward(ctx.stream, r->out, r->lse, qkv, B, T, NH, hs);
    zb_cuk_flash_backward(ctx.stream, r->dqkv, scratch, dout, qkv, r->out, r->lse, B, T, NH, hs);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void flash_run_free(flash_run_t *r)
{
    cudaFree(r->out), cudaFree(r->dqkv), cudaFree(r->lse);
}

static int same_bytes(const void *d1, const void *d2, size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    download(a, d1, bytes);
    download(b, d2, bytes);
    int same = memcmp(a, b, bytes) == 0;
    free(a), free(b);
    return same;
}

static void check_shape(int T, int hs)
{
    int C = NH * hs;
    size_t n1 = (size_t)B * T * C, n3 = 3 * n1, rows = (size_t)B * T;
    float *qkv = malloc(n3 * sizeof *qkv), *dout = malloc(n1 * sizeof *dout);
    fill_random(qkv, n3, 100 + T + hs, 1.5f);
    fill_random(dout, n1, 200 + T + hs, 1.0f);
    uint16_t *qkv16 = malloc(n3 * sizeof *qkv16), *dout16 = malloc(n1 * sizeof *dout16);
    for (size_t i = 0; i < n3; i++) {
        qkv16[i] = zb_bf16_from_f32(qkv[i]);
        qkv[i] = zb_bf16_to_f32(qkv16[i]); /* both paths read the same values */
    }
    for (size_t i = 0; i < n1; i++) {
        dout16[i] = zb_bf16_from_f32(dout[i]);
        dout[i] = zb_bf16_to_f32(dout16[i]);
    }

    float *ref_out = malloc(n1 * sizeof *ref_out), *ref_dqkv = malloc(n3 * sizeof *ref_dqkv);
    materialised(ref_out, ref_dqkv, qkv, dout, T, hs);

    /* flash, twice */
    zb_bf16_t *f_qkv = dev_copy(qkv16, n3 * 2), *f_dout = dev_copy(dout16, n1 * 2);
    void *scratch = dev_alloc(zb_cuk_flash_backward_scratch_bytes(B, T, NH, hs));
    flash_run_t r1, r2;
    flash_run(&r1, scratch, f_qkv, f_dout, T, hs);
    flash_run(&r2, scratch, f_qkv, f_dout, T, hs);
    float *out = bf16_to_host_f32(r1.out, n1), *dqkv = bf16_to_host_f32(r1.dqkv, n3);
    float *lse = malloc((size_t)B * NH * T * sizeof *lse);
    download(lse, r1.lse, (size_t)B * NH * T * sizeof *lse);

    flash_bounds_t bd = flash_bounds(true);
    expect_within("out", T, hs, rel_err(out, ref_out, n1), bd.out);
    expect_within("dq", T, hs, part_err(dqkv, ref_dqkv, rows, 3 * C, 0, C), bd.dq);
    expect_within("dk", T, hs, part_err(dqkv, ref_dqkv, rows, 3 * C, C, C), bd.dk);
    expect_within("dv", T, hs, part_err(dqkv, ref_dqkv, rows, 3 * C, 2 * C, C), bd.dv);
    expect_within("lse", T, hs, lse_err(lse, qkv, T, hs), bd.lse);
    if (!same_bytes(r1.out, r2.out, n1 * 2) ||
        !same_bytes(r1.lse, r2.lse, (size_t)B * NH * T * 4) ||
        !same_bytes(r1.dqkv, r2.dqkv, n3 * 2))
        fail_msg("T %d hs %d: two runs on the same inputs differ", T, hs);

    flash_run_free(&r1), flash_run_free(&r2);
    cudaFree(f_qkv), cudaFree(f_dout), cudaFree(scratch);
    free(qkv), free(dout), free(qkv16), free(dout16), free(ref_out), free(ref_dqkv);
    free(out), free(dqkv), free(lse);
}

static void test_flash_vs_materialised(void **state)
{
    (void)state;
    static const int lengths[] = {64, 100, 1024}, head_sizes[] = {64, 32};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            check_shape(lengths[i], head_sizes[j]);
}

/* The other two template instances (hs 128 has its own, smaller tiles), at a partial tile. */
static void test_flash_other_head_sizes(void **state)
{
    (void)state;
    check_shape(100, 16);
    check_shape(100, 128);
    check_shape(1024, 128);
}

/* A head size without a kernel is refused as a launch error the caller's check sees. */
static void test_unsupported_head_size(void **state)
{
    (void)state;
    assert_false(zb_cuk_flash_supported(48));
    assert_true(zb_cuk_flash_supported(64));
    cudaGetLastError();
    zb_cuk_flash_forward(ctx.stream, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(cudaGetLastError(), cudaSuccess);
    zb_cuk_flash_backward(ctx.stream, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(cudaGetLastError(), cudaSuccess);
}

/* ---- the fp32 kernels (flash_attn32.cu) ---- */

typedef struct {
    float *out, *dqkv, *lse;
} flash32_run_t;

/* The fp32-storage kernels: fp32 FMAs (flash_attn32.cu) or TF32 tensor cores
 * (flash_attn_tf32.cu), the same contract. */
typedef struct {
    const char *name;
    void (*forward)(cudaStream_t, float *, float *, const float *, int, int, int, int);
    size_t (*scratch_bytes)(int, int, int, int);
    void (*backward)(cudaStream_t, float *, void *, const float *, const float *, const float *,
                     const float *, int, int, int, int);
    flash_bounds_t (*bounds)(int T);
    double floor; /* the least error over out, dq, dk, dv: a TF32 kernel computing in fp32 fails */
} kernel32_t;

static flash_bounds_t fp32_bounds_on_gpu(int T) { return flash32_bounds(T, false, true); }
/* TF32 against the materialised fp32 attention: the kernel's 8u plus the reference's own */
static flash_bounds_t tf32_bounds_on_gpu(int T)
{
    flash_bounds_t a = flash_tf32_bounds(true), b = flash32_bounds(T, false, true);
    return (flash_bounds_t){a.out + b.out, a.dq + b.dq, a.dk + b.dk, a.dv + b.dv, a.lse + b.lse};
}
static const kernel32_t FP32 = {"fp32", zb_cuk_flash32_forward,
                                zb_cuk_flash32_backward_scratch_bytes, zb_cuk_flash32_backward,
                                fp32_bounds_on_gpu, 0.0};
static const kernel32_t TF32 = {"tf32", zb_cuk_flash_tf32_forward,
                                zb_cuk_flash_tf32_backward_scratch_bytes,
                                zb_cuk_flash_tf32_backward, tf32_bounds_on_gpu,
                                FLASH_TF32_U / 16};
static flash_bounds_t x3_bounds_on_gpu(int T) { return flash_3xtf32_bounds(T, false, true); }
static const kernel32_t TF32X3 = {"3xtf32", zb_cuk_flash_3xtf32_forward,
                                  zb_cuk_flash_tf32_backward_scratch_bytes,
                                  zb_cuk_flash_3xtf32_backward, x3_bounds_on_gpu, 0.0};

static void flash32_run(const kernel32_t *k, flash32_run_t *r, void *scratch, const float *qkv,
                        const float *dout, int T, int hs)
{
    size_t n1 = (size_t)B * T * NH * hs, nl = (size_t)B * NH * T;
    r->out = dev_alloc(n1 * sizeof(float));
    r->dqkv = dev_alloc(3 * n1 * sizeof(float));
    r->lse = dev_alloc(nl * sizeof(float));
    /* NaN bits everywhere: an entry the kernels leave unwritten shows */
    assert_int_equal(cudaMemset(r->out, 0xff, n1 * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMemset(r->dqkv, 0xff, 3 * n1 * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMemset(r->lse, 0xff, nl * sizeof(float)), cudaSuccess);
    k->forward(ctx.stream, r->out, r->lse, qkv, B, T, NH, hs);
    k->backward(ctx.stream, r->dqkv, scratch, dout, qkv, r->out, r->lse, B, T, NH, hs);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void check_shape32(const kernel32_t *k, int T, int hs)
{
    int C = NH * hs;
    size_t n1 = (size_t)B * T * C, n3 = 3 * n1, rows = (size_t)B * T, nl = (size_t)B * NH * T;
    float *qkv = malloc(n3 * sizeof *qkv), *dout = malloc(n1 * sizeof *dout);
    fill_random(qkv, n3, 300 + T + hs, 1.5f);
    fill_random(dout, n1, 400 + T + hs, 1.0f);
    float *ref_out = malloc(n1 * sizeof *ref_out), *ref_dqkv = malloc(n3 * sizeof *ref_dqkv);
    materialised(ref_out, ref_dqkv, qkv, dout, T, hs);

    float *d_qkv = dev_copy(qkv, n3 * sizeof *qkv), *d_dout = dev_copy(dout, n1 * sizeof *dout);
    void *scratch = dev_alloc(k->scratch_bytes(B, T, NH, hs));
    flash32_run_t r1, r2;
    flash32_run(k, &r1, scratch, d_qkv, d_dout, T, hs);
    flash32_run(k, &r2, scratch, d_qkv, d_dout, T, hs);
    float *out = malloc(n1 * sizeof *out), *dqkv = malloc(n3 * sizeof *dqkv);
    float *lse = malloc(nl * sizeof *lse);
    download(out, r1.out, n1 * sizeof *out);
    download(dqkv, r1.dqkv, n3 * sizeof *dqkv);
    download(lse, r1.lse, nl * sizeof *lse);

    flash_bounds_t bd = k->bounds(T);
    const double e[4] = {rel_err(out, ref_out, n1), part_err(dqkv, ref_dqkv, rows, 3 * C, 0, C),
                         part_err(dqkv, ref_dqkv, rows, 3 * C, C, C),
                         part_err(dqkv, ref_dqkv, rows, 3 * C, 2 * C, C)};
    expect_within("out", T, hs, e[0], bd.out);
    expect_within("dq", T, hs, e[1], bd.dq);
    expect_within("dk", T, hs, e[2], bd.dk);
    expect_within("dv", T, hs, e[3], bd.dv);
    expect_within("lse", T, hs, lse_err(lse, qkv, T, hs), bd.lse);
    double least = fmin(fmin(e[0], e[1]), fmin(e[2], e[3]));
    if (least < k->floor)
        fail_msg("%s T %d hs %d: every error under %g (least %g): the products did not round to "
                 "TF32",
                 k->name, T, hs, k->floor, least);
    if (!same_bytes(r1.out, r2.out, n1 * 4) || !same_bytes(r1.lse, r2.lse, nl * 4) ||
        !same_bytes(r1.dqkv, r2.dqkv, n3 * 4))
        fail_msg("%s T %d hs %d: two runs on the same inputs differ", k->name, T, hs);

    cudaFree(r1.out), cudaFree(r1.dqkv), cudaFree(r1.lse);
    cudaFree(r2.out), cudaFree(r2.dqkv), cudaFree(r2.lse);
    cudaFree(d_qkv), cudaFree(d_dout), cudaFree(scratch);
    free(qkv), free(dout), free(ref_out), free(ref_dqkv), free(out), free(dqkv), free(lse);
}

static void test_flash32_vs_materialised(void **state)
{
    (void)state;
    printf("fp32 kernels:\n");
    static const int lengths[] = {64, 100, 1024}, head_sizes[] = {64, 32};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            check_shape32(&FP32, lengths[i], head_sizes[j]);
    check_shape32(&FP32, 100, 16);
    check_shape32(&FP32, 100, 128);
    check_shape32(&FP32, 1024, 128);
}

/* The TF32 kernels (the tf32 stage's attention): within the TF32 bounds, and rounding (an error
 * floor), on the same shapes; head size 128 has no TF32 kernel (the fp32 one serves it). */
static void test_flash_tf32_vs_materialised(void **state)
{
    (void)state;
    printf("tf32 kernels:\n");
    static const int lengths[] = {64, 100, 1024}, head_sizes[] = {64, 32};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            check_shape32(&TF32, lengths[i], head_sizes[j]);
    check_shape32(&TF32, 100, 16);
    assert_false(zb_cuk_flash_tf32_supported(128));
    cudaGetLastError();
    zb_cuk_flash_tf32_forward(ctx.stream, NULL, NULL, NULL, 1, 16, 1, 128);
    assert_int_not_equal(cudaGetLastError(), cudaSuccess);
}

/* The 3xTF32 kernels (the fp32 stage's tensor-core attention): fp32-level bounds on the same
 * shapes; head size 128 refused as by the TF32 ones. */
static void test_flash_3xtf32_vs_materialised(void **state)
{
    (void)state;
    printf("3xtf32 kernels:\n");
    static const int lengths[] = {64, 100, 1024}, head_sizes[] = {64, 32};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            check_shape32(&TF32X3, lengths[i], head_sizes[j]);
    check_shape32(&TF32X3, 100, 16);
    cudaGetLastError();
    zb_cuk_flash_3xtf32_backward(ctx.stream, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 1, 128);
    assert_int_not_equal(cudaGetLastError(), cudaSuccess);
}

/* The kernels' TF32 rounding (integer instructions) is the hardware's cvt.rna.tf32.f32 for every
 * finite fp32, and passes every NaN and infinity through unchanged: the tf32 and 3xtf32 kernels'
 * bits do not depend on which of the two they use, and a NaN input stays a NaN. */
static void test_tf32_rounding_is_cvt_rna(void **state)
{
    (void)state;
    unsigned long long *bad_dev = NULL, bad = 1;
    assert_int_equal(cudaMalloc((void **)&bad_dev, sizeof bad), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(bad_dev, 0, sizeof bad, ctx.stream), cudaSuccess);
    assert_int_equal(zb_cuk_tf32_rounding_check(ctx.stream, bad_dev), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(&bad, bad_dev, sizeof bad, cudaMemcpyDeviceToHost, ctx.stream),
                     cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(ctx.stream), cudaSuccess);
    cudaFree(bad_dev);
    assert_int_equal(bad, 0);
}

static void test_flash32_unsupported_head_size(void **state)
{
    (void)state;
    assert_false(zb_cuk_flash32_supported(48));
    assert_true(zb_cuk_flash32_supported(64));
    cudaGetLastError();
    zb_cuk_flash32_forward(ctx.stream, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(cudaGetLastError(), cudaSuccess);
    zb_cuk_flash32_backward(ctx.stream, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(cudaGetLastError(), cudaSuccess);
}

static int setup(void **state)
{
    (void)state;
    zb_err_t e;
    if (zb_cu_ctx_init(&ctx, 0, ZB_CUDA_FP32, &e) != ZB_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zb_cu_ctx_destroy(&ctx);
    return 0;
}

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_vs_materialised),
        cmocka_unit_test(test_flash_other_head_sizes),
        cmocka_unit_test(test_unsupported_head_size),
        cmocka_unit_test(test_flash32_vs_materialised),
        cmocka_unit_test(test_flash32_unsupported_head_size),
        cmocka_unit_test(test_flash_tf32_vs_materialised),
        cmocka_unit_test(test_flash_3xtf32_vs_materialised),
        cmocka_unit_test(test_tf32_rounding_is_cvt_rna),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#endif
