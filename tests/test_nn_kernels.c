/* Kernel tests: finite-difference gradient checks of every backward_input and backward_weight
 * against its forward, and the accumulate (+=) contract. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn/fastmath.h"
#include "zbpp/nn.h"

/* ---- helpers ---- */

static uint64_t rng_state = 42;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static float *rnd(size_t n, float scale)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}
static float *zeros(size_t n)
{
    return calloc(n, sizeof(float));
}

/* The scalar whose gradient is checked: L = sum(out · R), so dout = R. */
typedef double (*loss_fn)(void *ctx);

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* Compare an analytic gradient with central differences of f over every element of x. */
static void check_grad(const char *what, const float *ana, loss_fn f, void *ctx, float *x, size_t n,
                       float eps, double atol, double rtol)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = v + eps;
        double lp = f(ctx);
        x[i] = v - eps;
        double lm = f(ctx);
        x[i] = v;
        double fd = (lp - lm) / (2.0 * eps);
        double diff = fabs(fd - ana[i]);
        if (diff > atol + rtol * fabs(fd))
            fail_msg("%s[%zu]: analytic %.6g vs finite difference %.6g", what, i, ana[i], fd);
        if (diff > worst)
            worst = diff;
    }
    (void)worst;
}

/* ---- matmul ---- */

typedef struct {
    int N, C, OC;
    float *out, *inp, *w, *b, *R;
} mm_ctx;

static double mm_loss(void *p)
{
    mm_ctx *c = p;
    zb_matmul_forward(c->out, c->inp, c->w, c->b, c->N, c->C, c->OC);
    return dot(c->out, c->R, (size_t)c->N * c->OC);
}

static void test_matmul_grads(void **state)
{
    (void)state;
    mm_ctx c = {.N = 5, .C = 7, .OC = 6};
    c.inp = rnd(35, 1), c.w = rnd(42, 1), c.b = rnd(6, 1), c.R = rnd(30, 1), c.out = zeros(30);
    float *dinp = zeros(35), *dw = zeros(42), *db = zeros(6);
    zb_matmul_backward_input(dinp, c.R, c.w, c.N, c.C, c.OC);
    zb_matmul_backward_weight(dw, db, c.R, c.inp, c.N, c.C, c.OC);
    check_grad("matmul dinp", dinp, mm_loss, &c, c.inp, 35, 1e-2f, 1e-3, 1e-3);
    check_grad("matmul dweight", dw, mm_loss, &c, c.w, 42, 1e-2f, 1e-3, 1e-3);
    check_grad("matmul dbias", db, mm_loss, &c, c.b, 6, 1e-2f, 1e-3, 1e-3);
    free(c.inp), free(c.w), free(c.b), free(c.R), free(c.out), free(dinp), free(dw), free(db);
}

/* ---- layernorm ---- */

typedef struct {
    int N, C;
    float *out, *mean, *rstd, *inp, *w, *b, *R;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    zb_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot(c->out, c->R, (size_t)c->N * c->C);
}

static void test_layernorm_grads(void **state)
{
    (void)state;
    ln_ctx c = {.N = 4, .C = 9};
    size_t n = 36;
    c.inp = rnd(n, 2), c.w = rnd(9, 1), c.b = rnd(9, 1), c.R = rnd(n, 1);
    c.out = zeros(n), c.mean = zeros(4), c.rstd = zeros(4);
    ln_loss(&c); /* mean/rstd for the backward */
    float *dinp = zeros(n), *dw = zeros(9), *db = zeros(9);
    zb_layernorm_backward_input(dinp, c.R, c.inp, c.mean, c.rstd, c.w, c.N, c.C);
    zb_layernorm_backward_weight(dw, db, c.R, c.inp, c.mean, c.rstd, c.N, c.C);
    check_grad("layernorm dinp", dinp, ln_loss, &c, c.inp, n, 1e-2f, 2e-3, 1e-2);
    check_grad("layernorm dweight", dw, ln_loss, &c, c.w, 9, 1e-2f, 1e-3, 1e-3);
    check_grad("layernorm dbias", db, ln_loss, &c, c.b, 9, 1e-2f, 1e-3, 1e-3);
    free(c.inp), free(c.w), free(c.b), free(c.R), free(c.out), free(c.mean), free(c.rstd);
    free(dinp), free(dw), free(db);
}

/* ---- gelu ---- */

typedef struct {
    size_t n;
    float *out, *inp, *R;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    zb_gelu_forward(c->out, c->inp, c->n);
    return dot(c->out, c->R, c->n);
}

static void test_gelu_grads(void **state)
{
    (void)state;
    gelu_ctx c = {.n = 40};
    c.inp = rnd(40, 4), c.R = rnd(40, 1), c.out = zeros(40);
    float *dinp = zeros(40);
    zb_gelu_backward_input(dinp, c.inp, c.R, c.n);
    check_grad("gelu dinp", dinp, gelu_loss, &c, c.inp, 40, 1e-3f, 1e-3, 1e-2);
    /* known values: gelu(0) = 0, gelu'(0) = 0.5, gelu(x) -> x for large x */
    float x[2] = {0.0f, 10.0f}, y[2], d[2] = {0, 0}, one[2] = {1, 1};
    zb_gelu_forward(y, x, 2);
    zb_gelu_backward_input(d, x, one, 2);
    assert_float_equal(y[0], 0.0f, 1e-7);
    assert_float_equal(y[1], 10.0f, 1e-5);
    assert_float_equal(d[0], 0.5f, 1e-7);
    free(c.inp), free(c.R), free(c.out), free(dinp);
}

/* ---- attention ---- */

typedef struct {
    int B, T, C, NH;
    float *out, *att, *qkv, *R;
} att_ctx;

static double att_loss(void *p)
{
    att_ctx *c = p;
    zb_attention_forward(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}

static void test_attention_grads(void **state)
{
    (void)state;
    att_ctx c = {.B = 2, .T = 5, .C = 8, .NH = 2};
    size_t nq = 2 * 5 * 24, no = 2 * 5 * 8, na = 2 * 2 * 5 * 5;
    c.qkv = rnd(nq, 1), c.R = rnd(no, 1), c.out = zeros(no), c.att = zeros(na);
    att_loss(&c);
    /* causal: probabilities of each row sum to 1, the future is exactly 0 */
    for (int r = 0; r < 2 * 2 * 5; r++) {
        int t = r % 5;
        double s = 0;
        for (int u = 0; u < 5; u++) {
            s += c.att[r * 5 + u];
            if (u > t)
                assert_true(c.att[r * 5 + u] == 0.0f);
        }
        assert_float_equal(s, 1.0, 1e-6);
    }
    float *dqkv = zeros(nq), *scr = zeros(zb_attention_scratch_floats(c.T));
    zb_attention_backward_input(dqkv, scr, c.R, c.qkv, c.att, c.B, c.T, c.C, c.NH);
    check_grad("attention dqkv", dqkv, att_loss, &c, c.qkv, nq, 1e-2f, 1e-3, 1e-2);
    free(c.qkv), free(c.R), free(c.out), free(c.att), free(dqkv), free(scr);
}

/* A position may only attend to the past: changing a later token's k/v leaves earlier outputs. */
static void test_attention_causal(void **state)
{
    (void)state;
    int B = 1, T = 6, C = 8, NH = 2;
    float *qkv = rnd(6 * 24, 1), *o1 = zeros(48), *o2 = zeros(48), *att = zeros(72);
    zb_attention_forward(o1, att, qkv, B, T, C, NH);
    for (int i = 0; i < 16; i++)
        qkv[5 * 24 + 8 + i] += 3.0f; /* k and v of the last position */
    zb_attention_forward(o2, att, qkv, B, T, C, NH);
    assert_memory_equal(o1, o2, 5 * 8 * sizeof(float));
    assert_memory_not_equal(o1 + 40, o2 + 40, 8 * sizeof(float));
    free(qkv), free(o1), free(o2), free(att);
}

/* ---- encoder ---- */

typedef struct {
    int B, T, C;
    int *tok;
    float *out, *wte, *wpe, *R;
} enc_ctx;

static double enc_loss(void *p)
{
    enc_ctx *c = p;
    zb_encoder_forward(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}

static void test_encoder_grads(void **state)
{
    (void)state;
    int tok[6] = {3, 1, 3, 0, 2, 3}; /* repeated ids: gradients must add up */
    enc_ctx c = {.B = 2, .T = 3, .C = 4, .tok = tok};
    c.wte = rnd(5 * 4, 1), c.wpe = rnd(3 * 4, 1), c.R = rnd(24, 1), c.out = zeros(24);
    float *dwte = zeros(20), *dwpe = zeros(12);
    zb_encoder_backward_weight(dwte, dwpe, c.R, tok, c.B, c.T, c.C);
    check_grad("encoder dwte", dwte, enc_loss, &c, c.wte, 20, 1e-2f, 1e-4, 1e-4);
    check_grad("encoder dwpe", dwpe, enc_loss, &c, c.wpe, 12, 1e-2f, 1e-4, 1e-4);
    for (int i = 16; i < 20; i++) /* id 4 never used */
        assert_true(dwte[i] == 0.0f);
    free(c.wte), free(c.wpe), free(c.R), free(c.out), free(dwte), free(dwpe);
}

/* ---- cross-entropy over a padded vocabulary ---- */

typedef struct {
    int N, V, Vp;
    int *targets;
    float *logits, *work, *losses;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    memcpy(c->work, c->logits, (size_t)c->N * c->Vp * sizeof(float));
    zb_crossentropy_forward(c->losses, c->work, c->targets, c->N, c->V, c->Vp);
    double s = 0;
    for (int i = 0; i < c->N; i++)
        s += c->losses[i];
    return s * 0.25; /* dloss = 0.25 per token */
}

static void test_crossentropy_grads(void **state)
{
    (void)state;
    int targets[3] = {0, 4, 2};
    ce_ctx c = {.N = 3, .V = 5, .Vp = 8, .targets = targets};
    c.logits = rnd(24, 3), c.work = zeros(24), c.losses = zeros(3);
    for (int n = 0; n < 3; n++) /* garbage in the padded columns must be ignored */
        for (int i = 5; i < 8; i++)
            c.logits[n * 8 + i] = 1e30f;
    ce_loss(&c);
    for (int n = 0; n < 3; n++) {
        double s = 0;
        for (int i = 0; i < 8; i++)
            s += c.work[n * 8 + i];
        assert_float_equal(s, 1.0, 1e-6);
        assert_true(c.work[n * 8 + 7] == 0.0f);
        assert_float_equal(c.losses[n], -log(c.work[n * 8 + targets[n]]), 1e-5);
    }
    zb_crossentropy_backward(c.work, targets, 0.25f, c.N, c.V, c.Vp);
    float *dl = c.work, *ana = zeros(24);
    memcpy(ana, dl, 24 * sizeof(float));
    for (int n = 0; n < 3; n++)
        for (int i = 5; i < 8; i++)
            assert_true(ana[n * 8 + i] == 0.0f);
    /* finite differences on the real columns only */
    for (int n = 0; n < 3; n++)
        check_grad("crossentropy dlogits", ana + n * 8, ce_loss, &c, c.logits + n * 8, 5, 1e-2f,
                   1e-3, 1e-2);
    free(c.logits), free(c.work), free(c.losses), free(ana);
}

/* ---- residual ---- */

static void test_residual(void **state)
{
    (void)state;
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, o[3], da[3] = {1, 1, 1}, db[3] = {0, 0, 0};
    float d[3] = {0.5f, -1, 2};
    zb_residual_forward(o, a, b, 3);
    assert_true(o[0] == 11 && o[1] == 22 && o[2] == 33);
    zb_residual_backward_input(da, db, d, 3);
    assert_true(da[0] == 1.5f && da[1] == 0.0f && da[2] == 3.0f);
    assert_true(db[0] == 0.5f && db[1] == -1.0f && db[2] == 2.0f);
}

/* ---- the += contract: a backward into pre-filled buffers adds exactly its own gradient ---- */

static void assert_accumulates(const char *what, const float *fresh, const float *prefill,
                               const float *after, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float want = prefill[i] + fresh[i];
        if (fabsf(after[i] - want) > 1e-5f * (1.0f + fabsf(want)))
            fail_msg("%s[%zu]: %g after accumulating onto %g, expected %g", what, i, after[i],
                     prefill[i], want);
    }
}

static void test_backward_accumulates(void **state)
{
    (void)state;
    int N = 6, C = 8, OC = 5, B = 2, T = 3, NH = 2;
    float *inp = rnd(48, 1), *w = rnd(40, 1), *dout = rnd(30, 1);
    float *pre48 = rnd(48, 1), *pre40 = rnd(40, 1), *pre8 = rnd(8, 1), *pre5 = rnd(5, 1);
    float *f48 = zeros(48), *a48 = zeros(48), *f40 = zeros(40), *a40 = zeros(40);
    float *f5 = zeros(5), *a5 = zeros(5), *f8 = zeros(8), *a8 = zeros(8), *g8 = zeros(8),
          *h8 = zeros(8);

    zb_matmul_backward_input(f48, dout, w, N, C, OC);
    memcpy(a48, pre48, 48 * sizeof(float));
    zb_matmul_backward_input(a48, dout, w, N, C, OC);
    assert_accumulates("matmul dinp", f48, pre48, a48, 48);

    zb_matmul_backward_weight(f40, f5, dout, inp, N, C, OC);
    memcpy(a40, pre40, 40 * sizeof(float));
    memcpy(a5, pre5, 5 * sizeof(float));
    zb_matmul_backward_weight(a40, a5, dout, inp, N, C, OC);
    assert_accumulates("matmul dweight", f40, pre40, a40, 40);
    assert_accumulates("matmul dbias", f5, pre5, a5, 5);

    float *mean = zeros(6), *rstd = zeros(6), *lout = zeros(48), *lw = rnd(8, 1), *dl = rnd(48, 1);
    zb_layernorm_forward(lout, mean, rstd, inp, lw, pre8, N, C);
    memset(f48, 0, 48 * sizeof(float));
    zb_layernorm_backward_input(f48, dl, inp, mean, rstd, lw, N, C);
    memcpy(a48, pre48, 48 * sizeof(float));
    zb_layernorm_backward_input(a48, dl, inp, mean, rstd, lw, N, C);
    assert_accumulates("layernorm dinp", f48, pre48, a48, 48);
    zb_layernorm_backward_weight(f8, g8, dl, inp, mean, rstd, N, C);
    memcpy(a8, pre8, 8 * sizeof(float));
    memcpy(h8, pre8, 8 * sizeof(float));
    zb_layernorm_backward_weight(a8, h8, dl, inp, mean, rstd, N, C);
    assert_accumulates("layernorm dweight", f8, pre8, a8, 8);
    assert_accumulates("layernorm dbias", g8, pre8, h8, 8);

    memset(f48, 0, 48 * sizeof(float));
    zb_gelu_backward_input(f48, inp, dl, 48);
    memcpy(a48, pre48, 48 * sizeof(float));
    zb_gelu_backward_input(a48, inp, dl, 48);
    assert_accumulates("gelu dinp", f48, pre48, a48, 48);

    /* attention: B=2, T=3, C=8 -> qkv 2*3*24 = 144 */
    float *qkv = rnd(144, 1), *att = zeros(36), *ao = zeros(48), *scr = zeros(9);
    float *fq = zeros(144), *aq = rnd(144, 1), *pq = zeros(144);
    memcpy(pq, aq, 144 * sizeof(float));
    zb_attention_forward(ao, att, qkv, B, T, C, NH);
    zb_attention_backward_input(fq, scr, dl, qkv, att, B, T, C, NH);
    zb_attention_backward_input(aq, scr, dl, qkv, att, B, T, C, NH);
    assert_accumulates("attention dqkv", fq, pq, aq, 144);

    int tok[6] = {1, 0, 1, 2, 2, 0};
    float *fe = zeros(24), *fp = zeros(24), *ae = rnd(24, 1), *ap = rnd(24, 1);
    float *pe = zeros(24), *pp = zeros(24);
    memcpy(pe, ae, 24 * sizeof(float));
    memcpy(pp, ap, 24 * sizeof(float));
    zb_encoder_backward_weight(fe, fp, dl, tok, B, T, C);
    zb_encoder_backward_weight(ae, ap, dl, tok, B, T, C);
    assert_accumulates("encoder dwte", fe, pe, ae, 24);
    assert_accumulates("encoder dwpe", fp, pp, ap, 24);

    free(inp), free(w), free(dout), free(pre48), free(pre40), free(pre8), free(pre5);
    free(f48), free(a48), free(f40), free(a40), free(f5), free(a5), free(f8), free(a8), free(g8);
    free(h8), free(mean), free(rstd), free(lout), free(lw), free(dl), free(qkv), free(att);
    free(ao), free(scr), free(fq), free(aq), free(pq), free(fe), free(fp), free(ae), free(ap);
    free(pe), free(pp);
}

/* Same inputs, same bits: kernels are deterministic call to call. */
static void test_deterministic(void **state)
{
    (void)state;
    int B = 2, T = 7, C = 16, NH = 4;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    float *qkv = rnd(nq, 1), *dout = rnd(no, 1), *att = zeros((size_t)B * NH * T * T);
    float *o1 = zeros(no), *o2 = zeros(no), *d1 = zeros(nq), *d2 = zeros(nq);
    float *scr = zeros(zb_attention_scratch_floats(T));
    zb_attention_forward(o1, att, qkv, B, T, C, NH);
    zb_attention_backward_input(d1, scr, dout, qkv, att, B, T, C, NH);
    zb_attention_forward(o2, att, qkv, B, T, C, NH);
    zb_attention_backward_input(d2, scr, dout, qkv, att, B, T, C, NH);
    assert_memory_equal(o1, o2, no * sizeof(float));
    assert_memory_equal(d1, d2, nq * sizeof(float));
    free(qkv), free(dout), free(att), free(o1), free(o2), free(d1), free(d2), free(scr);
}

/* The vectorisable exp/tanh stay within a few ulp of libm over the range the kernels use. */
static void test_fast_math_accuracy(void **state)
{
    (void)state;
    double worst_exp = 0, worst_tanh = 0;
    for (int i = -870000; i <= 880000; i++) {
        float x = (float)i * 1e-4f;
        double rel = fabs(zb_fast_expf(x) - exp((double)x)) / exp((double)x);
        if (rel > worst_exp)
            worst_exp = rel;
        if (x > -20 && x < 20) {
            double ab = fabs(zb_fast_tanhf(x) - tanh((double)x));
            if (ab > worst_tanh)
                worst_tanh = ab;
        }
    }
    if (worst_exp > 4e-7 || worst_tanh > 3e-7)
        fail_msg("fast exp rel error %.3g, tanh abs error %.3g", worst_exp, worst_tanh);
    assert_true(isnan(zb_fast_expf(NAN)));
    assert_true(isfinite(zb_fast_expf(1000.0f)) && zb_fast_expf(1000.0f) > 1e38f);
    assert_true(zb_fast_expf(-1000.0f) >= 0.0f && zb_fast_expf(-1000.0f) < 1e-37f);
    assert_true(zb_fast_tanhf(50.0f) == 1.0f && zb_fast_tanhf(-50.0f) == -1.0f);
    assert_true(zb_fast_expf(0.0f) == 1.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_grads),       cmocka_unit_test(test_layernorm_grads),
        cmocka_unit_test(test_gelu_grads),         cmocka_unit_test(test_attention_grads),
        cmocka_unit_test(test_attention_causal),   cmocka_unit_test(test_encoder_grads),
        cmocka_unit_test(test_crossentropy_grads), cmocka_unit_test(test_residual),
        cmocka_unit_test(test_backward_accumulates), cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_fast_math_accuracy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
