/* Threads inside a rank: the worker group runs every chunk exactly once (also nested, also with
 * more threads than cores), and every kernel, the tiled sgemm, AdamW and the gradient norm give the
 * same bits with no group and with groups of 1, 2 and 3 threads. Sizes are small but above the
 * chunk and tile sizes, so the shared paths really run. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "nn/gemm.h"
#include "nn/par.h"
#include "zbpp/nn.h"
#include "zbpp/optim.h"
#include "zbpp/workers.h"

enum { NGROUPS = 4 }; /* none, 1, 2, 3 threads */
static zb_workers_t *groups[NGROUPS];

static int setup(void **state)
{
    (void)state;
    zb_err_t err;
    groups[0] = NULL;
    for (int i = 1; i < NGROUPS; i++)
        if (zb_workers_new(i, NULL, &groups[i], &err) != ZB_OK)
            return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zb_workers_enter(NULL);
    for (int i = 1; i < NGROUPS; i++)
        zb_workers_free(groups[i]);
    return 0;
}

/* After every test, even one whose assertion failed inside a group: no group entered. */
static int leave_group(void **state)
{
    (void)state;
    zb_workers_enter(NULL);
    return 0;
}

static uint64_t rng_state;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static float *rnd(size_t n)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

/* A kernel case: builds its inputs from a fixed seed, runs, writes every output into out[n]. */
typedef void (*case_fn)(float *out);

static void same_bits(const char *what, case_fn fn, size_t n)
{
    float *ref = calloc(n, sizeof(float)), *got = calloc(n, sizeof(float));
    for (int g = 0; g < NGROUPS; g++) {
        rng_state = 7;
        zb_workers_enter(groups[g]);
        fn(g == 0 ? ref : got);
        zb_workers_enter(NULL);
        if (g > 0 && memcmp(ref, got, n * sizeof(float)) != 0)
            fail_msg("%s: %d thread(s) give different bits than no worker group", what, g);
    }
    free(ref), free(got);
}

/* ---- the worker group itself ---- */

static atomic_int hits[1000];
static atomic_int inner_hits;

static void count_chunk(void *ctx, size_t c, int worker)
{
    (void)ctx;
    assert_true(worker >= 0 && worker < 3);
    atomic_fetch_add(&hits[c], 1);
}

static void nested_chunk(void *ctx, size_t c, int worker)
{
    (void)ctx, (void)c, (void)worker;
    zb_parallel_for(5, count_chunk, NULL); /* inline on whichever thread runs this */
    atomic_fetch_add(&inner_hits, 1);
}

static void test_each_chunk_once(void **state)
{
    (void)state;
    for (int g = 0; g < NGROUPS; g++) {
        zb_workers_enter(groups[g]);
        assert_int_equal(zb_workers_current_count(), g == 0 ? 1 : g);
        for (int rep = 0; rep < 200; rep++) { /* many hand-offs: no lost wake-up */
            size_t n = (size_t)(rep % 37) + 1;
            memset(hits, 0, sizeof hits);
            zb_parallel_for(n, count_chunk, NULL);
            for (size_t c = 0; c < n; c++)
                assert_int_equal(atomic_load(&hits[c]), 1);
            assert_int_equal(atomic_load(&hits[n]), 0);
        }
        memset(hits, 0, sizeof hits);
        atomic_store(&inner_hits, 0);
        zb_parallel_for(7, nested_chunk, NULL);
        assert_int_equal(atomic_load(&inner_hits), 7);
        for (size_t c = 0; c < 5; c++)
            assert_int_equal(atomic_load(&hits[c]), 7);
        zb_workers_enter(NULL);
    }
}

static atomic_int helper_chunks;
static atomic_bool caller_gave_up;

/* The caller (worker 0) does not finish its chunk before a helper has finished one: the other
 * chunks are left for the helpers, so the test waits on an event, not on timing. The bound only
 * keeps a group whose helpers never run from hanging the test. */
static void rendezvous_chunk(void *ctx, size_t c, int worker)
{
    (void)ctx, (void)c;
    if (worker > 0) {
        atomic_fetch_add(&helper_chunks, 1);
        return;
    }
    struct timespec start, now, pause = {0, 100000}; /* 0.1 ms */
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (atomic_load(&helper_chunks) == 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 30) {
            atomic_store(&caller_gave_up, true);
            return;
        }
        nanosleep(&pause, NULL);
    }
}

/* The helpers really take chunks. */
static void test_helpers_take_chunks(void **state)
{
    (void)state;
    for (int g = 2; g < NGROUPS; g++) {
        zb_workers_enter(groups[g]);
        atomic_store(&helper_chunks, 0);
        atomic_store(&caller_gave_up, false);
        zb_parallel_for(20, rendezvous_chunk, NULL);
        assert_false(atomic_load(&caller_gave_up));
        assert_true(atomic_load(&helper_chunks) > 0);
        zb_workers_enter(NULL);
    }
}

static void test_scratch_and_errors(void **state)
{
    (void)state;
    zb_err_t err;
    zb_workers_t *w = NULL;
    assert_int_equal(zb_workers_new(0, NULL, &w, &err), ZB_EINVAL);
    assert_null(w);
    assert_int_equal(zb_workers_new(ZB_WORKERS_MAX + 1, NULL, &w, &err), ZB_EINVAL);
    const int bad_cores[2] = {0, -1};
    assert_int_equal(zb_workers_new(2, bad_cores, &w, &err), ZB_EINVAL);
    assert_null(w);
    assert_false(zb_workers_reserve(64)); /* no current group */
    zb_workers_enter(groups[3]);
    assert_true(zb_workers_reserve(1000));
    for (int i = 1; i < 3; i++) {
        char *p = zb_workers_scratch(groups[3], i);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        memset(p, i, 1000);
    }
    assert_null(zb_workers_scratch(groups[3], 0));
    zb_workers_enter(NULL);
    assert_true(zb_workers_default_threads(1) >= 1);
    assert_int_equal(zb_workers_default_threads(100000), 1);
    /* a pinned group pins its caller, and leaving it restores the caller's affinity */
    cpu_set_t before, inside, after;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    assert_int_equal(zb_workers_new_for_rank(0, 1, true, &w, &err), ZB_OK);
    zb_workers_enter(w);
    assert_int_equal(sched_getaffinity(0, sizeof inside, &inside), 0);
    assert_int_equal(CPU_COUNT(&inside), 1);
    zb_workers_enter(NULL);
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&before, &after));
    zb_workers_free(w);
    /* a group created and freed at once (helpers may not have started waiting yet) */
    for (int i = 0; i < 20; i++) {
        assert_int_equal(zb_workers_new_for_rank(0, 2, true, &w, &err), ZB_OK);
        zb_workers_free(w);
    }
}

/* ---- kernels: sizes above the chunk sizes (LayerNorm 288 columns: 14 rows a chunk) ---- */

enum { N = 96, C = 288, OC = 576, B = 4, T = 24, V = 1000, VP = 1024, NH = 4, AT = 16, AC = 64 };

static void case_layernorm(float *out)
{
    float *x = rnd(N * C), *w = rnd(C), *b = rnd(C), *dout = rnd(N * C);
    float *y = out, *mean = out + N * C, *rstd = mean + N, *dx = rstd + N, *dw = dx + N * C,
          *db = dw + C;
    memset(dx, 0, (N * C + 2 * C) * sizeof(float));
    zb_layernorm_forward(y, mean, rstd, x, w, b, N, C);
    zb_layernorm_backward_input(dx, dout, x, mean, rstd, w, N, C);
    zb_layernorm_backward_weight(dw, db, dout, x, mean, rstd, N, C);
    free(x), free(w), free(b), free(dout);
}

static void case_matmul(float *out)
{
    float *x = rnd(N * C), *w = rnd(OC * C), *b = rnd(OC), *dout = rnd(N * OC);
    float *y = out, *dx = y + N * OC, *dw = dx + N * C, *db = dw + OC * C;
    for (size_t i = 0; i < N * C + OC * C + OC; i++)
        dx[i] = 0.5f; /* backward accumulates */
    zb_matmul_forward(y, x, w, b, N, C, OC);
    zb_matmul_backward_input(dx, dout, w, N, C, OC);
    zb_matmul_backward_weight(dw, db, dout, x, N, C, OC);
    free(x), free(w), free(b), free(dout);
}

static void case_gemm_lm_head(float *out)
{
    /* a vocabulary-like product: 12 tiles of a long dimension, NN and TN */
    enum { M2 = 64, N2 = 4000, K2 = 96 };
    float *a = rnd(M2 * K2), *bt = rnd(N2 * K2), *at = rnd(K2 * M2), *bn = rnd(K2 * N2);
    assert_true(zb_sgemm_tile_count(M2, N2, K2) > 3);
    zb_sgemm_tiled(0, 1, M2, N2, K2, 1.0f, a, K2, bt, K2, 0.0f, out, N2);
    zb_sgemm_tiled(1, 0, M2, N2, K2, 1.0f, at, M2, bn, N2, 0.0f, out + M2 * N2, N2);
    zb_sgemm_tiled(0, 0, N2, M2, K2, 1.0f, bt, K2, at, M2, 0.0f, out + 2 * M2 * N2, M2);
    free(a), free(bt), free(at), free(bn);
}

static void case_elementwise(float *out)
{
    size_t n = (size_t)N * OC * 2; /* several 16384-element chunks */
    float *x = rnd(n), *y = rnd(n), *d = rnd(n);
    float *g = out, *dg = g + n, *r = dg + n, *da = r + n, *db = da + n;
    memcpy(dg, y, n * sizeof(float));
    memcpy(da, x, n * sizeof(float));
    memcpy(db, y, n * sizeof(float));
    zb_gelu_forward(g, x, n);
    zb_gelu_backward_input(dg, x, d, n);
    zb_residual_forward(r, x, y, n);
    zb_residual_backward_input(da, db, d, n);
    free(x), free(y), free(d);
}

static void case_attention(float *out)
{
    float *qkv = rnd(B * AT * 3 * AC), *dout = rnd(B * AT * AC);
    float *scratch = malloc(zb_attention_scratch_floats(AT) * sizeof(float));
    float *y = out, *att = y + B * AT * AC, *dqkv = att + B * NH * AT * AT;
    memset(dqkv, 0, B * AT * 3 * AC * sizeof(float));
    zb_attention_forward(y, att, qkv, B, AT, AC, NH);
    zb_attention_backward_input(dqkv, scratch, dout, qkv, att, B, AT, AC, NH);
    free(qkv), free(dout), free(scratch);
}

static void case_crossentropy(float *out)
{
    float *logits = rnd(N * VP);
    int targets[N];
    for (int n = 0; n < N; n++)
        targets[n] = (n * 37) % V;
    float *probs = out, *losses = out + N * VP;
    memcpy(probs, logits, N * VP * sizeof(float));
    zb_crossentropy_forward(losses, probs, targets, N, V, VP);
    memcpy(losses + N, probs, N * VP * sizeof(float));
    zb_crossentropy_backward(losses + N, targets, 1.0f / N, N, V, VP);
    free(logits);
}

static void case_encoder(float *out)
{
    float *wte = rnd(50 * C), *wpe = rnd(T * C), *dout = rnd(B * T * C);
    int tokens[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (i * 7) % 13; /* repeated tokens: rows add into the same dwte row */
    float *y = out, *dwte = y + B * T * C, *dwpe = dwte + 50 * C;
    memset(dwte, 0, (50 * C + T * C) * sizeof(float));
    zb_encoder_forward(y, tokens, wte, wpe, B, T, C);
    zb_encoder_backward_weight(dwte, dwpe, dout, tokens, B, T, C);
    free(wte), free(wpe), free(dout);
}

static void test_kernels_same_bits(void **state)
{
    (void)state;
    same_bits("layernorm", case_layernorm, N * C * 2 + 2 * N + 2 * C);
    same_bits("matmul", case_matmul, N * OC + N * C + OC * C + OC);
    same_bits("tiled sgemm", case_gemm_lm_head, 3 * 64 * 4000);
    same_bits("gelu/residual", case_elementwise, 5 * (size_t)N * OC * 2);
    same_bits("attention", case_attention, B * AT * AC + B * NH * AT * AT + B * AT * 3 * AC);
    same_bits("crossentropy", case_crossentropy, 2 * N * VP + N);
    same_bits("encoder", case_encoder, B * T * C + 50 * C + T * C);
}

/* ---- AdamW and the gradient norm on a model of ~400k parameters (several 65536 chunks) ---- */

static void case_optim(float *out)
{
    zb_gpt2_config_t cfg = {.max_seq = 64, .vocab = 500, .padded_vocab = 512, .layers = 2,
                            .heads = 4, .channels = 192};
    zb_err_t err;
    zb_gpt2_params_t p, g;
    zb_adamw_state_t s;
    assert_int_equal(zb_gpt2_params_alloc(&p, &cfg, &err), ZB_OK);
    assert_int_equal(zb_gpt2_params_alloc(&g, &cfg, &err), ZB_OK);
    assert_int_equal(zb_adamw_state_alloc(&s, &cfg, &err), ZB_OK);
    size_t n = p.count;
    assert_true(n > 4 * 65536);
    for (size_t i = 0; i < n; i++)
        p.data[i] = frand(), g.data[i] = frand() * 1e-2f;
    zb_adamw_hparams_t h = zb_adamw_defaults();
    int units = zb_gpt2_num_units(&cfg);
    double norm[64];
    assert_true(units <= 64);
    for (long t = 1; t <= 2; t++)
        zb_adamw_update_range(&p, &g, &s, &h, 1e-3f, t, 0.5f, 0, n);
    for (int u = 0; u < units; u++)
        norm[u] = zb_grad_unit_sumsq(&g, u);
    double total = zb_grad_norm_total(norm, units);
    /* the tied-WTE fold and the zeroing of a gradient set (shared too) */
    zb_gpt2_grads_t gr;
    assert_int_equal(zb_gpt2_grads_alloc(&gr, &cfg, &err), ZB_OK);
    for (size_t i = 0; i < n; i++)
        gr.g.data[i] = frand();
    for (size_t i = 0; i < gr.g.sizes[ZB_WTE]; i++)
        gr.wte_head[i] = frand();
    zb_gpt2_fold_tied(&gr);
    for (size_t i = 0; i < n; i++)
        p.data[i] += gr.g.data[i];
    zb_gpt2_grads_zero(&gr);
    for (size_t i = 0; i < n; i++)
        assert_true(gr.g.data[i] == 0.0f);
    for (size_t i = 0; i < gr.g.sizes[ZB_WTE]; i++)
        assert_true(gr.wte_head[i] == 0.0f);
    zb_gpt2_grads_free(&gr);
    memcpy(out, p.data, n * sizeof(float));
    memcpy(out + n, s.m.data, n * sizeof(float));
    memcpy(out + 2 * n, s.v.data, n * sizeof(float));
    memcpy(out + 3 * n, norm, (size_t)units * sizeof(double));
    memcpy(out + 3 * n + 2 * (size_t)units, &total, sizeof total);
    zb_gpt2_params_free(&p), zb_gpt2_params_free(&g), zb_adamw_state_free(&s);
}

static void test_optim_same_bits(void **state)
{
    (void)state;
    zb_gpt2_config_t cfg = {.max_seq = 64, .vocab = 500, .padded_vocab = 512, .layers = 2,
                            .heads = 4, .channels = 192};
    zb_gpt2_params_t p;
    zb_err_t err;
    assert_int_equal(zb_gpt2_params_alloc(&p, &cfg, &err), ZB_OK);
    size_t n = p.count;
    zb_gpt2_params_free(&p);
    same_bits("adamw + grad norm", case_optim, 3 * n + 2 * 64 + 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_each_chunk_once, leave_group),
        cmocka_unit_test_teardown(test_helpers_take_chunks, leave_group),
        cmocka_unit_test_teardown(test_scratch_and_errors, leave_group),
        cmocka_unit_test_teardown(test_kernels_same_bits, leave_group),
        cmocka_unit_test_teardown(test_optim_same_bits, leave_group),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
