/* Linear layer through sgemm. Forward, B and W are three independent products, so the split
 * backward costs nothing extra. The products are cut into fixed tiles shared over the current
 * worker group (gemm_tiled.c); the bias add splits rows and the bias gradient splits columns (each
 * column summed over the rows in order), so every thread count gives the same bits. */
#include "zbpp/nn.h"

#include <stddef.h>

#include "nn/gemm.h"
#include "nn/par.h"

typedef struct {
    float *out, *dbias;
    const float *bias, *dout;
    int N, OC;
    size_t rows;
} bias_t;

static void bias_add_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const bias_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->N, &lo, &hi);
    for (size_t n = lo; n < hi; n++) {
        float *o = a->out + n * a->OC;
        for (int j = 0; j < a->OC; j++)
            o[j] += a->bias[j];
    }
}

void zb_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC)
{
    /* out[N,OC] = inp[N,C] · weight[OC,C]^T (+ bias[OC]) */
    zb_sgemm_tiled_weight(0, 1, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
    if (bias) {
        bias_t a = {.out = out, .bias = bias, .N = N, .OC = OC,
                    .rows = zb_rows_per_chunk((size_t)OC)};
        zb_parallel_for(zb_div_up((size_t)N, a.rows), bias_add_chunk, &a);
    }
}

void zb_matmul_backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                              int OC)
{
    /* dinp[N,C] += dout[N,OC] · weight[OC,C] */
    zb_sgemm_tiled_weight(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
}

static void bias_grad_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const bias_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, ZB_CHUNK_COLS, (size_t)a->OC, &lo, &hi);
    float *dbias = a->dbias;
    for (int n = 0; n < a->N; n++) {
        const float *d = a->dout + (size_t)n * a->OC;
        for (size_t j = lo; j < hi; j++)
            dbias[j] += d[j];
    }
}

void zb_matmul_backward_weight(float *dweight, float *dbias, const float *dout, const float *inp,
                               int N, int C, int OC)
{
    /* dweight[OC,C] += dout[N,OC]^T · inp[N,C]; dbias[OC] += sum over rows of dout */
    zb_sgemm_tiled(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) {
        bias_t a = {.dbias = dbias, .dout = dout, .N = N, .OC = OC};
        zb_parallel_for(zb_div_up((size_t)OC, ZB_CHUNK_COLS), bias_grad_chunk, &a);
    }
}
