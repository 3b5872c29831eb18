/* zbpp — the CUDA stage's compute: F, B and W over the op layer (cuda/ops.c), one stash per
 * microbatch in flight, in fp32 storage (fp32 and tf32 products); bf16 storage has its own
 * stash walk and op sequence in stage_compute16.c, and shares the checks and the loss here. The schedule of ops, the stash buffers and their F/B lifetimes are those
 * of src/model/gpt2_stage.c (docs/compute.md), so the memory model zb_gpt2_stage_mem holds for
 * the device stash too, less the attention's T×T probabilities where the fp32 flash kernel
 * keeps lse instead (head sizes zb_cuk_flash32_supported); the per-call scratch lives once in
 * the stage (all work of a stage is serialised on its stream), not in every stash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/small_copy.h"
#include "cuda/stage.h"

/* ---- stash: the buffer walk of src/model/gpt2_stage.c without its scratch ---- */

typedef zb_cu_layout_t layout_t;
#define take zb_cu_take

/* The lifetime region of a buffer live after F (KEEP_F) and/or after B (KEEP_B), or whose
 * memory B's gradients take over (KEEP_DONOR: until W); one live after neither serves one
 * action and goes with F..B. */
static int region_of(int keep)
{
    if ((keep & KEEP_DONOR) || keep == (KEEP_F | KEEP_B))
        return ZB_CUDA_STASH_FW;
    return keep == KEEP_B ? ZB_CUDA_STASH_BW : ZB_CUDA_STASH_FB;
}

static size_t align256(size_t off)
{
    return (off + 255) & ~(size_t)255; /* 256-byte aligned device buffers */
}

void *zb_cu_take(layout_t *lo, size_t bytes, int keep)
{
    void *p;
    if (lo->split) {
        int k = region_of(keep);
        lo->roff[k] = align256(lo->roff[k]);
        p = lo->region[k] ? lo->region[k] + lo->roff[k] : NULL;
        lo->roff[k] += bytes;
    } else {
        lo->off = align256(lo->off);
        p = lo->base ? lo->base + lo->off : NULL;
        lo->off += bytes;
    }
    if (keep & KEEP_F)
        lo->bytes_f += bytes;
    if (keep & KEEP_B)
        lo->bytes_b += bytes;
    return p;
}

#define TAKE_F(lo, n, keep) ((float *)take((lo), (n) * sizeof(float), (keep)))

void zb_cu_layout_embed(layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels;
    int *tok = take(lo, N * sizeof(int), KEEP_F | KEEP_B);
    int *bucket = take(lo, zb_cu_encoder_bucket_ints(s->B, s->T) * sizeof(int), KEEP_B);
    float *denc = TAKE_F(lo, N * C, KEEP_B);
    if (st) {
        st->tokens = tok;
        st->bucket = bucket;
        st->dencoded = denc;
    }
}

static void layout(layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels, NH = (size_t)s->cfg.heads;
    size_t Vp = (size_t)s->cfg.padded_vocab;
    int nl = s->nl;
    const int FB = KEEP_F | KEEP_B;
    layer_acts_t dummy;
    if (s->span.embed)
        zb_cu_layout_embed(lo, st, s);
    for (int l = 0; l <= nl; l++) {
        if (l == nl && !s->span.head)
            break;
        float *x = TAKE_F(lo, N * C, FB);
        if (st)
            st->xs[l] = x;
    }
    for (int l = 0; l < nl; l++) {
        layer_acts_t *a = st ? &st->layers[l] : &dummy;
        a->ln1 = TAKE_F(lo, N * C, FB);
        a->ln1_mean = TAKE_F(lo, N, FB);
        a->ln1_rstd = TAKE_F(lo, N, FB);
        a->qkv = TAKE_F(lo, N * 3 * C, KEEP_F);
        a->lse = a->att = NULL;
        if (flash32(s))
            a->lse = TAKE_F(lo, N * NH, KEEP_F);
        else
            a->att = TAKE_F(lo, N * NH * (size_t)s->T, KEEP_F);
        a->atty = TAKE_F(lo, N * C, FB);
        a->res2 = TAKE_F(lo, N * C, FB);
        a->ln2 = TAKE_F(lo, N * C, FB);
        a->ln2_mean = TAKE_F(lo, N, FB);
        a->ln2_rstd = TAKE_F(lo, N, FB);
        a->fch = TAKE_F(lo, N * 4 * C, KEEP_F);
        a->fch_gelu = TAKE_F(lo, N * 4 * C, FB);
        a->dres3 = TAKE_F(lo, N * C, KEEP_B);
        a->dfch = TAKE_F(lo, N * 4 * C, KEEP_B);
        a->dln2 = TAKE_F(lo, N * C, KEEP_B);
        a->dres2 = TAKE_F(lo, N * C, KEEP_B);
        a->dqkv = TAKE_F(lo, N * 3 * C, KEEP_B);
        a->dln1 = TAKE_F(lo, N * C, KEEP_B);
    }
    if (s->span.head) {
        int *targets = take(lo, N * sizeof(int), KEEP_F);
        float *lnf = TAKE_F(lo, N * C, FB), *m = TAKE_F(lo, N, FB), *r = TAKE_F(lo, N, FB);
        float *probs = TAKE_F(lo, N * Vp, FB), *dlnf = TAKE_F(lo, N * C, KEEP_B);
        if (st) {
            st->targets = targets;
            st->lnf = lnf;
            st->lnf_mean = m;
            st->lnf_rstd = r;
            st->probs = probs;
            st->dlnf = dlnf;
        }
    }
}

/* The stash walk of the stage's storage precision. */
static void stash_layout(layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s)
{
    if (is_bf16(s))
        zb_cu16_layout(lo, st, s);
    else
        layout(lo, st, s);
}

/* A stash's host side (its buffer tables and the tokens' host copy), no device memory yet. */
static zb_cuda_stash_t *stash_shell(zb_cuda_stage_t *s)
{
    zb_cuda_stash_t *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    size_t nl = s->nl > 0 ? (size_t)s->nl : 1;
    if (is_bf16(s)) {
        st->layers16 = calloc(nl, sizeof *st->layers16);
        st->xs16 = calloc(nl + 1, sizeof *st->xs16);
    } else {
        st->layers = calloc(nl, sizeof *st->layers);
        st->xs = calloc(nl + 1, sizeof *st->xs);
    }
    st->tokens_host = calloc((size_t)s->B * s->T, sizeof(int));
    if (!(st->layers || st->layers16) || !(st->xs || st->xs16) || !st->tokens_host) {
        zb_cuda_stash_free(st);
        return NULL;
    }
    st->stage = s;
    st->state = STATE_EMPTY;
    return st;
}

zb_status_t zb_cuda_stash_new(zb_cuda_stage_t *s, zb_cuda_stash_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda stash: stage is NULL");
    zb_cuda_stash_t *st = stash_shell(s);
    if (!st)
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the CUDA stash");
    layout_t lo = {0};
    stash_layout(&lo, NULL, s);
    cudaError_t e = cudaSetDevice(s->ctx.device);
    if (e != cudaSuccess) {
        zb_cuda_stash_free(st);
        return cuda_err(e, "set device", err);
    }
    e = cudaMalloc(&st->mem, lo.off ? lo.off : 256);
    if (e != cudaSuccess) {
        st->mem = NULL;
        zb_cuda_stash_free(st);
        cudaGetLastError();
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the activation stash on the GPU "
                                          "(%.1f MB): %s", lo.off / 1e6, cudaGetErrorString(e));
    }
    layout_t real = {.base = st->mem};
    stash_layout(&real, st, s);
    st->bytes_f = real.bytes_f;
    st->bytes_b = real.bytes_b;
    *out = st;
    return ZB_OK;
}

void zb_cuda_stash_regions(const zb_cuda_stage_t *s, size_t bytes[3])
{
    layout_t lo = {.split = true};
    stash_layout(&lo, NULL, s);
    for (int k = 0; k < 3; k++)
        bytes[k] = align256(lo.roff[k]);
}

zb_status_t zb_cuda_stash_view_new(zb_cuda_stage_t *s, zb_cuda_stash_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda stash: stage is NULL");
    zb_cuda_stash_t *st = stash_shell(s);
    if (!st)
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the CUDA stash");
    layout_t lo = {.split = true};
    stash_layout(&lo, NULL, s);
    st->bytes_f = lo.bytes_f;
    st->bytes_b = lo.bytes_b;
    *out = st;
    return ZB_OK;
}

void zb_cuda_stash_bind(zb_cuda_stash_t *st, void *const region[3])
{
    layout_t lo = {.split = true};
    for (int k = 0; k < 3; k++)
        lo.region[k] = region[k];
    stash_layout(&lo, st, st->stage);
}

void zb_cuda_stash_free(zb_cuda_stash_t *st)
{
    if (!st)
        return;
    if (st->mem)
        cudaFree(st->mem);
    free(st->layers);
    free(st->xs);
    free(st->layers16);
    free(st->xs16);
    free(st->tokens_host);
    free(st);
}

void zb_cuda_stash_reset(zb_cuda_stash_t *st) { st->state = STATE_EMPTY; }

/* The figures of a stage shaped like s; made: allocated (its workspace as it is now). */
static void stage_mem(const zb_cuda_stage_t *s, bool made, zb_cuda_stage_mem_t *m)
{
    layout_t lo = {0};
    stash_layout(&lo, NULL, s);
    m->state = s->count * sizeof(float);
    m->weights16 = is_bf16(s) ? s->count * sizeof(zb_bf16_t) : 0;
    m->wte_head = s->span.head ? wte_elems(s) * sizeof(float) : 0;
    m->scratch = zb_cu_scratch_bytes(s);
    m->stash = lo.off ? lo.off : 256; /* what zb_cuda_stash_new allocates */
    m->after_f = lo.bytes_f;
    m->after_b = lo.bytes_b;
    zb_cuda_stash_regions(s, m->region);
    m->backup = s->backup ? 3 * m->state : 0;
    m->workspace = zb_cu_workspace_bytes(s, made);
}

/* The figures of a stage of this shape, made or not; tied: a head borrowing its WTE. */
static zb_status_t shape_memory(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                int T, zb_cuda_precision_t prec, bool tied,
                                zb_cuda_stage_mem_t *out, zb_err_t *err)
{
    memset(out, 0, sizeof *out);
    zb_status_t st = zb_cuda_stage_check(cfg, span, B, T, prec, err);
    if (st == ZB_OK && tied && (!span->head || span->embed))
        st = zb_err_set(err, ZB_EINVAL, "cuda tied head: the span must be a head without the "
                                        "embedding");
    if (st != ZB_OK)
        return st;
    zb_cuda_stage_t shape = {.cfg = *cfg, .span = *span, .B = B, .T = T,
                             .nl = span->layer_end - span->layer_begin, .ctx.prec = prec,
                             .wte_borrowed = tied};
    zb_cu_stage_layout(&shape);
    stage_mem(&shape, false, out);
    return ZB_OK;
}

zb_status_t zb_cuda_stage_memory(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                 int T, zb_cuda_precision_t prec, zb_cuda_stage_mem_t *out,
                                 zb_err_t *err)
{
    return shape_memory(cfg, span, B, T, prec, false, out, err);
}

zb_status_t zb_cuda_stage_memory_tied(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                      int B, int T, zb_cuda_precision_t prec,
                                      zb_cuda_stage_mem_t *out, zb_err_t *err)
{
    return shape_memory(cfg, span, B, T, prec, true, out, err);
}

void zb_cuda_stage_allocated(const zb_cuda_stage_t *s, zb_cuda_stage_mem_t *out)
{
    memset(out, 0, sizeof *out);
    if (s)
        stage_mem(s, true, out);
}

size_t zb_cuda_stash_live_bytes(const zb_cuda_stash_t *st)
{
    return st->state == STATE_AFTER_F ? st->bytes_f
           : st->state == STATE_AFTER_B ? st->bytes_b
                                        : 0;
}

/* ---- F / B / W: the op sequence of src/model/gpt2_stage.c ---- */

typedef struct {
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    const float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} block_params_t;

/* Block l of the span (0 = its first) in the stage's buffers. */
static block_params_t block_params(const zb_cuda_stage_t *s, int l)
{
    size_t C = (size_t)s->cfg.channels, L = (size_t)l;
    block_params_t b = {
        P(s, ZB_LN1W) + L * C,            P(s, ZB_LN1B) + L * C,
        P(s, ZB_QKVW) + L * 3 * C * C,    P(s, ZB_QKVB) + L * 3 * C,
        P(s, ZB_ATTPROJW) + L * C * C,    P(s, ZB_ATTPROJB) + L * C,
        P(s, ZB_LN2W) + L * C,            P(s, ZB_LN2B) + L * C,
        P(s, ZB_FCW) + L * 4 * C * C,     P(s, ZB_FCB) + L * 4 * C,
        P(s, ZB_FCPROJW) + L * 4 * C * C, P(s, ZB_FCPROJB) + L * C,
    };
    return b;
}

static zb_status_t check_call(const zb_cuda_stage_t *s, const zb_cuda_stash_t *st,
                              const char *what, zb_err_t *err)
{
    if (!s || !st)
        return zb_err_set(err, ZB_EINVAL, "cuda %s: stage and stash are required", what);
    if (st->stage != s)
        return zb_err_set(err, ZB_EINVAL, "cuda %s: stash belongs to another stage", what);
    return ZB_OK;
}

static zb_status_t check_ids(const int *ids, size_t n, int V, const char *name, zb_err_t *err)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return zb_err_set(err, ZB_EINVAL, "cuda forward: %s[%zu] = %d not in [0, %d)", name, i,
                              ids[i], V);
    return ZB_OK;
}

static void block_forward(zb_cuda_stage_t *s, const block_params_t *w, layer_acts_t *a,
                          const float *x, float *y)
{
    zb_cu_ctx_t *c = &s->ctx;
    int B = s->B, T = s->T, N = B * T, C = s->cfg.channels, NH = s->cfg.heads;
    size_t NC = (size_t)N * C;
    zb_cu_layernorm_forward(c, a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
    zb_cu_matmul_forward(c, a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
    if (a->lse)
        zb_cu_flash32_forward(c, a->atty, a->lse, a->qkv, B, T, C, NH);
    else
        zb_cu_attention_forward(c, a->atty, a->att, a->qkv, B, T, C, NH);
    zb_cu_matmul_forward(c, s->tmp, a->atty, w->attprojw, w->attprojb, N, C, C);
    zb_cu_residual_forward(c, a->res2, x, s->tmp, NC);
    zb_cu_layernorm_forward(c, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2w, w->ln2b, N, C);
    zb_cu_matmul_gelu_forward(c, a->fch, a->fch_gelu, a->ln2, w->fcw, w->fcb, N, C, 4 * C);
    zb_cu_matmul_forward(c, s->tmp, a->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
    zb_cu_residual_forward(c, y, a->res2, s->tmp, NC);
}

/* By the SMs: a device-to-device cudaMemcpyAsync may queue on a copy engine behind a stash. */
static void copy_f(zb_cu_ctx_t *c, float *dst, const float *src, size_t n)
{
    if (c->status != ZB_OK)
        return;
    zb_cuk_copy_words(c->stream, dst, src, n);
    zb_cu_launch_check(c, "copy");
}

/* F in fp32 storage, after the tokens and targets are queued: the losses land in s->losses. */
static void forward_fp32(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *x_in,
                         float *x_out)
{
    const zb_gpt2_span_t *span = &s->span;
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    size_t NC = (size_t)N * C;
    float *x0 = st->xs[0];
    if (span->embed) {
        float *dst = (nl == 0 && !span->head) ? x_out : x0;
        zb_cu_encoder_forward(c, dst, st->tokens, P(s, ZB_WTE), P(s, ZB_WPE), s->B, s->T, C);
    } else {
        copy_f(c, x0, x_in, NC);
    }
    for (int l = 0; l < nl; l++) {
        block_params_t w = block_params(s, l);
        float *y = (l + 1 < nl || span->head) ? st->xs[l + 1] : x_out;
        block_forward(s, &w, &st->layers[l], st->xs[l], y);
    }
    if (span->head) {
        int Vp = s->cfg.padded_vocab;
        zb_cu_layernorm_forward(c, st->lnf, st->lnf_mean, st->lnf_rstd, st->xs[nl],
                                P(s, ZB_LNFW), P(s, ZB_LNFB), N, C);
        zb_cu_matmul_forward(c, st->probs, st->lnf, WTE(s), NULL, N, C, Vp);
        zb_cu_crossentropy_forward(c, s->losses, st->probs, st->targets, N, s->cfg.vocab, Vp,
                                   s->fold_scale);
    }
}

/* The mean of n token losses in the CPU stage's order and precision. */
static float mean_loss(const float *losses, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += losses[i];
    return (float)(sum / n);
}

/* F; on a head stage either the mean loss into *loss after a host wait, or (slot >= 0) the token
 * losses' copy queued into deferred slot `slot` (zb_cuda_loss_take). */
static zb_status_t forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                           const float *x_in, const int *targets, float *x_out, float *loss,
                           int slot, zb_err_t *err)
{
    zb_status_t r = check_call(s, st, "forward", err);
    if (r != ZB_OK)
        return r;
    if (st->state == STATE_AFTER_B)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda forward: stash still holds a microbatch waiting for W");
    const zb_gpt2_span_t *span = &s->span;
    int N = s->B * s->T;
    if (span->embed ? !tokens : !x_in)
        return zb_err_set(err, ZB_EINVAL, "cuda forward: missing %s",
                          span->embed ? "tokens" : "x_in");
    if (span->head ? (!targets || (!loss && slot < 0)) : !x_out)
        return zb_err_set(err, ZB_EINVAL, "cuda forward: missing %s",
                          span->head ? "targets or loss" : "x_out");
    if (span->head && slot >= s->n_loss_slots)
        return zb_err_set(err, ZB_EINVAL, "cuda forward: loss slot %d of %d", slot,
                          s->n_loss_slots);
    if (span->embed && (r = check_ids(tokens, (size_t)N, s->cfg.vocab, "tokens", err)) != ZB_OK)
        return r;
    if (span->head && (r = check_ids(targets, (size_t)N, s->cfg.vocab, "targets", err)) != ZB_OK)
        return r;
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda forward", err)) != ZB_OK)
        return r;
    zb_cu_ctx_t *c = &s->ctx;
    cudaError_t e = cudaSuccess;
    if (span->embed) { /* by the SMs, not a copy engine a stash may be filling (small_copy.h) */
        memcpy(st->tokens_host, tokens, (size_t)N * sizeof(int));
        zb_cu_upload_small(c, st->tokens, tokens, (size_t)N * sizeof(int));
    }
    if (span->head)
        zb_cu_upload_small(c, st->targets, targets, (size_t)N * sizeof(int));
    if (is_bf16(s))
        zb_cu16_forward(s, st, x_in, x_out);
    else
        forward_fp32(s, st, x_in, x_out);
    const bool defer = span->head && slot >= 0;
    if (span->head && c->status == ZB_OK) {
        /* a deferred loss lands in its page-locked slot by the SMs (small_copy.h) */
        if (defer)
            zb_cu_download_small(c, s->loss_slots + (size_t)slot * (size_t)N, s->losses,
                                 (size_t)N * sizeof(float));
        else
            e = cudaMemcpyAsync(s->losses_host, s->losses, (size_t)N * sizeof(float),
                                cudaMemcpyDeviceToHost, c->stream);
        if (e == cudaSuccess)
            e = defer ? cudaEventRecord(s->loss_ev, c->stream) : cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess)
            zb_cu_fail(c, ZB_EIO, "CUDA loss copy: %s", cudaGetErrorString(e));
    }
    if (span->head && !defer && c->status == ZB_OK)
        *loss = mean_loss(s->losses_host, N);
    if ((r = zb_cu_ctx_check(c, "cuda forward", err)) != ZB_OK)
        return r;
    st->state = STATE_AFTER_F;
    return ZB_OK;
}

zb_status_t zb_cuda_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                            const float *x_in, const int *targets, float *x_out, float *loss,
                            zb_err_t *err)
{
    return forward(s, st, tokens, x_in, targets, x_out, loss, -1, err);
}

zb_status_t zb_cuda_forward_deferred(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                                     const float *x_in, const int *targets, float *x_out,
                                     int loss_slot, zb_err_t *err)
{
    if (s && s->span.head && loss_slot < 0)
        return zb_err_set(err, ZB_EINVAL, "cuda forward: a head stage needs a loss slot");
    return forward(s, st, tokens, x_in, targets, x_out, NULL, s && s->span.head ? loss_slot : -1,
                   err);
}

zb_status_t zb_cuda_stage_fold_loss_grad(zb_cuda_stage_t *s, float grad_scale, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda fold loss gradient: stage is NULL");
    if (!(grad_scale >= 0.0f) || !isfinite(grad_scale))
        return zb_err_set(err, ZB_EINVAL, "cuda fold loss gradient: scale %g (>= 0, finite)",
                          (double)grad_scale);
    s->fold_scale = grad_scale;
    return ZB_OK;
}

zb_status_t zb_cuda_stage_loss_slots(zb_cuda_stage_t *s, int slots, zb_err_t *err)
{
    if (!s || slots < 1)
        return zb_err_set(err, ZB_EINVAL, "cuda loss slots: a stage and slots >= 1 are required");
    if (!s->span.head || slots <= s->n_loss_slots)
        return ZB_OK;
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream); /* a queued copy may target them */
    if (e == cudaSuccess && !s->loss_ev)
        e = cudaEventCreateWithFlags(&s->loss_ev, cudaEventDisableTiming);
    if (e == cudaSuccess && s->loss_slots) {
        cudaFreeHost(s->loss_slots);
        s->loss_slots = NULL;
        s->n_loss_slots = 0;
    }
    if (e == cudaSuccess) /* written by a kernel of the head's stream (small_copy.h) */
        e = cudaHostAlloc((void **)&s->loss_slots,
                          (size_t)slots * (size_t)s->B * (size_t)s->T * sizeof(float),
                          cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess)
        return zb_err_set(err, ZB_ENOMEM, "cuda loss slots: %s", cudaGetErrorString(e));
    s->n_loss_slots = slots;
    return ZB_OK;
}

zb_status_t zb_cuda_loss_take(zb_cuda_stage_t *s, int slot, float *loss, zb_err_t *err)
{
    if (!s || !loss || slot < 0 || slot >= s->n_loss_slots)
        return zb_err_set(err, ZB_EINVAL, "cuda loss take: slot %d of %d", slot,
                          s ? s->n_loss_slots : 0);
    cudaError_t e = cudaEventSynchronize(s->loss_ev); /* every copy queued before the last */
    if (e != cudaSuccess)
        return zb_err_set(err, ZB_EIO, "cuda loss take: %s", cudaGetErrorString(e));
    *loss = mean_loss(s->loss_slots + (size_t)slot * (size_t)s->B * (size_t)s->T, s->B * s->T);
    return ZB_OK;
}

static zb_status_t memset_f(zb_cu_ctx_t *c, float *p, size_t n)
{
    if (c->status != ZB_OK)
        return c->status;
    cudaError_t e = cudaMemsetAsync(p, 0, n * sizeof(float), c->stream);
    if (e != cudaSuccess)
        zb_cu_fail(c, ZB_EIO, "CUDA memset: %s", cudaGetErrorString(e));
    return c->status;
}

static void block_backward_input(zb_cuda_stage_t *s, const block_params_t *w, layer_acts_t *a,
                                 const float *x, float *dx)
{
    zb_cu_ctx_t *c = &s->ctx;
    int B = s->B, T = s->T, N = B * T, C = s->cfg.channels, NH = s->cfg.heads;
    size_t NC = (size_t)N * C;
    zb_cu_matmul_dgelu_backward_input(c, a->dfch, a->dres3, w->fcprojw, a->fch, N, 4 * C, C);
    memset_f(c, a->dln2, NC);
    zb_cu_matmul_backward_input(c, a->dln2, a->dfch, w->fcw, N, C, 4 * C);
    copy_f(c, a->dres2, a->dres3, NC);
    zb_cu_layernorm_backward_input(c, a->dres2, a->dln2, a->res2, a->ln2_mean, a->ln2_rstd,
                                   w->ln2w, N, C);
    memset_f(c, s->datty, NC);
    zb_cu_matmul_backward_input(c, s->datty, a->dres2, w->attprojw, N, C, C);
    if (a->lse) { /* writes dqkv */
        zb_cu_flash32_backward_input(c, a->dqkv, s->att_scr, s->datty, a->qkv, a->atty, a->lse, B,
                                     T, C, NH);
    } else {
        memset_f(c, a->dqkv, 3 * NC);
        zb_cu_attention_backward_input(c, a->dqkv, s->att_scr, s->datty, a->qkv, a->att, B, T, C,
                                       NH);
    }
    memset_f(c, a->dln1, NC);
    zb_cu_matmul_backward_input(c, a->dln1, a->dqkv, w->qkvw, N, C, 3 * C);
    copy_f(c, dx, a->dres2, NC);
    zb_cu_layernorm_backward_input(c, dx, a->dln1, x, a->ln1_mean, a->ln1_rstd, w->ln1w, N, C);
}

static void backward_input_fp32(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
                                float grad_scale, float *dx_in)
{
    const zb_gpt2_span_t *span = &s->span;
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    size_t NC = (size_t)N * C;
    float *dx0 = span->embed ? st->dencoded : dx_in;
    float *dtop = nl > 0 ? st->layers[nl - 1].dres3 : dx0;
    if (span->head) {
        if (s->fold_scale == 0.0f) /* else the F left the gradient already */
            zb_cu_crossentropy_backward(c, st->probs, st->targets, grad_scale, N, s->cfg.vocab,
                                        s->cfg.padded_vocab);
        memset_f(c, st->dlnf, NC);
        zb_cu_matmul_backward_input(c, st->dlnf, st->probs, WTE(s), N, C,
                                    s->cfg.padded_vocab);
        memset_f(c, dtop, NC);
        zb_cu_layernorm_backward_input(c, dtop, st->dlnf, st->xs[nl], st->lnf_mean, st->lnf_rstd,
                                       P(s, ZB_LNFW), N, C);
    } else {
        copy_f(c, dtop, dx_out, NC);
    }
    for (int l = nl - 1; l >= 0; l--) {
        block_params_t w = block_params(s, l);
        float *dx = l > 0 ? st->layers[l - 1].dres3 : dx0;
        block_backward_input(s, &w, &st->layers[l], st->xs[l], dx);
    }
}

zb_status_t zb_cuda_backward_input(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
                                   float grad_scale, float *dx_in, zb_err_t *err)
{
    zb_status_t r = check_call(s, st, "backward_input", err);
    if (r != ZB_OK)
        return r;
    if (st->state != STATE_AFTER_F)
        return zb_err_set(err, ZB_EINVAL, "cuda backward_input: no forward pending in the stash");
    const zb_gpt2_span_t *span = &s->span;
    if (!span->head && !dx_out)
        return zb_err_set(err, ZB_EINVAL, "cuda backward_input: missing dx_out");
    if (!span->embed && !dx_in)
        return zb_err_set(err, ZB_EINVAL, "cuda backward_input: missing dx_in");
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda backward_input", err)) != ZB_OK)
        return r;
    if (span->head && !is_bf16(s) && s->fold_scale != 0.0f && grad_scale != s->fold_scale)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda backward_input: the head's forward wrote the logits' gradient at "
                          "scale %g, the backward asks %g",
                          (double)s->fold_scale, (double)grad_scale);
    if (is_bf16(s))
        zb_cu16_backward_input(s, st, dx_out, grad_scale, dx_in);
    else
        backward_input_fp32(s, st, dx_out, grad_scale, dx_in);
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda backward_input", err)) != ZB_OK)
        return r;
    st->state = STATE_AFTER_B;
    return ZB_OK;
}

/* W of block l of the span (0 = its first): += into the stage's gradients. */
static void block_backward_weight(zb_cuda_stage_t *s, int l, const layer_acts_t *a,
                                  const float *x)
{
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels;
    size_t Cz = (size_t)C, L = (size_t)l;
    zb_cu_layernorm_backward_weight(c, G(s, ZB_LN1W) + L * Cz, G(s, ZB_LN1B) + L * Cz, a->dln1, x,
                                    a->ln1_mean, a->ln1_rstd, N, C);
    zb_cu_matmul_backward_weight(c, G(s, ZB_QKVW) + L * 3 * Cz * Cz, G(s, ZB_QKVB) + L * 3 * Cz,
                                 a->dqkv, a->ln1, N, C, 3 * C);
    zb_cu_matmul_backward_weight(c, G(s, ZB_ATTPROJW) + L * Cz * Cz, G(s, ZB_ATTPROJB) + L * Cz,
                                 a->dres2, a->atty, N, C, C);
    zb_cu_layernorm_backward_weight(c, G(s, ZB_LN2W) + L * Cz, G(s, ZB_LN2B) + L * Cz, a->dln2,
                                    a->res2, a->ln2_mean, a->ln2_rstd, N, C);
    zb_cu_matmul_backward_weight(c, G(s, ZB_FCW) + L * 4 * Cz * Cz, G(s, ZB_FCB) + L * 4 * Cz,
                                 a->dfch, a->ln2, N, C, 4 * C);
    zb_cu_matmul_backward_weight(c, G(s, ZB_FCPROJW) + L * 4 * Cz * Cz, G(s, ZB_FCPROJB) + L * Cz,
                                 a->dres3, a->fch_gelu, N, 4 * C, C);
}

static void backward_weight_fp32(zb_cuda_stage_t *s, zb_cuda_stash_t *st)
{
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    if (s->span.head) {
        zb_cu_layernorm_backward_weight(c, G(s, ZB_LNFW), G(s, ZB_LNFB), st->dlnf, st->xs[nl],
                                        st->lnf_mean, st->lnf_rstd, N, C);
        zb_cu_matmul_backward_weight(c, s->wte_head, NULL, st->probs, st->lnf, N, C,
                                     s->cfg.padded_vocab);
    }
    for (int l = nl - 1; l >= 0; l--)
        block_backward_weight(s, l, &st->layers[l], st->xs[l]);
    if (s->span.embed)
        zb_cu_encoder_backward_weight(c, G(s, ZB_WTE), G(s, ZB_WPE), st->dencoded,
                                      st->tokens_host, st->bucket, s->B, s->T, C, s->cfg.vocab);
}

zb_status_t zb_cuda_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st, zb_err_t *err)
{
    zb_status_t r = check_call(s, st, "backward_weight", err);
    if (r != ZB_OK)
        return r;
    if (st->state != STATE_AFTER_B)
        return zb_err_set(err, ZB_EINVAL, "cuda backward_weight: no backward_input pending");
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda backward_weight", err)) != ZB_OK)
        return r;
    if (is_bf16(s))
        zb_cu16_backward_weight(s, st);
    else
        backward_weight_fp32(s, st);
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda backward_weight", err)) != ZB_OK)
        return r;
    st->state = STATE_EMPTY;
    return ZB_OK;
}
