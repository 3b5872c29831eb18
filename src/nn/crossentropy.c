/* Softmax cross-entropy over the real vocabulary V of a padded logits row of Vp columns.
 * Threads: rows are independent, so chunks of rows (any split gives the same bits). */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

#include "nn/fastmath.h"
#include "nn/par.h"

typedef struct {
    float *losses, *probs;
    const int *targets;
    float dloss;
    int N, V, Vp;
    size_t rows;
} ce_t;

static void ce_fwd_row(float *loss, float *row, int target, int V, int Vp)
{
    float target_logit = row[target];
    /* max and sum in 8 fixed lanes: vectorisable, and the order never changes */
    float lmax[8];
    for (int j = 0; j < 8; j++)
        lmax[j] = row[0];
    int V8 = V & ~7;
    for (int i = 0; i < V8; i += 8)
        for (int j = 0; j < 8; j++)
            lmax[j] = row[i + j] > lmax[j] ? row[i + j] : lmax[j];
    float maxv = lmax[0];
    for (int j = 1; j < 8; j++)
        maxv = lmax[j] > maxv ? lmax[j] : maxv;
    for (int i = V8; i < V; i++)
        maxv = row[i] > maxv ? row[i] : maxv;
    for (int i = 0; i < V; i++)
        row[i] = zb_fast_expf(row[i] - maxv);
    double lsum[8] = {0};
    for (int i = 0; i < V8; i += 8)
        for (int j = 0; j < 8; j++)
            lsum[j] += row[i + j];
    double sum = 0.0;
    for (int j = 0; j < 8; j++)
        sum += lsum[j];
    for (int i = V8; i < V; i++)
        sum += row[i];
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < V; i++)
        row[i] *= inv;
    for (int i = V; i < Vp; i++)
        row[i] = 0.0f;
    /* -log p[target] = log-sum-exp - logit, finite even when p[target] underflows */
    *loss = (float)((double)maxv + log(sum) - (double)target_logit);
}

static void ce_fwd_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const ce_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->N, &lo, &hi);
    for (size_t n = lo; n < hi; n++)
        ce_fwd_row(&a->losses[n], a->probs + n * a->Vp, a->targets[n], a->V, a->Vp);
}

void zb_crossentropy_forward(float *losses, float *probs, const int *targets, int N, int V,
                             int Vp)
{
    /* probs[N,Vp]: logits in, probabilities out (in place); losses[N]; targets[N] */
    ce_t a = {.losses = losses, .probs = probs, .targets = targets, .N = N, .V = V, .Vp = Vp,
              .rows = zb_rows_per_chunk((size_t)Vp)};
    zb_parallel_for(zb_div_up((size_t)N, a.rows), ce_fwd_chunk, &a);
}

static void ce_bwd_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const ce_t *a = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, a->rows, (size_t)a->N, &lo, &hi);
    for (size_t n = lo; n < hi; n++) {
        float *row = a->probs + n * a->Vp;
        row[a->targets[n]] -= 1.0f;
        for (int i = 0; i < a->V; i++)
            row[i] *= a->dloss;
        for (int i = a->V; i < a->Vp; i++)
            row[i] = 0.0f;
    }
}

void zb_crossentropy_backward(float *probs, const int *targets, float dloss, int N, int V, int Vp)
{
    /* probs[N,Vp] -> dlogits[N,Vp] in place */
    ce_t a = {.probs = probs, .targets = targets, .dloss = dloss, .N = N, .V = V, .Vp = Vp,
              .rows = zb_rows_per_chunk((size_t)Vp)};
    zb_parallel_for(zb_div_up((size_t)N, a.rows), ce_bwd_chunk, &a);
}
