/* bf16 kernels (label gpu): every launcher of src/cuda/kernels_bf16.h against the CPU fp32
 * kernels of include/zbpp/nn.h on the same bf16-rounded inputs. Bounds (cuda_bf16_testutil.h):
 * a bf16 output within BF16_TOL = 2^-8 + 1e-5 of the scale (one rounding of the fp32 result);
 * fp32 outputs (statistics, losses, weight-gradient partials) within 1e-5 as in the fp32 tests;
 * conversions, the embedding and the residual add bit for bit (one rounding of an exact fp32
 * sum); the reductions give the same bits twice. Rows of 64, 776 (a partly filled register
 * group) and 2112 channels (over 2048: the looped LayerNorm), a vocabulary of 50257 padded to
 * 50304, and odd sizes that take the scalar paths. Skipped (exit 77) without a CUDA device. */
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

#include "cuda/kernels.h"
#include "cuda_bf16_testutil.h"
#include "zbpp/nn.h"

static float *zeros(size_t n)
{
    return calloc(n, sizeof(float));
}

static float *copy_of(const float *x, size_t n)
{
    float *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* ---- conversions ---- */

static void check_conversions(size_t n, size_t offset, const char *what)
{
    float *src = malloc((n + offset) * sizeof(float));
    fill_random(src, n + offset, 1, 3.0f);
    /* ties (round to even both ways), signed zero, infinities, subnormals, the largest float */
    const float special[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -1.0f - 0x1p-8f, -0.0f,
                             INFINITY,       -INFINITY,          0x1p-130f,       -0x1p-140f,
                             3.4028235e38f,  65504.5f};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && i < n; i++)
        src[offset + i] = special[i];
    float *d_src = t16_dev_f(src, n + offset);
    zb_bf16_t *d_h = t16_dev_alloc((n + offset) * sizeof(zb_bf16_t));
    float *d_back = t16_dev_alloc((n + offset) * sizeof(float));
    zb_cuk16_from_f32(ctx.stream, d_h + offset, d_src + offset, n);
    zb_cuk16_to_f32(ctx.stream, d_back + offset, d_h + offset, n);
    t16_sync(&ctx, what);
    zb_bf16_t *bits = malloc(n * sizeof *bits);
    assert_int_equal(
        cudaMemcpy(bits, d_h + offset, n * sizeof *bits, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += bits[i] != zb_bf16_from_f32(src[offset + i]);
    printf("  %-44s %zu of %zu differ from the host rounding\n", what, wrong, n);
    assert_int_equal(wrong, 0);
    float *expect = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        expect[i] = zb_bf16_to_f32(bits[i]);
    t16_expect_f(&ctx, "  ... and back to fp32", d_back + offset, expect, n, -1);
    free(src), free(bits), free(expect);
}

static void test_conversions(void **state)
{
    (void)state;
    check_conversions(4096, 0, "from_f32 (vector path)");
    check_conversions(1001, 1, "from_f32 (odd size, unaligned: scalar path)");
}

/* ---- embedding ---- */

static void test_encoder(void **state)
{
    (void)state;
    enum { B = 3, T = 24, C = 64, V = 50 };
    int tok[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (i * 37 + 11) % V;
    float *wte = malloc((size_t)V * C * 4), *wpe = malloc((size_t)T * C * 4);
    fill_random(wte, (size_t)V * C, 2, 1), fill_random(wpe, (size_t)T * C, 3, 1);
    size_t n = (size_t)B * T * C;
    float *out = malloc(n * 4);
    zb_encoder_forward(out, tok, wte, wpe, B, T, C);
    for (size_t i = 0; i < n; i++)
        out[i] = zb_bf16_round(out[i]); /* the fp32 sum is exact on both sides */
    zb_bf16_t *d_out = t16_dev_alloc(n * 2);
    zb_cuk16_encoder_forward(ctx.stream, d_out, t16_upload(tok, sizeof tok),
                             t16_dev_f(wte, (size_t)V * C), t16_dev_f(wpe, (size_t)T * C), B, T,
                             C);
    t16_expect_h(&ctx, "encoder forward", d_out, out, n, -1);
    free(wte), free(wpe), free(out);
}

/* ---- residual add + LayerNorm, forward and backward ---- */

static void check_layernorm(int N, int C)
{
    char what[96];
    size_t n = (size_t)N * C;
    float *a = t16_rnd(n, 10, 3), *b = t16_rnd(n, 11, 1);
    for (size_t i = 0; i < n; i++)
        a[i] = zb_bf16_round(a[i] + 5.0f); /* a mean far from 0 */
    float *w = malloc(C * 4), *bias = malloc(C * 4);
    fill_random(w, C, 12, 1), fill_random(bias, C, 13, 1);
    float *x = malloc(n * 4), *out = malloc(n * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = zb_bf16_round(a[i] + b[i]);
    zb_layernorm_forward(out, mean, rstd, x, w, bias, N, C);

    zb_bf16_t *d_a = t16_dev_h(a, n), *d_b = t16_dev_h(b, n);
    float *d_w = t16_dev_f(w, C), *d_bias = t16_dev_f(bias, C);
    zb_bf16_t *d_res = t16_dev_alloc(n * 2), *d_ln = t16_dev_alloc(n * 2),
              *d_ln2 = t16_dev_alloc(n * 2);
    float *d_mean = t16_dev_alloc(N * 4), *d_rstd = t16_dev_alloc(N * 4),
          *d_mean2 = t16_dev_alloc(N * 4), *d_rstd2 = t16_dev_alloc(N * 4);
    zb_cuk16_residual_layernorm_forward(ctx.stream, d_res, d_ln, d_mean, d_rstd, d_a, d_b, d_w,
                                        d_bias, N, C);
    snprintf(what, sizeof what, "residual+layernorm C=%d: residual", C);
    t16_expect_h(&ctx, what, d_res, x, n, -1);
    snprintf(what, sizeof what, "residual+layernorm C=%d: out", C);
    t16_expect_h(&ctx, what, d_ln, out, n, BF16_TOL);
    snprintf(what, sizeof what, "residual+layernorm C=%d: mean", C);
    t16_expect_f(&ctx, what, d_mean, mean, N, FP32_ORDER);
    snprintf(what, sizeof what, "residual+layernorm C=%d: rstd", C);
    t16_expect_f(&ctx, what, d_rstd, rstd, N, FP32_ORDER);
    /* no residual and no residual output: LayerNorm of x alone */
    zb_cuk16_residual_layernorm_forward(ctx.stream, NULL, d_ln2, d_mean2, d_rstd2, d_res, NULL,
                                        d_w, d_bias, N, C);
    snprintf(what, sizeof what, "layernorm C=%d (no residual): out", C);
    t16_expect_h(&ctx, what, d_ln2, out, n, BF16_TOL);
    zb_cuk16_residual_layernorm_forward(ctx.stream, d_res, d_ln2, d_mean2, d_rstd2, d_a, d_b, d_w,
                                        d_bias, N, C);
    snprintf(what, sizeof what, "residual+layernorm C=%d twice", C);
    t16_expect_same_bytes(&ctx, what, d_ln, d_ln2, n * 2);
    t16_expect_same_bytes(&ctx, what, d_rstd, d_rstd2, N * 4);
    /* in place: the residual stream a += b */
    zb_bf16_t *d_stream = t16_dev_h(a, n);
    zb_cuk16_residual_layernorm_forward(ctx.stream, d_stream, d_ln2, d_mean2, d_rstd2, d_stream,
                                        d_b, d_w, d_bias, N, C);
    snprintf(what, sizeof what, "residual+layernorm C=%d in place: residual", C);
    t16_expect_h(&ctx, what, d_stream, x, n, -1);
    snprintf(what, sizeof what, "residual+layernorm C=%d in place: out", C);
    t16_expect_same_bytes(&ctx, what, d_ln, d_ln2, n * 2);

    /* backward from the CPU's statistics, so only the backward differs */
    float *dres = t16_rnd(n, 14, 1), *dout = t16_rnd(n, 15, 1);
    float *dinp = copy_of(dres, n), *dinp_nores = zeros(n);
    zb_layernorm_backward_input(dinp, dout, x, mean, rstd, w, N, C);
    zb_layernorm_backward_input(dinp_nores, dout, x, mean, rstd, w, N, C);
    zb_bf16_t *d_x = t16_dev_h(x, n), *d_dres = t16_dev_h(dres, n), *d_dout = t16_dev_h(dout, n);
    float *d_cm = t16_dev_f(mean, N), *d_cr = t16_dev_f(rstd, N);
    zb_bf16_t *d_dinp = t16_dev_alloc(n * 2), *d_dinp2 = t16_dev_alloc(n * 2);
    zb_cuk16_layernorm_backward_input(ctx.stream, d_dinp, d_dres, d_dout, d_x, d_cm, d_cr, d_w, N,
                                      C);
    snprintf(what, sizeof what, "layernorm backward_input C=%d (+ residual)", C);
    t16_expect_h(&ctx, what, d_dinp, dinp, n, BF16_TOL);
    zb_cuk16_layernorm_backward_input(ctx.stream, d_dinp2, d_dres, d_dout, d_x, d_cm, d_cr, d_w,
                                      N, C);
    snprintf(what, sizeof what, "layernorm backward_input C=%d twice", C);
    t16_expect_same_bytes(&ctx, what, d_dinp, d_dinp2, n * 2);
    zb_cuk16_layernorm_backward_input(ctx.stream, d_dinp2, NULL, d_dout, d_x, d_cm, d_cr, d_w, N,
                                      C);
    snprintf(what, sizeof what, "layernorm backward_input C=%d (no residual)", C);
    t16_expect_h(&ctx, what, d_dinp2, dinp_nores, n, BF16_TOL);
    /* in place on the residual gradient, then on the output gradient */
    zb_bf16_t *d_inplace = t16_dev_h(dres, n);
    zb_cuk16_layernorm_backward_input(ctx.stream, d_inplace, d_inplace, d_dout, d_x, d_cm, d_cr,
                                      d_w, N, C);
    snprintf(what, sizeof what, "layernorm backward_input C=%d in place (dres)", C);
    t16_expect_same_bytes(&ctx, what, d_dinp, d_inplace, n * 2);
    zb_bf16_t *d_dout_copy = t16_dev_h(dout, n);
    zb_cuk16_layernorm_backward_input(ctx.stream, d_dout_copy, d_dres, d_dout_copy, d_x, d_cm,
                                      d_cr, d_w, N, C);
    snprintf(what, sizeof what, "layernorm backward_input C=%d in place (dout)", C);
    t16_expect_same_bytes(&ctx, what, d_dinp, d_dout_copy, n * 2);

    /* weight gradients: fixed chunks of rows, then the in-order finish (+= on the gradients) */
    float *dw = malloc(C * 4), *db = malloc(C * 4);
    fill_random(dw, C, 16, 1), fill_random(db, C, 17, 1);
    float *d_dw = t16_dev_f(dw, C), *d_db = t16_dev_f(db, C);
    zb_layernorm_backward_weight(dw, db, dout, x, mean, rstd, N, C);
    int chunks = zb_cu_colsum_chunks(N);
    float *d_pw = t16_dev_alloc((size_t)chunks * C * 4), *d_pb = t16_dev_alloc((size_t)chunks * C * 4),
          *d_pw2 = t16_dev_alloc((size_t)chunks * C * 4);
    zb_cuk16_layernorm_weight_partials(ctx.stream, d_pw, d_pb, d_dout, d_x, d_cm, d_cr, N, C);
    zb_cuk_colsum_finish(ctx.stream, d_dw, d_pw, chunks, C);
    zb_cuk_colsum_finish(ctx.stream, d_db, d_pb, chunks, C);
    snprintf(what, sizeof what, "layernorm weight partials C=%d: dweight", C);
    t16_expect_f(&ctx, what, d_dw, dw, C, FP32_ORDER);
    snprintf(what, sizeof what, "layernorm weight partials C=%d: dbias", C);
    t16_expect_f(&ctx, what, d_db, db, C, FP32_ORDER);
    zb_cuk16_layernorm_weight_partials(ctx.stream, d_pw2, d_pb, d_dout, d_x, d_cm, d_cr, N, C);
    snprintf(what, sizeof what, "layernorm weight partials C=%d twice", C);
    t16_expect_same_bytes(&ctx, what, d_pw, d_pw2, (size_t)chunks * C * 4);

    free(a), free(b), free(w), free(bias), free(x), free(out), free(mean), free(rstd);
    free(dres), free(dout), free(dinp), free(dinp_nores), free(dw), free(db);
}

static void test_layernorm(void **state)
{
    (void)state;
    check_layernorm(72, 64);
    check_layernorm(37, 776);
    check_layernorm(5, 2112);
}

/* A row the 128-bit kernels cannot take is refused at launch, not half computed. */
static void test_layernorm_refuses_odd_rows(void **state)
{
    (void)state;
    enum { N = 4, C = 12 };
    zb_bf16_t *d = t16_dev_alloc(N * C * 2), *o = t16_dev_alloc(N * C * 2);
    float *f = t16_dev_alloc(C * 4), *s = t16_dev_alloc(N * 4);
    t16_sync(&ctx, "before");
    zb_cuk16_residual_layernorm_forward(ctx.stream, NULL, o, s, s, d, NULL, f, f, N, C);
    cudaError_t fwd = cudaGetLastError();
    zb_cuk16_layernorm_backward_input(ctx.stream, o, NULL, d, d, s, s, f, N, C);
    cudaError_t bwd = cudaGetLastError();
    /* the empty-grid launch fails as "invalid argument" on CUDA 13 (seen on an H100) */
    assert_int_not_equal(fwd, cudaSuccess);
    assert_int_not_equal(bwd, cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(ctx.stream), cudaSuccess); /* nothing ran, nothing broke */
    printf("  C=%d: both LayerNorm launches refused (%s, %s)\n", C, cudaGetErrorString(fwd),
           cudaGetErrorString(bwd));
}

/* ---- bias-gradient column sums ---- */

static void test_colsum(void **state)
{
    (void)state;
    const struct {
        int N, OC;
    } shapes[] = {{72, 192}, {70, 100}}; /* 100: not a multiple of 8 (scalar path) */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s].N, OC = shapes[s].OC, chunks = zb_cu_colsum_chunks(N);
        float *a = t16_rnd((size_t)N * OC, 20 + s, 1), *db = malloc(OC * 4);
        fill_random(db, OC, 22 + s, 1);
        float *d_db = t16_dev_f(db, OC);
        for (int j = 0; j < OC; j++) {
            double sum = 0.0;
            for (int i = 0; i < N; i++)
                sum += a[(size_t)i * OC + j];
            db[j] += (float)sum;
        }
        zb_bf16_t *d_a = t16_dev_h(a, (size_t)N * OC);
        float *d_p = t16_dev_alloc((size_t)chunks * OC * 4),
              *d_p2 = t16_dev_alloc((size_t)chunks * OC * 4);
        zb_cuk16_colsum_partials(ctx.stream, d_p, d_a, N, OC);
        zb_cuk_colsum_finish(ctx.stream, d_db, d_p, chunks, OC);
        char what[64];
        snprintf(what, sizeof what, "colsum partials %dx%d", N, OC);
        t16_expect_f(&ctx, what, d_db, db, OC, FP32_ORDER);
        zb_cuk16_colsum_partials(ctx.stream, d_p2, d_a, N, OC);
        t16_expect_same_bytes(&ctx, "  ... twice", d_p, d_p2, (size_t)chunks * OC * 4);
        free(a), free(db);
    }
}

/* ---- elementwise ---- */

static void test_gelu_residual(void **state)
{
    (void)state;
    size_t sizes[] = {72 * 256, 1001};
    for (size_t s = 0; s < 2; s++) {
        size_t n = sizes[s];
        const char *path = s == 0 ? "" : " (odd size)";
        char what[64];
        float *x = t16_rnd(n, 30, 4), *y = t16_rnd(n, 31, 1), *out = malloc(n * 4);
        zb_bf16_t *d_x = t16_dev_h(x, n), *d_y = t16_dev_h(y, n), *d_o = t16_dev_alloc(n * 2);
        zb_gelu_forward(out, x, n);
        zb_cuk16_gelu_forward(ctx.stream, d_o, d_x, n);
        snprintf(what, sizeof what, "gelu forward%s", path);
        t16_expect_h(&ctx, what, d_o, out, n, BF16_TOL);
        float *dx = zeros(n);
        zb_gelu_backward_input(dx, x, y, n);
        zb_cuk16_gelu_backward_input(ctx.stream, d_o, d_x, d_y, n);
        snprintf(what, sizeof what, "gelu backward_input%s", path);
        t16_expect_h(&ctx, what, d_o, dx, n, BF16_TOL);
        for (size_t i = 0; i < n; i++)
            out[i] = zb_bf16_round(x[i] + y[i]);
        zb_cuk16_residual_forward(ctx.stream, d_o, d_x, d_y, n);
        snprintf(what, sizeof what, "residual forward%s", path);
        t16_expect_h(&ctx, what, d_o, out, n, -1);
        free(x), free(y), free(out), free(dx);
    }
}

/* ---- the fused classifier ---- */

static void check_crossentropy(int N, int V, int Vp, float scale)
{
    size_t n = (size_t)N * Vp;
    float *logits = t16_rnd(n, 50 + V, scale);
    for (int i = 0; i < N; i++)
        for (int j = V; j < Vp; j++)
            logits[(size_t)i * Vp + j] = 1e4f; /* padding the kernel must not read */
    int *tgt = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        tgt[i] = (i * 29 + 3) % V;
    const float dloss = 0.37f;
    float *probs = copy_of(logits, n), *losses = malloc(N * 4);
    zb_crossentropy_forward(losses, probs, tgt, N, V, Vp);
    zb_crossentropy_backward(probs, tgt, dloss, N, V, Vp);
    zb_bf16_t *d_l = t16_dev_h(logits, n), *d_l2 = t16_dev_h(logits, n);
    int *d_tgt = t16_upload(tgt, N * sizeof(int));
    float *d_loss = t16_dev_alloc(N * 4), *d_loss2 = t16_dev_alloc(N * 4);
    zb_cuk16_crossentropy_fused(ctx.stream, d_loss, d_l, d_tgt, dloss, N, V, Vp);
    char what[80];
    snprintf(what, sizeof what, "crossentropy V=%d Vp=%d: losses", V, Vp);
    t16_expect_f(&ctx, what, d_loss, losses, N, FP32_ORDER);
    float *grad = t16_down_h(&ctx, d_l, n);
    size_t pad_nonzero = 0;
    for (int i = 0; i < N; i++)
        for (int j = V; j < Vp; j++)
            pad_nonzero += grad[(size_t)i * Vp + j] != 0.0f;
    assert_int_equal(pad_nonzero, 0);
    snprintf(what, sizeof what, "crossentropy V=%d Vp=%d: dlogits in place", V, Vp);
    t16_expect(what, grad, probs, n, BF16_TOL);
    zb_cuk16_crossentropy_fused(ctx.stream, d_loss2, d_l2, d_tgt, dloss, N, V, Vp);
    t16_expect_same_bytes(&ctx, "  ... twice (losses)", d_loss, d_loss2, N * 4);
    t16_expect_same_bytes(&ctx, "  ... twice (dlogits)", d_l, d_l2, n * 2);
    free(logits), free(tgt), free(probs), free(losses);
}

static void test_crossentropy(void **state)
{
    (void)state;
    check_crossentropy(72, 100, 128, 6);
    check_crossentropy(3, 50257, 50304, 8); /* GPT-2's vocabulary: the row is read twice */
    check_crossentropy(5, 101, 101, 6);     /* Vp not a multiple of 8: scalar path */
}

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversions),  cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_layernorm),    cmocka_unit_test(test_layernorm_refuses_odd_rows),
        cmocka_unit_test(test_colsum),       cmocka_unit_test(test_gelu_residual),
        cmocka_unit_test(test_crossentropy),
    };
    return cmocka_run_group_tests(tests, t16_setup, t16_teardown);
}

#endif
