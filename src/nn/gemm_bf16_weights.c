/* Weights rounded to bf16 once per step, not once per product (docs/compute.md, "bf16 on the
 * CPU"). With M microbatches a weight meets 2M products per step (each F and each B), and
 * rounding it is memory-bound work the size of the weight: at 128-row microbatches that was 16 %
 * of a bf16 product on AVX512-BF16, and more where AMX makes the product itself faster.
 *
 * The caller (a trainer's or a pipeline rank's step) opens a cache on its thread for the span in
 * which its weights do not change (the microbatches' F, B and W; not the optimizer, loads or
 * rollbacks) and closes it after. Opening marks every entry stale, so a weight is rounded again
 * at its first product of each span: the cache can never serve an old weight across steps. The
 * rounded copies are the same bits the uncached path rounds per product, so the products are
 * bit-identical with or without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gemm_bf16.h"
#include "zbpp/nn.h"

typedef struct {
    const float *src;
    int rows, cols, ld;
    uint16_t *bf16; /* rows x cols, dense */
    size_t cap;     /* elements allocated */
    int fresh;      /* rounded during the open span */
} entry_t;

struct zb_bf16_weight_cache {
    entry_t *e;
    int n, cap;
};

/* The cache open on this thread, if any. */
static __thread zb_bf16_weight_cache_t *open_cache;

static int cache_disabled(void)
{
    const char *v = getenv(ZB_CPU_BF16_NO_WEIGHT_CACHE_ENV);
    return v && *v && strcmp(v, "0");
}

int zb_bf16_weight_cache_used(void) { return zb_gemm_bf16_on() && !cache_disabled(); }

size_t zb_bf16_weight_cache_bytes(const zb_bf16_weight_cache_t *cache)
{
    size_t bytes = 0;
    for (int i = 0; cache && i < cache->n; i++)
        bytes += cache->e[i].cap * sizeof *cache->e[i].bf16;
    return bytes;
}

void zb_bf16_weight_cache_open(zb_bf16_weight_cache_t **cache)
{
    open_cache = NULL;
    if (!zb_bf16_weight_cache_used())
        return;
    if (!*cache && !(*cache = calloc(1, sizeof **cache)))
        return; /* no memory for the cache: products round per call, as without it */
    for (int i = 0; i < (*cache)->n; i++)
        (*cache)->e[i].fresh = 0;
    open_cache = *cache;
}

void zb_bf16_weight_cache_close(void) { open_cache = NULL; }

void zb_bf16_weight_cache_free(zb_bf16_weight_cache_t *cache)
{
    if (!cache)
        return;
    if (open_cache == cache)
        open_cache = NULL;
    for (int i = 0; i < cache->n; i++)
        free(cache->e[i].bf16);
    free(cache->e);
    free(cache);
}

static entry_t *find_or_add(zb_bf16_weight_cache_t *c, const float *w, int rows, int cols, int ld)
{
    for (int i = 0; i < c->n; i++) { /* a stage has a few dozen weights */
        entry_t *e = &c->e[i];
        if (e->src == w && e->rows == rows && e->cols == cols && e->ld == ld)
            return e;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        entry_t *grown = realloc(c->e, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        c->e = grown;
        c->cap = cap;
    }
    entry_t *e = &c->e[c->n++];
    *e = (entry_t){.src = w, .rows = rows, .cols = cols, .ld = ld};
    return e;
}

const uint16_t *zb_bf16_weight_rounded(const float *w, int rows, int cols, int ld)
{
    zb_bf16_weight_cache_t *c = open_cache;
    if (!c)
        return NULL;
    entry_t *e = find_or_add(c, w, rows, cols, ld);
    if (!e)
        return NULL;
    size_t need = (size_t)rows * (size_t)cols;
    if (e->cap < need) {
        free(e->bf16);
        e->cap = 0;
        e->fresh = 0;
        if (!(e->bf16 = malloc((need ? need : 1) * sizeof *e->bf16)))
            return NULL;
        e->cap = need;
    }
    if (!e->fresh) {
        zb_bf16_pack(e->bf16, w, rows, cols, ld);
        e->fresh = 1;
    }
    return e->bf16;
}
