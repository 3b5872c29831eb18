/* The single-process trainer: config defaults and checks, trainer setup, one step, the loop.
 * The step is cut into next_batch / compute / update so the pipeline runtime swaps only compute. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/divergence.h"
#include "train/train_loop.h"
#include "train/val.h"
#include "zbpp/handshake.h"
#include "zbpp/nn.h"
#include "zbpp/train.h"
#include "zbpp/workers.h"
#include "zbpp/util.h"

void zb_train_config_defaults(zb_train_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->model = (zb_gpt2_config_t){.max_seq = 0, .vocab = ZB_TOK_VOCAB, .padded_vocab = 0,
                                  .layers = 2, .heads = 4, .channels = 64};
    c->batch = 4;
    c->seq = 64;
    c->microbatches = 1;
    c->steps = 20;
    c->shuffle = true;
    c->seed = 1337;
    c->adamw = zb_adamw_defaults();
    c->grad_clip = 1.0f;
    c->lr_schedule = ZB_LR_COSINE;
    c->warmup = 0;
    c->lr_min = 0.0f;
    c->val_steps = 4;
}

zb_status_t zb_train_config_check(const zb_train_config_t *c, zb_err_t *err)
{
    if (c->batch < 1)
        return zb_err_set(err, ZB_EINVAL, "--batch must be >= 1 (got %d)", c->batch);
    if (c->threads < 0 || c->threads > ZB_WORKERS_MAX)
        return zb_err_set(err, ZB_EINVAL, "--threads must be in 1..%d (got %d)", ZB_WORKERS_MAX,
                          c->threads);
    if (c->seq < 1)
        return zb_err_set(err, ZB_EINVAL, "--seq must be >= 1 (got %d)", c->seq);
    if (c->microbatches < 1)
        return zb_err_set(err, ZB_EINVAL, "--microbatches must be >= 1 (got %d)", c->microbatches);
    if (c->batch % c->microbatches != 0)
        return zb_err_set(err, ZB_EINVAL, "--batch %d is not divisible by --microbatches %d",
                          c->batch, c->microbatches);
    if (c->steps < 0)
        return zb_err_set(err, ZB_EINVAL, "--steps must be >= 0 (got %ld)", c->steps);
    if ((size_t)c->batch * (size_t)c->seq > (size_t)1 << 30)
        return zb_err_set(err, ZB_EINVAL, "--batch * --seq is too large (%d * %d)", c->batch,
                          c->seq);
    zb_status_t st = zb_adamw_check(&c->adamw, err);
    if (st != ZB_OK)
        return st;
    if (!(c->grad_clip >= 0.0f) || !isfinite(c->grad_clip))
        return zb_err_set(err, ZB_EINVAL, "--grad-clip must be finite and >= 0 (got %g)",
                          c->grad_clip);
    if (c->warmup < 0)
        return zb_err_set(err, ZB_EINVAL, "--warmup must be >= 0 (got %ld)", c->warmup);
    if (!(c->lr_min >= 0.0f) || !isfinite(c->lr_min) || c->lr_min > c->adamw.lr)
        return zb_err_set(err, ZB_EINVAL, "--lr-min must be in [0, --lr] (got %g, lr %g)",
                          c->lr_min, c->adamw.lr);
    if (c->lr_schedule != ZB_LR_CONSTANT && c->lr_schedule != ZB_LR_COSINE)
        return zb_err_set(err, ZB_EINVAL, "unknown LR schedule %d", (int)c->lr_schedule);
    if (c->sample_every < 0 || c->sample_tokens < 0)
        return zb_err_set(err, ZB_EINVAL, "--sample-every and --sample-tokens must be >= 0");
    if (c->save_every < 0)
        return zb_err_set(err, ZB_EINVAL, "--save-every must be >= 0 (got %ld)", c->save_every);
    if (c->save_every > 0 && !c->save_path)
        return zb_err_set(err, ZB_EINVAL, "--save-every needs --save FILE");
    if (c->init_from && c->resume_path)
        return zb_err_set(err, ZB_EINVAL, "use either --init-from or --resume, not both");
    if (!c->data_glob && !c->text_path)
        return zb_err_set(err, ZB_EINVAL, "no training data: give --data GLOB or --text FILE");
    if (c->val_data_glob && c->val_text_path)
        return zb_err_set(err, ZB_EINVAL, "use either --val-data or --val-text, not both");
    if (c->val_steps < 1)
        return zb_err_set(err, ZB_EINVAL, "--val-steps must be >= 1 (got %d)", c->val_steps);
    if (c->val_every < 0)
        return zb_err_set(err, ZB_EINVAL, "--val-every must be >= 0 (got %ld)", c->val_every);
    if (!(c->peak_tflops >= 0) || !isfinite(c->peak_tflops))
        return zb_err_set(err, ZB_EINVAL, "--peak-tflops must be a positive number (got %g)",
                          c->peak_tflops);
    if (c->keep_last < 0)
        return zb_err_set(err, ZB_EINVAL, "--keep-last must be >= 1 (got %d)", c->keep_last);
    if (c->keep_last > 0 && !c->save_path)
        return zb_err_set(err, ZB_EINVAL, "--keep-last needs --save FILE (and --save-every N)");
    return ZB_OK;
}

/* ---- setup ---- */

/* The model's shape: the checkpoint's (resume), the model file's (init_from), or the flags'. */
static zb_status_t model_shape(const zb_train_config_t *c, zb_gpt2_config_t *m, zb_err_t *err)
{
    if (c->resume_path) {
        zb_train_config_t stored = *c;
        zb_status_t st = zb_train_peek(c->resume_path, &stored, err);
        *m = stored.model;
        return st;
    }
    if (c->init_from)
        return zb_gpt2_peek_llmc(c->init_from, m, err);
    *m = c->model;
    if (m->max_seq == 0)
        m->max_seq = c->seq;
    if (m->padded_vocab == 0)
        m->padded_vocab = m->vocab > 0 ? (m->vocab + 127) / 128 * 128 : 0;
    return zb_gpt2_config_check(m, err);
}

/* The whole model's parameters: fresh or from init_from (resume: restored by zb_train_load). */
static zb_status_t setup_model(zb_trainer_t *t, zb_err_t *err)
{
    const zb_train_config_t *c = &t->cfg;
    zb_status_t st = zb_gpt2_params_alloc(&t->params, &t->model, err);
    if (st == ZB_OK && c->init_from && !c->resume_path)
        st = zb_gpt2_load_llmc_into(c->init_from, &t->params, NULL, err);
    else if (st == ZB_OK && !c->resume_path)
        zb_gpt2_params_init_random(&t->params, c->seed);
    return st;
}

static zb_status_t setup_data(zb_trainer_t *t, zb_err_t *err)
{
    const zb_train_config_t *c = &t->cfg;
    int vocab = t->model.vocab;
    zb_status_t st = c->data_glob ? zb_data_open_glob(c->data_glob, vocab, &t->data, err)
                                  : zb_data_open_text(c->text_path, vocab, &t->data, err);
    if (st != ZB_OK)
        return st;
    return zb_data_configure(t->data, c->batch, c->seq, c->shuffle, c->seed, err);
}

/* Everything but the model's buffers: config, shape, data, validation, batch buffers. */
static zb_status_t init_host(zb_trainer_t *t, const zb_train_config_t *cfg, zb_err_t *err)
{
    memset(t, 0, sizeof *t);
    t->cfg = *cfg;
    zb_status_t st = zb_train_config_check(cfg, err);
    if (st == ZB_OK) /* before the model: the BLAS maps its work buffer while there is room */
        st = zb_blas_check_headroom(1, err);
    if (st == ZB_OK && (st = model_shape(cfg, &t->model, err)) == ZB_OK) {
        zb_gpt2_span_t all = {0, t->model.layers, true, true};
        t->param_count = zb_gpt2_params_part_count(&t->model, &all, 1);
    }
    if (st == ZB_OK && cfg->seq > t->model.max_seq)
        st = zb_err_set(err, ZB_EINVAL,
                        "sequence length %d (--seq, default 64) exceeds the model's maximum"
                        " sequence length %d: give --seq %d or less",
                        cfg->seq, t->model.max_seq, t->model.max_seq);
    if (st == ZB_OK)
        st = setup_data(t, err);
    if (st == ZB_OK)
        st = zb_val_open(cfg, t->model.vocab, &t->val, err);
    if (st == ZB_OK) {
        size_t bt = (size_t)cfg->batch * (size_t)cfg->seq;
        t->n_units = zb_gpt2_num_units(&t->model);
        t->inputs = malloc(bt * sizeof *t->inputs);
        t->targets = malloc(bt * sizeof *t->targets);
        t->unit_sumsq = calloc((size_t)t->n_units, sizeof *t->unit_sumsq);
        t->all_units = malloc((size_t)t->n_units * sizeof *t->all_units);
        for (int u = 0; t->all_units && u < t->n_units; u++)
            t->all_units[u] = u;
        if (!t->inputs || !t->targets || !t->unit_sumsq || !t->all_units)
            st = zb_err_set(err, ZB_ENOMEM, "out of memory for the batch buffers");
    }
    return st;
}

zb_status_t zb_trainer_init_host(zb_trainer_t *t, const zb_train_config_t *cfg, zb_err_t *err)
{
    zb_status_t st = init_host(t, cfg, err);
    if (st == ZB_OK && cfg->resume_path)
        st = zb_train_resume_header(t, cfg->resume_path, &t->init_hash, err);
    else if (st == ZB_OK && !cfg->init_from) /* fresh: the seed and shape decide every bit */
        t->init_hash = zb_hash_bytes(zb_hash_bytes(ZB_HASH_SEED, &cfg->seed, sizeof cfg->seed),
                                     &t->model, sizeof t->model);
    if (st != ZB_OK)
        zb_trainer_free(t);
    return st;
}

zb_status_t zb_trainer_init(zb_trainer_t *t, const zb_train_config_t *cfg, zb_err_t *err)
{
    zb_status_t st = init_host(t, cfg, err);
    if (st == ZB_OK)
        st = setup_model(t, err);
    if (st == ZB_OK)
        st = zb_gpt2_grads_alloc(&t->grads, &t->model, err);
    if (st == ZB_OK)
        st = zb_adamw_state_alloc(&t->opt, &t->model, err);
    if (st == ZB_OK) {
        zb_gpt2_span_t whole = {0, t->model.layers, true, true};
        st = zb_gpt2_stash_new(&t->model, &whole, cfg->batch / cfg->microbatches, cfg->seq,
                               &t->stash, err);
    }
    if (st == ZB_OK && cfg->resume_path)
        st = zb_train_load(t, cfg->resume_path, err);
    if (st != ZB_OK)
        zb_trainer_free(t);
    return st;
}

void zb_trainer_free(zb_trainer_t *t)
{
    zb_gpt2_stash_free(t->stash);
    zb_bf16_weight_cache_free(t->bf16_weights);
    zb_adamw_state_free(&t->opt);
    zb_gpt2_grads_free(&t->grads);
    zb_gpt2_params_free(&t->params);
    zb_data_free(t->data);
    zb_val_free(t->val);
    free(t->inputs);
    free(t->targets);
    free(t->unit_sumsq);
    free(t->all_units);
    memset(t, 0, sizeof *t);
}

/* ---- one step ---- */

zb_status_t zb_trainer_next_batch(zb_trainer_t *t, zb_err_t *err)
{
    return zb_data_next(t->data, t->inputs, t->targets, err);
}

float zb_train_mean_loss(const float *mb_losses, int M)
{
    float sum = 0.0f;
    for (int m = 0; m < M; m++)
        sum += mb_losses[m];
    return sum / (float)M;
}

zb_status_t zb_trainer_compute(zb_trainer_t *t, float *loss, zb_err_t *err)
{
    const zb_train_config_t *c = &t->cfg;
    int M = c->microbatches;
    size_t mb_tokens = (size_t)(c->batch / M) * (size_t)c->seq;
    /* mean over the whole batch: every token's loss weighs 1/(B·T) */
    float grad_scale = 1.0f / ((float)c->batch * (float)c->seq);
    zb_gpt2_span_t whole = {0, t->params.cfg.layers, true, true};
    float mb_loss[64];
    float *losses = M <= 64 ? mb_loss : malloc((size_t)M * sizeof *losses);
    if (!losses)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for %d microbatch losses", M);
    zb_gpt2_grads_zero(&t->grads);
    zb_status_t st = ZB_OK;
    zb_bf16_weight_cache_open(&t->bf16_weights); /* the weights are fixed until the update */
    for (int m = 0; m < M && st == ZB_OK; m++) {
        const int *in = t->inputs + (size_t)m * mb_tokens;
        const int *tg = t->targets + (size_t)m * mb_tokens;
        st = zb_gpt2_forward(&t->params, &whole, t->stash, in, NULL, tg, NULL, &losses[m], err);
        if (st == ZB_OK)
            st = zb_gpt2_backward_input(&t->params, &whole, t->stash, NULL, grad_scale, NULL, err);
        if (st == ZB_OK)
            st = zb_gpt2_backward_weight(&t->params, &whole, t->stash, &t->grads, err);
    }
    zb_bf16_weight_cache_close();
    if (st == ZB_OK) {
        *loss = zb_train_mean_loss(losses, M);
        zb_gpt2_fold_tied(&t->grads);
        for (int u = 0; u < t->n_units; u++)
            t->unit_sumsq[u] = zb_grad_unit_sumsq(&t->grads.g, u);
    }
    if (losses != mb_loss)
        free(losses);
    return st;
}

void zb_train_update(const zb_train_config_t *cfg, zb_gpt2_params_t *params,
                     const zb_gpt2_params_t *grads, zb_adamw_state_t *opt, long step, long adam_t,
                     const double *unit_sumsq, int n_units, const int *units, int n_owned,
                     zb_step_stats_t *stats)
{
    zb_lr_schedule_t sched = {cfg->lr_schedule, cfg->adamw.lr, cfg->lr_min, cfg->warmup,
                              cfg->steps};
    stats->step = step;
    stats->lr = zb_lr_at(&sched, step);
    stats->grad_norm = zb_grad_norm_total(unit_sumsq, n_units);
    stats->skipped = !isfinite(stats->grad_norm);
    stats->clip_scale = 1.0f;
    if (stats->skipped)
        return;
    stats->clip_scale = zb_grad_clip_scale(stats->grad_norm, cfg->grad_clip);
    zb_adamw_update_units(params, grads, opt, &cfg->adamw, stats->lr, adam_t, stats->clip_scale,
                          units, n_owned);
}

void zb_trainer_update(zb_trainer_t *t, zb_step_stats_t *stats)
{
    /* every unit, in order: units[u] = u */
    zb_train_update(&t->cfg, &t->params, &t->grads.g, &t->opt, t->step, t->step - t->skipped + 1,
                    t->unit_sumsq, t->n_units, t->all_units, t->n_units, stats);
}

zb_status_t zb_trainer_step(zb_trainer_t *t, zb_step_stats_t *stats, zb_err_t *err)
{
    double t0 = zb_now();
    float loss = 0.0f;
    zb_status_t st = zb_trainer_next_batch(t, err);
    if (st == ZB_OK)
        st = zb_trainer_compute(t, &loss, err);
    if (st != ZB_OK)
        return st;
    zb_trainer_update(t, stats);
    zb_trainer_end_step(t, loss, t0, stats);
    return ZB_OK;
}

void zb_trainer_end_step(zb_trainer_t *t, float loss, double t0, zb_step_stats_t *stats)
{
    stats->loss = loss;
    if (stats->skipped)
        t->skipped++;
    t->step++;
    double secs = zb_now() - t0;
    stats->step_ms = secs * 1e3;
    stats->tokens_per_s = secs > 0 ? (double)t->cfg.batch * t->cfg.seq / secs : 0.0;
}

/* ---- the loop ---- */

static zb_status_t cpu_step(void *ctx, zb_trainer_t *t, zb_step_stats_t *s, zb_err_t *err)
{
    (void)ctx;
    return zb_trainer_step(t, s, err);
}

static zb_status_t to_host(const zb_train_hooks_t *h, bool optimizer, zb_err_t *err)
{
    return h->to_host ? h->to_host(h->ctx, optimizer, err) : ZB_OK;
}

static void host_done(const zb_train_hooks_t *h)
{
    if (h->host_done)
        h->host_done(h->ctx);
}

static zb_status_t validate(const zb_train_hooks_t *h, zb_trainer_t *t, float *loss,
                            zb_err_t *err)
{
    if (h->validate)
        return h->validate(h->ctx, t, loss, err);
    zb_status_t st = to_host(h, false, err);
    if (st == ZB_OK)
        st = zb_trainer_validate(t, loss, err);
    host_done(h);
    return st;
}

static zb_status_t save(const zb_train_hooks_t *h, zb_trainer_t *t, zb_err_t *err)
{
    const zb_train_config_t *cfg = &t->cfg;
    zb_status_t st;
    if (h->save) {
        st = h->save(h->ctx, t, err);
    } else {
        if ((st = to_host(h, true, err)) == ZB_OK)
            st = zb_diverge_check_weights(t->params.data, t->params.count, cfg->save_path, err);
        if (st == ZB_OK)
            st = zb_train_save(t, cfg->save_path, err);
        host_done(h);
        if (st == ZB_OK && cfg->keep_last > 0)
            st = zb_ckpt_rotate(cfg->save_path, t->step, cfg->keep_last, err);
    }
    return st;
}

static zb_status_t sample(const zb_train_hooks_t *h, zb_trainer_t *t, FILE *human,
                          zb_err_t *err)
{
    zb_status_t st = to_host(h, false, err);
    if (st == ZB_OK)
        st = zb_train_sample(&t->cfg, &t->params, t->inputs[0], t->step, human, err);
    host_done(h);
    return st;
}

static zb_status_t save_model(const zb_train_hooks_t *h, zb_trainer_t *t, zb_err_t *err)
{
    zb_status_t st = to_host(h, false, err);
    if (st == ZB_OK)
        st = zb_diverge_check_weights(t->params.data, t->params.count, t->cfg.save_model_path,
                                      err);
    if (st == ZB_OK)
        st = zb_gpt2_save_llmc(t->cfg.save_model_path, &t->params, err);
    host_done(h);
    return st;
}

static zb_status_t stop_requested(const zb_train_hooks_t *h, const zb_train_config_t *cfg,
                                  bool *stop, zb_err_t *err)
{
    bool local = cfg->stop && *cfg->stop;
    *stop = local;
    return h->stop_agreed && cfg->stop ? h->stop_agreed(h->ctx, local, stop, err) : ZB_OK;
}

zb_status_t zb_train_loop(const zb_train_config_t *cfg, FILE *human, zb_trainer_t *t,
                          const zb_train_hooks_t *h, zb_train_summary_t *summary, zb_err_t *err)
{
    memset(summary, 0, sizeof *summary);
    /* this thread's worker group (pinned when it has several threads) */
    zb_workers_t *workers = NULL, *outer = NULL;
    int nthreads = zb_workers_resolve(cfg->threads, 1);
    zb_status_t st = ZB_OK;
    if (!h->own_threads) {
        if ((st = zb_workers_new_for_rank(0, nthreads, nthreads > 1, &workers, err)) != ZB_OK)
            return st;
        outer = zb_workers_enter(workers);
    }
    summary->first_step = t->step;
    /* the model's shape from its config: a pipeline holds no whole-model copy during the run */
    const double flops_per_step = zb_train_flops_per_step(
        &t->model, t->param_count, cfg->batch, cfg->seq);
    long todo = cfg->steps > t->step ? cfg->steps - t->step : 0;
    double *tps = calloc(todo > 0 ? (size_t)todo : 1, sizeof *tps);
    zb_progress_t *prog = NULL;
    if (!tps)
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for step timings");
    if (st == ZB_OK)
        st = zb_progress_open(&prog, cfg->quiet ? NULL : human, cfg->metrics_path,
                              cfg->resume_path != NULL, cfg->steps, err);
    if (st == ZB_OK)
        zb_progress_set_flops(prog,
                              flops_per_step,
                              cfg->peak_tflops * 1e12);
    zb_diverge_t div;
    zb_diverge_init(&div, 0);
    if (cfg->started)
        *cfg->started = 1;
    while (st == ZB_OK && t->step < cfg->steps) {
        bool stop = false;
        if ((st = stop_requested(h, cfg, &stop, err)) != ZB_OK)
            break;
        if (stop) { /* Ctrl-C: at a step boundary, saved below */
            summary->interrupted = true;
            break;
        }
        zb_step_stats_t s;
        st = h->step(h->ctx, t, &s, err);
        if (st != ZB_OK)
            break;
        s.has_val = zb_train_val_due(cfg, t->step);
        if (s.has_val && (st = validate(h, t, &s.val_loss, err)) != ZB_OK)
            break;
        if (s.has_val) {
            summary->has_val = true;
            summary->val_loss = s.val_loss;
        }
        if (summary->steps_run == 0)
            summary->first_loss = s.loss;
        summary->last_loss = s.loss;
        tps[summary->steps_run++] = s.tokens_per_s;
        summary->skipped += s.skipped;
        st = zb_progress_step(prog, &s, err);
        if (st == ZB_OK) /* K skipped steps in a row: diverged, stop before any save */
            st = zb_diverge_step(&div, s.skipped, s.loss, t->step, err);
        if (st == ZB_OK && cfg->sample_every > 0 && t->step % cfg->sample_every == 0)
            st = sample(h, t, human, err);
        if (st == ZB_OK && cfg->save_every > 0 && t->step % cfg->save_every == 0 &&
            t->step < cfg->steps && zb_diverge_may_save(&div))
            st = save(h, t, err);
    }
    zb_err_t close_err;
    zb_status_t cst = zb_progress_close(prog, &close_err);
    if (st == ZB_OK && cst != ZB_OK) {
        st = cst;
        if (err)
            *err = close_err;
    }
    if (st == ZB_OK && summary->steps_run > 0) /* every rank saw this loss: all stop here */
        st = zb_diverge_final(&div, err);
    if (st == ZB_OK && cfg->save_path)
        st = save(h, t, err);
    if (st == ZB_OK && cfg->save_model_path)
        st = save_model(h, t, err);
    if (summary->steps_run > 0) {
        zb_sort_doubles(tps, (size_t)summary->steps_run);
        summary->median_tokens_per_s = tps[summary->steps_run / 2];
        summary->flops_per_token =
            flops_per_step / ((double)cfg->batch * cfg->seq);
    }
    free(tps);
    if (workers) {
        zb_workers_enter(outer);
        zb_workers_free(workers);
    }
    return st;
}

zb_status_t zb_train_run(const zb_train_config_t *cfg, FILE *human, zb_train_summary_t *summary,
                         zb_err_t *err)
{
    memset(summary, 0, sizeof *summary);
    zb_trainer_t t;
    zb_status_t st = zb_trainer_init(&t, cfg, err);
    if (st != ZB_OK)
        return st;
    if (!cfg->resume_path) /* a resumed run's moments were written by the load */
        zb_adamw_state_touch(&t.opt);
    const zb_train_hooks_t cpu = {.step = cpu_step};
    st = zb_train_loop(cfg, human, &t, &cpu, summary, err);
    zb_trainer_free(&t);
    return st;
}
