/* The CUDA stage's host logic on any machine: src/cuda/stage.c (buffer layout, F/B/W op
 * sequence, stash states, parameter/gradient/moment transfers, unit ranges of the grad norm and
 * AdamW) is compiled into this test against a fake device: "device" memory is host memory,
 * poisoned with NaN bytes when allocated (a read before a write shows up as NaN), every zb_cu_*
 * op is the CPU kernel of include/zbpp/nn.h, and the CUDA runtime calls stage.c makes are host
 * memcpy/memset. It runs the tests of tests/cuda_stage_tests.inc (the GPU stage test) except the
 * precision one. Kernels and cuBLASLt themselves are covered on a GPU by test_cuda_gpu_ops.
 * Skipped (exit 77) in a build without CUDA (the toolkit's headers are needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include "cuda_fake_device.inc" /* src/cuda/stage.c on the fake device */

#define CUDA_STAGE_FAKE 1
#include "cuda_stage_tests.inc"

/* On the fake device the stage runs the CPU kernels in the CPU stage's order: the same bits. */
static void test_fake_is_the_cpu_stage(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_grads_t gc, gg;
    must(zb_gpt2_grads_alloc(&gc, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&gg, &CFG, &e), &e);
    make_batch(9);
    zb_gpt2_grads_zero(&gc);
    float closs = cpu_chain(&P0, THREE, 3, &gc, 1.0f / NTOK, NULL, NULL);
    zb_gpt2_fold_tied(&gc);
    gchain_t g;
    gchain_new(&g, THREE, 3, ZB_CUDA_FP32);
    g_zero(&g);
    float gloss = g_forward(&g, 0);
    g_backward_input(&g, 0, 1.0f / NTOK);
    g_backward_weight(&g, 0);
    g_gather(&g, &gg);
    assert_memory_equal(&gloss, &closs, sizeof gloss);
    assert_memory_equal(gg.g.data, gc.g.data, gc.g.count * sizeof(float));
    gchain_free(&g);
    zb_gpt2_grads_free(&gc);
    zb_gpt2_grads_free(&gg);
}

/* A head stage made with zb_cuda_stage_new_tied reads the embedding stage's WTE: the same loss
 * and gradients as a head with its own copy of the same weights, its buffers one WTE smaller
 * (as zb_cuda_stage_memory_tied predicts); a stage that is not the embedding's is refused. */
static void test_tied_head_reads_the_embedding(void **state)
{
    (void)state;
    zb_err_t e;
    zb_cuda_stage_t *embed = NULL, *own = NULL, *tied = NULL;
    must(zb_cuda_stage_new(&CFG, &TWO[0], BB, TT, ZB_CUDA_FP32, 0, &embed, &e), &e);
    must(zb_cuda_params_upload(embed, &P0, &e), &e);
    must(zb_cuda_stage_new(&CFG, &TWO[1], BB, TT, ZB_CUDA_FP32, 0, &own, &e), &e);
    must(zb_cuda_params_upload(own, &P0, &e), &e);
    assert_int_equal(zb_cuda_stage_new_tied(&CFG, &TWO[1], BB, TT, ZB_CUDA_FP32, 0, own, &tied,
                                            &e),
                     ZB_EINVAL);
    assert_int_equal(zb_cuda_stage_new_tied(&CFG, &TWO[0], BB, TT, ZB_CUDA_FP32, 0, embed, &tied,
                                            &e),
                     ZB_EINVAL);
    must(zb_cuda_stage_new_tied(&CFG, &TWO[1], BB, TT, ZB_CUDA_FP32, 0, embed, &tied, &e), &e);
    must(zb_cuda_params_upload(tied, &P0, &e), &e);
    zb_cuda_stage_mem_t m_own, m_tied, m_pred;
    zb_cuda_stage_allocated(own, &m_own);
    zb_cuda_stage_allocated(tied, &m_tied);
    must(zb_cuda_stage_memory_tied(&CFG, &TWO[1], BB, TT, ZB_CUDA_FP32, &m_pred, &e), &e);
    size_t wte = (size_t)CFG.padded_vocab * CFG.channels * sizeof(float);
    assert_int_equal(m_tied.state + wte, m_own.state);
    assert_int_equal(m_tied.wte_head, m_own.wte_head);
    assert_int_equal(m_pred.state, m_tied.state);
    float *x = NULL, *dx = NULL;
    size_t nc = (size_t)NTOK * CFG.channels;
    must(zb_cuda_buffer_alloc(embed, nc, &x, &e), &e);
    must(zb_cuda_buffer_alloc(embed, nc, &dx, &e), &e);
    make_batch(3);
    float xs[NTOK * 64];
    assert_true(nc <= sizeof xs / sizeof *xs);
    for (size_t i = 0; i < nc; i++)
        xs[i] = 0.01f * (float)((i * 7) % 13) - 0.05f;
    must(zb_cuda_copy_to_device(embed, x, xs, nc, &e), &e);
    float loss[2];
    zb_gpt2_grads_t g[2];
    zb_cuda_stage_t *heads[2] = {own, tied};
    for (int k = 0; k < 2; k++) {
        zb_cuda_stash_t *st = NULL;
        must(zb_gpt2_grads_alloc(&g[k], &CFG, &e), &e);
        zb_gpt2_grads_zero(&g[k]);
        must(zb_cuda_stash_new(heads[k], &st, &e), &e);
        must(zb_cuda_grads_zero(heads[k], &e), &e);
        must(zb_cuda_forward(heads[k], st, NULL, x, targets, NULL, &loss[k], &e), &e);
        must(zb_cuda_backward_input(heads[k], st, NULL, 1.0f / NTOK, dx, &e), &e);
        must(zb_cuda_backward_weight(heads[k], st, &e), &e);
        must(zb_cuda_sync(heads[k], &e), &e);
        must(zb_cuda_grads_download(heads[k], &g[k], &e), &e);
        zb_cuda_stash_free(st);
    }
    assert_memory_equal(&loss[1], &loss[0], sizeof loss[0]);
    assert_memory_equal(g[1].wte_head, g[0].wte_head, CFG.padded_vocab * CFG.channels * sizeof(float));
    assert_memory_equal(g[1].g.t[ZB_LNFW], g[0].g.t[ZB_LNFW], g[0].g.sizes[ZB_LNFW] * sizeof(float));
    zb_gpt2_grads_free(&g[0]), zb_gpt2_grads_free(&g[1]);
    zb_cuda_buffer_free(x), zb_cuda_buffer_free(dx);
    zb_cuda_stage_free(tied), zb_cuda_stage_free(own), zb_cuda_stage_free(embed);
}

/* Every call that makes the stage's device current reports a failure to do so, with nothing
 * allocated (freeing a stage still works). */
static void test_set_device_checked(void **state)
{
    (void)state;
    zb_err_t e;
    gchain_t g;
    gchain_new(&g, TWO, 2, ZB_CUDA_FP32);
    fake_set_device_fails = true;
    float *buf = (float *)1;
    assert_int_equal(zb_cuda_buffer_alloc(g.s[0], 16, &buf, &e), ZB_EIO);
    assert_null(buf);
    assert_non_null(strstr(e.msg, "set device"));
    zb_cuda_stash_t *st = (zb_cuda_stash_t *)1;
    assert_int_equal(zb_cuda_stash_new(g.s[0], &st, &e), ZB_EIO);
    assert_non_null(strstr(e.msg, "set device"));
    assert_int_equal(zb_cuda_stage_bind(g.s[0], &e), ZB_EIO);
    struct CUevent_st *ev = NULL;
    assert_int_equal(zb_cuda_event_new(g.s[0], &ev, &e), ZB_EIO);
    fake_set_device_fails = false;
    gchain_free(&g);
}

/* The attention's stash follows the head size: with an fp32 flash kernel (hs 16 here) F keeps
 * lse, N·NH·(T − 1) floats a layer less than the CPU model's att; without one (hs 8) the stage
 * keeps the materialised att, the CPU model's figure exactly. */
static void test_attention_stash_by_head_size(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_config_t hs8 = CFG;
    hs8.heads = 4;
    size_t rows = (size_t)NTOK * CFG.heads;
    for (int k = 0; k < 2; k++) {
        size_t af, ab, nl = (size_t)(TWO[k].layer_end - TWO[k].layer_begin);
        zb_cuda_stage_mem_t m16, m8;
        must(zb_cuda_stage_memory(&CFG, &TWO[k], BB, TT, ZB_CUDA_FP32, &m16, &e), &e);
        must(zb_cuda_stage_memory(&hs8, &TWO[k], BB, TT, ZB_CUDA_FP32, &m8, &e), &e);
        zb_gpt2_stage_mem(&CFG, &TWO[k], BB, TT, &af, &ab);
        assert_int_equal(m16.after_f, af - nl * (rows * TT - rows) * sizeof(float));
        zb_gpt2_stage_mem(&hs8, &TWO[k], BB, TT, &af, &ab);
        assert_int_equal(m8.after_f, af);
    }
}

/* zb_cuda_stage_set_fp32_attention: fma always; 3xtf32 only on an fp32 stage whose head size
 * has the kernel (16 here, not 8); a refusal leaves the stage's choice as it was; auto takes
 * 3xtf32 where it is allowed and fma elsewhere. A bare stage starts with fma. */
static void test_fp32_attention_checked(void **state)
{
    (void)state;
    zb_err_t e;
    zb_cuda_stage_t *s = NULL, *tf = NULL, *hs8 = NULL;
    zb_gpt2_config_t cfg8 = CFG;
    cfg8.heads = 4;
    must(zb_cuda_stage_new(&CFG, &TWO[0], BB, TT, ZB_CUDA_FP32, 0, &s, &e), &e);
    must(zb_cuda_stage_new(&CFG, &TWO[0], BB, TT, ZB_CUDA_TF32, 0, &tf, &e), &e);
    must(zb_cuda_stage_new(&cfg8, &TWO[0], BB, TT, ZB_CUDA_FP32, 0, &hs8, &e), &e);
    assert_int_equal(s->ctx.fp32_attn, ZB_CUDA_ATTN_FMA);
    must(zb_cuda_stage_set_fp32_attention(s, ZB_CUDA_ATTN_3XTF32, &e), &e);
    assert_int_equal(s->ctx.fp32_attn, ZB_CUDA_ATTN_3XTF32);
    assert_int_equal(zb_cuda_stage_set_fp32_attention(tf, ZB_CUDA_ATTN_3XTF32, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "this stage runs tf32"));
    assert_int_equal(zb_cuda_stage_set_fp32_attention(hs8, ZB_CUDA_ATTN_3XTF32, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "head size 8"));
    assert_int_equal(hs8->ctx.fp32_attn, ZB_CUDA_ATTN_FMA);
    assert_int_equal(zb_cuda_stage_set_fp32_attention(s, (zb_cuda_fp32_attention_t)5, &e),
                     ZB_EINVAL);
    assert_int_equal(s->ctx.fp32_attn, ZB_CUDA_ATTN_3XTF32);
    must(zb_cuda_stage_set_fp32_attention(tf, ZB_CUDA_ATTN_FMA, &e), &e);
    must(zb_cuda_stage_set_fp32_attention(hs8, ZB_CUDA_ATTN_FMA, &e), &e);
    /* auto: 3xtf32 where it can run, fma where the head size (8) or the precision cannot */
    must(zb_cuda_stage_set_fp32_attention(s, ZB_CUDA_ATTN_FMA, &e), &e);
    must(zb_cuda_stage_set_fp32_attention(s, ZB_CUDA_ATTN_AUTO, &e), &e);
    assert_int_equal(s->ctx.fp32_attn, ZB_CUDA_ATTN_3XTF32);
    must(zb_cuda_stage_set_fp32_attention(hs8, ZB_CUDA_ATTN_AUTO, &e), &e);
    assert_int_equal(hs8->ctx.fp32_attn, ZB_CUDA_ATTN_FMA);
    must(zb_cuda_stage_set_fp32_attention(tf, ZB_CUDA_ATTN_AUTO, &e), &e);
    assert_int_equal(tf->ctx.fp32_attn, ZB_CUDA_ATTN_FMA);
    zb_cuda_fp32_attention_t a;
    must(zb_cuda_fp32_attention_parse("3xtf32", &a, &e), &e);
    assert_int_equal(a, ZB_CUDA_ATTN_3XTF32);
    assert_string_equal(zb_cuda_fp32_attention_name(a), "3xtf32");
    must(zb_cuda_fp32_attention_parse("auto", &a, &e), &e);
    assert_int_equal(a, ZB_CUDA_ATTN_AUTO);
    assert_string_equal(zb_cuda_fp32_attention_name(a), "auto");
    assert_int_equal(zb_cuda_fp32_attention_parse("FMA", &a, &e), ZB_EINVAL);
    zb_cuda_stage_free(s);
    zb_cuda_stage_free(tf);
    zb_cuda_stage_free(hs8);
}

/* Small transfers (cuda/small_copy.h): uploads through the ring of page-locked slots land where
 * they were sent after the ring wrapped (the host waits for a slot's last reader) and after it
 * grew; a download lands in page-locked memory; a size not a multiple of 4 fails the context. */
static void test_small_transfers(void **state)
{
    (void)state;
    zb_cu_ctx_t c;
    zb_err_t e;
    must(zb_cu_ctx_init(&c, 0, ZB_CUDA_FP32, &e), &e);
    enum { SENDS = 40, BIG = 3000 };
    int *dev = NULL, *host = NULL;
    assert_int_equal(cudaMalloc((void **)&dev, (SENDS * 4 + BIG) * sizeof(int)), cudaSuccess);
    for (int k = 0; k < SENDS; k++) {
        int v[4] = {k, k + 1, k + 2, k + 3};
        zb_cu_upload_small(&c, dev + 4 * k, v, sizeof v);
        v[0] = -1; /* the ring took a copy */
    }
    int *big = malloc(BIG * sizeof *big);
    for (int i = 0; i < BIG; i++)
        big[i] = 7 * i;
    zb_cu_upload_small(&c, dev + 4 * SENDS, big, BIG * sizeof *big); /* grows the slots */
    assert_int_equal(c.status, ZB_OK);
    assert_int_equal(cudaHostAlloc((void **)&host, (SENDS * 4 + BIG) * sizeof(int), 0),
                     cudaSuccess);
    zb_cu_download_small(&c, host, dev, (SENDS * 4 + BIG) * sizeof(int));
    assert_int_equal(cudaStreamSynchronize(c.stream), cudaSuccess);
    for (int k = 0; k < SENDS; k++)
        for (int j = 0; j < 4; j++)
            assert_int_equal(host[4 * k + j], k + j);
    for (int i = 0; i < BIG; i++)
        assert_int_equal(host[4 * SENDS + i], 7 * i);
    zb_cu_upload_small(&c, dev, big, 6);
    assert_int_equal(c.status, ZB_EINVAL);
    assert_non_null(strstr(c.msg, "a multiple of 4"));
    free(big);
    cudaFreeHost(host);
    cudaFree(dev);
    zb_cu_ctx_destroy(&c);
    assert_null(c.ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_is_the_cpu_stage),
        cmocka_unit_test(test_matches_cpu),
        cmocka_unit_test(test_deferred_w_same_bits),
        cmocka_unit_test(test_fold_loss_grad_same_bits),
        cmocka_unit_test(test_partitions_same_bits),
        cmocka_unit_test(test_training_matches_cpu_and_repeats),
        cmocka_unit_test(test_stage_holds_only_its_span),
        cmocka_unit_test(test_stash_and_errors),
        cmocka_unit_test(test_split_stash_same_bits),
        cmocka_unit_test(test_tied_head_reads_the_embedding),
        cmocka_unit_test(test_deferred_losses),
        cmocka_unit_test(test_set_device_checked),
        cmocka_unit_test(test_attention_stash_by_head_size),
        cmocka_unit_test(test_fp32_attention_checked),
        cmocka_unit_test(test_small_transfers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
#endif
