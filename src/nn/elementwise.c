/* Elementwise ops: GELU (tanh form, as GPT-2) and the residual add, in chunks of ELEMS elements
 * over the current worker group (any split gives the same bits: nothing is reduced). */
#include "zbpp/nn.h"

#include <math.h>

#include "nn/fastmath.h"
#include "nn/par.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define ELEMS (4 * ZB_CHUNK_FLOATS)

typedef struct {
    float *out, *out2;
    const float *a, *b;
    size_t n;
} ew_t;

static void gelu_fwd_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const ew_t *e = ctx;
    size_t lo, hi;
    zb_chunk_range(c, ELEMS, e->n, &lo, &hi);
    float *out = e->out;
    const float *inp = e->a;
    for (size_t i = lo; i < hi; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + zb_fast_tanhf(u));
    }
}

void zb_gelu_forward(float *out, const float *inp, size_t n)
{
    ew_t e = {.out = out, .a = inp, .n = n};
    zb_parallel_for(zb_div_up(n, ELEMS), gelu_fwd_chunk, &e);
}

static void gelu_bwd_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const ew_t *e = ctx;
    size_t lo, hi;
    zb_chunk_range(c, ELEMS, e->n, &lo, &hi);
    float *dinp = e->out;
    const float *inp = e->a, *dout = e->b;
    /* d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u' */
    for (size_t i = lo; i < hi; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = zb_fast_tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * sech2 * du) * dout[i];
    }
}

void zb_gelu_backward_input(float *dinp, const float *inp, const float *dout, size_t n)
{
    ew_t e = {.out = dinp, .a = inp, .b = dout, .n = n};
    zb_parallel_for(zb_div_up(n, ELEMS), gelu_bwd_chunk, &e);
}

static void residual_fwd_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const ew_t *e = ctx;
    size_t lo, hi;
    zb_chunk_range(c, ELEMS, e->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        e->out[i] = e->a[i] + e->b[i];
}

void zb_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    ew_t e = {.out = out, .a = a, .b = b, .n = n};
    zb_parallel_for(zb_div_up(n, ELEMS), residual_fwd_chunk, &e);
}

static void residual_bwd_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const ew_t *e = ctx;
    size_t lo, hi;
    zb_chunk_range(c, ELEMS, e->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        e->out[i] += e->a[i];
        e->out2[i] += e->a[i];
    }
}

void zb_residual_backward_input(float *da, float *db, const float *dout, size_t n)
{
    ew_t e = {.out = da, .out2 = db, .a = dout, .n = n};
    zb_parallel_for(zb_div_up(n, ELEMS), residual_bwd_chunk, &e);
}
