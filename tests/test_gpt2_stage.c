/* GPT-2 stage API: split consistency (1 vs 2 vs 3 stages, bit-identical), deferred W, stash
 * accounting, call-order and input errors, whole-model finite differences, norm units, init. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/gpt2.h"

static const zb_gpt2_config_t CFG = {.max_seq = 16, .vocab = 67, .padded_vocab = 128,
                                     .layers = 3, .heads = 2, .channels = 16};
enum { BB = 2, TT = 8, NTOK = BB * TT };

static int tokens[NTOK], targets[NTOK];

static void make_batch(int seed)
{
    for (int i = 0; i < NTOK; i++) {
        tokens[i] = (i * 7 + seed * 13) % CFG.vocab;
        targets[i] = (i * 5 + 3 + seed * 11) % CFG.vocab;
    }
}

static void must(zb_status_t s, const zb_err_t *e)
{
    if (s != ZB_OK)
        fail_msg("unexpected error: %s", e->msg);
}

/* Run one microbatch through a chain of stages (F all, then B all in reverse, then W all),
 * returning the loss; gradients accumulate into g. */
static float run_chain(const zb_gpt2_params_t *p, const zb_gpt2_span_t *spans, int ns,
                       zb_gpt2_grads_t *g, float grad_scale)
{
    zb_err_t e;
    zb_gpt2_stash_t *st[4];
    float *act[5], *grad[5], loss = 0;
    size_t nc = (size_t)NTOK * CFG.channels;
    for (int s = 0; s <= ns; s++) {
        act[s] = calloc(nc, sizeof(float));
        grad[s] = calloc(nc, sizeof(float));
    }
    for (int s = 0; s < ns; s++)
        must(zb_gpt2_stash_new(&CFG, &spans[s], BB, TT, &st[s], &e), &e);
    for (int s = 0; s < ns; s++)
        must(zb_gpt2_forward(p, &spans[s], st[s], tokens, act[s], targets, act[s + 1], &loss, &e),
             &e);
    for (int s = ns - 1; s >= 0; s--)
        must(zb_gpt2_backward_input(p, &spans[s], st[s], grad[s + 1], grad_scale, grad[s], &e),
             &e);
    for (int s = 0; s < ns; s++)
        must(zb_gpt2_backward_weight(p, &spans[s], st[s], g, &e), &e);
    for (int s = 0; s < ns; s++)
        zb_gpt2_stash_free(st[s]);
    for (int s = 0; s <= ns; s++) {
        free(act[s]);
        free(grad[s]);
    }
    return loss;
}

typedef struct {
    zb_gpt2_params_t p;
    zb_gpt2_grads_t g;
} model_t;

static void model_new(model_t *m, uint64_t seed)
{
    zb_err_t e;
    must(zb_gpt2_params_alloc(&m->p, &CFG, &e), &e);
    zb_gpt2_params_init_random(&m->p, seed);
    /* Weights 10x GPT-2's init and non-trivial LayerNorm/bias values, so that every gradient
     * path carries a signal well above the finite-difference tolerance. */
    size_t real_wte = (size_t)CFG.vocab * CFG.channels;
    for (size_t i = 0; i < m->p.count; i++) {
        if (i >= real_wte && i < m->p.sizes[ZB_WTE])
            continue; /* padded vocabulary rows stay zero */
        if (m->p.data[i] == 0.0f)
            m->p.data[i] = 0.05f * (float)((int)(i % 17) - 8);
        else if (m->p.data[i] == 1.0f)
            m->p.data[i] = 1.0f + 0.03f * (float)((int)(i % 13) - 6);
        else
            m->p.data[i] *= 10.0f;
    }
    must(zb_gpt2_grads_alloc(&m->g, &CFG, &e), &e);
}

static void model_free(model_t *m)
{
    zb_gpt2_params_free(&m->p);
    zb_gpt2_grads_free(&m->g);
}

static void test_split_consistency(void **state)
{
    (void)state;
    model_t m;
    model_new(&m, 7);
    make_batch(1);
    const zb_gpt2_span_t whole[] = {{0, 3, true, true}};
    const zb_gpt2_span_t two[] = {{0, 1, true, false}, {1, 3, false, true}};
    const zb_gpt2_span_t three[] = {{0, 1, true, false}, {1, 2, false, false}, {2, 3, false, true}};
    const zb_gpt2_span_t edges[] = {{0, 0, true, false}, {0, 3, false, false}, {3, 3, false, true}};
    const struct {
        const zb_gpt2_span_t *s;
        int n;
    } parts[] = {{two, 2}, {three, 3}, {edges, 3}};

    zb_gpt2_grads_zero(&m.g);
    float ref_loss = run_chain(&m.p, whole, 1, &m.g, 1.0f / NTOK);
    zb_gpt2_fold_tied(&m.g);
    float *ref = malloc(m.g.g.count * sizeof(float));
    memcpy(ref, m.g.g.data, m.g.g.count * sizeof(float));
    assert_true(isfinite(ref_loss) && ref_loss > 3.0f && ref_loss < 6.0f); /* ~log(67) at init */

    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        zb_gpt2_grads_zero(&m.g);
        float loss = run_chain(&m.p, parts[k].s, parts[k].n, &m.g, 1.0f / NTOK);
        zb_gpt2_fold_tied(&m.g);
        assert_memory_equal(&loss, &ref_loss, sizeof loss);
        assert_memory_equal(m.g.g.data, ref, m.g.g.count * sizeof(float));
    }
    /* the gradient is not trivially zero anywhere that matters */
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS; t++) {
        double s = 0;
        size_t off = (size_t)(m.g.g.t[t] - m.g.g.data);
        for (size_t i = 0; i < m.g.g.sizes[t]; i++)
            s += fabs(ref[off + i]);
        if (!(s > 0))
            fail_msg("tensor %d has an all-zero gradient", t);
    }
    free(ref);
    model_free(&m);
}

/* W deferred past other microbatches' F and B gives the same bits as B immediately followed by W
 * (the fused backward): the stash keeps exactly what W reads. */
static void test_deferred_w_matches_fused(void **state)
{
    (void)state;
    model_t m;
    model_new(&m, 3);
    const zb_gpt2_span_t sp = {0, 3, true, true};
    zb_err_t e;
    zb_gpt2_stash_t *s1, *s2;
    must(zb_gpt2_stash_new(&CFG, &sp, BB, TT, &s1, &e), &e);
    must(zb_gpt2_stash_new(&CFG, &sp, BB, TT, &s2, &e), &e);
    float l1, l2, m1, m2, scale = 0.5f / NTOK;
    int tok1[NTOK], tgt1[NTOK];

    /* fused: F1 B1 W1 F2 B2 W2 */
    zb_gpt2_grads_zero(&m.g);
    make_batch(1);
    memcpy(tok1, tokens, sizeof tok1);
    memcpy(tgt1, targets, sizeof tgt1);
    must(zb_gpt2_forward(&m.p, &sp, s1, tok1, NULL, tgt1, NULL, &l1, &e), &e);
    must(zb_gpt2_backward_input(&m.p, &sp, s1, NULL, scale, NULL, &e), &e);
    must(zb_gpt2_backward_weight(&m.p, &sp, s1, &m.g, &e), &e);
    make_batch(2);
    must(zb_gpt2_forward(&m.p, &sp, s1, tokens, NULL, targets, NULL, &l2, &e), &e);
    must(zb_gpt2_backward_input(&m.p, &sp, s1, NULL, scale, NULL, &e), &e);
    must(zb_gpt2_backward_weight(&m.p, &sp, s1, &m.g, &e), &e);
    zb_gpt2_fold_tied(&m.g);
    float *ref = malloc(m.g.g.count * sizeof(float));
    memcpy(ref, m.g.g.data, m.g.g.count * sizeof(float));

    /* split: F1 F2 B1 B2 W1 W2, caller buffers scribbled between calls */
    zb_gpt2_grads_zero(&m.g);
    must(zb_gpt2_forward(&m.p, &sp, s1, tok1, NULL, tgt1, NULL, &m1, &e), &e);
    memset(tok1, 0, sizeof tok1);
    memset(tgt1, 0, sizeof tgt1);
    must(zb_gpt2_forward(&m.p, &sp, s2, tokens, NULL, targets, NULL, &m2, &e), &e);
    must(zb_gpt2_backward_input(&m.p, &sp, s1, NULL, scale, NULL, &e), &e);
    must(zb_gpt2_backward_input(&m.p, &sp, s2, NULL, scale, NULL, &e), &e);
    must(zb_gpt2_backward_weight(&m.p, &sp, s1, &m.g, &e), &e);
    must(zb_gpt2_backward_weight(&m.p, &sp, s2, &m.g, &e), &e);
    zb_gpt2_fold_tied(&m.g);
    assert_memory_equal(&l1, &m1, sizeof l1);
    assert_memory_equal(&l2, &m2, sizeof l2);
    assert_memory_equal(m.g.g.data, ref, m.g.g.count * sizeof(float));
    free(ref);
    zb_gpt2_stash_free(s1);
    zb_gpt2_stash_free(s2);
    model_free(&m);
}

/* Whole-model finite differences on sampled parameters of every tensor: checks the assembly of
 * the kernels (residual paths, tied head, padded vocab) independently of PyTorch. */
static void test_whole_model_finite_differences(void **state)
{
    (void)state;
    model_t m;
    model_new(&m, 11);
    make_batch(3);
    const zb_gpt2_span_t sp = {0, 3, true, true};
    zb_gpt2_grads_zero(&m.g);
    run_chain(&m.p, &sp, 1, &m.g, 1.0f / NTOK);
    zb_gpt2_fold_tied(&m.g);
    zb_err_t e;
    zb_gpt2_stash_t *st;
    must(zb_gpt2_stash_new(&CFG, &sp, BB, TT, &st, &e), &e);
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS; t++) {
        for (int k = 0; k < 4; k++) {
            size_t i = ((size_t)k * 7919 + (size_t)t * 104729) % m.p.sizes[t];
            if (t == ZB_WTE)
                i %= (size_t)CFG.vocab * CFG.channels; /* a real (used or not) row */
            float *x = m.p.t[t] + i, v = *x, lp, lm, eps = 1e-2f;
            *x = v + eps;
            must(zb_gpt2_forward(&m.p, &sp, st, tokens, NULL, targets, NULL, &lp, &e), &e);
            *x = v - eps;
            must(zb_gpt2_forward(&m.p, &sp, st, tokens, NULL, targets, NULL, &lm, &e), &e);
            *x = v;
            double fd = ((double)lp - lm) / (2.0 * eps), ana = m.g.g.t[t][i];
            if (fabs(fd - ana) > 2e-4 + 2e-2 * fabs(fd))
                fail_msg("tensor %d elem %zu: analytic %.6g vs finite difference %.6g", t, i,
                         ana, fd);
        }
    }
    /* padded vocabulary rows never receive gradient */
    for (size_t i = (size_t)CFG.vocab * CFG.channels; i < m.g.g.sizes[ZB_WTE]; i++)
        assert_true(m.g.g.t[ZB_WTE][i] == 0.0f);
    zb_gpt2_stash_free(st);
    model_free(&m);
}

/* Accounting: 0 -> after_f -> after_b -> 0 as zb_gpt2_stage_mem says, and the figures match an
 * independent count of the buffers documented in docs/compute.md. */
static void test_stash_accounting(void **state)
{
    (void)state;
    model_t m;
    model_new(&m, 5);
    make_batch(4);
    size_t N = NTOK, C = (size_t)CFG.channels, NH = (size_t)CFG.heads, Vp = CFG.padded_vocab;
    size_t f4 = sizeof(float), i4 = sizeof(int);
    size_t layer_f = (16 * N * C + 4 * N + N * NH * TT) * f4; /* see docs/compute.md */
    size_t layer_b = (20 * N * C + 4 * N) * f4;
    const struct {
        zb_gpt2_span_t s;
        size_t f, b;
    } cases[] = {
        {{0, 3, true, true},
         N * i4 + 3 * layer_f + (2 * N * C + 2 * N + N * Vp) * f4 + N * i4,
         N * i4 + N * C * f4 + 3 * layer_b + (3 * N * C + 2 * N + N * Vp) * f4},
        {{0, 1, true, false}, N * i4 + layer_f, N * i4 + N * C * f4 + layer_b},
        {{1, 2, false, false}, layer_f, layer_b},
        {{0, 0, true, false}, N * i4, N * i4 + N * C * f4},
        {{3, 3, false, true},
         (2 * N * C + 2 * N + N * Vp) * f4 + N * i4,
         (3 * N * C + 2 * N + N * Vp) * f4},
    };
    zb_err_t e;
    float *a = calloc(N * C, sizeof(float)), *b = calloc(N * C, sizeof(float)), loss;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const zb_gpt2_span_t *sp = &cases[k].s;
        size_t af, ab;
        zb_gpt2_stage_mem(&CFG, sp, BB, TT, &af, &ab);
        assert_int_equal(af, cases[k].f);
        assert_int_equal(ab, cases[k].b);
        zb_gpt2_stash_t *st;
        must(zb_gpt2_stash_new(&CFG, sp, BB, TT, &st, &e), &e);
        for (int rep = 0; rep < 2; rep++) { /* reusable */
            assert_int_equal(zb_gpt2_stash_live_bytes(st), 0);
            must(zb_gpt2_forward(&m.p, sp, st, tokens, a, targets, b, &loss, &e), &e);
            assert_int_equal(zb_gpt2_stash_live_bytes(st), af);
            must(zb_gpt2_backward_input(&m.p, sp, st, b, 1.0f, a, &e), &e);
            assert_int_equal(zb_gpt2_stash_live_bytes(st), ab);
            must(zb_gpt2_backward_weight(&m.p, sp, st, &m.g, &e), &e);
            assert_int_equal(zb_gpt2_stash_live_bytes(st), 0);
        }
        zb_gpt2_stash_free(st);
    }
    /* an invalid shape reports zero rather than garbage */
    size_t af = 1, ab = 1;
    zb_gpt2_span_t bad = {2, 1, false, false};
    zb_gpt2_stage_mem(&CFG, &bad, BB, TT, &af, &ab);
    assert_int_equal(af, 0);
    assert_int_equal(ab, 0);
    free(a);
    free(b);
    model_free(&m);
}

static void expect_fail(zb_status_t s, const zb_err_t *e, const char *needle)
{
    assert_int_not_equal(s, ZB_OK);
    if (!strstr(e->msg, needle))
        fail_msg("message '%s' does not mention '%s'", e->msg, needle);
}

static void test_errors(void **state)
{
    (void)state;
    model_t m;
    model_new(&m, 1);
    make_batch(0);
    zb_err_t e;
    zb_gpt2_stash_t *st = NULL;
    const zb_gpt2_span_t sp = {0, 3, true, true}, other = {0, 2, true, false};
    float loss;

    /* config and shape checks */
    zb_gpt2_config_t c = CFG;
    c.heads = 5;
    expect_fail(zb_gpt2_config_check(&c, &e), &e, "divide");
    c = CFG;
    c.padded_vocab = 10;
    expect_fail(zb_gpt2_config_check(&c, &e), &e, "padded vocab");
    c = CFG;
    c.layers = 0;
    expect_fail(zb_gpt2_config_check(&c, &e), &e, "positive");
    c = CFG;
    c.channels = 1 << 30;
    expect_fail(zb_gpt2_config_check(&c, &e), &e, "too large");
    expect_fail(zb_gpt2_stash_new(&CFG, &sp, BB, CFG.max_seq + 1, &st, &e), &e, "sequence");
    assert_null(st);
    zb_gpt2_span_t bad = {1, 3, true, true};
    expect_fail(zb_gpt2_stash_new(&CFG, &bad, BB, TT, &st, &e), &e, "layer 0");
    bad = (zb_gpt2_span_t){0, 2, false, true};
    expect_fail(zb_gpt2_stash_new(&CFG, &bad, BB, TT, &st, &e), &e, "end at layer");
    bad = (zb_gpt2_span_t){1, 1, false, false};
    expect_fail(zb_gpt2_stash_new(&CFG, &bad, BB, TT, &st, &e), &e, "empty");
    bad = (zb_gpt2_span_t){0, 4, true, true};
    expect_fail(zb_gpt2_stash_new(&CFG, &bad, BB, TT, &st, &e), &e, "not within");

    /* call order */
    must(zb_gpt2_stash_new(&CFG, &sp, BB, TT, &st, &e), &e);
    expect_fail(zb_gpt2_backward_input(&m.p, &sp, st, NULL, 1.0f, NULL, &e), &e, "no forward");
    expect_fail(zb_gpt2_backward_weight(&m.p, &sp, st, &m.g, &e), &e, "no backward_input");
    expect_fail(zb_gpt2_forward(&m.p, &other, st, tokens, NULL, targets, NULL, &loss, &e), &e,
                "span differs");
    must(zb_gpt2_forward(&m.p, &sp, st, tokens, NULL, targets, NULL, &loss, &e), &e);
    must(zb_gpt2_backward_input(&m.p, &sp, st, NULL, 1.0f, NULL, &e), &e);
    expect_fail(zb_gpt2_forward(&m.p, &sp, st, tokens, NULL, targets, NULL, &loss, &e), &e,
                "waiting for W");
    zb_gpt2_stash_reset(st);
    assert_int_equal(zb_gpt2_stash_live_bytes(st), 0);

    /* bad ids and missing buffers */
    tokens[5] = CFG.vocab;
    expect_fail(zb_gpt2_forward(&m.p, &sp, st, tokens, NULL, targets, NULL, &loss, &e), &e,
                "tokens[5]");
    tokens[5] = 0;
    targets[3] = -1;
    expect_fail(zb_gpt2_forward(&m.p, &sp, st, tokens, NULL, targets, NULL, &loss, &e), &e,
                "targets[3]");
    targets[3] = 0;
    expect_fail(zb_gpt2_forward(&m.p, &sp, st, NULL, NULL, targets, NULL, &loss, &e), &e,
                "tokens");
    zb_gpt2_stash_free(st);

    /* parameters of another shape */
    zb_gpt2_params_t small;
    c = CFG;
    c.layers = 2;
    must(zb_gpt2_params_alloc(&small, &c, &e), &e);
    must(zb_gpt2_stash_new(&CFG, &other, BB, TT, &st, &e), &e);
    float *x = calloc((size_t)NTOK * CFG.channels, sizeof(float));
    expect_fail(zb_gpt2_forward(&small, &other, st, tokens, NULL, NULL, x, NULL, &e), &e,
                "different configs");
    free(x);
    zb_gpt2_stash_free(st);
    zb_gpt2_params_free(&small);
    model_free(&m);
}

static void test_units_cover_every_parameter_once(void **state)
{
    (void)state;
    zb_gpt2_params_t p;
    zb_err_t e;
    must(zb_gpt2_params_alloc(&p, &CFG, &e), &e);
    int nu = zb_gpt2_num_units(&CFG);
    assert_int_equal(nu, CFG.layers + 2);
    unsigned char *seen = calloc(p.count, 1);
    for (int u = 0; u < nu; u++) {
        size_t off[16], cnt[16];
        int n = zb_gpt2_unit_ranges(&CFG, u, off, cnt);
        assert_int_equal(n, u == 0 ? 2 : u == nu - 1 ? 2 : 12);
        for (int r = 0; r < n; r++)
            for (size_t i = off[r]; i < off[r] + cnt[r]; i++) {
                assert_true(i < p.count);
                seen[i]++;
            }
    }
    for (size_t i = 0; i < p.count; i++)
        assert_int_equal(seen[i], 1);
    /* block 1's first range is layer 1 of LN1W */
    size_t off[16], cnt[16];
    zb_gpt2_unit_ranges(&CFG, 2, off, cnt);
    assert_int_equal(off[0], (size_t)(p.t[ZB_LN1W] - p.data) + CFG.channels);
    assert_int_equal(zb_gpt2_unit_ranges(&CFG, nu, off, cnt), 0);
    free(seen);
    zb_gpt2_params_free(&p);
}

static void test_init_and_fold(void **state)
{
    (void)state;
    zb_gpt2_params_t a, b;
    zb_err_t e;
    must(zb_gpt2_params_alloc(&a, &CFG, &e), &e);
    must(zb_gpt2_params_alloc(&b, &CFG, &e), &e);
    zb_gpt2_params_init_random(&a, 99);
    zb_gpt2_params_init_random(&b, 99);
    assert_memory_equal(a.data, b.data, a.count * sizeof(float));
    zb_gpt2_params_init_random(&b, 100);
    assert_memory_not_equal(a.data, b.data, a.count * sizeof(float));
    for (size_t i = (size_t)CFG.vocab * CFG.channels; i < a.sizes[ZB_WTE]; i++)
        assert_true(a.t[ZB_WTE][i] == 0.0f);
    for (size_t i = 0; i < a.sizes[ZB_LN2W]; i++)
        assert_true(a.t[ZB_LN2W][i] == 1.0f && a.t[ZB_LN2B][i] == 0.0f);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < a.sizes[ZB_FCW]; i++) {
        s += a.t[ZB_FCW][i];
        s2 += (double)a.t[ZB_FCW][i] * a.t[ZB_FCW][i];
    }
    double sd = sqrt(s2 / a.sizes[ZB_FCW]);
    assert_true(sd > 0.018 && sd < 0.022);
    double sdp = 0;
    for (size_t i = 0; i < a.sizes[ZB_FCPROJW]; i++)
        sdp += (double)a.t[ZB_FCPROJW][i] * a.t[ZB_FCPROJW][i];
    sdp = sqrt(sdp / a.sizes[ZB_FCPROJW]);
    assert_true(fabs(sdp - 0.02 / sqrt(2.0 * CFG.layers)) < 0.002);

    zb_gpt2_grads_t g;
    must(zb_gpt2_grads_alloc(&g, &CFG, &e), &e);
    g.g.t[ZB_WTE][3] = 1.5f;
    g.wte_head[3] = 0.25f;
    g.wte_head[4] = -2.0f;
    zb_gpt2_fold_tied(&g);
    assert_true(g.g.t[ZB_WTE][3] == 1.75f && g.g.t[ZB_WTE][4] == -2.0f);
    zb_gpt2_grads_zero(&g);
    assert_true(g.g.t[ZB_WTE][3] == 0.0f && g.wte_head[4] == 0.0f);
    zb_gpt2_grads_free(&g);
    zb_gpt2_params_free(&a);
    zb_gpt2_params_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_consistency),
        cmocka_unit_test(test_deferred_w_matches_fused),
        cmocka_unit_test(test_whole_model_finite_differences),
        cmocka_unit_test(test_stash_accounting),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_units_cover_every_parameter_once),
        cmocka_unit_test(test_init_and_fold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
