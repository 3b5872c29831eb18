/* Whole model against PyTorch: tests/fixtures/ holds a tiny GPT-2 (llm.c checkpoint) with the
 * loss, logits and every parameter gradient PyTorch computed in float64
 * (scripts/make_torch_fixture.py). Torch is not needed to run this test. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/gpt2.h"

typedef struct {
    int B, T, Vp;
    size_t count;
    int *tokens, *targets;
    float loss;
    float *logits, *grads;
} ref_t;

static FILE *open_fixture(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", ZB_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open fixture %s", path);
    return f;
}

static void read_exact(void *dst, size_t size, size_t n, FILE *f)
{
    if (fread(dst, size, n, f) != n)
        fail_msg("fixture truncated");
}

static void load_ref(ref_t *r)
{
    FILE *f = open_fixture("gpt2_tiny_ref.bin");
    int32_t h[6];
    read_exact(h, sizeof(int32_t), 6, f);
    assert_int_equal(h[0], 0x5846425A);
    assert_int_equal(h[1], 1);
    r->B = h[2], r->T = h[3], r->Vp = h[4], r->count = (size_t)h[5];
    size_t N = (size_t)r->B * r->T;
    r->tokens = malloc(N * sizeof(int));
    r->targets = malloc(N * sizeof(int));
    r->logits = malloc(N * r->Vp * sizeof(float));
    r->grads = malloc(r->count * sizeof(float));
    read_exact(r->tokens, sizeof(int), N, f);
    read_exact(r->targets, sizeof(int), N, f);
    read_exact(&r->loss, sizeof(float), 1, f);
    read_exact(r->logits, sizeof(float), N * r->Vp, f);
    read_exact(r->grads, sizeof(float), r->count, f);
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
}

static void free_ref(ref_t *r)
{
    free(r->tokens), free(r->targets), free(r->logits), free(r->grads);
}

static const char *tensor_names[ZB_GPT2_NUM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

static void test_matches_pytorch(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/gpt2_tiny.bin", ZB_SOURCE_DIR);
    zb_gpt2_params_t p;
    zb_gpt2_grads_t g;
    zb_err_t e;
    if (zb_gpt2_load_llmc(path, &p, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    ref_t r;
    load_ref(&r);
    assert_int_equal(r.count, p.count);
    assert_int_equal(r.Vp, p.cfg.padded_vocab);
    assert_int_equal(zb_gpt2_grads_alloc(&g, &p.cfg, &e), ZB_OK);

    zb_gpt2_span_t sp = {0, p.cfg.layers, true, true};
    zb_gpt2_stash_t *st;
    assert_int_equal(zb_gpt2_stash_new(&p.cfg, &sp, r.B, r.T, &st, &e), ZB_OK);
    int N = r.B * r.T, V = p.cfg.vocab, Vp = p.cfg.padded_vocab;
    float loss;
    assert_int_equal(zb_gpt2_forward(&p, &sp, st, r.tokens, NULL, r.targets, NULL, &loss, &e),
                     ZB_OK);
    if (fabsf(loss - r.loss) > 1e-5f + 1e-5f * fabsf(r.loss))
        fail_msg("loss %.7f vs PyTorch %.7f", loss, r.loss);

    /* logits, through the probabilities: log p_i - log p_0 = logit_i - logit_0 per row */
    const float *probs = zb_gpt2_stash_probs(st);
    assert_non_null(probs);
    for (int n = 0; n < N; n++) {
        const float *pr = probs + (size_t)n * Vp, *lg = r.logits + (size_t)n * Vp;
        for (int i = 1; i < V; i++) {
            double mine = log(pr[i]) - log(pr[0]), ref = (double)lg[i] - lg[0];
            if (fabs(mine - ref) > 1e-4 + 1e-4 * fabs(ref))
                fail_msg("row %d logit %d: %.6f vs PyTorch %.6f (relative to column 0)", n, i,
                         mine, ref);
        }
        for (int i = V; i < Vp; i++)
            assert_true(pr[i] == 0.0f && lg[i] == 0.0f);
    }

    zb_gpt2_grads_zero(&g);
    assert_int_equal(zb_gpt2_backward_input(&p, &sp, st, NULL, 1.0f / N, NULL, &e), ZB_OK);
    assert_int_equal(zb_gpt2_backward_weight(&p, &sp, st, &g, &e), ZB_OK);
    zb_gpt2_fold_tied(&g);
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS; t++) {
        const float *mine = g.g.t[t], *ref = r.grads + (g.g.t[t] - g.g.data);
        double maxref = 0;
        for (size_t i = 0; i < g.g.sizes[t]; i++)
            maxref = fmax(maxref, fabs(ref[i]));
        assert_true(t == ZB_WTE || maxref > 1e-3); /* every tensor gets a real gradient */
        for (size_t i = 0; i < g.g.sizes[t]; i++)
            if (fabs(mine[i] - ref[i]) > 1e-5 + 1e-4 * fabs(ref[i]))
                fail_msg("grad %s[%zu]: %.8g vs PyTorch %.8g", tensor_names[t], i, mine[i],
                         ref[i]);
    }
    zb_gpt2_stash_free(st);
    zb_gpt2_grads_free(&g);
    zb_gpt2_params_free(&p);
    free_ref(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_matches_pytorch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
