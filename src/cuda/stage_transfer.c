/* zbpp — the CUDA stage's streams, events and page-locked host memory: the pieces a pipeline
 * rank moves messages with (device to device after an event, or staged through pinned host
 * buffers on the stage's copy streams). */
#include <stdlib.h>

#include "cuda/stage.h"

zb_status_t zb_cuda_stage_use_stream(zb_cuda_stage_t *s, struct CUstream_st *stream, int sms,
                                     zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda use stream: stage is NULL");
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream);
    if (e != cudaSuccess)
        return cuda_err(e, "use stream", err);
    if (!s->borrowed_stream && s->ctx.stream) {
        if (sms > 0 && !s->wide_stream) { /* a partition: the own stream stays, for widen */
            s->wide_stream = s->ctx.stream;
            e = cudaEventCreateWithFlags(&s->wide_in, cudaEventDisableTiming);
            if (e == cudaSuccess)
                e = cudaEventCreateWithFlags(&s->wide_out, cudaEventDisableTiming);
            if (e != cudaSuccess)
                return cuda_err(e, "use stream: events", err);
        } else {
            cudaStreamDestroy(s->ctx.stream);
        }
    }
    s->ctx.stream = (cudaStream_t)stream;
    s->ctx.sm_target = sms > 0 ? sms : 0;
    s->borrowed_stream = true;
    return ZB_OK;
}

zb_status_t zb_cuda_stage_widen(zb_cuda_stage_t *s, bool wide, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "cuda widen: stage is NULL");
    zb_status_t st = zb_cu_ctx_check(&s->ctx, "widen", err);
    if (st != ZB_OK || !s->wide_stream || wide == (s->narrow_stream != NULL))
        return st; /* the whole GPU already, or already where asked */
    cudaStream_t from = s->ctx.stream, to = wide ? s->wide_stream : s->narrow_stream;
    cudaEvent_t ev = wide ? s->wide_in : s->wide_out;
    cudaError_t e = cudaEventRecord(ev, from);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(to, ev, 0);
    if (e != cudaSuccess)
        return cuda_err(e, "widen", err);
    s->narrow_stream = wide ? from : NULL;
    s->ctx.stream = to;
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

zb_status_t zb_cuda_stage_plan_sms(zb_cuda_stage_t *s, int sms, zb_err_t *err)
{
    if (!s || sms < 0)
        return zb_err_set(err, ZB_EINVAL, "cuda plan SMs: a stage and sms >= 0 are required");
    if (sms > 0)
        s->ctx.sm_target = sms;
    return ZB_OK;
}

void zb_cuda_stage_wte_grads(const zb_cuda_stage_t *s, float **grad, const float **acc,
                             size_t *n)
{
    bool has = s && s->sizes[ZB_WTE] > 0;
    *grad = has ? G(s, ZB_WTE) : NULL;
    *acc = s ? s->wte_head : NULL; /* a head's, also one that borrows its WTE */
    *n = has || *acc ? wte_elems(s) : 0;
}

zb_status_t zb_cuda_grad_wte_add(zb_cuda_stage_t *s, const float *acc_dev,
                                 struct CUevent_st *after, zb_err_t *err)
{
    if (!s || !acc_dev || s->sizes[ZB_WTE] == 0)
        return zb_err_set(err, ZB_EINVAL, "cuda WTE fold: a stage holding WTE and an accumulator "
                                          "are required");
    zb_status_t st = zb_cu_ctx_check(&s->ctx, "WTE fold", err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = after ? cudaStreamWaitEvent(s->ctx.stream, after, 0) : cudaSuccess;
    if (e != cudaSuccess)
        return cuda_err(e, "WTE fold", err);
    /* the order of the CPU's fold: embedding's + head's */
    zb_cuk_add_inplace(s->ctx.stream, G(s, ZB_WTE), acc_dev, s->sizes[ZB_WTE]);
    zb_cu_launch_check(&s->ctx, "WTE fold");
    return zb_cu_ctx_check(&s->ctx, "WTE fold", err);
}

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
                                 size_t n, struct CUevent_st *after, struct CUevent_st *done,
                                 zb_err_t *err)
{
    if (!s || !dst_dev || !src_host || !done)
        return zb_err_set(err, ZB_EINVAL, "cuda upload: stage, buffers and event are required");
    zb_status_t st = copy_stream(s, &s->up_stream, "message upload", err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = after ? cudaStreamWaitEvent(s->up_stream, after, 0) : cudaSuccess;
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst_dev, src_host, n * sizeof(float), cudaMemcpyHostToDevice,
                            s->up_stream);
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

zb_status_t zb_cuda_stash_wait(zb_cuda_stage_t *s, bool upload, struct CUevent_st *ev,
                               zb_err_t *err)
{
    if (!s || !ev)
        return zb_err_set(err, ZB_EINVAL, "cuda stash wait: stage and event are required");
    cudaStream_t *stream = upload ? &s->stash_up : &s->stash_down;
    zb_status_t st = copy_stream(s, stream, "stash copy", err);
    return st != ZB_OK ? st : cuda_err(cudaStreamWaitEvent(*stream, ev, 0), "stash wait", err);
}

zb_status_t zb_cuda_stash_copy(zb_cuda_stage_t *s, bool upload, float *dst, const float *src,
                               size_t n, struct CUevent_st *done, zb_err_t *err)
{
    if (!s || !dst || !src || !done)
        return zb_err_set(err, ZB_EINVAL, "cuda stash copy: stage, buffers and event are required");
    cudaStream_t *stream = upload ? &s->stash_up : &s->stash_down;
    zb_status_t st = copy_stream(s, stream, "stash copy", err);
    if (st != ZB_OK)
        return st;
    cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof(float),
                                    upload ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                    *stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(done, *stream);
    return cuda_err(e, "stash copy", err);
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
