/* Causal multi-head self-attention. Per (sequence, head) it is two small products with sgemm on
 * strided views of qkv (no copies): scores = q·k^T (the full T×T; the masked half is cheap and
 * zeroed after the softmax) and out = att·v. */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

#include "nn/fastmath.h"
#include "nn/gemm.h"

size_t zb_attention_scratch_floats(int T)
{
    return (size_t)T * T;
}

void zb_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    /* qkv[B,T,3C] -> att[B,NH,T,T], out[B,T,C] */
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs;
            const float *k = q + C;
            const float *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;
            zb_sgemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, a, T);
            for (int t = 0; t < T; t++) {
                float *row = a + (size_t)t * T;
                float maxv = row[0];
                for (int u = 1; u <= t; u++)
                    if (row[u] > maxv)
                        maxv = row[u];
                float sum = 0.0f;
                for (int u = 0; u <= t; u++) {
                    row[u] = zb_fast_expf(row[u] - maxv);
                    sum += row[u];
                }
                float inv = 1.0f / sum;
                for (int u = 0; u <= t; u++)
                    row[u] *= inv;
                for (int u = t + 1; u < T; u++)
                    row[u] = 0.0f;
            }
            zb_sgemm(0, 0, T, hs, T, 1.0f, a, T, v, 3 * C, 0.0f, out + (size_t)b * T * C + h * hs,
                     C);
        }
}

void zb_attention_backward_input(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C, int NH)
{
    /* dqkv[B,T,3C] += ..., dout[B,T,C], qkv[B,T,3C], att[B,NH,T,T]; scratch[T,T] = datt */
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qoff = (size_t)b * T * 3 * C + (size_t)h * hs;
            const float *q = qkv + qoff, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hs;
            float *da = scratch;
            /* datt = dy · v^T ; dv += att^T · dy */
            zb_sgemm(0, 1, T, T, hs, 1.0f, dy, C, v, 3 * C, 0.0f, da, T);
            zb_sgemm(1, 0, T, hs, T, 1.0f, a, T, dy, C, 1.0f, dv, 3 * C);
            /* softmax backward, row by row: dpre = att · (datt - <att, datt>) · scale */
            for (int t = 0; t < T; t++) {
                const float *arow = a + (size_t)t * T;
                float *drow = da + (size_t)t * T;
                float dot = 0.0f;
                for (int u = 0; u <= t; u++)
                    dot += arow[u] * drow[u];
                for (int u = 0; u <= t; u++)
                    drow[u] = arow[u] * (drow[u] - dot) * scale;
                for (int u = t + 1; u < T; u++)
                    drow[u] = 0.0f;
            }
            /* dq += dpre · k ; dk += dpre^T · q */
            zb_sgemm(0, 0, T, hs, T, 1.0f, da, T, k, 3 * C, 1.0f, dq, 3 * C);
            zb_sgemm(1, 0, T, hs, T, 1.0f, da, T, q, 3 * C, 1.0f, dk, 3 * C);
        }
}
