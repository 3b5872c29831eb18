/* zbpp — partition the transformer blocks into contiguous stages balancing a cost model. */
#include <math.h>
#include <stdlib.h>

#include "zbpp/profile.h"

void zb_block_costs_flops(const zb_gpt2_config_t *cfg, int T, double *block, double *embed,
                          double *head)
{
    double C = cfg->channels, Vp = cfg->padded_vocab, t = T;
    /* per token, forward: qkv 6C², proj 2C², mlp 16C² -> 24C² mult-adds ~ 48C² flops; attention
     * scores and values 4TC (causal: half of that, but the kernel computes the full tile). */
    double blk = 48.0 * C * C + 4.0 * t * C;
    for (int l = 0; l < cfg->layers; l++)
        block[l] = 3.0 * blk; /* F + B + W ~ 3 x F */
    *head = 3.0 * (2.0 * C * Vp + 5.0 * Vp); /* LM head matmul + softmax/cross-entropy */
    *embed = 3.0 * C;
}

zb_status_t zb_partition(const zb_block_costs_t *c, int stages, int *first, zb_err_t *err)
{
    int L = c->layers;
    if (stages < 1 || L < 1)
        return zb_err_set(err, ZB_EINVAL, "partition: %d stages of %d blocks", stages, L);
    if (stages > L)
        return zb_err_set(err, ZB_EINVAL,
                          "more stages (%d) than transformer blocks (%d): use fewer ranks or "
                          "chunks, or a deeper model",
                          stages, L);
    size_t n = (size_t)(stages + 1) * (size_t)(L + 1);
    double *best = malloc(n * sizeof *best), *prefix = malloc((size_t)(L + 1) * sizeof *prefix);
    int *cut = malloc(n * sizeof *cut);
    if (!best || !prefix || !cut) {
        free(best), free(prefix), free(cut);
        return zb_err_set(err, ZB_ENOMEM, "partition: out of memory");
    }
    prefix[0] = 0;
    for (int l = 0; l < L; l++)
        prefix[l + 1] = prefix[l] + c->block[l];
#define AT(s, j) ((size_t)(s) * (size_t)(L + 1) + (size_t)(j))
    for (size_t i = 0; i < n; i++)
        best[i] = INFINITY, cut[i] = -1;
    best[AT(0, 0)] = 0;
    /* best[s][j]: smallest max-stage cost of blocks [0, j) cut into s stages */
    for (int s = 1; s <= stages; s++)
        for (int j = s; j <= L - (stages - s); j++)
            for (int i = s - 1; i < j; i++) {
                if (!isfinite(best[AT(s - 1, i)]))
                    continue;
                double cost = prefix[j] - prefix[i] + (i == 0 ? c->embed : 0) +
                              (j == L ? c->head : 0);
                double v = fmax(best[AT(s - 1, i)], cost);
                if (v < best[AT(s, j)])
                    best[AT(s, j)] = v, cut[AT(s, j)] = i;
            }
    first[stages] = L;
    for (int s = stages, j = L; s >= 1; s--) {
        j = cut[AT(s, j)];
        first[s - 1] = j;
    }
#undef AT
    free(best), free(prefix), free(cut);
    return ZB_OK;
}

zb_gpt2_span_t zb_partition_span(const int *first, int stages, int s)
{
    return (zb_gpt2_span_t){first[s], first[s + 1], s == 0, s == stages - 1};
}

int zb_partition_stage_of(const int *first, int stages, int layer)
{
    for (int s = 0; s < stages; s++)
        if (layer >= first[s] && layer < first[s + 1])
            return s;
    return -1;
}
