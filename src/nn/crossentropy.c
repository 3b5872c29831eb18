/* Softmax cross-entropy over the real vocabulary V of a padded logits row of Vp columns. */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

#include "nn/fastmath.h"

void zb_crossentropy_forward(float *losses, float *probs, const int *targets, int N, int V,
                             int Vp)
{
    /* probs[N,Vp]: logits in, probabilities out (in place); losses[N]; targets[N] */
    for (int n = 0; n < N; n++) {
        float *row = probs + (size_t)n * Vp;
        float target_logit = row[targets[n]];
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
        losses[n] = (float)((double)maxv + log(sum) - (double)target_logit);
    }
}

void zb_crossentropy_backward(float *probs, const int *targets, float dloss, int N, int V, int Vp)
{
    /* probs[N,Vp] -> dlogits[N,Vp] in place */
    for (int n = 0; n < N; n++) {
        float *row = probs + (size_t)n * Vp;
        row[targets[n]] -= 1.0f;
        for (int i = 0; i < V; i++)
            row[i] *= dloss;
        for (int i = V; i < Vp; i++)
            row[i] = 0.0f;
    }
}
