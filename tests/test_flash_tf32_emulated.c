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
        cmocka_unit_test(test_refused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
