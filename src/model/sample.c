/* Token sampling: greedy, temperature and top-k over a seeded splitmix64 stream (gpt2_infer.h).
 * The candidate order is fixed (index order, or logits descending with the lower id first on
 * ties for top-k), and the draw walks the cumulative weights in that order in double, so a seed
 * gives the same token on every machine that computes the same logits. */
#include "zbpp/gpt2_infer.h"

#include <math.h>
#include <stdlib.h>

zb_status_t zb_sampler_init(zb_sampler_t *s, float temperature, int top_k, int vocab,
                            uint64_t seed, zb_err_t *err)
{
    s->idx = NULL;
    s->w = NULL;
    if (!isfinite(temperature) || temperature < 0.0f)
        return zb_err_set(err, ZB_EINVAL, "temperature must be a finite number >= 0 (got %g)",
                          (double)temperature);
    if (vocab < 1)
        return zb_err_set(err, ZB_EINVAL, "sampler: vocabulary size %d < 1", vocab);
    if (top_k < 0 || top_k > vocab)
        return zb_err_set(err, ZB_EINVAL, "top-k must be in [0, %d] (0 = all tokens), got %d",
                          vocab, top_k);
    s->temperature = temperature;
    s->top_k = top_k;
    s->vocab = vocab;
    s->state = seed;
    s->idx = malloc((size_t)vocab * sizeof *s->idx);
    s->w = malloc((size_t)vocab * sizeof *s->w);
    if (!s->idx || !s->w) {
        zb_sampler_free(s);
        return zb_err_set(err, ZB_ENOMEM, "sampler: out of memory");
    }
    return ZB_OK;
}

void zb_sampler_free(zb_sampler_t *s)
{
    free(s->idx);
    free(s->w);
    s->idx = NULL;
    s->w = NULL;
}

static uint64_t splitmix64(uint64_t *st)
{
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Larger finite logit first; non-finite last; lower id first on ties. */
static int better(const float *logits, int a, int b)
{
    float x = logits[a], y = logits[b];
    int fa = isfinite(x), fb = isfinite(y);
    if (fa != fb)
        return fa;
    if (fa && x != y)
        return x > y;
    return a < b;
}

static int argmax(const float *logits, int V)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        if (better(logits, i, best))
            best = i;
    return best;
}

/* The k best ids into idx[0..k), best first: insertion into a sorted prefix (k is small in
 * practice; the cost is O(V·k) at worst). */
static void top_k(const float *logits, int V, int k, int *idx)
{
    int n = 0;
    for (int i = 0; i < V; i++) {
        if (n == k && !better(logits, i, idx[n - 1]))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && better(logits, i, idx[j - 1])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

int zb_sampler_pick(zb_sampler_t *s, const float *logits)
{
    int V = s->vocab;
    int best = argmax(logits, V);
    if (s->temperature == 0.0f || !isfinite(logits[best]))
        return isfinite(logits[best]) ? best : 0;
    int n = V;
    if (s->top_k > 0 && s->top_k < V) {
        n = s->top_k;
        top_k(logits, V, n, s->idx);
    } else {
        for (int i = 0; i < V; i++)
            s->idx[i] = i;
    }
    double maxv = logits[best], inv_t = 1.0 / s->temperature, total = 0.0;
    for (int i = 0; i < n; i++) {
        float l = logits[s->idx[i]];
        s->w[i] = isfinite(l) ? exp(((double)l - maxv) * inv_t) : 0.0;
        total += s->w[i];
    }
    /* u in [0, 1) with 53 random bits */
    double u = (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0);
    double target = u * total, cum = 0.0;
    int last = s->idx[0];
    for (int i = 0; i < n; i++) {
        if (s->w[i] <= 0.0)
            continue;
        cum += s->w[i];
        last = s->idx[i];
        if (cum > target)
            return last;
    }
    return last; /* rounding: the last candidate with weight */
}
