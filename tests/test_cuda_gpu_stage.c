/* CUDA GPT-2 stage (label gpu) against the CPU stage and against itself:
 *  - one microbatch F/B/W: loss and gradients within 1e-5 (relative to scale) of the CPU stage;
 *    at a 2-stage split the boundary activation and its gradient too;
 *  - W deferred after other microbatches gives the same bits as W right after B;
 *  - 1, 2 and 3 GPU stages give the same loss and gradient bits (any partition, same bits);
 *  - 10 AdamW steps (2 microbatches, clipping): every loss within 1e-5 of the CPU trainer's, a
 *    second run gives identical bits (losses and parameters), and so does a run saved to the
 *    host after 4 steps and resumed on a new stage (resume is bit-exact);
 *  - bf16 and tf32: losses within 0.05 of fp32 over 10 steps, and the loss falls;
 *  - stash accounting (zb_gpt2_stage_mem) and call-order / input errors.
 * Skipped (exit 77) where there is no CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_testutil.h"
#include "zbpp/gpt2.h"
#include "zbpp/optim.h"

static const zb_gpt2_config_t CFG = {.max_seq = 32, .vocab = 67, .padded_vocab = 128,
                                     .layers = 3, .heads = 4, .channels = 32};
enum { BB = 2, TT = 16, NTOK = BB * TT, MB = 2, STEPS = 10 };
#define TOL 1e-5

static int tokens[NTOK], targets[NTOK];
static zb_gpt2_params_t P0; /* the initial parameters every run starts from */

static void make_batch(int seed)
{
    /* a learnable pattern: target = next token of a fixed cycle */
    for (int i = 0; i < NTOK; i++) {
        tokens[i] = (i * 7 + seed * 13) % CFG.vocab;
        targets[i] = (tokens[i] * 5 + 3) % CFG.vocab;
    }
}

static void must(zb_status_t s, const zb_err_t *e)
{
    if (s != ZB_OK)
        fail_msg("unexpected error: %s", e->msg);
}

static int setup(void **state)
{
    (void)state;
    zb_err_t e;
    if (zb_gpt2_params_alloc(&P0, &CFG, &e) != ZB_OK)
        return -1;
    zb_gpt2_params_init_random(&P0, 1234);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zb_gpt2_params_free(&P0);
    return 0;
}

/* ---- GPU chains ---- */

typedef struct {
    int n;
    zb_gpt2_span_t span[4];
    zb_cuda_stage_t *s[4];
    zb_cuda_stash_t *st[4][MB];
    float *act[5], *grad[5]; /* device boundary buffers */
} gchain_t;

static void gchain_new(gchain_t *g, const zb_gpt2_span_t *spans, int n, zb_cuda_precision_t prec)
{
    zb_err_t e;
    memset(g, 0, sizeof *g);
    g->n = n;
    for (int k = 0; k < n; k++) {
        g->span[k] = spans[k];
        must(zb_cuda_stage_new(&CFG, &spans[k], BB, TT, prec, 0, &g->s[k], &e), &e);
        must(zb_cuda_params_upload(g->s[k], &P0, &e), &e);
        for (int m = 0; m < MB; m++)
            must(zb_cuda_stash_new(g->s[k], &g->st[k][m], &e), &e);
    }
    for (int k = 0; k <= n; k++) {
        must(zb_cuda_buffer_alloc(g->s[0], (size_t)NTOK * CFG.channels, &g->act[k], &e), &e);
        must(zb_cuda_buffer_alloc(g->s[0], (size_t)NTOK * CFG.channels, &g->grad[k], &e), &e);
    }
}

static void gchain_free(gchain_t *g)
{
    for (int k = 0; k <= g->n; k++) {
        zb_cuda_buffer_free(g->act[k]);
        zb_cuda_buffer_free(g->grad[k]);
    }
    for (int k = 0; k < g->n; k++) {
        for (int m = 0; m < MB; m++)
            zb_cuda_stash_free(g->st[k][m]);
        zb_cuda_stage_free(g->s[k]);
    }
}

static float g_forward(gchain_t *g, int m)
{
    zb_err_t e;
    float loss = NAN;
    for (int k = 0; k < g->n; k++)
        must(zb_cuda_forward(g->s[k], g->st[k][m], tokens, g->act[k], targets, g->act[k + 1],
                             &loss, &e),
             &e);
    return loss;
}

static void g_backward_input(gchain_t *g, int m, float scale)
{
    zb_err_t e;
    for (int k = g->n - 1; k >= 0; k--)
        must(zb_cuda_backward_input(g->s[k], g->st[k][m], g->grad[k + 1], scale, g->grad[k], &e),
             &e);
}

static void g_backward_weight(gchain_t *g, int m)
{
    zb_err_t e;
    for (int k = 0; k < g->n; k++)
        must(zb_cuda_backward_weight(g->s[k], g->st[k][m], &e), &e);
}

static void g_zero(gchain_t *g)
{
    zb_err_t e;
    for (int k = 0; k < g->n; k++)
        must(zb_cuda_grads_zero(g->s[k], &e), &e);
}

/* All stages' gradients on the host, folded: each element is owned by one stage, the others
 * hold exact zeros, so the sum is exact. */
static void g_gather(gchain_t *g, zb_gpt2_grads_t *out)
{
    zb_err_t e;
    zb_gpt2_grads_t tmp;
    must(zb_gpt2_grads_alloc(&tmp, &CFG, &e), &e);
    zb_gpt2_grads_zero(out);
    for (int k = 0; k < g->n; k++) {
        must(zb_cuda_grads_download(g->s[k], &tmp, &e), &e);
        for (size_t i = 0; i < tmp.g.count; i++)
            out->g.data[i] += tmp.g.data[i];
        for (size_t i = 0; i < tmp.g.sizes[ZB_WTE]; i++)
            out->wte_head[i] += tmp.wte_head[i];
    }
    zb_gpt2_fold_tied(out);
    zb_gpt2_grads_free(&tmp);
}

/* ---- CPU reference ---- */

static float cpu_chain(const zb_gpt2_params_t *p, const zb_gpt2_span_t *spans, int ns,
                       zb_gpt2_grads_t *g, float scale, float **act_out, float **grad_out)
{
    zb_err_t e;
    zb_gpt2_stash_t *st[4];
    float *act[5], *grad[5], loss = NAN;
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
        must(zb_gpt2_backward_input(p, &spans[s], st[s], grad[s + 1], scale, grad[s], &e), &e);
    for (int s = 0; s < ns; s++)
        must(zb_gpt2_backward_weight(p, &spans[s], st[s], g, &e), &e);
    for (int s = 0; s < ns; s++)
        zb_gpt2_stash_free(st[s]);
    for (int s = 0; s <= ns; s++) {
        if (act_out && s == 1)
            *act_out = act[s], act[s] = NULL;
        if (grad_out && s == 1)
            *grad_out = grad[s], grad[s] = NULL;
        free(act[s]);
        free(grad[s]);
    }
    return loss;
}

static const zb_gpt2_span_t WHOLE[] = {{0, 3, true, true}};
static const zb_gpt2_span_t TWO[] = {{0, 1, true, false}, {1, 3, false, true}};
static const zb_gpt2_span_t THREE[] = {{0, 0, true, false}, {0, 2, false, false},
                                       {2, 3, false, true}};

static void test_matches_cpu(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_grads_t gc, gg;
    must(zb_gpt2_grads_alloc(&gc, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&gg, &CFG, &e), &e);
    make_batch(3);
    float scale = 1.0f / NTOK;

    zb_gpt2_grads_zero(&gc);
    float *cact = NULL, *cgrad = NULL;
    float closs = cpu_chain(&P0, TWO, 2, &gc, scale, &cact, &cgrad);
    zb_gpt2_fold_tied(&gc);

    gchain_t g;
    gchain_new(&g, TWO, 2, ZB_CUDA_FP32);
    g_zero(&g);
    float gloss = g_forward(&g, 0);
    g_backward_input(&g, 0, scale);
    g_backward_weight(&g, 0);
    g_gather(&g, &gg);
    size_t nc = (size_t)NTOK * CFG.channels;
    float *hact = malloc(nc * 4), *hgrad = malloc(nc * 4);
    must(zb_cuda_copy_to_host(g.s[0], hact, g.act[1], nc, &e), &e);
    must(zb_cuda_copy_to_host(g.s[0], hgrad, g.grad[1], nc, &e), &e);

    double rl = fabs((double)gloss - closs) / fabs((double)closs);
    double ra = rel_err(hact, cact, nc), rgx = rel_err(hgrad, cgrad, nc);
    double rg = rel_err(gg.g.data, gc.g.data, gc.g.count);
    printf("  loss gpu %.7f cpu %.7f rel %.3g; boundary act %.3g grad %.3g; params grad %.3g\n",
           gloss, closs, rl, ra, rgx, rg);
    assert_true(rl <= TOL && ra <= TOL && rgx <= TOL && rg <= TOL);
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS; t++) {
        size_t off = (size_t)(gc.g.t[t] - gc.g.data);
        double rt = rel_err(gg.g.data + off, gc.g.data + off, gc.g.sizes[t]);
        if (!(rt <= 1e-4))
            fail_msg("tensor %d: gradient rel err %g", t, rt);
    }
    free(cact), free(cgrad), free(hact), free(hgrad);
    gchain_free(&g);
    zb_gpt2_grads_free(&gc);
    zb_gpt2_grads_free(&gg);
}

static void test_deferred_w_same_bits(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_grads_t a, b;
    must(zb_gpt2_grads_alloc(&a, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&b, &CFG, &e), &e);
    gchain_t g;
    gchain_new(&g, TWO, 2, ZB_CUDA_FP32);
    float scale = 1.0f / (NTOK * MB);
    /* fused: F B W per microbatch */
    g_zero(&g);
    for (int m = 0; m < MB; m++) {
        make_batch(10 + m);
        g_forward(&g, m);
        g_backward_input(&g, m, scale);
        g_backward_weight(&g, m);
    }
    g_gather(&g, &a);
    /* deferred: every F, every B, then all W at the end */
    g_zero(&g);
    for (int m = 0; m < MB; m++) {
        make_batch(10 + m);
        g_forward(&g, m);
    }
    for (int m = 0; m < MB; m++)
        g_backward_input(&g, m, scale);
    for (int m = 0; m < MB; m++)
        g_backward_weight(&g, m);
    g_gather(&g, &b);
    assert_memory_equal(a.g.data, b.g.data, a.g.count * sizeof(float));
    gchain_free(&g);
    zb_gpt2_grads_free(&a);
    zb_gpt2_grads_free(&b);
}

static void test_partitions_same_bits(void **state)
{
    (void)state;
    zb_err_t e;
    const struct {
        const zb_gpt2_span_t *s;
        int n;
    } parts[] = {{WHOLE, 1}, {TWO, 2}, {THREE, 3}};
    zb_gpt2_grads_t ref, cur;
    must(zb_gpt2_grads_alloc(&ref, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&cur, &CFG, &e), &e);
    float ref_loss = 0;
    make_batch(5);
    for (int k = 0; k < 3; k++) {
        gchain_t g;
        gchain_new(&g, parts[k].s, parts[k].n, ZB_CUDA_FP32);
        g_zero(&g);
        float loss = g_forward(&g, 0);
        g_backward_input(&g, 0, 1.0f / NTOK);
        g_backward_weight(&g, 0);
        g_gather(&g, k ? &cur : &ref);
        gchain_free(&g);
        if (k == 0) {
            ref_loss = loss;
            continue;
        }
        assert_memory_equal(&loss, &ref_loss, sizeof loss);
        assert_memory_equal(cur.g.data, ref.g.data, ref.g.count * sizeof(float));
    }
    zb_gpt2_grads_free(&ref);
    zb_gpt2_grads_free(&cur);
}

/* ---- training ---- */

static const int ALL_UNITS[] = {0, 1, 2, 3, 4};

static void cpu_train(float losses[STEPS], zb_gpt2_params_t *p)
{
    zb_err_t e;
    zb_gpt2_grads_t g;
    zb_adamw_state_t opt;
    zb_adamw_hparams_t h = zb_adamw_defaults();
    h.lr = 3e-3f;
    must(zb_gpt2_grads_alloc(&g, &CFG, &e), &e);
    must(zb_adamw_state_alloc(&opt, &CFG, &e), &e);
    memcpy(p->data, P0.data, P0.count * sizeof(float));
    int nu = zb_gpt2_num_units(&CFG);
    for (int step = 0; step < STEPS; step++) {
        zb_gpt2_grads_zero(&g);
        double sum = 0;
        for (int m = 0; m < MB; m++) {
            make_batch(step * MB + m);
            sum += cpu_chain(p, WHOLE, 1, &g, 1.0f / (NTOK * MB), NULL, NULL);
        }
        losses[step] = (float)(sum / MB);
        zb_gpt2_fold_tied(&g);
        double part[8];
        for (int u = 0; u < nu; u++)
            part[u] = zb_grad_unit_sumsq(&g.g, u);
        float clip = zb_grad_clip_scale(zb_grad_norm_total(part, nu), 1.0f);
        zb_adamw_update_units(p, &g.g, &opt, &h, h.lr, step + 1, clip, ALL_UNITS, nu);
    }
    zb_gpt2_grads_free(&g);
    zb_adamw_state_free(&opt);
}

/* Steps [from, to) on a fresh GPU stage that starts from *p and *opt (host copies, as a
 * checkpoint would hold them) and leaves its parameters and moments there. */
static void gpu_train_range(float *losses, zb_gpt2_params_t *p, zb_adamw_state_t *opt, int from,
                            int to, zb_cuda_precision_t prec)
{
    zb_err_t e;
    zb_adamw_hparams_t h = zb_adamw_defaults();
    h.lr = 3e-3f;
    gchain_t g;
    gchain_new(&g, WHOLE, 1, prec);
    zb_cuda_stage_t *s = g.s[0];
    must(zb_cuda_params_upload(s, p, &e), &e);
    must(zb_cuda_adamw_upload(s, opt, &e), &e);
    int nu = zb_gpt2_num_units(&CFG);
    for (int step = from; step < to; step++) {
        g_zero(&g);
        double sum = 0;
        for (int m = 0; m < MB; m++) {
            make_batch(step * MB + m);
            sum += g_forward(&g, m);
            g_backward_input(&g, m, 1.0f / (NTOK * MB));
            g_backward_weight(&g, m);
        }
        losses[step] = (float)(sum / MB);
        must(zb_cuda_fold_tied(s, &e), &e);
        double part[8];
        for (int u = 0; u < nu; u++)
            must(zb_cuda_grad_unit_sumsq(s, u, &part[u], &e), &e);
        float clip = zb_grad_clip_scale(zb_grad_norm_total(part, nu), 1.0f);
        must(zb_cuda_adamw_update_units(s, &h, h.lr, step + 1, clip, ALL_UNITS, nu, &e), &e);
    }
    must(zb_cuda_params_download(s, p, &e), &e);
    must(zb_cuda_adamw_download(s, opt, &e), &e);
    gchain_free(&g);
}

/* STEPS steps from P0 with zero moments; resume_at > 0 stops there, saves to the host and goes
 * on with a new stage from the saved copies. */
static void gpu_train_resumed(float losses[STEPS], zb_gpt2_params_t *p, zb_cuda_precision_t prec,
                              int resume_at)
{
    zb_err_t e;
    zb_adamw_state_t opt;
    must(zb_adamw_state_alloc(&opt, &CFG, &e), &e);
    memcpy(p->data, P0.data, P0.count * sizeof(float));
    if (resume_at > 0) {
        gpu_train_range(losses, p, &opt, 0, resume_at, prec);
        gpu_train_range(losses, p, &opt, resume_at, STEPS, prec);
    } else {
        gpu_train_range(losses, p, &opt, 0, STEPS, prec);
    }
    zb_adamw_state_free(&opt);
}

static void gpu_train(float losses[STEPS], zb_gpt2_params_t *p, zb_cuda_precision_t prec)
{
    gpu_train_resumed(losses, p, prec, 0);
}

static void test_training_matches_cpu_and_repeats(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_params_t pc, pg1, pg2;
    must(zb_gpt2_params_alloc(&pc, &CFG, &e), &e);
    must(zb_gpt2_params_alloc(&pg1, &CFG, &e), &e);
    must(zb_gpt2_params_alloc(&pg2, &CFG, &e), &e);
    float lc[STEPS], l1[STEPS], l2[STEPS];
    cpu_train(lc, &pc);
    gpu_train(l1, &pg1, ZB_CUDA_FP32);
    gpu_train(l2, &pg2, ZB_CUDA_FP32);
    for (int i = 0; i < STEPS; i++) {
        double r = fabs((double)l1[i] - lc[i]) / fabs((double)lc[i]);
        printf("  step %d: loss gpu %.7f cpu %.7f rel %.3g\n", i, l1[i], lc[i], r);
        if (!(r <= TOL))
            fail_msg("step %d: GPU loss %.8f vs CPU %.8f (rel %g)", i, l1[i], lc[i], r);
    }
    assert_true(lc[STEPS - 1] < lc[0]); /* it trains */
    printf("  params after %d steps: rel err vs CPU %.3g\n", STEPS,
           rel_err(pg1.data, pc.data, pc.count));
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(pg1.data, pg2.data, pg1.count * sizeof(float));
    /* resume: save params + moments to the host after 4 steps, continue on a new stage */
    gpu_train_resumed(l2, &pg2, ZB_CUDA_FP32, 4);
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(pg1.data, pg2.data, pg1.count * sizeof(float));
    zb_gpt2_params_free(&pc);
    zb_gpt2_params_free(&pg1);
    zb_gpt2_params_free(&pg2);
}

static void test_reduced_precision_close(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_params_t p;
    must(zb_gpt2_params_alloc(&p, &CFG, &e), &e);
    float l32[STEPS], lr[STEPS];
    gpu_train(l32, &p, ZB_CUDA_FP32);
    const zb_cuda_precision_t precs[] = {ZB_CUDA_BF16, ZB_CUDA_TF32};
    for (int k = 0; k < 2; k++) {
        gpu_train(lr, &p, precs[k]);
        for (int i = 0; i < STEPS; i++) {
            if (!(fabsf(lr[i] - l32[i]) <= 0.05f))
                fail_msg("%s step %d: loss %.5f vs fp32 %.5f", zb_cuda_precision_name(precs[k]),
                         i, lr[i], l32[i]);
        }
        printf("  %s: final loss %.5f (fp32 %.5f), first %.5f\n",
               zb_cuda_precision_name(precs[k]), lr[STEPS - 1], l32[STEPS - 1], lr[0]);
        assert_true(lr[STEPS - 1] < lr[0]);
    }
    zb_gpt2_params_free(&p);
}

static void test_stash_and_errors(void **state)
{
    (void)state;
    zb_err_t e;
    gchain_t g;
    gchain_new(&g, TWO, 2, ZB_CUDA_FP32);
    make_batch(1);
    size_t af[2], ab[2];
    for (int k = 0; k < 2; k++) {
        zb_gpt2_stage_mem(&CFG, &TWO[k], BB, TT, &af[k], &ab[k]);
        assert_int_equal(zb_cuda_stash_live_bytes(g.st[k][0]), 0);
    }
    size_t bucket = (3 * (size_t)NTOK + 1) * sizeof(int);
    /* W or B before F */
    assert_int_equal(zb_cuda_backward_weight(g.s[0], g.st[0][0], &e), ZB_EINVAL);
    assert_int_equal(zb_cuda_backward_input(g.s[1], g.st[1][0], NULL, 1.0f, g.grad[1], &e),
                     ZB_EINVAL);
    /* a stash of another stage */
    assert_int_equal(zb_cuda_forward(g.s[0], g.st[1][0], tokens, NULL, NULL, g.act[1], NULL, &e),
                     ZB_EINVAL);
    assert_non_null(strstr(e.msg, "another stage"));
    /* bad token */
    tokens[5] = CFG.vocab;
    assert_int_equal(zb_cuda_forward(g.s[0], g.st[0][0], tokens, NULL, NULL, g.act[1], NULL, &e),
                     ZB_EINVAL);
    assert_non_null(strstr(e.msg, "tokens[5]"));
    make_batch(1);
    g_forward(&g, 0);
    assert_int_equal(zb_cuda_stash_live_bytes(g.st[0][0]), af[0]);
    assert_int_equal(zb_cuda_stash_live_bytes(g.st[1][0]), af[1]);
    g_backward_input(&g, 0, 1.0f / NTOK);
    assert_int_equal(zb_cuda_stash_live_bytes(g.st[0][0]), ab[0] + bucket);
    assert_int_equal(zb_cuda_stash_live_bytes(g.st[1][0]), ab[1]);
    /* F again while W is pending */
    assert_int_equal(zb_cuda_forward(g.s[0], g.st[0][0], tokens, NULL, NULL, g.act[1], NULL, &e),
                     ZB_EINVAL);
    g_backward_weight(&g, 0);
    assert_int_equal(zb_cuda_stash_live_bytes(g.st[0][0]), 0);
    must(zb_cuda_sync(g.s[0], &e), &e);
    /* unit and host-buffer checks */
    double x;
    assert_int_equal(zb_cuda_grad_unit_sumsq(g.s[0], 99, &x, &e), ZB_EINVAL);
    zb_gpt2_config_t other = CFG;
    other.layers = 2;
    zb_gpt2_params_t wrong;
    must(zb_gpt2_params_alloc(&wrong, &other, &e), &e);
    assert_int_equal(zb_cuda_params_upload(g.s[0], &wrong, &e), ZB_EINVAL);
    zb_gpt2_params_free(&wrong);
    gchain_free(&g);
}

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_cpu),
        cmocka_unit_test(test_deferred_w_same_bits),
        cmocka_unit_test(test_partitions_same_bits),
        cmocka_unit_test(test_training_matches_cpu_and_repeats),
        cmocka_unit_test(test_reduced_precision_close),
        cmocka_unit_test(test_stash_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
