/* zbpp — optimizer: AdamW over ranges of the parameter buffer, the global gradient norm by units,
 * clipping, and the learning-rate schedule.
 *
 * Everything is elementwise or reduced in a fixed unit order, so a pipeline rank that updates only
 * the units it owns produces the same bits as a single process updating the whole model. */
#ifndef ZBPP_OPTIM_H
#define ZBPP_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"
#include "zbpp/gpt2.h"

typedef struct {
    float lr;           /* peak learning rate */
    float beta1, beta2; /* moment decay rates, in [0, 1) */
    float eps;          /* > 0 */
    float weight_decay; /* decoupled, >= 0; applied only to the tensors zb_adamw_decays says */
} zb_adamw_hparams_t;

/* Defaults: lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1. */
zb_adamw_hparams_t zb_adamw_defaults(void);
/* ZB_EINVAL with a message naming the bad field. */
zb_status_t zb_adamw_check(const zb_adamw_hparams_t *h, zb_err_t *err);

/* Which tensors get weight decay (GPT-2 / nanoGPT convention: every tensor with 2 or more
 * dimensions, i.e. WTE, WPE and the four weight matrices of each block; biases and LayerNorm
 * parameters do not decay). */
bool zb_adamw_decays(zb_gpt2_tensor_t t);

/* AdamW state: first and second moments, parameter-shaped (moments only of the elements a
 * caller updates are ever touched). */
typedef struct {
    zb_gpt2_params_t m, v;
} zb_adamw_state_t;

zb_status_t zb_adamw_state_alloc(zb_adamw_state_t *s, const zb_gpt2_config_t *cfg, zb_err_t *err);
/* Moments shaped like the (possibly stage-local) parameter buffer `shape`. */
zb_status_t zb_adamw_state_alloc_like(zb_adamw_state_t *s, const zb_gpt2_params_t *shape,
                                      zb_err_t *err);
void zb_adamw_state_free(zb_adamw_state_t *s);
/* Zero the moments by writing them, so their pages are this process's before a step runs:
 * AdamW's first step reads them before writing, and turning shared zero pages into private ones
 * while several threads run costs a TLB shoot-down per page (measured: ~2 s more on the first
 * GPT-2 124M step). Done by whoever will step them (not at allocation: a pipeline process
 * allocates the whole model's moments only to pass them on). */
void zb_adamw_state_touch(zb_adamw_state_t *s);

/* One AdamW step on the elements [offset, offset+count) of the parameter buffer:
 *   g = grad · grad_scale;  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
 *   p −= lr · ( (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + eps) + wd·p )
 * with wd = weight_decay where zb_adamw_decays holds for the element's tensor, else 0.
 * `t` is the 1-based step number; `lr` the learning rate for this step (from the schedule);
 * grad_scale the clip factor (1 when not clipping). A range may span several tensors. The math
 * per element does not depend on the range, so any split of the buffer gives the same bits (the
 * elements are shared over the current worker group, zbpp/workers.h). */
void zb_adamw_update_range(zb_gpt2_params_t *params, const zb_gpt2_params_t *grads,
                           zb_adamw_state_t *state, const zb_adamw_hparams_t *h, float lr,
                           long t, float grad_scale, size_t offset, size_t count);
/* zb_adamw_update_range over every range of the given norm units (see zb_gpt2_unit_ranges). */
void zb_adamw_update_units(zb_gpt2_params_t *params, const zb_gpt2_params_t *grads,
                           zb_adamw_state_t *state, const zb_adamw_hparams_t *h, float lr, long t,
                           float grad_scale, const int *units, int n_units);

/* ---- global gradient norm ---- */

/* Sum of squares of the gradient over one norm unit, in double: ranges in order; a range is cut
 * into chunks of 65536 elements whose partials are added in order, and inside a chunk element i
 * goes to accumulator i % 8 and the 8 are added in order (a fixed order that vectorizes and that
 * the chunks, shared over the current worker group, keep for any thread count).
 * Gradients of the tied WTE must already be folded (zb_gpt2_fold_tied). */
double zb_grad_unit_sumsq(const zb_gpt2_params_t *grads, int unit);
/* sqrt of the partials summed in unit order 0..n-1 (n = zb_gpt2_num_units). NaN/Inf propagate. */
double zb_grad_norm_total(const double *unit_sumsq, int n);
/* The factor the gradients are multiplied by: clip/norm when clip > 0 and norm > clip, else 1. */
float zb_grad_clip_scale(double norm, float clip);

/* ---- learning-rate schedule ---- */

typedef enum { ZB_LR_CONSTANT, ZB_LR_COSINE } zb_lr_kind_t;

typedef struct {
    zb_lr_kind_t kind;
    float lr;     /* peak */
    float lr_min; /* cosine floor */
    long warmup;  /* linear warm-up steps (0 = none) */
    long total;   /* steps over which cosine decays to lr_min */
} zb_lr_schedule_t;

/* Parse "constant" or "cosine"; ZB_EINVAL otherwise. */
zb_status_t zb_lr_kind_parse(const char *s, zb_lr_kind_t *out, zb_err_t *err);
const char *zb_lr_kind_name(zb_lr_kind_t k);
/* Learning rate for 0-based step `step`: lr·(step+1)/warmup during warm-up; then constant lr, or
 * lr_min + (lr − lr_min)·(1 + cos(π·(step − warmup)/(total − warmup)))/2, held at lr_min after
 * `total`. */
float zb_lr_at(const zb_lr_schedule_t *s, long step);

#endif
