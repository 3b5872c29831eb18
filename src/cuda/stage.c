/* zbpp — the CUDA GPT-2 stage's lifecycle and state: parameters, gradients and AdamW moments on
 * the device, their copies to and from the host, gradient norms and the AdamW step. The stage's
 * data: cuda/stage.h; its messages: stage_transfer.c; its F, B, W: stage_compute.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/flash_attn_tf32.h"
#include "cuda/prof.h"
#include "cuda/stage.h"

static int same_cfg(const zb_gpt2_config_t *a, const zb_gpt2_config_t *b)
{
    return a->max_seq == b->max_seq && a->vocab == b->vocab &&
           a->padded_vocab == b->padded_vocab && a->layers == b->layers &&
           a->heads == b->heads && a->channels == b->channels;
}

/* ---- stage ---- */

static bool per_layer(int t) { return t >= ZB_LN1W && t <= ZB_FCPROJB; }

/* The stage's buffers hold what its span reads and nothing else, in the tensor-major order of
 * zb_gpt2_params_alloc_part for that one span: WTE (embedding or tied head), WPE (embedding),
 * the span's blocks in order, the final LayerNorm (head). */
void zb_cu_stage_layout(zb_cuda_stage_t *s)
{
    size_t full[ZB_GPT2_NUM_TENSORS];
    zb_gpt2_tensor_sizes(&s->cfg, full);
    s->count = 0;
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS; t++) {
        bool held = per_layer(t) ? s->nl > 0
                    : t == ZB_WTE ? s->span.embed || (s->span.head && !s->wte_borrowed)
                    : t == ZB_WPE ? s->span.embed
                                  : s->span.head;
        s->sizes[t] = !held ? 0
                      : per_layer(t) ? full[t] / (size_t)s->cfg.layers * (size_t)s->nl
                                     : full[t];
        s->offs[t] = s->count;
        s->count += s->sizes[t];
    }
}

static zb_status_t workspace_open(zb_cuda_stage_t *s, zb_err_t *err);

/* Floats of the fp32 attention's backward scratch: the flash kernel's D (B·NH·T), or one
 * sequence's materialised gradient (NH·T·T). */
static size_t att_scratch_floats(const zb_cuda_stage_t *s)
{
    int NH = s->cfg.heads;
    if (flash32(s))
        return zb_cu_flash32_scratch_floats(s->B, s->T, NH, s->cfg.channels / NH);
    return zb_cu_attention_scratch_floats(s->T, NH);
}

/* Bytes of the per-call scratch. fp32 storage: tmp and datty (N·C floats each), the attention's
 * scratch, the losses (N); bf16: stage_compute16.c. (GELU's gradient is the fc projection's
 * epilogue, written into dfch: no 4·N·C scratch.) */
size_t zb_cu_scratch_bytes(const zb_cuda_stage_t *s)
{
    if (is_bf16(s))
        return zb_cu16_scratch_bytes(s);
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels;
    return (2 * N * C + att_scratch_floats(s) + N) * sizeof(float);
}

void zb_cu16_weights_refresh(zb_cuda_stage_t *s, size_t off, size_t n)
{
    if (!s->weights16 || n == 0 || s->ctx.status != ZB_OK)
        return;
    zb_cuk16_from_f32(s->ctx.stream, s->weights16 + off, s->params + off, n);
    zb_cu_launch_check(&s->ctx, "bf16 weight copy");
}

bool zb_cuda_stage_slice(const zb_cuda_stage_t *s, int tensor, int layer, size_t *off, size_t *n)
{
    if (!s || tensor < 0 || tensor >= ZB_GPT2_NUM_TENSORS || !s->sizes[tensor])
        return false;
    if (!per_layer(tensor)) {
        *off = s->offs[tensor], *n = s->sizes[tensor];
        return true;
    }
    if (layer < s->span.layer_begin || layer >= s->span.layer_end)
        return false;
    *n = s->sizes[tensor] / (size_t)s->nl;
    *off = s->offs[tensor] + (size_t)(layer - s->span.layer_begin) * *n;
    return true;
}

size_t zb_cuda_stage_param_count(const zb_cuda_stage_t *s) { return s ? s->count : 0; }

static zb_status_t stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                             int T, zb_cuda_precision_t prec, int device,
                             const zb_cuda_stage_t *wte_from, zb_cuda_stage_t **out,
                             zb_err_t *err);

zb_status_t zb_cuda_stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_cuda_precision_t prec, int device, zb_cuda_stage_t **out,
                              zb_err_t *err)
{
    return stage_new(cfg, span, B, T, prec, device, NULL, out, err);
}

zb_status_t zb_cuda_stage_new_tied(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                   int T, zb_cuda_precision_t prec, int device,
                                   const zb_cuda_stage_t *embed, zb_cuda_stage_t **out,
                                   zb_err_t *err)
{
    *out = NULL;
    if (!embed || !embed->span.embed || !span || !span->head || span->embed ||
        embed->ctx.device != device || embed->ctx.prec != prec || embed->B != B ||
        embed->T != T || !cfg || !same_cfg(&embed->cfg, cfg))
        return zb_err_set(err, ZB_EINVAL, "cuda tied head: needs a head stage and the embedding "
                                          "stage of the same device, model, shape and precision");
    return stage_new(cfg, span, B, T, prec, device, embed, out, err);
}

static zb_status_t stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                             int T, zb_cuda_precision_t prec, int device,
                             const zb_cuda_stage_t *wte_from, zb_cuda_stage_t **out,
                             zb_err_t *err)
{
    *out = NULL;
    zb_status_t st = zb_cuda_stage_check(cfg, span, B, T, prec, err);
    if (st != ZB_OK)
        return st;
    int ndev = 0;
    if ((st = zb_cuda_device_count(&ndev, err)) != ZB_OK)
        return st;
    if (ndev == 0)
        return zb_err_set(err, ZB_EUNSUPPORTED, "no CUDA device");
    if (device < 0 || device >= ndev)
        return zb_err_set(err, ZB_EINVAL, "no CUDA device %d (%d found)", device, ndev);
    zb_cuda_stage_t *s = calloc(1, sizeof *s);
    if (!s)
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the CUDA stage");
    if ((st = zb_cu_ctx_init(&s->ctx, device, prec, err)) != ZB_OK) {
        free(s);
        return st;
    }
    s->cfg = *cfg;
    s->span = *span;
    s->B = B;
    s->T = T;
    s->nl = span->layer_end - span->layer_begin;
    s->wte_from = wte_from;
    s->wte_borrowed = wte_from != NULL;
    zb_cu_stage_layout(s);
    size_t N = (size_t)B * T, C = (size_t)cfg->channels;
    size_t scratch = zb_cu_scratch_bytes(s);
    size_t head = span->head ? wte_elems(s) : 0;
    cudaError_t e = cudaMalloc((void **)&s->params, s->count * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->grads, s->count * sizeof(float));
    if (e == cudaSuccess && head)
        e = cudaMalloc((void **)&s->wte_head, head * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->m, s->count * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->v, s->count * sizeof(float));
    if (e == cudaSuccess && prec == ZB_CUDA_BF16)
        e = cudaMalloc((void **)&s->weights16, s->count * sizeof(zb_bf16_t));
    if (e == cudaSuccess)
        e = cudaMalloc(&s->scratch_mem, scratch);
    /* zeroed on the stage's stream and waited for: a plain cudaMemset goes to the legacy
     * stream, which a non-blocking partition or copy stream does not wait for, so an upload
     * queued there next could land before the zeros */
    size_t bytes = s->count * sizeof(float);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(s->params, 0, bytes, s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(s->grads, 0, bytes, s->ctx.stream);
    if (e == cudaSuccess && head)
        e = cudaMemsetAsync(s->wte_head, 0, head * sizeof(float), s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(s->m, 0, bytes, s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(s->v, 0, bytes, s->ctx.stream);
    if (e == cudaSuccess && s->weights16) /* bf16(+0) = 0: the copy of the zeroed params */
        e = cudaMemsetAsync(s->weights16, 0, s->count * sizeof(zb_bf16_t), s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->ctx.stream);
    s->losses_host = malloc(N * sizeof(float));
    if (e != cudaSuccess || !s->losses_host) {
        zb_cuda_stage_free(s);
        if (e == cudaSuccess)
            return zb_err_set(err, ZB_ENOMEM, "cannot allocate the loss buffer");
        return cuda_err(e, "stage allocation (parameters, gradients, moments, scratch)", err);
    }
    if ((st = workspace_open(s, err)) != ZB_OK) {
        zb_cuda_stage_free(s);
        return st;
    }
    if (prec == ZB_CUDA_BF16) {
        zb_cu16_scratch_assign(s);
    } else {
        float *f = s->scratch_mem;
        s->tmp = f;
        s->datty = f + N * C;
        s->att_scr = f + 2 * N * C;
        s->losses = s->att_scr + att_scratch_floats(s);
    }
    *out = s;
    return ZB_OK;
}

void zb_cuda_stage_free(zb_cuda_stage_t *s)
{
    if (!s)
        return;
    /* a failure leaves the current device as it was: the frees below name their memory and
     * streams, which unified addressing finds on any device, so they still run */
    if (cudaSetDevice(s->ctx.device) != cudaSuccess)
        cudaGetLastError();
    if (s->narrow_stream) /* freed while widened: the partition's stream is the borrowed one */
        s->ctx.stream = s->narrow_stream;
    if (s->borrowed_stream) { /* the partition owns it: finish our work, leave it alive */
        cudaStreamSynchronize(s->ctx.stream);
        s->ctx.stream = NULL;
    }
    if (s->wide_stream) {
        cudaStreamSynchronize(s->wide_stream);
        cudaStreamDestroy(s->wide_stream);
        cudaEventDestroy(s->wide_in);
        cudaEventDestroy(s->wide_out);
    }
    cudaStream_t copies[4] = {s->down_stream, s->up_stream, s->stash_down, s->stash_up};
    for (int k = 0; k < 4; k++) {
        if (copies[k]) {
            cudaStreamSynchronize(copies[k]);
            cudaStreamDestroy(copies[k]);
        }
    }
    zb_cu_prof_free(s->ctx.prof);
    s->ctx.prof = NULL;
    zb_cu_ctx_destroy(&s->ctx);
    cudaFree(s->backup);
    cudaFree(s->adamw_tab.dev);
    free(s->adamw_tab.host);
    cudaFree(s->sumsq_tab.dev);
    free(s->sumsq_tab.host);
    cudaFree(s->norm_parts);
    cudaFree(s->params);
    cudaFree(s->grads);
    cudaFree(s->wte_head);
    cudaFree(s->m);
    cudaFree(s->v);
    cudaFree(s->weights16);
    cudaFree(s->scratch_mem);
    free(s->losses_host);
    if (s->loss_slots)
        cudaFreeHost(s->loss_slots);
    if (s->loss_ev)
        cudaEventDestroy(s->loss_ev);
    free(s);
}

static zb_status_t copy(zb_cuda_stage_t *s, void *dst, const void *src, size_t bytes,
                        enum cudaMemcpyKind kind, const char *what, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda %s: stage is NULL", what);
    zb_status_t st = zb_cu_ctx_check(&s->ctx, what, err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->ctx.stream);
    return cuda_err(e, what, err);
}

static zb_status_t check_host_params(const zb_cuda_stage_t *s, const zb_gpt2_params_t *h,
                                     const char *what, zb_err_t *err)
{
    if (!s || !h || !h->data)
        return zb_err_set(err, ZB_EINVAL, "cuda %s: stage and host buffer are required", what);
    if (!same_cfg(&s->cfg, &h->cfg) || !zb_gpt2_holds_span(h, &s->span))
        return zb_err_set(err, ZB_EINVAL,
                          "cuda %s: host buffer has a different config or lacks the stage's "
                          "tensors",
                          what);
    return ZB_OK;
}

/* The stage's part of a host buffer (whole or stage-local, holding the span) to or from the
 * device buffer `dev` of the stage's layout: one copy per tensor (the span's blocks are
 * consecutive in both), then one synchronisation. Slices the stage does not hold are left. */
static zb_status_t copy_params(zb_cuda_stage_t *s, float *dev, const zb_gpt2_params_t *h,
                               bool to_host, const char *what, zb_err_t *err)
{
    cudaError_t e = cudaSuccess;
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS && e == cudaSuccess; t++) {
        if (!s->sizes[t])
            continue;
        float *hp = zb_gpt2_slice(h, t, per_layer(t) ? s->span.layer_begin : 0, NULL);
        size_t bytes = s->sizes[t] * sizeof(float);
        e = to_host ? cudaMemcpyAsync(hp, dev + s->offs[t], bytes, cudaMemcpyDeviceToHost,
                                      s->ctx.stream)
                    : cudaMemcpyAsync(dev + s->offs[t], hp, bytes, cudaMemcpyHostToDevice,
                                      s->ctx.stream);
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->ctx.stream);
    return cuda_err(e, what, err);
}

zb_status_t zb_cuda_params_upload(zb_cuda_stage_t *s, const zb_gpt2_params_t *host, zb_err_t *err)
{
    zb_status_t st = check_host_params(s, host, "params upload", err);
    if (st == ZB_OK)
        st = copy_params(s, s->params, host, false, "params upload", err);
    if (st == ZB_OK) {
        zb_cu16_weights_refresh(s, 0, s->count);
        st = zb_cu_ctx_check(&s->ctx, "params upload", err);
    }
    return st;
}

zb_status_t zb_cuda_params_download(zb_cuda_stage_t *s, zb_gpt2_params_t *host, zb_err_t *err)
{
    zb_status_t st = check_host_params(s, host, "params download", err);
    return st != ZB_OK ? st : copy_params(s, s->params, host, true, "params download", err);
}

zb_status_t zb_cuda_adamw_upload(zb_cuda_stage_t *s, const zb_adamw_state_t *host, zb_err_t *err)
{
    zb_status_t st = host ? check_host_params(s, &host->m, "adamw upload", err)
                          : zb_err_set(err, ZB_EINVAL, "cuda adamw upload: state is NULL");
    if (st == ZB_OK)
        st = check_host_params(s, &host->v, "adamw upload", err);
    if (st == ZB_OK)
        st = copy_params(s, s->m, &host->m, false, "adamw upload", err);
    if (st == ZB_OK)
        st = copy_params(s, s->v, &host->v, false, "adamw upload", err);
    return st;
}

zb_status_t zb_cuda_adamw_download(zb_cuda_stage_t *s, zb_adamw_state_t *host, zb_err_t *err)
{
    zb_status_t st = host ? check_host_params(s, &host->m, "adamw download", err)
                          : zb_err_set(err, ZB_EINVAL, "cuda adamw download: state is NULL");
    if (st == ZB_OK)
        st = check_host_params(s, &host->v, "adamw download", err);
    if (st == ZB_OK)
        st = copy_params(s, s->m, &host->m, true, "adamw download", err);
    if (st == ZB_OK)
        st = copy_params(s, s->v, &host->v, true, "adamw download", err);
    return st;
}

zb_status_t zb_cuda_grads_download(zb_cuda_stage_t *s, zb_gpt2_grads_t *host, zb_err_t *err)
{
    zb_status_t st = host ? check_host_params(s, &host->g, "grads download", err)
                          : zb_err_set(err, ZB_EINVAL, "cuda grads download: grads are NULL");
    if (st == ZB_OK && !host->wte_head)
        st = zb_err_set(err, ZB_EINVAL, "cuda grads download: wte_head is NULL");
    if (st == ZB_OK)
        st = copy_params(s, s->grads, &host->g, true, "grads download", err);
    if (st == ZB_OK && s->wte_head)
        st = copy(s, host->wte_head, s->wte_head, wte_elems(s) * sizeof(float),
                  cudaMemcpyDeviceToHost, "grads download", err);
    else if (st == ZB_OK)
        memset(host->wte_head, 0, wte_elems(s) * sizeof(float));
    return st;
}

/* ---- pipeline ranks: slices of the state, backup, stream, device ---- */

zb_status_t zb_cuda_state_copy(zb_cuda_stage_t *s, zb_cuda_state_t which, size_t off, float *host,
                               size_t n, bool to_host, zb_err_t *err)
{
    if (!s || !host)
        return zb_err_set(err, ZB_EINVAL, "cuda state copy: stage and host buffer are required");
    float *base = which == ZB_CUDA_STATE_PARAMS  ? s->params
                  : which == ZB_CUDA_STATE_GRADS ? s->grads
                  : which == ZB_CUDA_STATE_M     ? s->m
                  : which == ZB_CUDA_STATE_V     ? s->v
                  : which == ZB_CUDA_STATE_WTE_HEAD ? s->wte_head
                                                    : NULL;
    size_t cap = which == ZB_CUDA_STATE_WTE_HEAD ? (s->wte_head ? wte_elems(s) : 0) : s->count;
    if (!base || off > cap || n > cap - off)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda state copy: %zu floats at %zu are outside buffer %d (%zu floats)",
                          n, off, (int)which, cap);
    if (n == 0)
        return ZB_OK;
    if (to_host)
        return copy(s, host, base + off, n * sizeof(float), cudaMemcpyDeviceToHost,
                    "state download", err);
    zb_status_t st = copy(s, base + off, host, n * sizeof(float), cudaMemcpyHostToDevice,
                          "state upload", err);
    if (st == ZB_OK && which == ZB_CUDA_STATE_PARAMS) {
        zb_cu16_weights_refresh(s, off, n);
        st = zb_cu_ctx_check(&s->ctx, "state upload", err);
    }
    return st;
}

/* Saved or restored on the stage's stream, no host wait: the optimizer's launches queue behind
 * it (a rollback costs the restore and one AdamW launch). */
zb_status_t zb_cuda_state_backup_reserve(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda backup: stage is NULL");
    if (s->backup)
        return ZB_OK;
    cudaError_t e = cudaMalloc((void **)&s->backup, 3 * s->count * sizeof(float));
    if (e != cudaSuccess)
        s->backup = NULL; /* cuda_err clears the error: the context stays usable */
    return cuda_err(e, "backup allocation", err);
}

zb_status_t zb_cuda_state_backup(zb_cuda_stage_t *s, bool save, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda backup: stage is NULL");
    if (!save && !s->backup)
        return zb_err_set(err, ZB_EINVAL, "cuda backup: nothing saved to restore");
    zb_status_t st = zb_cuda_state_backup_reserve(s, err);
    if (st != ZB_OK)
        return st;
    st = zb_cu_ctx_check(&s->ctx, save ? "backup" : "restore", err);
    float *state[3] = {s->params, s->m, s->v};
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < 3 && st == ZB_OK && e == cudaSuccess; k++) {
        float *b = s->backup + (size_t)k * s->count;
        e = cudaMemcpyAsync(save ? b : state[k], save ? state[k] : b, s->count * sizeof(float),
                            cudaMemcpyDeviceToDevice, s->ctx.stream);
    }
    if (st == ZB_OK)
        st = cuda_err(e, save ? "backup" : "restore", err);
    if (st == ZB_OK && !save) { /* the bf16 GEMM copy of the restored parameters */
        zb_cu16_weights_refresh(s, 0, s->count);
        st = zb_cu_ctx_check(&s->ctx, "restore", err);
    }
    return st;
}

zb_status_t zb_cuda_grads_zero(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda grads zero: stage is NULL");
    cudaError_t e = cudaMemsetAsync(s->grads, 0, s->count * sizeof(float), s->ctx.stream);
    if (e == cudaSuccess && s->wte_head)
        e = cudaMemsetAsync(s->wte_head, 0, wte_elems(s) * sizeof(float), s->ctx.stream);
    if (e != cudaSuccess)
        return cuda_err(e, "grads zero", err);
    return zb_cu_ctx_check(&s->ctx, "grads zero", err);
}

zb_status_t zb_cuda_fold_tied(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda fold tied: stage is NULL");
    if (s->wte_head) {
        ZB_CU_PROF(&s->ctx, ZB_CUDA_K_OPTIMIZER,
                   zb_cuk_add_inplace(s->ctx.stream, G(s, ZB_WTE), s->wte_head, s->sizes[ZB_WTE]));
        zb_cu_launch_check(&s->ctx, "fold tied");
    }
    return zb_cu_ctx_check(&s->ctx, "fold tied", err);
}

/* Norm unit `unit`'s slices the stage holds, as ranges of its buffers, with their tensors (the
 * order of zb_gpt2_unit_ranges); 0 when it holds none of them. */
static int stage_unit_ranges(const zb_cuda_stage_t *s, int unit, size_t off[16], size_t cnt[16],
                             int tensor[16])
{
    int L = s->cfg.layers, n = 0;
    int first = unit == 0 ? ZB_WTE : unit == L + 1 ? ZB_LNFW : ZB_LN1W;
    int last = unit == 0 ? ZB_WPE : unit == L + 1 ? ZB_LNFB : ZB_FCPROJB;
    for (int t = first; t <= last; t++)
        if (zb_cuda_stage_slice(s, t, unit - 1, &off[n], &cnt[n]))
            tensor[n++] = t;
    return n;
}

zb_status_t zb_cuda_grad_unit_sumsq(zb_cuda_stage_t *s, int unit, double *out, zb_err_t *err)
{
    return zb_cuda_grad_units_sumsq(s, &unit, 1, out, err);
}

/* Room for a descriptor table of n entries of `elem` bytes (grown only past its capacity,
 * which the stage sizes for all its units when it opens). */
static cudaError_t table_room(zb_cuda_stage_t *s, zb_cu_table_t *t, int n, size_t elem)
{
    if (n <= t->cap)
        return cudaSuccess;
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream); /* a queued launch reads it */
    cudaFree(t->dev);
    t->dev = NULL, t->cap = 0;
    if (e == cudaSuccess)
        e = cudaMalloc(&t->dev, (size_t)n * elem);
    if (e == cudaSuccess)
        t->cap = n;
    return e;
}

/* A launch's descriptor table on the device: the host table d of n entries (taken over) is
 * uploaded when it differs from the one there (the first step, or other units or buffers), so
 * a step with the same table uploads nothing. */
static zb_status_t table_to_device(zb_cuda_stage_t *s, zb_cu_table_t *t, void *d, int n,
                                   size_t elem, const char *what, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    if (n != t->count || (n > 0 && memcmp(d, t->host, (size_t)n * elem))) {
        /* a queued launch reads the table there: wait for it before writing over it */
        cudaError_t e = cudaStreamSynchronize(s->ctx.stream);
        free(t->host);
        t->host = NULL, t->count = 0;
        if (e == cudaSuccess)
            e = table_room(s, t, n, elem);
        st = cuda_err(e, what, err);
        if (st == ZB_OK && n > 0)
            st = copy(s, t->dev, d, (size_t)n * elem, cudaMemcpyHostToDevice, what, err);
        if (st == ZB_OK) {
            t->host = d, t->count = n;
            d = NULL;
        }
    }
    free(d);
    return st;
}

/* Doubles of one norm unit's row: 16 ranges x ZB_CU_SUMSQ_BLOCKS partials, and its sum. */
#define NORM_ROW_DOUBLES (16 * ZB_CU_SUMSQ_BLOCKS + 1)

/* Room for the partials of n units and their n sums (grown only past the stage's own units). */
static zb_status_t norm_room(zb_cuda_stage_t *s, int n, zb_err_t *err)
{
    if (n <= s->norm_cap)
        return ZB_OK;
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream); /* an earlier use may be queued */
    if (e == cudaSuccess) {
        cudaFree(s->norm_parts);
        s->norm_parts = NULL;
        s->norm_cap = 0;
        e = cudaMalloc((void **)&s->norm_parts, (size_t)n * NORM_ROW_DOUBLES * sizeof(double));
    }
    if (e != cudaSuccess)
        return cuda_err(e, "grad sumsq scratch", err);
    s->norm_cap = n;
    return ZB_OK;
}

/* ---- workspace: every buffer the stage's calls use besides its state, stash and scratch ---- */

/* The norm units with a slice in the stage, and their ranges (one descriptor each). */
static void stage_units(const zb_cuda_stage_t *s, int *units, int *ranges)
{
    *units = 0, *ranges = 0;
    for (int u = 0; u < zb_gpt2_num_units(&s->cfg); u++) {
        size_t off[16], cnt[16];
        int tensor[16];
        int nr = stage_unit_ranges(s, u, off, cnt, tensor);
        *units += nr > 0;
        *ranges += nr;
    }
}

/* Floats of the column-sum partials of the stage's widest bias or LayerNorm gradient: a block's
 * fc bias (4C columns), else the head's final LayerNorm (weight and bias, 2C). */
static size_t part_floats(const zb_cuda_stage_t *s)
{
    size_t C = (size_t)s->cfg.channels;
    size_t cols = s->nl > 0 ? 4 * C : s->span.head ? 2 * C : 0;
    return (size_t)zb_cu_colsum_chunks(s->B * s->T) * cols;
}

size_t zb_cu_workspace_bytes(const zb_cuda_stage_t *s, bool made)
{
    if (made) /* what the stage holds now (the memory table's "measured") */
        return s->ctx.ws_bytes + s->ctx.part_cap * sizeof(float) +
               (size_t)s->norm_cap * NORM_ROW_DOUBLES * sizeof(double) +
               (size_t)s->adamw_tab.cap * sizeof(zb_cu_adamw_tensor_t) +
               (size_t)s->sumsq_tab.cap * sizeof(zb_cu_sumsq_range_t);
    int units, ranges;
    stage_units(s, &units, &ranges);
    return ZB_CU_LT_WS_BYTES + part_floats(s) * sizeof(float) +
           (size_t)units * NORM_ROW_DOUBLES * sizeof(double) +
           (size_t)ranges * (sizeof(zb_cu_adamw_tensor_t) + sizeof(zb_cu_sumsq_range_t));
}

/* The workspace, all of it when the stage opens, so the memory table counts every byte from the
 * start and no call allocates (or waits for the stream to free) in a step. */
static zb_status_t workspace_open(zb_cuda_stage_t *s, zb_err_t *err)
{
    int units, ranges;
    stage_units(s, &units, &ranges);
    size_t part = part_floats(s);
    if (part > 0 && !zb_cu_part_reserve(&s->ctx, part))
        return zb_cu_ctx_check(&s->ctx, "stage workspace", err);
    zb_status_t st = norm_room(s, units, err);
    cudaError_t e = cudaSuccess;
    if (st == ZB_OK)
        e = table_room(s, &s->adamw_tab, ranges, sizeof(zb_cu_adamw_tensor_t));
    if (st == ZB_OK && e == cudaSuccess)
        e = table_room(s, &s->sumsq_tab, ranges, sizeof(zb_cu_sumsq_range_t));
    return st == ZB_OK ? cuda_err(e, "stage workspace (optimizer tables)", err) : st;
}

/* Every range's partials in its own slot of its unit's row (the rest of the row zeros), all the
 * ranges in one launch (zb_cuk_sumsq_multi: the per-range launch's bits), each row summed in
 * order on the device (what the host summed: adding the zeros changes no bit), and one copy of
 * the n sums back: one host wait for all the units. */
zb_status_t zb_cuda_grad_units_sumsq(zb_cuda_stage_t *s, const int *units, int n, double *out,
                                     zb_err_t *err)
{
    if (!s || (n > 0 && (!units || !out)) || n < 0)
        return zb_err_set(err, ZB_EINVAL, "cuda grad sumsq: stage, units and output are required");
    for (int u = 0; u < n; u++)
        if (units[u] < 0 || units[u] >= zb_gpt2_num_units(&s->cfg))
            return zb_err_set(err, ZB_EINVAL, "cuda grad sumsq: unit %d not in [0, %d)",
                              units[u], zb_gpt2_num_units(&s->cfg));
    if (n == 0)
        return ZB_OK;
    zb_status_t st = norm_room(s, n, err);
    if (st != ZB_OK)
        return st;
    const size_t row = 16 * ZB_CU_SUMSQ_BLOCKS;
    double *sums = s->norm_parts + (size_t)s->norm_cap * row;
    cudaError_t e = cudaMemsetAsync(s->norm_parts, 0, (size_t)n * row * sizeof(double),
                                    s->ctx.stream);
    if (e != cudaSuccess)
        return cuda_err(e, "grad sumsq", err);
    zb_cu_sumsq_range_t *ranges = malloc(((size_t)n * 16 + 1) * sizeof *ranges);
    if (!ranges)
        return zb_err_set(err, ZB_ENOMEM, "cuda grad sumsq: out of memory for %d units", n);
    int nr_all = 0;
    for (int u = 0; u < n; u++) {
        size_t off[16], cnt[16];
        int tensor[16];
        int nr = stage_unit_ranges(s, units[u], off, cnt, tensor);
        for (int r = 0; r < nr; r++) {
            memset(&ranges[nr_all], 0, sizeof *ranges); /* compared bytewise */
            ranges[nr_all].g = s->grads + off[r];
            ranges[nr_all].part = s->norm_parts + (size_t)u * row + (size_t)r * ZB_CU_SUMSQ_BLOCKS;
            ranges[nr_all++].n = cnt[r];
        }
    }
    if ((st = table_to_device(s, &s->sumsq_tab, ranges, nr_all, sizeof *ranges, "grad sumsq table",
                              err)) != ZB_OK)
        return st;
    zb_cu_prof_begin(&s->ctx, ZB_CUDA_K_OPTIMIZER);
    zb_cuk_sumsq_multi(s->ctx.stream, s->sumsq_tab.dev, s->sumsq_tab.count); /* one launch */
    zb_cuk_sum_rows(s->ctx.stream, sums, s->norm_parts, n, (int)row);
    zb_cu_prof_end(&s->ctx);
    zb_cu_launch_check(&s->ctx, "grad sumsq");
    return copy(s, out, sums, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, "grad sumsq",
                err);
}

/* The AdamW descriptors of the units' tensors into a new host table *out; their count,
 * or -1 out of memory. */
static int adamw_tables(zb_cuda_stage_t *s, const zb_adamw_hparams_t *h, const int *units,
                        int n_units, zb_cu_adamw_tensor_t **out, size_t *max_n)
{
    zb_cu_adamw_tensor_t *d = malloc(((size_t)n_units * 16 + 1) * sizeof *d);
    int n = 0;
    *max_n = 0;
    if (!d)
        return -1;
    for (int u = 0; u < n_units; u++) {
        size_t off[16], cnt[16];
        int tensor[16];
        int nr = stage_unit_ranges(s, units[u], off, cnt, tensor);
        for (int r = 0; r < nr; r++) {
            if (cnt[r] == 0)
                continue;
            float wd = zb_adamw_decays((zb_gpt2_tensor_t)tensor[r]) ? h->weight_decay : 0.0f;
            memset(&d[n], 0, sizeof d[n]); /* compared bytewise: no stray padding */
            d[n].p = s->params + off[r];
            d[n].g = s->grads + off[r];
            d[n].m = s->m + off[r];
            d[n].v = s->v + off[r];
            /* bf16 storage: the GEMMs' copy of the parameters, written in the same pass */
            d[n].shadow = s->weights16 ? (unsigned short *)(s->weights16 + off[r]) : NULL;
            d[n].n = cnt[r];
            d[n].wd = wd;
            *max_n = cnt[r] > *max_n ? cnt[r] : *max_n;
            n++;
        }
    }
    *out = d;
    return n;
}

/* One launch for all the units' tensors; the descriptor table goes to the device only when it
 * differs from the last one (the first step, or other units). */
zb_status_t zb_cuda_adamw_update_units(zb_cuda_stage_t *s, const zb_adamw_hparams_t *h, float lr,
                                       long t, float grad_scale, const int *units, int n_units,
                                       zb_err_t *err)
{
    if (!s || !h || (n_units > 0 && !units))
        return zb_err_set(err, ZB_EINVAL, "cuda adamw: stage, hparams and units are required");
    if (t < 1)
        return zb_err_set(err, ZB_EINVAL, "cuda adamw: step %ld must be >= 1", t);
    /* per-step scalars exactly as src/model/optim.c */
    float bc1 = (float)(1.0 - pow((double)h->beta1, (double)t));
    float bc2 = (float)(1.0 - pow((double)h->beta2, (double)t));
    int nu = zb_gpt2_num_units(&s->cfg);
    for (int u = 0; u < n_units; u++) /* all checked before any update is queued */
        if (units[u] < 0 || units[u] >= nu)
            return zb_err_set(err, ZB_EINVAL, "cuda adamw: unit %d not in [0, %d)", units[u], nu);
    zb_cu_adamw_tensor_t *d = NULL;
    size_t max_n = 0;
    int n = adamw_tables(s, h, units, n_units, &d, &max_n);
    if (n < 0)
        return zb_err_set(err, ZB_ENOMEM, "cuda adamw: out of memory for %d units", n_units);
    zb_status_t st = table_to_device(s, &s->adamw_tab, d, n, sizeof *d, "adamw table", err);
    if (st == ZB_OK)
        s->adamw_max_n = max_n;
    if (st != ZB_OK || s->adamw_tab.count == 0)
        return st;
    zb_cu_prof_begin(&s->ctx, ZB_CUDA_K_OPTIMIZER);
    zb_cuk_adamw_multi(s->ctx.stream, s->adamw_tab.dev, s->adamw_tab.count, s->adamw_max_n, h->beta1,
                       h->beta2, bc1, bc2, h->eps, lr, grad_scale);
    zb_cu_prof_end(&s->ctx);
    zb_cu_launch_check(&s->ctx, "adamw");
    return zb_cu_ctx_check(&s->ctx, "adamw", err);
}

zb_status_t zb_cuda_sync(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda sync: stage is NULL");
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream);
    cudaStream_t copies[4] = {s->down_stream, s->up_stream, s->stash_down, s->stash_up};
    for (int k = 0; k < 4 && e == cudaSuccess; k++)
        if (copies[k])
            e = cudaStreamSynchronize(copies[k]);
    if (e != cudaSuccess)
        zb_cu_fail(&s->ctx, ZB_EIO, "CUDA: %s", cudaGetErrorString(e));
    return zb_cu_ctx_check(&s->ctx, "cuda sync", err);
}

zb_status_t zb_cuda_stage_set_fp32_attention(zb_cuda_stage_t *s, zb_cuda_fp32_attention_t a,
                                             zb_err_t *err)
{
    if (!s || (a != ZB_CUDA_ATTN_AUTO && a != ZB_CUDA_ATTN_FMA && a != ZB_CUDA_ATTN_3XTF32))
        return zb_err_set(err, ZB_EINVAL, "cuda fp32 attention: a stage and auto, fma or 3xtf32 "
                                          "are required");
    int hs = s->cfg.channels / s->cfg.heads;
    if (a == ZB_CUDA_ATTN_AUTO) /* the faster where it can run (docs/cuda.md) */
        a = s->ctx.prec == ZB_CUDA_FP32 && zb_cuk_flash_tf32_supported(hs) ? ZB_CUDA_ATTN_3XTF32
                                                                           : ZB_CUDA_ATTN_FMA;
    if (a == ZB_CUDA_ATTN_3XTF32 && s->ctx.prec != ZB_CUDA_FP32)
        return zb_err_set(err, ZB_EINVAL, "cuda fp32 attention: 3xtf32 is the fp32 precision's; "
                                          "this stage runs %s",
                          zb_cuda_precision_name(s->ctx.prec));
    if (a == ZB_CUDA_ATTN_3XTF32 && !zb_cuk_flash_tf32_supported(hs))
        return zb_err_set(err, ZB_EINVAL, "cuda fp32 attention: 3xtf32 has no kernel for head "
                                          "size %d (16, 32 or 64); use fma", hs);
    s->ctx.fp32_attn = a;
    return ZB_OK;
}

zb_status_t zb_cuda_stage_profile(zb_cuda_stage_t *s, bool on, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda profile: stage is NULL");
    if (!on) {
        zb_cu_prof_free(s->ctx.prof);
        s->ctx.prof = NULL;
        return ZB_OK;
    }
    return s->ctx.prof ? ZB_OK : zb_cu_prof_new(&s->ctx.prof, err);
}

zb_status_t zb_cuda_stage_profile_read(zb_cuda_stage_t *s, double *ms, zb_err_t *err)
{
    if (!s || !ms)
        return zb_err_set(err, ZB_EINVAL, "cuda profile read: stage and output are required");
    if (!s->ctx.prof)
        return zb_err_set(err, ZB_EINVAL, "cuda profile read: the profile is off");
    zb_status_t st = zb_cuda_sync(s, err);
    return st != ZB_OK ? st : zb_cu_prof_collect(s->ctx.prof, ms, err);
}

zb_status_t zb_cuda_buffer_alloc(zb_cuda_stage_t *s, size_t n, float **out_dev, zb_err_t *err)
{
    *out_dev = NULL;
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda buffer: stage is NULL");
    cudaError_t e = cudaSetDevice(s->ctx.device);
    if (e != cudaSuccess)
        return cuda_err(e, "set device", err);
    float *p = NULL;
    e = cudaMalloc((void **)&p, (n ? n : 1) * sizeof(float));
    /* on the stage's stream and waited for (as in zb_cuda_stage_new): the copy stream that
     * fills the buffer next does not wait for the legacy stream */
    if (e == cudaSuccess)
        e = cudaMemsetAsync(p, 0, (n ? n : 1) * sizeof(float), s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->ctx.stream);
    if (e != cudaSuccess) {
        cudaFree(p);
        return cuda_err(e, "buffer allocation", err);
    }
    *out_dev = p;
    return ZB_OK;
}

void zb_cuda_buffer_free(float *dev) { cudaFree(dev); }

zb_status_t zb_cuda_copy_to_device(zb_cuda_stage_t *s, float *dst_dev, const float *src_host,
                                   size_t n, zb_err_t *err)
{
    return copy(s, dst_dev, src_host, n * sizeof(float), cudaMemcpyHostToDevice,
                "copy to device", err);
}

zb_status_t zb_cuda_copy_to_host(zb_cuda_stage_t *s, float *dst_host, const float *src_dev,
                                 size_t n, zb_err_t *err)
{
    return copy(s, dst_host, src_dev, n * sizeof(float), cudaMemcpyDeviceToHost, "copy to host",
                err);
}
