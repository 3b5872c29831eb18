/* The CUDA backend in a build without CUDA (-DZB_CUDA=OFF, or no toolkit found): no devices,
 * and every stage call fails with one line saying so. */
#include "cuda/stream.h"
#include "zbpp/cuda.h"

/* the stubs ignore their arguments */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define NO_CUDA(err) zb_err_set((err), ZB_EUNSUPPORTED, "zbpp was built without CUDA (ZB_CUDA=OFF)")

bool zb_cuda_built(void) { return false; }

zb_status_t zb_cuda_device_count(int *n, zb_err_t *err)
{
    (void)err;
    *n = 0;
    return ZB_OK;
}

zb_status_t zb_cuda_device_describe(int dev, char *buf, size_t len, zb_err_t *err)
{
    (void)dev;
    if (buf && len)
        buf[0] = '\0';
    return NO_CUDA(err);
}

zb_status_t zb_cuda_device_memory(int dev, size_t *used, size_t *total, zb_err_t *err)
{
    *used = 0, *total = 0;
    return NO_CUDA(err);
}

zb_status_t zb_cuda_stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_cuda_precision_t prec, int device, zb_cuda_stage_t **out,
                              zb_err_t *err)
{
    (void)device;
    *out = NULL;
    zb_status_t s = zb_cuda_stage_check(cfg, span, B, T, prec, err);
    return s != ZB_OK ? s : NO_CUDA(err);
}

void zb_cuda_stage_free(zb_cuda_stage_t *s) { (void)s; }

#define STUB(name, ...)                                                                            \
    zb_status_t name(__VA_ARGS__, zb_err_t *err) { return NO_CUDA(err); }

STUB(zb_cuda_params_upload, zb_cuda_stage_t *s, const zb_gpt2_params_t *h)
STUB(zb_cuda_params_download, zb_cuda_stage_t *s, zb_gpt2_params_t *h)
STUB(zb_cuda_adamw_upload, zb_cuda_stage_t *s, const zb_adamw_state_t *h)
STUB(zb_cuda_adamw_download, zb_cuda_stage_t *s, zb_adamw_state_t *h)
STUB(zb_cuda_grads_download, zb_cuda_stage_t *s, zb_gpt2_grads_t *h)
STUB(zb_cuda_grads_zero, zb_cuda_stage_t *s)
STUB(zb_cuda_fold_tied, zb_cuda_stage_t *s)
STUB(zb_cuda_grad_unit_sumsq, zb_cuda_stage_t *s, int unit, double *out)
STUB(zb_cuda_grad_units_sumsq, zb_cuda_stage_t *s, const int *units, int n, double *out)
STUB(zb_cuda_adamw_update_units, zb_cuda_stage_t *s, const zb_adamw_hparams_t *h, float lr, long t,
     float grad_scale, const int *units, int n_units)
STUB(zb_cuda_stash_new, zb_cuda_stage_t *s, zb_cuda_stash_t **out)
STUB(zb_cuda_stash_view_new, zb_cuda_stage_t *s, zb_cuda_stash_t **out)
STUB(zb_cuda_forward, zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
     const float *x_in, const int *targets, float *x_out, float *loss)
STUB(zb_cuda_forward_deferred, zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
     const float *x_in, const int *targets, float *x_out, int loss_slot)
STUB(zb_cuda_stage_loss_slots, zb_cuda_stage_t *s, int slots)
STUB(zb_cuda_stage_fold_loss_grad, zb_cuda_stage_t *s, float grad_scale)
STUB(zb_cuda_loss_take, zb_cuda_stage_t *s, int slot, float *loss)
STUB(zb_cuda_backward_input, zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
     float grad_scale, float *dx_in)
STUB(zb_cuda_backward_weight, zb_cuda_stage_t *s, zb_cuda_stash_t *st)
STUB(zb_cuda_sync, zb_cuda_stage_t *s)
STUB(zb_cuda_buffer_alloc, zb_cuda_stage_t *s, size_t n, float **out_dev)
STUB(zb_cuda_copy_to_device, zb_cuda_stage_t *s, float *dst, const float *src, size_t n)
STUB(zb_cuda_copy_to_host, zb_cuda_stage_t *s, float *dst, const float *src, size_t n)
STUB(zb_cuda_state_copy, zb_cuda_stage_t *s, zb_cuda_state_t which, size_t off, float *host,
     size_t n, bool to_host)
STUB(zb_cuda_state_backup, zb_cuda_stage_t *s, bool save)
STUB(zb_cuda_state_backup_reserve, zb_cuda_stage_t *s)
STUB(zb_cuda_stage_use_stream, zb_cuda_stage_t *s, struct CUstream_st *stream, int sms)
STUB(zb_cuda_stage_widen, zb_cuda_stage_t *s, bool wide)
STUB(zb_cuda_stage_bind, zb_cuda_stage_t *s)
STUB(zb_cuda_event_record, zb_cuda_stage_t *s, struct CUevent_st *ev)
STUB(zb_cuda_copy_after, zb_cuda_stage_t *s, float *dst_dev, const float *src_dev, int src_device,
     size_t n, struct CUevent_st *after)
STUB(zb_cuda_stage_download, zb_cuda_stage_t *s, float *dst_host, const float *src_dev, size_t n,
     struct CUevent_st *produced, struct CUevent_st *done)
STUB(zb_cuda_stage_upload, zb_cuda_stage_t *s, float *dst_dev, const float *src_host, size_t n,
     struct CUevent_st *after, struct CUevent_st *done)
STUB(zb_cuda_stage_wait, zb_cuda_stage_t *s, struct CUevent_st *ev)
STUB(zb_cuda_stash_wait, zb_cuda_stage_t *s, bool upload, struct CUevent_st *ev)
STUB(zb_cuda_stash_copy, zb_cuda_stage_t *s, bool upload, float *dst, const float *src, size_t n,
     struct CUevent_st *done)
STUB(zb_cuda_stage_plan_sms, zb_cuda_stage_t *s, int sms)
STUB(zb_cuda_stage_set_fp32_attention, zb_cuda_stage_t *s, zb_cuda_fp32_attention_t a)
STUB(zb_cuda_grad_wte_add, zb_cuda_stage_t *s, const float *acc_dev, struct CUevent_st *after)
void zb_cuda_stage_wte_grads(const zb_cuda_stage_t *s, float **grad, const float **acc,
                             size_t *n)
{
    *grad = NULL, *acc = NULL, *n = 0;
}
STUB(zb_cuda_event_sync, struct CUevent_st *ev)
STUB(zb_cuda_event_query, struct CUevent_st *ev, bool *done)

zb_status_t zb_cuda_host_alloc(size_t n, float **out, zb_err_t *err)
{
    (void)n;
    *out = NULL;
    return NO_CUDA(err);
}
void zb_cuda_host_free(float *host) { (void)host; }

zb_status_t zb_cuda_event_new(zb_cuda_stage_t *s, struct CUevent_st **out, zb_err_t *err)
{
    *out = NULL;
    return NO_CUDA(err);
}
void zb_cuda_event_free(struct CUevent_st *ev) { (void)ev; }
int zb_cuda_stage_device(const zb_cuda_stage_t *s) { return -1; }
struct CUstream_st *zb_cuda_stage_stream(const zb_cuda_stage_t *s) { return NULL; }

void zb_cuda_stash_free(zb_cuda_stash_t *st) { (void)st; }
void zb_cuda_stash_reset(zb_cuda_stash_t *st) { (void)st; }
void zb_cuda_stash_bind(zb_cuda_stash_t *st, void *const region[3]) {}
void zb_cuda_stash_regions(const zb_cuda_stage_t *s, size_t bytes[3])
{
    bytes[0] = bytes[1] = bytes[2] = 0;
}
size_t zb_cuda_stash_live_bytes(const zb_cuda_stash_t *st)
{
    (void)st;
    return 0;
}
void zb_cuda_buffer_free(float *dev) { (void)dev; }

bool zb_cuda_stage_slice(const zb_cuda_stage_t *s, int tensor, int layer, size_t *off, size_t *n)
{
    return false;
}

size_t zb_cuda_stage_param_count(const zb_cuda_stage_t *s) { return 0; }

zb_status_t zb_cuda_stage_memory(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                 int T, zb_cuda_precision_t prec, zb_cuda_stage_mem_t *out,
                                 zb_err_t *err)
{
    *out = (zb_cuda_stage_mem_t){0};
    return NO_CUDA(err);
}

zb_status_t zb_cuda_stage_memory_tied(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                      int B, int T, zb_cuda_precision_t prec,
                                      zb_cuda_stage_mem_t *out, zb_err_t *err)
{
    *out = (zb_cuda_stage_mem_t){0};
    return NO_CUDA(err);
}

zb_status_t zb_cuda_stage_new_tied(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                   int T, zb_cuda_precision_t prec, int device,
                                   const zb_cuda_stage_t *embed, zb_cuda_stage_t **out,
                                   zb_err_t *err)
{
    *out = NULL;
    return NO_CUDA(err);
}

void zb_cuda_stage_allocated(const zb_cuda_stage_t *s, zb_cuda_stage_mem_t *out)
{
    *out = (zb_cuda_stage_mem_t){0};
}

zb_status_t zb_cuda_stage_profile(zb_cuda_stage_t *s, bool on, zb_err_t *err)
{
    return NO_CUDA(err);
}

zb_status_t zb_cuda_stage_profile_read(zb_cuda_stage_t *s, double *ms, zb_err_t *err)
{
    return NO_CUDA(err);
}
