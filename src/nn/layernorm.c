/* LayerNorm over channels. Statistics are summed in double (cheap at C <= a few thousand) so the
 * result does not depend on the magnitude of the mean; the stored mean/rstd are float. */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

#define LN_EPS 1e-5

void zb_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C)
{
    /* out[N,C], mean[N], rstd[N], inp[N,C], weight[C], bias[C] */
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
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
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            o[c] = (x[c] - mf) * rf * weight[c] + bias[c];
        mean[n] = mf;
        rstd[n] = rf;
    }
}

void zb_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                 const float *mean, const float *rstd, const float *weight, int N,
                                 int C)
{
    /* dinp[N,C] += rstd · (dnorm - mean(dnorm) - xhat · mean(dnorm · xhat)), dnorm = weight·dout */
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], r = rstd[n];
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

void zb_layernorm_backward_weight(float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *mean, const float *rstd, int N,
                                  int C)
{
    /* dweight[C] += sum_n dout·xhat, dbias[C] += sum_n dout; rows in order */
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float m = mean[n], r = rstd[n];
        for (int c = 0; c < C; c++) {
            dweight[c] += d[c] * ((x[c] - m) * r);
            dbias[c] += d[c];
        }
    }
}
