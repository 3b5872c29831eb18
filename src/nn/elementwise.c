/* Elementwise ops: GELU (tanh form, as GPT-2) and the residual add. */
#include "zbpp/nn.h"

#include <math.h>

#include "nn/fastmath.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

void zb_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + zb_fast_tanhf(u));
    }
}

void zb_gelu_backward_input(float *dinp, const float *inp, const float *dout, size_t n)
{
    /* d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u' */
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = zb_fast_tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * sech2 * du) * dout[i];
    }
}

void zb_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void zb_residual_backward_input(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
