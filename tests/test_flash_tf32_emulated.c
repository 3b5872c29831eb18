/* The TF32 attention kernels themselves (src/cuda/flash_attn_tf32.cu, built as C++ for the CPU
 * with -DZB_FLASH_EMULATE and tests/flash_emulation.h: fibers for threads, shuffles, barriers,
 * cp.async, dynamic shared memory, the m16n8k8 TF32 mma) on fp32 inputs,
 * against the materialised attention computed in double on the host: out, dq, dk, dv within
 * tests/flash_bounds.h's flash_tf32_bounds (8 u_tf32 relative to the largest entry), lse within
 * its bound; every output written (NaN-filled first), two runs bit-identical, and an
 * unsupported head size or an empty shape refused as a launch error. A kernel that skipped the
 * TF32 rounding would still pass here; the GPU test (test_cuda_gpu_flash) checks the products
 * really round (an fp32-exact result is refused there). Skipped (77) where the emulation is not
 * built (no CUDA headers). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_FLASH_EMU
int main(void)
{
    printf("skipped: the flash-attention emulation needs the CUDA toolkit's headers\n");
    return 77;
}
#else

/* the emulated kernels' entry points (tests/flash_emulation.h renames them) */
#define zb_cuk_flash_tf32_supported zb_flash_tf32_emu_supported
#define zb_cuk_flash_tf32_forward zb_flash_tf32_emu_forward
#define zb_cuk_flash_tf32_backward_scratch_bytes zb_flash_tf32_emu_backward_scratch_bytes
#define zb_cuk_flash_tf32_backward zb_flash_tf32_emu_backward
#define zb_cuk_flash_3xtf32_forward zb_flash_3xtf32_emu_forward
#define zb_cuk_flash_3xtf32_backward zb_flash_3xtf32_emu_backward
#include "cuda/flash_attn_tf32.h"

#include "flash_bounds.h"
#include "flash_emu_test.h"
#include "flash32_emu_check.h"

static flash_bounds_t bounds(int T)
{
    (void)T;
    return flash_tf32_bounds(false);
}
static const flash32_kernels_t KERNELS = {zb_cuk_flash_tf32_forward,
                                          zb_cuk_flash_tf32_backward_scratch_bytes,
                                          zb_cuk_flash_tf32_backward, bounds};

static flash_bounds_t bounds_3x(int T)
{
    return flash_3xtf32_bounds(T, true, false);
}
static const flash32_kernels_t KERNELS_3X = {zb_cuk_flash_3xtf32_forward,
                                             zb_cuk_flash_tf32_backward_scratch_bytes,
                                             zb_cuk_flash_3xtf32_backward, bounds_3x};

/* One row, a partial tile, exactly one tile, several tiles with a partial last one. */
static void check_hs64(const flash32_kernels_t *k)
{
    static const int lengths[] = {1, 17, 64, 130};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        check_shape(k, 2, lengths[i], 2, 64);
}

static void check_other_head_sizes(const flash32_kernels_t *k)
{
    check_shape(k, 1, 130, 2, 16);
    check_shape(k, 2, 17, 2, 32);
    check_shape(k, 1, 100, 2, 32);
}

static void test_kernels_hs64(void **state)
{
    (void)state;
    check_hs64(&KERNELS);
}

static void test_kernels_other_head_sizes(void **state)
{
    (void)state;
    check_other_head_sizes(&KERNELS);
}

/* 3xTF32 within fp32-level bounds (flash_3xtf32_bounds), ~100x tighter than TF32's. */
static void test_3xtf32_hs64(void **state)
{
    (void)state;
    check_hs64(&KERNELS_3X);
}

static void test_3xtf32_other_head_sizes(void **state)
{
    (void)state;
    check_other_head_sizes(&KERNELS_3X);
}

/* A NaN in the inputs reaches the outputs it feeds and no others: CUDA's canonical NaN
 * (0x7fffffff) is the pattern the TF32 rounding's add would carry into the sign bit (±0). At
 * T 17, hs 16 (one head): a NaN in V's row 3 reaches out's column 0 from row 3 on; one in Q's
 * row 7 every column of out's row 7 and no other row; one in dO's row 5 every column of dQ's row
 * 5 (through D and dS) and no other row. (V's NaN also reaches column 0 of the rows before 3: a
 * masked score is a probability of 0 in the tile's product, and 0 · NaN is NaN.) */
static int row_has_nan(const float *x, size_t row, size_t stride, size_t off, int cols, int all)
{
    int nans = 0;
    for (int c = 0; c < cols; c++)
        nans += isnan(x[row * stride + off + c]);
    return all ? nans == cols : nans > 0;
}

static void check_nan_propagates(const flash32_kernels_t *k)
{
    enum { T = 17, HS = 16, LD = 3 * HS };
    const uint32_t canonical = 0x7fffffffu;
    float nan, qkv[T * LD], dout[T * HS];
    memcpy(&nan, &canonical, sizeof nan);
    for (int where = 0; where < 3; where++) {
        for (int i = 0; i < T * LD; i++)
            qkv[i] = 1.5f * frand();
        for (int i = 0; i < T * HS; i++)
            dout[i] = frand();
        if (where == 0)
            qkv[3 * LD + 2 * HS] = nan; /* V[3][0] */
        else if (where == 1)
            qkv[7 * LD] = nan; /* Q[7][0] */
        else
            dout[5 * HS] = nan; /* dO[5][0] */
        run_t r;
        run_kernels(k, &r, qkv, dout, 1, T, 1, HS);
        for (int t = 0; t < T; t++) {
            if (where == 0) {
                if (t >= 3)
                    assert_true(isnan(r.out[t * HS]));
                assert_false(row_has_nan(r.out, t, HS, 1, HS - 1, 0));
            } else if (where == 1) {
                assert_int_equal(row_has_nan(r.out, t, HS, 0, HS, 1), t == 7);
                assert_int_equal(row_has_nan(r.out, t, HS, 0, HS, 0), t == 7);
            } else {
                assert_false(row_has_nan(r.out, t, HS, 0, HS, 0));
                assert_int_equal(row_has_nan(r.dqkv, t, LD, 0, HS, 1), t == 5);
                assert_int_equal(row_has_nan(r.dqkv, t, LD, 0, HS, 0), t == 5);
            }
        }
        free(r.out), free(r.dqkv), free(r.lse);
    }
}

static void test_nan_propagates(void **state)
{
    (void)state;
    check_nan_propagates(&KERNELS);
    check_nan_propagates(&KERNELS_3X);
}

static void test_refused_shapes(void **state)
{
    (void)state;
    assert_true(zb_cuk_flash_tf32_supported(16) && zb_cuk_flash_tf32_supported(64));
    assert_false(zb_cuk_flash_tf32_supported(128)); /* the fp32 kernel serves it */
    assert_false(zb_cuk_flash_tf32_supported(48));
    zb_cuk_flash_tf32_forward(NULL, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash_tf32_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 1, 96);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash_tf32_forward(NULL, NULL, NULL, NULL, 1, 0, 1, 64);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash_3xtf32_forward(NULL, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash_3xtf32_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 16, 1, 64);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_hs64),
        cmocka_unit_test(test_kernels_other_head_sizes),
        cmocka_unit_test(test_3xtf32_hs64),
        cmocka_unit_test(test_3xtf32_other_head_sizes),
        cmocka_unit_test(test_nan_propagates),
        cmocka_unit_test(test_refused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
