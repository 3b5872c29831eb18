/* zbpp — the CUDA stage's data, shared by its three files: stage.c (lifecycle, state copies,
 * gradient norms, AdamW), stage_transfer.c (streams, events, pinned host memory: messages),
 * stage_compute.c (stashes, F, B, W). Only they include it. */
#ifndef ZBPP_CUDA_STAGE_H
#define ZBPP_CUDA_STAGE_H

#include "cuda/ctx.h"
#include "cuda/kernels.h"
#include "cuda/kernels_optim.h"
#include "model/gpt2_internal.h"
#include "cuda/stream.h"
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
    /* the optimizer's tables (stage.c, made on first use): the multi-tensor AdamW descriptors
     * of the units last stepped (a host copy to see whether they changed), and room for the
     * norm partials of norm_cap units and their sums */
    zb_cu_adamw_tensor_t *adamw_dev, *adamw_host;
    int adamw_count;
    size_t adamw_max_n;
    double *norm_parts;
    int norm_cap;
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

static inline zb_status_t cuda_err(cudaError_t e, const char *what, zb_err_t *err)
{
    if (e == cudaSuccess)
        return ZB_OK;
    cudaGetLastError();
    return zb_err_set(err, e == cudaErrorMemoryAllocation ? ZB_ENOMEM : ZB_EIO, "CUDA %s: %s",
                      what, cudaGetErrorString(e));
}

static inline float *P(const zb_cuda_stage_t *s, zb_gpt2_tensor_t t) { return s->params + s->offs[t]; }
static inline float *G(const zb_cuda_stage_t *s, zb_gpt2_tensor_t t) { return s->grads + s->offs[t]; }

/* The stage's buffer layout (sizes, offsets, count) from its cfg and span; the floats of its
 * per-call scratch (stage.c). */
void zb_cu_stage_layout(zb_cuda_stage_t *s);
size_t zb_cu_scratch_floats(const zb_cuda_stage_t *s);

#endif
