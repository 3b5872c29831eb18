/* The fp32 LayerNorm kernels one warp a row (src/cuda/layernorm_rows.cu, built as C++ for the CPU
 * with -DZB_FLASH_EMULATE and tests/flash_emulation.h: fibers for threads, warp shuffles) against
 * the CPU's LayerNorm (include/zbpp/nn.h): the forward's output, mean and rstd and the input
 * gradient (accumulated into what dinp held) within 2e-6 relative, at row widths that take one
 * to eight float4's a lane (C 64, 100, 768, 1024) and a row count that leaves a block's last
 * warps idle; every row written (NaN-filled first). Shapes the kernels do not take (C not a
 * multiple of 4, over 1024, a misaligned pointer) are declined with nothing written, for the
 * block kernels of kernels.cu to run. Skipped (77) where the emulation is not built. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_FLASH_EMU
int main(void)
{
    printf("skipped: the kernel emulation needs the CUDA toolkit's headers\n");
    return 77;
}
#else

/* the emulated kernels' entry points (tests/flash_emulation.h renames them) */
#define zb_cuk_layernorm_rows_forward zb_layernorm_rows_emu_forward
#define zb_cuk_layernorm_rows_backward_input zb_layernorm_rows_emu_backward_input
#include "cuda/layernorm_rows.h"
#include "zbpp/nn.h"

enum { N = 7 }; /* two blocks of four rows: the second's last warp has no row */
#define TOL 2e-6

static float *filled(size_t n, unsigned seed, float scale, float shift)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = shift + scale * ((float)(seed >> 8) / (float)(1u << 24) - 0.5f);
    }
    return v;
}

/* 16-byte aligned, NaN-filled */
static float *nans(size_t n)
{
    float *v = aligned_alloc(16, (n * sizeof(float) + 15) / 16 * 16);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
    return v;
}

static float *aligned_copy(const float *src, size_t n)
{
    float *v = nans(n);
    memcpy(v, src, n * sizeof *v);
    return v;
}

static void expect_close(const char *what, int C, const float *got, const float *want, size_t n)
{
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]))
            fail_msg("C=%d %s: element %zu not written", C, what, i);
        err = fmax(err, fabs((double)got[i] - want[i]));
        ref = fmax(ref, fabs((double)want[i]));
    }
    print_message("  C=%4d %-14s max rel err %.3g\n", C, what, err / ref);
    if (!(err <= TOL * ref))
        fail_msg("C=%d %s: error %g over %g", C, what, err, TOL * ref);
}

static void check_width(int C)
{
    const size_t nc = (size_t)N * C;
    /* rows with a mean well away from 0 (the statistics' cancellation) */
    float *x0 = filled(nc, 11u + (unsigned)C, 4.0f, 3.0f), *w0 = filled(C, 5, 1.0f, 1.0f),
          *b0 = filled(C, 7, 0.5f, 0.0f), *d0 = filled(nc, 13, 2.0f, 0.0f),
          *g0 = filled(nc, 17, 0.1f, 0.0f);
    float *x = aligned_copy(x0, nc), *w = aligned_copy(w0, C), *b = aligned_copy(b0, C);
    float *out = nans(nc), *mean = nans(N), *rstd = nans(N);
    float *out_c = malloc(nc * sizeof *out_c), *mean_c = malloc(N * sizeof *mean_c),
          *rstd_c = malloc(N * sizeof *rstd_c);
    assert_true(zb_cuk_layernorm_rows_forward(NULL, out, mean, rstd, x, w, b, N, C));
    zb_layernorm_forward(out_c, mean_c, rstd_c, x0, w0, b0, N, C);
    expect_close("forward out", C, out, out_c, nc);
    expect_close("forward mean", C, mean, mean_c, N);
    expect_close("forward rstd", C, rstd, rstd_c, N);
    /* the input gradient adds to what dinp holds */
    float *d = aligned_copy(d0, nc), *g = aligned_copy(g0, nc), *g_c = malloc(nc * sizeof *g_c);
    memcpy(g_c, g0, nc * sizeof *g_c);
    assert_true(zb_cuk_layernorm_rows_backward_input(NULL, g, d, x, mean_c, rstd_c, w, N, C));
    zb_layernorm_backward_input(g_c, d0, x0, mean_c, rstd_c, w0, N, C);
    expect_close("backward input", C, g, g_c, nc);
    free(x0), free(w0), free(b0), free(d0), free(g0), free(x), free(w), free(b), free(out);
    free(mean), free(rstd), free(out_c), free(mean_c), free(rstd_c), free(d), free(g), free(g_c);
}

static void test_rows_match_the_cpu(void **state)
{
    (void)state;
    const int widths[] = {64, 100, 768, 1024}; /* 1, 1, 6 and 8 float4's a lane */
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
        check_width(widths[i]);
}

static void test_declined_shapes(void **state)
{
    (void)state;
    float *x = nans(8 * 2048 + 1), *w = nans(2048), *b = nans(2048), *out = nans(8 * 2048 + 1);
    float *mean = nans(8), *rstd = nans(8);
    /* C not a multiple of 4, C over 1024, a misaligned row, no rows */
    assert_false(zb_cuk_layernorm_rows_forward(NULL, out, mean, rstd, x, w, b, 8, 66));
    assert_false(zb_cuk_layernorm_rows_forward(NULL, out, mean, rstd, x, w, b, 8, 2048));
    assert_false(zb_cuk_layernorm_rows_forward(NULL, out + 1, mean, rstd, x, w, b, 8, 64));
    assert_false(zb_cuk_layernorm_rows_forward(NULL, out, mean, rstd, x, w, b + 1, 8, 64));
    assert_false(zb_cuk_layernorm_rows_forward(NULL, out, mean, rstd, x, w, b, 0, 64));
    assert_false(zb_cuk_layernorm_rows_backward_input(NULL, out + 1, x, x, mean, rstd, w, 8, 64));
    assert_false(zb_cuk_layernorm_rows_backward_input(NULL, out, x + 2, x, mean, rstd, w, 8, 64));
    assert_false(zb_cuk_layernorm_rows_backward_input(NULL, out, x, x, mean, rstd, w, 8, 1028));
    for (int i = 0; i < 8; i++) /* nothing written */
        assert_true(isnan(mean[i]) && isnan(out[i * 64]));
    free(x), free(w), free(b), free(out), free(mean), free(rstd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_match_the_cpu),
        cmocka_unit_test(test_declined_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
