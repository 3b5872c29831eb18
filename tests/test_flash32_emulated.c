/* The fp32 attention kernels themselves (src/cuda/flash_attn32.cu, built as C++ for the CPU with
 * -DZB_FLASH_EMULATE and tests/flash_emulation.h: fibers for threads, shuffles, barriers and
 * dynamic shared memory) on fp32 inputs, against the materialised attention computed in double
 * on the host: out, dq, dk, dv within tests/flash_bounds.h's flash32_bounds (4·√T·u relative to
 * the largest entry, u = 2^-24, at least 2e-6), lse within 2e-6; every output written (NaN-filled first), two runs
 * bit-identical, and an unsupported head size or an empty shape refused as a launch error. This
 * runs the kernels' indexing, masking, tile walks and barrier placement in CI; the GPU's own
 * exp2 / log2 (2 ulp) and timing are for the GPU test (test_cuda_gpu_flash).
 * Skipped (77) where the emulation is not built (no CUDA headers). */
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
#define zb_cuk_flash32_supported zb_flash32_emu_supported
#define zb_cuk_flash32_forward zb_flash32_emu_forward
#define zb_cuk_flash32_backward_scratch_bytes zb_flash32_emu_backward_scratch_bytes
#define zb_cuk_flash32_backward zb_flash32_emu_backward
#include "cuda/flash_attn32.h"

#include "flash_bounds.h"
#include "flash_emu_test.h"
#include "flash32_emu_check.h"

static flash_bounds_t bounds(int T) { return flash32_bounds(T, true, false); }
static const flash32_kernels_t KERNELS = {zb_cuk_flash32_forward,
                                          zb_cuk_flash32_backward_scratch_bytes,
                                          zb_cuk_flash32_backward, bounds};

/* One row, a partial tile, exactly one tile, several tiles with a partial last one. */
static void test_kernels_hs64(void **state)
{
    (void)state;
    static const int lengths[] = {1, 17, 64, 130};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        check_shape(&KERNELS, 2, lengths[i], 2, 64);
}

static void test_kernels_other_head_sizes(void **state)
{
    (void)state;
    check_shape(&KERNELS, 1, 130, 2, 16);
    check_shape(&KERNELS, 2, 17, 2, 32);
    check_shape(&KERNELS, 1, 100, 2, 32);
    check_shape(&KERNELS, 1, 70, 1, 128); /* its own, smaller tiles */
}

static void test_refused_shapes(void **state)
{
    (void)state;
    assert_true(zb_cuk_flash32_supported(16) && zb_cuk_flash32_supported(128));
    assert_false(zb_cuk_flash32_supported(48));
    zb_cuk_flash32_forward(NULL, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash32_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 1, 96);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash32_forward(NULL, NULL, NULL, NULL, 1, 0, 1, 64);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_hs64),
        cmocka_unit_test(test_kernels_other_head_sizes),
        cmocka_unit_test(test_refused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
