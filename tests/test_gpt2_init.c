/* Building only part of a model: random initialisation, model files and training checkpoints
 * give a stage-local buffer exactly the bits its tensors have in the whole model.
 *  - zb_gpt2_params_init_random equals the original sequential fill (kept here as the
 *    reference) bit for bit, for whole models with odd and even tensor sizes;
 *  - every partition's stage-local buffers equal the whole model's slices (init, llm.c file,
 *    training checkpoint with moments), and the piece iterator covers each held element once. */
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

#include "zbpp/gpt2.h"
#include "zbpp/train.h"

/* channels 3 (odd per-layer sizes: Box-Muller pairs straddle the layer slices) and 16 */
static const zb_gpt2_config_t CFGS[] = {
    {.max_seq = 5, .vocab = 37, .padded_vocab = 64, .layers = 5, .heads = 1, .channels = 3},
    {.max_seq = 16, .vocab = 67, .padded_vocab = 128, .layers = 4, .heads = 2, .channels = 16},
};

static void must(zb_status_t s, const zb_err_t *e)
{
    if (s != ZB_OK)
        fail_msg("unexpected error: %s", e->msg);
}

/* ---- the original whole-model initialisation, one sequential stream ---- */

static uint64_t ref_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double ref_uniform01(uint64_t *s)
{
    return ((ref_splitmix64(s) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

static void ref_fill_normal(float *x, size_t n, double std, uint64_t *s)
{
    for (size_t i = 0; i < n; i += 2) {
        double r = sqrt(-2.0 * log(ref_uniform01(s))), th = 6.283185307179586 * ref_uniform01(s);
        x[i] = (float)(std * r * cos(th));
        if (i + 1 < n)
            x[i + 1] = (float)(std * r * sin(th));
    }
}

static void ref_init(zb_gpt2_params_t *p, uint64_t seed)
{
    const zb_gpt2_config_t *c = &p->cfg;
    uint64_t s = seed;
    double resid_std = 0.02 / sqrt(2.0 * c->layers);
    memset(p->data, 0, p->count * sizeof(float));
    ref_fill_normal(p->t[ZB_WTE], (size_t)c->vocab * c->channels, 0.02, &s);
    ref_fill_normal(p->t[ZB_WPE], p->sizes[ZB_WPE], 0.02, &s);
    ref_fill_normal(p->t[ZB_QKVW], p->sizes[ZB_QKVW], 0.02, &s);
    ref_fill_normal(p->t[ZB_ATTPROJW], p->sizes[ZB_ATTPROJW], resid_std, &s);
    ref_fill_normal(p->t[ZB_FCW], p->sizes[ZB_FCW], 0.02, &s);
    ref_fill_normal(p->t[ZB_FCPROJW], p->sizes[ZB_FCPROJW], resid_std, &s);
    static const zb_gpt2_tensor_t ones[] = {ZB_LN1W, ZB_LN2W, ZB_LNFW};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < p->sizes[ones[k]]; i++)
            p->t[ones[k]][i] = 1.0f;
}

static void test_whole_init_matches_sequential(void **state)
{
    (void)state;
    zb_err_t e;
    for (size_t c = 0; c < sizeof CFGS / sizeof CFGS[0]; c++)
        for (uint64_t seed = 0; seed < 3; seed++) {
            zb_gpt2_params_t a, b;
            must(zb_gpt2_params_alloc(&a, &CFGS[c], &e), &e);
            must(zb_gpt2_params_alloc(&b, &CFGS[c], &e), &e);
            ref_init(&a, seed * 1337 + 1);
            zb_gpt2_params_init_random(&b, seed * 1337 + 1);
            assert_memory_equal(a.data, b.data, a.count * sizeof(float));
            zb_gpt2_params_free(&a);
            zb_gpt2_params_free(&b);
        }
}

/* ---- stage-local buffers against the whole model ---- */

/* Every tensor slice `part` holds equals the whole model's (in pdata / wdata: the buffers'
 * own data, or moments laid out like them). */
static void assert_part_equals(const zb_gpt2_params_t *part, const float *pdata,
                               const zb_gpt2_params_t *whole, const float *wdata)
{
    for (int k = 0; k < ZB_GPT2_NUM_TENSORS; k++)
        for (int l = 0; l < whole->cfg.layers; l++) {
            size_t pc = 0, wc = 0;
            const float *ps = zb_gpt2_slice(part, k, l, &pc);
            const float *ws = zb_gpt2_slice(whole, k, l, &wc);
            if (!ps)
                continue;
            assert_non_null(ws);
            assert_int_equal(pc, wc);
            assert_memory_equal(pdata + (ps - part->data), wdata + (ws - whole->data),
                                pc * sizeof(float));
        }
}

static void count_piece(void *ctx, size_t local, size_t at, size_t n)
{
    unsigned char *seen = ctx;
    (void)at;
    for (size_t i = 0; i < n; i++)
        seen[local + i]++;
}

/* The partitions tried: every layer split of L blocks into 1..3 contiguous stages, each stage's
 * span alone (a rank holding one stage) and the first with the last (a V placement's rank 0). */
typedef void (*part_check_fn)(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *spans, int n,
                              void *ctx);

static void for_partitions(const zb_gpt2_config_t *cfg, part_check_fn fn, void *ctx)
{
    int L = cfg->layers;
    for (int a = 1; a < L; a++)
        for (int b = a; b <= L; b++) {
            zb_gpt2_span_t sp[3] = {{0, a, true, false}, {a, b, false, b == L},
                                    {b, L, false, true}};
            int stages = b == L ? 2 : 3;
            for (int s = 0; s < stages; s++)
                fn(cfg, &sp[s], 1, ctx);
            zb_gpt2_span_t ends[2] = {sp[0], sp[stages - 1]};
            fn(cfg, ends, 2, ctx);
        }
}

typedef struct {
    const zb_gpt2_params_t *whole;
    const zb_gpt2_params_t *wm, *wv; /* moments (checkpoint case) or NULL */
    const char *file;                /* llm.c file, training checkpoint, or NULL = init */
    uint64_t seed;
    int checked;
} part_ctx_t;

static void check_part(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *spans, int n,
                       void *vctx)
{
    part_ctx_t *c = vctx;
    zb_err_t e;
    zb_gpt2_params_t p, m, v;
    must(zb_gpt2_params_alloc_part(&p, cfg, spans, n, &e), &e);
    for (int k = 0; k < n; k++)
        assert_true(zb_gpt2_holds_span(&p, &spans[k]));
    if (!c->file) {
        zb_gpt2_params_init_random(&p, c->seed);
    } else if (!c->wm) {
        uint64_t h1 = 0, h2 = 1;
        must(zb_gpt2_load_llmc_into(c->file, &p, &h1, &e), &e);
        must(zb_gpt2_load_llmc_into(c->file, &p, &h2, &e), &e);
        assert_true(h1 == h2); /* the file's hash, not the part's */
    } else {
        must(zb_gpt2_params_alloc_like(&m, &p, &e), &e);
        must(zb_gpt2_params_alloc_like(&v, &p, &e), &e);
        must(zb_train_load_into(c->file, &p, p.data, m.data, v.data, &e), &e);
        assert_part_equals(&p, m.data, c->whole, c->wm->data);
        assert_part_equals(&p, v.data, c->whole, c->wv->data);
        zb_gpt2_params_free(&m);
        zb_gpt2_params_free(&v);
    }
    assert_part_equals(&p, p.data, c->whole, c->whole->data);
    /* the whole model's elements in one call: each held element exactly once */
    unsigned char *seen = calloc(p.count, 1);
    zb_gpt2_params_pieces(&p, 0, c->whole->count, count_piece, seen);
    for (size_t i = 0; i < p.count; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
    zb_gpt2_params_free(&p);
    c->checked++;
}

static void test_part_init_matches_whole(void **state)
{
    (void)state;
    zb_err_t e;
    for (size_t k = 0; k < sizeof CFGS / sizeof CFGS[0]; k++) {
        zb_gpt2_params_t whole;
        must(zb_gpt2_params_alloc(&whole, &CFGS[k], &e), &e);
        zb_gpt2_params_init_random(&whole, 42);
        part_ctx_t c = {.whole = &whole, .seed = 42};
        for_partitions(&CFGS[k], check_part, &c);
        assert_true(c.checked > 10);
        zb_gpt2_params_free(&whole);
    }
}

static void test_part_load_llmc(void **state)
{
    (void)state;
    zb_err_t e;
    char path[] = "/tmp/zb_init_llmcXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (size_t k = 0; k < sizeof CFGS / sizeof CFGS[0]; k++) {
        zb_gpt2_params_t whole;
        must(zb_gpt2_params_alloc(&whole, &CFGS[k], &e), &e);
        for (size_t i = 0; i < whole.count; i++)
            whole.data[i] = (float)i * 0.25f - 3.0f; /* every element distinct */
        must(zb_gpt2_save_llmc(path, &whole, &e), &e);
        part_ctx_t c = {.whole = &whole, .file = path};
        for_partitions(&CFGS[k], check_part, &c);
        zb_gpt2_config_t peek;
        must(zb_gpt2_peek_llmc(path, &peek, &e), &e);
        assert_memory_equal(&peek, &CFGS[k], sizeof peek);
        zb_gpt2_params_free(&whole);
    }
    /* a buffer of another shape is refused, naming the file's model */
    zb_gpt2_params_t other;
    must(zb_gpt2_params_alloc(&other, &CFGS[0], &e), &e);
    assert_int_equal(zb_gpt2_load_llmc_into(path, &other, NULL, &e), ZB_EMISMATCH);
    assert_non_null(strstr(e.msg, "L=4"));
    zb_gpt2_params_free(&other);
    unlink(path);
}

/* A training checkpoint written by a whole-model trainer, read back part by part. */
static void test_part_load_checkpoint(void **state)
{
    (void)state;
    zb_err_t e;
    char text[] = "/tmp/zb_init_textXXXXXX", ckpt[] = "/tmp/zb_init_ckptXXXXXX";
    int fd = mkstemp(text);
    assert_true(fd >= 0);
    for (int i = 0; i < 200; i++)
        assert_true(write(fd, "the quick brown fox jumps over the lazy dog. ", 45) == 45);
    close(fd);
    close(mkstemp(ckpt));
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    c.model = CFGS[1];
    c.model.vocab = 256;
    c.model.padded_vocab = 256;
    c.text_path = text;
    c.batch = 2, c.seq = 8, c.steps = 2;
    zb_trainer_t t;
    must(zb_trainer_init(&t, &c, &e), &e);
    zb_step_stats_t s;
    for (int i = 0; i < 2; i++)
        must(zb_trainer_step(&t, &s, &e), &e);
    must(zb_train_save(&t, ckpt, &e), &e);
    part_ctx_t pc = {.whole = &t.params, .wm = &t.opt.m, .wv = &t.opt.v, .file = ckpt};
    for_partitions(&t.model, check_part, &pc);
    /* the host-only trainer reads the header's state, and holds no model */
    zb_trainer_t h;
    c.resume_path = ckpt;
    must(zb_trainer_init_host(&h, &c, &e), &e);
    assert_null(h.params.data);
    assert_null(h.opt.m.data);
    assert_int_equal(h.step, 2);
    assert_int_equal(h.param_count, t.params.count);
    assert_memory_equal(&h.model, &t.model, sizeof h.model);
    zb_trainer_free(&h);
    /* a flipped payload byte: the streamed read reports the corruption */
    FILE *f = fopen(ckpt, "r+b");
    assert_non_null(f);
    fseek(f, -5, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -5, SEEK_END);
    fputc(ch ^ 0x40, f);
    fclose(f);
    zb_gpt2_params_t p, m, v;
    zb_gpt2_span_t head = {2, 4, false, true};
    must(zb_gpt2_params_alloc_part(&p, &t.model, &head, 1, &e), &e);
    must(zb_gpt2_params_alloc_like(&m, &p, &e), &e);
    must(zb_gpt2_params_alloc_like(&v, &p, &e), &e);
    assert_int_equal(zb_train_load_into(ckpt, &p, p.data, m.data, v.data, &e), ZB_EFORMAT);
    assert_non_null(strstr(e.msg, "corrupt"));
    zb_gpt2_params_free(&p), zb_gpt2_params_free(&m), zb_gpt2_params_free(&v);
    zb_trainer_free(&t);
    unlink(text);
    unlink(ckpt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_init_matches_sequential),
        cmocka_unit_test(test_part_init_matches_whole),
        cmocka_unit_test(test_part_load_llmc),
        cmocka_unit_test(test_part_load_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
