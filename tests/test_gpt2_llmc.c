/* llm.c checkpoint files: bit-exact round trip and rejection of malformed files. */
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

static const zb_gpt2_config_t CFG = {.max_seq = 8, .vocab = 10, .padded_vocab = 16, .layers = 2,
                                     .heads = 2, .channels = 8};
static char path[256];

static int setup(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/zbpp_test_llmc_%ld.bin", (long)getpid());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove(path);
    return 0;
}

static void save_random(zb_gpt2_params_t *p)
{
    zb_err_t e;
    assert_int_equal(zb_gpt2_params_alloc(p, &CFG, &e), ZB_OK);
    zb_gpt2_params_init_random(p, 1234);
    assert_int_equal(zb_gpt2_save_llmc(path, p, &e), ZB_OK);
}

static void test_round_trip(void **state)
{
    (void)state;
    zb_gpt2_params_t p, q;
    zb_err_t e;
    save_random(&p);
    assert_int_equal(zb_gpt2_load_llmc(path, &q, &e), ZB_OK);
    assert_memory_equal(&p.cfg, &q.cfg, sizeof p.cfg);
    assert_int_equal(p.count, q.count);
    assert_memory_equal(p.data, q.data, p.count * sizeof(float));
    /* the header is llm.c's: magic, version 3, maxT, V, L, NH, C, Vp */
    FILE *f = fopen(path, "rb");
    int32_t h[8];
    assert_int_equal(fread(h, sizeof h, 1, f), 1);
    fclose(f);
    int32_t want[8] = {20240326, 3, 8, 10, 2, 2, 8, 16};
    assert_memory_equal(h, want, sizeof h);
    /* no temp file is left behind */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    zb_gpt2_params_free(&p);
    zb_gpt2_params_free(&q);
}

/* Rewrite header word `idx` (or the length) of a valid file and expect a clear rejection. */
static void expect_reject(const char *needle)
{
    zb_gpt2_params_t q;
    zb_err_t e;
    zb_status_t s = zb_gpt2_load_llmc(path, &q, &e);
    assert_int_not_equal(s, ZB_OK);
    assert_null(q.data);
    if (!strstr(e.msg, needle))
        fail_msg("message '%s' does not mention '%s'", e.msg, needle);
}

static void patch_header(int idx, int32_t value)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, idx * 4L, SEEK_SET);
    fwrite(&value, 4, 1, f);
    fclose(f);
}

static void test_rejects_malformed(void **state)
{
    (void)state;
    zb_gpt2_params_t p;
    save_random(&p);
    long full = 1024 + (long)p.count * 4;

    patch_header(0, 20240327);
    expect_reject("bad magic");
    patch_header(0, 20240326);
    patch_header(1, 5);
    expect_reject("unsupported version 5");
    patch_header(1, 3);
    patch_header(6, 7); /* C=7 is not divisible by NH=2 */
    expect_reject("divide");
    patch_header(6, 1 << 30);
    expect_reject("too large");
    patch_header(6, -8);
    expect_reject("positive");
    patch_header(6, 8);
    patch_header(7, 4); /* Vp < V */
    expect_reject("padded vocab");
    patch_header(7, 16);

    assert_int_equal(truncate(path, full - 4), 0);
    expect_reject("truncated");
    assert_int_equal(truncate(path, 100), 0);
    expect_reject("truncated header");
    assert_int_equal(truncate(path, 0), 0);
    expect_reject("truncated header");

    zb_err_t e;
    assert_int_equal(zb_gpt2_save_llmc(path, &p, &e), ZB_OK);
    FILE *f = fopen(path, "ab");
    fputc(0, f);
    fclose(f);
    expect_reject("extra bytes");

    remove(path);
    expect_reject("cannot open");
    zb_gpt2_params_free(&p);
}

static void test_save_to_bad_path(void **state)
{
    (void)state;
    zb_gpt2_params_t p;
    zb_err_t e;
    assert_int_equal(zb_gpt2_params_alloc(&p, &CFG, &e), ZB_OK);
    assert_int_equal(zb_gpt2_save_llmc("/nonexistent-dir/x.bin", &p, &e), ZB_EIO);
    assert_non_null(strstr(e.msg, "/nonexistent-dir/x.bin"));
    zb_gpt2_params_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_malformed, setup, teardown),
        cmocka_unit_test(test_save_to_bad_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
