/* Token + position embedding. Threads: the forward splits rows; the backward splits columns, each
 * chunk visiting every row in (b, t) order, so every thread count gives the same bits. */
#include "zbpp/nn.h"

#include <stddef.h>

#include "nn/par.h"

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int *tokens;
    int BT, T, C;
    size_t rows;
} enc_t;

static void enc_fwd_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const enc_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->BT, &lo, &hi);
    int C = a->C;
    for (size_t bt = lo; bt < hi; bt++) {
        float *o = a->out + bt * C;
        const float *we = a->wte + (size_t)a->tokens[bt] * C;
        const float *pe = a->wpe + (bt % (size_t)a->T) * C;
        for (int c = 0; c < C; c++)
            o[c] = we[c] + pe[c];
    }
}

void zb_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                        int T, int C)
{
    /* out[B,T,C], tokens[B,T], wte[V,C], wpe[maxT,C] */
    enc_t a = {.out = out, .tokens = tokens, .wte = wte, .wpe = wpe, .BT = B * T, .T = T, .C = C,
               .rows = zb_rows_per_chunk((size_t)C)};
    zb_parallel_for(zb_div_up((size_t)a.BT, a.rows), enc_fwd_chunk, &a);
}

static void enc_bwd_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const enc_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, ZB_CHUNK_COLS, (size_t)a->C, &lo, &hi);
    int C = a->C;
    for (int bt = 0; bt < a->BT; bt++) {
        const float *d = a->dout + (size_t)bt * C;
        float *we = a->dwte + (size_t)a->tokens[bt] * C;
        float *pe = a->dwpe + (size_t)(bt % a->T) * C;
        for (size_t c = lo; c < hi; c++) {
            we[c] += d[c];
            pe[c] += d[c];
        }
    }
}

void zb_encoder_backward_weight(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                int B, int T, int C)
{
    /* dwte[V,C], dwpe[maxT,C], dout[B,T,C]: rows visited in (b, t) order for fixed bits */
    enc_t a = {.dwte = dwte, .dwpe = dwpe, .dout = dout, .tokens = tokens, .BT = B * T, .T = T,
               .C = C};
    zb_parallel_for(zb_div_up((size_t)C, ZB_CHUNK_COLS), enc_bwd_chunk, &a);
}
