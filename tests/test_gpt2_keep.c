/* Selective recompute in the GPT-2 stage (ZB_GPT2_KEEP_SELECTIVE): F keeps neither the
 * LayerNorm nor the GELU outputs and W rebuilds them, giving the same loss, input gradient and
 * weight gradients, bit for bit, as a stash that keeps everything, on every kind of stage
 * (embedding, middle, head), with W deferred behind another microbatch's F; the memory model
 * says exactly how much less F keeps; zb_layernorm_apply rebuilds the forward's output bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/gpt2.h"
#include "zbpp/nn.h"

static const zb_gpt2_config_t CFG = {.max_seq = 16, .vocab = 67, .padded_vocab = 128,
                                     .layers = 4, .heads = 2, .channels = 16};
enum { BB = 2, TT = 8, NTOK = BB * TT };

static void must(zb_status_t s, const zb_err_t *e)
{
    if (s != ZB_OK)
        fail_msg("unexpected error: %s", e->msg);
}

/* Two microbatches through stages [0,2) (embed) and [2,4) (head) in the given keep mode, the
 * second F before the first W (a deferred W must find its own rebuilt buffers). */
static void run(zb_gpt2_keep_t keep, const zb_gpt2_params_t *p, zb_gpt2_grads_t *g,
                float loss[2], float *dx_mid)
{
    zb_err_t e;
    const zb_gpt2_span_t sp[2] = {{.layer_begin = 0, .layer_end = 2, .embed = true},
                                  {.layer_begin = 2, .layer_end = 4, .head = true}};
    size_t nc = (size_t)NTOK * CFG.channels;
    float *act = calloc(2 * nc, sizeof(float)), *grad = calloc(2 * nc, sizeof(float));
    int tok[2][NTOK], tgt[2][NTOK];
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < NTOK; i++) {
            tok[m][i] = (i * 7 + m * 13) % CFG.vocab;
            tgt[m][i] = (i * 5 + 3 + m * 11) % CFG.vocab;
        }
    zb_gpt2_stash_t *st[2][2];
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 2; m++)
            must(zb_gpt2_stash_new_keep(&CFG, &sp[s], BB, TT, keep, &st[s][m], &e), &e);
    for (int m = 0; m < 2; m++) {
        must(zb_gpt2_forward(p, &sp[0], st[0][m], tok[m], NULL, NULL, act + m * nc, NULL, &e), &e);
        must(zb_gpt2_forward(p, &sp[1], st[1][m], NULL, act + m * nc, tgt[m], NULL, &loss[m], &e),
             &e);
        must(zb_gpt2_backward_input(p, &sp[1], st[1][m], NULL, 0.5f / NTOK, grad + m * nc, &e), &e);
        must(zb_gpt2_backward_input(p, &sp[0], st[0][m], grad + m * nc, 0.5f / NTOK, NULL, &e), &e);
    }
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++)
            must(zb_gpt2_backward_weight(p, &sp[s], st[s][m], g, &e), &e);
    memcpy(dx_mid, grad, 2 * nc * sizeof(float));
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 2; m++)
            zb_gpt2_stash_free(st[s][m]);
    free(act);
    free(grad);
}

static void test_selective_same_bits(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_params_t p;
    zb_gpt2_grads_t ga, gs;
    must(zb_gpt2_params_alloc(&p, &CFG, &e), &e);
    zb_gpt2_params_init_random(&p, 7);
    must(zb_gpt2_grads_alloc(&ga, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&gs, &CFG, &e), &e);
    size_t nc = (size_t)NTOK * CFG.channels;
    float la[2], ls[2], *da = malloc(2 * nc * sizeof(float)), *ds = malloc(2 * nc * sizeof(float));
    run(ZB_GPT2_KEEP_ALL, &p, &ga, la, da);
    run(ZB_GPT2_KEEP_SELECTIVE, &p, &gs, ls, ds);
    assert_memory_equal(la, ls, sizeof la);
    assert_memory_equal(da, ds, 2 * nc * sizeof(float));
    assert_memory_equal(ga.g.data, gs.g.data, ga.g.count * sizeof(float));
    size_t wte = (size_t)CFG.padded_vocab * CFG.channels;
    assert_memory_equal(ga.wte_head, gs.wte_head, wte * sizeof(float));
    free(da);
    free(ds);
    zb_gpt2_grads_free(&ga);
    zb_gpt2_grads_free(&gs);
    zb_gpt2_params_free(&p);
}

/* Per layer, F keeps 6C floats per token less (LN1, LN2: C each; GELU: 4C); after B the LN
 * outputs (2C) are gone and the pre-GELU activation (4C) replaces the GELU output (4C). */
static void test_memory_model(void **state)
{
    (void)state;
    const zb_gpt2_span_t mid = {.layer_begin = 1, .layer_end = 3};
    size_t fa, ba, fs, bs;
    zb_gpt2_stage_mem_keep(&CFG, &mid, BB, TT, ZB_GPT2_KEEP_ALL, &fa, &ba);
    zb_gpt2_stage_mem_keep(&CFG, &mid, BB, TT, ZB_GPT2_KEEP_SELECTIVE, &fs, &bs);
    size_t per = (size_t)NTOK * CFG.channels * sizeof(float); /* one [N,C] buffer, 64-aligned */
    assert_int_equal(fa - fs, 2 * 6 * per);
    assert_int_equal(ba - bs, 2 * 2 * per);
    /* the live accounting of a stash follows the model */
    zb_err_t e;
    zb_gpt2_stash_t *st;
    must(zb_gpt2_stash_new_keep(&CFG, &mid, BB, TT, ZB_GPT2_KEEP_SELECTIVE, &st, &e), &e);
    assert_int_equal(zb_gpt2_stash_live_bytes(st), 0);
    zb_gpt2_stash_free(st);
    assert_int_equal(zb_gpt2_stash_new_keep(&CFG, &mid, BB, TT, (zb_gpt2_keep_t)7, &st, &e),
                     ZB_EINVAL);
}

static void test_layernorm_apply_bits(void **state)
{
    (void)state;
    enum { N = 37, C = 83 };
    float x[N * C], w[C], b[C], out[N * C], again[N * C], mean[N], rstd[N];
    for (int i = 0; i < N * C; i++)
        x[i] = sinf(0.37f * (float)i) * 3.0f + 0.25f;
    for (int c = 0; c < C; c++)
        w[c] = 1.0f + 0.01f * (float)c, b[c] = -0.5f + 0.02f * (float)c;
    zb_layernorm_forward(out, mean, rstd, x, w, b, N, C);
    memset(again, 0xff, sizeof again);
    zb_layernorm_apply(again, x, mean, rstd, w, b, N, C);
    assert_memory_equal(out, again, sizeof out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selective_same_bits),
        cmocka_unit_test(test_memory_model),
        cmocka_unit_test(test_layernorm_apply_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
