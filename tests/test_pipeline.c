/* Tests of the pipeline trainer (ranks as threads) against the single-process trainer with the
 * same microbatches: every schedule family in the registry, P in {2, 4}, M in {P, 2P, 8}, a few
 * steps of a tiny GPT-2 on the demo corpus give the same losses and the same final parameters,
 * bit for bit. Also: optimizer sync modes agree on a clipping step and on an injected Inf
 * (skipped, never applied); a failing rank stops everyone with its name; setups the schedule or
 * the model cannot run are refused before training. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "zbpp/pipeline.h"
#include "zbpp/train.h"

enum { STEPS = 3 };

static void tiny_config(zb_train_config_t *c, int M)
{
    zb_train_config_defaults(c);
    c->text_path = ZB_SOURCE_DIR "/data/demo_corpus.txt";
    c->model.layers = 8;
    c->model.heads = 2;
    c->model.channels = 32;
    c->model.max_seq = 16;
    c->seq = 16;
    c->batch = 8;
    c->microbatches = M;
    c->steps = STEPS;
    c->quiet = true;
    c->adamw.lr = 1e-2f; /* large enough that a wrong update shows in the bits */
}

/* Reference: the single-process trainer, losses of each step and the final parameters. The
 * compute wrapper can inject an Inf like the pipeline's test hook. */
typedef struct {
    long inf_step;
    int inf_unit;
} ref_hook_t;

static zb_status_t ref_compute(zb_trainer_t *t, void *ctx, float *loss, zb_err_t *err)
{
    ref_hook_t *h = ctx;
    zb_status_t st = zb_trainer_compute_local(t, NULL, loss, err);
    if (st == ZB_OK && t->step == h->inf_step) {
        size_t off[16], cnt[16];
        zb_gpt2_unit_ranges(&t->params.cfg, h->inf_unit, off, cnt);
        t->grads.g.data[off[0]] = INFINITY;
        t->unit_sumsq[h->inf_unit] = zb_grad_unit_sumsq(&t->grads.g, h->inf_unit);
    }
    return st;
}

static void reference(const zb_train_config_t *c, const ref_hook_t *hook, float *losses,
                      zb_gpt2_params_t *out, long *skipped)
{
    zb_trainer_t t;
    zb_err_t err;
    assert_int_equal(zb_trainer_init(&t, c, &err), ZB_OK);
    ref_hook_t h = hook ? *hook : (ref_hook_t){-1, -1};
    t.compute = ref_compute;
    t.compute_ctx = &h;
    *skipped = 0;
    for (int s = 0; s < c->steps; s++) {
        zb_step_stats_t st;
        assert_int_equal(zb_trainer_step(&t, &st, &err), ZB_OK);
        losses[s] = st.loss;
        *skipped += st.skipped;
    }
    assert_int_equal(zb_gpt2_params_alloc(out, &t.params.cfg, &err), ZB_OK);
    memcpy(out->data, t.params.data, t.params.count * sizeof(float));
    zb_trainer_free(&t);
}

/* Per-step losses of a pipeline run come from its metrics file. */
static void read_losses(const char *path, float *losses, int n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int i = 0;
    while (i < n && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"loss\":");
        assert_non_null(p);
        losses[i++] = strtof(p + 7, NULL);
    }
    fclose(f);
    assert_int_equal(i, n);
}

static void metrics_path(char *buf, size_t n, const char *what)
{
    snprintf(buf, n, "/tmp/zbpp_test_pipeline_%ld_%s.jsonl", (long)getpid(), what);
}

static zb_status_t pipeline(const zb_train_config_t *c0, const zb_pipeline_opts_t *o,
                            float *losses, zb_gpt2_params_t *out, zb_pipeline_report_t *rep,
                            zb_err_t *err)
{
    zb_train_config_t c = *c0;
    char path[256];
    metrics_path(path, sizeof path, "run");
    c.metrics_path = path;
    zb_train_summary_t sum;
    zb_status_t st = zb_pipeline_train(&c, o, NULL, &sum, rep, out, err);
    if (st == ZB_OK)
        read_losses(path, losses, (int)c.steps);
    unlink(path);
    return st;
}

static void assert_same_params(const zb_gpt2_params_t *a, const zb_gpt2_params_t *b,
                               const char *what)
{
    assert_int_equal(a->count, b->count);
    if (memcmp(a->data, b->data, a->count * sizeof(float)) != 0) {
        size_t i = 0;
        while (a->data[i] == b->data[i] || (isnan(a->data[i]) && isnan(b->data[i])))
            i++;
        fail_msg("%s: parameter %zu differs: %.9g vs %.9g", what, i, (double)a->data[i],
                 (double)b->data[i]);
    }
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
                zb_pipeline_report_t rep;
                zb_err_t err;
                zb_status_t st = pipeline(&c, &o, loss, &got, &rep, &err);
                if (st != ZB_OK) {
                    /* the documented rejections: the family refuses (P, M) */
                    if (st != ZB_EINVAL)
                        fail_msg("%s P=%d M=%d: %s", gens[g].name, P, M, err.msg);
                    print_message("    %-18s P=%d M=%d rejected: %s\n", gens[g].name, P, M,
                                  err.msg);
                    continue;
                }
                char what[96];
                snprintf(what, sizeof what, "%s P=%d M=%d", gens[g].name, P, M);
                for (int s = 0; s < STEPS; s++)
                    if (memcmp(&loss[s], &ref_loss[s], sizeof(float)) != 0)
                        fail_msg("%s: step %d loss %.9g vs reference %.9g", what, s,
                                 (double)loss[s], (double)ref_loss[s]);
                assert_same_params(&got, &ref, what);
                /* memory: the measured stash peak never exceeds the model's prediction */
                for (int r = 0; r < P; r++)
                    assert_true(rep.peak_stash_bytes[r] <= rep.predicted_stash_bytes[r] + 0.5);
                zb_gpt2_params_free(&got);
                ran++;
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
    ref_hook_t hook = {2, 3};
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
    o.inject_inf_step = 2;
    o.inject_inf_unit = 3;
    zb_pipeline_report_t rep;
    zb_err_t err;
    assert_int_equal(pipeline(&c, &o, pv_loss, &pv, &rep, &err), ZB_OK);
    assert_true(rep.rollbacks > 0); /* some rank stepped optimistically and had to undo */
    o.opt_sync = ZB_OPT_SYNC_BARRIER;
    assert_int_equal(pipeline(&c, &o, bar_loss, &bar, &rep, &err), ZB_OK);
    assert_int_equal(rep.rollbacks, 0);
    assert_memory_equal(pv_loss, ref_loss, sizeof ref_loss);
    assert_memory_equal(bar_loss, ref_loss, sizeof ref_loss);
    assert_same_params(&pv, &ref, "post-validation");
    assert_same_params(&bar, &ref, "barrier");
    for (size_t i = 0; i < pv.count; i++)
        assert_true(isfinite(pv.data[i]));
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&pv), zb_gpt2_params_free(&bar);

    /* With a clip nobody reaches, post-validation never rolls back except for the Inf step. */
    c.grad_clip = 1e9f;
    hook.inf_step = -1;
    o.inject_inf_step = -1;
    o.opt_sync = ZB_OPT_SYNC_POST_VALIDATION;
    assert_int_equal(pipeline(&c, &o, pv_loss, &pv, &rep, &err), ZB_OK);
    assert_int_equal(rep.rollbacks, 0);
    reference(&c, NULL, ref_loss, &ref, &skipped);
    assert_same_params(&pv, &ref, "post-validation, no clipping");
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&pv);
}

static void test_failing_rank_stops_all(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8);
    char ckpt[256];
    metrics_path(ckpt, sizeof ckpt, "ckpt.bin");
    c.save_path = ckpt;
    unlink(ckpt);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 4;
    o.schedule = "1f1b";
    o.pin = false;
    o.timeout = 0; /* no timeout: only the abort can end the other ranks' waits */
    o.fail_step = 1;
    o.fail_rank = 2;
    o.fail_action = 5;
    float loss[STEPS];
    zb_pipeline_report_t rep;
    zb_err_t err;
    assert_int_equal(pipeline(&c, &o, loss, NULL, &rep, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "rank 2, "));
    assert_non_null(strstr(err.msg, "injected fault"));
    assert_int_equal(access(ckpt, F_OK), -1); /* no partial checkpoint */
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
    zb_pipeline_report_t rep;
    zb_err_t err;

    o.ranks = 4; /* interleaved with 4 ranks x 2 chunks on 4 blocks: more stages than blocks */
    o.schedule = "1f1b";
    zb_train_config_t small = c;
    small.model.layers = 2;
    assert_int_equal(pipeline(&small, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "more stages"));

    o.ranks = 2;
    zb_train_config_t odd = c;
    odd.batch = 6; /* B % M != 0 */
    assert_int_equal(pipeline(&odd, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "divisible"));

    o.schedule = "no-such-schedule";
    assert_int_equal(pipeline(&c, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "unknown schedule"));

    o.schedule = "zb-h2";
    o.mem_limit = 1000; /* bytes: no schedule fits */
    assert_int_equal(pipeline(&c, &o, loss, NULL, &rep, &err), ZB_EMEMLIMIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_bit_identical),
        cmocka_unit_test(test_post_validation_rollback),
        cmocka_unit_test(test_failing_rank_stops_all),
        cmocka_unit_test(test_rejected_before_training),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
