/* Helpers shared by the pipeline trainer tests (test_pipeline, test_profile, test_dp; cmocka):
 * a tiny model, the single-process reference, one pipeline run with its losses, bit-exact
 * parameter comparison. Header-only: each test is its own executable. */
#ifndef ZBPP_TESTS_PIPELINE_TESTUTIL_H
#define ZBPP_TESTS_PIPELINE_TESTUTIL_H

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

/* A tiny GPT-2 on the demo corpus (2 heads, 32 channels, 16 positions): `layers` blocks, batch
 * B split into M microbatches, `steps` steps, quiet. */
static inline void pt_tiny_config(zb_train_config_t *c, int layers, int B, int M, long steps)
{
    zb_train_config_defaults(c);
    c->text_path = ZB_SOURCE_DIR "/data/demo_corpus.txt";
    c->model.layers = layers;
    c->model.heads = 2;
    c->model.channels = 32;
    c->model.max_seq = 16;
    c->seq = 16;
    c->batch = B;
    c->microbatches = M;
    c->steps = steps;
    c->quiet = true;
    c->adamw.lr = 1e-2f; /* large enough that a wrong update shows in the bits */
}

/* A scratch file name unique to this test process: /tmp/zbpp_test_<pid>_<what>. */
static inline void pt_tmp_path(char *buf, size_t n, const char *what)
{
    snprintf(buf, n, "/tmp/zbpp_test_%ld_%s", (long)getpid(), what);
}

/* The first n per-step losses of a metrics file (one JSON object per line with "loss":). */
static inline void pt_read_losses(const char *path, float *losses, int n)
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

/* A gradient hook for pt_reference that injects an Inf like the pipeline's test hook
 * (zb_pipeline_test_hooks_t.inject_inf_step / _unit): at step `step`, the first element of unit `unit`. */
typedef struct {
    long step;
    int unit;
} pt_inf_t;

/* Reference: the single-process trainer on `c`, step by step; `after_compute` (may be NULL)
 * sees each step's gradients before the update (to inject a fault like the pipeline's test
 * hook). Fills the per-step losses, *out (caller frees) with the final parameters and
 * *skipped (may be NULL) with the number of skipped steps. */
typedef void (*pt_grad_hook_fn)(zb_trainer_t *t, void *ctx);

/* pt_grad_hook_fn for a pt_inf_t ctx. */
static inline void pt_inject_inf(zb_trainer_t *t, void *ctx)
{
    const pt_inf_t *h = ctx;
    if (t->step == h->step) {
        size_t off[16], cnt[16];
        zb_gpt2_unit_ranges(&t->params.cfg, h->unit, off, cnt);
        t->grads.g.data[off[0]] = INFINITY;
        t->unit_sumsq[h->unit] = zb_grad_unit_sumsq(&t->grads.g, h->unit);
    }
}

static inline void pt_reference(const zb_train_config_t *c, pt_grad_hook_fn after_compute,
                                void *ctx, float *losses, zb_gpt2_params_t *out, long *skipped)
{
    zb_trainer_t t;
    zb_err_t err;
    assert_int_equal(zb_trainer_init(&t, c, &err), ZB_OK);
    long skips = 0;
    for (int s = 0; s < c->steps; s++) {
        zb_step_stats_t st;
        float loss;
        assert_int_equal(zb_trainer_next_batch(&t, &err), ZB_OK);
        assert_int_equal(zb_trainer_compute(&t, &loss, &err), ZB_OK);
        if (after_compute)
            after_compute(&t, ctx);
        zb_trainer_update(&t, &st);
        zb_trainer_end_step(&t, loss, 0.0, &st);
        losses[s] = st.loss;
        skips += st.skipped;
    }
    if (skipped)
        *skipped = skips;
    assert_int_equal(zb_gpt2_params_alloc(out, &t.params.cfg, &err), ZB_OK);
    memcpy(out->data, t.params.data, t.params.count * sizeof(float));
    zb_trainer_free(&t);
}

/* One pipeline run of `c0` with options `o`: on success `losses` (may be NULL) receives the
 * loss of every step run (read back from a scratch metrics file, removed after). out and rep
 * are passed through to zb_pipeline_train. */
static inline zb_status_t pt_run(const zb_train_config_t *c0, const zb_pipeline_opts_t *o,
                                 float *losses, zb_gpt2_params_t *out, zb_pipeline_report_t *rep,
                                 zb_err_t *err)
{
    zb_train_config_t c = *c0;
    char path[256];
    pt_tmp_path(path, sizeof path, "metrics.jsonl");
    c.metrics_path = path;
    zb_train_summary_t sum;
    zb_status_t st = zb_pipeline_train(&c, o, NULL, &sum, rep, out, err);
    if (st == ZB_OK && losses)
        pt_read_losses(path, losses, (int)(c.steps - sum.first_step));
    unlink(path);
    return st;
}

/* Parameters equal bit for bit, else fail naming the first one that differs. */
static inline void pt_assert_same_params(const zb_gpt2_params_t *a, const zb_gpt2_params_t *b,
                                         const char *what)
{
    assert_int_equal(a->count, b->count);
    if (memcmp(a->data, b->data, a->count * sizeof(float)) == 0)
        return;
    size_t i = 0;
    while (i < a->count &&
           (a->data[i] == b->data[i] || (isnan(a->data[i]) && isnan(b->data[i]))))
        i++;
    if (i == a->count)
        fail_msg("%s: parameters differ only in zero signs or NaN payloads", what);
    fail_msg("%s: parameter %zu differs: %.9g vs %.9g", what, i, (double)a->data[i],
             (double)b->data[i]);
}

#endif
