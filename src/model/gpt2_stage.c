/* GPT-2 stage execution: forward (F), backward_input (B), backward_weight (W), and the stash
 * that carries a (stage, microbatch)'s activations from F to B to W.
 *
 * Stash layout: ONE allocation holding every buffer. Each buffer is tagged with the phases during
 * which its contents are logically needed: after F (read by B or W), after B (read by W), or
 * neither (per-call scratch: it is inside the allocation as a workspace but never counted).
 * zb_gpt2_stage_mem runs the same layout walk without memory, so the model and the stash cannot
 * disagree. docs/compute.md lists every buffer and who reads it. */
#include "zbpp/gpt2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "zbpp/nn.h"

enum { KEEP_F = 1, KEEP_B = 2 }; /* live after F / live after B */
enum { STATE_EMPTY, STATE_AFTER_F, STATE_AFTER_B };

typedef struct {
    /* forward activations */
    float *ln1, *ln1_mean, *ln1_rstd; /* [N,C], [N], [N] */
    float *qkv;                       /* [N,3C]  B only (attention) */
    float *att;                       /* [B,NH,T,T]  B only */
    float *atty;                      /* [N,C]  input of attproj: W */
    float *res2;                      /* [N,C]  input of LN2 */
    float *ln2, *ln2_mean, *ln2_rstd; /* [N,C], [N], [N] */
    float *fch;                       /* [N,4C]  pre-GELU: B only */
    float *fch_gelu;                  /* [N,4C]  input of fcproj: W */
    /* gradients B leaves for W */
    float *dres3; /* [N,C]  grad of the block output = dout of fcproj */
    float *dfch;  /* [N,4C] dout of fc */
    float *dln2;  /* [N,C]  dout of LN2 */
    float *dres2; /* [N,C]  dout of attproj */
    float *dqkv;  /* [N,3C] dout of qkv */
    float *dln1;  /* [N,C]  dout of LN1 */
} layer_acts_t;

struct zb_gpt2_stash {
    zb_gpt2_config_t cfg;
    zb_gpt2_span_t span;
    zb_gpt2_keep_t keep;
    int B, T, nl;
    int state;
    bool split;              /* no allocation of its own: regions bound by zb_gpt2_stash_bind */
    size_t bytes_f, bytes_b; /* logical bytes after F / after B */
    void *mem;               /* the one allocation */
    layer_acts_t *layers;    /* [nl] pointers into mem */
    float **xs;              /* [nl+1]: xs[l] input of block l; xs[nl] LNF input (head only) */
    int *tokens;             /* [N] embed */
    float *dencoded;         /* [N,C] embed: grad of the embedding output */
    int *targets;            /* [N] head */
    float *lnf, *lnf_mean, *lnf_rstd; /* head */
    float *probs;                     /* [N,Vp] head: logits -> probs (F) -> dlogits (B) */
    float *dlnf;                      /* [N,C] head: dout of the final LayerNorm */
    /* scratch (not counted) */
    float *tmp;       /* [N,C] projection outputs before the residual add */
    float *datty;     /* [N,C] */
    float *dfch_gelu; /* [N,4C] */
    float *att_scr;   /* [T,T] */
    float *losses;    /* [N] */
    float *ln_scr;    /* [N,C] selective: LN1/LN2 outputs, computed where they are read */
};

/* ---- layout ---- */

/* One allocation (split = false: every buffer in region 0, in walk order), or one region per
 * lifetime (split: zb_gpt2_region_t of the buffer's keep flags, each from its own base). */
typedef struct {
    char *base; /* NULL: only measure */
    size_t off;
    size_t bytes_f, bytes_b;
    bool split;
    char *bases[ZB_GPT2_NUM_REGIONS]; /* split: NULL = region not bound (its buffers NULL) */
    size_t offs[ZB_GPT2_NUM_REGIONS];
} layout_t;

static int region_of(int keep)
{
    return keep == (KEEP_F | KEEP_B) ? ZB_GPT2_REGION_FW
           : keep == KEEP_F          ? ZB_GPT2_REGION_FB
           : keep == KEEP_B          ? ZB_GPT2_REGION_BW
                                     : ZB_GPT2_REGION_SCRATCH;
}

static void *take(layout_t *lo, size_t bytes, int keep)
{
    if (lo->split) {
        int r = region_of(keep);
        lo->offs[r] = (lo->offs[r] + 63) & ~(size_t)63;
        void *p = lo->bases[r] ? lo->bases[r] + lo->offs[r] : NULL;
        lo->offs[r] += bytes;
        if (keep & KEEP_F)
            lo->bytes_f += bytes;
        if (keep & KEEP_B)
            lo->bytes_b += bytes;
        return p;
    }
    lo->off = (lo->off + 63) & ~(size_t)63; /* cache-line aligned buffers */
    void *p = lo->base ? lo->base + lo->off : NULL;
    lo->off += bytes;
    if (keep & KEEP_F)
        lo->bytes_f += bytes;
    if (keep & KEEP_B)
        lo->bytes_b += bytes;
    return p;
}

#define TAKE_F(lo, n, keep) ((float *)take((lo), (n) * sizeof(float), (keep)))

/* Walk every buffer of the stage in a fixed order. With st == NULL only sizes are computed.
 * ZB_GPT2_KEEP_SELECTIVE: the LayerNorm outputs (read only by W) and the GELU output (read only
 * by W) are not kept: they live in scratch during F and W recomputes them from what is kept
 * (the LN input and statistics, the pre-GELU activation, which B needs anyway). */
static void layout(layout_t *lo, zb_gpt2_stash_t *st, const zb_gpt2_config_t *cfg,
                   const zb_gpt2_span_t *span, int B, int T, zb_gpt2_keep_t keep)
{
    const bool sel = keep == ZB_GPT2_KEEP_SELECTIVE;
    size_t N = (size_t)B * T, C = (size_t)cfg->channels, NH = (size_t)cfg->heads;
    size_t Vp = (size_t)cfg->padded_vocab;
    int nl = span->layer_end - span->layer_begin;
    const int FB = KEEP_F | KEEP_B;
    layer_acts_t dummy;
    float *fdummy;
    int *idummy;

    if (span->embed) {
        idummy = take(lo, N * sizeof(int), FB); /* tokens: W of the embedding */
        if (st)
            st->tokens = idummy;
        fdummy = TAKE_F(lo, N * C, KEEP_B);
        if (st)
            st->dencoded = fdummy;
    }
    for (int l = 0; l <= nl; l++) {
        /* block inputs are read by LN1's B and W; the last is the LNF input (head only) */
        if (l == nl && !span->head)
            break; /* a non-head stage writes its last block straight into x_out */
        fdummy = TAKE_F(lo, N * C, FB);
        if (st)
            st->xs[l] = fdummy;
    }
    for (int l = 0; l < nl; l++) {
        layer_acts_t *a = st ? &st->layers[l] : &dummy;
        a->ln1 = sel ? NULL : TAKE_F(lo, N * C, FB);
        a->ln1_mean = TAKE_F(lo, N, FB);
        a->ln1_rstd = TAKE_F(lo, N, FB);
        a->qkv = TAKE_F(lo, N * 3 * C, KEEP_F);
        a->att = TAKE_F(lo, N * NH * (size_t)T, KEEP_F);
        a->atty = TAKE_F(lo, N * C, FB);
        a->res2 = TAKE_F(lo, N * C, FB);
        a->ln2 = sel ? NULL : TAKE_F(lo, N * C, FB);
        a->ln2_mean = TAKE_F(lo, N, FB);
        a->ln2_rstd = TAKE_F(lo, N, FB);
        a->fch = TAKE_F(lo, N * 4 * C, sel ? FB : KEEP_F); /* selective: W redoes GELU from it */
        a->fch_gelu = sel ? NULL : TAKE_F(lo, N * 4 * C, FB);
        a->dres3 = TAKE_F(lo, N * C, KEEP_B);
        a->dfch = TAKE_F(lo, N * 4 * C, KEEP_B);
        a->dln2 = TAKE_F(lo, N * C, KEEP_B);
        a->dres2 = TAKE_F(lo, N * C, KEEP_B);
        a->dqkv = TAKE_F(lo, N * 3 * C, KEEP_B);
        a->dln1 = TAKE_F(lo, N * C, KEEP_B);
    }
    if (span->head) {
        int *targets = take(lo, N * sizeof(int), KEEP_F); /* read by B only */
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
    /* per-call scratch */
    float *tmp = TAKE_F(lo, N * C, 0), *datty = TAKE_F(lo, N * C, 0);
    float *dfg = TAKE_F(lo, N * 4 * C, 0), *ascr = TAKE_F(lo, zb_attention_scratch_floats(T), 0);
    float *losses = TAKE_F(lo, N, 0);
    float *ln_scr = sel ? TAKE_F(lo, N * C, 0) : NULL;
    if (st) {
        st->tmp = tmp;
        st->datty = datty;
        st->dfch_gelu = dfg;
        st->att_scr = ascr;
        st->losses = losses;
        st->ln_scr = ln_scr;
        /* selective: both LN outputs share one scratch (LN1's is consumed by the QKV matmul
         * before LN2 runs) and the GELU output borrows B's GELU-gradient scratch */
        for (int l = 0; sel && l < nl; l++) {
            st->layers[l].ln1 = st->layers[l].ln2 = ln_scr;
            st->layers[l].fch_gelu = dfg;
        }
    }
}

static zb_status_t check_shape(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                               int T, zb_err_t *err)
{
    zb_status_t s = zb_gpt2_config_check(cfg, err);
    if (s != ZB_OK)
        return s;
    if (!span)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: span is NULL");
    if (span->layer_begin < 0 || span->layer_begin > span->layer_end ||
        span->layer_end > cfg->layers)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: layers [%d, %d) not within [0, %d)",
                          span->layer_begin, span->layer_end, cfg->layers);
    if (span->embed && span->layer_begin != 0)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: embedding stage must start at layer 0");
    if (span->head && span->layer_end != cfg->layers)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: head stage must end at layer %d",
                          cfg->layers);
    if (span->layer_begin == span->layer_end && !span->embed && !span->head)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: empty stage (no layers, embed or head)");
    if (B <= 0 || B > (1 << 16))
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: batch size %d not in [1, 65536]", B);
    if (T <= 0 || T > cfg->max_seq)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stage: sequence length %d not in [1, %d]", T,
                          cfg->max_seq);
    return ZB_OK;
}

void zb_gpt2_stage_mem_keep(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                            int T, zb_gpt2_keep_t keep, size_t *after_f, size_t *after_b)
{
    layout_t lo = {0};
    if (check_shape(cfg, span, B, T, NULL) == ZB_OK)
        layout(&lo, NULL, cfg, span, B, T, keep);
    if (after_f)
        *after_f = lo.bytes_f;
    if (after_b)
        *after_b = lo.bytes_b;
}

void zb_gpt2_stage_mem(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B, int T,
                       size_t *after_f, size_t *after_b)
{
    zb_gpt2_stage_mem_keep(cfg, span, B, T, ZB_GPT2_KEEP_ALL, after_f, after_b);
}

size_t zb_gpt2_stash_capacity_keep(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                   int B, int T, zb_gpt2_keep_t keep)
{
    layout_t lo = {0};
    if (check_shape(cfg, span, B, T, NULL) == ZB_OK)
        layout(&lo, NULL, cfg, span, B, T, keep);
    return lo.off ? lo.off : 64;
}

size_t zb_gpt2_stash_capacity(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T)
{
    return zb_gpt2_stash_capacity_keep(cfg, span, B, T, ZB_GPT2_KEEP_ALL);
}

zb_status_t zb_gpt2_stash_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_gpt2_stash_t **out, zb_err_t *err)
{
    return zb_gpt2_stash_new_keep(cfg, span, B, T, ZB_GPT2_KEEP_ALL, out, err);
}

/* A stash's shell for (cfg, span, B, T, keep): the checked shape and its tables, no buffers. */
static zb_status_t stash_shell(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                               int T, zb_gpt2_keep_t keep, zb_gpt2_stash_t **out, zb_err_t *err)
{
    *out = NULL;
    zb_status_t s = check_shape(cfg, span, B, T, err);
    if (s != ZB_OK)
        return s;
    if (keep != ZB_GPT2_KEEP_ALL && keep != ZB_GPT2_KEEP_SELECTIVE)
        return zb_err_set(err, ZB_EINVAL, "gpt2 stash: unknown keep mode %d", (int)keep);
    int nl = span->layer_end - span->layer_begin;
    zb_gpt2_stash_t *st = calloc(1, sizeof *st);
    if (st) {
        st->layers = calloc(nl > 0 ? (size_t)nl : 1, sizeof *st->layers);
        st->xs = calloc((size_t)nl + 1, sizeof *st->xs);
    }
    if (!st || !st->layers || !st->xs) {
        zb_gpt2_stash_free(st);
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate an activation stash's tables");
    }
    st->cfg = *cfg;
    st->span = *span;
    st->B = B;
    st->T = T;
    st->nl = nl;
    st->keep = keep;
    st->state = STATE_EMPTY;
    *out = st;
    return ZB_OK;
}

zb_status_t zb_gpt2_stash_new_keep(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                   int B, int T, zb_gpt2_keep_t keep, zb_gpt2_stash_t **out,
                                   zb_err_t *err)
{
    zb_gpt2_stash_t *st;
    zb_status_t s = stash_shell(cfg, span, B, T, keep, &st, err);
    if (s != ZB_OK)
        return s;
    layout_t lo = {0};
    layout(&lo, NULL, cfg, span, B, T, keep);
    if (posix_memalign(&st->mem, 64, lo.off ? lo.off : 64) != 0) {
        st->mem = NULL;
        zb_gpt2_stash_free(st);
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the activation stash (%.1f MB)",
                          lo.off / 1e6);
    }
    layout_t real = {.base = st->mem};
    layout(&real, st, cfg, span, B, T, keep);
    st->bytes_f = real.bytes_f;
    st->bytes_b = real.bytes_b;
    *out = st;
    return ZB_OK;
}

void zb_gpt2_stash_regions(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                           int T, zb_gpt2_keep_t keep, size_t bytes[ZB_GPT2_NUM_REGIONS])
{
    layout_t lo = {.split = true};
    if (check_shape(cfg, span, B, T, NULL) == ZB_OK)
        layout(&lo, NULL, cfg, span, B, T, keep);
    for (int r = 0; r < ZB_GPT2_NUM_REGIONS; r++)
        bytes[r] = lo.offs[r];
}

zb_status_t zb_gpt2_stash_new_split(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                    int B, int T, zb_gpt2_keep_t keep, zb_gpt2_stash_t **out,
                                    zb_err_t *err)
{
    zb_gpt2_stash_t *st;
    zb_status_t s = stash_shell(cfg, span, B, T, keep, &st, err);
    if (s != ZB_OK)
        return s;
    st->split = true;
    layout_t lo = {.split = true};
    layout(&lo, st, cfg, span, B, T, keep); /* every pointer NULL until bound */
    st->bytes_f = lo.bytes_f;
    st->bytes_b = lo.bytes_b;
    *out = st;
    return ZB_OK;
}

void zb_gpt2_stash_bind(zb_gpt2_stash_t *st, void *const base[ZB_GPT2_NUM_REGIONS])
{
    if (!st->split)
        return;
    layout_t lo = {.split = true};
    for (int r = 0; r < ZB_GPT2_NUM_REGIONS; r++)
        lo.bases[r] = base[r];
    layout(&lo, st, &st->cfg, &st->span, st->B, st->T, st->keep);
}

void zb_gpt2_stash_free(zb_gpt2_stash_t *st)
{
    if (!st)
        return;
    free(st->mem);
    free(st->layers);
    free(st->xs);
    free(st);
}

void zb_gpt2_stash_reset(zb_gpt2_stash_t *st)
{
    st->state = STATE_EMPTY;
}

const float *zb_gpt2_stash_probs(const zb_gpt2_stash_t *st)
{
    return st->span.head && st->state == STATE_AFTER_F ? st->probs : NULL;
}

size_t zb_gpt2_stash_live_bytes(const zb_gpt2_stash_t *st)
{
    switch (st->state) {
    case STATE_AFTER_F:
        return st->bytes_f;
    case STATE_AFTER_B:
        return st->bytes_b;
    default:
        return 0;
    }
}

/* ---- checks shared by F, B, W ---- */

static zb_status_t check_call(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                              const zb_gpt2_stash_t *st, const char *what, zb_err_t *err)
{
    if (!p || !span || !st)
        return zb_err_set(err, ZB_EINVAL, "gpt2 %s: params, span and stash are required", what);
    const zb_gpt2_config_t *a = &p->cfg, *b = &st->cfg;
    if (a->max_seq != b->max_seq || a->vocab != b->vocab || a->padded_vocab != b->padded_vocab ||
        a->layers != b->layers || a->heads != b->heads || a->channels != b->channels)
        return zb_err_set(err, ZB_EINVAL, "gpt2 %s: parameters and stash have different configs",
                          what);
    if (span->layer_begin != st->span.layer_begin || span->layer_end != st->span.layer_end ||
        span->embed != st->span.embed || span->head != st->span.head)
        return zb_err_set(err, ZB_EINVAL, "gpt2 %s: span differs from the one the stash was made for",
                          what);
    if (!zb_gpt2_holds_span(p, span))
        return zb_err_set(err, ZB_EINVAL,
                          "gpt2 %s: the parameter buffer does not hold stage [%d, %d)%s%s", what,
                          span->layer_begin, span->layer_end, span->embed ? " + embedding" : "",
                          span->head ? " + head" : "");
    return ZB_OK;
}

static zb_status_t check_ids(const int *ids, size_t n, int V, const char *name, zb_err_t *err)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return zb_err_set(err, ZB_EINVAL, "gpt2 forward: %s[%zu] = %d not in [0, %d)", name, i,
                              ids[i], V);
    return ZB_OK;
}

/* Pointers to block l's parameters (l is the global layer index; the buffer may be stage-local,
 * so it is looked up through its slot). */
typedef struct {
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    const float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} block_params_t;

static block_params_t block_params(const zb_gpt2_params_t *p, int l)
{
    size_t C = (size_t)p->cfg.channels, L = (size_t)zb_gpt2_layer_slot(p, l);
    block_params_t b = {
        p->t[ZB_LN1W] + L * C,           p->t[ZB_LN1B] + L * C,
        p->t[ZB_QKVW] + L * 3 * C * C,   p->t[ZB_QKVB] + L * 3 * C,
        p->t[ZB_ATTPROJW] + L * C * C,   p->t[ZB_ATTPROJB] + L * C,
        p->t[ZB_LN2W] + L * C,           p->t[ZB_LN2B] + L * C,
        p->t[ZB_FCW] + L * 4 * C * C,    p->t[ZB_FCB] + L * 4 * C,
        p->t[ZB_FCPROJW] + L * 4 * C * C, p->t[ZB_FCPROJB] + L * C,
    };
    return b;
}

/* ---- forward ---- */

static void block_forward(zb_gpt2_stash_t *st, const block_params_t *w, layer_acts_t *a,
                          const float *x, float *y)
{
    int B = st->B, T = st->T, N = B * T, C = st->cfg.channels, NH = st->cfg.heads;
    size_t NC = (size_t)N * C;
    zb_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
    zb_matmul_forward(a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
    zb_attention_forward(a->atty, a->att, a->qkv, B, T, C, NH);
    zb_matmul_forward(st->tmp, a->atty, w->attprojw, w->attprojb, N, C, C);
    zb_residual_forward(a->res2, x, st->tmp, NC);
    zb_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2w, w->ln2b, N, C);
    zb_matmul_forward(a->fch, a->ln2, w->fcw, w->fcb, N, C, 4 * C);
    zb_gelu_forward(a->fch_gelu, a->fch, 4 * NC);
    zb_matmul_forward(st->tmp, a->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
    zb_residual_forward(y, a->res2, st->tmp, NC);
}

zb_status_t zb_gpt2_forward(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                            zb_gpt2_stash_t *st, const int *tokens, const float *x_in,
                            const int *targets, float *x_out, float *loss, zb_err_t *err)
{
    zb_status_t s = check_call(p, span, st, "forward", err);
    if (s != ZB_OK)
        return s;
    if (st->state == STATE_AFTER_B)
        return zb_err_set(err, ZB_EINVAL,
                          "gpt2 forward: stash still holds a microbatch waiting for W");
    const zb_gpt2_config_t *cfg = &st->cfg;
    int N = st->B * st->T, C = cfg->channels, nl = st->nl;
    size_t NC = (size_t)N * C;
    if (span->embed ? !tokens : !x_in)
        return zb_err_set(err, ZB_EINVAL, "gpt2 forward: missing %s",
                          span->embed ? "tokens" : "x_in");
    if (span->head ? (!targets || !loss) : !x_out)
        return zb_err_set(err, ZB_EINVAL, "gpt2 forward: missing %s",
                          span->head ? "targets or loss" : "x_out");
    if (span->embed && (s = check_ids(tokens, (size_t)N, cfg->vocab, "tokens", err)) != ZB_OK)
        return s;
    if (span->head && (s = check_ids(targets, (size_t)N, cfg->vocab, "targets", err)) != ZB_OK)
        return s;

    /* stage input -> xs[0] (or straight into x_out for an embedding-only stage) */
    float *x0 = st->xs[0];
    if (span->embed) {
        memcpy(st->tokens, tokens, (size_t)N * sizeof(int));
        float *dst = (nl == 0 && !span->head) ? x_out : x0;
        zb_encoder_forward(dst, tokens, p->t[ZB_WTE], p->t[ZB_WPE], st->B, st->T, C);
    } else {
        memcpy(x0, x_in, NC * sizeof(float));
    }
    for (int l = 0; l < nl; l++) {
        block_params_t w = block_params(p, span->layer_begin + l);
        float *y = (l + 1 < nl || span->head) ? st->xs[l + 1] : x_out;
        block_forward(st, &w, &st->layers[l], st->xs[l], y);
    }
    if (span->head) {
        int Vp = cfg->padded_vocab;
        memcpy(st->targets, targets, (size_t)N * sizeof(int));
        zb_layernorm_forward(st->lnf, st->lnf_mean, st->lnf_rstd, st->xs[nl], p->t[ZB_LNFW],
                             p->t[ZB_LNFB], N, C);
        zb_matmul_forward(st->probs, st->lnf, p->t[ZB_WTE], NULL, N, C, Vp);
        zb_crossentropy_forward(st->losses, st->probs, targets, N, cfg->vocab, Vp);
        double sum = 0.0;
        for (int i = 0; i < N; i++)
            sum += st->losses[i];
        *loss = (float)(sum / N);
    }
    st->state = STATE_AFTER_F;
    return ZB_OK;
}

/* ---- backward_input ---- */

static void block_backward_input(zb_gpt2_stash_t *st, const block_params_t *w, layer_acts_t *a,
                                 const float *x, float *dx)
{
    /* a->dres3 holds the gradient of the block output; dx (grad of x) is overwritten */
    int B = st->B, T = st->T, N = B * T, C = st->cfg.channels, NH = st->cfg.heads;
    size_t NC = (size_t)N * C;
    memset(st->dfch_gelu, 0, 4 * NC * sizeof(float));
    zb_matmul_backward_input(st->dfch_gelu, a->dres3, w->fcprojw, N, 4 * C, C);
    memset(a->dfch, 0, 4 * NC * sizeof(float));
    zb_gelu_backward_input(a->dfch, a->fch, st->dfch_gelu, 4 * NC);
    memset(a->dln2, 0, NC * sizeof(float));
    zb_matmul_backward_input(a->dln2, a->dfch, w->fcw, N, C, 4 * C);
    /* residual: res2 receives dres3 directly plus the LN2 branch */
    memcpy(a->dres2, a->dres3, NC * sizeof(float));
    zb_layernorm_backward_input(a->dres2, a->dln2, a->res2, a->ln2_mean, a->ln2_rstd, w->ln2w, N,
                                C);
    memset(st->datty, 0, NC * sizeof(float));
    zb_matmul_backward_input(st->datty, a->dres2, w->attprojw, N, C, C);
    memset(a->dqkv, 0, 3 * NC * sizeof(float));
    zb_attention_backward_input(a->dqkv, st->att_scr, st->datty, a->qkv, a->att, B, T, C, NH);
    memset(a->dln1, 0, NC * sizeof(float));
    zb_matmul_backward_input(a->dln1, a->dqkv, w->qkvw, N, C, 3 * C);
    /* residual: x receives dres2 directly plus the LN1 branch */
    memcpy(dx, a->dres2, NC * sizeof(float));
    zb_layernorm_backward_input(dx, a->dln1, x, a->ln1_mean, a->ln1_rstd, w->ln1w, N, C);
}

zb_status_t zb_gpt2_backward_input(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                                   zb_gpt2_stash_t *st, const float *dx_out, float grad_scale,
                                   float *dx_in, zb_err_t *err)
{
    zb_status_t s = check_call(p, span, st, "backward_input", err);
    if (s != ZB_OK)
        return s;
    if (st->state != STATE_AFTER_F)
        return zb_err_set(err, ZB_EINVAL, "gpt2 backward_input: no forward pending in the stash");
    if (!span->head && !dx_out)
        return zb_err_set(err, ZB_EINVAL, "gpt2 backward_input: missing dx_out");
    if (!span->embed && !dx_in)
        return zb_err_set(err, ZB_EINVAL, "gpt2 backward_input: missing dx_in");
    const zb_gpt2_config_t *cfg = &st->cfg;
    int N = st->B * st->T, C = cfg->channels, nl = st->nl;
    size_t NC = (size_t)N * C;
    /* gradient of xs[l]: block l-1's dres3, or for l = 0 the stage input's */
    float *dx0 = span->embed ? st->dencoded : dx_in;
    float *dtop = nl > 0 ? st->layers[nl - 1].dres3 : dx0;

    if (span->head) {
        zb_crossentropy_backward(st->probs, st->targets, grad_scale, N, cfg->vocab,
                                 cfg->padded_vocab);
        memset(st->dlnf, 0, NC * sizeof(float));
        zb_matmul_backward_input(st->dlnf, st->probs, p->t[ZB_WTE], N, C, cfg->padded_vocab);
        memset(dtop, 0, NC * sizeof(float));
        zb_layernorm_backward_input(dtop, st->dlnf, st->xs[nl], st->lnf_mean, st->lnf_rstd,
                                    p->t[ZB_LNFW], N, C);
    } else {
        memcpy(dtop, dx_out, NC * sizeof(float));
    }
    for (int l = nl - 1; l >= 0; l--) {
        block_params_t w = block_params(p, span->layer_begin + l);
        float *dx = l > 0 ? st->layers[l - 1].dres3 : dx0;
        block_backward_input(st, &w, &st->layers[l], st->xs[l], dx);
    }
    st->state = STATE_AFTER_B;
    return ZB_OK;
}

/* ---- backward_weight ---- */

/* W of one block. Selective stashes rebuild the LN and GELU outputs just before the products
 * that read them (the same routines as F: the same bits). */
static void block_backward_weight(const zb_gpt2_stash_t *st, const block_params_t *w,
                                  zb_gpt2_params_t *g, int l, const layer_acts_t *a,
                                  const float *x)
{
    int N = st->B * st->T, C = st->cfg.channels;
    size_t Cz = (size_t)C, L = (size_t)zb_gpt2_layer_slot(g, l);
    const bool sel = st->keep == ZB_GPT2_KEEP_SELECTIVE;
    zb_layernorm_backward_weight(g->t[ZB_LN1W] + L * Cz, g->t[ZB_LN1B] + L * Cz, a->dln1, x,
                                 a->ln1_mean, a->ln1_rstd, N, C);
    if (sel)
        zb_layernorm_apply(a->ln1, x, a->ln1_mean, a->ln1_rstd, w->ln1w, w->ln1b, N, C);
    zb_matmul_backward_weight(g->t[ZB_QKVW] + L * 3 * Cz * Cz, g->t[ZB_QKVB] + L * 3 * Cz,
                              a->dqkv, a->ln1, N, C, 3 * C);
    zb_matmul_backward_weight(g->t[ZB_ATTPROJW] + L * Cz * Cz, g->t[ZB_ATTPROJB] + L * Cz,
                              a->dres2, a->atty, N, C, C);
    zb_layernorm_backward_weight(g->t[ZB_LN2W] + L * Cz, g->t[ZB_LN2B] + L * Cz, a->dln2, a->res2,
                                 a->ln2_mean, a->ln2_rstd, N, C);
    if (sel) {
        zb_layernorm_apply(a->ln2, a->res2, a->ln2_mean, a->ln2_rstd, w->ln2w, w->ln2b, N, C);
        zb_gelu_forward(a->fch_gelu, a->fch, 4 * (size_t)N * Cz);
    }
    zb_matmul_backward_weight(g->t[ZB_FCW] + L * 4 * Cz * Cz, g->t[ZB_FCB] + L * 4 * Cz, a->dfch,
                              a->ln2, N, C, 4 * C);
    zb_matmul_backward_weight(g->t[ZB_FCPROJW] + L * 4 * Cz * Cz, g->t[ZB_FCPROJB] + L * Cz,
                              a->dres3, a->fch_gelu, N, 4 * C, C);
}

zb_status_t zb_gpt2_backward_weight(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                                    zb_gpt2_stash_t *st, zb_gpt2_grads_t *g, zb_err_t *err)
{
    zb_status_t s = check_call(p, span, st, "backward_weight", err);
    if (s != ZB_OK)
        return s;
    if (!g || !g->g.data || (span->head && !g->wte_head))
        return zb_err_set(err, ZB_EINVAL, "gpt2 backward_weight: gradient buffers are required");
    if (g->g.count != p->count || !zb_gpt2_holds_span(&g->g, span))
        return zb_err_set(err, ZB_EINVAL,
                          "gpt2 backward_weight: gradients and parameters have different sizes");
    if (st->state != STATE_AFTER_B)
        return zb_err_set(err, ZB_EINVAL, "gpt2 backward_weight: no backward_input pending");
    const zb_gpt2_config_t *cfg = &st->cfg;
    int N = st->B * st->T, C = cfg->channels, nl = st->nl;
    if (span->head) {
        zb_layernorm_backward_weight(g->g.t[ZB_LNFW], g->g.t[ZB_LNFB], st->dlnf, st->xs[nl],
                                     st->lnf_mean, st->lnf_rstd, N, C);
        zb_matmul_backward_weight(g->wte_head, NULL, st->probs, st->lnf, N, C, cfg->padded_vocab);
    }
    for (int l = nl - 1; l >= 0; l--) {
        block_params_t w = block_params(p, span->layer_begin + l);
        block_backward_weight(st, &w, &g->g, span->layer_begin + l, &st->layers[l], st->xs[l]);
    }
    if (span->embed)
        zb_encoder_backward_weight(g->g.t[ZB_WTE], g->g.t[ZB_WPE], st->dencoded, st->tokens, st->B,
                                   st->T, C);
    st->state = STATE_EMPTY;
    return ZB_OK;
}
