/* CUDA ops (label gpu): every op's forward / backward_input / backward_weight on the GPU against
 * the CPU kernels of include/zbpp/nn.h on random inputs, fp32 with TF32 off: error relative to
 * the reference's scale <= 1e-5 (the embedding's W, which walks rows in the CPU's order, must
 * match bit for bit). Backward outputs start non-zero so the += contract is checked too (and the
 * fused MLP ops' "written" one).
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
#include "zbpp/nn.h"

enum { B = 3, T = 24, C = 64, NH = 4, OC = 96, N = B * T, V = 100, VP = 128 };
#define TOL 1e-5

static zb_cu_ctx_t ctx;
static void *allocs[64];
static int nallocs;

static void *dev_alloc(size_t bytes)
{
    void *d = NULL;
    assert_int_equal(cudaMalloc(&d, bytes), cudaSuccess);
    assert_true(nallocs < 64);
    allocs[nallocs++] = d;
    return d;
}

static float *dev_f(const float *h, size_t n)
{
    float *d = dev_alloc(n * sizeof(float));
    assert_int_equal(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static int *dev_i(const int *h, size_t n)
{
    int *d = dev_alloc(n * sizeof(int));
    assert_int_equal(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static float *rnd(size_t n, uint64_t seed, float scale)
{
    float *x = malloc(n * sizeof(float));
    fill_random(x, n, seed, scale);
    return x;
}

/* Download d[n] and compare with the CPU result; tol < 0: bitwise. */
static void expect_close(const char *what, const float *d, const float *cpu, size_t n, double tol)
{
    zb_err_t e;
    assert_int_equal(cudaStreamSynchronize(ctx.stream), cudaSuccess);
    if (zb_cu_ctx_check(&ctx, what, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    float *h = malloc(n * sizeof(float));
    assert_int_equal(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    double r = rel_err(h, cpu, n);
    printf("  %-34s rel err %.3g\n", what, r);
    if (tol < 0) {
        if (memcmp(h, cpu, n * sizeof(float)) != 0)
            fail_msg("%s: not bitwise equal to the CPU (rel err %g)", what, r);
    } else if (!(r <= tol)) {
        fail_msg("%s: relative error %g > %g", what, r, tol);
    }
    free(h);
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

/* Each test's device buffers are freed when it ends, so the table bounds one test's buffers,
 * not the whole group's. */
static int free_allocs(void **state)
{
    (void)state;
    for (int i = 0; i < nallocs; i++)
        cudaFree(allocs[i]);
    nallocs = 0;
    return 0;
}

static int teardown(void **state)
{
    free_allocs(state);
    zb_cu_ctx_destroy(&ctx);
    return 0;
}

static void test_encoder(void **state)
{
    (void)state;
    int tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (i * 37 + 11) % 9; /* few distinct tokens: repeated rows in every bucket */
    float *wte = rnd((size_t)V * C, 1, 1), *wpe = rnd((size_t)T * C, 2, 1);
    float *out = malloc((size_t)N * C * sizeof(float));
    zb_encoder_forward(out, tok, wte, wpe, B, T, C);
    int *dtok = dev_i(tok, N);
    float *d_out = dev_alloc((size_t)N * C * sizeof(float));
    zb_cu_encoder_forward(&ctx, d_out, dtok, dev_f(wte, (size_t)V * C), dev_f(wpe, (size_t)T * C),
                          B, T, C);
    expect_close("encoder forward", d_out, out, (size_t)N * C, -1);

    float *dout = rnd((size_t)N * C, 3, 1), *dwte = rnd((size_t)V * C, 4, 1),
          *dwpe = rnd((size_t)T * C, 5, 1);
    float *d_dwte = dev_f(dwte, (size_t)V * C), *d_dwpe = dev_f(dwpe, (size_t)T * C);
    int *bucket = dev_alloc(zb_cu_encoder_bucket_ints(B, T) * sizeof(int));
    zb_encoder_backward_weight(dwte, dwpe, dout, tok, B, T, C);
    zb_cu_encoder_backward_weight(&ctx, d_dwte, d_dwpe, dev_f(dout, (size_t)N * C), tok, bucket,
                                  B, T, C, V);
    expect_close("encoder backward_weight dwte", d_dwte, dwte, (size_t)V * C, -1);
    expect_close("encoder backward_weight dwpe", d_dwpe, dwpe, (size_t)T * C, -1);
    free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}

static void test_layernorm(void **state)
{
    (void)state;
    float *x = rnd((size_t)N * C, 10, 3), *w = rnd(C, 11, 1), *b = rnd(C, 12, 1);
    for (size_t i = 0; i < (size_t)N * C; i++)
        x[i] += 5.0f; /* a mean far from 0 */
    float *out = malloc((size_t)N * C * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    zb_layernorm_forward(out, mean, rstd, x, w, b, N, C);
    float *d_x = dev_f(x, (size_t)N * C), *d_w = dev_f(w, C), *d_b = dev_f(b, C);
    float *d_out = dev_alloc((size_t)N * C * 4), *d_mean = dev_alloc(N * 4),
          *d_rstd = dev_alloc(N * 4);
    zb_cu_layernorm_forward(&ctx, d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C);
    expect_close("layernorm forward out", d_out, out, (size_t)N * C, TOL);
    expect_close("layernorm forward mean", d_mean, mean, N, TOL);
    expect_close("layernorm forward rstd", d_rstd, rstd, N, TOL);

    float *dout = rnd((size_t)N * C, 13, 1), *dx = rnd((size_t)N * C, 14, 1);
    float *d_dx = dev_f(dx, (size_t)N * C), *d_dout = dev_f(dout, (size_t)N * C);
    /* B and W from the CPU's mean/rstd so only the backward differs */
    float *d_cm = dev_f(mean, N), *d_cr = dev_f(rstd, N);
    zb_layernorm_backward_input(dx, dout, x, mean, rstd, w, N, C);
    zb_cu_layernorm_backward_input(&ctx, d_dx, d_dout, d_x, d_cm, d_cr, d_w, N, C);
    expect_close("layernorm backward_input", d_dx, dx, (size_t)N * C, TOL);

    float *dw = rnd(C, 15, 1), *db = rnd(C, 16, 1);
    float *d_dw = dev_f(dw, C), *d_db = dev_f(db, C);
    zb_layernorm_backward_weight(dw, db, dout, x, mean, rstd, N, C);
    zb_cu_layernorm_backward_weight(&ctx, d_dw, d_db, d_dout, d_x, d_cm, d_cr, N, C);
    expect_close("layernorm backward_weight dw", d_dw, dw, C, TOL);
    expect_close("layernorm backward_weight db", d_db, db, C, TOL);
    free(x), free(w), free(b), free(out), free(mean), free(rstd), free(dout), free(dx), free(dw),
        free(db);
}

static void test_matmul(void **state)
{
    (void)state;
    float *x = rnd((size_t)N * C, 20, 1), *w = rnd((size_t)OC * C, 21, 0.2f), *b = rnd(OC, 22, 1);
    float *out = malloc((size_t)N * OC * 4);
    zb_matmul_forward(out, x, w, b, N, C, OC);
    float *d_x = dev_f(x, (size_t)N * C), *d_w = dev_f(w, (size_t)OC * C), *d_b = dev_f(b, OC);
    float *d_out = dev_alloc((size_t)N * OC * 4);
    zb_cu_matmul_forward(&ctx, d_out, d_x, d_w, d_b, N, C, OC);
    expect_close("matmul forward", d_out, out, (size_t)N * OC, TOL);

    float *dout = rnd((size_t)N * OC, 23, 1), *dx = rnd((size_t)N * C, 24, 1);
    float *d_dout = dev_f(dout, (size_t)N * OC), *d_dx = dev_f(dx, (size_t)N * C);
    zb_matmul_backward_input(dx, dout, w, N, C, OC);
    zb_cu_matmul_backward_input(&ctx, d_dx, d_dout, d_w, N, C, OC);
    expect_close("matmul backward_input", d_dx, dx, (size_t)N * C, TOL);

    float *dw = rnd((size_t)OC * C, 25, 1), *db = rnd(OC, 26, 1);
    float *d_dw = dev_f(dw, (size_t)OC * C), *d_db = dev_f(db, OC);
    zb_matmul_backward_weight(dw, db, dout, x, N, C, OC);
    zb_cu_matmul_backward_weight(&ctx, d_dw, d_db, d_dout, d_x, N, C, OC);
    expect_close("matmul backward_weight dw", d_dw, dw, (size_t)OC * C, TOL);
    expect_close("matmul backward_weight dbias", d_db, db, OC, TOL);
    free(x), free(w), free(b), free(out), free(dout), free(dx), free(dw), free(db);
}

static void test_gelu_residual(void **state)
{
    (void)state;
    size_t n = (size_t)N * C;
    float *x = rnd(n, 30, 4), *y = rnd(n, 31, 1), *out = malloc(n * 4);
    float *d_x = dev_f(x, n), *d_y = dev_f(y, n), *d_out = dev_alloc(n * 4);
    zb_gelu_forward(out, x, n);
    zb_cu_gelu_forward(&ctx, d_out, d_x, n);
    expect_close("gelu forward", d_out, out, n, TOL);
    float *dx = rnd(n, 32, 1), *d_dx = dev_f(dx, n);
    zb_gelu_backward_input(dx, x, y, n);
    zb_cu_gelu_backward_input(&ctx, d_dx, d_x, d_y, n);
    expect_close("gelu backward_input", d_dx, dx, n, TOL);

    zb_residual_forward(out, x, y, n);
    zb_cu_residual_forward(&ctx, d_out, d_x, d_y, n);
    expect_close("residual forward", d_out, out, n, -1);
    float *da = rnd(n, 33, 1), *db = rnd(n, 34, 1), *d_da = dev_f(da, n), *d_db = dev_f(db, n);
    zb_residual_backward_input(da, db, y, n);
    zb_cu_residual_backward_input(&ctx, d_da, d_db, d_y, n);
    expect_close("residual backward_input da", d_da, da, n, -1);
    expect_close("residual backward_input db", d_db, db, n, -1);
    free(x), free(y), free(out), free(dx), free(da), free(db);
}

/* The fp32 MLP's fused ops (cuda/ops_linear_fused.c) against the CPU's product + GELU: pre and
 * gelu(pre) forward, (dout·W)∘gelu'(pre) backward (written: the output starts as garbage), at
 * a width cuBLASLt can take as its aux matrix (OC 96) and one it cannot (OC 25: the separate
 * epilogue kernel). */
static void check_matmul_gelu(int oc)
{
    size_t nx = (size_t)N * C, nh = (size_t)N * oc;
    float *x = rnd(nx, 60, 1), *w = rnd((size_t)oc * C, 61, 0.2f), *b = rnd(oc, 62, 1);
    float *pre = malloc(nh * 4), *g = malloc(nh * 4);
    zb_matmul_forward(pre, x, w, b, N, C, oc);
    zb_gelu_forward(g, pre, nh);
    float *d_x = dev_f(x, nx), *d_w = dev_f(w, (size_t)oc * C), *d_b = dev_f(b, oc);
    float *d_pre = dev_alloc(nh * 4), *d_g = dev_alloc(nh * 4);
    zb_cu_matmul_gelu_forward(&ctx, d_pre, d_g, d_x, d_w, d_b, N, C, oc);
    char what[64];
    snprintf(what, sizeof what, "matmul + gelu forward pre (OC %d)", oc);
    expect_close(what, d_pre, pre, nh, TOL);
    snprintf(what, sizeof what, "matmul + gelu forward out (OC %d)", oc);
    expect_close(what, d_g, g, nh, TOL);

    /* backward: dinp[N, oc] = (dout[N, C] · w2[C, oc]) ∘ gelu'(pre): the proj's shape */
    float *dout = rnd(nx, 63, 1), *w2 = rnd((size_t)C * oc, 64, 0.2f);
    float *prod = calloc(nh, 4), *dinp = calloc(nh, 4);
    zb_matmul_backward_input(prod, dout, w2, N, oc, C);
    zb_gelu_backward_input(dinp, pre, prod, nh);
    float *d_dout = dev_f(dout, nx), *d_w2 = dev_f(w2, (size_t)C * oc);
    float *junk = rnd(nh, 65, 1e3f), *d_dinp = dev_f(junk, nh);
    zb_cu_matmul_dgelu_backward_input(&ctx, d_dinp, d_dout, d_w2, d_pre, N, oc, C);
    snprintf(what, sizeof what, "matmul + gelu backward_input (OC %d)", oc);
    expect_close(what, d_dinp, dinp, nh, TOL);
    free(x), free(w), free(b), free(pre), free(g), free(dout), free(w2), free(prod), free(dinp);
    free(junk);
}

static void test_matmul_gelu_fused(void **state)
{
    (void)state;
    check_matmul_gelu(OC);
    check_matmul_gelu(25);
}

static void test_attention(void **state)
{
    (void)state;
    size_t nq = (size_t)N * 3 * C, na = (size_t)B * NH * T * T, no = (size_t)N * C;
    float *qkv = rnd(nq, 40, 2), *att = malloc(na * 4), *out = malloc(no * 4);
    zb_attention_forward(out, att, qkv, B, T, C, NH);
    float *d_qkv = dev_f(qkv, nq), *d_att = dev_alloc(na * 4), *d_out = dev_alloc(no * 4);
    zb_cu_attention_forward(&ctx, d_out, d_att, d_qkv, B, T, C, NH);
    expect_close("attention forward att", d_att, att, na, TOL);
    expect_close("attention forward out", d_out, out, no, TOL);

    float *dout = rnd(no, 41, 1), *dqkv = rnd(nq, 42, 1);
    float *scratch = malloc(zb_attention_scratch_floats(T) * 4);
    float *d_dqkv = dev_f(dqkv, nq), *d_scr = dev_alloc(zb_cu_attention_scratch_floats(T, NH) * 4);
    float *d_catt = dev_f(att, na); /* the CPU's probabilities: only the backward differs */
    zb_attention_backward_input(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    zb_cu_attention_backward_input(&ctx, d_dqkv, d_scr, dev_f(dout, no), d_qkv, d_catt, B, T, C,
                                   NH);
    expect_close("attention backward_input", d_dqkv, dqkv, nq, TOL);
    free(qkv), free(att), free(out), free(dout), free(dqkv), free(scratch);
}

static void test_crossentropy(void **state)
{
    (void)state;
    size_t n = (size_t)N * VP;
    float *logits = rnd(n, 50, 6), *losses = malloc(N * 4);
    int tgt[N];
    for (int i = 0; i < N; i++)
        tgt[i] = (i * 29 + 3) % V;
    float *d_probs = dev_f(logits, n), *d_losses = dev_alloc(N * 4);
    int *d_tgt = dev_i(tgt, N);
    zb_crossentropy_forward(losses, logits, tgt, N, V, VP);
    float *logits_in = rnd(n, 50, 6);
    zb_cu_crossentropy_forward(&ctx, d_losses, d_probs, d_tgt, N, V, VP, 0.0f);
    expect_close("crossentropy forward probs", d_probs, logits, n, TOL);
    expect_close("crossentropy forward losses", d_losses, losses, N, TOL);
    /* the forward that leaves the gradient: the GPU's own forward then backward, bit for bit */
    float *g2 = malloc(n * 4), *l2 = malloc(N * 4);
    zb_cu_crossentropy_backward(&ctx, d_probs, d_tgt, 0.37f, N, V, VP);
    assert_int_equal(cudaMemcpy(g2, d_probs, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(l2, d_losses, N * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(d_probs, logits_in, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    zb_cu_crossentropy_forward(&ctx, d_losses, d_probs, d_tgt, N, V, VP, 0.37f);
    expect_close("crossentropy forward with gradient", d_probs, g2, n, -1);
    expect_close("crossentropy forward with gradient loss", d_losses, l2, N, -1);
    free(logits_in), free(g2), free(l2);
    /* backward from the CPU's probabilities */
    assert_int_equal(cudaMemcpy(d_probs, logits, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    zb_crossentropy_backward(logits, tgt, 0.37f, N, V, VP);
    zb_cu_crossentropy_backward(&ctx, d_probs, d_tgt, 0.37f, N, V, VP);
    expect_close("crossentropy backward", d_probs, logits, n, -1);
    free(logits), free(losses);
}

/* The precision modes reach cuBLASLt: a K = 512 product stays within each mode's rounding of
 * the fp32 CPU result (fp32 1e-5, tf32 5e-3, bf16 3e-2), and the measured errors are printed
 * (a tf32/bf16 error at fp32's level would mean the fast path was not taken). */
static void test_precision_modes(void **state)
{
    (void)state;
    enum { PN = 64, PK = 512, PO = 128 };
    float *x = rnd((size_t)PN * PK, 60, 1), *w = rnd((size_t)PO * PK, 61, 1);
    float *out = malloc((size_t)PN * PO * 4), *h = malloc((size_t)PN * PO * 4);
    zb_matmul_forward(out, x, w, NULL, PN, PK, PO);
    const zb_cuda_precision_t precs[] = {ZB_CUDA_FP32, ZB_CUDA_TF32, ZB_CUDA_BF16};
    const double tol[] = {1e-5, 5e-3, 3e-2};
    for (int k = 0; k < 3; k++) {
        zb_cu_ctx_t c;
        zb_err_t e;
        if (zb_cu_ctx_init(&c, 0, precs[k], &e) != ZB_OK)
            fail_msg("%s", e.msg);
        float *d_x = dev_f(x, (size_t)PN * PK), *d_w = dev_f(w, (size_t)PO * PK);
        float *d_out = dev_alloc((size_t)PN * PO * 4);
        zb_cu_matmul_forward(&c, d_out, d_x, d_w, NULL, PN, PK, PO);
        assert_int_equal(cudaStreamSynchronize(c.stream), cudaSuccess);
        if (zb_cu_ctx_check(&c, "precision matmul", &e) != ZB_OK)
            fail_msg("%s", e.msg);
        assert_int_equal(cudaMemcpy(h, d_out, (size_t)PN * PO * 4, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        double r = rel_err(h, out, (size_t)PN * PO);
        printf("  matmul K=%d in %s: rel err %.3g (bound %.0e)\n", PK,
               zb_cuda_precision_name(precs[k]), r, tol[k]);
        if (!(r <= tol[k]))
            fail_msg("%s: rel err %g > %g", zb_cuda_precision_name(precs[k]), r, tol[k]);
        zb_cu_ctx_destroy(&c);
    }
    free(x), free(w), free(out), free(h);
}

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_encoder, free_allocs),
        cmocka_unit_test_teardown(test_layernorm, free_allocs),
        cmocka_unit_test_teardown(test_matmul, free_allocs),
        cmocka_unit_test_teardown(test_gelu_residual, free_allocs),
        cmocka_unit_test_teardown(test_matmul_gelu_fused, free_allocs),
        cmocka_unit_test_teardown(test_attention, free_allocs),
        cmocka_unit_test_teardown(test_crossentropy, free_allocs),
        cmocka_unit_test_teardown(test_precision_modes, free_allocs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
#endif
