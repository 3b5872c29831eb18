/* The tiled flash-attention algorithm (tests/flash_reference.h, the host model of
 * src/cuda/flash_attn.cu) against the CPU's materialised attention (src/nn/attention.c):
 * forward, lse and all three gradients, at sequence lengths that leave partial tiles (T = 1, 7,
 * 65, 130), head sizes 16 and 64, and several tile walks (the kernel's, and smaller ones with
 * unequal query/key tiles so that diagonal tiles start mid-tile).
 *
 * fp32 (no rounding) and bf16 rounding at the kernel's points: within tests/flash_bounds.h's
 * bounds, which the GPU test (tests/test_cuda_gpu_flash.c) applies to the kernel. FLASH_VERBOSE=1
 * prints every error measured. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flash_bounds.h"
#include "flash_reference.h"
#include "zbpp/nn.h"

typedef struct {
    int br, bc;  /* forward and dQ tiles */
    int bk, brk; /* dK/dV: keys per tile, query rows per walked tile */
} tiles_t;

static const tiles_t kernel_tiles = {64, 64, 64, 64};
static const tiles_t small_tiles[] = {{16, 32, 32, 16}, {32, 16, 16, 48}, {1, 1, 1, 1}};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static float *rnd(size_t n, float scale, bool bf16)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = bf16 ? zb_bf16_round(frand() * scale) : frand() * scale;
    return x;
}

/* max |a − b| / max |b| over one part (q, k or v: stride 3C) or a [B·T, C] tensor (stride C) */
static double rel_err_cols(const float *a, const float *b, size_t rows, size_t stride,
                           size_t off, size_t C)
{
    double err = 0.0, scale = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++) {
            size_t i = r * stride + off + c;
            double d = fabs((double)a[i] - b[i]), m = fabs((double)b[i]);
            if (isnan(d))
                return INFINITY; /* an entry not written, or NaN produced */
            err = d > err ? d : err;
            scale = m > scale ? m : scale;
        }
    return scale > 0.0 ? err / scale : err;
}

static void expect_within(const char *what, double err, double tol, const flash_ref_shape_t *s,
                          const tiles_t *t)
{
    if (getenv("FLASH_VERBOSE"))
        printf("%-4s T %3d hs %3d %s tiles %2d/%2d %2d/%2d err %.3g\n", what, s->T, s->hs,
               s->bf16 ? "bf16" : "fp32", t->br, t->bc, t->bk, t->brk, err);
    if (!(err <= tol))
        fail_msg("%s (B %d T %d NH %d hs %d%s, tiles %d/%d %d/%d): relative error %g > %g", what,
                 s->B, s->T, s->NH, s->hs, s->bf16 ? " bf16" : "", t->br, t->bc, t->bk, t->brk,
                 err, tol);
}

static void check_case(const flash_ref_shape_t *s, const tiles_t *t)
{
    int B = s->B, T = s->T, NH = s->NH, C = NH * s->hs;
    size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, rows = (size_t)B * T;
    /* bf16: the inputs are bf16 values (as the GPU stores them); both sides read the same */
    float *qkv = rnd(n3, 1.5f, s->bf16), *dout = rnd(n1, 1.0f, s->bf16);
    float *att = malloc((size_t)B * NH * T * T * sizeof *att);
    float *scratch = malloc(zb_attention_scratch_floats(T) * sizeof *scratch);
    float *out = malloc(n1 * sizeof *out), *fout = malloc(n1 * sizeof *fout);
    float *lse = malloc((size_t)B * NH * T * sizeof *lse);
    float *dqkv = calloc(n3, sizeof *dqkv), *fdqkv = malloc(n3 * sizeof *fdqkv);
    for (size_t i = 0; i < n3; i++)
        fdqkv[i] = NAN; /* "written, not accumulated": every entry must be overwritten */

    zb_attention_forward(out, att, qkv, B, T, C, NH);
    zb_attention_backward_input(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    flash_ref_forward(s, fout, lse, qkv, t->br, t->bc);
    flash_ref_backward(s, fdqkv, dout, qkv, fout, lse, t->bk, t->brk, t->br, t->bc);

    flash_bounds_t bd = flash_bounds(s->bf16);
    expect_within("out", rel_err_cols(fout, out, rows, C, 0, C), bd.out, s, t);
    expect_within("dq", rel_err_cols(fdqkv, dqkv, rows, 3 * C, 0, C), bd.dq, s, t);
    expect_within("dk", rel_err_cols(fdqkv, dqkv, rows, 3 * C, C, C), bd.dk, s, t);
    expect_within("dv", rel_err_cols(fdqkv, dqkv, rows, 3 * C, 2 * C, C), bd.dv, s, t);
    double lse_err = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int r = 0; r < T; r++) {
                double want = flash_ref_lse_exact(s, qkv, b, h, r);
                double d = fabs(lse[((size_t)b * NH + h) * T + r] - want) / fmax(1.0, fabs(want));
                lse_err = d > lse_err ? d : lse_err;
            }
    expect_within("lse", lse_err, bd.lse, s, t);

    free(qkv), free(dout), free(att), free(scratch), free(out), free(fout), free(lse);
    free(dqkv), free(fdqkv);
}

static const int lengths[] = {1, 7, 65, 130};
static const int head_sizes[] = {16, 64};

static void run_all(bool bf16, bool every_tiling)
{
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        for (size_t j = 0; j < sizeof head_sizes / sizeof *head_sizes; j++) {
            flash_ref_shape_t s = {.B = 2, .T = lengths[i], .NH = 2, .hs = head_sizes[j],
                                   .bf16 = bf16};
            check_case(&s, &kernel_tiles);
            if (!every_tiling)
                continue;
            for (size_t k = 0; k < sizeof small_tiles / sizeof *small_tiles; k++)
                check_case(&s, &small_tiles[k]);
        }
}

static void test_fp32_matches_materialised(void **state)
{
    (void)state;
    run_all(false, true);
}

static void test_bf16_rounding_within_bounds(void **state)
{
    (void)state;
    run_all(true, false);
}

/* The bf16-storage entry points (a host stand-in of the kernels) with the kernel's tiles for
 * every head size, hs 128's smaller ones included, against the materialised attention on the
 * same values. */
static void test_bf16_storage_entry_points(void **state)
{
    (void)state;
    static const int hs_list[] = {16, 32, 64, 128};
    for (size_t j = 0; j < 4; j++) {
        int B = 2, T = 100, NH = 2, hs = hs_list[j], C = NH * hs;
        size_t n1 = (size_t)B * T * C, n3 = 3 * n1, rows = (size_t)B * T;
        float *qkv = rnd(n3, 1.5f, true), *dout = rnd(n1, 1.0f, true);
        uint16_t *qkv16 = malloc(n3 * 2), *dout16 = malloc(n1 * 2), *out16 = malloc(n1 * 2),
                 *dqkv16 = malloc(n3 * 2);
        flash_ref_narrow(qkv16, qkv, n3);
        flash_ref_narrow(dout16, dout, n1);
        memset(dqkv16, 0xff, n3 * 2); /* NaN bits: every entry must be written */
        float *lse = malloc((size_t)B * NH * T * sizeof *lse);
        assert_int_equal(flash_ref_forward_bf16(out16, lse, qkv16, B, T, NH, hs), 0);
        assert_int_equal(flash_ref_backward_bf16(dqkv16, dout16, qkv16, out16, lse, B, T, NH, hs),
                         0);
        float *att = malloc((size_t)B * NH * T * T * sizeof *att),
              *scratch = malloc(zb_attention_scratch_floats(T) * sizeof *scratch),
              *out = malloc(n1 * sizeof *out), *dqkv = calloc(n3, sizeof *dqkv);
        zb_attention_forward(out, att, qkv, B, T, C, NH);
        zb_attention_backward_input(dqkv, scratch, dout, qkv, att, B, T, C, NH);
        float *fout = flash_ref_widen(out16, n1), *fdqkv = flash_ref_widen(dqkv16, n3);
        flash_ref_shape_t s = {.B = B, .T = T, .NH = NH, .hs = hs, .bf16 = true};
        tiles_t t = {0, 0, 0, 0};
        flash_bounds_t bd = flash_bounds(true);
        expect_within("out", rel_err_cols(fout, out, rows, C, 0, C), bd.out, &s, &t);
        expect_within("dq", rel_err_cols(fdqkv, dqkv, rows, 3 * C, 0, C), bd.dq, &s, &t);
        expect_within("dk", rel_err_cols(fdqkv, dqkv, rows, 3 * C, C, C), bd.dk, &s, &t);
        expect_within("dv", rel_err_cols(fdqkv, dqkv, rows, 3 * C, 2 * C, C), bd.dv, &s, &t);
        free(qkv), free(dout), free(qkv16), free(dout16), free(out16), free(dqkv16), free(lse);
        free(att), free(scratch), free(out), free(dqkv), free(fout), free(fdqkv);
    }
}

/* The bounds are not vacuous: a reference that forgets the causal mask on the diagonal tile
 * (a key one past the row let through) is caught. */
static void test_bounds_catch_a_mask_bug(void **state)
{
    (void)state;
    flash_ref_shape_t s = {.B = 1, .T = 65, .NH = 2, .hs = 16, .bf16 = true};
    int C = s.NH * s.hs;
    size_t n1 = (size_t)s.T * C, n3 = 3 * n1;
    float *qkv = rnd(n3, 1.5f, true), *att = malloc((size_t)s.NH * s.T * s.T * sizeof *att);
    float *out = malloc(n1 * sizeof *out), *fout = malloc(n1 * sizeof *fout);
    float *lse = malloc((size_t)s.NH * s.T * sizeof *lse);
    zb_attention_forward(out, att, qkv, s.B, s.T, C, s.NH);
    /* the unmasked model: key `row + 1` visible, i.e. queries shifted one row down */
    float *shifted = malloc(n3 * sizeof *shifted);
    memcpy(shifted, qkv, n3 * sizeof *shifted);
    for (int r = 0; r + 1 < s.T; r++) /* k, v of row r+1 moved to row r: row r sees key r+1 */
        memcpy(shifted + (size_t)r * 3 * C + C, qkv + (size_t)(r + 1) * 3 * C + C,
               2 * (size_t)C * sizeof *shifted);
    flash_ref_forward(&s, fout, lse, shifted, 64, 64);
    double err = rel_err_cols(fout, out, (size_t)s.T, C, 0, C);
    if (!(err > flash_bounds(true).out))
        fail_msg("a mask one key off gave relative error %g, within the bound %g", err,
                 flash_bounds(true).out);
    free(qkv), free(att), free(out), free(fout), free(lse), free(shifted);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_matches_materialised),
        cmocka_unit_test(test_bf16_rounding_within_bounds),
        cmocka_unit_test(test_bf16_storage_entry_points),
        cmocka_unit_test(test_bounds_catch_a_mask_bug),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
