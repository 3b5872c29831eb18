/* zbpp — the training loop: configuration, trainer state, one optimizer step, training
 * checkpoints (save / bit-exact resume), progress output and metrics.
 *
 * A step in a single process is three calls:
 *   zb_trainer_next_batch   data -> t->inputs / t->targets            (whole batch, B·T tokens)
 *   zb_trainer_compute      F, B, W per microbatch; fold tied; fill t->grads and t->unit_sumsq
 *   zb_trainer_update       global norm from the unit partials, clip, AdamW on every unit
 * zb_trainer_step runs the three; zb_train_run loops it with metrics and checkpoints. A pipeline
 * runs the same loop (train/train_loop.h) with its own step: zb_train_update on the units
 * each rank owns. */
#ifndef ZBPP_TRAIN_H
#define ZBPP_TRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zbpp/cuda.h"
#include "zbpp/data.h"
#include "zbpp/error.h"
#include "zbpp/gpt2.h"
#include "zbpp/optim.h"

typedef struct {
    /* model: resume_path, else init_from, else a fresh random model of shape `model` */
    const char *init_from;  /* llm.c model checkpoint, or NULL */
    zb_gpt2_config_t model; /* fresh model (padded_vocab 0 = round vocab up to 128) */
    /* data: data_glob (llm.c shards), else text_path (byte-level tokenized text) */
    const char *data_glob;
    const char *text_path;
    int batch;        /* B: sequences per step */
    int seq;          /* T: tokens per sequence, <= model max_seq */
    int microbatches; /* M: divides B; gradient accumulation over M microbatches of B/M */
    long steps;       /* total steps of the run (a resumed run continues up to it) */
    bool shuffle;
    uint64_t seed; /* model init and data order */
    /* optimizer */
    zb_adamw_hparams_t adamw;
    float grad_clip; /* 0 = no clipping */
    zb_lr_kind_t lr_schedule;
    long warmup;
    float lr_min;
    /* checkpoints and output */
    const char *save_path;   /* training checkpoint written at the end (and every save_every) */
    const char *resume_path; /* training checkpoint to continue from */
    long save_every;         /* 0 = only at the end */
    const char *save_model_path; /* llm.c model checkpoint (params only) written at the end */
    const char *metrics_path;
    bool quiet;
    /* threads per rank (--threads; 0 = the cores this process may use divided among its ranks,
     * see zb_workers_resolve); any count gives the same bits */
    int threads;
    /* --sample-every N: print a short sample on the progress stream every N steps (0 = never);
     * sample_tokens new tokens each (0 = 32; at most the model's max sequence) */
    long sample_every;
    int sample_tokens;
    /* validation (docs/training.md): a forward-only pass over the first val_steps batches (B
     * sequences of T tokens, read in order from the start) of val_data_glob (llm.c shards) or
     * val_text_path (byte-level text); both NULL = no validation. Run after every val_every-th
     * step (0 = only after the last step of the run) and after the last step. */
    const char *val_data_glob;
    const char *val_text_path;
    long val_every;
    int val_steps; /* K >= 1 (default 4) */
    /* MFU: the hardware's peak in TFLOP/s (0 = unknown: the metrics write "mfu":null) */
    double peak_tflops;
    /* --keep-last N (N >= 1, 0 = off): every --save is also hard-linked as SAVE.stepNNNNNN and
     * only the N newest of those are kept (zb_ckpt_rotate) */
    int keep_last;
    /* Stop request (a signal handler's flag; NULL = none): read at each step boundary; when
     * non-zero the run ends after the step in progress, saves --save as at the end and reports
     * summary->interrupted. With a transport the ranks agree on it (any rank's flag stops all). */
    volatile sig_atomic_t *stop;
    /* Set to 1 just before the first step (NULL = none): until then a signal handler may end
     * the process at once, since nothing has been trained or saved (a slow start-up: a large
     * model, checkpoint or corpus) */
    volatile sig_atomic_t *started;
} zb_train_config_t;

/* Defaults: B 4, T 64, M 1, 20 steps, shuffle on, seed 1337, AdamW defaults, clip 1.0, cosine
 * with no warm-up to lr_min 0, model L 2, NH 4, C 64, V 257 (the byte tokenizer), max_seq 0 (=T). */
void zb_train_config_defaults(zb_train_config_t *c);
/* Validate every field of the training setup that does not need the files (sizes, B % M,
 * hyperparameters, save_every without save_path, ...). ZB_EINVAL with a message naming the flag. */
zb_status_t zb_train_config_check(const zb_train_config_t *c, zb_err_t *err);

/* What one step did. */
typedef struct {
    long step;          /* 0-based index of the step */
    float loss;         /* mean over microbatches of each microbatch's mean loss */
    float lr;           /* learning rate used */
    double grad_norm;   /* global norm before clipping */
    float clip_scale;   /* factor applied to the gradients (1 = not clipped) */
    bool skipped;       /* non-finite norm: no parameter or moment changed */
    double step_ms;     /* wall time of the step */
    double tokens_per_s;
    bool has_val;       /* a validation ran after this step: val_loss is its mean loss */
    float val_loss;
} zb_step_stats_t;

typedef struct zb_trainer zb_trainer_t;

struct zb_trainer {
    zb_train_config_t cfg;
    zb_gpt2_config_t model; /* the model's shape (params.cfg; kept when a pipeline frees params) */
    size_t param_count;     /* its parameter count */
    zb_gpt2_params_t params;
    zb_gpt2_grads_t grads;
    zb_adamw_state_t opt;
    zb_data_t *data;
    long step;          /* steps completed */
    long skipped;       /* steps skipped (non-finite norm); AdamW's t = step - skipped + 1 */
    int *inputs;        /* [B·T] current batch, row b = sequence b */
    int *targets;       /* [B·T] */
    double *unit_sumsq; /* [n_units] */
    int n_units;
    int *all_units;     /* [n_units] 0, 1, ..., n_units-1: the units a single process updates */
    zb_gpt2_stash_t *stash; /* zb_trainer_compute's whole-model stash, B/M sequences */
    struct zb_val *val;     /* the validation data (cfg val_*), NULL = none */
    uint64_t init_hash; /* zb_trainer_init_host: what the initial state is made from (the seed
                         * and shape, or the checkpoint); the pipeline adds a model file's */
    struct zb_bf16_weight_cache *bf16_weights; /* CPU bf16 products: weights rounded once a step */
};

/* Build a trainer: model (resume > init_from > fresh), data (opened, checked against the model's
 * vocab, configured for B, T, shuffle, seed), gradients, AdamW state; with resume_path, restore
 * the checkpoint (see zb_train_load). The config's strings must outlive the trainer. On failure
 * everything is released. */
zb_status_t zb_trainer_init(zb_trainer_t *t, const zb_train_config_t *cfg, zb_err_t *err);
/* The same without the model's buffers (params, grads, opt and stash stay empty), for a caller
 * that builds only parts of the model elsewhere (pipeline ranks): shape (model, param_count),
 * data, validation, batch buffers; with resume_path the checkpoint's checks, data position and
 * step (zb_train_resume_header), its tensors left to zb_train_load_into. */
zb_status_t zb_trainer_init_host(zb_trainer_t *t, const zb_train_config_t *cfg, zb_err_t *err);
void zb_trainer_free(zb_trainer_t *t);

/* Load the next batch into t->inputs / t->targets. */
zb_status_t zb_trainer_next_batch(zb_trainer_t *t, zb_err_t *err);
/* Single-process compute of the current batch: zero grads; for each microbatch m in order,
 * forward, backward_input with grad_scale 1/(B·T), backward_weight; fold the tied embedding;
 * fill t->unit_sumsq for every unit. *loss = zb_train_mean_loss of the microbatch losses. */
zb_status_t zb_trainer_compute(zb_trainer_t *t, float *loss, zb_err_t *err);
/* The reported loss: microbatch losses summed in order (float), divided by M. */
float zb_train_mean_loss(const float *mb_losses, int M);

/* The update after compute, for the units in `units` (all of them in a single process; a pipeline
 * rank passes the ones it owns): norm from all n_units partials in unit order; non-finite ->
 * skipped (nothing changes); else clip scale and AdamW with the step's scheduled lr. Fills stats
 * (except step_ms, tokens_per_s). `adam_t` is the 1-based AdamW step number. */
void zb_train_update(const zb_train_config_t *cfg, zb_gpt2_params_t *params,
                     const zb_gpt2_params_t *grads, zb_adamw_state_t *opt, long step, long adam_t,
                     const double *unit_sumsq, int n_units, const int *units, int n_owned,
                     zb_step_stats_t *stats);

/* The validation loss of the model in `t` (single process): forward only, over the first
 * cfg.val_steps batches of the validation data (always the same ones), each batch in M
 * microbatches like a training step; *loss = zb_train_mean_loss of the K batch losses, each the
 * mean of its microbatch losses. Nothing is kept for a backward. ZB_EINVAL without val data. */
zb_status_t zb_trainer_validate(zb_trainer_t *t, float *loss, zb_err_t *err);
/* True when a validation is due after `steps_done` steps (cfg val source, val_every, steps). */
bool zb_train_val_due(const zb_train_config_t *cfg, long steps_done);

/* --keep-last: hard-link the checkpoint just written at `path` as PATH.stepNNNNNN (`step` =
 * steps done; copied if the file system has no hard links), then remove the oldest
 * PATH.step* files beyond the `keep` newest. The one just linked is never removed. */
zb_status_t zb_ckpt_rotate(const char *path, long step, int keep, zb_err_t *err);

/* The update after zb_trainer_compute: zb_train_update over every unit of t with t's step and
 * AdamW step number (fills stats like zb_train_update). */
void zb_trainer_update(zb_trainer_t *t, zb_step_stats_t *stats);
/* The bookkeeping that ends every step: the loss, the skip count, t->step++, and the step's
 * time and tokens/s since t0 (zb_now) into stats. */
void zb_trainer_end_step(zb_trainer_t *t, float loss, double t0, zb_step_stats_t *stats);
/* One whole step: next batch, zb_trainer_compute, zb_trainer_update, zb_trainer_end_step. */
zb_status_t zb_trainer_step(zb_trainer_t *t, zb_step_stats_t *stats, zb_err_t *err);

/* ---- training checkpoints (src/train/train_state.c; format in docs/training.md) ---- */

/* Write params, AdamW moments, step, skipped count, data position and the training config
 * atomically: the old file survives any failure. */
zb_status_t zb_train_save(const zb_trainer_t *t, const char *path, zb_err_t *err);
/* Read the config stored in a checkpoint (model shape, batch, seq, microbatches, steps, shuffle,
 * seed, optimizer, schedule) into *cfg, leaving its other fields untouched. Checks the header. */
zb_status_t zb_train_peek(const char *path, zb_train_config_t *cfg, zb_err_t *err);
/* Restore a checkpoint into an initialised trainer. ZB_EFORMAT for a bad magic/version, truncated
 * or oversized file or corrupt payload; ZB_EMISMATCH when the model, data or any
 * determinism-relevant setting (all of the stored config but `steps`) differs from t->cfg. */
zb_status_t zb_train_load(zb_trainer_t *t, const char *path, zb_err_t *err);
/* A checkpoint's state without its tensors, for a trainer whose buffers live elsewhere
 * (zb_trainer_init_host): the checks of zb_train_load, then the data position, step and skipped
 * count. *hash (may be NULL) identifies the checkpoint's whole content (header checksum). */
zb_status_t zb_train_resume_header(zb_trainer_t *t, const char *path, uint64_t *hash,
                                   zb_err_t *err);
/* The tensors of a checkpoint that `layout` (whole or stage-local) holds, into params, m and v
 * (buffers of layout's shape), streamed in bounded pieces and checked against the checksum
 * (ZB_EFORMAT: the buffers then hold part of a corrupt file). ZB_EMISMATCH for another model. */
zb_status_t zb_train_load_into(const char *path, const zb_gpt2_params_t *layout, float *params,
                               float *m, float *v, zb_err_t *err);

/* ---- progress and metrics (src/train/progress.c) ---- */

typedef struct zb_progress zb_progress_t;

/* human: where progress goes (NULL = quiet); a terminal gets a one-line bar redrawn in place,
 * anything else a plain line per step. metrics_path: JSON lines, one per step (NULL = none);
 * append=true continues an existing file (resume). */
zb_status_t zb_progress_open(zb_progress_t **out, FILE *human, const char *metrics_path,
                             bool append, long total_steps, zb_err_t *err);
/* The published dense peak, in TFLOP/s, of a GPU whose name (as the CUDA runtime gives it, e.g.
 * "NVIDIA H100 80GB HBM3") contains a known model, for matrix products in `precision` ("fp32",
 * "tf32", "bf16"); 0 when the GPU or the precision is not known. */
double zb_gpu_spec_peak_tflops(const char *device_name, const char *precision);

/* Model FLOPs of one training step (for MFU) and the hardware peak in FLOP/s (0 = unknown). */
void zb_progress_set_flops(zb_progress_t *p, double flops_per_step, double peak_flops);
/* FLOPs of one training step of B·T tokens, forward + backward, as llm.c and nanoGPT count
 * them: 6·N per token for N parameters, plus attention 12·L·C·T per token (L blocks, C width). */
double zb_train_flops_per_step(const zb_gpt2_config_t *m, size_t n_params, int B, int T);
/* Record a step: {"step":n (1-based, as the console),"loss":%.9g,["val_loss":..,]"lr":..,
 * "grad_norm":..,"step_ms":..,"tokens_per_s":..,"elapsed_s":..,"tflops":..,"mfu":x|null,
 * "skipped":true|false}; the human line shows elapsed time and the ETA of the run.
 * ZB_EIO if the metrics file cannot be written. */
zb_status_t zb_progress_step(zb_progress_t *p, const zb_step_stats_t *s, zb_err_t *err);
/* Finish the bar line, close the metrics file. ZB_EIO if it could not be flushed. p may be NULL. */
zb_status_t zb_progress_close(zb_progress_t *p, zb_err_t *err);

/* ---- samples during training (src/train/train_sample.c) ---- */

/* One line "sample after step N: <text>" on `out` (NULL: nothing): cfg->sample_tokens tokens
 * picked from `params` (a whole model) at temperature 1 with seed cfg->seed, continuing
 * `first_token` (e.g. the batch's first). Tokens are shown as bytes (byte-level tokenizer),
 * newlines and other non-printable bytes escaped, ids above 256 as <id>. */
zb_status_t zb_train_sample(const zb_train_config_t *cfg, const zb_gpt2_params_t *params,
                            int first_token, long step, FILE *out, zb_err_t *err);

/* ---- the loop ---- */

typedef struct {
    long first_step, steps_run, skipped;
    float first_loss, last_loss;
    double median_tokens_per_s;
    double flops_per_token; /* model FLOPs per token (zb_train_flops_per_step / (B·T)) */
    bool interrupted; /* cfg->stop was seen: the run ended early (after a complete step) */
    bool has_val;     /* the last validation's loss */
    float val_loss;
} zb_train_summary_t;

/* Initialise (or resume), run up to cfg->steps, save every save_every and at the end, report
 * progress to `human` (NULL or cfg->quiet = none) and metrics. */
zb_status_t zb_train_run(const zb_train_config_t *cfg, FILE *human, zb_train_summary_t *summary,
                         zb_err_t *err);

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

#endif
