/* AdamW over parameter-buffer ranges, gradient norm by units, clipping, LR schedule.
 * Bit-identity across pipeline partitions rests on two rules: the update is purely elementwise
 * (per-step scalars computed once, the same for every range), and the norm is a fixed-order sum of
 * fixed per-unit partials. */
#include <math.h>
#include <string.h>

#include "zbpp/optim.h"
#include "zbpp/workers.h"

/* Elements per chunk when AdamW and the gradient norm are shared over the current worker group
 * (zbpp/workers.h). AdamW is elementwise, so any split gives the same bits; the norm's chunks are
 * fixed by the range alone and their partials added in order. */
#define OPT_CHUNK 65536

zb_adamw_hparams_t zb_adamw_defaults(void)
{
    return (zb_adamw_hparams_t){.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                .weight_decay = 0.1f};
}

zb_status_t zb_adamw_check(const zb_adamw_hparams_t *h, zb_err_t *err)
{
    if (!(h->lr >= 0.0f) || !isfinite(h->lr))
        return zb_err_set(err, ZB_EINVAL, "learning rate must be finite and >= 0 (got %g)", h->lr);
    if (!(h->beta1 >= 0.0f && h->beta1 < 1.0f))
        return zb_err_set(err, ZB_EINVAL, "beta1 must be in [0, 1) (got %g)", h->beta1);
    if (!(h->beta2 >= 0.0f && h->beta2 < 1.0f))
        return zb_err_set(err, ZB_EINVAL, "beta2 must be in [0, 1) (got %g)", h->beta2);
    if (!(h->eps > 0.0f) || !isfinite(h->eps))
        return zb_err_set(err, ZB_EINVAL, "eps must be finite and > 0 (got %g)", h->eps);
    if (!(h->weight_decay >= 0.0f) || !isfinite(h->weight_decay))
        return zb_err_set(err, ZB_EINVAL, "weight decay must be finite and >= 0 (got %g)",
                          h->weight_decay);
    return ZB_OK;
}

bool zb_adamw_decays(zb_gpt2_tensor_t t)
{
    switch (t) {
    case ZB_WTE:
    case ZB_WPE:
    case ZB_QKVW:
    case ZB_ATTPROJW:
    case ZB_FCW:
    case ZB_FCPROJW:
        return true;
    default:
        return false;
    }
}

zb_status_t zb_adamw_state_alloc(zb_adamw_state_t *s, const zb_gpt2_config_t *cfg, zb_err_t *err)
{
    memset(s, 0, sizeof *s);
    zb_status_t st = zb_gpt2_params_alloc(&s->m, cfg, err);
    if (st == ZB_OK)
        st = zb_gpt2_params_alloc(&s->v, cfg, err);
    if (st != ZB_OK) {
        zb_adamw_state_free(s);
        return st;
    }
    return ZB_OK;
}

void zb_adamw_state_touch(zb_adamw_state_t *s)
{
    memset(s->m.data, 0, s->m.count * sizeof(float));
    memset(s->v.data, 0, s->v.count * sizeof(float));
}

zb_status_t zb_adamw_state_alloc_like(zb_adamw_state_t *s, const zb_gpt2_params_t *shape,
                                      zb_err_t *err)
{
    memset(s, 0, sizeof *s);
    zb_status_t st = zb_gpt2_params_alloc_like(&s->m, shape, err);
    if (st == ZB_OK)
        st = zb_gpt2_params_alloc_like(&s->v, shape, err);
    if (st != ZB_OK)
        zb_adamw_state_free(s);
    return st;
}

void zb_adamw_state_free(zb_adamw_state_t *s)
{
    zb_gpt2_params_free(&s->m);
    zb_gpt2_params_free(&s->v);
}

/* sqrtf may set errno, which stops GCC from vectorizing this loop: CMakeLists.txt compiles this
 * file with -fno-math-errno (v >= 0, and vector sqrt rounds exactly like scalar sqrt, so the bits
 * are the same either way). */
/* The inner loop: one tensor's slice, one decay value. */
static void adamw_kernel(float *restrict p, const float *restrict g, float *restrict m,
                         float *restrict v, size_t n, float b1, float b2, float bc1, float bc2,
                         float eps, float wd, float lr, float gs)
{
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1;
        float vhat = vi / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

typedef struct {
    float *p, *m, *v;
    const float *g;
    size_t n;
    float b1, b2, bc1, bc2, eps, wd, lr, gs;
} adam_job_t;

static void adamw_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const adam_job_t *j = ctx;
    size_t lo = c * OPT_CHUNK, len = j->n - lo < OPT_CHUNK ? j->n - lo : OPT_CHUNK;
    adamw_kernel(j->p + lo, j->g + lo, j->m + lo, j->v + lo, len, j->b1, j->b2, j->bc1, j->bc2,
                 j->eps, j->wd, j->lr, j->gs);
}

void zb_adamw_update_range(zb_gpt2_params_t *params, const zb_gpt2_params_t *grads,
                           zb_adamw_state_t *state, const zb_adamw_hparams_t *h, float lr,
                           long t, float grad_scale, size_t offset, size_t count)
{
    /* per-step scalars: computed identically for every range */
    float bc1 = (float)(1.0 - pow((double)h->beta1, (double)t));
    float bc2 = (float)(1.0 - pow((double)h->beta2, (double)t));
    size_t end = offset + count;
    /* each tensor where it lies in the buffer (llm.c order, or WTE last: wte_share.c): update
     * the part of [offset, end) inside it */
    while (offset < end) {
        int k = 0;
        size_t tensor_end = 0;
        for (; k < ZB_GPT2_NUM_TENSORS; k++) {
            if (!params->sizes[k] || !params->t[k])
                continue;
            size_t tensor_begin = (size_t)(params->t[k] - params->data);
            tensor_end = tensor_begin + params->sizes[k];
            if (offset >= tensor_begin && offset < tensor_end)
                break;
        }
        if (k == ZB_GPT2_NUM_TENSORS)
            break; /* outside every tensor */
        size_t stop = end < tensor_end ? end : tensor_end;
        float wd = zb_adamw_decays((zb_gpt2_tensor_t)k) ? h->weight_decay : 0.0f;
        adam_job_t j = {.p = params->data + offset, .g = grads->data + offset,
                        .m = state->m.data + offset, .v = state->v.data + offset,
                        .n = stop - offset, .b1 = h->beta1, .b2 = h->beta2, .bc1 = bc1,
                        .bc2 = bc2, .eps = h->eps, .wd = wd, .lr = lr, .gs = grad_scale};
        zb_parallel_for((j.n + OPT_CHUNK - 1) / OPT_CHUNK, adamw_chunk, &j);
        offset = stop;
    }
}

void zb_adamw_update_units(zb_gpt2_params_t *params, const zb_gpt2_params_t *grads,
                           zb_adamw_state_t *state, const zb_adamw_hparams_t *h, float lr, long t,
                           float grad_scale, const int *units, int n_units)
{
    size_t off[16], cnt[16];
    for (int u = 0; u < n_units; u++) {
        int n = zb_gpt2_params_unit_ranges(params, units[u], off, cnt);
        for (int r = 0; r < n; r++)
            zb_adamw_update_range(params, grads, state, h, lr, t, grad_scale, off[r], cnt[r]);
    }
}

/* Sum of squares of one chunk: 8 interleaved accumulators (element i goes to lane i % 8) so the
 * loop vectorizes, then the lanes in order. */
static double chunk_sumsq(const float *g, size_t n)
{
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] += (double)g[i + k] * (double)g[i + k];
    for (int k = 0; i < n; i++, k++)
        lane[k] += (double)g[i] * (double)g[i];
    double sum = 0.0;
    for (int k = 0; k < 8; k++)
        sum += lane[k];
    return sum;
}

enum { SUMSQ_MAX_CHUNKS = 1024 }; /* ranges longer than this many chunks are done in rounds */

typedef struct {
    const float *g;
    size_t n;
    double *part;
} sumsq_job_t;

static void sumsq_chunk(void *ctx, size_t c, int worker)
{
    (void)worker;
    const sumsq_job_t *j = ctx;
    size_t lo = c * OPT_CHUNK, len = j->n - lo < OPT_CHUNK ? j->n - lo : OPT_CHUNK;
    j->part[c] = chunk_sumsq(j->g + lo, len);
}

/* Sum of squares of one range: chunks of OPT_CHUNK elements (the last one shorter), each summed
 * by chunk_sumsq, their partials added in order. A fixed order that depends only on the range. */
static double range_sumsq(const float *g, size_t n)
{
    double part[SUMSQ_MAX_CHUNKS];
    double sum = 0.0;
    for (size_t done = 0; done < n;) {
        size_t left = n - done, cap = (size_t)SUMSQ_MAX_CHUNKS * OPT_CHUNK;
        size_t len = left < cap ? left : cap;
        size_t chunks = (len + OPT_CHUNK - 1) / OPT_CHUNK;
        sumsq_job_t j = {.g = g + done, .n = len, .part = part};
        zb_parallel_for(chunks, sumsq_chunk, &j);
        for (size_t c = 0; c < chunks; c++)
            sum += part[c];
        done += len;
    }
    return sum;
}

double zb_grad_unit_sumsq(const zb_gpt2_params_t *grads, int unit)
{
    size_t off[16], cnt[16];
    int n = zb_gpt2_params_unit_ranges(grads, unit, off, cnt);
    double sum = 0.0;
    for (int r = 0; r < n; r++)
        sum += range_sumsq(grads->data + off[r], cnt[r]);
    return sum;
}

double zb_grad_norm_total(const double *unit_sumsq, int n)
{
    double sum = 0.0;
    for (int u = 0; u < n; u++)
        sum += unit_sumsq[u];
    return sqrt(sum);
}

float zb_grad_clip_scale(double norm, float clip)
{
    if (clip > 0.0f && norm > (double)clip)
        return (float)((double)clip / norm);
    return 1.0f;
}

zb_status_t zb_lr_kind_parse(const char *s, zb_lr_kind_t *out, zb_err_t *err)
{
    if (!strcmp(s, "constant"))
        *out = ZB_LR_CONSTANT;
    else if (!strcmp(s, "cosine"))
        *out = ZB_LR_COSINE;
    else
        return zb_err_set(err, ZB_EINVAL, "unknown LR schedule '%s' (constant or cosine)", s);
    return ZB_OK;
}

const char *zb_lr_kind_name(zb_lr_kind_t k) { return k == ZB_LR_COSINE ? "cosine" : "constant"; }

float zb_lr_at(const zb_lr_schedule_t *s, long step)
{
    if (step < s->warmup)
        return s->lr * (float)(step + 1) / (float)s->warmup;
    if (s->kind == ZB_LR_CONSTANT)
        return s->lr;
    long span = s->total - s->warmup;
    if (span <= 0 || step >= s->total)
        return s->lr_min;
    double ratio = (double)(step - s->warmup) / (double)span;
    double coeff = 0.5 * (1.0 + cos(3.14159265358979323846 * ratio));
    return (float)((double)s->lr_min + coeff * ((double)s->lr - (double)s->lr_min));
}
