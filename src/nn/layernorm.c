/* LayerNorm over channels. Statistics are summed in double (cheap at C <= a few thousand) so the
 * result does not depend on the magnitude of the mean; the stored mean/rstd are float.
 * Threads: forward and backward_input split rows; backward_weight splits columns, each chunk
 * summing its columns over all rows in order, so every thread count gives the same bits. */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

#include "nn/par.h"

#define LN_EPS 1e-5

typedef struct {
    float *out, *mean, *rstd, *dinp, *dweight, *dbias;
    const float *inp, *dout, *weight, *bias, *cmean, *crstd;
    int N, C;
    size_t rows; /* per chunk */
} ln_t;

/* One normalised row: the forward and the recompute share it, so they agree bit for bit. The
 * noinline keeps one compiled body (one contraction and vectorisation choice) for both. */
static __attribute__((noinline)) void apply_row(float *o, const float *x, float mf, float rf,
                                                const float *w, const float *b, int C)
{
    for (int c = 0; c < C; c++)
        o[c] = (x[c] - mf) * rf * w[c] + b[c];
}

static void ln_fwd_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const ln_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->N, &lo, &hi);
    int C = a->C;
    for (size_t n = lo; n < hi; n++) {
        const float *x = a->inp + n * C;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += x[c];
        double m = s / C;
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - m;
            v += d * d;
        }
        double r = 1.0 / sqrt(v / C + LN_EPS);
        float mf = (float)m, rf = (float)r;
        apply_row(a->out + n * C, x, mf, rf, a->weight, a->bias, C);
        a->mean[n] = mf;
        a->rstd[n] = rf;
    }
}

static void ln_apply_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const ln_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->N, &lo, &hi);
    for (size_t n = lo; n < hi; n++)
        apply_row(a->out + n * a->C, a->inp + n * a->C, a->cmean[n], a->crstd[n], a->weight,
                  a->bias, a->C);
}

void zb_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                        const float *weight, const float *bias, int N, int C)
{
    ln_t a = {.out = out, .inp = inp, .cmean = mean, .crstd = rstd, .weight = weight,
              .bias = bias, .N = N, .C = C, .rows = zb_rows_per_chunk((size_t)C)};
    zb_parallel_for(zb_div_up((size_t)N, a.rows), ln_apply_chunk, &a);
}

void zb_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C)
{
    /* out[N,C], mean[N], rstd[N], inp[N,C], weight[C], bias[C] */
    ln_t a = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .weight = weight, .bias = bias,
              .N = N, .C = C, .rows = zb_rows_per_chunk((size_t)C)};
    zb_parallel_for(zb_div_up((size_t)N, a.rows), ln_fwd_chunk, &a);
}

static void ln_bwd_input_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const ln_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->N, &lo, &hi);
    int C = a->C;
    const float *weight = a->weight;
    for (size_t n = lo; n < hi; n++) {
        const float *x = a->inp + n * C;
        const float *d = a->dout + n * C;
        float *dx = a->dinp + n * C;
        float m = a->cmean[n], r = a->crstd[n];
        float dnorm_mean = 0.0f, dnorm_xhat_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            float dnorm = weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_xhat_mean += dnorm * xhat;
        }
        dnorm_mean /= (float)C;
        dnorm_xhat_mean /= (float)C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            float dnorm = weight[c] * d[c];
            dx[c] += (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * r;
        }
    }
}

void zb_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                 const float *mean, const float *rstd, const float *weight, int N,
                                 int C)
{
    /* dinp[N,C] += rstd · (dnorm - mean(dnorm) - xhat · mean(dnorm · xhat)), dnorm = weight·dout */
    ln_t a = {.dinp = dinp, .dout = dout, .inp = inp, .cmean = mean, .crstd = rstd,
              .weight = weight, .N = N, .C = C, .rows = zb_rows_per_chunk((size_t)C)};
    zb_parallel_for(zb_div_up((size_t)N, a.rows), ln_bwd_input_chunk, &a);
}

static void ln_bwd_weight_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const ln_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, ZB_CHUNK_COLS, (size_t)a->C, &lo, &hi);
    int C = a->C;
    float *dweight = a->dweight, *dbias = a->dbias;
    for (int n = 0; n < a->N; n++) {
        const float *x = a->inp + (size_t)n * C;
        const float *d = a->dout + (size_t)n * C;
        float m = a->cmean[n], r = a->crstd[n];
        for (size_t c = lo; c < hi; c++) {
            dweight[c] += d[c] * ((x[c] - m) * r);
            dbias[c] += d[c];
        }
    }
}

void zb_layernorm_backward_weight(float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *mean, const float *rstd, int N,
                                  int C)
{
    /* dweight[C] += sum_n dout·xhat, dbias[C] += sum_n dout; rows in order for every column */
    ln_t a = {.dweight = dweight, .dbias = dbias, .dout = dout, .inp = inp, .cmean = mean,
              .crstd = rstd, .N = N, .C = C};
    zb_parallel_for(zb_div_up((size_t)C, ZB_CHUNK_COLS), ln_bwd_weight_chunk, &a);
}
