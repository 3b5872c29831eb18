/* zbpp — the CUDA stage backend: a GPT-2 pipeline stage whose parameters, gradients, optimizer
 * state and activations live on one NVIDIA GPU, with the contract of the CPU stage
 * (include/zbpp/gpt2.h): forward (F), backward_input (B), backward_weight (W) with a stash per
 * in-flight microbatch, W accumulating (+=) into fp32 gradients so deferring it costs nothing.
 * Design, precision and determinism: docs/cuda.md.
 *
 * Pointers named *_dev (and x_in / x_out / dx_out / dx_in) are device pointers, e.g. from
 * zb_cuda_buffer_alloc; token and target arrays are host pointers (they are small, and the host
 * checks their range and builds the embedding's gradient buckets from them).
 *
 * Every function returns ZB_OK or fills err with one line; in a build without CUDA
 * (-DZB_CUDA=OFF) or without a usable device they fail with ZB_EUNSUPPORTED, except
 * zb_cuda_device_count, which then reports 0 devices. Not thread-safe per stage: one host thread
 * drives a stage (its work is serialised on the stage's stream). A failure inside queued device
 * work (a CUDA or cuBLASLt error) is sticky: every later call on that stage reports it; free the
 * stage. Argument and call-order errors (ZB_EINVAL) are not sticky. */
#ifndef ZBPP_CUDA_H
#define ZBPP_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "zbpp/error.h"
#include "zbpp/gpt2.h"
#include "zbpp/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Precision. FP32 = fp32 storage and products (TF32 off); TF32 = fp32 storage, TF32 inputs to
 * the products; BF16 = bf16 storage of activations and of a copy of the weights, bf16 products
 * with fp32 accumulation. Gradients, master weights and optimizer state are fp32 in every mode,
 * and so are the stage's boundary activations (x_in, x_out, dx_out, dx_in). docs/cuda.md. */
typedef enum { ZB_CUDA_FP32, ZB_CUDA_TF32, ZB_CUDA_BF16 } zb_cuda_precision_t;

/* "fp32", "tf32" or "bf16"; ZB_EINVAL naming the bad value otherwise. */
zb_status_t zb_cuda_precision_parse(const char *s, zb_cuda_precision_t *out, zb_err_t *err);
const char *zb_cuda_precision_name(zb_cuda_precision_t p);

/* Where the fp32 precision's attention runs (docs/cuda.md, "fp32 attention"): on the fp32 FMA
 * units (FMA: every product exact to fp32 rounding) or on the TF32 tensor cores in 3xTF32 (each
 * operand split into two TF32 parts, three products: ~2^-20 relative per product where an FMA
 * keeps 2^-24, sums in fp32 — what PyTorch's fp32 attention does). AUTO (the default, zero):
 * 3xTF32 where the head size has its kernel (16, 32, 64), FMA otherwise — 3xTF32 was the
 * faster on the H100 (docs/cuda.md). The other precisions do not read it: tf32 runs its
 * attention in TF32, bf16 in bf16. */
typedef enum { ZB_CUDA_ATTN_AUTO, ZB_CUDA_ATTN_FMA, ZB_CUDA_ATTN_3XTF32 } zb_cuda_fp32_attention_t;

/* "auto", "fma" or "3xtf32"; ZB_EINVAL naming the bad value otherwise. */
zb_status_t zb_cuda_fp32_attention_parse(const char *s, zb_cuda_fp32_attention_t *out,
                                         zb_err_t *err);
const char *zb_cuda_fp32_attention_name(zb_cuda_fp32_attention_t a);

/* True when this build contains the CUDA backend (-DZB_CUDA=ON/AUTO with the toolkit found). */
bool zb_cuda_built(void);
/* Number of usable CUDA devices. No driver, no device, or a build without CUDA: *n = 0 and ZB_OK
 * (not an error); ZB_EIO only for an unexpected driver failure. */
zb_status_t zb_cuda_device_count(int *n, zb_err_t *err);
/* One line describing device `dev` ("NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB"). */
zb_status_t zb_cuda_device_describe(int dev, char *buf, size_t len, zb_err_t *err);
/* Bytes in use on device `dev` and its size (cudaMemGetInfo: total − free, so every process's
 * allocations and CUDA contexts are in it, not only this run's). */
zb_status_t zb_cuda_device_memory(int dev, size_t *used, size_t *total, zb_err_t *err);

/* Host-only validation of a stage's shape (what zb_cuda_stage_new checks before touching the
 * device): the config, the span (as the CPU stage), 1 <= B, 1 <= T <= max_seq, a known
 * precision. ZB_EINVAL with a message otherwise. */
zb_status_t zb_cuda_stage_check(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                int T, zb_cuda_precision_t prec, zb_err_t *err);

typedef struct zb_cuda_stage zb_cuda_stage_t;
typedef struct zb_cuda_stash zb_cuda_stash_t;

/* A stage on device `device` for microbatches of B sequences of T tokens. Allocates the
 * parameters, gradients (plus the tied head's WTE accumulator on a head stage) and AdamW moments
 * of what its span reads and nothing else, all zeroed: the layout of zb_gpt2_params_alloc_part
 * for that one span (WTE when it embeds or has the tied head, WPE when it embeds, its blocks,
 * the final LayerNorm with the head; the whole model's buffer for the whole-model span), and the
 * per-call scratch shared by its stashes. */
zb_status_t zb_cuda_stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_cuda_precision_t prec, int device, zb_cuda_stage_t **out,
                              zb_err_t *err);
/* A head stage (span->head, not span->embed) that reads the tied WTE of `embed`, the
 * embedding stage of the same rank (same device, config, shape and precision; both queued on
 * one stream, zb_cuda_stage_use_stream): its own parameters, moments and bf16 copy leave WTE
 * out, its WTE gradient still goes to its accumulator (the embedding stage folds it in with
 * zb_cuda_grad_wte_add and steps the one WTE). ZB_EINVAL when embed is not such a stage. */
zb_status_t zb_cuda_stage_new_tied(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                   int T, zb_cuda_precision_t prec, int device,
                                   const zb_cuda_stage_t *embed, zb_cuda_stage_t **out,
                                   zb_err_t *err);
void zb_cuda_stage_free(zb_cuda_stage_t *s);
/* The stage's fp32 attention (above; FMA when never set). ZB_EINVAL for 3XTF32 on a stage
 * whose precision is not fp32 or whose head size (channels / heads) has no 3xTF32 kernel
 * (16, 32 and 64 have one); FMA is always accepted. */
zb_status_t zb_cuda_stage_set_fp32_attention(zb_cuda_stage_t *s, zb_cuda_fp32_attention_t a,
                                             zb_err_t *err);

/* Copy parameters / AdamW moments between the host and the stage: the host buffer has the
 * stage's cfg and holds every tensor of its span (a whole model, or a stage-local buffer of
 * zb_gpt2_params_alloc_part); only the stage's slices are written, the others are left. */
zb_status_t zb_cuda_params_upload(zb_cuda_stage_t *s, const zb_gpt2_params_t *host,
                                  zb_err_t *err);
zb_status_t zb_cuda_params_download(zb_cuda_stage_t *s, zb_gpt2_params_t *host, zb_err_t *err);
zb_status_t zb_cuda_adamw_upload(zb_cuda_stage_t *s, const zb_adamw_state_t *host,
                                 zb_err_t *err);
zb_status_t zb_cuda_adamw_download(zb_cuda_stage_t *s, zb_adamw_state_t *host, zb_err_t *err);
/* Copy the gradients (the stage's slices, as above; and wte_head, zeros on a stage without the
 * head) to the host, e.g. to compare with the CPU stage. */
zb_status_t zb_cuda_grads_download(zb_cuda_stage_t *s, zb_gpt2_grads_t *host, zb_err_t *err);
/* Zero gradients and wte_head (start of a step). */
zb_status_t zb_cuda_grads_zero(zb_cuda_stage_t *s, zb_err_t *err);
/* zb_gpt2_fold_tied on the device: WTE grad = (embedding part) + (head part), elementwise. Only
 * meaningful on a stage that owns both (a one-stage model); pipelines fold on the host. */
zb_status_t zb_cuda_fold_tied(zb_cuda_stage_t *s, zb_err_t *err);
/* zb_grad_unit_sumsq on the device gradients (fixed-order double partials; the bits depend on
 * the GPU model, not on timing). */
zb_status_t zb_cuda_grad_unit_sumsq(zb_cuda_stage_t *s, int unit, double *out, zb_err_t *err);
/* out[k] = zb_cuda_grad_unit_sumsq of units[k], k < n (the same bits), with one host wait. */
zb_status_t zb_cuda_grad_units_sumsq(zb_cuda_stage_t *s, const int *units, int n, double *out,
                                     zb_err_t *err);
/* zb_adamw_update_units on the device: same formula, same per-step scalars; one launch for all
 * the units' tensors. */
zb_status_t zb_cuda_adamw_update_units(zb_cuda_stage_t *s, const zb_adamw_hparams_t *h, float lr,
                                       long t, float grad_scale, const int *units, int n_units,
                                       zb_err_t *err);

/* A stage's device memory in bytes: each parameter-shaped buffer (params, grads, m, v: `state`
 * each, fp32 in every precision), the bf16 copy of the parameters the products read
 * (`weights16`: bf16 precision, else 0), the head's WTE accumulator, the per-call scratch, one
 * stash as zb_cuda_stash_new allocates it, what a stash holds live after F and after B
 * (zb_cuda_stash_live_bytes), and the post-validation backup (3 x state once
 * zb_cuda_state_backup saved, else 0), and the workspace its calls use besides (cuBLASLt's,
 * the column-sum partials, the norm's rows, the optimizer's tables: allocated when the stage
 * opens, never grown). The stash and scratch depend on the precision (bf16
 * stores activations in 16 bits and keeps no T×T attention matrix). zb_cuda_stage_memory
 * computes them on the host for a stage not made (backup 0; ZB_EINVAL for a shape
 * zb_cuda_stage_check refuses); zb_cuda_stage_allocated reads them off a stage. */
typedef struct {
    size_t state, weights16, wte_head, scratch, stash, after_f, after_b, backup, workspace;
    size_t region[3]; /* a split stash's lifetime regions (zb_cuda_stash_regions) */
} zb_cuda_stage_mem_t;
zb_status_t zb_cuda_stage_memory(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                 int T, zb_cuda_precision_t prec, zb_cuda_stage_mem_t *out,
                                 zb_err_t *err);
void zb_cuda_stage_allocated(const zb_cuda_stage_t *s, zb_cuda_stage_mem_t *out);
/* zb_cuda_stage_memory of a head stage made with zb_cuda_stage_new_tied (no WTE of its own). */
zb_status_t zb_cuda_stage_memory_tied(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span,
                                      int B, int T, zb_cuda_precision_t prec,
                                      zb_cuda_stage_mem_t *out, zb_err_t *err);

/* Activations of one microbatch (the device twin of zb_gpt2_stash_t); one per microbatch in
 * flight. Its logical sizes are those of zb_gpt2_stage_mem, plus 3·B·T + 1 ints of token
 * buckets on an embedding stage. */
zb_status_t zb_cuda_stash_new(zb_cuda_stage_t *s, zb_cuda_stash_t **out, zb_err_t *err);
void zb_cuda_stash_free(zb_cuda_stash_t *st);
void zb_cuda_stash_reset(zb_cuda_stash_t *st);
size_t zb_cuda_stash_live_bytes(const zb_cuda_stash_t *st);

/* A split stash, for a pool that keeps each lifetime region in slots of its own (the pipeline
 * rank's, src/pipeline/rank_cuda_stash.c): FW holds what F keeps until W, FB what F keeps
 * until B, BW what B writes for W. zb_cuda_stash_regions: each region's bytes (256-byte
 * multiples; a bf16 stash's gradients do not reuse F-only buffers here, so FB goes back after
 * B); zb_cuda_stash_view_new: a stash with no memory of its own (freed by zb_cuda_stash_free);
 * zb_cuda_stash_bind: its buffers laid over region[k] (NULL: a region the next action does not
 * touch), before each action that uses it. */
enum { ZB_CUDA_STASH_FW = 0, ZB_CUDA_STASH_FB = 1, ZB_CUDA_STASH_BW = 2 };
void zb_cuda_stash_regions(const zb_cuda_stage_t *s, size_t bytes[3]);
zb_status_t zb_cuda_stash_view_new(zb_cuda_stage_t *s, zb_cuda_stash_t **out, zb_err_t *err);
void zb_cuda_stash_bind(zb_cuda_stash_t *st, void *const region[3]);

/* F, B, W with the arguments and states of zb_gpt2_forward / _backward_input / _backward_weight
 * (tokens/targets on the host, activations on the device). F on a head stage waits for the
 * losses and returns the mean loss; the other calls return once the work is queued (errors of
 * queued work surface at the next call or zb_cuda_sync). W accumulates into the stage's
 * gradients. */
zb_status_t zb_cuda_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                            const float *x_in, const int *targets, float *x_out, float *loss,
                            zb_err_t *err);
/* F without the head's host wait (the pipeline's ranks): a head stage's token losses are copied
 * into deferred slot loss_slot (of zb_cuda_stage_loss_slots' page-locked slots; ignored off the
 * head) after the F, and the call returns once the work is queued; zb_cuda_loss_take waits for
 * the last such copy and gives the slot's mean loss, the bits zb_cuda_forward would return. A
 * slot is the caller's until taken: the next F into it overwrites it. */
zb_status_t zb_cuda_forward_deferred(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                                     const float *x_in, const int *targets, float *x_out,
                                     int loss_slot, zb_err_t *err);
zb_status_t zb_cuda_stage_loss_slots(zb_cuda_stage_t *s, int slots, zb_err_t *err);
zb_status_t zb_cuda_loss_take(zb_cuda_stage_t *s, int slot, float *loss, zb_err_t *err);
zb_status_t zb_cuda_backward_input(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
                                   float grad_scale, float *dx_in, zb_err_t *err);
/* A head stage in fp32 or tf32: its forward also turns the probabilities into the logits'
 * gradient at `grad_scale` ((p − onehot)·grad_scale, the bits its backward would write), so the
 * backward skips that pass over the B·T·V logits; every backward must then pass the same scale
 * (ZB_EINVAL otherwise). 0 turns it off (the default). bf16 folds always (its scale goes into
 * the products); on other stages it does nothing. ZB_EINVAL for a negative or non-finite scale. */
zb_status_t zb_cuda_stage_fold_loss_grad(zb_cuda_stage_t *s, float grad_scale, zb_err_t *err);
zb_status_t zb_cuda_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st, zb_err_t *err);
/* Wait for the stage's queued work; reports any error it hit. */
zb_status_t zb_cuda_sync(zb_cuda_stage_t *s, zb_err_t *err);

/* Time breakdown by kernel class, for benchmarks: on, every op the stage queues is bracketed by
 * two CUDA events (off, the default, costs nothing but a pointer test per op);
 * zb_cuda_stage_profile_read waits for the stage and adds the milliseconds of each class since
 * the last read into ms[ZB_CUDA_KCLASSES]. GEMM: the matrix products (with their epilogues);
 * attention: softmax(QKᵀ)V and its backward; norm: LayerNorm forward and backward (the fused
 * residual add included); elementwise: GELU, residual, the embedding, the bf16 edge conversions;
 * classifier: softmax + cross-entropy; optimizer: fold, gradient norm, AdamW, bf16 weight copy. */
typedef enum {
    ZB_CUDA_K_GEMM,
    ZB_CUDA_K_ATTENTION,
    ZB_CUDA_K_NORM,
    ZB_CUDA_K_ELEMENTWISE,
    ZB_CUDA_K_CLASSIFIER,
    ZB_CUDA_K_OPTIMIZER,
} zb_cuda_kclass_t;
#define ZB_CUDA_KCLASSES 6
const char *zb_cuda_kclass_name(zb_cuda_kclass_t k);
zb_status_t zb_cuda_stage_profile(zb_cuda_stage_t *s, bool on, zb_err_t *err);
zb_status_t zb_cuda_stage_profile_read(zb_cuda_stage_t *s, double *ms, zb_err_t *err);

/* Device buffers of n floats on the stage's device (zeroed), and copies with the host. */
zb_status_t zb_cuda_buffer_alloc(zb_cuda_stage_t *s, size_t n, float **out_dev, zb_err_t *err);
void zb_cuda_buffer_free(float *dev);
zb_status_t zb_cuda_copy_to_device(zb_cuda_stage_t *s, float *dst_dev, const float *src_host,
                                   size_t n, zb_err_t *err);
zb_status_t zb_cuda_copy_to_host(zb_cuda_stage_t *s, float *dst_host, const float *src_dev,
                                 size_t n, zb_err_t *err);

/* ---- a stage as one of a pipeline rank's (src/pipeline/rank_cuda.c; its streams, events and
 * pinned host buffers: src/cuda/stream.h) ---- */

/* Where tensor `tensor` of block `layer` (ignored for the non-block tensors) lies in the stage's
 * buffers: *off, *n elements; false when the stage does not hold it. zb_cuda_stage_param_count:
 * elements of each of its parameter-shaped buffers (params, grads, m, v). */
bool zb_cuda_stage_slice(const zb_cuda_stage_t *s, int tensor, int layer, size_t *off, size_t *n);
size_t zb_cuda_stage_param_count(const zb_cuda_stage_t *s);
/* Which of the stage's buffers zb_cuda_state_copy moves (element offsets in the stage's layout,
 * as zb_cuda_stage_slice gives them; WTE_HEAD: the head stage's WTE accumulator). */
typedef enum {
    ZB_CUDA_STATE_PARAMS,
    ZB_CUDA_STATE_GRADS,
    ZB_CUDA_STATE_M,
    ZB_CUDA_STATE_V,
    ZB_CUDA_STATE_WTE_HEAD
} zb_cuda_state_t;
/* Copy n floats at element `off` of buffer `which` to the host (to_host) or from it; waits for
 * the stage's queued work first. ZB_EINVAL for a range outside the buffer. */
zb_status_t zb_cuda_state_copy(zb_cuda_stage_t *s, zb_cuda_state_t which, size_t off, float *host,
                               size_t n, bool to_host, zb_err_t *err);
/* save: copy parameters, m and v into a device backup (allocated on the first save, 3 x the
 * parameter count, freed with the stage); !save: copy them back (ZB_EINVAL if never saved). */
zb_status_t zb_cuda_state_backup(zb_cuda_stage_t *s, bool save, zb_err_t *err);
/* Allocate that backup now, if it is not yet: ZB_ENOMEM when the device has no room for it
 * (the stage stays usable: post-validation then updates after the norm barrier instead). */
zb_status_t zb_cuda_state_backup_reserve(zb_cuda_stage_t *s, zb_err_t *err);

/* ---- training and profiling on one GPU (src/train/trainer_cuda.c, profile_cuda.c) ---- */

/* Device and precision of `zbpp train|profile --device cuda`. */
typedef struct zb_cuda_train_opts {
    int device;                    /* CUDA device index (0 = the first visible one) */
    zb_cuda_precision_t precision; /* fp32, tf32 or bf16 (bf16: 16-bit activation storage) */
    zb_cuda_fp32_attention_t fp32_attention; /* with fp32: AUTO (default, zero), FMA, 3xTF32 */
    int sm_per_rank; /* SMs of each rank's partition when ranks share a GPU; 0 = even split */
    /* pipeline ranks: false = messages staged through host buffers; true = device
     * messages (the receiver copies device to device after the sender's event; threads only) */
    bool device_messages;
    /* with device_messages, a benchmark's no-op transfers (--gpu-messages none): after the first
     * training step the receiver still waits for the sender's event, so the schedule's
     * dependencies stay, but copies nothing; its slots keep the first step's activations, so
     * the arithmetic is real but the losses after step 1 are not meaningful */
    bool null_messages;
    /* zb_cuda_profile_measure: time in the partition one of `profile_ranks` ranks sharing the
     * device gets (with sm_per_rank) — what a pipeline rank will run in; 0 or 1 with no
     * sm_per_rank = the whole device */
    int profile_ranks;
    /* pipeline ranks that run on a whole GPU: plan cuBLASLt's matrix products for this many
     * SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, what a partition of that size sets) instead of
     * the device's; 0 = the device's. The same plans as in a partition give its bits (tests,
     * docs/cuda.md "Partition against whole GPU"). A partition plans for its own SMs always. */
    int gemm_sms;
} zb_cuda_train_opts_t;

/* ZB_OK when `device` is a usable CUDA device; otherwise ZB_EUNSUPPORTED with one line saying
 * why: a build without CUDA, no CUDA device (no GPU or no driver), or device out of range. */
zb_status_t zb_cuda_require_device(int device, zb_err_t *err);

/* The entry points that train and profile on one GPU are declared with the subsystems they belong
 * to: zb_cuda_train_run in zbpp/train.h, zb_cuda_profile_measure in zbpp/profile.h. */

/* ---- SM partitions: several pipeline ranks on one GPU (docs/cuda.md) ----
 * Each rank sharing a GPU gets a disjoint set of SMs (a CUDA green context) and a stream in it,
 * so a rank that waits leaves its SMs idle, as on separate GPUs. Planning (zb_cuda_sm_*) is pure
 * host arithmetic, in every build; creating partitions (src/cuda/stream.h, for the pipeline's
 * GPU ranks) needs the CUDA driver, loaded when first used (libcuda.so.1), so zbpp runs where
 * there is none. */

/* How the SMs of a device may be split (from the driver's cuDeviceGetDevResource, or the
 * documented guideline by compute capability when no driver answers). */
typedef struct {
    int sm_count;      /* SMs of the device */
    int min_partition; /* smallest partition the driver makes (minSmPartitionSize; Hopper: 8) */
    int alignment;     /* partition sizes are multiples of this (smCoscheduledAlignment; 8) */
} zb_cuda_sm_info_t;

/* The split: every rank gets sm_per_rank SMs (the driver's groups are all the same size);
 * sm_unused = sm_count - ranks * sm_per_rank SMs stay idle. */
typedef struct {
    int ranks;
    int sm_per_rank;
    int sm_unused;
} zb_cuda_sm_plan_t;

/* The CUDA driver documentation's granularity for compute capability major.minor: 6.x and 7.x
 * min 2 / multiple of 2, 8.x min 4 / multiple of 2, 9.0 and later min 8 / multiple of 8. For
 * planning where no driver answers; a real device's values come from zb_cuda_sm_query. ZB_EINVAL
 * for major < 6 (no green contexts) or sm_count < 1. */
zb_status_t zb_cuda_sm_guideline(int major, int minor, int sm_count, zb_cuda_sm_info_t *out,
                                 zb_err_t *err);

/* Plan `ranks` partitions of the device `dev`. sm_per_rank > 0 asks for that many SMs each; it
 * must be a multiple of dev->alignment, at least dev->min_partition, and ranks x it must fit in
 * dev->sm_count. sm_per_rank == 0: the even split, the largest multiple of the alignment <=
 * sm_count / ranks (at least min_partition, else more ranks than partitions). Pure host code.
 * ZB_EINVAL with one line naming the problem (and the largest legal value) otherwise. */
zb_status_t zb_cuda_sm_plan(const zb_cuda_sm_info_t *dev, int ranks, int sm_per_rank,
                            zb_cuda_sm_plan_t *out, zb_err_t *err);

/* "4 ranks x 32 SMs (4 of 132 SMs unused)" into buf (always terminated). */
void zb_cuda_sm_plan_describe(const zb_cuda_sm_plan_t *p, int sm_count, char *buf, size_t len);

/* The SM resource of device `device` as the driver reports it (cuDeviceGetDevResource), with
 * zb_cuda_sm_guideline's granularity of its compute capability as a floor (Hopper reports a
 * co-scheduling alignment that divides its 132 SMs, yet partitions come in multiples of 8).
 * ZB_EUNSUPPORTED with one line
 * when there is no driver, a driver without green contexts (before 12.5) or no such device;
 * ZB_EIO for another driver failure. */
zb_status_t zb_cuda_sm_query(int device, zb_cuda_sm_info_t *out, zb_err_t *err);

#ifdef __cplusplus
}
#endif

#endif
