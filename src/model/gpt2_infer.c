/* GPT-2 inference, one position at a time, with a KV cache per block (see gpt2_infer.h).
 * LayerNorm, GELU and the residual adds reuse the src/nn/ kernels with N = 1 row. The linear
 * layers of one row are matrix-vector products (cblas_sgemv): a one-row sgemm packs the whole
 * weight matrix first, doubling the memory traffic that bounds this path (bench_generate). The
 * attention over the cache is written here (one query against the cached keys: the nn kernel
 * computes a full T×T causal block, which is exactly the work a cache avoids). */
#include "zbpp/gpt2_infer.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "zbpp/nn.h"

struct zb_gpt2_kv {
    zb_gpt2_config_t cfg;
    zb_gpt2_span_t span;
    int cap, len, nl;
    size_t bytes;
    float *mem;      /* one allocation: K, V of every block, then the scratch */
    float *k, *v;    /* [nl][cap][C] */
    float *x, *ln, *qkv, *atty, *tmp, *res2, *fch, *fchg; /* [C] [C] [3C] [C] [C] [C] [4C] [4C] */
    float *att;      /* [cap] scores of one head */
};

zb_status_t zb_gpt2_kv_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int cap,
                           zb_gpt2_kv_t **out, zb_err_t *err)
{
    *out = NULL;
    zb_status_t s = zb_gpt2_config_check(cfg, err);
    if (s != ZB_OK)
        return s;
    if (!span || span->layer_begin < 0 || span->layer_begin > span->layer_end ||
        span->layer_end > cfg->layers || (span->embed && span->layer_begin != 0) ||
        (span->head && span->layer_end != cfg->layers))
        return zb_err_set(err, ZB_EINVAL, "kv cache: bad stage span");
    if (cap < 1 || cap > cfg->max_seq)
        return zb_err_set(err, ZB_EINVAL, "kv cache: capacity %d not in [1, %d] (max sequence)",
                          cap, cfg->max_seq);
    int nl = span->layer_end - span->layer_begin;
    size_t C = (size_t)cfg->channels;
    size_t kv = (size_t)nl * (size_t)cap * C;
    size_t floats = 2 * kv + 16 * C + (size_t)cap;
    zb_gpt2_kv_t *c = calloc(1, sizeof *c);
    if (c)
        c->mem = calloc(floats, sizeof(float));
    if (!c || !c->mem) {
        free(c);
        return zb_err_set(err, ZB_ENOMEM, "kv cache: cannot allocate %.1f MB",
                          floats * 4.0 / 1e6);
    }
    c->cfg = *cfg;
    c->span = *span;
    c->cap = cap;
    c->nl = nl;
    c->bytes = floats * sizeof(float);
    float *m = c->mem;
    c->k = m, m += kv;
    c->v = m, m += kv;
    c->x = m, m += C;
    c->ln = m, m += C;
    c->qkv = m, m += 3 * C;
    c->atty = m, m += C;
    c->tmp = m, m += C;
    c->res2 = m, m += C;
    c->fch = m, m += 4 * C;
    c->fchg = m, m += 4 * C;
    c->att = m;
    *out = c;
    return ZB_OK;
}

void zb_gpt2_kv_free(zb_gpt2_kv_t *kv)
{
    if (!kv)
        return;
    free(kv->mem);
    free(kv);
}

void zb_gpt2_kv_reset(zb_gpt2_kv_t *kv)
{
    kv->len = 0;
}

int zb_gpt2_kv_len(const zb_gpt2_kv_t *kv)
{
    return kv->len;
}

size_t zb_gpt2_kv_bytes(const zb_gpt2_kv_t *kv)
{
    return kv->bytes;
}

/* One query row against the cached keys and values of block `l` (local index), every head:
 * atty[h·hs..] = softmax(q·K[0..pos]^T / sqrt(hs)) · V[0..pos]. */
static void cached_attention(zb_gpt2_kv_t *c, int l, int pos)
{
    int C = c->cfg.channels, NH = c->cfg.heads, hs = C / NH;
    const float *K = c->k + (size_t)l * c->cap * C, *V = c->v + (size_t)l * c->cap * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int h = 0; h < NH; h++) {
        const float *q = c->qkv + (size_t)h * hs;
        float maxv = -INFINITY;
        for (int t = 0; t <= pos; t++) {
            const float *k = K + (size_t)t * C + (size_t)h * hs;
            float dot = 0.0f;
            for (int i = 0; i < hs; i++)
                dot += q[i] * k[i];
            c->att[t] = dot * scale;
            if (c->att[t] > maxv)
                maxv = c->att[t];
        }
        float sum = 0.0f;
        for (int t = 0; t <= pos; t++) {
            c->att[t] = expf(c->att[t] - maxv);
            sum += c->att[t];
        }
        float inv = 1.0f / sum;
        float *o = c->atty + (size_t)h * hs;
        memset(o, 0, (size_t)hs * sizeof(float));
        for (int t = 0; t <= pos; t++) {
            const float *v = V + (size_t)t * C + (size_t)h * hs;
            float a = c->att[t] * inv;
            for (int i = 0; i < hs; i++)
                o[i] += a * v[i];
        }
    }
}

/* out[OC] = weight[OC,C] · inp[C] (+ bias[OC]); single-threaded BLAS (zb_blas_init). */
static void matvec(float *out, const float *inp, const float *weight, const float *bias, int C,
                   int OC)
{
    zb_blas_init();
    cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1, 0.0f, out, 1);
    if (bias)
        for (int i = 0; i < OC; i++)
            out[i] += bias[i];
}

static const float *slice(const zb_gpt2_params_t *p, int tensor, int layer)
{
    size_t n;
    return zb_gpt2_slice(p, tensor, layer, &n);
}

/* Block `layer` (global) on the row c->x in place, caching k and v at `pos`. */
static void block_step(const zb_gpt2_params_t *p, zb_gpt2_kv_t *c, int layer, int pos)
{
    int C = c->cfg.channels, l = layer - c->span.layer_begin;
    size_t Cz = (size_t)C;
    zb_layernorm_forward(c->ln, c->tmp, c->tmp + 1, c->x, slice(p, ZB_LN1W, layer),
                         slice(p, ZB_LN1B, layer), 1, C);
    matvec(c->qkv, c->ln, slice(p, ZB_QKVW, layer), slice(p, ZB_QKVB, layer), C, 3 * C);
    float *krow = c->k + ((size_t)l * c->cap + (size_t)pos) * Cz;
    float *vrow = c->v + ((size_t)l * c->cap + (size_t)pos) * Cz;
    memcpy(krow, c->qkv + Cz, Cz * sizeof(float));
    memcpy(vrow, c->qkv + 2 * Cz, Cz * sizeof(float));
    cached_attention(c, l, pos);
    matvec(c->tmp, c->atty, slice(p, ZB_ATTPROJW, layer), slice(p, ZB_ATTPROJB, layer), C, C);
    zb_residual_forward(c->res2, c->x, c->tmp, Cz);
    zb_layernorm_forward(c->ln, c->tmp, c->tmp + 1, c->res2, slice(p, ZB_LN2W, layer),
                         slice(p, ZB_LN2B, layer), 1, C);
    matvec(c->fch, c->ln, slice(p, ZB_FCW, layer), slice(p, ZB_FCB, layer), C, 4 * C);
    zb_gelu_forward(c->fchg, c->fch, 4 * Cz);
    matvec(c->tmp, c->fchg, slice(p, ZB_FCPROJW, layer), slice(p, ZB_FCPROJB, layer), 4 * C,
           C);
    zb_residual_forward(c->x, c->res2, c->tmp, Cz);
}

static bool same_config(const zb_gpt2_config_t *a, const zb_gpt2_config_t *b)
{
    return a->max_seq == b->max_seq && a->vocab == b->vocab &&
           a->padded_vocab == b->padded_vocab && a->layers == b->layers &&
           a->heads == b->heads && a->channels == b->channels;
}

zb_status_t zb_gpt2_infer_step(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                               zb_gpt2_kv_t *kv, int token, const float *x_in, float *x_out,
                               float *logits, zb_err_t *err)
{
    if (!p || !span || !kv)
        return zb_err_set(err, ZB_EINVAL, "infer step: params, span and cache are required");
    if (!same_config(&p->cfg, &kv->cfg) || span->layer_begin != kv->span.layer_begin ||
        span->layer_end != kv->span.layer_end || span->embed != kv->span.embed ||
        span->head != kv->span.head)
        return zb_err_set(err, ZB_EINVAL,
                          "infer step: the cache was made for another model or stage");
    if (!zb_gpt2_holds_span(p, span))
        return zb_err_set(err, ZB_EINVAL, "infer step: the parameters do not hold the stage");
    if (kv->len >= kv->cap)
        return zb_err_set(err, ZB_EINVAL, "infer step: the cache is full (%d positions)",
                          kv->cap);
    if (span->embed && (token < 0 || token >= kv->cfg.vocab))
        return zb_err_set(err, ZB_EINVAL, "infer step: token %d not in [0, %d)", token,
                          kv->cfg.vocab);
    if (span->embed ? false : !x_in)
        return zb_err_set(err, ZB_EINVAL, "infer step: missing x_in");
    if (span->head ? !logits : !x_out)
        return zb_err_set(err, ZB_EINVAL, "infer step: missing %s",
                          span->head ? "logits" : "x_out");
    int C = kv->cfg.channels, pos = kv->len;
    size_t Cz = (size_t)C;
    if (span->embed) {
        const float *te = p->t[ZB_WTE] + (size_t)token * Cz, *pe = p->t[ZB_WPE] + (size_t)pos * Cz;
        for (int i = 0; i < C; i++)
            kv->x[i] = te[i] + pe[i];
    } else {
        memcpy(kv->x, x_in, Cz * sizeof(float));
    }
    for (int l = span->layer_begin; l < span->layer_end; l++)
        block_step(p, kv, l, pos);
    if (span->head) {
        zb_layernorm_forward(kv->ln, kv->tmp, kv->tmp + 1, kv->x, p->t[ZB_LNFW], p->t[ZB_LNFB], 1,
                             C);
        matvec(logits, kv->ln, p->t[ZB_WTE], NULL, C, kv->cfg.padded_vocab);
    } else {
        memcpy(x_out, kv->x, Cz * sizeof(float));
    }
    kv->len++;
    return ZB_OK;
}

zb_status_t zb_gpt2_generate(const zb_gpt2_params_t *p, const int *prompt, int n_prompt,
                             int n_new, zb_sampler_t *s, int *out, int *n_out, zb_token_fn fn,
                             void *ctx, zb_err_t *err)
{
    if (n_out)
        *n_out = 0;
    if (!p || !s || !prompt || n_prompt < 1 || n_new < 0)
        return zb_err_set(err, ZB_EINVAL, "generate: a prompt of at least one token is required");
    int maxT = p->cfg.max_seq;
    if (n_prompt > maxT || (long)n_prompt + n_new - 1 > maxT)
        return zb_err_set(err, ZB_EINVAL,
                          "generate: %d prompt + %d new tokens need %ld positions, over the "
                          "model's max sequence %d",
                          n_prompt, n_new, (long)n_prompt + (n_new > 0 ? n_new - 1 : 0), maxT);
    if (s->vocab != p->cfg.vocab)
        return zb_err_set(err, ZB_EINVAL, "generate: sampler vocab %d != model vocab %d",
                          s->vocab, p->cfg.vocab);
    zb_gpt2_span_t whole = {.layer_begin = 0, .layer_end = p->cfg.layers, .embed = true,
                            .head = true};
    int cap = n_prompt + (n_new > 0 ? n_new - 1 : 0);
    zb_gpt2_kv_t *kv = NULL;
    float *logits = malloc((size_t)p->cfg.padded_vocab * sizeof(float));
    zb_status_t st = logits ? zb_gpt2_kv_new(&p->cfg, &whole, cap, &kv, err)
                            : zb_err_set(err, ZB_ENOMEM, "generate: out of memory for logits");
    for (int i = 0; st == ZB_OK && i < n_prompt; i++)
        st = zb_gpt2_infer_step(p, &whole, kv, prompt[i], NULL, NULL, logits, err);
    for (int i = 0; st == ZB_OK && i < n_new; i++) {
        int tok = zb_sampler_pick(s, logits);
        if (out)
            out[i] = tok;
        if (n_out)
            *n_out = i + 1;
        if (fn && fn(ctx, tok))
            break;
        if (i + 1 < n_new)
            st = zb_gpt2_infer_step(p, &whole, kv, tok, NULL, NULL, logits, err);
    }
    zb_gpt2_kv_free(kv);
    free(logits);
    return st;
}
