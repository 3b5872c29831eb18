/* The CUDA GPT-2 stage: parameters, gradients and AdamW moments on the device, F/B/W over the op
 * layer (cuda/ops.c), one stash per microbatch in flight. The schedule of ops, the stash buffers
 * and their F/B lifetimes are those of src/model/gpt2_stage.c (docs/compute.md), so the memory
 * model zb_gpt2_stage_mem holds for the device stash too; the per-call scratch lives once in the
 * stage (all work of a stage is serialised on its stream), not in every stash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ctx.h"
#include "cuda/kernels.h"
#include "model/gpt2_internal.h"
#include "zbpp/cuda.h"

enum { KEEP_F = 1, KEEP_B = 2 };
enum { STATE_EMPTY, STATE_AFTER_F, STATE_AFTER_B };

typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;
    float *dres3, *dfch, *dln2, *dres2, *dqkv, *dln1;
} layer_acts_t;

struct zb_cuda_stage {
    zb_cu_ctx_t ctx;
    zb_gpt2_config_t cfg;
    zb_gpt2_span_t span;
    int B, T, nl;
    size_t count, sizes[ZB_GPT2_NUM_TENSORS], offs[ZB_GPT2_NUM_TENSORS];
    float *params, *grads, *wte_head, *m, *v; /* device */
    void *scratch_mem;                        /* device: the per-call scratch below */
    float *tmp, *datty, *dfch_gelu, *att_scr, *losses;
    float *losses_host;
    float *backup;        /* device: params, m, v saved by zb_cuda_state_backup (3 x count) */
    bool borrowed_stream; /* the stream is a partition's (zb_cuda_stage_use_stream) */
    /* message copies beside the compute (made on first use), one stream per direction: an
     * upload queued behind a download would wait for the download's producer F/B and its copy,
     * and the two directions could not use the GPU's two copy engines at once */
    cudaStream_t down_stream, up_stream;
};

struct zb_cuda_stash {
    zb_cuda_stage_t *stage;
    int state;
    size_t bytes_f, bytes_b;
    void *mem; /* device: every buffer below */
    layer_acts_t *layers;
    float **xs;
    int *tokens_host; /* host copy: the embedding's W builds its row buckets from it */
    int *tokens, *bucket, *targets;
    float *dencoded, *lnf, *lnf_mean, *lnf_rstd, *probs, *dlnf;
};

/* ---- helpers ---- */

static zb_status_t cuda_err(cudaError_t e, const char *what, zb_err_t *err)
{
    if (e == cudaSuccess)
        return ZB_OK;
    cudaGetLastError();
    return zb_err_set(err, e == cudaErrorMemoryAllocation ? ZB_ENOMEM : ZB_EIO, "CUDA %s: %s",
                      what, cudaGetErrorString(e));
}

static float *P(const zb_cuda_stage_t *s, zb_gpt2_tensor_t t) { return s->params + s->offs[t]; }
static float *G(const zb_cuda_stage_t *s, zb_gpt2_tensor_t t) { return s->grads + s->offs[t]; }

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
static void stage_layout(zb_cuda_stage_t *s)
{
    size_t full[ZB_GPT2_NUM_TENSORS];
    zb_gpt2_tensor_sizes(&s->cfg, full);
    s->count = 0;
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS; t++) {
        bool held = per_layer(t) ? s->nl > 0
                    : t == ZB_WTE ? s->span.embed || s->span.head
                    : t == ZB_WPE ? s->span.embed
                                  : s->span.head;
        s->sizes[t] = !held ? 0
                      : per_layer(t) ? full[t] / (size_t)s->cfg.layers * (size_t)s->nl
                                     : full[t];
        s->offs[t] = s->count;
        s->count += s->sizes[t];
    }
}

/* Floats of the per-call scratch: tmp and datty (N·C each), dfch_gelu (4·N·C), one sequence's
 * attention scratch, the losses (N). */
static size_t scratch_floats(const zb_cuda_stage_t *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels;
    return 2 * N * C + 4 * N * C + zb_cu_attention_scratch_floats(s->T, s->cfg.heads) + N;
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

zb_status_t zb_cuda_stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_cuda_precision_t prec, int device, zb_cuda_stage_t **out,
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
    stage_layout(s);
    size_t N = (size_t)B * T, C = (size_t)cfg->channels;
    size_t scratch = scratch_floats(s);
    size_t head = span->head ? s->sizes[ZB_WTE] : 0;
    cudaError_t e = cudaMalloc((void **)&s->params, s->count * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->grads, s->count * sizeof(float));
    if (e == cudaSuccess && head)
        e = cudaMalloc((void **)&s->wte_head, head * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->m, s->count * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->v, s->count * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&s->scratch_mem, scratch * sizeof(float));
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
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->ctx.stream);
    s->losses_host = malloc(N * sizeof(float));
    if (e != cudaSuccess || !s->losses_host) {
        zb_cuda_stage_free(s);
        if (e == cudaSuccess)
            return zb_err_set(err, ZB_ENOMEM, "cannot allocate the loss buffer");
        return cuda_err(e, "stage allocation (parameters, gradients, moments, scratch)", err);
    }
    float *f = s->scratch_mem;
    s->tmp = f;
    s->datty = f + N * C;
    s->dfch_gelu = f + 2 * N * C;
    s->att_scr = f + 6 * N * C;
    s->losses = s->att_scr + zb_cu_attention_scratch_floats(T, cfg->heads);
    *out = s;
    return ZB_OK;
}

void zb_cuda_stage_free(zb_cuda_stage_t *s)
{
    if (!s)
        return;
    cudaSetDevice(s->ctx.device);
    if (s->borrowed_stream) { /* the partition owns it: finish our work, leave it alive */
        cudaStreamSynchronize(s->ctx.stream);
        s->ctx.stream = NULL;
    }
    cudaStream_t copies[2] = {s->down_stream, s->up_stream};
    for (int k = 0; k < 2; k++) {
        if (copies[k]) {
            cudaStreamSynchronize(copies[k]);
            cudaStreamDestroy(copies[k]);
        }
    }
    zb_cu_ctx_destroy(&s->ctx);
    cudaFree(s->backup);
    cudaFree(s->params);
    cudaFree(s->grads);
    cudaFree(s->wte_head);
    cudaFree(s->m);
    cudaFree(s->v);
    cudaFree(s->scratch_mem);
    free(s->losses_host);
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
    return st != ZB_OK ? st
                       : copy_params(s, s->params, host, false, "params upload", err);
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
        st = copy(s, host->wte_head, s->wte_head, s->sizes[ZB_WTE] * sizeof(float),
                  cudaMemcpyDeviceToHost, "grads download", err);
    else if (st == ZB_OK)
        memset(host->wte_head, 0, s->sizes[ZB_WTE] * sizeof(float));
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
    size_t cap = which == ZB_CUDA_STATE_WTE_HEAD ? (s->wte_head ? s->sizes[ZB_WTE] : 0) : s->count;
    if (!base || off > cap || n > cap - off)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda state copy: %zu floats at %zu are outside buffer %d (%zu floats)",
                          n, off, (int)which, cap);
    if (n == 0)
        return ZB_OK;
    return to_host ? copy(s, host, base + off, n * sizeof(float), cudaMemcpyDeviceToHost,
                          "state download", err)
                   : copy(s, base + off, host, n * sizeof(float), cudaMemcpyHostToDevice,
                          "state upload", err);
}

zb_status_t zb_cuda_state_backup(zb_cuda_stage_t *s, bool save, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda backup: stage is NULL");
    if (!save && !s->backup)
        return zb_err_set(err, ZB_EINVAL, "cuda backup: nothing saved to restore");
    if (!s->backup) {
        cudaError_t e = cudaMalloc((void **)&s->backup, 3 * s->count * sizeof(float));
        if (e != cudaSuccess) {
            s->backup = NULL;
            return cuda_err(e, "backup allocation", err);
        }
    }
    float *state[3] = {s->params, s->m, s->v};
    zb_status_t st = ZB_OK;
    for (int k = 0; k < 3 && st == ZB_OK; k++) {
        float *b = s->backup + (size_t)k * s->count;
        st = copy(s, save ? b : state[k], save ? state[k] : b, s->count * sizeof(float),
                  cudaMemcpyDeviceToDevice, save ? "backup" : "restore", err);
    }
    return st;
}

zb_status_t zb_cuda_stage_use_stream(zb_cuda_stage_t *s, struct CUstream_st *stream, int sms,
                                     zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda use stream: stage is NULL");
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream);
    if (e != cudaSuccess)
        return cuda_err(e, "use stream", err);
    if (!s->borrowed_stream && s->ctx.stream)
        cudaStreamDestroy(s->ctx.stream);
    s->ctx.stream = (cudaStream_t)stream;
    s->ctx.sm_target = sms > 0 ? sms : 0;
    s->borrowed_stream = true;
    return ZB_OK;
}

zb_status_t zb_cuda_event_new(zb_cuda_stage_t *s, struct CUevent_st **out, zb_err_t *err)
{
    *out = NULL;
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda event: stage is NULL");
    cudaError_t e = cudaSetDevice(s->ctx.device);
    cudaEvent_t ev = NULL;
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return cuda_err(e, "event create", err);
    *out = ev;
    return ZB_OK;
}

void zb_cuda_event_free(struct CUevent_st *ev)
{
    if (ev)
        cudaEventDestroy(ev);
}

zb_status_t zb_cuda_event_record(zb_cuda_stage_t *s, struct CUevent_st *ev, zb_err_t *err)
{
    if (!s || !ev)
        return zb_err_set(err, ZB_EINVAL, "cuda event record: stage and event are required");
    zb_status_t st = zb_cu_ctx_check(&s->ctx, "event record", err);
    return st != ZB_OK ? st : cuda_err(cudaEventRecord(ev, s->ctx.stream), "event record", err);
}

zb_status_t zb_cuda_copy_after(zb_cuda_stage_t *s, float *dst_dev, const float *src_dev,
                               int src_device, size_t n, struct CUevent_st *after, zb_err_t *err)
{
    if (!s || !dst_dev || !src_dev)
        return zb_err_set(err, ZB_EINVAL, "cuda copy after: stage and buffers are required");
    zb_status_t st = zb_cu_ctx_check(&s->ctx, "device message", err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = after ? cudaStreamWaitEvent(s->ctx.stream, after, 0) : cudaSuccess;
    if (e == cudaSuccess)
        e = src_device == s->ctx.device
                ? cudaMemcpyAsync(dst_dev, src_dev, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                  s->ctx.stream)
                : cudaMemcpyPeerAsync(dst_dev, s->ctx.device, src_dev, src_device,
                                      n * sizeof(float), s->ctx.stream);
    return cuda_err(e, "device message", err);
}

int zb_cuda_stage_device(const zb_cuda_stage_t *s) { return s ? s->ctx.device : -1; }

/* ---- messages staged through page-locked host buffers, on the stage's copy stream ---- */

zb_status_t zb_cuda_host_alloc(size_t n, float **out, zb_err_t *err)
{
    void *p = NULL;
    *out = NULL;
    cudaError_t e = cudaHostAlloc(&p, (n ? n : 1) * sizeof(float), cudaHostAllocDefault);
    if (e != cudaSuccess)
        return cuda_err(e, "pinned host buffer", err);
    *out = p;
    return ZB_OK;
}

void zb_cuda_host_free(float *host)
{
    if (host)
        cudaFreeHost(host);
}

/* The copy stream of one direction, made on first use (non-blocking: it never waits for the
 * legacy stream, only for the events it is told to). */
static zb_status_t copy_stream(zb_cuda_stage_t *s, cudaStream_t *stream, const char *what,
                               zb_err_t *err)
{
    zb_status_t st = zb_cu_ctx_check(&s->ctx, what, err);
    if (st != ZB_OK || *stream)
        return st;
    cudaError_t e = cudaSetDevice(s->ctx.device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
    return cuda_err(e, "copy stream", err);
}

zb_status_t zb_cuda_stage_download(zb_cuda_stage_t *s, float *dst_host, const float *src_dev,
                                   size_t n, struct CUevent_st *produced, struct CUevent_st *done,
                                   zb_err_t *err)
{
    if (!s || !dst_host || !src_dev || !produced || !done)
        return zb_err_set(err, ZB_EINVAL, "cuda download: stage, buffers and events are required");
    zb_status_t st = copy_stream(s, &s->down_stream, "message download", err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = cudaEventRecord(produced, s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(s->down_stream, produced, 0);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst_host, src_dev, n * sizeof(float), cudaMemcpyDeviceToHost,
                            s->down_stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(done, s->down_stream);
    return cuda_err(e, "message download", err);
}

zb_status_t zb_cuda_stage_upload(zb_cuda_stage_t *s, float *dst_dev, const float *src_host,
                                 size_t n, struct CUevent_st *done, zb_err_t *err)
{
    if (!s || !dst_dev || !src_host || !done)
        return zb_err_set(err, ZB_EINVAL, "cuda upload: stage, buffers and event are required");
    zb_status_t st = copy_stream(s, &s->up_stream, "message upload", err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = cudaMemcpyAsync(dst_dev, src_host, n * sizeof(float),
                                    cudaMemcpyHostToDevice, s->up_stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(done, s->up_stream);
    return cuda_err(e, "message upload", err);
}

zb_status_t zb_cuda_stage_wait(zb_cuda_stage_t *s, struct CUevent_st *ev, zb_err_t *err)
{
    if (!s || !ev)
        return zb_err_set(err, ZB_EINVAL, "cuda wait: stage and event are required");
    zb_status_t st = zb_cu_ctx_check(&s->ctx, "event wait", err);
    return st != ZB_OK ? st : cuda_err(cudaStreamWaitEvent(s->ctx.stream, ev, 0), "event wait", err);
}

zb_status_t zb_cuda_event_sync(struct CUevent_st *ev, zb_err_t *err)
{
    if (!ev)
        return zb_err_set(err, ZB_EINVAL, "cuda event sync: no event");
    return cuda_err(cudaEventSynchronize(ev), "event sync", err);
}

zb_status_t zb_cuda_event_query(struct CUevent_st *ev, bool *done, zb_err_t *err)
{
    *done = false;
    if (!ev)
        return zb_err_set(err, ZB_EINVAL, "cuda event query: no event");
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady) {
        /* "not yet" is an answer, not an error: keep it from being seen as the last error by
         * the next launch check (a real error stays: only this code is cleared) */
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            (void)cudaGetLastError();
        return ZB_OK;
    }
    *done = e == cudaSuccess;
    return cuda_err(e, "event query", err);
}

struct CUstream_st *zb_cuda_stage_stream(const zb_cuda_stage_t *s)
{
    return s ? (struct CUstream_st *)s->ctx.stream : NULL;
}

zb_status_t zb_cuda_stage_bind(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda bind: stage is NULL");
    return cuda_err(cudaSetDevice(s->ctx.device), "set device", err);
}

zb_status_t zb_cuda_grads_zero(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda grads zero: stage is NULL");
    cudaError_t e = cudaMemsetAsync(s->grads, 0, s->count * sizeof(float), s->ctx.stream);
    if (e == cudaSuccess && s->wte_head)
        e = cudaMemsetAsync(s->wte_head, 0, s->sizes[ZB_WTE] * sizeof(float), s->ctx.stream);
    if (e != cudaSuccess)
        return cuda_err(e, "grads zero", err);
    return zb_cu_ctx_check(&s->ctx, "grads zero", err);
}

zb_status_t zb_cuda_fold_tied(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda fold tied: stage is NULL");
    if (s->wte_head) {
        zb_cuk_add_inplace(s->ctx.stream, G(s, ZB_WTE), s->wte_head, s->sizes[ZB_WTE]);
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
    if (!s || !out)
        return zb_err_set(err, ZB_EINVAL, "cuda grad sumsq: stage and output are required");
    if (unit < 0 || unit >= zb_gpt2_num_units(&s->cfg))
        return zb_err_set(err, ZB_EINVAL, "cuda grad sumsq: unit %d not in [0, %d)", unit,
                          zb_gpt2_num_units(&s->cfg));
    size_t off[16], cnt[16];
    int tensor[16];
    int n = stage_unit_ranges(s, unit, off, cnt, tensor);
    /* every range's partials into its own slot, one copy back, summed in range order */
    double part[16 * ZB_CU_SUMSQ_BLOCKS], sum = 0.0;
    for (int r = 0; r < n; r++)
        zb_cuk_sumsq_partials(s->ctx.stream, s->ctx.sumsq + (size_t)r * ZB_CU_SUMSQ_BLOCKS,
                              s->grads + off[r], cnt[r]);
    zb_cu_launch_check(&s->ctx, "grad sumsq");
    zb_status_t st = copy(s, part, s->ctx.sumsq, (size_t)n * ZB_CU_SUMSQ_BLOCKS * sizeof(double),
                          cudaMemcpyDeviceToHost, "grad sumsq", err);
    if (st != ZB_OK)
        return st;
    for (int i = 0; i < n * ZB_CU_SUMSQ_BLOCKS; i++)
        sum += part[i];
    *out = sum;
    return ZB_OK;
}

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
    for (int u = 0; u < n_units; u++) {
        size_t off[16], cnt[16];
        int tensor[16];
        int n = stage_unit_ranges(s, units[u], off, cnt, tensor);
        for (int r = 0; r < n; r++) {
            float wd = zb_adamw_decays((zb_gpt2_tensor_t)tensor[r]) ? h->weight_decay : 0.0f;
            zb_cuk_adamw(s->ctx.stream, s->params + off[r], s->grads + off[r], s->m + off[r],
                         s->v + off[r], cnt[r], h->beta1, h->beta2, bc1, bc2, h->eps, wd, lr,
                         grad_scale);
        }
    }
    zb_cu_launch_check(&s->ctx, "adamw");
    return zb_cu_ctx_check(&s->ctx, "adamw", err);
}

zb_status_t zb_cuda_sync(zb_cuda_stage_t *s, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda sync: stage is NULL");
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream);
    if (e == cudaSuccess && s->down_stream)
        e = cudaStreamSynchronize(s->down_stream);
    if (e == cudaSuccess && s->up_stream)
        e = cudaStreamSynchronize(s->up_stream);
    if (e != cudaSuccess)
        zb_cu_fail(&s->ctx, ZB_EIO, "CUDA: %s", cudaGetErrorString(e));
    return zb_cu_ctx_check(&s->ctx, "cuda sync", err);
}

zb_status_t zb_cuda_buffer_alloc(zb_cuda_stage_t *s, size_t n, float **out_dev, zb_err_t *err)
{
    *out_dev = NULL;
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda buffer: stage is NULL");
    cudaSetDevice(s->ctx.device);
    float *p = NULL;
    cudaError_t e = cudaMalloc((void **)&p, (n ? n : 1) * sizeof(float));
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

/* ---- stash: the buffer walk of src/model/gpt2_stage.c without its scratch ---- */

typedef struct {
    char *base;
    size_t off, bytes_f, bytes_b;
} layout_t;

static void *take(layout_t *lo, size_t bytes, int keep)
{
    lo->off = (lo->off + 255) & ~(size_t)255; /* 256-byte aligned device buffers */
    void *p = lo->base ? lo->base + lo->off : NULL;
    lo->off += bytes;
    if (keep & KEEP_F)
        lo->bytes_f += bytes;
    if (keep & KEEP_B)
        lo->bytes_b += bytes;
    return p;
}

#define TAKE_F(lo, n, keep) ((float *)take((lo), (n) * sizeof(float), (keep)))

static void layout(layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->cfg.channels, NH = (size_t)s->cfg.heads;
    size_t Vp = (size_t)s->cfg.padded_vocab;
    int nl = s->nl;
    const int FB = KEEP_F | KEEP_B;
    layer_acts_t dummy;
    if (s->span.embed) {
        int *tok = take(lo, N * sizeof(int), FB);
        int *bucket = take(lo, zb_cu_encoder_bucket_ints(s->B, s->T) * sizeof(int), KEEP_B);
        float *denc = TAKE_F(lo, N * C, KEEP_B);
        if (st) {
            st->tokens = tok;
            st->bucket = bucket;
            st->dencoded = denc;
        }
    }
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

zb_status_t zb_cuda_stash_new(zb_cuda_stage_t *s, zb_cuda_stash_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda stash: stage is NULL");
    zb_cuda_stash_t *st = calloc(1, sizeof *st);
    if (st) {
        st->layers = calloc(s->nl > 0 ? (size_t)s->nl : 1, sizeof *st->layers);
        st->xs = calloc((size_t)s->nl + 1, sizeof *st->xs);
        st->tokens_host = calloc((size_t)s->B * s->T, sizeof(int));
    }
    if (!st || !st->layers || !st->xs || !st->tokens_host) {
        zb_cuda_stash_free(st);
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the CUDA stash");
    }
    layout_t lo = {0};
    layout(&lo, NULL, s);
    cudaSetDevice(s->ctx.device);
    cudaError_t e = cudaMalloc(&st->mem, lo.off ? lo.off : 256);
    if (e != cudaSuccess) {
        st->mem = NULL;
        zb_cuda_stash_free(st);
        cudaGetLastError();
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the activation stash on the GPU "
                                          "(%.1f MB): %s", lo.off / 1e6, cudaGetErrorString(e));
    }
    layout_t real = {.base = st->mem};
    layout(&real, st, s);
    st->stage = s;
    st->bytes_f = real.bytes_f;
    st->bytes_b = real.bytes_b;
    st->state = STATE_EMPTY;
    *out = st;
    return ZB_OK;
}

void zb_cuda_stash_free(zb_cuda_stash_t *st)
{
    if (!st)
        return;
    cudaFree(st->mem);
    free(st->layers);
    free(st->xs);
    free(st->tokens_host);
    free(st);
}

void zb_cuda_stash_reset(zb_cuda_stash_t *st) { st->state = STATE_EMPTY; }

/* The figures of a stage shaped like s (allocated or not). */
static void stage_mem(const zb_cuda_stage_t *s, zb_cuda_stage_mem_t *m)
{
    layout_t lo = {0};
    layout(&lo, NULL, s);
    m->state = s->count * sizeof(float);
    m->wte_head = s->span.head ? s->sizes[ZB_WTE] * sizeof(float) : 0;
    m->scratch = scratch_floats(s) * sizeof(float);
    m->stash = lo.off ? lo.off : 256; /* what zb_cuda_stash_new allocates */
    m->after_f = lo.bytes_f;
    m->after_b = lo.bytes_b;
    m->backup = s->backup ? 3 * m->state : 0;
}

zb_status_t zb_cuda_stage_memory(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                 int T, zb_cuda_stage_mem_t *out, zb_err_t *err)
{
    memset(out, 0, sizeof *out);
    zb_status_t st = zb_cuda_stage_check(cfg, span, B, T, ZB_CUDA_FP32, err);
    if (st != ZB_OK)
        return st;
    zb_cuda_stage_t shape = {.cfg = *cfg, .span = *span, .B = B, .T = T,
                             .nl = span->layer_end - span->layer_begin};
    stage_layout(&shape);
    stage_mem(&shape, out);
    return ZB_OK;
}

void zb_cuda_stage_allocated(const zb_cuda_stage_t *s, zb_cuda_stage_mem_t *out)
{
    memset(out, 0, sizeof *out);
    if (s)
        stage_mem(s, out);
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
    zb_cu_attention_forward(c, a->atty, a->att, a->qkv, B, T, C, NH);
    zb_cu_matmul_forward(c, s->tmp, a->atty, w->attprojw, w->attprojb, N, C, C);
    zb_cu_residual_forward(c, a->res2, x, s->tmp, NC);
    zb_cu_layernorm_forward(c, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2w, w->ln2b, N, C);
    zb_cu_matmul_forward(c, a->fch, a->ln2, w->fcw, w->fcb, N, C, 4 * C);
    zb_cu_gelu_forward(c, a->fch_gelu, a->fch, 4 * NC);
    zb_cu_matmul_forward(c, s->tmp, a->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
    zb_cu_residual_forward(c, y, a->res2, s->tmp, NC);
}

zb_status_t zb_cuda_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                            const float *x_in, const int *targets, float *x_out, float *loss,
                            zb_err_t *err)
{
    zb_status_t r = check_call(s, st, "forward", err);
    if (r != ZB_OK)
        return r;
    if (st->state == STATE_AFTER_B)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda forward: stash still holds a microbatch waiting for W");
    const zb_gpt2_span_t *span = &s->span;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    size_t NC = (size_t)N * C;
    if (span->embed ? !tokens : !x_in)
        return zb_err_set(err, ZB_EINVAL, "cuda forward: missing %s",
                          span->embed ? "tokens" : "x_in");
    if (span->head ? (!targets || !loss) : !x_out)
        return zb_err_set(err, ZB_EINVAL, "cuda forward: missing %s",
                          span->head ? "targets or loss" : "x_out");
    if (span->embed && (r = check_ids(tokens, (size_t)N, s->cfg.vocab, "tokens", err)) != ZB_OK)
        return r;
    if (span->head && (r = check_ids(targets, (size_t)N, s->cfg.vocab, "targets", err)) != ZB_OK)
        return r;
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda forward", err)) != ZB_OK)
        return r;
    zb_cu_ctx_t *c = &s->ctx;
    cudaError_t e = cudaSuccess;
    float *x0 = st->xs[0];
    if (span->embed) {
        memcpy(st->tokens_host, tokens, (size_t)N * sizeof(int));
        e = cudaMemcpyAsync(st->tokens, tokens, (size_t)N * sizeof(int), cudaMemcpyHostToDevice,
                            c->stream);
        float *dst = (nl == 0 && !span->head) ? x_out : x0;
        if (e == cudaSuccess)
            zb_cu_encoder_forward(c, dst, st->tokens, P(s, ZB_WTE), P(s, ZB_WPE), s->B, s->T, C);
    } else {
        e = cudaMemcpyAsync(x0, x_in, NC * sizeof(float), cudaMemcpyDeviceToDevice, c->stream);
    }
    if (e != cudaSuccess)
        zb_cu_fail(c, ZB_EIO, "CUDA forward input copy: %s", cudaGetErrorString(e));
    for (int l = 0; l < nl; l++) {
        block_params_t w = block_params(s, l);
        float *y = (l + 1 < nl || span->head) ? st->xs[l + 1] : x_out;
        block_forward(s, &w, &st->layers[l], st->xs[l], y);
    }
    if (span->head) {
        int Vp = s->cfg.padded_vocab;
        e = cudaMemcpyAsync(st->targets, targets, (size_t)N * sizeof(int), cudaMemcpyHostToDevice,
                            c->stream);
        if (e != cudaSuccess)
            zb_cu_fail(c, ZB_EIO, "CUDA targets copy: %s", cudaGetErrorString(e));
        zb_cu_layernorm_forward(c, st->lnf, st->lnf_mean, st->lnf_rstd, st->xs[nl],
                                P(s, ZB_LNFW), P(s, ZB_LNFB), N, C);
        zb_cu_matmul_forward(c, st->probs, st->lnf, P(s, ZB_WTE), NULL, N, C, Vp);
        zb_cu_crossentropy_forward(c, s->losses, st->probs, st->targets, N, s->cfg.vocab, Vp);
        if (c->status == ZB_OK) {
            e = cudaMemcpyAsync(s->losses_host, s->losses, (size_t)N * sizeof(float),
                                cudaMemcpyDeviceToHost, c->stream);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(c->stream);
            if (e != cudaSuccess)
                zb_cu_fail(c, ZB_EIO, "CUDA loss copy: %s", cudaGetErrorString(e));
        }
        if (c->status == ZB_OK) {
            double sum = 0.0; /* the CPU stage's order and precision */
            for (int i = 0; i < N; i++)
                sum += s->losses_host[i];
            *loss = (float)(sum / N);
        }
    }
    if ((r = zb_cu_ctx_check(c, "cuda forward", err)) != ZB_OK)
        return r;
    st->state = STATE_AFTER_F;
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

static void copy_f(zb_cu_ctx_t *c, float *dst, const float *src, size_t n)
{
    if (c->status != ZB_OK)
        return;
    cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    c->stream);
    if (e != cudaSuccess)
        zb_cu_fail(c, ZB_EIO, "CUDA copy: %s", cudaGetErrorString(e));
}

static void block_backward_input(zb_cuda_stage_t *s, const block_params_t *w, layer_acts_t *a,
                                 const float *x, float *dx)
{
    zb_cu_ctx_t *c = &s->ctx;
    int B = s->B, T = s->T, N = B * T, C = s->cfg.channels, NH = s->cfg.heads;
    size_t NC = (size_t)N * C;
    memset_f(c, s->dfch_gelu, 4 * NC);
    zb_cu_matmul_backward_input(c, s->dfch_gelu, a->dres3, w->fcprojw, N, 4 * C, C);
    memset_f(c, a->dfch, 4 * NC);
    zb_cu_gelu_backward_input(c, a->dfch, a->fch, s->dfch_gelu, 4 * NC);
    memset_f(c, a->dln2, NC);
    zb_cu_matmul_backward_input(c, a->dln2, a->dfch, w->fcw, N, C, 4 * C);
    copy_f(c, a->dres2, a->dres3, NC);
    zb_cu_layernorm_backward_input(c, a->dres2, a->dln2, a->res2, a->ln2_mean, a->ln2_rstd,
                                   w->ln2w, N, C);
    memset_f(c, s->datty, NC);
    zb_cu_matmul_backward_input(c, s->datty, a->dres2, w->attprojw, N, C, C);
    memset_f(c, a->dqkv, 3 * NC);
    zb_cu_attention_backward_input(c, a->dqkv, s->att_scr, s->datty, a->qkv, a->att, B, T, C,
                                   NH);
    memset_f(c, a->dln1, NC);
    zb_cu_matmul_backward_input(c, a->dln1, a->dqkv, w->qkvw, N, C, 3 * C);
    copy_f(c, dx, a->dres2, NC);
    zb_cu_layernorm_backward_input(c, dx, a->dln1, x, a->ln1_mean, a->ln1_rstd, w->ln1w, N, C);
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
    zb_cu_ctx_t *c = &s->ctx;
    int N = s->B * s->T, C = s->cfg.channels, nl = s->nl;
    size_t NC = (size_t)N * C;
    float *dx0 = span->embed ? st->dencoded : dx_in;
    float *dtop = nl > 0 ? st->layers[nl - 1].dres3 : dx0;
    if (span->head) {
        zb_cu_crossentropy_backward(c, st->probs, st->targets, grad_scale, N, s->cfg.vocab,
                                    s->cfg.padded_vocab);
        memset_f(c, st->dlnf, NC);
        zb_cu_matmul_backward_input(c, st->dlnf, st->probs, P(s, ZB_WTE), N, C,
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
    if ((r = zb_cu_ctx_check(c, "cuda backward_input", err)) != ZB_OK)
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

zb_status_t zb_cuda_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st, zb_err_t *err)
{
    zb_status_t r = check_call(s, st, "backward_weight", err);
    if (r != ZB_OK)
        return r;
    if (st->state != STATE_AFTER_B)
        return zb_err_set(err, ZB_EINVAL, "cuda backward_weight: no backward_input pending");
    if ((r = zb_cu_ctx_check(&s->ctx, "cuda backward_weight", err)) != ZB_OK)
        return r;
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
    if ((r = zb_cu_ctx_check(c, "cuda backward_weight", err)) != ZB_OK)
        return r;
    st->state = STATE_EMPTY;
    return ZB_OK;
}
