/* Tests of the data layer: byte tokenizer, llm.c shard validation (each malformed case rejected
 * with the file named), the in-order batch stream across shards with wrap-around, and the
 * seeded shuffle (a permutation of the batch slots per epoch, reproducible, resumable by seek). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tempdir_testutil.h"
#include "zbpp/data.h"


static int setup_dir(void **state)
{
    (void)state;
    return test_dir_make("data");
}

static int remove_dir(void **state)
{
    (void)state;
    return test_dir_remove();
}

static void path_of(char *buf, size_t cap, const char *name) { test_path(buf, cap, name); }

/* A shard whose token i is (base + i) % mod: easy to check which tokens a batch holds. */
static void write_ramp(const char *name, size_t n, int base, int mod)
{
    uint16_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = (uint16_t)((base + (int)i) % mod);
    char p[256];
    path_of(p, sizeof p, name);
    zb_err_t err;
    assert_int_equal(zb_shard_write(p, t, n, &err), ZB_OK);
    free(t);
}

static void write_raw(const char *name, const int32_t *header, const void *body, size_t body_len)
{
    char p[256];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(header, sizeof(int32_t), ZB_SHARD_HEADER_INTS, f), ZB_SHARD_HEADER_INTS);
    if (body_len)
        assert_int_equal(fwrite(body, 1, body_len, f), body_len);
    fclose(f);
}

static void test_tokenizer_roundtrip(void **state)
{
    (void)state;
    const char *text = "ab<|endoftext|>c\xff<|endof";
    size_t len = strlen(text);
    uint16_t tok[64];
    size_t n = zb_tok_encode(text, len, tok);
    /* a b EOT c 0xff < | e n d o f */
    assert_int_equal(n, 12);
    assert_int_equal(tok[0], 'a');
    assert_int_equal(tok[2], ZB_TOK_EOT);
    assert_int_equal(tok[4], 0xff);
    assert_int_equal(tok[5], '<');
    char out[64];
    assert_int_equal(zb_tok_decode(tok, n, out, sizeof out), len);
    assert_string_equal(out, text);
    /* truncation: like snprintf, returns the needed length and stays NUL-terminated */
    char small[5];
    assert_int_equal(zb_tok_decode(tok, n, small, sizeof small), len);
    assert_string_equal(small, "ab<|");
}

static void test_shard_roundtrip_and_stream(void **state)
{
    (void)state;
    /* two shards: 20 tokens (values 0..19) and 9 tokens (100..108); B=2, T=3 -> 7 tokens each */
    write_ramp("s_a.bin", 20, 0, 1000);
    write_ramp("s_b.bin", 9, 100, 1000);
    char pat[256];
    path_of(pat, sizeof pat, "s_*.bin");
    zb_data_t *d;
    zb_err_t err;
    assert_int_equal(zb_data_open_glob(pat, 1000, &d, &err), ZB_OK);
    assert_int_equal(zb_data_num_shards(d), 2);
    assert_int_equal(zb_data_total_tokens(d), 29);
    assert_int_equal(zb_data_configure(d, 2, 3, false, 0, &err), ZB_OK);
    int in[6], tg[6];
    /* expected starts: shard a at 0, 6, 12 (12+7=19 <= 20); then shard b at 0 (7 <= 9); wrap */
    const int starts[] = {0, 6, 12, 100, 0, 6};
    for (int k = 0; k < 6; k++) {
        assert_int_equal(zb_data_next(d, in, tg, &err), ZB_OK);
        for (int i = 0; i < 6; i++) {
            assert_int_equal(in[i], starts[k] + i);
            assert_int_equal(tg[i], starts[k] + i + 1);
        }
    }
    assert_int_equal(zb_data_tell(d).epoch, 1);
    zb_data_free(d);
}

static void expect_reject(const char *name, int vocab, zb_status_t want, const char *needle)
{
    char p[256];
    path_of(p, sizeof p, name);
    zb_data_t *d = (zb_data_t *)1;
    zb_err_t err;
    zb_err_clear(&err);
    assert_int_equal(zb_data_open_glob(p, vocab, &d, &err), want);
    assert_null(d);
    assert_non_null(strstr(err.msg, name)); /* the message names the file */
    if (needle && !strstr(err.msg, needle))
        fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_shard_rejects_malformed(void **state)
{
    (void)state;
    int32_t h[ZB_SHARD_HEADER_INTS] = {ZB_SHARD_MAGIC, ZB_SHARD_VERSION, 4};
    uint16_t body[5] = {1, 2, 3, 4, 5};

    int32_t bad_magic[ZB_SHARD_HEADER_INTS] = {20240326, ZB_SHARD_VERSION, 4};
    write_raw("bad_magic.bin", bad_magic, body, 8);
    expect_reject("bad_magic.bin", 100, ZB_EFORMAT, "magic");

    int32_t bad_version[ZB_SHARD_HEADER_INTS] = {ZB_SHARD_MAGIC, 2, 4};
    write_raw("bad_version.bin", bad_version, body, 8);
    expect_reject("bad_version.bin", 100, ZB_EFORMAT, "version");

    write_raw("truncated.bin", h, body, 6);
    expect_reject("truncated.bin", 100, ZB_EFORMAT, "truncated");

    write_raw("oversized.bin", h, body, 10);
    expect_reject("oversized.bin", 100, ZB_EFORMAT, "oversized");

    int32_t zero[ZB_SHARD_HEADER_INTS] = {ZB_SHARD_MAGIC, ZB_SHARD_VERSION, 0};
    write_raw("zero.bin", zero, NULL, 0);
    expect_reject("zero.bin", 100, ZB_EFORMAT, "count");

    char p[256];
    path_of(p, sizeof p, "short_header.bin");
    FILE *f = fopen(p, "wb");
    fwrite(h, 1, 100, f);
    fclose(f);
    expect_reject("short_header.bin", 100, ZB_EFORMAT, "header");

    write_raw("big_id.bin", h, body, 8);
    expect_reject("big_id.bin", 4, ZB_EFORMAT, "vocabulary"); /* token 4 >= vocab 4 */

    expect_reject("missing_*.bin", 100, ZB_EIO, NULL);
}

static void test_configure_needs_a_full_batch(void **state)
{
    (void)state;
    write_ramp("tiny.bin", 10, 0, 50);
    char p[256];
    path_of(p, sizeof p, "tiny.bin");
    zb_data_t *d;
    zb_err_t err;
    assert_int_equal(zb_data_open_glob(p, 50, &d, &err), ZB_OK);
    assert_int_equal(zb_data_configure(d, 3, 3, false, 0, &err), ZB_OK);     /* needs 10 */
    assert_int_equal(zb_data_configure(d, 2, 5, false, 0, &err), ZB_EINVAL); /* needs 11 */
    assert_non_null(strstr(err.msg, "11"));
    assert_int_equal(zb_data_configure(d, 0, 5, false, 0, &err), ZB_EINVAL);
    zb_data_free(d);
}

/* Shuffle: each epoch is a permutation of the batch slots, reproducible from the seed. */
static void test_shuffle_permutation_and_seek(void **state)
{
    (void)state;
    write_ramp("sh_0.bin", 4 * 5 + 1, 0, 60000);    /* 5 slots of B·T = 4 */
    write_ramp("sh_1.bin", 4 * 3 + 2, 1000, 60000); /* 3 slots */
    write_ramp("sh_2.bin", 3, 2000, 60000);         /* too short: skipped */
    char pat[256];
    path_of(pat, sizeof pat, "sh_*.bin");
    zb_data_t *a, *b, *c;
    zb_err_t err;
    assert_int_equal(zb_data_open_glob(pat, 60000, &a, &err), ZB_OK);
    assert_int_equal(zb_data_open_glob(pat, 60000, &b, &err), ZB_OK);
    assert_int_equal(zb_data_open_glob(pat, 60000, &c, &err), ZB_OK);
    assert_int_equal(zb_data_configure(a, 2, 2, true, 42, &err), ZB_OK);
    assert_int_equal(zb_data_configure(b, 2, 2, true, 42, &err), ZB_OK);
    assert_int_equal(zb_data_configure(c, 2, 2, true, 43, &err), ZB_OK);
    int in[4], tg[4], in2[4], tg2[4];
    int starts[3][8];
    bool differs = false;
    zb_data_pos_t mid = {0};
    for (int e = 0; e < 3; e++) {
        bool seen[8] = {0};
        for (int k = 0; k < 8; k++) {
            if (e == 1 && k == 3)
                mid = zb_data_tell(a);
            assert_int_equal(zb_data_next(a, in, tg, &err), ZB_OK);
            assert_int_equal(zb_data_next(b, in2, tg2, &err), ZB_OK);
            assert_memory_equal(in, in2, sizeof in);
            assert_memory_equal(tg, tg2, sizeof tg);
            assert_int_equal(zb_data_next(c, in2, tg2, &err), ZB_OK);
            differs |= memcmp(in, in2, sizeof in) != 0;
            for (int i = 0; i < 4; i++)
                assert_int_equal(tg[i], in[i] + 1);
            /* slot id: shard 0 slots 0..4, shard 1 slots 5..7 */
            int slot = in[0] < 1000 ? in[0] / 4 : 5 + (in[0] - 1000) / 4;
            assert_true(in[0] % 4 == 0 || in[0] >= 1000);
            assert_false(seen[slot]);
            seen[slot] = true;
            starts[e][k] = in[0];
        }
    }
    assert_true(differs); /* another seed, another order */
    bool epochs_differ = memcmp(starts[0], starts[1], sizeof starts[0]) != 0 ||
                         memcmp(starts[1], starts[2], sizeof starts[1]) != 0;
    assert_true(epochs_differ);
    /* seek back to a saved position: the same continuation */
    assert_int_equal(zb_data_seek(b, &mid, &err), ZB_OK);
    for (int k = 3; k < 8; k++) {
        assert_int_equal(zb_data_next(b, in, tg, &err), ZB_OK);
        assert_int_equal(in[0], starts[1][k]);
    }
    zb_data_pos_t bad = {0, 7, 0};
    assert_int_equal(zb_data_seek(b, &bad, &err), ZB_EFORMAT);
    zb_data_free(a);
    zb_data_free(b);
    zb_data_free(c);
}

static void test_text_and_tokens(void **state)
{
    (void)state;
    char p[256];
    path_of(p, sizeof p, "t.txt");
    FILE *f = fopen(p, "w");
    fputs("hello<|endoftext|>world", f);
    fclose(f);
    zb_data_t *d;
    zb_err_t err;
    assert_int_equal(zb_data_open_text(p, ZB_TOK_VOCAB, &d, &err), ZB_OK);
    assert_int_equal(zb_data_total_tokens(d), 11);
    assert_int_equal(zb_data_configure(d, 1, 10, false, 0, &err), ZB_OK);
    int in[10], tg[10];
    assert_int_equal(zb_data_next(d, in, tg, &err), ZB_OK);
    assert_int_equal(in[5], ZB_TOK_EOT);
    assert_int_equal(tg[9], 'd');
    uint64_t fp = zb_data_fingerprint(d);
    zb_data_free(d);
    /* same tokens via memory: same fingerprint; one token different: different fingerprint */
    uint16_t tok[11];
    zb_tok_encode("hello<|endoftext|>world", 23, tok);
    assert_int_equal(zb_data_open_tokens("mem", tok, 11, ZB_TOK_VOCAB, &d, &err), ZB_OK);
    assert_true(zb_data_fingerprint(d) == fp);
    zb_data_free(d);
    tok[3] = 'x';
    assert_int_equal(zb_data_open_tokens("mem", tok, 11, ZB_TOK_VOCAB, &d, &err), ZB_OK);
    assert_true(zb_data_fingerprint(d) != fp);
    zb_data_free(d);
    /* byte-level text against a model with a smaller vocabulary: rejected */
    assert_int_equal(zb_data_open_text(p, 200, &d, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "vocabulary"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_roundtrip),
        cmocka_unit_test(test_shard_roundtrip_and_stream),
        cmocka_unit_test(test_shard_rejects_malformed),
        cmocka_unit_test(test_configure_needs_a_full_batch),
        cmocka_unit_test(test_shuffle_permutation_and_seek),
        cmocka_unit_test(test_text_and_tokens),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
