/* zbpp — the CUDA stage's data, shared by its files: stage.c (lifecycle, state copies,
 * gradient norms, AdamW), stage_transfer.c (streams, events, pinned host memory: messages),
 * stage_compute.c (stashes, memory figures, F, B, W in fp32/tf32) and stage_compute16.c (the
 * bf16-storage stash and F, B, W). Only they include it. */
#ifndef ZBPP_CUDA_STAGE_H
#define ZBPP_CUDA_STAGE_H

#include "cuda/ctx.h"
#include "cuda/flash_attn32.h"
#include "cuda/kernels.h"
#include "cuda/kernels_bf16.h"
#include "cuda/kernels_optim.h"
#include "model/gpt2_internal.h"
#include "cuda/stream.h"
#include "zbpp/cuda.h"

/* A stash buffer's lifetime: live after F, live after B; KEEP_DONOR: F-only, but B's gradients
 * reuse its memory until W (the bf16 walk), so a split stash keeps it in the FW region. */
enum { KEEP_F = 1, KEEP_B = 2, KEEP_DONOR = 4 };
enum { STATE_EMPTY, STATE_AFTER_F, STATE_AFTER_B };

/* A block's stash in fp32 storage. The attention keeps either lse[B, NH, T] (the fp32 flash
 * attention, head sizes zb_cuk_flash32_supported) or the materialised att[B, NH, T, T] (other
 * head sizes); the other pointer is NULL. */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *lse, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;
    float *dres3, *dfch, *dln2, *dres2, *dqkv, *dln1;
} layer_acts_t;

/* A block's stash in bf16 storage (stage_compute16.c): activations bf16, LayerNorm statistics
 * and the attention's log-sum-exp fp32. ln1 and its statistics belong to the block but are
 * written by whatever precedes it (the previous block's residual add fused with this LN). */
typedef struct {
    zb_bf16_t *ln1, *qkv, *atty, *res2, *ln2, *fch, *fch_gelu;
    float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
    zb_bf16_t *dres3, *dfch, *dln2, *dres2, *dqkv, *dln1;
} layer16_t;

/* A launch's descriptor table on the device (room for cap entries) and the host copy of its
 * count entries (to see whether it changed). */
typedef struct {
    void *dev, *host;
    int count, cap;
} zb_cu_table_t;

struct zb_cuda_stage {
    zb_cu_ctx_t ctx;
    zb_gpt2_config_t cfg;
    zb_gpt2_span_t span;
    int B, T, nl;
    size_t count, sizes[ZB_GPT2_NUM_TENSORS], offs[ZB_GPT2_NUM_TENSORS];
    float *params, *grads, *wte_head, *m, *v; /* device */
    zb_bf16_t *weights16; /* bf16: the GEMMs' copy of params (count), else NULL */
    void *scratch_mem;    /* device: the per-call scratch below */
    float *tmp, *datty, *att_scr, *losses;
    /* bf16: the per-call scratch (projection outputs, the stage's edge in bf16, flash) */
    zb_bf16_t *tmp16, *datty16, *edge16;
    void *flash_scr;
    float *losses_host;
    /* deferred losses (zb_cuda_stage_loss_slots): page-locked [n_loss_slots x B·T], the copy
     * of each F's token losses queued there, loss_ev recorded after the last one */
    float *loss_slots;
    int n_loss_slots;
    float fold_scale; /* fp32/tf32 head: its F writes the logits' gradient at this scale (0: off) */
    cudaEvent_t loss_ev;
    float *backup;        /* device: params, m, v saved by zb_cuda_state_backup (3 x count) */
    /* the optimizer's tables (stage.c, room for all the stage's units made when it opens):
     * the multi-tensor AdamW descriptors of the units last stepped (a host copy to see whether
     * they changed), and room for the norm partials of norm_cap units and their sums */
    zb_cu_table_t adamw_tab; /* zb_cu_adamw_tensor_t entries */
    size_t adamw_max_n;
    zb_cu_table_t sumsq_tab; /* zb_cu_sumsq_range_t: the last norm's ranges */
    double *norm_parts;
    int norm_cap;
    bool borrowed_stream; /* the stream is a partition's (zb_cuda_stage_use_stream) */
    /* a head stage reading the embedding stage's WTE on the same rank (zb_cuda_stage_new_tied):
     * its own buffers leave WTE out (wte_borrowed: the layout's flag, also for a shape not
     * made), its gradient goes to wte_head as always */
    bool wte_borrowed;
    const struct zb_cuda_stage *wte_from;
    /* a partition's stage keeps its own stream, which runs on the whole GPU: the update after
     * the step's norm barrier goes there (zb_cuda_stage_widen), the partition's stream ordered
     * around it by the two events */
    cudaStream_t wide_stream, narrow_stream;
    cudaEvent_t wide_in, wide_out;
    /* message copies beside the compute (made on first use), one stream per direction: an
     * upload queued behind a download would wait for the download's producer F/B and its copy,
     * and the two directions could not use the GPU's two copy engines at once */
    cudaStream_t down_stream, up_stream;
    /* offload's stash copies (zb_cuda_stash_copy) on two streams of their own, made on first
     * use: a long stash copy and a message never queue behind each other */
    cudaStream_t stash_down, stash_up;
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
    /* bf16 storage (stage_compute16.c): the residual stream xs16[l] (block l's input, xs16[nl]
     * the head's), the blocks, the head's LN output and logits (overwritten with their gradient
     * by the fused classifier; the B/W GEMMs apply grad_scale as alpha) */
    zb_bf16_t **xs16, *lnf16, *logits16, *dlnf16;
    layer16_t *layers16;
    float grad_scale;
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

static inline bool is_bf16(const zb_cuda_stage_t *s) { return s->ctx.prec == ZB_CUDA_BF16; }
/* fp32 storage: whether the attention is the fp32 flash kernel (else the materialised one). */
static inline bool flash32(const zb_cuda_stage_t *s)
{
    return zb_cuk_flash32_supported(s->cfg.channels / s->cfg.heads);
}

/* The tied WTE's elements (padded vocabulary x channels), whoever holds them; the weights a
 * head stage's products read: its own, or the embedding stage's it borrows. */
static inline size_t wte_elems(const zb_cuda_stage_t *s)
{
    return (size_t)s->cfg.padded_vocab * (size_t)s->cfg.channels;
}
static inline const float *WTE(const zb_cuda_stage_t *s)
{
    return s->wte_from ? P(s->wte_from, ZB_WTE) : P(s, ZB_WTE);
}
static inline const zb_bf16_t *WTE16(const zb_cuda_stage_t *s)
{
    const zb_cuda_stage_t *o = s->wte_from ? s->wte_from : s;
    return o->weights16 + o->offs[ZB_WTE];
}

/* The stage's buffer layout (sizes, offsets, count) from its cfg and span; the bytes of its
 * per-call scratch (stage.c; bf16 storage: stage_compute16.c) and where its pieces lie. */
void zb_cu_stage_layout(zb_cuda_stage_t *s);
size_t zb_cu_scratch_bytes(const zb_cuda_stage_t *s);
size_t zb_cu16_scratch_bytes(const zb_cuda_stage_t *s);
/* Bytes of the stage's workspace (stage.c): cuBLASLt's, the column-sum partials, the norm's
 * rows and the optimizer's tables. made: what a made stage holds now; else what one shaped like
 * s allocates when it opens (it never grows in the pipeline's or the trainer's calls). */
size_t zb_cu_workspace_bytes(const zb_cuda_stage_t *s, bool made);
void zb_cu16_scratch_assign(zb_cuda_stage_t *s);
/* bf16: weights16[off, off+n) = bf16(params[off, off+n)), queued on the stage's stream; a no-op
 * in fp32/tf32. Called after everything that writes params (uploads, AdamW, restore). */
void zb_cu16_weights_refresh(zb_cuda_stage_t *s, size_t off, size_t n);

/* The bf16 stash: its buffer walk (layout16 in stage_compute16.c, with take() shared through
 * zb_cu_take) and F, B, W. */
typedef struct {
    char *base; /* one block: each buffer after the last (a whole stash, the scratch) */
    /* split: each buffer in the region of its lifetime (ZB_CUDA_STASH_FW/FB/BW, by its keep
     * flags), region[k] (NULL: walked for sizes only) at roff[k] */
    bool split;
    char *region[3];
    size_t off, roff[3], bytes_f, bytes_b;
} zb_cu_layout_t;
void *zb_cu_take(zb_cu_layout_t *lo, size_t bytes, int keep);
/* The embedding stage's first stash buffers, the same in both walks (stage_compute.c): its
 * tokens, the encoder's bucket and dencoded (fp32: the embedding's W reads it). */
void zb_cu_layout_embed(zb_cu_layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s);
void zb_cu16_layout(zb_cu_layout_t *lo, zb_cuda_stash_t *st, const zb_cuda_stage_t *s);
void zb_cu16_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *x_in, float *x_out);
void zb_cu16_backward_input(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
                            float grad_scale, float *dx_in);
void zb_cu16_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st);

#endif
