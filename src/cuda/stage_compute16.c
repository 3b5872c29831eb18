/* zbpp — the CUDA stage's F, B and W in bf16 storage (docs/cuda.md "Precision"): activations
 * and stashes bf16, the products bf16 × bf16 with fp32 accumulation on the stage's bf16 copy of
 * its weights (weights16), LayerNorm statistics, the attention's log-sum-exp, losses, parameter
 * gradients and optimizer state fp32. A file of its own beside stage_compute.c rather than
 * branches through it: the op sequence differs (fused residual + LayerNorm, bias and GELU in the
 * GEMM epilogue, flash attention, the classifier in one pass), so the two sequences read best
 * straight through, each mirroring its own forward.
 *
 * The stage's boundary (x_in, x_out, dx_out, dx_in) stays fp32 and is converted here, at the
 * edge: the pipeline's messages and buffers are the same in every precision. A boundary value
 * is a bf16 one widened, so converting it back is exact: a model cut into stages gives the same
 * bits as the whole.
 *
 * Per block, F: [ln1 = LN1(x), fused into the previous block's last residual add] qkv = ln1·Wᵀ+b
 * (BIAS epilogue), flash forward (atty, lse), res2 = x + atty·Wᵀ+b fused with ln2 = LN2(res2),
 * fch_gelu = gelu(ln2·Wᵀ+b) (GELU_AUX_BIAS: fch, the pre-activation, is the aux output B needs),
 * y = res2 + fch_gelu·Wᵀ+b fused with the next LayerNorm. B mirrors it: dfch with the DGELU
 * epilogue, LayerNorm backward with the residual gradient added in the same kernel, flash
 * backward. W: bf16 products into the fp32 gradients (beta = 1), bias and LayerNorm gradients
 * from fixed-order column-sum partials. The stash keeps for B what B reads (KEEP_F: qkv, lse,
 * fch) and for W what W reads (KEEP_B: the inputs of every product and the gradients B wrote);
 * a block's dqkv and dfch reuse the F-only buffers of the block above it (zb_cu16_layout). */
#include <string.h>

#include "cuda/flash_attn.h"
#include "cuda/gemm.h"
#include "cuda/prof.h"
#include "cuda/stage.h"

/* ---- stash and scratch ---- */

#define TAKE16(lo, n, keep) ((zb_bf16_t *)zb_cu_take((lo), (n) * sizeof(zb_bf16_t), (keep)))
#define TAKE32(lo, n, keep) ((float *)zb_cu_take((lo), (n) * sizeof(float), (keep)))

/* n bf16 in a buffer whose F-only contents are dead by now: counted live after B, not allocated.
 * The donor was taken KEEP_DONOR, so in a split stash it lies in the FW region, whose slot the
 * microbatch holds until W. (Reuse always pays there too: at the FW peak each microbatch in
 * flight holds an FB or a BW slot, so n_FB + n_BW >= n_FW and moving the donors from FB and the
 * gradients from BW into FW never adds bytes.) */
static zb_bf16_t *reuse16(zb_cu_layout_t *lo, zb_bf16_t *dead, size_t n)
{
    lo->bytes_b += n * sizeof(zb_bf16_t);
    return dead;
}

void zb_cu16_layout(zb_cu_layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels;
    size_t lse = N * (size_t)s->cfg.heads, Vp = (size_t)s->cfg.padded_vocab;
    int nl = s->nl;
    const int FB = KEEP_F | KEEP_B;
    layer16_t dummy;
    if (s->span.embed)
        zb_cu_layout_embed(lo, st, s);
    for (int l = 0; l <= nl; l++) {
        if (l == nl && !s->span.head)
            break;
        zb_bf16_t *x = TAKE16(lo, N * C, FB);
        if (st)
            st->xs16[l] = x;
    }
    for (int l = 0; l < nl; l++) {
        layer16_t *a = st ? &st->layers16[l] : &dummy;
        a->ln1 = TAKE16(lo, N * C, FB);
        a->ln1_mean = TAKE32(lo, N, FB);
        a->ln1_rstd = TAKE32(lo, N, FB);
        const int donor = KEEP_F | (l > 0 ? KEEP_DONOR : 0); /* reused by block l-1's B */
        a->qkv = TAKE16(lo, N * 3 * C, donor);
        a->atty = TAKE16(lo, N * C, FB);
        a->lse = TAKE32(lo, lse, KEEP_F);
        a->res2 = TAKE16(lo, N * C, FB);
        a->ln2 = TAKE16(lo, N * C, FB);
        a->ln2_mean = TAKE32(lo, N, FB);
        a->ln2_rstd = TAKE32(lo, N, FB);
        a->fch = TAKE16(lo, N * 4 * C, donor);
        a->fch_gelu = TAKE16(lo, N * 4 * C, FB);
    }
    /* B's gradients. B runs the blocks top down, so when block l's B starts, block l+1's B is
     * done and its F-only buffers (qkv, fch: read by its flash backward and DGELU, never by W)
     * are dead: block l's dqkv and dfch, the same sizes, take their place. Only the top block
     * allocates its own. Live bytes are counted as before (they are live after B). */
    for (int l = 0; l < nl; l++) {
        layer16_t *a = st ? &st->layers16[l] : &dummy;
        const layer16_t *donor = st && l + 1 < nl ? &st->layers16[l + 1] : NULL;
        a->dres3 = TAKE16(lo, N * C, KEEP_B);
        a->dfch = l + 1 < nl ? reuse16(lo, donor ? donor->fch : NULL, N * 4 * C)
                             : TAKE16(lo, N * 4 * C, KEEP_B);
        a->dln2 = TAKE16(lo, N * C, KEEP_B);
        a->dres2 = TAKE16(lo, N * C, KEEP_B);
        a->dqkv = l + 1 < nl ? reuse16(lo, donor ? donor->qkv : NULL, N * 3 * C)
                             : TAKE16(lo, N * 3 * C, KEEP_B);
        a->dln1 = TAKE16(lo, N * C, KEEP_B);
    }
    if (s->span.head) {
        int *targets = zb_cu_take(lo, N * sizeof(int), KEEP_F);
        zb_bf16_t *lnf = TAKE16(lo, N * C, FB);
        float *m = TAKE32(lo, N, FB), *r = TAKE32(lo, N, FB);
        zb_bf16_t *logits = TAKE16(lo, N * Vp, FB), *dlnf = TAKE16(lo, N * C, KEEP_B);
        if (st) {
            st->targets = targets;
            st->lnf16 = lnf;
            st->lnf_mean = m;
            st->lnf_rstd = r;
            st->logits16 = logits;
            st->dlnf16 = dlnf;
        }
    }
}

/* The per-call scratch: tmp16 (a projection's output before its residual add), datty16 (the
 * attention output's gradient), edge16 (the stage's boundary in bf16), the flash backward's
 * scratch, the losses (N floats). */
static void scratch_walk(zb_cu_layout_t *lo, zb_cuda_stage_t *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels;
    int hs = s->cfg.channels / s->cfg.heads;
    zb_bf16_t *tmp = TAKE16(lo, N * C, 0), *datty = TAKE16(lo, N * C, 0);
    zb_bf16_t *edge = TAKE16(lo, N * C, 0);
    void *flash = zb_cu_take(lo, zb_cuk_flash_backward_scratch_bytes(s->B, s->T, s->cfg.heads, hs),
                             0);
    float *losses = TAKE32(lo, N, 0);
    if (lo->base) {
        s->tmp16 = tmp;
        s->datty16 = datty;
        s->edge16 = edge;
        s->flash_scr = flash;
        s->losses = losses;
    }
}

size_t zb_cu16_scratch_bytes(const zb_cuda_stage_t *s)
{
    zb_cu_layout_t lo = {0};
    scratch_walk(&lo, (zb_cuda_stage_t *)s); /* base NULL: nothing is written */
    return lo.off;
}

void zb_cu16_scratch_assign(zb_cuda_stage_t *s)
{
    zb_cu_layout_t lo = {.base = s->scratch_mem};
    scratch_walk(&lo, s);
}

/* ---- the ops, over the typed GEMM and the bf16 kernels ---- */

/* out[N,OC] = inp[N,C] · w[OC,C]ᵀ with epilogue `epi` (bias: the bf16 copy's, which cuBLASLt
 * fuses, gemm.h; aux [N,OC] for GELU). */
static void linear_forward(zb_cu_ctx_t *c, zb_bf16_t *out, const zb_bf16_t *inp,
                           const zb_bf16_t *w, const zb_bf16_t *bias, zb_cu_epilogue_t epi,
                           zb_bf16_t *aux, int N, int C, int OC)
{
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    zb_cu_gemm_ex(c, &(zb_cu_gemm_args_t){
                         .ta = 0, .tb = 1, .M = N, .N = OC, .K = C, .alpha = 1.0f, .beta = 0.0f,
                         .A = inp, .lda = C, .B = w, .ldb = C, .C = out, .ldc = OC,
                         .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_BF16, .epilogue = epi,
                         .bias = bias, .bias_type = ZB_CU_BF16, .aux = aux, .ldaux = OC});
    zb_cu_prof_end(c);
}

/* dinp[N,C] = alpha · dout[N,OC] · w[OC,C] (written), times gelu'(aux) with ZB_CU_EPI_DGELU. */
static void linear_backward_input(zb_cu_ctx_t *c, zb_bf16_t *dinp, const zb_bf16_t *dout,
                                  const zb_bf16_t *w, float alpha, zb_cu_epilogue_t epi,
                                  zb_bf16_t *aux, int N, int C, int OC)
{
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    zb_cu_gemm_ex(c, &(zb_cu_gemm_args_t){
                         .ta = 0, .tb = 0, .M = N, .N = C, .K = OC, .alpha = alpha, .beta = 0.0f,
                         .A = dout, .lda = OC, .B = w, .ldb = C, .C = dinp, .ldc = C,
                         .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_BF16, .epilogue = epi,
                         .aux = aux, .ldaux = C});
    zb_cu_prof_end(c);
}

/* The context's column-sum scratch, made to hold the partials of `cols` columns over N rows
 * (NULL when the context has failed). */
static float *reserve_partials(zb_cu_ctx_t *c, int N, int cols)
{
    if (c->status != ZB_OK || !zb_cu_part_reserve(c, (size_t)zb_cu_colsum_chunks(N) * cols))
        return NULL;
    return c->part;
}

/* dw[OC,C] += alpha · dout[N,OC]ᵀ · inp[N,C] into fp32 (beta = 1: W accumulates, so deferring it
 * costs nothing); dbias[OC] += the column sums of dout (fixed-order partials). */
static void linear_backward_weight(zb_cu_ctx_t *c, float *dw, float *dbias, const zb_bf16_t *dout,
                                   const zb_bf16_t *inp, float alpha, int N, int C, int OC)
{
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    zb_cu_gemm_ex(c, &(zb_cu_gemm_args_t){
                         .ta = 1, .tb = 0, .M = OC, .N = C, .K = N, .alpha = alpha, .beta = 1.0f,
                         .A = dout, .lda = OC, .B = inp, .ldb = C, .C = dw, .ldc = C,
                         .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_F32,
                         .epilogue = ZB_CU_EPI_NONE});
    float *part = dbias ? reserve_partials(c, N, OC) : NULL;
    if (part) {
        zb_cuk16_colsum_partials(c->stream, part, dout, N, OC);
        zb_cuk_colsum_finish(c->stream, dbias, part, zb_cu_colsum_chunks(N), OC);
        zb_cu_launch_check(c, "bf16 bias gradient");
    }
    zb_cu_prof_end(c);
}

/* The fused residual add + LayerNorm (b NULL: LayerNorm of a alone). */
static void residual_layernorm(zb_cu_ctx_t *c, zb_bf16_t *res_out, zb_bf16_t *ln_out, float *mean,
                               float *rstd, const zb_bf16_t *a, const zb_bf16_t *b,
                               const float *w, const float *bias, int N, int C)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_NORM,
               zb_cuk16_residual_layernorm_forward(c->stream, res_out, ln_out, mean, rstd, a, b, w,
                                                   bias, N, C));
    zb_cu_launch_check(c, "bf16 residual + layernorm");
}

static void layernorm_backward_input(zb_cu_ctx_t *c, zb_bf16_t *dinp, const zb_bf16_t *dres,
                                     const zb_bf16_t *dout, const zb_bf16_t *inp,
                                     const float *mean, const float *rstd, const float *w, int N,
                                     int C)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_NORM,
               zb_cuk16_layernorm_backward_input(c->stream, dinp, dres, dout, inp, mean, rstd, w,
                                                 N, C));
    zb_cu_launch_check(c, "bf16 layernorm backward_input");
}

static void layernorm_backward_weight(zb_cu_ctx_t *c, float *dw, float *db, const zb_bf16_t *dout,
                                      const zb_bf16_t *inp, const float *mean, const float *rstd,
                                      int N, int C)
{
    float *part = reserve_partials(c, N, 2 * C);
    if (!part)
        return;
    int chunks = zb_cu_colsum_chunks(N);
    float *pw = part, *pb = part + (size_t)chunks * C;
    zb_cu_prof_begin(c, ZB_CUDA_K_NORM);
    zb_cuk16_layernorm_weight_partials(c->stream, pw, pb, dout, inp, mean, rstd, N, C);
    zb_cuk_colsum_finish(c->stream, dw, pw, chunks, C);
    zb_cuk_colsum_finish(c->stream, db, pb, chunks, C);
    zb_cu_prof_end(c);
    zb_cu_launch_check(c, "bf16 layernorm backward_weight");
}

/* Conversions at the stage's edge. */
static void to_bf16(zb_cu_ctx_t *c, zb_bf16_t *dst, const float *src, size_t n)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk16_from_f32(c->stream, dst, src, n));
    zb_cu_launch_check(c, "bf16 edge conversion");
}

static void to_f32(zb_cu_ctx_t *c, float *dst, const zb_bf16_t *src, size_t n)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk16_to_f32(c->stream, dst, src, n));
    zb_cu_launch_check(c, "bf16 edge conversion");
}

/* ---- F / B / W ---- */

typedef struct {
    const zb_bf16_t *qkvw, *attprojw, *fcw, *fcprojw; /* the bf16 copies */
    const zb_bf16_t *qkvb, *attprojb, *fcb, *fcprojb;  /* the biases' bf16 copies */
    const float *ln1w, *ln1b, *ln2w, *ln2b;
} block16_t;

static const zb_bf16_t *W16(const zb_cuda_stage_t *s, zb_gpt2_tensor_t t)
{
    return s->weights16 + s->offs[t];
}

/* Block l of the span (0 = its first) in the stage's buffers. */
static block16_t block16(const zb_cuda_stage_t *s, int l)
{
    size_t C = (size_t)s->cfg.channels, L = (size_t)l;
    block16_t b = {
        W16(s, ZB_QKVW) + L * 3 * C * C, W16(s, ZB_ATTPROJW) + L * C * C,
        W16(s, ZB_FCW) + L * 4 * C * C,  W16(s, ZB_FCPROJW) + L * 4 * C * C,
        W16(s, ZB_QKVB) + L * 3 * C,     W16(s, ZB_ATTPROJB) + L * C,
        W16(s, ZB_FCB) + L * 4 * C,      W16(s, ZB_FCPROJB) + L * C,
        P(s, ZB_LN1W) + L * C,           P(s, ZB_LN1B) + L * C,
        P(s, ZB_LN2W) + L * C,           P(s, ZB_LN2B) + L * C,
    };
    return b;
}

/* Block l's forward from its input xs16[l] and ln1 (already written), up to the residual sum
 * that ends it, fused with whatever LayerNorm follows on this stage: the next block's LN1, the
 * final LN, or none (the stage's output, into edge16). */
static void block16_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, int l)
{
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels, NH = s->cfg.heads;
    block16_t w = block16(s, l);
    layer16_t *a = &st->layers16[l];
    const zb_bf16_t *x = st->xs16[l];
    linear_forward(c, a->qkv, a->ln1, w.qkvw, w.qkvb, ZB_CU_EPI_BIAS, NULL, N, C, 3 * C);
    if (c->status == ZB_OK) {
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash_forward(c->stream, a->atty, a->lse, a->qkv, s->B, s->T, NH,
                                        C / NH));
        zb_cu_launch_check(c, "flash attention forward");
    }
    linear_forward(c, s->tmp16, a->atty, w.attprojw, w.attprojb, ZB_CU_EPI_BIAS, NULL, N, C, C);
    residual_layernorm(c, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, x, s->tmp16, w.ln2w, w.ln2b,
                       N, C);
    linear_forward(c, a->fch_gelu, a->ln2, w.fcw, w.fcb, ZB_CU_EPI_GELU_AUX_BIAS, a->fch, N, C,
                   4 * C);
    linear_forward(c, s->tmp16, a->fch_gelu, w.fcprojw, w.fcprojb, ZB_CU_EPI_BIAS, NULL, N, 4 * C,
                   C);
    if (l + 1 < s->nl) {
        layer16_t *n = &st->layers16[l + 1];
        block16_t wn = block16(s, l + 1);
        residual_layernorm(c, st->xs16[l + 1], n->ln1, n->ln1_mean, n->ln1_rstd, a->res2, s->tmp16,
                           wn.ln1w, wn.ln1b, N, C);
    } else if (s->span.head) {
        residual_layernorm(c, st->xs16[l + 1], st->lnf16, st->lnf_mean, st->lnf_rstd, a->res2,
                           s->tmp16, P(s, ZB_LNFW), P(s, ZB_LNFB), N, C);
    } else if (c->status == ZB_OK) {
        ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE,
                   zb_cuk16_residual_forward(c->stream, s->edge16, a->res2, s->tmp16,
                                             (size_t)N * C));
        zb_cu_launch_check(c, "bf16 residual forward");
    }
}

void zb_cu16_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *x_in, float *x_out)
{
    zb_cu_ctx_t *c = &s->ctx;
    const zb_gpt2_span_t *span = &s->span;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    size_t NC = (size_t)N * C;
    zb_bf16_t *x0 = (nl > 0 || span->head) ? st->xs16[0] : s->edge16;
    if (span->embed && c->status == ZB_OK) {
        ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE,
                   zb_cuk16_encoder_forward(c->stream, x0, st->tokens, P(s, ZB_WTE), P(s, ZB_WPE),
                                            s->B, s->T, C));
        zb_cu_launch_check(c, "bf16 encoder forward");
    } else if (!span->embed) {
        to_bf16(c, x0, x_in, NC);
    }
    /* the LayerNorm that opens the stage (later ones are fused into the residual adds) */
    if (nl > 0) {
        block16_t w = block16(s, 0);
        layer16_t *a = &st->layers16[0];
        residual_layernorm(c, NULL, a->ln1, a->ln1_mean, a->ln1_rstd, x0, NULL, w.ln1w, w.ln1b, N,
                           C);
    } else if (span->head) {
        residual_layernorm(c, NULL, st->lnf16, st->lnf_mean, st->lnf_rstd, x0, NULL,
                           P(s, ZB_LNFW), P(s, ZB_LNFB), N, C);
    }
    for (int l = 0; l < nl; l++)
        block16_forward(s, st, l);
    if (!span->head) {
        to_f32(c, x_out, s->edge16, NC);
        return;
    }
    int Vp = s->cfg.padded_vocab;
    /* logits[N,Vp] = lnf · WTEᵀ; the classifier leaves the unscaled gradient (p − onehot) in
     * their place, and B and W apply grad_scale as the products' alpha */
    linear_forward(c, st->logits16, st->lnf16, WTE16(s), NULL, ZB_CU_EPI_NONE, NULL, N, C,
                   Vp);
    if (c->status == ZB_OK) {
        ZB_CU_PROF(c, ZB_CUDA_K_CLASSIFIER,
                   zb_cuk16_crossentropy_fused(c->stream, s->losses, st->logits16, st->targets,
                                               1.0f, N, s->cfg.vocab, Vp));
        zb_cu_launch_check(c, "bf16 classifier");
    }
}

/* Block l's B: dres3 (the gradient of its output) in, dx (of its input) out. */
static void block16_backward_input(zb_cuda_stage_t *s, zb_cuda_stash_t *st, int l, zb_bf16_t *dx)
{
    zb_cu_ctx_t *c = &s->ctx;
    int B = s->B, T = s->T, N = B * T, C = s->cfg.channels, NH = s->cfg.heads;
    block16_t w = block16(s, l);
    layer16_t *a = &st->layers16[l];
    linear_backward_input(c, a->dfch, a->dres3, w.fcprojw, 1.0f, ZB_CU_EPI_DGELU, a->fch, N,
                          4 * C, C);
    linear_backward_input(c, a->dln2, a->dfch, w.fcw, 1.0f, ZB_CU_EPI_NONE, NULL, N, C, 4 * C);
    layernorm_backward_input(c, a->dres2, a->dres3, a->dln2, a->res2, a->ln2_mean, a->ln2_rstd,
                             w.ln2w, N, C);
    linear_backward_input(c, s->datty16, a->dres2, w.attprojw, 1.0f, ZB_CU_EPI_NONE, NULL, N, C,
                          C);
    if (c->status == ZB_OK) {
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash_backward(c->stream, a->dqkv, s->flash_scr, s->datty16, a->qkv,
                                         a->atty, a->lse, B, T, NH, C / NH));
        zb_cu_launch_check(c, "flash attention backward");
    }
    linear_backward_input(c, a->dln1, a->dqkv, w.qkvw, 1.0f, ZB_CU_EPI_NONE, NULL, N, C, 3 * C);
    layernorm_backward_input(c, dx, a->dres2, a->dln1, st->xs16[l], a->ln1_mean, a->ln1_rstd,
                             w.ln1w, N, C);
}

void zb_cu16_backward_input(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
                            float grad_scale, float *dx_in)
{
    zb_cu_ctx_t *c = &s->ctx;
    const zb_gpt2_span_t *span = &s->span;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    size_t NC = (size_t)N * C;
    zb_bf16_t *dtop = nl > 0 ? st->layers16[nl - 1].dres3 : s->edge16;
    st->grad_scale = grad_scale; /* the head's W scales by it too */
    if (span->head) {
        linear_backward_input(c, st->dlnf16, st->logits16, WTE16(s), grad_scale,
                              ZB_CU_EPI_NONE, NULL, N, C, s->cfg.padded_vocab);
        layernorm_backward_input(c, dtop, NULL, st->dlnf16, st->xs16[nl], st->lnf_mean,
                                 st->lnf_rstd, P(s, ZB_LNFW), N, C);
    } else {
        to_bf16(c, dtop, dx_out, NC);
    }
    for (int l = nl - 1; l >= 0; l--)
        block16_backward_input(s, st, l, l > 0 ? st->layers16[l - 1].dres3 : s->edge16);
    to_f32(c, span->embed ? st->dencoded : dx_in, s->edge16, NC);
}

static void block16_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st, int l)
{
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels;
    size_t Cz = (size_t)C, L = (size_t)l;
    const layer16_t *a = &st->layers16[l];
    layernorm_backward_weight(c, G(s, ZB_LN1W) + L * Cz, G(s, ZB_LN1B) + L * Cz, a->dln1,
                              st->xs16[l], a->ln1_mean, a->ln1_rstd, N, C);
    linear_backward_weight(c, G(s, ZB_QKVW) + L * 3 * Cz * Cz, G(s, ZB_QKVB) + L * 3 * Cz, a->dqkv,
                           a->ln1, 1.0f, N, C, 3 * C);
    linear_backward_weight(c, G(s, ZB_ATTPROJW) + L * Cz * Cz, G(s, ZB_ATTPROJB) + L * Cz,
                           a->dres2, a->atty, 1.0f, N, C, C);
    layernorm_backward_weight(c, G(s, ZB_LN2W) + L * Cz, G(s, ZB_LN2B) + L * Cz, a->dln2, a->res2,
                              a->ln2_mean, a->ln2_rstd, N, C);
    linear_backward_weight(c, G(s, ZB_FCW) + L * 4 * Cz * Cz, G(s, ZB_FCB) + L * 4 * Cz, a->dfch,
                           a->ln2, 1.0f, N, C, 4 * C);
    linear_backward_weight(c, G(s, ZB_FCPROJW) + L * 4 * Cz * Cz, G(s, ZB_FCPROJB) + L * Cz,
                           a->dres3, a->fch_gelu, 1.0f, N, 4 * C, C);
}

void zb_cu16_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st)
{
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    if (s->span.head) {
        layernorm_backward_weight(c, G(s, ZB_LNFW), G(s, ZB_LNFB), st->dlnf16, st->xs16[nl],
                                  st->lnf_mean, st->lnf_rstd, N, C);
        linear_backward_weight(c, s->wte_head, NULL, st->logits16, st->lnf16, st->grad_scale, N, C,
                               s->cfg.padded_vocab);
    }
    for (int l = nl - 1; l >= 0; l--)
        block16_backward_weight(s, st, l);
    if (s->span.embed)
        ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE,
                   zb_cu_encoder_backward_weight(c, G(s, ZB_WTE), G(s, ZB_WPE), st->dencoded,
                                                 st->tokens_host, st->bucket, s->B, s->T, C,
                                                 s->cfg.vocab));
}
