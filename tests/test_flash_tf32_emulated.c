/* The TF32 attention kernels themselves (src/cuda/flash_attn_tf32.cu, built as C++ for the CPU
 * with -DZB_FLASH_EMULATE and tests/flash_emulation.h: fibers for threads, shuffles, barriers,
 * cp.async, dynamic shared memory, the m16n8k8 TF32 mma and cvt.rna.tf32) on fp32 inputs,
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
#include "cuda/flash_attn_tf32.h"

#include "flash_bounds.h"
#include "flash_emu_test.h"



/* The materialised causal attention in double: out[B, T, C], lse[B, NH, T], dqkv[B, T, 3C]. */
static void reference(double *out, double *lse, double *dqkv, const float *qkv, const float *dout,
                      int B, int T, int NH, int hs)
{
    size_t C = (size_t)NH * hs, ld = 3 * C;
    double scale = 1.0 / sqrt((double)hs);
    double *p = malloc((size_t)T * sizeof *p);
    memset(dqkv, 0, (size_t)B * T * ld * sizeof *dqkv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * ld + (size_t)h * hs;
            double *dbase = dqkv + (size_t)b * T * ld + (size_t)h * hs;
            for (int t = 0; t < T; t++) {
                const float *q = base + t * ld, *dy = dout + ((size_t)b * T + t) * C + h * hs;
                double mx = -INFINITY, sum = 0.0, D = 0.0;
                for (int u = 0; u <= t; u++) {
                    double s = 0.0;
                    for (int i = 0; i < hs; i++)
                        s += (double)q[i] * base[u * ld + C + i];
                    p[u] = s * scale;
                    mx = fmax(mx, p[u]);
                }
                for (int u = 0; u <= t; u++)
                    sum += exp(p[u] - mx);
                double l = mx + log(sum);
                lse[((size_t)b * NH + h) * T + t] = l;
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++)
                    o[i] = 0.0;
                for (int u = 0; u <= t; u++) {
                    p[u] = exp(p[u] - l);
                    for (int i = 0; i < hs; i++)
                        o[i] += p[u] * base[u * ld + 2 * C + i];
                }
                for (int i = 0; i < hs; i++)
                    D += o[i] * dy[i];
                for (int u = 0; u <= t; u++) {
                    double dp = 0.0;
                    for (int i = 0; i < hs; i++) {
                        dp += (double)dy[i] * base[u * ld + 2 * C + i];
                        dbase[u * ld + 2 * C + i] += p[u] * dy[i];
                    }
                    double ds = p[u] * (dp - D) * scale;
                    for (int i = 0; i < hs; i++) {
                        dbase[t * ld + i] += ds * base[u * ld + C + i];
                        dbase[u * ld + C + i] += ds * q[i];
                    }
                }
            }
        }
    free(p);
}

/* max |a − b| / max |b| over columns off..off+C of rows of `stride` (NaN: infinite) */
static double err_cols(const float *a, const double *b, size_t rows, size_t stride, size_t off,
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
            scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
        }
    return scale > 0.0 ? err / scale : err;
}


typedef struct {
    float *out, *dqkv, *lse;
} run_t;

static void run_kernels(run_t *r, const float *qkv, const float *dout, int B, int T, int NH,
                        int hs)
{
    size_t n1 = (size_t)B * T * NH * hs, nl = (size_t)B * NH * T;
    r->out = malloc(n1 * sizeof(float));
    r->dqkv = malloc(3 * n1 * sizeof(float));
    r->lse = malloc(nl * sizeof(float));
    void *scratch = malloc(zb_cuk_flash_tf32_backward_scratch_bytes(B, T, NH, hs));
    /* NaN bytes: every entry must be written */
    memset(r->out, 0xff, n1 * sizeof(float));
    memset(r->dqkv, 0xff, 3 * n1 * sizeof(float));
    memset(r->lse, 0xff, nl * sizeof(float));
    zb_cuk_flash_tf32_forward(NULL, r->out, r->lse, qkv, B, T, NH, hs);
    zb_cuk_flash_tf32_backward(NULL, r->dqkv, scratch, dout, qkv, r->out, r->lse, B, T, NH, hs);
    assert_int_equal(zb_flash_emu_take_error(), 0);
    free(scratch);
}

static void check_shape(int B, int T, int NH, int hs)
{
    int C = NH * hs;
    size_t n1 = (size_t)B * T * C, n3 = 3 * n1, rows = (size_t)B * T, nl = (size_t)B * NH * T;
    float *qkv = malloc(n3 * sizeof *qkv), *dout = malloc(n1 * sizeof *dout);
    for (size_t i = 0; i < n3; i++)
        qkv[i] = 1.5f * frand();
    for (size_t i = 0; i < n1; i++)
        dout[i] = frand();

    run_t k, k2;
    run_kernels(&k, qkv, dout, B, T, NH, hs);
    run_kernels(&k2, qkv, dout, B, T, NH, hs);
    assert_memory_equal(k.out, k2.out, n1 * sizeof(float));
    assert_memory_equal(k.dqkv, k2.dqkv, n3 * sizeof(float));
    assert_memory_equal(k.lse, k2.lse, nl * sizeof(float));

    double *out = malloc(n1 * sizeof *out), *lse = malloc(nl * sizeof *lse),
           *dqkv = malloc(n3 * sizeof *dqkv);
    reference(out, lse, dqkv, qkv, dout, B, T, NH, hs);
    flash_bounds_t bd = flash_tf32_bounds(false);
    expect("out", T, hs, err_cols(k.out, out, rows, C, 0, C), bd.out);
    expect("dq", T, hs, err_cols(k.dqkv, dqkv, rows, 3 * C, 0, C), bd.dq);
    expect("dk", T, hs, err_cols(k.dqkv, dqkv, rows, 3 * C, C, C), bd.dk);
    expect("dv", T, hs, err_cols(k.dqkv, dqkv, rows, 3 * C, 2 * C, C), bd.dv);
    double lse_err = 0.0;
    for (size_t i = 0; i < nl; i++) {
        double d = fabs((double)k.lse[i] - lse[i]) / fmax(1.0, fabs(lse[i]));
        lse_err = isnan(d) || d > lse_err ? d : lse_err;
    }
    expect("lse", T, hs, lse_err, bd.lse);

    free(k.out), free(k.dqkv), free(k.lse), free(k2.out), free(k2.dqkv), free(k2.lse);
    free(qkv), free(dout), free(out), free(lse), free(dqkv);
}

/* One row, a partial tile, exactly one tile, several tiles with a partial last one. */
static void test_kernels_hs64(void **state)
{
    (void)state;
    static const int lengths[] = {1, 17, 64, 130};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        check_shape(2, lengths[i], 2, 64);
}

static void test_kernels_other_head_sizes(void **state)
{
    (void)state;
    check_shape(1, 130, 2, 16);
    check_shape(2, 17, 2, 32);
    check_shape(1, 100, 2, 32);
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
