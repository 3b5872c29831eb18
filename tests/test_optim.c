/* Tests of the optimizer: AdamW against a double-precision reference (bias correction, decoupled
 * decay only on 2-D weights), bit-identical results whatever the split of the buffer into ranges,
 * the gradient norm by units, clipping, non-finite norms skipping the step, and the LR schedule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/optim.h"
#include "zbpp/train.h"

static const zb_gpt2_config_t tiny = {.max_seq = 8, .vocab = 20, .padded_vocab = 32, .layers = 3,
                                      .heads = 2, .channels = 8};

static float pseudo(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static void fill(zb_gpt2_params_t *p, uint64_t seed, float scale)
{
    for (size_t i = 0; i < p->count; i++)
        p->data[i] = scale * pseudo(&seed);
}

typedef struct {
    zb_gpt2_params_t p, g;
    zb_adamw_state_t s;
} model_t;

static void model_new(model_t *m)
{
    zb_err_t err;
    assert_int_equal(zb_gpt2_params_alloc(&m->p, &tiny, &err), ZB_OK);
    assert_int_equal(zb_gpt2_params_alloc(&m->g, &tiny, &err), ZB_OK);
    assert_int_equal(zb_adamw_state_alloc(&m->s, &tiny, &err), ZB_OK);
    fill(&m->p, 1, 0.5f);
}

static void model_free(model_t *m)
{
    zb_gpt2_params_free(&m->p);
    zb_gpt2_params_free(&m->g);
    zb_adamw_state_free(&m->s);
}

static int tensor_of(const zb_gpt2_params_t *p, size_t i)
{
    for (int k = 0; k < ZB_GPT2_NUM_TENSORS; k++) {
        size_t off = (size_t)(p->t[k] - p->data);
        if (i >= off && i < off + p->sizes[k])
            return k;
    }
    return -1;
}

static void test_adamw_matches_reference(void **state)
{
    (void)state;
    model_t m;
    model_new(&m);
    zb_adamw_hparams_t h = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-6f,
                            .weight_decay = 0.2f};
    size_t n = m.p.count;
    double *rp = malloc(n * sizeof *rp), *rm = calloc(n, sizeof *rm), *rv = calloc(n, sizeof *rv);
    for (size_t i = 0; i < n; i++)
        rp[i] = m.p.data[i];
    for (long t = 1; t <= 3; t++) {
        fill(&m.g, 100 + (uint64_t)t, 1.0f);
        float gs = t == 2 ? 0.5f : 1.0f;
        zb_adamw_update_range(&m.p, &m.g, &m.s, &h, h.lr, t, gs, 0, n);
        for (size_t i = 0; i < n; i++) {
            double g = (double)m.g.data[i] * gs;
            rm[i] = 0.9 * rm[i] + 0.1 * g;
            rv[i] = 0.99 * rv[i] + 0.01 * g * g;
            double mh = rm[i] / (1 - pow(0.9, (double)t)), vh = rv[i] / (1 - pow(0.99, (double)t));
            double wd = zb_adamw_decays((zb_gpt2_tensor_t)tensor_of(&m.p, i)) ? 0.2 : 0.0;
            rp[i] -= 0.01 * (mh / (sqrt(vh) + 1e-6) + wd * rp[i]);
        }
    }
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(rp[i] - (double)m.p.data[i]) < 1e-5);
    /* decay classification: matrices decay, LayerNorm and biases do not */
    assert_true(zb_adamw_decays(ZB_WTE) && zb_adamw_decays(ZB_WPE) && zb_adamw_decays(ZB_QKVW) &&
                zb_adamw_decays(ZB_ATTPROJW) && zb_adamw_decays(ZB_FCW) &&
                zb_adamw_decays(ZB_FCPROJW));
    assert_false(zb_adamw_decays(ZB_LN1W) || zb_adamw_decays(ZB_QKVB) ||
                 zb_adamw_decays(ZB_FCB) || zb_adamw_decays(ZB_LNFB));
    free(rp);
    free(rm);
    free(rv);
    model_free(&m);
}

/* The same steps applied (a) to the whole buffer, (b) unit by unit, (c) in odd-sized chunks that
 * straddle tensor boundaries: identical bits. */
static void test_adamw_split_is_bit_identical(void **state)
{
    (void)state;
    model_t a, b, c;
    model_new(&a);
    model_new(&b);
    model_new(&c);
    zb_adamw_hparams_t h = zb_adamw_defaults();
    int nu = zb_gpt2_num_units(&tiny);
    int units_rev[16];
    for (int u = 0; u < nu; u++)
        units_rev[u] = nu - 1 - u; /* order of units must not matter either */
    for (long t = 1; t <= 4; t++) {
        fill(&a.g, 7 * (uint64_t)t, 0.3f);
        memcpy(b.g.data, a.g.data, a.g.count * sizeof(float));
        memcpy(c.g.data, a.g.data, a.g.count * sizeof(float));
        zb_adamw_update_range(&a.p, &a.g, &a.s, &h, 1e-3f, t, 0.7f, 0, a.p.count);
        zb_adamw_update_units(&b.p, &b.g, &b.s, &h, 1e-3f, t, 0.7f, units_rev, nu);
        for (size_t off = 0; off < c.p.count; off += 37) {
            size_t cnt = c.p.count - off < 37 ? c.p.count - off : 37;
            zb_adamw_update_range(&c.p, &c.g, &c.s, &h, 1e-3f, t, 0.7f, off, cnt);
        }
    }
    size_t bytes = a.p.count * sizeof(float);
    assert_memory_equal(a.p.data, b.p.data, bytes);
    assert_memory_equal(a.s.m.data, b.s.m.data, bytes);
    assert_memory_equal(a.s.v.data, b.s.v.data, bytes);
    assert_memory_equal(a.p.data, c.p.data, bytes);
    assert_memory_equal(a.s.v.data, c.s.v.data, bytes);
    model_free(&a);
    model_free(&b);
    model_free(&c);
}

static void test_grad_norm_by_units(void **state)
{
    (void)state;
    model_t m;
    model_new(&m);
    fill(&m.g, 9, 2.0f);
    int nu = zb_gpt2_num_units(&tiny);
    assert_int_equal(nu, tiny.layers + 2);
    double parts[16], direct = 0.0;
    for (int u = 0; u < nu; u++)
        parts[u] = zb_grad_unit_sumsq(&m.g, u);
    for (size_t i = 0; i < m.g.count; i++)
        direct += (double)m.g.data[i] * m.g.data[i];
    double norm = zb_grad_norm_total(parts, nu);
    assert_true(fabs(norm - sqrt(direct)) < 1e-9 * sqrt(direct));
    /* a change in one block's gradient shows up in exactly that unit */
    m.g.t[ZB_FCW][m.g.sizes[ZB_FCW] / tiny.layers + 1] += 1.0f; /* layer 1 -> unit 2 */
    for (int u = 0; u < nu; u++)
        assert_true((zb_grad_unit_sumsq(&m.g, u) != parts[u]) == (u == 2));
    /* clipping */
    assert_true(zb_grad_clip_scale(4.0, 1.0f) == 0.25f);
    assert_true(zb_grad_clip_scale(0.5, 1.0f) == 1.0f);
    assert_true(zb_grad_clip_scale(100.0, 0.0f) == 1.0f);
    model_free(&m);
}

static void test_nonfinite_norm_skips_step(void **state)
{
    (void)state;
    model_t m;
    model_new(&m);
    fill(&m.g, 3, 1.0f);
    zb_train_config_t cfg;
    zb_train_config_defaults(&cfg);
    int nu = zb_gpt2_num_units(&tiny), units[16];
    double parts[16];
    for (int u = 0; u < nu; u++) {
        units[u] = u;
        parts[u] = zb_grad_unit_sumsq(&m.g, u);
    }
    parts[1] = NAN;
    size_t bytes = m.p.count * sizeof(float);
    float *before = malloc(bytes);
    memcpy(before, m.p.data, bytes);
    zb_step_stats_t s;
    zb_train_update(&cfg, &m.p, &m.g, &m.s, 0, 1, parts, nu, units, nu, &s);
    assert_true(s.skipped);
    assert_memory_equal(before, m.p.data, bytes);
    for (size_t i = 0; i < m.p.count; i++)
        assert_true(m.s.m.data[i] == 0.0f && m.s.v.data[i] == 0.0f);
    parts[1] = INFINITY;
    zb_train_update(&cfg, &m.p, &m.g, &m.s, 0, 1, parts, nu, units, nu, &s);
    assert_true(s.skipped);
    /* a finite norm above the clip: applied, and the scale is clip/norm */
    parts[1] = zb_grad_unit_sumsq(&m.g, 1);
    cfg.grad_clip = 0.5f;
    zb_train_update(&cfg, &m.p, &m.g, &m.s, 0, 1, parts, nu, units, nu, &s);
    assert_false(s.skipped);
    assert_true(s.grad_norm > 0.5);
    assert_true(fabsf(s.clip_scale - (float)(0.5 / s.grad_norm)) < 1e-7f);
    assert_true(memcmp(before, m.p.data, bytes) != 0);
    free(before);
    model_free(&m);
}

static void test_lr_schedule(void **state)
{
    (void)state;
    zb_lr_schedule_t s = {ZB_LR_COSINE, 1.0f, 0.1f, 10, 110};
    assert_true(fabsf(zb_lr_at(&s, 0) - 0.1f) < 1e-7f);  /* warm-up: (0+1)/10 */
    assert_true(fabsf(zb_lr_at(&s, 4) - 0.5f) < 1e-7f);
    assert_true(fabsf(zb_lr_at(&s, 10) - 1.0f) < 1e-7f); /* peak right after warm-up */
    assert_true(fabsf(zb_lr_at(&s, 60) - 0.55f) < 1e-6f); /* half-way: mean of lr and lr_min */
    assert_true(fabsf(zb_lr_at(&s, 110) - 0.1f) < 1e-7f);
    assert_true(fabsf(zb_lr_at(&s, 500) - 0.1f) < 1e-7f);
    for (long k = 11; k < 110; k++) /* monotone decay */
        assert_true(zb_lr_at(&s, k) <= zb_lr_at(&s, k - 1));
    s.kind = ZB_LR_CONSTANT;
    assert_true(zb_lr_at(&s, 60) == 1.0f && zb_lr_at(&s, 500) == 1.0f);
    s.warmup = 0;
    assert_true(zb_lr_at(&s, 0) == 1.0f);
    zb_lr_kind_t k;
    zb_err_t err;
    assert_int_equal(zb_lr_kind_parse("cosine", &k, &err), ZB_OK);
    assert_int_equal(k, ZB_LR_COSINE);
    assert_int_equal(zb_lr_kind_parse("linear", &k, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "linear"));
}

static void test_hparam_checks(void **state)
{
    (void)state;
    zb_err_t err;
    zb_adamw_hparams_t h = zb_adamw_defaults();
    assert_int_equal(zb_adamw_check(&h, &err), ZB_OK);
    h.beta1 = 1.0f;
    assert_int_equal(zb_adamw_check(&h, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "beta1"));
    h = zb_adamw_defaults();
    h.eps = 0.0f;
    assert_int_equal(zb_adamw_check(&h, &err), ZB_EINVAL);
    h = zb_adamw_defaults();
    h.lr = NAN;
    assert_int_equal(zb_adamw_check(&h, &err), ZB_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_split_is_bit_identical),
        cmocka_unit_test(test_grad_norm_by_units),
        cmocka_unit_test(test_nonfinite_norm_skips_step),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_hparam_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
