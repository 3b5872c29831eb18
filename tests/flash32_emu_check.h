/* What the emulated fp32-storage attention tests share (test_flash32_emulated.c: the FMA
 * kernels, test_flash_tf32_emulated.c: the TF32 ones; same contract): the materialised causal
 * attention in double, the relative error of a tensor, and one shape's check (two runs
 * bit-identical, every output written, each error within the kernels' bounds). Include after
 * flash_bounds.h and flash_emu_test.h, once. */
#ifndef ZBPP_TESTS_FLASH32_EMU_CHECK_H
#define ZBPP_TESTS_FLASH32_EMU_CHECK_H

#include <cuda_runtime_api.h>

/* The kernels under test (their emulated entry points) and their bounds at T. */
typedef struct {
    void (*forward)(cudaStream_t, float *, float *, const float *, int, int, int, int);
    size_t (*scratch_bytes)(int, int, int, int);
    void (*backward)(cudaStream_t, float *, void *, const float *, const float *, const float *,
                     const float *, int, int, int, int);
    flash_bounds_t (*bounds)(int T);
} flash32_kernels_t;

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

static void run_kernels(const flash32_kernels_t *k, run_t *r, const float *qkv, const float *dout,
                        int B, int T, int NH, int hs)
{
    size_t n1 = (size_t)B * T * NH * hs, nl = (size_t)B * NH * T;
    r->out = malloc(n1 * sizeof(float));
    r->dqkv = malloc(3 * n1 * sizeof(float));
    r->lse = malloc(nl * sizeof(float));
    void *scratch = malloc(k->scratch_bytes(B, T, NH, hs));
    /* NaN bytes: every entry must be written */
    memset(r->out, 0xff, n1 * sizeof(float));
    memset(r->dqkv, 0xff, 3 * n1 * sizeof(float));
    memset(r->lse, 0xff, nl * sizeof(float));
    k->forward(NULL, r->out, r->lse, qkv, B, T, NH, hs);
    k->backward(NULL, r->dqkv, scratch, dout, qkv, r->out, r->lse, B, T, NH, hs);
    assert_int_equal(zb_flash_emu_take_error(), 0);
    free(scratch);
}

/* One shape: both runs bit-identical, every error within k's bounds at T. */
static void check_shape(const flash32_kernels_t *k, int B, int T, int NH, int hs)
{
    int C = NH * hs;
    size_t n1 = (size_t)B * T * C, n3 = 3 * n1, rows = (size_t)B * T, nl = (size_t)B * NH * T;
    float *qkv = malloc(n3 * sizeof *qkv), *dout = malloc(n1 * sizeof *dout);
    for (size_t i = 0; i < n3; i++)
        qkv[i] = 1.5f * frand();
    for (size_t i = 0; i < n1; i++)
        dout[i] = frand();

    run_t r1, r2;
    run_kernels(k, &r1, qkv, dout, B, T, NH, hs);
    run_kernels(k, &r2, qkv, dout, B, T, NH, hs);
    assert_memory_equal(r1.out, r2.out, n1 * sizeof(float));
    assert_memory_equal(r1.dqkv, r2.dqkv, n3 * sizeof(float));
    assert_memory_equal(r1.lse, r2.lse, nl * sizeof(float));

    double *out = malloc(n1 * sizeof *out), *lse = malloc(nl * sizeof *lse),
           *dqkv = malloc(n3 * sizeof *dqkv);
    reference(out, lse, dqkv, qkv, dout, B, T, NH, hs);
    flash_bounds_t bd = k->bounds(T);
    expect("out", T, hs, err_cols(r1.out, out, rows, C, 0, C), bd.out);
    expect("dq", T, hs, err_cols(r1.dqkv, dqkv, rows, 3 * C, 0, C), bd.dq);
    expect("dk", T, hs, err_cols(r1.dqkv, dqkv, rows, 3 * C, C, C), bd.dk);
    expect("dv", T, hs, err_cols(r1.dqkv, dqkv, rows, 3 * C, 2 * C, C), bd.dv);
    double lse_err = 0.0;
    for (size_t i = 0; i < nl; i++) {
        double d = fabs((double)r1.lse[i] - lse[i]) / fmax(1.0, fabs(lse[i]));
        lse_err = isnan(d) || d > lse_err ? d : lse_err;
    }
    expect("lse", T, hs, lse_err, bd.lse);

    free(r1.out), free(r1.dqkv), free(r1.lse), free(r2.out), free(r2.dqkv), free(r2.lse);
    free(qkv), free(dout), free(out), free(lse), free(dqkv);
}

#endif
