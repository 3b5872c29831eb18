/* zbpp — GPT-2 model: configuration, parameters in one buffer (llm.c order), and the stage API
 * the trainer and the pipeline runtime call: forward, backward_input (B), backward_weight (W).
 *
 * A stage owns a contiguous range of transformer blocks; the first stage also owns the token and
 * position embeddings, the last the final LayerNorm and the LM head (tied to the token
 * embedding). A whole model is one stage that has both. Fused backward is B then W. */
#ifndef ZBPP_GPT2_H
#define ZBPP_GPT2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"

/* The 16 parameter tensors, in llm.c's checkpoint order. Per-layer tensors are [L, ...]. */
typedef enum {
    ZB_WTE,      /* [Vp, C] */
    ZB_WPE,      /* [maxT, C] */
    ZB_LN1W,     /* [L, C] */
    ZB_LN1B,     /* [L, C] */
    ZB_QKVW,     /* [L, 3C, C] */
    ZB_QKVB,     /* [L, 3C] */
    ZB_ATTPROJW, /* [L, C, C] */
    ZB_ATTPROJB, /* [L, C] */
    ZB_LN2W,     /* [L, C] */
    ZB_LN2B,     /* [L, C] */
    ZB_FCW,      /* [L, 4C, C] */
    ZB_FCB,      /* [L, 4C] */
    ZB_FCPROJW,  /* [L, C, 4C] */
    ZB_FCPROJB,  /* [L, C] */
    ZB_LNFW,     /* [C] */
    ZB_LNFB,     /* [C] */
    ZB_GPT2_NUM_TENSORS
} zb_gpt2_tensor_t;

typedef struct {
    int max_seq;      /* maxT */
    int vocab;        /* V: real vocabulary size */
    int padded_vocab; /* Vp >= V (llm.c pads to a multiple of 128) */
    int layers;       /* L */
    int heads;        /* NH, divides C */
    int channels;     /* C */
} zb_gpt2_config_t;

/* ZB_EINVAL with a message for non-positive sizes, C % NH != 0, Vp < V. */
zb_status_t zb_gpt2_config_check(const zb_gpt2_config_t *cfg, zb_err_t *err);

/* A stage: a contiguous range of blocks, plus the embeddings on the first and the head on the
 * last. */
typedef struct {
    int layer_begin, layer_end; /* blocks [begin, end) */
    bool embed;                 /* owns WTE (as embedding) and WPE: input is tokens */
    bool head;                  /* owns LNFW/LNFB and the tied LM head: output is the loss */
} zb_gpt2_span_t;

/* A parameter-shaped buffer (used for parameters, gradients and optimizer moments): one
 * allocation `data` of `count` floats, tensor pointers into it in llm.c order. */
typedef struct {
    zb_gpt2_config_t cfg;
    size_t sizes[ZB_GPT2_NUM_TENSORS]; /* elements per tensor */
    size_t count;                      /* total elements */
    float *data;
    float *t[ZB_GPT2_NUM_TENSORS];     /* NULL for a tensor the buffer does not hold */
    /* Stage-local buffers (zb_gpt2_params_alloc_part) hold only some blocks: slot[l] is the local
     * index of global block l, or -1. NULL = every block in order (a whole model). Per-layer
     * tensors are [held_layers, ...]; cfg stays the whole model's. */
    int *slot;
    int held_layers;
    size_t accounted; /* bytes this buffer adds to zb_gpt2_buffer_bytes (freed with it) */
} zb_gpt2_params_t;

/* Bytes of parameter-shaped buffers (parameters, gradients with their tied-head accumulators,
 * moments: everything zb_gpt2_params_alloc*, zb_gpt2_grads_alloc* and zb_adamw_state_alloc*
 * allocate) the process holds now, and the most it has held since the last reset: the library's
 * own count of what a model costs a process, e.g. at a pipeline's start-up. Thread-safe. */
size_t zb_gpt2_buffer_bytes(void);
size_t zb_gpt2_buffer_peak_bytes(void);
void zb_gpt2_buffer_reset_peak(void);

/* Allocate a zeroed buffer for cfg. Free with zb_gpt2_params_free. */
zb_status_t zb_gpt2_params_alloc(zb_gpt2_params_t *p, const zb_gpt2_config_t *cfg, zb_err_t *err);
void zb_gpt2_params_free(zb_gpt2_params_t *p);
/* A stage-local buffer holding what the stages `spans[0..n)` need and nothing else: their blocks,
 * WTE when one of them embeds or has the head (tied), WPE when one embeds, the final LayerNorm
 * when one has the head. Zeroed. ZB_EINVAL for a span outside the model. */
zb_status_t zb_gpt2_params_alloc_part(zb_gpt2_params_t *p, const zb_gpt2_config_t *cfg,
                                      const zb_gpt2_span_t *spans, int n, zb_err_t *err);
/* A zeroed buffer with the same layout as `shape` (whole or stage-local). */
zb_status_t zb_gpt2_params_alloc_like(zb_gpt2_params_t *p, const zb_gpt2_params_t *shape,
                                      zb_err_t *err);
/* Local index of global block l in p, -1 when p does not hold it. */
int zb_gpt2_layer_slot(const zb_gpt2_params_t *p, int l);
/* Tensor `tensor` of block `layer` (per-layer tensors; layer ignored for the others) in p, with
 * its element count in *count; NULL when p does not hold it. */
float *zb_gpt2_slice(const zb_gpt2_params_t *p, int tensor, int layer, size_t *count);
/* True when p holds every tensor the stage `span` reads. */
bool zb_gpt2_holds_span(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span);
/* Copy the slices of norm unit `unit` that both buffers hold (same cfg) from src to dst. */
void zb_gpt2_copy_unit(zb_gpt2_params_t *dst, const zb_gpt2_params_t *src, int unit);
/* The parts of the whole model's flat buffer (llm.c order, as in a model file) elements
 * [global, global + n) that p holds: fn(ctx, local, at, count) for each piece, `local` its
 * offset in p->data (p's layout, whole or stage-local), `at` its offset from `global`. */
typedef void (*zb_gpt2_piece_fn)(void *ctx, size_t local, size_t at, size_t count);
void zb_gpt2_params_pieces(const zb_gpt2_params_t *p, size_t global, size_t n,
                           zb_gpt2_piece_fn fn, void *ctx);
/* Copy src, elements [global, global + n) of a whole model's flat buffer, into dst (a buffer of
 * p's layout: p's data, or gradients / moments shaped like it) where p holds them. */
void zb_gpt2_scatter(const zb_gpt2_params_t *p, float *dst, size_t global, const float *src,
                     size_t n);
/* Bytes of the buffer (count floats). */
size_t zb_gpt2_params_bytes(const zb_gpt2_params_t *p);

/* GPT-2 initialisation, deterministic in seed: weights N(0, 0.02) (residual projections
 * ATTPROJW and FCPROJW scaled by 1/sqrt(2L)), LayerNorm weights 1, biases 0; padded vocab rows 0.
 * A stage-local buffer gets exactly the bits its tensors have in a whole model of the same seed
 * (per-element random stream), so each pipeline rank initialises only what it holds. */
void zb_gpt2_params_init_random(zb_gpt2_params_t *p, uint64_t seed);

/* llm.c model checkpoint: header of 256 int32 (magic 20240326, version 3 = fp32 with padded
 * vocab, maxT, V, L, NH, C, Vp), then the 16 tensors as fp32 in order. Load rejects a wrong
 * magic/version, bad sizes, truncated or oversized files. Save is atomic. */
zb_status_t zb_gpt2_load_llmc(const char *path, zb_gpt2_params_t *out, zb_err_t *err);
/* The model shape of an llm.c model file (header and size checked as by load), nothing read. */
zb_status_t zb_gpt2_peek_llmc(const char *path, zb_gpt2_config_t *cfg, zb_err_t *err);
/* Read into the allocated buffer p (whole or stage-local) the tensors it holds, streaming the
 * file in bounded pieces: memory is p's, whatever the model's size. ZB_EMISMATCH when the file's
 * shape is not p->cfg. *hash (may be NULL) gets zb_hash_bytes of the whole file, the same in every
 * process that reads the same file. */
zb_status_t zb_gpt2_load_llmc_into(const char *path, zb_gpt2_params_t *p, uint64_t *hash,
                                   zb_err_t *err);
zb_status_t zb_gpt2_save_llmc(const char *path, const zb_gpt2_params_t *p, zb_err_t *err);

/* ---- stages ---- */

/* Gradients: parameter-shaped, plus a separate accumulator for the LM head's contribution to
 * WTE. zb_gpt2_fold_tied adds it into t[ZB_WTE] elementwise as (embedding part) + (head part),
 * the one fixed order every configuration uses, so pipelines match single-process bits. */
typedef struct {
    zb_gpt2_params_t g;
    float *wte_head; /* [Vp, C] */
} zb_gpt2_grads_t;

zb_status_t zb_gpt2_grads_alloc(zb_gpt2_grads_t *g, const zb_gpt2_config_t *cfg, zb_err_t *err);
/* Gradients shaped like the parameter buffer `shape`; wte_head only when it holds WTE (NULL
 * otherwise: fold and zero skip it). */
zb_status_t zb_gpt2_grads_alloc_like(zb_gpt2_grads_t *g, const zb_gpt2_params_t *shape,
                                     zb_err_t *err);
/* The same with wte_head only if tied_head: a buffer that holds WTE for the embedding alone
 * (a pipeline's first stage without the head) needs no head accumulator. */
zb_status_t zb_gpt2_grads_alloc_like_for(zb_gpt2_grads_t *g, const zb_gpt2_params_t *shape,
                                         bool tied_head, zb_err_t *err);
void zb_gpt2_grads_free(zb_gpt2_grads_t *g);
void zb_gpt2_grads_zero(zb_gpt2_grads_t *g);
void zb_gpt2_fold_tied(zb_gpt2_grads_t *g);

/* Norm units: the fixed decomposition used for the global gradient norm, so the same sum is
 * formed whatever the partition. Unit 0 = embeddings (WTE after folding, WPE), units 1..L = block
 * l-1 (its 12 tensors), unit L+1 = final LayerNorm. zb_gpt2_unit_ranges writes up to 16
 * (offset, count) element ranges into the parameter buffer and returns how many. */
int zb_gpt2_num_units(const zb_gpt2_config_t *cfg);
int zb_gpt2_unit_ranges(const zb_gpt2_config_t *cfg, int unit, size_t offset[16], size_t count[16]);
/* The same for the buffer p (whole or stage-local): the ranges of `unit` that p holds, as
 * offsets into p->data; 0 when it holds none. */
int zb_gpt2_params_unit_ranges(const zb_gpt2_params_t *p, int unit, size_t offset[16],
                               size_t count[16]);

/* Activations of one (stage, microbatch), kept from F for B and W. Allocated once for a batch
 * shape (B sequences of T tokens) and reusable across microbatches. */
typedef struct zb_gpt2_stash zb_gpt2_stash_t;

/* What F keeps. ALL: every activation B or W reads. SELECTIVE (selective recompute, like
 * llm.c's recompute level 2): not the LayerNorm and GELU outputs, which only W reads; W
 * recomputes them from the kept inputs and statistics (cheap elementwise work) with the same
 * routines, so the gradients are the same bits. docs/compute.md lists the buffers. */
typedef enum { ZB_GPT2_KEEP_ALL, ZB_GPT2_KEEP_SELECTIVE } zb_gpt2_keep_t;
zb_status_t zb_gpt2_stash_new_keep(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                   int B, int T, zb_gpt2_keep_t keep, zb_gpt2_stash_t **out,
                                   zb_err_t *err);
void zb_gpt2_stage_mem_keep(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                            int T, zb_gpt2_keep_t keep, size_t *after_f, size_t *after_b);
size_t zb_gpt2_stash_capacity_keep(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                   int B, int T, zb_gpt2_keep_t keep);

/* A stash's buffers by lifetime: FW written by F and read until W (by B and W), FB written by F
 * and read only by B, BW written by B for W, SCRATCH used within one call. A caller that pools
 * stashes by lifetime (the pipeline: a microbatch between B and W needs no FB part, and one
 * scratch serves every call of a rank) makes split stashes, which own no memory: before each F,
 * B or W it binds the regions that call touches (zb_gpt2_stash_bind; NULL = not bound, whose
 * buffers must not be read), each region's bytes from zb_gpt2_stash_regions, 64-byte aligned.
 * The contents of a region move with its memory: rebinding the same memory keeps them. */
typedef enum {
    ZB_GPT2_REGION_FW,
    ZB_GPT2_REGION_FB,
    ZB_GPT2_REGION_BW,
    ZB_GPT2_REGION_SCRATCH,
    ZB_GPT2_NUM_REGIONS
} zb_gpt2_region_t;
void zb_gpt2_stash_regions(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                           int T, zb_gpt2_keep_t keep, size_t bytes[ZB_GPT2_NUM_REGIONS]);
zb_status_t zb_gpt2_stash_new_split(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                    int B, int T, zb_gpt2_keep_t keep, zb_gpt2_stash_t **out,
                                    zb_err_t *err);
void zb_gpt2_stash_bind(zb_gpt2_stash_t *st, void *const base[ZB_GPT2_NUM_REGIONS]);

/* = zb_gpt2_stash_new_keep(..., ZB_GPT2_KEEP_ALL, ...); likewise the two below. */
zb_status_t zb_gpt2_stash_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_gpt2_stash_t **out, zb_err_t *err);
void zb_gpt2_stash_free(zb_gpt2_stash_t *st);
/* Discard whatever the stash holds (e.g. after an aborted step or an evaluation-only forward);
 * its state becomes empty. */
void zb_gpt2_stash_reset(zb_gpt2_stash_t *st);
/* Head stage, between F and B: the [B,T,Vp] softmax probabilities over the real vocabulary
 * (padded columns 0), e.g. for evaluation or sampling. NULL for other stages or other states.
 * */
const float *zb_gpt2_stash_probs(const zb_gpt2_stash_t *st);
/* Bytes this stash logically holds now: 0 before F, F's kept activations after F, what W still
 * needs after B, 0 after W. */
size_t zb_gpt2_stash_live_bytes(const zb_gpt2_stash_t *st);
/* Memory model of a stage per microbatch in bytes: held after F, and after B (before W). */
void zb_gpt2_stage_mem(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B, int T,
                       size_t *after_f, size_t *after_b);

/* Bytes one stash of the stage allocates (live buffers and scratch). */
size_t zb_gpt2_stash_capacity(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T);
/* Elements of zb_gpt2_params_alloc_part's buffer for these spans (0 for a bad span). */
size_t zb_gpt2_params_part_count(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *spans,
                                 int n);

/* Forward of a stage for one microbatch.
 * embed stage: tokens [B,T] (x_in unused); else x_in [B,T,C].
 * head stage: targets [B,T], writes *loss = mean cross-entropy over B·T (x_out unused);
 * else writes x_out [B,T,C]. */
zb_status_t zb_gpt2_forward(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                            zb_gpt2_stash_t *st, const int *tokens, const float *x_in,
                            const int *targets, float *x_out, float *loss, zb_err_t *err);
/* B: gradient w.r.t. the stage input. head stage: dloss of every token is grad_scale (e.g.
 * 1/(B·T·M) for a mean over M microbatches), dx_out unused; else dx_out [B,T,C].
 * embed stage: dx_in unused (nothing before it); else dx_in [B,T,C] is overwritten. */
zb_status_t zb_gpt2_backward_input(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                                   zb_gpt2_stash_t *st, const float *dx_out, float grad_scale,
                                   float *dx_in, zb_err_t *err);
/* W: accumulate (+=) the parameter gradients of the stage from what F and B kept. */
zb_status_t zb_gpt2_backward_weight(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                                    zb_gpt2_stash_t *st, zb_gpt2_grads_t *g, zb_err_t *err);

#endif
