/* Token + position embedding. */
#include "zbpp/nn.h"

#include <stddef.h>

void zb_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                        int T, int C)
{
    /* out[B,T,C], tokens[B,T], wte[V,C], wpe[maxT,C] */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            float *o = out + bt * C;
            const float *we = wte + (size_t)tokens[bt] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = we[c] + pe[c];
        }
}

void zb_encoder_backward_weight(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                int B, int T, int C)
{
    /* dwte[V,C], dwpe[maxT,C], dout[B,T,C]: rows visited in (b, t) order for fixed bits */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            const float *d = dout + bt * C;
            float *we = dwte + (size_t)tokens[bt] * C;
            float *pe = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                we[c] += d[c];
                pe[c] += d[c];
            }
        }
}
