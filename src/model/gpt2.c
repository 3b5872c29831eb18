/* GPT-2 configuration, parameter buffers (one allocation, llm.c tensor order), gradients with the
 * separate tied-head accumulator and the norm units (initialisation: gpt2_init.c). */
#include "zbpp/gpt2.h"
#include "zbpp/workers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"

zb_status_t zb_gpt2_config_check(const zb_gpt2_config_t *cfg, zb_err_t *err)
{
    if (!cfg)
        return zb_err_set(err, ZB_EINVAL, "gpt2 config is NULL");
    if (cfg->max_seq <= 0 || cfg->vocab <= 0 || cfg->padded_vocab <= 0 || cfg->layers <= 0 ||
        cfg->heads <= 0 || cfg->channels <= 0)
        return zb_err_set(err, ZB_EINVAL,
                          "gpt2 config: sizes must be positive (maxT=%d V=%d Vp=%d L=%d NH=%d C=%d)",
                          cfg->max_seq, cfg->vocab, cfg->padded_vocab, cfg->layers, cfg->heads,
                          cfg->channels);
    if (cfg->channels > ZB_GPT2_MAX_CHANNELS || cfg->layers > ZB_GPT2_MAX_LAYERS ||
        cfg->padded_vocab > ZB_GPT2_MAX_VOCAB || cfg->max_seq > ZB_GPT2_MAX_SEQ)
        return zb_err_set(err, ZB_EINVAL,
                          "gpt2 config too large (limits: C<=%d L<=%d Vp<=%d maxT<=%d)",
                          ZB_GPT2_MAX_CHANNELS, ZB_GPT2_MAX_LAYERS, ZB_GPT2_MAX_VOCAB,
                          ZB_GPT2_MAX_SEQ);
    if (cfg->channels % cfg->heads != 0)
        return zb_err_set(err, ZB_EINVAL, "gpt2 config: heads (%d) must divide channels (%d)",
                          cfg->heads, cfg->channels);
    if (cfg->padded_vocab < cfg->vocab)
        return zb_err_set(err, ZB_EINVAL, "gpt2 config: padded vocab %d < vocab %d",
                          cfg->padded_vocab, cfg->vocab);
    return ZB_OK;
}

void zb_gpt2_tensor_sizes(const zb_gpt2_config_t *cfg, size_t s[ZB_GPT2_NUM_TENSORS])
{
    size_t C = (size_t)cfg->channels, L = (size_t)cfg->layers;
    s[ZB_WTE] = (size_t)cfg->padded_vocab * C;
    s[ZB_WPE] = (size_t)cfg->max_seq * C;
    s[ZB_LN1W] = L * C;
    s[ZB_LN1B] = L * C;
    s[ZB_QKVW] = L * 3 * C * C;
    s[ZB_QKVB] = L * 3 * C;
    s[ZB_ATTPROJW] = L * C * C;
    s[ZB_ATTPROJB] = L * C;
    s[ZB_LN2W] = L * C;
    s[ZB_LN2B] = L * C;
    s[ZB_FCW] = L * 4 * C * C;
    s[ZB_FCB] = L * 4 * C;
    s[ZB_FCPROJW] = L * C * 4 * C;
    s[ZB_FCPROJB] = L * C;
    s[ZB_LNFW] = C;
    s[ZB_LNFB] = C;
}

static atomic_size_t held_bytes, peak_bytes;

void zb_gpt2_account(zb_gpt2_params_t *p, size_t bytes)
{
    p->accounted += bytes;
    size_t now = atomic_fetch_add(&held_bytes, bytes) + bytes;
    size_t peak = atomic_load(&peak_bytes);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now))
        ;
}

size_t zb_gpt2_buffer_bytes(void)
{
    return atomic_load(&held_bytes);
}

size_t zb_gpt2_buffer_peak_bytes(void)
{
    return atomic_load(&peak_bytes);
}

void zb_gpt2_buffer_reset_peak(void)
{
    atomic_store(&peak_bytes, atomic_load(&held_bytes));
}

zb_status_t zb_gpt2_params_alloc(zb_gpt2_params_t *p, const zb_gpt2_config_t *cfg, zb_err_t *err)
{
    memset(p, 0, sizeof *p);
    zb_status_t st = zb_gpt2_config_check(cfg, err);
    if (st != ZB_OK)
        return st;
    p->cfg = *cfg;
    p->held_layers = cfg->layers;
    zb_gpt2_tensor_sizes(cfg, p->sizes);
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++)
        p->count += p->sizes[i];
    p->data = calloc(p->count, sizeof(float));
    if (!p->data)
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate %zu parameters (%.1f MB)", p->count,
                          p->count * 4.0 / 1e6);
    zb_gpt2_account(p, p->count * sizeof(float));
    float *ptr = p->data;
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++) {
        p->t[i] = ptr;
        ptr += p->sizes[i];
    }
    return ZB_OK;
}

void zb_gpt2_params_free(zb_gpt2_params_t *p)
{
    if (!p)
        return;
    atomic_fetch_sub(&held_bytes, p->accounted);
    free(p->data);
    free(p->slot);
    memset(p, 0, sizeof *p);
}

zb_status_t zb_gpt2_grads_alloc(zb_gpt2_grads_t *g, const zb_gpt2_config_t *cfg, zb_err_t *err)
{
    g->wte_head = NULL;
    zb_status_t st = zb_gpt2_params_alloc(&g->g, cfg, err);
    if (st != ZB_OK)
        return st;
    g->wte_head = calloc(g->g.sizes[ZB_WTE], sizeof(float));
    if (!g->wte_head) {
        zb_gpt2_params_free(&g->g);
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the tied-head gradient (%zu floats)",
                          (size_t)cfg->padded_vocab * cfg->channels);
    }
    zb_gpt2_account(&g->g, g->g.sizes[ZB_WTE] * sizeof(float)); /* released with g->g */
    return ZB_OK;
}

void zb_gpt2_grads_free(zb_gpt2_grads_t *g)
{
    if (!g)
        return;
    free(g->wte_head);
    g->wte_head = NULL;
    zb_gpt2_params_free(&g->g);
}

/* Zeroing and folding touch every gradient: shared over the current worker group in fixed
 * element chunks (elementwise, so any split gives the same bits). */
#define GRAD_CHUNK 65536

typedef struct {
    float *dst;
    const float *src; /* NULL: zero dst */
    size_t n;
} grad_job_t;

static void grad_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const grad_job_t *j = ctx;
    size_t lo = c * GRAD_CHUNK, len = j->n - lo < GRAD_CHUNK ? j->n - lo : GRAD_CHUNK;
    float *e = j->dst + lo;
    if (!j->src) {
        memset(e, 0, len * sizeof(float));
        return;
    }
    const float *h = j->src + lo;
    for (size_t i = 0; i < len; i++)
        e[i] = e[i] + h[i]; /* (embedding part) + (head part), always this order */
}

static void grad_apply(float *dst, const float *src, size_t n)
{
    grad_job_t j = {.dst = dst, .src = src, .n = n};
    zb_parallel_for((n + GRAD_CHUNK - 1) / GRAD_CHUNK, grad_chunk, &j);
}

void zb_gpt2_grads_zero(zb_gpt2_grads_t *g)
{
    grad_apply(g->g.data, NULL, g->g.count);
    if (g->wte_head)
        grad_apply(g->wte_head, NULL, g->g.sizes[ZB_WTE]);
}

void zb_gpt2_fold_tied(zb_gpt2_grads_t *g)
{
    if (!g->wte_head || !g->g.t[ZB_WTE])
        return;
    grad_apply(g->g.t[ZB_WTE], g->wte_head, g->g.sizes[ZB_WTE]); /* embedding + head part */
}

int zb_gpt2_num_units(const zb_gpt2_config_t *cfg)
{
    return cfg->layers + 2;
}

int zb_gpt2_unit_ranges(const zb_gpt2_config_t *cfg, int unit, size_t offset[16], size_t count[16])
{
    size_t sizes[ZB_GPT2_NUM_TENSORS], start[ZB_GPT2_NUM_TENSORS], pos = 0;
    zb_gpt2_tensor_sizes(cfg, sizes);
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++) {
        start[i] = pos;
        pos += sizes[i];
    }
    int L = cfg->layers, n = 0;
    if (unit < 0 || unit > L + 1)
        return 0;
    if (unit == 0) {
        for (int i = ZB_WTE; i <= ZB_WPE; i++, n++) {
            offset[n] = start[i];
            count[n] = sizes[i];
        }
    } else if (unit == L + 1) {
        for (int i = ZB_LNFW; i <= ZB_LNFB; i++, n++) {
            offset[n] = start[i];
            count[n] = sizes[i];
        }
    } else {
        size_t l = (size_t)(unit - 1);
        for (int i = ZB_LN1W; i <= ZB_FCPROJB; i++, n++) {
            size_t per_layer = sizes[i] / (size_t)L;
            offset[n] = start[i] + l * per_layer;
            count[n] = per_layer;
        }
    }
    return n;
}
