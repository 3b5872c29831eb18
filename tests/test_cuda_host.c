/* CUDA backend, host-only logic (runs on every machine, GPU or not): precision names, the shape
 * checks of zb_cuda_stage_new, device discovery, and the "no CUDA device" path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/cuda.h"

static const zb_gpt2_config_t CFG = {.max_seq = 16, .vocab = 67, .padded_vocab = 128,
                                     .layers = 3, .heads = 2, .channels = 16};

static void test_precision_names(void **state)
{
    (void)state;
    zb_err_t e;
    const char *names[] = {"fp32", "tf32", "bf16"};
    for (int i = 0; i < 3; i++) {
        zb_cuda_precision_t p;
        assert_int_equal(zb_cuda_precision_parse(names[i], &p, &e), ZB_OK);
        assert_int_equal((int)p, i);
        assert_string_equal(zb_cuda_precision_name(p), names[i]);
    }
    zb_cuda_precision_t p = ZB_CUDA_BF16;
    assert_int_equal(zb_cuda_precision_parse("fp16", &p, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "'fp16'"));
    assert_int_equal(zb_cuda_precision_parse(NULL, &p, &e), ZB_EINVAL);
    assert_int_equal((int)p, ZB_CUDA_BF16); /* untouched on failure */
}

static void expect_bad(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B, int T,
                       int prec, const char *needle)
{
    zb_err_t e;
    zb_cuda_stage_t *s = (zb_cuda_stage_t *)&e; /* must be reset to NULL */
    assert_int_equal(zb_cuda_stage_check(cfg, span, B, T, (zb_cuda_precision_t)prec, &e),
                     ZB_EINVAL);
    if (!strstr(e.msg, needle))
        fail_msg("message '%s' does not mention '%s'", e.msg, needle);
    /* stage_new runs the same checks before it looks for a device */
    assert_int_equal(zb_cuda_stage_new(cfg, span, B, T, (zb_cuda_precision_t)prec, 0, &s, &e),
                     ZB_EINVAL);
    assert_null(s);
}

static void test_stage_check(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_span_t whole = {0, 3, true, true};
    assert_int_equal(zb_cuda_stage_check(&CFG, &whole, 2, 16, ZB_CUDA_FP32, &e), ZB_OK);
    zb_gpt2_span_t mid = {1, 2, false, false};
    zb_gpt2_config_t hs16 = CFG;
    hs16.heads = 1; /* head size 16: bf16's flash attention has a kernel for it */
    assert_int_equal(zb_cuda_stage_check(&hs16, &mid, 1, 1, ZB_CUDA_BF16, &e), ZB_OK);
    /* bf16 shapes: rows in 8-channel pieces; a head size flash attention has (CUDA builds:
     * without CUDA there are no kernels to ask, and no stage is made anyway) */
    zb_gpt2_config_t c12 = hs16;
    c12.channels = 12;
    c12.heads = 1;
    expect_bad(&c12, &whole, 2, 16, ZB_CUDA_BF16, "multiple of 8 (12)");
    assert_int_equal(zb_cuda_stage_check(&c12, &whole, 2, 16, ZB_CUDA_FP32, &e), ZB_OK);
#ifdef ZB_HAVE_CUDA
    expect_bad(&CFG, &whole, 2, 16, ZB_CUDA_BF16, "no kernel for head size 8");
#endif

    expect_bad(&CFG, &whole, 0, 16, ZB_CUDA_FP32, "batch size 0");
    expect_bad(&CFG, &whole, 2, 17, ZB_CUDA_FP32, "sequence length 17");
    expect_bad(&CFG, &whole, 2, 0, ZB_CUDA_FP32, "sequence length 0");
    expect_bad(&CFG, &whole, 2, 16, 7, "precision 7");
    zb_gpt2_span_t bad = {2, 1, false, false};
    expect_bad(&CFG, &bad, 2, 16, ZB_CUDA_FP32, "layers [2, 1)");
    zb_gpt2_span_t embed_late = {1, 3, true, true};
    expect_bad(&CFG, &embed_late, 2, 16, ZB_CUDA_FP32, "must start at layer 0");
    zb_gpt2_span_t head_early = {0, 2, true, true};
    expect_bad(&CFG, &head_early, 2, 16, ZB_CUDA_FP32, "must end at layer 3");
    zb_gpt2_span_t empty = {1, 1, false, false};
    expect_bad(&CFG, &empty, 2, 16, ZB_CUDA_FP32, "empty stage");
    zb_gpt2_config_t odd = CFG;
    odd.heads = 3; /* 16 % 3 != 0: the config check of gpt2.h */
    expect_bad(&odd, &whole, 2, 16, ZB_CUDA_FP32, "");
    assert_int_equal(zb_cuda_stage_check(NULL, &whole, 2, 16, ZB_CUDA_FP32, &e), ZB_EINVAL);
    assert_int_equal(zb_cuda_stage_check(&CFG, NULL, 2, 16, ZB_CUDA_FP32, &e), ZB_EINVAL);
}

/* With no device (or no CUDA in the build) the count is 0 without an error, and a valid stage
 * request fails with one line saying why; with a device, the stage comes up. */
static void test_device_count_and_no_device_path(void **state)
{
    (void)state;
    zb_err_t e;
    int n = -1;
    assert_int_equal(zb_cuda_device_count(&n, &e), ZB_OK);
    assert_true(n >= 0);
#ifdef ZB_HAVE_CUDA
    assert_true(zb_cuda_built());
#else
    assert_false(zb_cuda_built());
#endif
    zb_gpt2_span_t whole = {0, 3, true, true};
    zb_cuda_stage_t *s = NULL;
    zb_status_t st = zb_cuda_stage_new(&CFG, &whole, 2, 16, ZB_CUDA_FP32, 0, &s, &e);
    if (n == 0) {
        assert_int_equal(st, ZB_EUNSUPPORTED);
        assert_null(s);
        assert_non_null(strstr(e.msg, zb_cuda_built() ? "no CUDA device" : "without CUDA"));
        assert_null(strchr(e.msg, '\n'));
        char buf[128];
        assert_int_not_equal(zb_cuda_device_describe(0, buf, sizeof buf, &e), ZB_OK);
    } else {
        assert_int_equal(st, ZB_OK);
        assert_non_null(s);
        zb_cuda_stage_free(s);
        assert_int_equal(zb_cuda_stage_new(&CFG, &whole, 2, 16, ZB_CUDA_FP32, n, &s, &e),
                         ZB_EINVAL);
        assert_non_null(strstr(e.msg, "no CUDA device"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision_names),
        cmocka_unit_test(test_stage_check),
        cmocka_unit_test(test_device_count_and_no_device_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
