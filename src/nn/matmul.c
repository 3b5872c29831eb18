/* Linear layer through sgemm. Forward, B and W are three independent products, so the split
 * backward costs nothing extra. */
#include "zbpp/nn.h"

#include <stddef.h>

#include "nn/gemm.h"

void zb_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC)
{
    /* out[N,OC] = inp[N,C] · weight[OC,C]^T (+ bias[OC]) */
    zb_sgemm(0, 1, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
    if (bias)
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * OC;
            for (int j = 0; j < OC; j++)
                o[j] += bias[j];
        }
}

void zb_matmul_backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                              int OC)
{
    /* dinp[N,C] += dout[N,OC] · weight[OC,C] */
    zb_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
}

void zb_matmul_backward_weight(float *dweight, float *dbias, const float *dout, const float *inp,
                               int N, int C, int OC)
{
    /* dweight[OC,C] += dout[N,OC]^T · inp[N,C]; dbias[OC] += sum over rows of dout */
    zb_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int j = 0; j < OC; j++)
                dbias[j] += d[j];
        }
}
