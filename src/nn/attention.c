/* Causal multi-head self-attention. Per (sequence, head) it is two small products with sgemm on
 * strided views of qkv (no copies): scores = q·k^T (the full T×T; the masked half is cheap and
 * zeroed after the softmax) and out = att·v. Threads: one chunk per (sequence, head), each writing
 * only its own slices, so every thread count gives the same bits. */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

#include "nn/fastmath.h"
#include "nn/gemm.h"
#include "nn/par.h"

typedef struct {
    float *out, *att, *dqkv, *scratch;
    const float *qkv, *dout, *catt;
    zb_workers_t *group; /* for the helpers' scratch */
    int T, C, NH;
} attn_t;

size_t zb_attention_scratch_floats(int T)
{
    return (size_t)T * T;
}

static void attn_fwd_head(void *ctx, size_t bh, int worker)
{
    (void)worker;
    const attn_t *p = ctx;
    int T = p->T, C = p->C, NH = p->NH, hs = C / NH;
    size_t b = bh / (size_t)NH, h = bh % (size_t)NH;
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = p->qkv + b * T * 3 * C + h * hs;
    const float *k = q + C;
    const float *v = q + 2 * C;
    float *a = p->att + bh * T * T;
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
    zb_sgemm(0, 0, T, hs, T, 1.0f, a, T, v, 3 * C, 0.0f, p->out + b * T * C + h * hs, C);
}

void zb_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    /* qkv[B,T,3C] -> att[B,NH,T,T], out[B,T,C] */
    attn_t p = {.out = out, .att = att, .qkv = qkv, .T = T, .C = C, .NH = NH};
    zb_parallel_for((size_t)B * NH, attn_fwd_head, &p);
}

static void attn_bwd_head(void *ctx, size_t bh, int worker)
{
    const attn_t *p = ctx;
    int T = p->T, C = p->C, NH = p->NH, hs = C / NH;
    size_t b = bh / (size_t)NH, h = bh % (size_t)NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t qoff = b * T * 3 * C + h * hs;
    const float *q = p->qkv + qoff, *k = q + C, *v = q + 2 * C;
    float *dq = p->dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
    const float *a = p->catt + bh * T * T;
    const float *dy = p->dout + b * T * C + h * hs;
    float *da = worker == 0 ? p->scratch : zb_workers_scratch(p->group, worker);
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

void zb_attention_backward_input(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C, int NH)
{
    /* dqkv[B,T,3C] += ..., dout[B,T,C], qkv[B,T,3C], att[B,NH,T,T]; scratch[T,T] = datt (the
     * caller's; the group's helpers use their own) */
    attn_t p = {.dqkv = dqkv, .scratch = scratch, .dout = dout, .qkv = qkv, .catt = att,
                .group = zb_workers_current(), .T = T, .C = C, .NH = NH};
    size_t heads = (size_t)B * NH;
    bool shared = zb_workers_current_count() > 1 &&
                  zb_workers_reserve(zb_attention_scratch_floats(T) * sizeof(float));
    if (shared) {
        zb_parallel_for(heads, attn_bwd_head, &p);
    } else {
        for (size_t bh = 0; bh < heads; bh++)
            attn_bwd_head(&p, bh, 0);
    }
}
