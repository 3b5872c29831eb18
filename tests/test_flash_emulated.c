/* The flash-attention kernels themselves (src/cuda/flash_attn.cu, built as C++ for the CPU with
 * -DZB_FLASH_EMULATE and tests/flash_emulation.h: fibers for threads, warp-wide mma / ldmatrix
 * / shuffles from the PTX ISA's fragment layouts) on bf16 inputs, against
 *  - the host model of the same algorithm and rounding points (tests/flash_reference.h's bf16
 *    entry points): within 2u of the largest entry (u = 2^-9; the two differ only in fp32
 *    summation order inside the products, which can move a bf16 rounding by one step);
 *  - the CPU's materialised attention: within tests/flash_bounds.h's bf16 bounds;
 * lse within 2e-6 of the model's, every dqkv entry written, two runs bit-identical, and an
 * unsupported head size or an empty shape refused as a launch error. This runs the kernels'
 * indexing, masking, tile walks, fragment plumbing and cp.async group accounting in CI; what it
 * cannot see is the GPU's timing, which the GPU test covers.
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
#define zb_cuk_flash_supported zb_flash_emu_supported
#define zb_cuk_flash_forward zb_flash_emu_forward
#define zb_cuk_flash_backward_scratch_bytes zb_flash_emu_backward_scratch_bytes
#define zb_cuk_flash_backward zb_flash_emu_backward
#include "cuda/flash_attn.h"

#include "flash_bounds.h"
#include "flash_emu_test.h"
#include "flash_reference.h"
#include "zbpp/nn.h"



/* max |a − b| / max |b| over columns off..off+C of rows of `stride` (NaN: infinite) */
static double err_cols(const float *a, const float *b, size_t rows, size_t stride, size_t off,
                       size_t C)
{
    double err = 0.0, scale = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++) {
            size_t i = r * stride + off + c;
            double d = fabs((double)a[i] - b[i]);
            if (isnan(d))
                return INFINITY;
            err = d > err ? d : err;
            scale = fabs((double)b[i]) > scale ? fabs((double)b[i]) : scale;
        }
    return scale > 0.0 ? err / scale : err;
}


typedef struct {
    uint16_t *out, *dqkv;
    float *lse;
} run_t;

static void run_kernels(run_t *r, const uint16_t *qkv, const uint16_t *dout, int B, int T, int NH,
                        int hs)
{
    size_t n1 = (size_t)B * T * NH * hs;
    r->out = malloc(n1 * 2);
    r->dqkv = malloc(3 * n1 * 2);
    r->lse = malloc((size_t)B * NH * T * sizeof *r->lse);
    void *scratch = malloc(zb_cuk_flash_backward_scratch_bytes(B, T, NH, hs));
    memset(r->dqkv, 0xff, 3 * n1 * 2); /* NaN bits: every entry must be written */
    zb_cuk_flash_forward(NULL, r->out, r->lse, qkv, B, T, NH, hs);
    zb_cuk_flash_backward(NULL, r->dqkv, scratch, dout, qkv, r->out, r->lse, B, T, NH, hs);
    assert_int_equal(zb_flash_emu_take_error(), 0);
    free(scratch);
}

static void run_free(run_t *r)
{
    free(r->out), free(r->dqkv), free(r->lse);
}

static void check_shape(int B, int T, int NH, int hs)
{
    int C = NH * hs;
    size_t n1 = (size_t)B * T * C, n3 = 3 * n1, rows = (size_t)B * T;
    uint16_t *qkv = malloc(n3 * 2), *dout = malloc(n1 * 2);
    for (size_t i = 0; i < n3; i++)
        qkv[i] = zb_bf16_from_f32(1.5f * frand());
    for (size_t i = 0; i < n1; i++)
        dout[i] = zb_bf16_from_f32(frand());

    run_t k, k2;
    run_kernels(&k, qkv, dout, B, T, NH, hs);
    run_kernels(&k2, qkv, dout, B, T, NH, hs);
    assert_memory_equal(k.out, k2.out, n1 * 2);
    assert_memory_equal(k.dqkv, k2.dqkv, n3 * 2);
    assert_memory_equal(k.lse, k2.lse, (size_t)B * NH * T * sizeof *k.lse);

    /* the host model (same tiles and rounding points) */
    uint16_t *mout = malloc(n1 * 2), *mdqkv = malloc(n3 * 2);
    float *mlse = malloc((size_t)B * NH * T * sizeof *mlse);
    assert_int_equal(flash_ref_forward_bf16(mout, mlse, qkv, B, T, NH, hs), 0);
    assert_int_equal(flash_ref_backward_bf16(mdqkv, dout, qkv, mout, mlse, B, T, NH, hs), 0);
    float *kout = flash_ref_widen(k.out, n1), *kd = flash_ref_widen(k.dqkv, n3);
    float *fout = flash_ref_widen(mout, n1), *fd = flash_ref_widen(mdqkv, n3);
    double tight = 2 * FLASH_BF16_U;
    expect("out/model", T, hs, err_cols(kout, fout, rows, C, 0, C), tight);
    expect("dq/model", T, hs, err_cols(kd, fd, rows, 3 * C, 0, C), tight);
    expect("dk/model", T, hs, err_cols(kd, fd, rows, 3 * C, C, C), tight);
    expect("dv/model", T, hs, err_cols(kd, fd, rows, 3 * C, 2 * C, C), tight);
    double lse_err = 0.0;
    for (size_t i = 0; i < (size_t)B * NH * T; i++) {
        double d = fabs((double)k.lse[i] - mlse[i]) / fmax(1.0, fabs((double)mlse[i]));
        lse_err = isnan(d) || d > lse_err ? d : lse_err;
    }
    expect("lse/model", T, hs, lse_err, 2e-6);

    /* the materialised attention on the same values */
    float *q = flash_ref_widen(qkv, n3), *dy = flash_ref_widen(dout, n1);
    float *att = malloc((size_t)B * NH * T * T * sizeof *att),
          *scratch = malloc(zb_attention_scratch_floats(T) * sizeof *scratch),
          *out = malloc(n1 * sizeof *out), *dqkv = calloc(n3, sizeof *dqkv);
    zb_attention_forward(out, att, q, B, T, C, NH);
    zb_attention_backward_input(dqkv, scratch, dy, q, att, B, T, C, NH);
    flash_bounds_t bd = flash_bounds(true);
    expect("out", T, hs, err_cols(kout, out, rows, C, 0, C), bd.out);
    expect("dq", T, hs, err_cols(kd, dqkv, rows, 3 * C, 0, C), bd.dq);
    expect("dk", T, hs, err_cols(kd, dqkv, rows, 3 * C, C, C), bd.dk);
    expect("dv", T, hs, err_cols(kd, dqkv, rows, 3 * C, 2 * C, C), bd.dv);

    run_free(&k), run_free(&k2);
    free(qkv), free(dout), free(mout), free(mdqkv), free(mlse), free(kout), free(kd), free(fout);
    free(fd), free(q), free(dy), free(att), free(scratch), free(out), free(dqkv);
}

/* Partial first and last tiles, several tiles, the tail rows of a warp past T. */
static void test_kernels_hs64(void **state)
{
    (void)state;
    static const int lengths[] = {1, 7, 65, 130};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        check_shape(2, lengths[i], 2, 64);
}

static void test_kernels_other_head_sizes(void **state)
{
    (void)state;
    check_shape(1, 65, 2, 16);
    check_shape(1, 100, 2, 32);
    check_shape(1, 70, 1, 128); /* its own, smaller tiles */
}

static void test_refused_shapes(void **state)
{
    (void)state;
    assert_false(zb_cuk_flash_supported(48));
    zb_cuk_flash_forward(NULL, NULL, NULL, NULL, 1, 16, 1, 48);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 1, 96);
    assert_int_not_equal(zb_flash_emu_take_error(), 0);
    zb_cuk_flash_forward(NULL, NULL, NULL, NULL, 1, 0, 1, 64);
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
