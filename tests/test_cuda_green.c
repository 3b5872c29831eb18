/* SM partition planning (zb_cuda_sm_plan, zb_cuda_sm_guideline): host arithmetic, every build,
 * no GPU. An H100 has 132 SMs and partitions of multiples of 8: the even split for 1..16 ranks,
 * explicit --sm-per-rank sizes, and every refusal (not a multiple, below the minimum, too large
 * for the ranks, more ranks than partitions). Also: where no CUDA device is visible, creating
 * partitions or querying the SMs fails with one line (ZB_EUNSUPPORTED), never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/cuda.h"
#include "cuda/stream.h"

static const zb_cuda_sm_info_t H100 = {.sm_count = 132, .min_partition = 8, .alignment = 8};

/* the even split of 132 SMs in multiples of 8, ranks 1..16 */
static void test_h100_even_split(void **state)
{
    (void)state;
    static const int want[17] = {0, 128, 64, 40, 32, 24, 16, 16, 16, 8, 8, 8, 8, 8, 8, 8, 8};
    for (int r = 1; r <= 16; r++) {
        zb_cuda_sm_plan_t p = {0, 0, 0};
        zb_err_t err;
        assert_int_equal(zb_cuda_sm_plan(&H100, r, 0, &p, &err), ZB_OK);
        assert_int_equal(p.ranks, r);
        assert_int_equal(p.sm_per_rank, want[r]);
        assert_int_equal(p.sm_per_rank % 8, 0);
        assert_int_equal(p.sm_unused, 132 - r * want[r]);
        /* the largest: one more step of 8 would not fit */
        assert_true(r * (want[r] + 8) > 132);
    }
}

static void test_h100_explicit(void **state)
{
    (void)state;
    static const struct {
        int ranks, k, unused;
    } ok[] = {{2, 64, 4}, {2, 8, 116}, {4, 32, 4}, {4, 16, 68}, {3, 40, 12}, {8, 16, 4},
              {16, 8, 4}, {1, 128, 4}, {1, 8, 124}, {5, 24, 12}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        zb_cuda_sm_plan_t p = {0, 0, 0};
        zb_err_t err;
        assert_int_equal(zb_cuda_sm_plan(&H100, ok[i].ranks, ok[i].k, &p, &err), ZB_OK);
        assert_int_equal(p.sm_per_rank, ok[i].k);
        assert_int_equal(p.sm_unused, ok[i].unused);
    }
}

/* expect ZB_EINVAL with `needle` in the message */
static void refused(const zb_cuda_sm_info_t *d, int ranks, int k, const char *needle)
{
    zb_cuda_sm_plan_t p = {-1, -1, -1};
    zb_err_t err;
    zb_err_clear(&err);
    assert_int_equal(zb_cuda_sm_plan(d, ranks, k, &p, &err), ZB_EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("message '%s' lacks '%s'", err.msg, needle);
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(p.sm_per_rank, -1); /* untouched on failure */
}

static void test_h100_refusals(void **state)
{
    (void)state;
    refused(&H100, 2, 12, "12 SMs per rank is not a multiple of 8");
    refused(&H100, 2, 66, "not a multiple of 8");
    refused(&H100, 4, 4, "not a multiple of 8");
    refused(&H100, 2, 72, "2 ranks x 72 SMs = 144 SMs, more than the GPU's 132 (at most 64");
    refused(&H100, 4, 40, "at most 32 SMs per rank");
    refused(&H100, 16, 16, "more than the GPU's 132");
    refused(&H100, 17, 0, "17 ranks on one GPU of 132 SMs, but it has at most 16 partitions");
    refused(&H100, 17, 8, "at most 16 partitions");
    refused(&H100, 0, 0, "0 ranks");
    refused(&H100, 2, -8, "negative");
    zb_cuda_sm_info_t bad = {.sm_count = 0, .min_partition = 8, .alignment = 8};
    refused(&bad, 1, 0, "bad device description");
    refused(NULL, 1, 0, "bad device description");
}

/* a minimum above the alignment (Ampere: at least 4, multiples of 2) */
static void test_min_above_alignment(void **state)
{
    (void)state;
    zb_cuda_sm_info_t a100;
    zb_err_t err;
    assert_int_equal(zb_cuda_sm_guideline(8, 0, 108, &a100, &err), ZB_OK);
    assert_int_equal(a100.min_partition, 4);
    assert_int_equal(a100.alignment, 2);
    refused(&a100, 2, 2, "below this GPU's smallest partition (4 SMs)");
    refused(&a100, 28, 0, "at most 27 partitions (at least 4 SMs each, multiples of 2)");
    zb_cuda_sm_plan_t p;
    assert_int_equal(zb_cuda_sm_plan(&a100, 5, 0, &p, &err), ZB_OK);
    assert_int_equal(p.sm_per_rank, 20); /* 108 / 5 = 21.6 -> 20 */
    assert_int_equal(zb_cuda_sm_plan(&a100, 27, 0, &p, &err), ZB_OK);
    assert_int_equal(p.sm_per_rank, 4);
    assert_int_equal(zb_cuda_sm_plan(&a100, 2, 6, &p, &err), ZB_OK);
    assert_int_equal(p.sm_unused, 96);
    /* min 5, alignment 2: the smallest legal partition is 6 */
    zb_cuda_sm_info_t odd = {.sm_count = 20, .min_partition = 5, .alignment = 2};
    assert_int_equal(zb_cuda_sm_plan(&odd, 3, 0, &p, &err), ZB_OK);
    assert_int_equal(p.sm_per_rank, 6);
    refused(&odd, 4, 0, "at most 3 partitions (at least 6 SMs each");
}

static void test_guideline(void **state)
{
    (void)state;
    zb_cuda_sm_info_t d;
    zb_err_t err;
    assert_int_equal(zb_cuda_sm_guideline(9, 0, 132, &d, &err), ZB_OK);
    assert_memory_equal(&d, &H100, sizeof d);
    assert_int_equal(zb_cuda_sm_guideline(10, 0, 148, &d, &err), ZB_OK);
    assert_int_equal(d.min_partition, 8);
    assert_int_equal(d.alignment, 8);
    assert_int_equal(zb_cuda_sm_guideline(7, 0, 80, &d, &err), ZB_OK);
    assert_int_equal(d.min_partition, 2);
    assert_int_equal(d.alignment, 2);
    assert_int_equal(zb_cuda_sm_guideline(6, 1, 28, &d, &err), ZB_OK);
    assert_int_equal(d.min_partition, 2);
    assert_int_equal(zb_cuda_sm_guideline(5, 2, 24, &d, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "compute capability 5.2 has no green contexts"));
    assert_int_equal(zb_cuda_sm_guideline(9, 0, 0, &d, &err), ZB_EINVAL);
}

static void test_describe(void **state)
{
    (void)state;
    zb_cuda_sm_plan_t p;
    zb_err_t err;
    char buf[96];
    assert_int_equal(zb_cuda_sm_plan(&H100, 4, 0, &p, &err), ZB_OK);
    zb_cuda_sm_plan_describe(&p, 132, buf, sizeof buf);
    assert_string_equal(buf, "4 ranks x 32 SMs (4 of 132 SMs unused)");
    assert_int_equal(zb_cuda_sm_plan(&H100, 1, 8, &p, &err), ZB_OK);
    zb_cuda_sm_plan_describe(&p, 132, buf, sizeof buf);
    assert_string_equal(buf, "1 rank x 8 SMs (124 of 132 SMs unused)");
    zb_cuda_sm_plan_describe(&p, 132, buf, 8); /* truncated, terminated */
    assert_int_equal(strlen(buf), 7);
}

/* No device visible (this machine, or CUDA_VISIBLE_DEVICES=): one line, ZB_EUNSUPPORTED, and
 * nothing created. Where a device is visible this is the GPU test's business. */
static void test_no_device(void **state)
{
    (void)state;
    int n = 0;
    zb_err_t err;
    assert_int_equal(zb_cuda_device_count(&n, &err), ZB_OK);
    if (n > 0)
        skip();
    zb_cuda_sm_info_t d;
    zb_err_clear(&err);
    assert_int_equal(zb_cuda_sm_query(0, &d, &err), ZB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, zb_cuda_built() ? "SM partitions: " : "built without CUDA"));
    assert_null(strchr(err.msg, '\n'));
    zb_cuda_partitions_t *p = (zb_cuda_partitions_t *)&d; /* must be overwritten */
    zb_err_clear(&err);
    assert_int_equal(zb_cuda_partitions_new(0, 2, 0, &p, &err), ZB_EUNSUPPORTED);
    assert_null(p);
    assert_true(err.msg[0] != '\0');
    zb_cuda_partitions_free(NULL); /* no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h100_even_split), cmocka_unit_test(test_h100_explicit),
        cmocka_unit_test(test_h100_refusals),   cmocka_unit_test(test_min_above_alignment),
        cmocka_unit_test(test_guideline),       cmocka_unit_test(test_describe),
        cmocka_unit_test(test_no_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
