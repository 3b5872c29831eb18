/* Softmax cross-entropy over the real vocabulary V of a padded logits row of Vp columns. */
#include "zbpp/nn.h"

#include <math.h>
#include <stddef.h>

void zb_crossentropy_forward(float *losses, float *probs, const int *targets, int N, int V,
                             int Vp)
{
    /* probs[N,Vp]: logits in, probabilities out (in place); losses[N]; targets[N] */
    for (int n = 0; n < N; n++) {
        float *row = probs + (size_t)n * Vp;
        float target_logit = row[targets[n]];
        float maxv = row[0];
        for (int i = 1; i < V; i++)
            if (row[i] > maxv)
                maxv = row[i];
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            row[i] = expf(row[i] - maxv);
            sum += row[i];
        }
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
