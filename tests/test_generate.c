/* Sampling: the KV-cache forward equals the full-sequence forward at every position (whole model
 * and split into stages), pipeline ranks give the same tokens as one process, the sampler is
 * deterministic for a seed, top-k 1 is greedy, bad settings are refused; the GPT-2 tokenizer
 * reader accepts llm.c's format and rejects malformed files with one clear message. */
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
#include "zbpp/gpt2_infer.h"
#include "zbpp/pipeline_generate.h"
#include "zbpp/tokenizer.h"

static const zb_gpt2_config_t CFG = {.max_seq = 24, .vocab = 40, .padded_vocab = 64,
                                     .layers = 3, .heads = 2, .channels = 16};
static const zb_gpt2_span_t WHOLE = {.layer_begin = 0, .layer_end = 3, .embed = true,
                                     .head = true};

/* A random model with weights scaled up so the next-token distributions are far from uniform
 * (a near-uniform model would make a probability comparison meaningless). */
static void make_model(zb_gpt2_params_t *p, uint64_t seed)
{
    zb_err_t e;
    assert_int_equal(zb_gpt2_params_alloc(p, &CFG, &e), ZB_OK);
    zb_gpt2_params_init_random(p, seed);
    for (size_t i = 0; i < p->count; i++)
        p->data[i] *= 4.0f;
}

static void softmax(const float *logits, int V, double *out)
{
    double m = logits[0], s = 0;
    for (int i = 1; i < V; i++)
        m = logits[i] > m ? logits[i] : m;
    for (int i = 0; i < V; i++)
        s += (out[i] = exp(logits[i] - m));
    for (int i = 0; i < V; i++)
        out[i] /= s;
}

static void test_kv_cache_equals_full_forward(void **state)
{
    (void)state;
    enum { T = 20 };
    zb_gpt2_params_t p;
    make_model(&p, 7);
    int tokens[T], targets[T];
    for (int t = 0; t < T; t++) {
        tokens[t] = (t * 17 + 3) % CFG.vocab;
        targets[t] = (t * 5 + 1) % CFG.vocab;
    }
    zb_err_t e;
    zb_gpt2_stash_t *st;
    assert_int_equal(zb_gpt2_stash_new(&CFG, &WHOLE, 1, T, &st, &e), ZB_OK);
    float loss;
    assert_int_equal(zb_gpt2_forward(&p, &WHOLE, st, tokens, NULL, targets, NULL, &loss, &e),
                     ZB_OK);
    const float *probs = zb_gpt2_stash_probs(st);
    assert_non_null(probs);

    zb_gpt2_kv_t *kv;
    assert_int_equal(zb_gpt2_kv_new(&CFG, &WHOLE, T, &kv, &e), ZB_OK);
    float logits[64];
    double q[64], worst = 0, peak = 0;
    for (int t = 0; t < T; t++) {
        assert_int_equal(zb_gpt2_kv_len(kv), t);
        assert_int_equal(zb_gpt2_infer_step(&p, &WHOLE, kv, tokens[t], NULL, NULL, logits, &e),
                         ZB_OK);
        softmax(logits, CFG.vocab, q);
        for (int v = 0; v < CFG.vocab; v++) {
            double d = fabs(q[v] - probs[(size_t)t * CFG.padded_vocab + v]);
            worst = d > worst ? d : worst;
            peak = q[v] > peak ? q[v] : peak;
        }
    }
    print_message("KV cache vs full forward: max |dp| = %.3g over %d positions x %d tokens "
                  "(largest p %.3f)\n", worst, T, CFG.vocab, peak);
    assert_true(peak > 8.0 / CFG.vocab); /* far from flat (uniform is 1/V) */
    assert_true(worst < 1e-5);
    /* full cache refuses another position */
    assert_int_equal(zb_gpt2_infer_step(&p, &WHOLE, kv, 0, NULL, NULL, logits, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "full"));
    zb_gpt2_kv_free(kv);
    zb_gpt2_stash_free(st);
    zb_gpt2_params_free(&p);
}

/* Two stages with stage-local parameters and their own caches give the whole model's logits. */
static void test_staged_cache_matches_whole(void **state)
{
    (void)state;
    zb_gpt2_params_t p;
    make_model(&p, 11);
    zb_gpt2_span_t sp[2] = {{.layer_begin = 0, .layer_end = 1, .embed = true},
                            {.layer_begin = 1, .layer_end = 3, .head = true}};
    zb_gpt2_params_t part[2];
    zb_gpt2_kv_t *kv[2], *whole;
    zb_err_t e;
    for (int s = 0; s < 2; s++) {
        assert_int_equal(zb_gpt2_params_alloc_part(&part[s], &CFG, &sp[s], 1, &e), ZB_OK);
        for (int u = 0; u < zb_gpt2_num_units(&CFG); u++)
            zb_gpt2_copy_unit(&part[s], &p, u);
        assert_int_equal(zb_gpt2_kv_new(&CFG, &sp[s], 10, &kv[s], &e), ZB_OK);
    }
    assert_int_equal(zb_gpt2_kv_new(&CFG, &WHOLE, 10, &whole, &e), ZB_OK);
    float x[16], a[64], b[64];
    for (int t = 0; t < 10; t++) {
        int tok = (t * 7) % CFG.vocab;
        assert_int_equal(zb_gpt2_infer_step(&part[0], &sp[0], kv[0], tok, NULL, x, NULL, &e),
                         ZB_OK);
        assert_int_equal(zb_gpt2_infer_step(&part[1], &sp[1], kv[1], 0, x, NULL, a, &e), ZB_OK);
        assert_int_equal(zb_gpt2_infer_step(&p, &WHOLE, whole, tok, NULL, NULL, b, &e), ZB_OK);
        assert_memory_equal(a, b, sizeof(float) * CFG.vocab);
    }
    /* a stage's cache with the whole span, or parameters that lack the stage, are refused */
    assert_int_equal(zb_gpt2_infer_step(&p, &WHOLE, kv[0], 1, NULL, NULL, a, &e), ZB_EINVAL);
    assert_int_equal(zb_gpt2_infer_step(&part[0], &sp[1], kv[1], 0, x, NULL, a, &e), ZB_EINVAL);
    for (int s = 0; s < 2; s++) {
        zb_gpt2_kv_free(kv[s]);
        zb_gpt2_params_free(&part[s]);
    }
    zb_gpt2_kv_free(whole);
    zb_gpt2_params_free(&p);
}

static void gen(const zb_gpt2_params_t *p, int ranks, float temp, int k, uint64_t seed, int *out)
{
    zb_sampler_t s;
    zb_err_t e;
    int prompt[3] = {1, 2, 3}, n = 0;
    assert_int_equal(zb_sampler_init(&s, temp, k, CFG.vocab, seed, &e), ZB_OK);
    assert_int_equal(zb_pipeline_generate(p, ranks, prompt, 3, 16, &s, out, &n, NULL, NULL, &e),
                     ZB_OK);
    assert_int_equal(n, 16);
    zb_sampler_free(&s);
}

static void test_deterministic_and_greedy(void **state)
{
    (void)state;
    zb_gpt2_params_t p;
    make_model(&p, 3);
    int a[16], b[16], c[16], g[16], k1[16];
    gen(&p, 1, 1.0f, 0, 42, a);
    gen(&p, 1, 1.0f, 0, 42, b);
    assert_memory_equal(a, b, sizeof a); /* same seed, same tokens */
    gen(&p, 1, 1.0f, 0, 43, c);
    assert_memory_not_equal(a, c, sizeof a); /* another seed, another sample */
    gen(&p, 1, 0.0f, 0, 1, g);
    gen(&p, 1, 1.0f, 1, 99, k1);
    assert_memory_equal(g, k1, sizeof g); /* top-k 1 is greedy whatever the seed */
    /* through 2 and 3 pipeline ranks: the same tokens as one process */
    gen(&p, 2, 1.0f, 0, 42, b);
    assert_memory_equal(a, b, sizeof a);
    gen(&p, 3, 1.0f, 0, 42, b);
    assert_memory_equal(a, b, sizeof a);
    /* greedy tokens are each the argmax of the model's next-token logits */
    zb_gpt2_kv_t *kv;
    zb_err_t e;
    float logits[64];
    assert_int_equal(zb_gpt2_kv_new(&CFG, &WHOLE, 24, &kv, &e), ZB_OK);
    int seq[19] = {1, 2, 3};
    memcpy(seq + 3, g, sizeof g);
    for (int t = 0; t < 18; t++) {
        assert_int_equal(zb_gpt2_infer_step(&p, &WHOLE, kv, seq[t], NULL, NULL, logits, &e), ZB_OK);
        if (t >= 2)
            for (int v = 0; v < CFG.vocab; v++)
                assert_true(logits[v] <= logits[seq[t + 1]]);
    }
    zb_gpt2_kv_free(kv);
    zb_gpt2_params_free(&p);
}

static void test_sampler_rules(void **state)
{
    (void)state;
    zb_sampler_t s;
    zb_err_t e;
    assert_int_equal(zb_sampler_init(&s, NAN, 0, 8, 1, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "temperature"));
    assert_int_equal(zb_sampler_init(&s, INFINITY, 0, 8, 1, &e), ZB_EINVAL);
    assert_int_equal(zb_sampler_init(&s, -0.5f, 0, 8, 1, &e), ZB_EINVAL);
    assert_int_equal(zb_sampler_init(&s, 1.0f, 9, 8, 1, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "top-k"));
    assert_int_equal(zb_sampler_init(&s, 1.0f, -1, 8, 1, &e), ZB_EINVAL);
    float l[8] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 2.8f, -INFINITY, NAN};
    /* greedy: the largest, the lower id on a tie; non-finite never picked */
    assert_int_equal(zb_sampler_init(&s, 0.0f, 0, 8, 1, &e), ZB_OK);
    assert_int_equal(zb_sampler_pick(&s, l), 1);
    zb_sampler_free(&s);
    /* top-3: only ids 1, 3, 4 ever come out; each of them does */
    assert_int_equal(zb_sampler_init(&s, 5.0f, 3, 8, 9, &e), ZB_OK);
    int seen[8] = {0};
    for (int i = 0; i < 600; i++)
        seen[zb_sampler_pick(&s, l)]++;
    zb_sampler_free(&s);
    assert_true(seen[1] > 0 && seen[3] > 0 && seen[4] > 0);
    assert_int_equal(seen[0] + seen[2] + seen[5] + seen[6] + seen[7], 0);
    /* the whole vocabulary at a high temperature reaches the small logits, never NaN/-inf */
    assert_int_equal(zb_sampler_init(&s, 100.0f, 0, 8, 9, &e), ZB_OK);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 2000; i++)
        seen[zb_sampler_pick(&s, l)]++;
    zb_sampler_free(&s);
    assert_true(seen[0] > 0 && seen[2] > 0);
    assert_int_equal(seen[6] + seen[7], 0);
}

static void test_generate_limits(void **state)
{
    (void)state;
    zb_gpt2_params_t p;
    make_model(&p, 5);
    zb_sampler_t s;
    zb_err_t e;
    assert_int_equal(zb_sampler_init(&s, 1.0f, 0, CFG.vocab, 1, &e), ZB_OK);
    int prompt[4] = {1, 2, 3, 4}, out[32], n;
    /* 4 + 21 - 1 = 24 positions fit max_seq 24; one more does not */
    assert_int_equal(zb_gpt2_generate(&p, prompt, 4, 21, &s, out, &n, NULL, NULL, &e), ZB_OK);
    assert_int_equal(n, 21);
    assert_int_equal(zb_gpt2_generate(&p, prompt, 4, 22, &s, out, &n, NULL, NULL, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "max sequence"));
    assert_int_equal(zb_pipeline_generate(&p, 2, prompt, 4, 22, &s, out, &n, NULL, NULL, &e),
                     ZB_EINVAL);
    assert_int_equal(zb_pipeline_generate(&p, 4, prompt, 4, 2, &s, out, &n, NULL, NULL, &e),
                     ZB_EINVAL); /* more ranks than blocks */
    prompt[1] = CFG.vocab; /* out of range */
    assert_int_equal(zb_gpt2_generate(&p, prompt, 4, 2, &s, out, &n, NULL, NULL, &e), ZB_EINVAL);
    zb_sampler_free(&s);
    zb_gpt2_params_free(&p);
}

/* ---- tokenizer file ---- */

/* llm.c's layout: 256 uint32 header {magic, version, vocab, eot}, then (len, bytes) per token. */
static size_t tok_file(unsigned char *buf, uint32_t magic, uint32_t version, uint32_t vocab,
                       uint32_t eot, const char *const *pieces, int n)
{
    memset(buf, 0, 1024);
    uint32_t h[4] = {magic, version, vocab, eot};
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 4; b++)
            buf[i * 4 + b] = (unsigned char)(h[i] >> (8 * b));
    size_t pos = 1024;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(pieces[i]);
        buf[pos++] = (unsigned char)len;
        memcpy(buf + pos, pieces[i], len);
        pos += len;
    }
    return pos;
}

static const char *const PIECES[] = {"a", "b", "ab", "<|eot|>", "c", "abc!"};

static void test_tokenizer_reads_llmc_format(void **state)
{
    (void)state;
    unsigned char buf[2048];
    size_t n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 6, 3, PIECES, 6);
    zb_gpt2_tok_t *t;
    zb_err_t e;
    assert_int_equal(zb_gpt2_tok_parse("mem", buf, n, &t, &e), ZB_OK);
    assert_int_equal(zb_gpt2_tok_vocab(t), 6);
    assert_int_equal(zb_gpt2_tok_eot(t), 3);
    size_t len;
    const char *s = zb_gpt2_tok_piece(t, 3, &len);
    assert_int_equal(len, 7);
    assert_memory_equal(s, "<|eot|>", 7);
    assert_null(zb_gpt2_tok_piece(t, 6, &len));
    assert_null(zb_gpt2_tok_piece(t, -1, &len));
    int ids[16];
    size_t k;
    /* longest match: "abc!" beats "ab" + "c"; "ab" beats "a" + "b" */
    assert_int_equal(zb_gpt2_tok_encode(t, "abc!abcab", 9, ids, 16, &k, &e), ZB_OK);
    assert_int_equal(k, 4);
    int want[4] = {5, 2, 4, 2};
    assert_memory_equal(ids, want, sizeof want);
    assert_int_equal(zb_gpt2_tok_encode(t, "ab d", 4, ids, 16, &k, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "0x20"));
    assert_int_equal(zb_gpt2_tok_encode(t, "ababab", 6, ids, 2, &k, &e), ZB_EINVAL);
    zb_gpt2_tok_free(t);
    /* version 1: no eot in the header, none unless the vocabulary is GPT-2's */
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 1, 6, 0, PIECES, 6);
    assert_int_equal(zb_gpt2_tok_parse("mem", buf, n, &t, &e), ZB_OK);
    assert_int_equal(zb_gpt2_tok_eot(t), -1);
    zb_gpt2_tok_free(t);
    /* through a file, and a missing file */
    char path[128];
    snprintf(path, sizeof path, "/tmp/zbpp_test_tok_%ld.bin", (long)getpid());
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 6, 3, PIECES, 6);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    assert_int_equal(zb_gpt2_tok_load(path, &t, &e), ZB_OK);
    zb_gpt2_tok_free(t);
    remove(path);
    assert_int_equal(zb_gpt2_tok_load(path, &t, &e), ZB_EIO);
    assert_null(t);
}

static void expect_bad(const unsigned char *buf, size_t n, const char *what)
{
    zb_gpt2_tok_t *t = (zb_gpt2_tok_t *)1;
    zb_err_t e;
    assert_int_equal(zb_gpt2_tok_parse("tok.bin", buf, n, &t, &e), ZB_EFORMAT);
    assert_null(t);
    if (!strstr(e.msg, what) || !strstr(e.msg, "tok.bin") || strchr(e.msg, '\n'))
        fail_msg("expected '%s' in one line naming the file, got '%s'", what, e.msg);
}

static void test_tokenizer_rejects_malformed(void **state)
{
    (void)state;
    unsigned char buf[2048];
    size_t n = tok_file(buf, 20240326, 2, 6, 3, PIECES, 6);
    expect_bad(buf, n, "bad magic");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 3, 6, 3, PIECES, 6);
    expect_bad(buf, n, "version 3");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 0, 0, PIECES, 0);
    expect_bad(buf, n, "vocab size 0");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 6, 6, PIECES, 6);
    expect_bad(buf, n, "eot token 6");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 6, 3, PIECES, 6);
    expect_bad(buf, 1000, "truncated header");
    expect_bad(buf, n - 2, "token 5 of length 4 runs past the end");
    expect_bad(buf, n - 5, "truncated at token 5");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 7, 3, PIECES, 6); /* header says one more token */
    expect_bad(buf, n, "truncated at token 6 of 7");
    expect_bad(buf, 1030, "1030 bytes cannot hold 7 tokens");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 5, 3, PIECES, 6); /* one token too many in the file */
    expect_bad(buf, n, "5 extra bytes");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 6, 3, PIECES, 6);
    buf[1024] = 0; /* first token's length */
    expect_bad(buf, n, "token 0 has length 0");
    n = tok_file(buf, ZB_GPT2_TOK_MAGIC, 2, 0x7fffffffu, 3, PIECES, 6);
    expect_bad(buf, n, "vocab size 2147483647");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_cache_equals_full_forward),
        cmocka_unit_test(test_staged_cache_matches_whole),
        cmocka_unit_test(test_deterministic_and_greedy),
        cmocka_unit_test(test_sampler_rules),
        cmocka_unit_test(test_generate_limits),
        cmocka_unit_test(test_tokenizer_reads_llmc_format),
        cmocka_unit_test(test_tokenizer_rejects_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
