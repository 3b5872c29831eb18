/* zb_pipeline_predict_memory (what `zbpp profile` prints per rank) predicts exactly what a
 * training run predicts and measures, rank by rank, for the same partition and schedule: with
 * and without recompute, selective keep, one and two chunks per rank; with bf16 products, the
 * weight cache's copies (the workspace) too. */
#include "pipeline_testutil.h"
#include "nn/gemm_bf16.h" /* ZB_CPU_BF16_NO_WEIGHT_CACHE_ENV */
#include "zbpp/nn.h"

/* Checks a run's three memory tables agree; returns the smallest workspace over the ranks. */
static double check(const char *family, zb_recompute_t rc, zb_gpt2_keep_t keep)
{
    zb_train_config_t c;
    pt_tiny_config(&c, 4, 8, 4, 1);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 2;
    o.schedule = family;
    o.recompute = rc;
    o.keep = keep;
    o.pin = false;
    o.profile = false;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, rep, &err), ZB_OK);
    zb_gen_params_t gp = {.ranks = 2, .microbatches = 4};
    zb_schedule_t *s = NULL, *r = NULL;
    assert_int_equal(zb_generate(family, &gp, &s, &err), ZB_OK);
    if (rc == ZB_RECOMPUTE_ALL) {
        assert_int_equal(zb_add_recompute(s, NULL, &r, &err), ZB_OK);
        zb_schedule_free(s);
        s = r;
    }
    zb_costs_t costs; /* times do not matter: a rank's memory peak follows its program order */
    assert_int_equal(zb_costs_init_uniform(&costs, s->stages, 1, 1, 1, 0, 1, 0, -1, &err), ZB_OK);
    zb_rank_mem_t got[2];
    zb_trainer_t t; /* the model configuration the run derived from c */
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_OK);
    zb_gpt2_config_t m = t.params.cfg;
    zb_trainer_free(&t);
    zb_status_t st = zb_pipeline_predict_memory(&m, rep->first, s, &costs, 2, c.seq,
                                                o.opt_sync, keep, got, &err);
    if (st != ZB_OK)
        fail_msg("%s: %s", family, err.msg);
    for (int k = 0; k < 2; k++) {
        const zb_rank_mem_t *want = &rep->mem_predicted[k], *meas = &rep->mem_measured[k];
        const double g[] = {got[k].params,      got[k].grads,       got[k].optimizer,
                            got[k].backup,      got[k].messages,    got[k].activations,
                            got[k].stash_alloc, got[k].workspace,   got[k].total};
        const double w[] = {want->params,      want->grads,     want->optimizer,
                            want->backup,      want->messages,  want->activations,
                            want->stash_alloc, want->workspace, want->total};
        const double x[] = {meas->params,      meas->grads,     meas->optimizer,
                            meas->backup,      meas->messages,  meas->activations,
                            meas->stash_alloc, meas->workspace, meas->total};
        for (int i = 0; i < 9; i++)
            if (g[i] != w[i] || g[i] != x[i])
                fail_msg("%s rank %d field %d: predict_memory %.0f, run predicted %.0f, "
                         "measured %.0f", family, k, i, g[i], w[i], x[i]);
    }
    double least = fmin(rep->mem_measured[0].workspace, rep->mem_measured[1].workspace);
    zb_costs_free(&costs);
    zb_schedule_free(s);
    zb_pipeline_report_free(rep), free(rep);
    return least;
}

static void test_matches_the_run(void **state)
{
    (void)state;
    check("1f1b", ZB_RECOMPUTE_NONE, ZB_GPT2_KEEP_ALL);
    check("zb-h1", ZB_RECOMPUTE_ALL, ZB_GPT2_KEEP_ALL);
    check("zb-v", ZB_RECOMPUTE_NONE, ZB_GPT2_KEEP_SELECTIVE);
    assert_true(check("gpipe", ZB_RECOMPUTE_ALL, ZB_GPT2_KEEP_SELECTIVE) == 0); /* fp32 */
}

/* bf16 products (emulated: any CPU) keep each rank's weights rounded once a step: the copies
 * are in the tables, predicted = measured, and gone with the cache. */
static void test_bf16_weight_copies(void **state)
{
    (void)state;
    zb_err_t e;
    setenv(ZB_CPU_BF16_TEST_ENV, "emulate", 1);
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &e), ZB_OK);
    assert_true(check("1f1b", ZB_RECOMPUTE_NONE, ZB_GPT2_KEEP_ALL) > 0);
    assert_true(check("zb-v", ZB_RECOMPUTE_ALL, ZB_GPT2_KEEP_ALL) > 0);
    setenv(ZB_CPU_BF16_NO_WEIGHT_CACHE_ENV, "1", 1);
    assert_true(check("1f1b", ZB_RECOMPUTE_NONE, ZB_GPT2_KEEP_ALL) == 0);
    unsetenv(ZB_CPU_BF16_NO_WEIGHT_CACHE_ENV);
    assert_int_equal(zb_cpu_gemm_set_precision(ZB_CPU_GEMM_FP32, &e), ZB_OK);
    unsetenv(ZB_CPU_BF16_TEST_ENV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_matches_the_run),
                                       cmocka_unit_test(test_bf16_weight_copies)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
