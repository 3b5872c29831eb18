/* Stage-local parameter buffers: the same tensor-major llm.c layout as a whole model, but only
 * the blocks (and the embedding / final LayerNorm tensors) that a rank's stages use. A global
 * block index l maps to a local slot through p->slot; everything that walks a buffer by norm
 * unit or by tensor slice goes through the helpers here, so whole and partial buffers are
 * handled by one code path. */
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "zbpp/gpt2.h"

static bool per_layer(int tensor)
{
    return tensor >= ZB_LN1W && tensor <= ZB_FCPROJB;
}

/* Lay out p->data for the holdings already in p (cfg, slot, held_layers, which of WTE/WPE/LNF
 * are wanted) and allocate it zeroed. */
static zb_status_t allocate(zb_gpt2_params_t *p, bool wte, bool wpe, bool lnf, zb_err_t *err)
{
    size_t full[ZB_GPT2_NUM_TENSORS];
    zb_gpt2_tensor_sizes(&p->cfg, full);
    p->count = 0;
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++) {
        bool held = per_layer(i)               ? p->held_layers > 0
                    : i == ZB_WTE              ? wte
                    : i == ZB_WPE              ? wpe
                                               : lnf;
        p->sizes[i] = !held ? 0
                      : per_layer(i) ? full[i] / (size_t)p->cfg.layers * (size_t)p->held_layers
                                     : full[i];
        p->count += p->sizes[i];
    }
    p->data = calloc(p->count ? p->count : 1, sizeof(float));
    if (!p->data)
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate %zu parameters (%.1f MB)", p->count,
                          p->count * 4.0 / 1e6);
    zb_gpt2_account(p, p->count * sizeof(float));
    float *ptr = p->data;
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++) {
        p->t[i] = p->sizes[i] ? ptr : NULL;
        ptr += p->sizes[i];
    }
    return ZB_OK;
}

zb_status_t zb_gpt2_params_alloc_part(zb_gpt2_params_t *p, const zb_gpt2_config_t *cfg,
                                      const zb_gpt2_span_t *spans, int n, zb_err_t *err)
{
    memset(p, 0, sizeof *p);
    zb_status_t st = zb_gpt2_config_check(cfg, err);
    if (st != ZB_OK)
        return st;
    p->cfg = *cfg;
    p->slot = malloc((size_t)cfg->layers * sizeof *p->slot);
    if (!p->slot)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage-local parameter map");
    bool wte = false, wpe = false, lnf = false;
    for (int l = 0; l < cfg->layers; l++)
        p->slot[l] = -1;
    for (int k = 0; k < n; k++) {
        const zb_gpt2_span_t *s = &spans[k];
        if (s->layer_begin < 0 || s->layer_begin > s->layer_end || s->layer_end > cfg->layers) {
            zb_gpt2_params_free(p);
            return zb_err_set(err, ZB_EINVAL, "gpt2 stage: layers [%d, %d) not within [0, %d)",
                              s->layer_begin, s->layer_end, cfg->layers);
        }
        for (int l = s->layer_begin; l < s->layer_end; l++)
            p->slot[l] = 0; /* held; numbered below in global order */
        wte |= s->embed || s->head;
        wpe |= s->embed;
        lnf |= s->head;
    }
    for (int l = 0; l < cfg->layers; l++)
        if (p->slot[l] == 0)
            p->slot[l] = p->held_layers++;
    if ((st = allocate(p, wte, wpe, lnf, err)) != ZB_OK)
        zb_gpt2_params_free(p);
    return st;
}

zb_status_t zb_gpt2_params_alloc_like(zb_gpt2_params_t *p, const zb_gpt2_params_t *shape,
                                      zb_err_t *err)
{
    if (!shape->slot)
        return zb_gpt2_params_alloc(p, &shape->cfg, err);
    memset(p, 0, sizeof *p);
    p->cfg = shape->cfg;
    p->held_layers = shape->held_layers;
    size_t bytes = (size_t)shape->cfg.layers * sizeof *p->slot;
    if (!(p->slot = malloc(bytes)))
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage-local parameter map");
    memcpy(p->slot, shape->slot, bytes);
    zb_status_t st = allocate(p, shape->sizes[ZB_WTE] > 0, shape->sizes[ZB_WPE] > 0,
                              shape->sizes[ZB_LNFW] > 0, err);
    if (st != ZB_OK)
        zb_gpt2_params_free(p);
    return st;
}

size_t zb_gpt2_params_bytes(const zb_gpt2_params_t *p)
{
    return p->count * sizeof(float);
}

int zb_gpt2_layer_slot(const zb_gpt2_params_t *p, int l)
{
    if (l < 0 || l >= p->cfg.layers)
        return -1;
    return p->slot ? p->slot[l] : l;
}

float *zb_gpt2_slice(const zb_gpt2_params_t *p, int tensor, int layer, size_t *count)
{
    if (tensor < 0 || tensor >= ZB_GPT2_NUM_TENSORS || !p->t[tensor])
        return NULL;
    if (!per_layer(tensor)) {
        if (count)
            *count = p->sizes[tensor];
        return p->t[tensor];
    }
    int k = zb_gpt2_layer_slot(p, layer);
    if (k < 0)
        return NULL;
    size_t n = p->sizes[tensor] / (size_t)(p->slot ? p->held_layers : p->cfg.layers);
    if (count)
        *count = n;
    return p->t[tensor] + (size_t)k * n;
}

bool zb_gpt2_holds_span(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span)
{
    for (int l = span->layer_begin; l < span->layer_end; l++)
        if (zb_gpt2_layer_slot(p, l) < 0)
            return false;
    if ((span->embed || span->head) && !p->t[ZB_WTE])
        return false;
    if (span->embed && !p->t[ZB_WPE])
        return false;
    return !span->head || p->t[ZB_LNFW];
}

/* The (tensor, layer) slices of a norm unit, in the order zb_gpt2_unit_ranges lists them. */
static int unit_slices(const zb_gpt2_config_t *cfg, int unit, int tensor[16], int *layer)
{
    int L = cfg->layers, n = 0;
    if (unit < 0 || unit > L + 1)
        return 0;
    int first = unit == 0 ? ZB_WTE : unit == L + 1 ? ZB_LNFW : ZB_LN1W;
    int last = unit == 0 ? ZB_WPE : unit == L + 1 ? ZB_LNFB : ZB_FCPROJB;
    for (int i = first; i <= last; i++)
        tensor[n++] = i;
    *layer = unit - 1;
    return n;
}

int zb_gpt2_params_unit_ranges(const zb_gpt2_params_t *p, int unit, size_t offset[16],
                               size_t count[16])
{
    int tensor[16], layer, n = 0;
    int k = unit_slices(&p->cfg, unit, tensor, &layer);
    for (int i = 0; i < k; i++) {
        size_t c = 0;
        const float *s = zb_gpt2_slice(p, tensor[i], layer, &c);
        if (s) {
            offset[n] = (size_t)(s - p->data);
            count[n++] = c;
        }
    }
    return n;
}

void zb_gpt2_copy_unit(zb_gpt2_params_t *dst, const zb_gpt2_params_t *src, int unit)
{
    int tensor[16], layer;
    int k = unit_slices(&src->cfg, unit, tensor, &layer);
    for (int i = 0; i < k; i++) {
        size_t cd = 0, cs = 0;
        float *d = zb_gpt2_slice(dst, tensor[i], layer, &cd);
        const float *s = zb_gpt2_slice(src, tensor[i], layer, &cs);
        if (d && s && cd == cs)
            memcpy(d, s, cs * sizeof(float));
    }
}

zb_status_t zb_gpt2_grads_alloc_like(zb_gpt2_grads_t *g, const zb_gpt2_params_t *shape,
                                     zb_err_t *err)
{
    return zb_gpt2_grads_alloc_like_for(g, shape, true, err);
}

zb_status_t zb_gpt2_grads_alloc_like_for(zb_gpt2_grads_t *g, const zb_gpt2_params_t *shape,
                                         bool tied_head, zb_err_t *err)
{
    g->wte_head = NULL;
    zb_status_t st = zb_gpt2_params_alloc_like(&g->g, shape, err);
    if (st != ZB_OK || !g->g.t[ZB_WTE] || !tied_head)
        return st;
    if (!(g->wte_head = calloc(g->g.sizes[ZB_WTE], sizeof(float)))) {
        zb_gpt2_params_free(&g->g);
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the tied-head gradient (%zu floats)",
                          g->g.sizes[ZB_WTE]);
    }
    zb_gpt2_account(&g->g, g->g.sizes[ZB_WTE] * sizeof(float)); /* released with g->g */
    return ZB_OK;
}

size_t zb_gpt2_params_part_count(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *spans,
                                 int n)
{
    if (zb_gpt2_config_check(cfg, NULL) != ZB_OK)
        return 0;
    size_t full[ZB_GPT2_NUM_TENSORS], count = 0;
    zb_gpt2_tensor_sizes(cfg, full);
    bool wte = false, wpe = false, lnf = false;
    int held = 0;
    for (int l = 0; l < cfg->layers; l++)
        for (int k = 0; k < n; k++)
            if (l >= spans[k].layer_begin && l < spans[k].layer_end) {
                held++;
                break;
            }
    for (int k = 0; k < n; k++) {
        wte |= spans[k].embed || spans[k].head;
        wpe |= spans[k].embed;
        lnf |= spans[k].head;
    }
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++)
        count += per_layer(i) ? full[i] / (size_t)cfg->layers * (size_t)held
                 : i == ZB_WTE ? (wte ? full[i] : 0)
                 : i == ZB_WPE ? (wpe ? full[i] : 0)
                               : (lnf ? full[i] : 0);
    return count;
}

void zb_gpt2_params_pieces(const zb_gpt2_params_t *p, size_t global, size_t n,
                           zb_gpt2_piece_fn fn, void *ctx)
{
    size_t full[ZB_GPT2_NUM_TENSORS], start = 0, end = global + n;
    zb_gpt2_tensor_sizes(&p->cfg, full);
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; start += full[i], i++) {
        if (!p->t[i] || start >= end || start + full[i] <= global)
            continue;
        int slices = per_layer(i) ? p->cfg.layers : 1;
        size_t each = full[i] / (size_t)slices;
        for (int l = 0; l < slices; l++) {
            size_t count = 0;
            const float *s = zb_gpt2_slice(p, i, l, &count);
            size_t lo = start + (size_t)l * each, hi = lo + count;
            if (!s || hi <= global || lo >= end)
                continue;
            size_t a = lo > global ? lo : global, b = hi < end ? hi : end;
            fn(ctx, (size_t)(s - p->data) + (a - lo), a - global, b - a);
        }
    }
}

typedef struct {
    float *dst;
    const float *src;
} scatter_t;

static void scatter_piece(void *ctx, size_t local, size_t at, size_t n)
{
    const scatter_t *s = ctx;
    memcpy(s->dst + local, s->src + at, n * sizeof(float));
}

void zb_gpt2_scatter(const zb_gpt2_params_t *p, float *dst, size_t global, const float *src,
                     size_t n)
{
    scatter_t s = {dst, src};
    zb_gpt2_params_pieces(p, global, n, scatter_piece, &s);
}
