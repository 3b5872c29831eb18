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
#include "zbpp/profile.h"
#include "zbpp/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Matrix-product precision. Storage, accumulation, gradients, master weights and optimizer
 * state are fp32 in every mode; only the tensor-core inputs of the matrix products change:
 * FP32 = full fp32 (TF32 off), TF32 = TF32 inputs, BF16 = bf16 inputs (fp32 accumulation). */
typedef enum { ZB_CUDA_FP32, ZB_CUDA_TF32, ZB_CUDA_BF16 } zb_cuda_precision_t;

/* "fp32", "tf32" or "bf16"; ZB_EINVAL naming the bad value otherwise. */
zb_status_t zb_cuda_precision_parse(const char *s, zb_cuda_precision_t *out, zb_err_t *err);
const char *zb_cuda_precision_name(zb_cuda_precision_t p);

/* True when this build contains the CUDA backend (-DZB_CUDA=ON/AUTO with the toolkit found). */
bool zb_cuda_built(void);
/* Number of usable CUDA devices. No driver, no device, or a build without CUDA: *n = 0 and ZB_OK
 * (not an error); ZB_EIO only for an unexpected driver failure. */
zb_status_t zb_cuda_device_count(int *n, zb_err_t *err);
/* One line describing device `dev` ("NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB"). */
zb_status_t zb_cuda_device_describe(int dev, char *buf, size_t len, zb_err_t *err);

/* Host-only validation of a stage's shape (what zb_cuda_stage_new checks before touching the
 * device): the config, the span (as the CPU stage), 1 <= B, 1 <= T <= max_seq, a known
 * precision. ZB_EINVAL with a message otherwise. */
zb_status_t zb_cuda_stage_check(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                int T, zb_cuda_precision_t prec, zb_err_t *err);

typedef struct zb_cuda_stage zb_cuda_stage_t;
typedef struct zb_cuda_stash zb_cuda_stash_t;

/* A stage on device `device` for microbatches of B sequences of T tokens. Allocates the
 * parameters, gradients (plus the tied head's WTE accumulator on a head stage) and AdamW moments
 * for the whole parameter buffer of cfg (zb_gpt2_params_alloc's layout; a stage touches only its
 * span), all zeroed, and the per-call scratch shared by its stashes. */
zb_status_t zb_cuda_stage_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                              int T, zb_cuda_precision_t prec, int device, zb_cuda_stage_t **out,
                              zb_err_t *err);
void zb_cuda_stage_free(zb_cuda_stage_t *s);

/* Copy parameters / AdamW moments between the host and the stage (sizes must match cfg). */
zb_status_t zb_cuda_params_upload(zb_cuda_stage_t *s, const zb_gpt2_params_t *host,
                                  zb_err_t *err);
zb_status_t zb_cuda_params_download(zb_cuda_stage_t *s, zb_gpt2_params_t *host, zb_err_t *err);
zb_status_t zb_cuda_adamw_upload(zb_cuda_stage_t *s, const zb_adamw_state_t *host,
                                 zb_err_t *err);
zb_status_t zb_cuda_adamw_download(zb_cuda_stage_t *s, zb_adamw_state_t *host, zb_err_t *err);
/* Copy the gradients (and wte_head) to the host, e.g. to compare with the CPU stage. */
zb_status_t zb_cuda_grads_download(zb_cuda_stage_t *s, zb_gpt2_grads_t *host, zb_err_t *err);
/* Zero gradients and wte_head (start of a step). */
zb_status_t zb_cuda_grads_zero(zb_cuda_stage_t *s, zb_err_t *err);
/* zb_gpt2_fold_tied on the device: WTE grad = (embedding part) + (head part), elementwise. Only
 * meaningful on a stage that owns both (a one-stage model); pipelines fold on the host. */
zb_status_t zb_cuda_fold_tied(zb_cuda_stage_t *s, zb_err_t *err);
/* zb_grad_unit_sumsq on the device gradients (fixed-order double partials; the bits depend on
 * the GPU model, not on timing). */
zb_status_t zb_cuda_grad_unit_sumsq(zb_cuda_stage_t *s, int unit, double *out, zb_err_t *err);
/* zb_adamw_update_units on the device: same formula, same per-step scalars. */
zb_status_t zb_cuda_adamw_update_units(zb_cuda_stage_t *s, const zb_adamw_hparams_t *h, float lr,
                                       long t, float grad_scale, const int *units, int n_units,
                                       zb_err_t *err);

/* Activations of one microbatch (the device twin of zb_gpt2_stash_t); one per microbatch in
 * flight. Its logical sizes are those of zb_gpt2_stage_mem, plus 3·B·T + 1 ints of token
 * buckets on an embedding stage. */
zb_status_t zb_cuda_stash_new(zb_cuda_stage_t *s, zb_cuda_stash_t **out, zb_err_t *err);
void zb_cuda_stash_free(zb_cuda_stash_t *st);
void zb_cuda_stash_reset(zb_cuda_stash_t *st);
size_t zb_cuda_stash_live_bytes(const zb_cuda_stash_t *st);

/* F, B, W with the arguments and states of zb_gpt2_forward / _backward_input / _backward_weight
 * (tokens/targets on the host, activations on the device). F on a head stage waits for the
 * losses and returns the mean loss; the other calls return once the work is queued (errors of
 * queued work surface at the next call or zb_cuda_sync). W accumulates into the stage's
 * gradients. */
zb_status_t zb_cuda_forward(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const int *tokens,
                            const float *x_in, const int *targets, float *x_out, float *loss,
                            zb_err_t *err);
zb_status_t zb_cuda_backward_input(zb_cuda_stage_t *s, zb_cuda_stash_t *st, const float *dx_out,
                                   float grad_scale, float *dx_in, zb_err_t *err);
zb_status_t zb_cuda_backward_weight(zb_cuda_stage_t *s, zb_cuda_stash_t *st, zb_err_t *err);
/* Wait for the stage's queued work; reports any error it hit. */
zb_status_t zb_cuda_sync(zb_cuda_stage_t *s, zb_err_t *err);

/* Device buffers of n floats on the stage's device (zeroed), and copies with the host. */
zb_status_t zb_cuda_buffer_alloc(zb_cuda_stage_t *s, size_t n, float **out_dev, zb_err_t *err);
void zb_cuda_buffer_free(float *dev);
zb_status_t zb_cuda_copy_to_device(zb_cuda_stage_t *s, float *dst_dev, const float *src_host,
                                   size_t n, zb_err_t *err);
zb_status_t zb_cuda_copy_to_host(zb_cuda_stage_t *s, float *dst_host, const float *src_dev,
                                 size_t n, zb_err_t *err);

/* ---- training and profiling on one GPU (src/runtime/trainer_cuda.c, profile_cuda.c) ---- */

/* Device and precision of `zbpp train|profile --device cuda`. */
typedef struct {
    int device;                    /* CUDA device index (0 = the first visible one) */
    zb_cuda_precision_t precision; /* matrix-product precision (storage is fp32 in every mode) */
} zb_cuda_train_opts_t;

/* ZB_OK when `device` is a usable CUDA device; otherwise ZB_EUNSUPPORTED with one line saying
 * why: a build without CUDA, no CUDA device (no GPU or no driver), or device out of range. */
zb_status_t zb_cuda_require_device(int device, zb_err_t *err);

/* zb_train_run on one GPU: the same configuration, data order, model init (fresh, --init-from or
 * --resume), lr schedule, clipping, skip-on-non-finite and divergence rules, progress, metrics
 * and checkpoint files as the CPU trainer; the whole model is one CUDA stage whose parameters,
 * gradients and AdamW moments stay on the device (microbatches accumulate W into fp32 gradients;
 * grad-norm partials and AdamW run on the device). Checkpoints and --save-model are the CPU
 * formats (downloaded when written, uploaded on resume / init), so a run may continue on the
 * other device. Checks the config, then the device (zb_cuda_require_device) before it loads
 * anything. Losses match the CPU trainer's within rounding (different summation orders), not
 * bit for bit; on one GPU model two runs give the same bits. */
zb_status_t zb_cuda_train_run(const zb_train_config_t *cfg, const zb_cuda_train_opts_t *opts,
                              FILE *human, zb_train_summary_t *summary, zb_err_t *err);

/* zb_profile_measure on the GPU: F, B and W of the embedding, every block and the head for a
 * microbatch of B x T, each timed as `batch` microbatches back to back between device
 * synchronisations (so launch and sync latency are amortised), median of `reps` rounds after a
 * warm-up round. comm = one activation message (B·T·C floats) device -> host -> device, as a
 * pipeline moves it today. params: NULL = a random model of shape *cfg (seed 1). threads and
 * rank_threads of the result are 1. Free with zb_profile_free. */
zb_status_t zb_cuda_profile_measure(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg,
                                    int B, int T, int reps, const zb_cuda_train_opts_t *opts,
                                    zb_profile_t *out, zb_err_t *err);

#ifdef __cplusplus
}
#endif

#endif
