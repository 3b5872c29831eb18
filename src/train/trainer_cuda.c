/* The single-process trainer on one GPU (`zbpp train --device cuda`): the CPU trainer's setup
 * (zb_trainer_init: data, model, resume) and its one loop (train/train_loop.h: progress,
 * validation, samples, checkpoints, divergence and Ctrl-C stops) around one CUDA stage holding
 * the whole model; only the step and the copy back to the host are the GPU's. Parameters,
 * gradients and AdamW moments live on the device for the whole run; the host copies in the
 * zb_trainer_t (params, AdamW state) are the checkpoint's: written by zb_trainer_init (fresh,
 * --init-from, --resume) and uploaded once, refreshed by a download before every save.
 *
 * A step, as zb_trainer_step: next batch (host) -> for each microbatch F, B, W on the device
 * (W accumulates into the fp32 gradients) -> fold the tied embedding, per-unit grad-norm
 * partials (device, summed on the host) -> zb_train_update over no units (the step's lr, global
 * norm, skip and clip scale, exactly the CPU rules) -> AdamW on the device with those scalars.
 * Uses only the public zb_cuda_* API, so it is compiled in every build (without CUDA the device
 * check fails first with one line). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_loop.h"
#include "zbpp/cuda.h"
#include "zbpp/train.h"
#include "zbpp/util.h"

typedef struct {
    zb_trainer_t t; /* host side: config, data, batch buffers, host params / moments */
    zb_cuda_stage_t *stage;
    zb_cuda_stash_t *stash;
    int *units;           /* 0..n_units-1 */
    float *mb_loss;       /* [M] */
    bool host_stale;      /* the device state moved past the host copies */
} cuda_trainer_t;

static void ct_free(cuda_trainer_t *ct)
{
    zb_cuda_stash_free(ct->stash);
    zb_cuda_stage_free(ct->stage);
    free(ct->units);
    free(ct->mb_loss);
    zb_trainer_free(&ct->t);
    memset(ct, 0, sizeof *ct);
}

static zb_status_t ct_init(cuda_trainer_t *ct, const zb_train_config_t *cfg,
                           const zb_cuda_train_opts_t *o, zb_err_t *err)
{
    memset(ct, 0, sizeof *ct);
    zb_trainer_t *t = &ct->t;
    /* the CPU trainer's setup: model (resume > init_from > fresh), data, host moments, resume */
    zb_status_t st = zb_trainer_init(t, cfg, err);
    if (st != ZB_OK)
        return st;
    /* the host gradients are not used here, nor the CPU stash unless the host validates (on the
     * parameters downloaded for it): give them back */
    if (!cfg->val_data_glob && !cfg->val_text_path) {
        zb_gpt2_stash_free(t->stash);
        t->stash = NULL;
    }
    zb_gpt2_grads_free(&t->grads);
    memset(&t->grads, 0, sizeof t->grads);
    if (!cfg->resume_path) /* a resumed run's moments were written by the load */
        zb_adamw_state_touch(&t->opt);
    zb_gpt2_span_t whole = {0, t->params.cfg.layers, true, true};
    int M = cfg->microbatches;
    ct->units = malloc((size_t)t->n_units * sizeof *ct->units);
    ct->mb_loss = malloc((size_t)M * sizeof *ct->mb_loss);
    if (!ct->units || !ct->mb_loss)
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for the step buffers");
    for (int u = 0; st == ZB_OK && u < t->n_units; u++)
        ct->units[u] = u;
    if (st == ZB_OK)
        st = zb_cuda_stage_new(&t->params.cfg, &whole, cfg->batch / M, cfg->seq, o->precision,
                               o->device, &ct->stage, err);
    if (st == ZB_OK)
        st = zb_cuda_stage_set_fp32_attention(ct->stage, o->fp32_attention, err);
    if (st == ZB_OK) /* the step's backward scale (cuda_step): the head's F leaves the gradient */
        st = zb_cuda_stage_fold_loss_grad(ct->stage, 1.0f / ((float)cfg->batch * (float)cfg->seq),
                                          err);
    if (st == ZB_OK)
        st = zb_cuda_stash_new(ct->stage, &ct->stash, err);
    if (st == ZB_OK)
        st = zb_cuda_params_upload(ct->stage, &t->params, err);
    if (st == ZB_OK)
        st = zb_cuda_adamw_upload(ct->stage, &t->opt, err);
    if (st != ZB_OK)
        ct_free(ct);
    return st;
}

/* Bring the host copies (params, moments) up to the device's state. */
static zb_status_t ct_download(cuda_trainer_t *ct, zb_err_t *err)
{
    if (!ct->host_stale)
        return ZB_OK;
    zb_status_t st = zb_cuda_params_download(ct->stage, &ct->t.params, err);
    if (st == ZB_OK)
        st = zb_cuda_adamw_download(ct->stage, &ct->t.opt, err);
    if (st == ZB_OK)
        ct->host_stale = false;
    return st;
}

/* F, B, W of every microbatch of the current batch; fold; per-unit norm partials. */
static zb_status_t ct_compute(cuda_trainer_t *ct, float *loss, zb_err_t *err)
{
    zb_trainer_t *t = &ct->t;
    const zb_train_config_t *c = &t->cfg;
    int M = c->microbatches;
    size_t mb_tokens = (size_t)(c->batch / M) * (size_t)c->seq;
    /* mean over the whole batch: every token's loss weighs 1/(B·T), as on the CPU */
    float grad_scale = 1.0f / ((float)c->batch * (float)c->seq);
    zb_status_t st = zb_cuda_grads_zero(ct->stage, err);
    for (int m = 0; m < M && st == ZB_OK; m++) {
        const int *in = t->inputs + (size_t)m * mb_tokens;
        const int *tg = t->targets + (size_t)m * mb_tokens;
        st = zb_cuda_forward(ct->stage, ct->stash, in, NULL, tg, NULL, &ct->mb_loss[m], err);
        if (st == ZB_OK)
            st = zb_cuda_backward_input(ct->stage, ct->stash, NULL, grad_scale, NULL, err);
        if (st == ZB_OK)
            st = zb_cuda_backward_weight(ct->stage, ct->stash, err);
    }
    if (st == ZB_OK)
        st = zb_cuda_fold_tied(ct->stage, err);
    for (int u = 0; u < t->n_units && st == ZB_OK; u++)
        st = zb_cuda_grad_unit_sumsq(ct->stage, u, &t->unit_sumsq[u], err);
    if (st == ZB_OK)
        *loss = zb_train_mean_loss(ct->mb_loss, M);
    return st;
}

static zb_status_t ct_step(cuda_trainer_t *ct, zb_step_stats_t *stats, zb_err_t *err)
{
    zb_trainer_t *t = &ct->t;
    double t0 = zb_now();
    float loss = 0.0f;
    zb_status_t st = zb_trainer_next_batch(t, err);
    if (st == ZB_OK)
        st = ct_compute(ct, &loss, err);
    if (st != ZB_OK)
        return st;
    long adam_t = t->step - t->skipped + 1;
    /* the CPU trainer's rules with no units to update: lr, norm, skip, clip scale */
    zb_train_update(&t->cfg, &t->params, &t->params, &t->opt, t->step, adam_t, t->unit_sumsq,
                    t->n_units, ct->units, 0, stats);
    if (!stats->skipped) {
        st = zb_cuda_adamw_update_units(ct->stage, &t->cfg.adamw, stats->lr, adam_t,
                                        stats->clip_scale, ct->units, t->n_units, err);
        ct->host_stale = true;
    }
    if (st == ZB_OK) /* the step's time includes its queued AdamW */
        st = zb_cuda_sync(ct->stage, err);
    if (st != ZB_OK)
        return st;
    zb_trainer_end_step(t, loss, t0, stats);
    return ZB_OK;
}

/* The shared loop's hooks (train/train_loop.h). */
static zb_status_t hook_step(void *ctx, zb_trainer_t *t, zb_step_stats_t *s, zb_err_t *err)
{
    (void)t; /* the same trainer as ctx's */
    return ct_step(ctx, s, err);
}

static zb_status_t hook_to_host(void *ctx, bool optimizer, zb_err_t *err)
{
    (void)optimizer; /* the download is both */
    return ct_download(ctx, err);
}

zb_status_t zb_cuda_train_run(const zb_train_config_t *cfg, const zb_cuda_train_opts_t *opts,
                              FILE *human, zb_train_summary_t *summary, zb_err_t *err)
{
    memset(summary, 0, sizeof *summary);
    if (!cfg || !opts)
        return zb_err_set(err, ZB_EINVAL, "cuda train: config and options are required");
    zb_status_t st = zb_train_config_check(cfg, err);
    if (st == ZB_OK && opts->precision != ZB_CUDA_FP32 && opts->precision != ZB_CUDA_TF32 &&
        opts->precision != ZB_CUDA_BF16)
        st = zb_err_set(err, ZB_EINVAL, "unknown precision %d", (int)opts->precision);
    if (st == ZB_OK) /* before any file is read: no GPU is one line, at once */
        st = zb_cuda_require_device(opts->device, err);
    if (st != ZB_OK)
        return st;
    cuda_trainer_t ct;
    if ((st = ct_init(&ct, cfg, opts, err)) != ZB_OK)
        return st;
    /* the CPU trainer's loop; only the step and the copy to the host are the GPU's */
    const zb_train_hooks_t gpu = {.ctx = &ct, .step = hook_step, .to_host = hook_to_host};
    st = zb_train_loop(cfg, human, &ct.t, &gpu, summary, err);
    ct_free(&ct);
    return st;
}
