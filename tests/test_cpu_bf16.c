/* bf16 matrix products on the CPU (docs/compute.md, "bf16 on the CPU"). With the products
 * emulated (the test hook, so this runs on any CPU):
 *   - the operands are rounded exactly as util/bf16.h (and the GPU) round, NaN and ties included;
 *   - each linear-layer product (forward, B, W with beta 1) equals the exact sum of the rounded
 *     operands' products to within fp32 accumulation, and stays within the bf16 bound of the fp32
 *     product; the fp32 product fails the first check (so an fp32 path in disguise is caught);
 *   - attention's products are rounded too (its output is not fp32's);
 *   - the tiled product gives the same bits with no worker group and with 3 threads;
 *   - the same through oneDNN's code (its fp32 matmul on the rounded operands: the "onednn-f32"
 *     hook), where zbpp was built with oneDNN;
 *   - the weight cache (weights rounded once a step) gives the uncached products' bits, serves
 *     a weight's rounding within a span and rounds it again in the next one.
 * On a CPU where bf16 runs for real (oneDNN on AVX512-BF16/AMX) the real products pass the same
 * checks and agree with the emulation; elsewhere that test is skipped and says why. */
#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn/gemm.h"
#include "util/bf16.h"
#include "zbpp/nn.h"
#include "zbpp/workers.h"

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static float *rand_vec(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = frand(&seed);
    return v;
}

static void use_emulation(void)
{
    zb_err_t e;
    setenv(ZB_CPU_BF16_TEST_ENV, "emulate", 1);
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e), ZB_OK);
    assert_int_equal(zb_cpu_gemm_precision(), ZB_CPU_GEMM_BF16);
    assert_non_null(strstr(zb_cpu_bf16_backend(), "emulated"));
}

/* oneDNN's own code on the rounded operands (its fp32 matmul): descriptors, transposes, alpha,
 * beta, the primitive table, threads; false where zbpp was built without oneDNN */
static bool onednn_f32_available(void)
{
    zb_err_t e;
    setenv(ZB_CPU_BF16_TEST_ENV, "onednn-f32", 1);
    bool ok = zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e) == ZB_OK;
    if (!ok)
        printf("oneDNN test mode skipped: %s\n", e.msg);
    unsetenv(ZB_CPU_BF16_TEST_ENV);
    zb_cpu_gemm_set_precision(ZB_CPU_GEMM_FP32, &e);
    return ok;
}

static void use_onednn_f32(void)
{
    zb_err_t e;
    setenv(ZB_CPU_BF16_TEST_ENV, "onednn-f32", 1);
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e), ZB_OK);
    assert_non_null(strstr(zb_cpu_bf16_backend(), "oneDNN"));
}

static void use_real(void)
{
    zb_err_t e;
    unsetenv(ZB_CPU_BF16_TEST_ENV);
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e), ZB_OK);
}

static void use_fp32(void)
{
    zb_err_t e;
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_FP32, &e), ZB_OK);
    unsetenv(ZB_CPU_BF16_TEST_ENV);
}

static void rounding_as_the_gpu(void **state)
{
    (void)state;
    float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f /* 1 + 2^-8: tie, stays 1 */,
                       1.01171875f /* 1 + 3·2^-8: tie, rounds up to even */, 3.4e38f, -3.4e38f,
                       INFINITY, -INFINITY, NAN, -NAN, 1e-40f /* subnormal */, 65504.0f};
    enum { NS = sizeof special / sizeof special[0], NR = 4096 };
    float src[NS + NR];
    memcpy(src, special, sizeof special);
    unsigned seed = 7;
    for (int i = 0; i < NR; i++) { /* random bit patterns: every exponent, NaNs included */
        seed = seed * 1664525u + 1013904223u;
        memcpy(&src[NS + i], &seed, sizeof seed);
    }
    uint16_t got[NS + NR];
    zb_bf16_pack(got, src, 1, NS + NR, NS + NR);
    for (int i = 0; i < NS + NR; i++)
        assert_int_equal(got[i], zb_bf16_from_f32(src[i]));
    assert_int_equal(got[4], 0x3f80);
    assert_int_equal(got[5], 0x3f82);
}

/* Per element of C = op(A)·op(B) (A: M x K, B: N x K stored, i.e. C = A·B^T): the exact sum
 * of the rounded operands' products, fp32's exact sum, and the sum of magnitudes. */
typedef struct {
    double *exact16, *exact32, *mag;
} ref_t;

static ref_t reference(const float *A, const float *B, int M, int N, int K)
{
    ref_t r = {malloc((size_t)M * N * sizeof(double)), malloc((size_t)M * N * sizeof(double)),
               malloc((size_t)M * N * sizeof(double))};
    assert_true(r.exact16 && r.exact32 && r.mag);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s16 = 0, s32 = 0, m = 0;
            for (int k = 0; k < K; k++) {
                float a = A[(size_t)i * K + k], b = B[(size_t)j * K + k];
                s16 += (double)zb_bf16_round(a) * zb_bf16_round(b);
                s32 += (double)a * b;
                m += fabs((double)a * b);
            }
            r.exact16[(size_t)i * N + j] = s16, r.exact32[(size_t)i * N + j] = s32;
            r.mag[(size_t)i * N + j] = m;
        }
    return r;
}

static void ref_free(ref_t *r)
{
    free(r->exact16), free(r->exact32), free(r->mag);
}

/* The bounds, relative to the sum of magnitudes: fp32 accumulation of K terms (a generous
 * K·2^-23, plus the final rounding), and bf16's rounding of both operands (2·2^-9 = 2^-8). */
static double accum_bound(int K) { return (K + 2) * 0x1p-23; }
#define BF16_BOUND 0x1p-8

/* Whether every element of C (minus `base`, what C held before) is the bf16 product. */
static int is_bf16_product(const float *C, const float *base, const ref_t *r, int n, int K)
{
    for (int i = 0; i < n; i++) {
        double c = (double)C[i] - (base ? base[i] : 0.0);
        if (fabs(c - r->exact16[i]) > accum_bound(K) * r->mag[i] + 1e-30)
            return 0;
    }
    return 1;
}

static void assert_near_fp32(const float *C, const float *base, const ref_t *r, int n)
{
    for (int i = 0; i < n; i++) {
        double c = (double)C[i] - (base ? base[i] : 0.0);
        assert_true(fabs(c - r->exact32[i]) <= BF16_BOUND * r->mag[i]);
    }
}

/* out = inp · weight^T for a shape (tiled when M·N·K is large enough: zb_sgemm_tile_count) in
 * the bf16 mode `use` turns on. */
static void check_forward(int M, int N, int K, void (*use)(void))
{
    float *inp = rand_vec((size_t)M * K, 1), *w = rand_vec((size_t)N * K, 2);
    float *out = malloc((size_t)M * N * sizeof(float));
    ref_t r = reference(inp, w, M, N, K);
    zb_matmul_forward(out, inp, w, NULL, M, K, N);
    assert_true(is_bf16_product(out, NULL, &r, M * N, K));
    assert_near_fp32(out, NULL, &r, M * N);
    /* the fp32 product is not a bf16 product: this check catches a path that skips rounding */
    use_fp32();
    zb_matmul_forward(out, inp, w, NULL, M, K, N);
    assert_false(is_bf16_product(out, NULL, &r, M * N, K));
    use();
    ref_free(&r);
    free(inp), free(w), free(out);
}

static void linear_products_in(void (*use)(void))
{
    use();
    assert_int_equal(zb_sgemm_tile_count(48, 40, 96), 1);
    assert_true(zb_sgemm_tile_count(256, 512, 64) > 1);
    check_forward(48, 40, 96, use);   /* one call */
    check_forward(256, 512, 64, use); /* tiled */

    /* B: dinp[N,C] += dout[N,OC] · weight[OC,C]; W: dweight[OC,C] += dout^T · inp, both
     * accumulating (beta 1) into what was there */
    int N = 64, C = 48, OC = 80;
    float *dout = rand_vec((size_t)N * OC, 3), *w = rand_vec((size_t)OC * C, 4);
    float *inp = rand_vec((size_t)N * C, 5);
    float *dinp = rand_vec((size_t)N * C, 6), *dinp0 = malloc((size_t)N * C * sizeof(float));
    float *dw = rand_vec((size_t)OC * C, 7), *dw0 = malloc((size_t)OC * C * sizeof(float));
    memcpy(dinp0, dinp, (size_t)N * C * sizeof(float));
    memcpy(dw0, dw, (size_t)OC * C * sizeof(float));
    /* the references as A·B^T products: B^T of weight, and of dout / inp for W */
    float *wt = malloc((size_t)OC * C * sizeof(float)), *doutt = malloc((size_t)N * OC * sizeof(float));
    float *inpt = malloc((size_t)N * C * sizeof(float));
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++)
            wt[(size_t)c * OC + o] = w[(size_t)o * C + c];
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++)
            doutt[(size_t)o * N + n] = dout[(size_t)n * OC + o];
        for (int c = 0; c < C; c++)
            inpt[(size_t)c * N + n] = inp[(size_t)n * C + c];
    }
    ref_t rb = reference(dout, wt, N, C, OC), rw = reference(doutt, inpt, OC, C, N);
    zb_matmul_backward_input(dinp, dout, w, N, C, OC);
    zb_matmul_backward_weight(dw, NULL, dout, inp, N, C, OC);
    /* the accumulated value adds one more fp32 rounding of |C| ≤ the bound's slack */
    assert_true(is_bf16_product(dinp, dinp0, &rb, N * C, OC + 8));
    assert_true(is_bf16_product(dw, dw0, &rw, OC * C, N + 8));
    assert_near_fp32(dinp, dinp0, &rb, N * C);
    assert_near_fp32(dw, dw0, &rw, OC * C);
    ref_free(&rb), ref_free(&rw);
    free(dout), free(w), free(inp), free(dinp), free(dinp0), free(dw), free(dw0);
    free(wt), free(doutt), free(inpt);
    use_fp32();
}

static void linear_products(void **state)
{
    (void)state;
    linear_products_in(use_emulation);
}

/* Threads of this process (/proc/self/status), or -1. */
static int process_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static void linear_products_onednn(void **state)
{
    (void)state;
    if (!onednn_f32_available())
        skip();
    /* each oneDNN call runs on its caller alone: no OpenMP team appears (libgomp keeps one
     * alive once made), which also keeps the tiles' bits independent of the core count */
    int before = process_threads();
    linear_products_in(use_onednn_f32);
    use_onednn_f32();
    check_forward(512, 1024, 256, use_onednn_f32); /* large enough that oneDNN would share it */
    use_fp32();
    assert_int_equal(process_threads(), before);
}

static void attention_products(void **state)
{
    (void)state;
    int B = 1, T = 32, C = 32, NH = 2;
    float *qkv = rand_vec((size_t)B * T * 3 * C, 8);
    float *att = malloc((size_t)B * NH * T * T * sizeof(float));
    float *o32 = malloc((size_t)B * T * C * sizeof(float)), *o16 = malloc((size_t)B * T * C * sizeof(float));
    zb_attention_forward(o32, att, qkv, B, T, C, NH);
    use_emulation();
    zb_attention_forward(o16, att, qkv, B, T, C, NH);
    use_fp32();
    double diff = 0;
    for (int i = 0; i < B * T * C; i++) {
        assert_true(fabsf(o16[i] - o32[i]) <= 0.02f); /* |q·k|, |v| < 1: bf16's few ulps */
        diff = fmax(diff, fabsf(o16[i] - o32[i]));
    }
    assert_true(diff > 1e-6); /* rounded, not fp32 */
    free(qkv), free(att), free(o32), free(o16);
}

static void same_bits_in(void (*use)(void))
{
    int M = 256, N = 512, K = 64;
    assert_true(zb_sgemm_tile_count(M, N, K) > 1);
    float *inp = rand_vec((size_t)M * K, 9), *w = rand_vec((size_t)N * K, 10);
    float *a = malloc((size_t)M * N * sizeof(float)), *b = malloc((size_t)M * N * sizeof(float));
    use();
    zb_matmul_forward(a, inp, w, NULL, M, K, N);
    zb_workers_t *group;
    zb_err_t e;
    assert_int_equal(zb_workers_new(3, NULL, &group, &e), ZB_OK);
    zb_workers_t *prev = zb_workers_enter(group);
    zb_matmul_forward(b, inp, w, NULL, M, K, N);
    zb_workers_enter(prev);
    zb_workers_free(group);
    use_fp32();
    assert_memory_equal(a, b, (size_t)M * N * sizeof(float));
    free(inp), free(w), free(a), free(b);
}

static void same_bits_any_threads(void **state)
{
    (void)state;
    same_bits_in(use_emulation);
    if (onednn_f32_available())
        same_bits_in(use_onednn_f32);
}

static void refused_without_instructions(void **state)
{
    (void)state;
    unsetenv(ZB_CPU_BF16_TEST_ENV);
    zb_err_t e;
    if (zb_cpu_features() & (ZB_CPU_AVX512_BF16 | ZB_CPU_AMX_BF16))
        skip(); /* this CPU has them: real_products covers it */
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e), ZB_EUNSUPPORTED);
    assert_non_null(strstr(e.msg, "no AVX512-BF16 or AMX-BF16"));
    assert_int_equal(zb_cpu_gemm_precision(), ZB_CPU_GEMM_FP32); /* left as it was */
    assert_string_equal(zb_cpu_bf16_backend(), "");
}

static void real_products(void **state)
{
    (void)state;
    unsetenv(ZB_CPU_BF16_TEST_ENV);
    zb_err_t e;
    if (zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e) != ZB_OK) {
        printf("real bf16 products skipped: %s\n", e.msg);
        skip();
    }
    printf("bf16 products: %s\n", zb_cpu_bf16_backend());
    int M = 256, N = 512, K = 64;
    float *inp = rand_vec((size_t)M * K, 11), *w = rand_vec((size_t)N * K, 12);
    float *real = malloc((size_t)M * N * sizeof(float)), *emu = malloc((size_t)M * N * sizeof(float));
    ref_t r = reference(inp, w, M, N, K);
    zb_matmul_forward(real, inp, w, NULL, M, K, N);
    assert_true(is_bf16_product(real, NULL, &r, M * N, K));
    assert_near_fp32(real, NULL, &r, M * N);
    use_emulation();
    zb_matmul_forward(emu, inp, w, NULL, M, K, N);
    use_fp32();
    for (int i = 0; i < M * N; i++)
        assert_true(fabs((double)real[i] - emu[i]) <= 2 * accum_bound(K) * r.mag[i]);
    ref_free(&r);
    free(inp), free(w), free(real), free(emu);
    /* one call, and the tiled shape through the real backend */
    use_real();
    check_forward(48, 40, 96, use_real);
    check_forward(256, 512, 64, use_real);
    use_fp32();
}

/* F and B of one linear layer (one call and tiled) in bf16, under an open weight cache: the
 * same bits as without it. Within a span the cache serves the weight's first rounding (a
 * weight changed inside the span, against the contract, is not seen: so the cache is used); the
 * next span rounds it again. */
static void weight_cache_in(int M, int N, int K)
{
    float *inp = rand_vec((size_t)M * K, 21), *w = rand_vec((size_t)N * K, 22);
    float *dout = rand_vec((size_t)M * N, 23);
    size_t out_n = (size_t)M * N, din_n = (size_t)M * K;
    float *out0 = malloc(out_n * sizeof(float)), *out1 = malloc(out_n * sizeof(float));
    float *din0 = calloc(din_n, sizeof(float)), *din1 = calloc(din_n, sizeof(float));
    float *w_new = rand_vec((size_t)N * K, 24);
    zb_matmul_forward(out0, inp, w, NULL, M, K, N); /* no cache open */
    zb_matmul_backward_input(din0, dout, w, M, K, N);
    zb_bf16_weight_cache_t *cache = NULL;
    zb_bf16_weight_cache_open(&cache);
    assert_non_null(cache);
    zb_matmul_forward(out1, inp, w, NULL, M, K, N);
    zb_matmul_backward_input(din1, dout, w, M, K, N); /* the same weight, read as B's operand */
    assert_memory_equal(out0, out1, out_n * sizeof(float));
    assert_memory_equal(din0, din1, din_n * sizeof(float));
    memcpy(w, w_new, (size_t)N * K * sizeof(float)); /* inside the span: not seen */
    zb_matmul_forward(out1, inp, w, NULL, M, K, N);
    assert_memory_equal(out0, out1, out_n * sizeof(float));
    zb_bf16_weight_cache_close();
    zb_matmul_forward(out0, inp, w, NULL, M, K, N); /* the new weight, uncached */
    assert_memory_not_equal(out0, out1, out_n * sizeof(float));
    zb_bf16_weight_cache_open(&cache);             /* the next span sees it */
    zb_matmul_forward(out1, inp, w, NULL, M, K, N);
    zb_bf16_weight_cache_close();
    assert_memory_equal(out0, out1, out_n * sizeof(float));
    zb_bf16_weight_cache_free(cache);
    free(inp), free(w), free(dout), free(out0), free(out1), free(din0), free(din1), free(w_new);
}

static void weight_cache(void **state)
{
    (void)state;
    zb_bf16_weight_cache_t *cache = NULL;
    zb_bf16_weight_cache_open(&cache); /* fp32: nothing to cache */
    assert_null(cache);
    zb_bf16_weight_cache_close();
    use_emulation();
    weight_cache_in(48, 40, 96);   /* one call */
    weight_cache_in(256, 512, 64); /* tiled */
    if (onednn_f32_available()) {
        use_onednn_f32();
        weight_cache_in(256, 512, 64);
    }
    zb_err_t e;
    unsetenv(ZB_CPU_BF16_TEST_ENV);
    if (zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e) == ZB_OK) /* where bf16 runs for real */
        weight_cache_in(256, 512, 64);
    use_fp32();
}

/* zb_cpu_bf16_speed: nothing measured in fp32; a positive, finite ratio in a bf16 mode, measured
 * once (the same value when asked again); where bf16 runs for real, printed. */
static void speed_measured(void **state)
{
    (void)state;
    assert_true(zb_cpu_bf16_speed() == 0.0);
    use_emulation();
    double s = zb_cpu_bf16_speed();
    assert_true(s > 0 && isfinite(s));
    assert_true(zb_cpu_bf16_speed() == s);
    use_fp32();
    assert_true(zb_cpu_bf16_speed() == 0.0);
    zb_err_t e;
    if (zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e) == ZB_OK) {
        double real = zb_cpu_bf16_speed();
        assert_true(real > 0 && isfinite(real));
        printf("bf16 products here: %.2fx fp32's rate (%s)\n", real, zb_cpu_bf16_backend());
    }
}

/* Each test starts in fp32 with no hook, whatever a failed one left behind. */
static int reset(void **state)
{
    (void)state;
    zb_err_t e;
    unsetenv(ZB_CPU_BF16_TEST_ENV);
    return zb_cpu_gemm_set_precision(ZB_CPU_GEMM_FP32, &e) == ZB_OK ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(rounding_as_the_gpu, reset),
        cmocka_unit_test_setup(linear_products, reset),
        cmocka_unit_test_setup(linear_products_onednn, reset),
        cmocka_unit_test_setup(attention_products, reset),
        cmocka_unit_test_setup(same_bits_any_threads, reset),
        cmocka_unit_test_setup(refused_without_instructions, reset),
        cmocka_unit_test_setup(real_products, reset),
        cmocka_unit_test_setup(speed_measured, reset),
        cmocka_unit_test_setup(weight_cache, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
