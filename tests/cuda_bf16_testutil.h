/* Shared by the bf16 GPU tests (tests/test_cuda_gpu_bf16_*.c, inside their ZB_HAVE_CUDA part,
 * after <cmocka.h>): device buffers freed at teardown, bf16 uploads and downloads through the
 * host conversions of src/util/bf16.h, and comparisons with the CPU kernels.
 *
 * The bound every bf16 output is held to: bf16 keeps 8 significant bits, so one round to
 * nearest moves a value v by at most half an ulp, 2^-8·|v| (the unit roundoff u = 2^-8: an
 * ulp at [2^e, 2^(e+1)) is 2^(e-7)). Inputs are rounded to bf16 BEFORE the CPU reference runs,
 * so both sides see the same operands and only the output rounding (plus fp32 arithmetic in a
 * different order, ~1e-5 of the scale as the fp32 tests allow) separates them. Errors are
 * measured as max |gpu − cpu| / max |cpu| (rel_err), which that rounding keeps under u. */
#ifndef ZBPP_TESTS_CUDA_BF16_TESTUTIL_H
#define ZBPP_TESTS_CUDA_BF16_TESTUTIL_H

#include <cuda_runtime_api.h>

#include "cuda/ctx.h"
#include "cuda/kernels_bf16.h"
#include "cuda_testutil.h"
#include "util/bf16.h"

#define BF16_U 0x1p-8                   /* unit roundoff of bf16 */
#define FP32_ORDER 1e-5                 /* fp32 sums in another order (the fp32 tests' bound) */
#define BF16_TOL (BF16_U + FP32_ORDER)  /* one bf16 rounding of an fp32 result */

#define MAX_DEV_ALLOCS 512
static void *t16_allocs[MAX_DEV_ALLOCS];
static int t16_nallocs;

static inline void *t16_dev_alloc(size_t bytes)
{
    void *d = NULL;
    assert_int_equal(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    assert_true(t16_nallocs < MAX_DEV_ALLOCS);
    t16_allocs[t16_nallocs++] = d;
    return d;
}

static inline void t16_free_all(void)
{
    for (int i = 0; i < t16_nallocs; i++)
        cudaFree(t16_allocs[i]);
    t16_nallocs = 0;
}

static inline void *t16_upload(const void *h, size_t bytes)
{
    void *d = t16_dev_alloc(bytes);
    assert_int_equal(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static inline float *t16_dev_f(const float *h, size_t n)
{
    return t16_upload(h, n * sizeof(float));
}

/* h holds bf16-representable floats (t16_rnd): uploaded as their bf16 bits */
static inline zb_bf16_t *t16_dev_h(const float *h, size_t n)
{
    zb_bf16_t *bits = malloc(n * sizeof *bits);
    for (size_t i = 0; i < n; i++)
        bits[i] = zb_bf16_from_f32(h[i]);
    zb_bf16_t *d = t16_upload(bits, n * sizeof *bits);
    free(bits);
    return d;
}

/* Uniform values in [-scale, scale), rounded to bf16 (so the CPU and the GPU read the same). */
static inline float *t16_rnd(size_t n, uint64_t seed, float scale)
{
    float *x = malloc(n * sizeof(float));
    fill_random(x, n, seed, scale);
    for (size_t i = 0; i < n; i++)
        x[i] = zb_bf16_round(x[i]);
    return x;
}

/* Wait for the stream and fail the test on a recorded or pending CUDA error. */
static inline void t16_sync(zb_cu_ctx_t *c, const char *what)
{
    zb_err_t e;
    assert_int_equal(cudaStreamSynchronize(c->stream), cudaSuccess);
    if (zb_cu_ctx_check(c, what, &e) != ZB_OK)
        fail_msg("%s", e.msg);
}

static inline float *t16_down_f(zb_cu_ctx_t *c, const float *d, size_t n)
{
    t16_sync(c, "download");
    float *h = malloc(n * sizeof(float));
    assert_int_equal(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
}

static inline float *t16_down_h(zb_cu_ctx_t *c, const zb_bf16_t *d, size_t n)
{
    t16_sync(c, "download");
    zb_bf16_t *bits = malloc(n * sizeof *bits);
    assert_int_equal(cudaMemcpy(bits, d, n * sizeof *bits, cudaMemcpyDeviceToHost), cudaSuccess);
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = zb_bf16_to_f32(bits[i]);
    free(bits);
    return h;
}

/* got (host floats, freed here) against ref; tol < 0: bitwise. */
static inline void t16_expect(const char *what, float *got, const float *ref, size_t n,
                              double tol)
{
    if (tol < 0) { /* counted element by element: a relative error is NaN where inf is expected */
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
            differ += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
        printf("  %-44s %zu of %zu differ bitwise (bound 0)\n", what, differ, n);
        if (differ)
            fail_msg("%s: %zu of %zu elements not bitwise equal to the reference", what, differ, n);
        free(got);
        return;
    }
    double r = rel_err(got, ref, n);
    printf("  %-44s rel err %.3g (bound %.3g)\n", what, r, tol);
    if (!(r <= tol)) {
        fail_msg("%s: relative error %g > %g", what, r, tol);
    }
    free(got);
}

static inline void t16_expect_h(zb_cu_ctx_t *c, const char *what, const zb_bf16_t *d,
                                const float *ref, size_t n, double tol)
{
    t16_expect(what, t16_down_h(c, d, n), ref, n, tol);
}

static inline void t16_expect_f(zb_cu_ctx_t *c, const char *what, const float *d,
                                const float *ref, size_t n, double tol)
{
    t16_expect(what, t16_down_f(c, d, n), ref, n, tol);
}

/* The same bytes on the device after two launches of one kernel (determinism). */
static inline void t16_expect_same_bytes(zb_cu_ctx_t *c, const char *what, const void *d1,
                                         const void *d2, size_t bytes)
{
    t16_sync(c, what);
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    assert_int_equal(cudaMemcpy(a, d1, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(b, d2, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    int same = memcmp(a, b, bytes) == 0;
    printf("  %-44s %s\n", what, same ? "same bits twice" : "DIFFERENT bits");
    free(a), free(b);
    if (!same)
        fail_msg("%s: two launches on the same inputs gave different bits", what);
}

/* The tests' one context (bf16 precision, device 0): made by the group setup, freed with every
 * device buffer by the group teardown. */
static zb_cu_ctx_t ctx;

static int t16_setup(void **state)
{
    (void)state;
    zb_err_t e;
    if (zb_cu_ctx_init(&ctx, 0, ZB_CUDA_BF16, &e) != ZB_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    return 0;
}

static int t16_teardown(void **state)
{
    (void)state;
    t16_free_all();
    zb_cu_ctx_destroy(&ctx);
    return 0;
}

#endif
