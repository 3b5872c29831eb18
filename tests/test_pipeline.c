/* Tests of the pipeline trainer (ranks as threads) against the single-process trainer with the
 * same microbatches: every schedule family in the registry, P in {2, 4}, M in {P, 2P, 8}, a few
 * steps of a tiny GPT-2 on the demo corpus give the same losses and the same final parameters,
 * bit for bit. Also: optimizer sync modes agree on a clipping step and on an injected Inf
 * (skipped, never applied); a failing rank stops everyone with its name; setups the schedule or
 * the model cannot run are refused before training. */
#include "pipeline/pipeline_hooks.h"
#include "pipeline_testutil.h"

enum { STEPS = 3 };

static void tiny_config(zb_train_config_t *c, int M) { pt_tiny_config(c, 8, 8, M, STEPS); }

/* Reference: the single-process trainer, losses of each step and the final parameters; `hook`
 * (may be NULL) injects an Inf like the pipeline's test hook. */
static void reference(const zb_train_config_t *c, const pt_inf_t *hook, float *losses,
                      zb_gpt2_params_t *out, long *skipped)
{
    pt_inf_t h = hook ? *hook : (pt_inf_t){-1, -1};
    pt_reference(c, pt_inject_inf, &h, losses, out, skipped);
}

static void test_every_family_bit_identical(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    int ran = 0;
    static const int Ms[] = {2, 4, 8};
    for (int mi = 0; mi < 3; mi++) {
        int M = Ms[mi];
        zb_train_config_t c;
        tiny_config(&c, M);
        float ref_loss[STEPS];
        zb_gpt2_params_t ref;
        long skipped;
        reference(&c, NULL, ref_loss, &ref, &skipped);
        for (size_t g = 0; g < n; g++)
            for (int P = 2; P <= 4; P += 2) {
                if (M != P && M != 2 * P && M != 8)
                    continue;
                zb_pipeline_opts_t o;
                zb_pipeline_opts_defaults(&o);
                o.ranks = P;
                o.schedule = gens[g].name;
                o.pin = false;
                o.timeout = 60;
                o.opt_sync = (ran % 2) ? ZB_OPT_SYNC_BARRIER : ZB_OPT_SYNC_POST_VALIDATION;
                float loss[STEPS];
                zb_gpt2_params_t got;
                zb_pipeline_report_t rep = {0};
                zb_err_t err;
                zb_status_t st = pt_run(&c, &o, loss, &got, &rep, &err);
                if (st != ZB_OK) {
                    /* the documented rejections: the family refuses (P, M) */
                    if (st != ZB_EINVAL)
                        fail_msg("%s P=%d M=%d: %s", gens[g].name, P, M, err.msg);
                    print_message("    %-18s P=%d M=%d rejected: %s\n", gens[g].name, P, M,
                                  err.msg);
                    zb_pipeline_report_free(&rep);
                    continue;
                }
                char what[96];
                snprintf(what, sizeof what, "%s P=%d M=%d", gens[g].name, P, M);
                for (int s = 0; s < STEPS; s++)
                    if (memcmp(&loss[s], &ref_loss[s], sizeof(float)) != 0)
                        fail_msg("%s: step %d loss %.9g vs reference %.9g", what, s,
                                 (double)loss[s], (double)ref_loss[s]);
                pt_assert_same_params(&got, &ref, what);
                /* memory: the measured stash peak never exceeds the model's prediction */
                for (int r = 0; r < P; r++)
                    assert_true(rep.peak_stash_bytes[r] <= rep.predicted_stash_bytes[r] + 0.5);
                zb_gpt2_params_free(&got);
                ran++;
                zb_pipeline_report_free(&rep);
            }
        zb_gpt2_params_free(&ref);
    }
    print_message("    %d pipeline runs matched --ranks 1 bit for bit\n", ran);
    assert_true(ran >= 10);
}

/* A step where clipping triggers (tiny clip) and a step with an injected Inf: post-validation
 * rolls back and redoes, ending bit-identical to barrier and to the single process; the Inf step
 * is skipped and changes nothing. */
static void test_post_validation_rollback(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 4);
    c.steps = 4;
    c.grad_clip = 0.5f; /* the first steps' norms are above it: clipped */
    pt_inf_t hook = {2, 3};
    float ref_loss[4], pv_loss[4], bar_loss[4];
    zb_gpt2_params_t ref, pv, bar;
    long skipped;
    reference(&c, &hook, ref_loss, &ref, &skipped);
    assert_int_equal(skipped, 1);

    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 2;
    o.schedule = "zb-h1";
    o.pin = false;
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.inject_inf_step = 2;
    hooks.inject_inf_unit = 3;
    o.test_hooks = &hooks;
    zb_pipeline_report_t rep = {0};
    zb_err_t err;
    /* by default a rank stops guessing after a clipped step: at most the first step rolls back */
    float auto_loss[4];
    zb_gpt2_params_t autop;
    assert_int_equal(pt_run(&c, &o, auto_loss, &autop, &rep, &err), ZB_OK);
    assert_true(rep.rollbacks <= o.ranks);
    assert_memory_equal(auto_loss, ref_loss, sizeof ref_loss);
    pt_assert_same_params(&autop, &ref, "post-validation, guessing as the last steps say");
    zb_gpt2_params_free(&autop);
    hooks.always_guess = 1; /* every step's guess, rolled back where the clip bites */
    assert_int_equal(pt_run(&c, &o, pv_loss, &pv, &rep, &err), ZB_OK);
    assert_true(rep.rollbacks > 0); /* some rank stepped optimistically and had to undo */
    hooks.always_guess = 0;
    o.opt_sync = ZB_OPT_SYNC_BARRIER;
    assert_int_equal(pt_run(&c, &o, bar_loss, &bar, &rep, &err), ZB_OK);
    assert_int_equal(rep.rollbacks, 0);
    assert_memory_equal(pv_loss, ref_loss, sizeof ref_loss);
    assert_memory_equal(bar_loss, ref_loss, sizeof ref_loss);
    pt_assert_same_params(&pv, &ref, "post-validation");
    pt_assert_same_params(&bar, &ref, "barrier");
    for (size_t i = 0; i < pv.count; i++)
        assert_true(isfinite(pv.data[i]));
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&pv), zb_gpt2_params_free(&bar);

    /* With a clip nobody reaches, post-validation never rolls back except for the Inf step. */
    c.grad_clip = 1e9f;
    hook.step = -1;
    o.test_hooks = NULL;
    o.opt_sync = ZB_OPT_SYNC_POST_VALIDATION;
    assert_int_equal(pt_run(&c, &o, pv_loss, &pv, &rep, &err), ZB_OK);
    assert_int_equal(rep.rollbacks, 0);
    reference(&c, NULL, ref_loss, &ref, &skipped);
    pt_assert_same_params(&pv, &ref, "post-validation, no clipping");
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&pv);
    zb_pipeline_report_free(&rep);
}

static void test_failing_rank_stops_all(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8);
    char ckpt[256];
    pt_tmp_path(ckpt, sizeof ckpt, "ckpt.bin");
    c.save_path = ckpt;
    unlink(ckpt);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 4;
    o.schedule = "1f1b";
    o.pin = false;
    o.timeout = 0; /* no timeout: only the abort can end the other ranks' waits */
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.fail_step = 1;
    hooks.fail_rank = 2;
    hooks.fail_action = 5;
    o.test_hooks = &hooks;
    float loss[STEPS];
    zb_pipeline_report_t rep = {0};
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, loss, NULL, &rep, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "rank 2, "));
    assert_non_null(strstr(err.msg, "injected fault"));
    assert_int_equal(access(ckpt, F_OK), -1); /* no partial checkpoint */
    zb_pipeline_report_free(&rep);
}

static void test_rejected_before_training(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 4);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.pin = false;
    float loss[STEPS];
    zb_pipeline_report_t rep = {0};
    zb_err_t err;

    o.ranks = 4; /* interleaved with 4 ranks x 2 chunks on 4 blocks: more stages than blocks */
    o.schedule = "1f1b";
    zb_train_config_t small = c;
    small.model.layers = 2;
    assert_int_equal(pt_run(&small, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "more stages"));

    o.ranks = 2;
    zb_train_config_t odd = c;
    odd.batch = 6; /* B % M != 0 */
    assert_int_equal(pt_run(&odd, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "divisible"));

    o.schedule = "no-such-schedule";
    assert_int_equal(pt_run(&c, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "unknown schedule"));

    o.schedule = "zb-h2";
    o.mem_limit = 1000; /* bytes: no schedule fits */
    assert_int_equal(pt_run(&c, &o, loss, NULL, &rep, &err), ZB_EMEMLIMIT);
    zb_pipeline_report_free(&rep);
}

/* --mem-limit is on each rank's own whole footprint: the largest predicted total is enough
 * (the ranks differ: the head's WTE, message buffers), a byte less is not. */
static void test_mem_limit_is_per_rank(void **state)
{
    (void)state;
    zb_train_config_t c;
    pt_tiny_config(&c, 8, 8, 4, 1);
    static const char *families[] = {"1f1b", "zb-v"};
    for (int k = 0; k < 2; k++) {
        zb_pipeline_opts_t o;
        zb_pipeline_opts_defaults(&o);
        o.ranks = 2;
        o.schedule = families[k];
        o.pin = false;
        zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
        float loss[1];
        zb_err_t err;
        assert_int_equal(pt_run(&c, &o, loss, NULL, rep, &err), ZB_OK);
        double most = fmax(rep->mem_predicted[0].total, rep->mem_predicted[1].total);
        assert_true(rep->mem_predicted[0].total != rep->mem_predicted[1].total);
        o.mem_limit = most;
        if (pt_run(&c, &o, loss, NULL, rep, &err) != ZB_OK)
            fail_msg("%s at the largest rank's total (%.0f bytes): %s", families[k], most,
                     err.msg);
        o.mem_limit = most - 1;
        assert_int_equal(pt_run(&c, &o, loss, NULL, rep, &err), ZB_EMEMLIMIT);
        zb_pipeline_report_free(rep), free(rep);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_bit_identical),
        cmocka_unit_test(test_post_validation_rollback),
        cmocka_unit_test(test_failing_rank_stops_all),
        cmocka_unit_test(test_rejected_before_training),
        cmocka_unit_test(test_mem_limit_is_per_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
