/* zbpp — the one single-process training loop (metrics, validation, samples, checkpoints,
 * divergence and Ctrl-C stops) and the hooks a device plugs into it: the CPU trainer
 * (trainer.c) and the GPU trainer (trainer_cuda.c) differ only in how a step runs and in where
 * the current parameters live. */
#ifndef ZBPP_TRAIN_LOOP_H
#define ZBPP_TRAIN_LOOP_H

#include <stdbool.h>
#include <stdio.h>

#include "zbpp/train.h"

typedef struct {
    void *ctx;
    /* One optimizer step of t (batch, compute, update), filling *s as zb_trainer_step does. */
    zb_status_t (*step)(void *ctx, zb_trainer_t *t, zb_step_stats_t *s, zb_err_t *err);
    /* Bring t->params (and t->opt when `optimizer`) up to date before the host reads them
     * (samples, checkpoints, the saved model); NULL when they always are (the CPU). */
    zb_status_t (*to_host)(void *ctx, bool optimizer, zb_err_t *err);
    /* The host is done reading them (a pipeline frees its whole-model copy); NULL = nothing. */
    void (*host_done)(void *ctx);
    /* The validation loss of the current model; NULL = zb_trainer_validate on the host copy. */
    zb_status_t (*validate)(void *ctx, zb_trainer_t *t, float *loss, zb_err_t *err);
    /* Write the training checkpoint cfg->save_path (with --keep-last's rotation); NULL = the
     * host copy through zb_train_save. */
    zb_status_t (*save)(void *ctx, zb_trainer_t *t, zb_err_t *err);
    /* Whether the run stops here: `local` = this process saw Ctrl-C; processes of one run must
     * agree. NULL = local. */
    zb_status_t (*stop_agreed)(void *ctx, bool local, bool *stop, zb_err_t *err);
    /* The step runs on threads of its own (pipeline ranks): the loop makes no worker group. */
    bool own_threads;
} zb_train_hooks_t;

/* Run t (set up by zb_trainer_init) from its step to cfg->steps with the hooks, in a worker group
 * of cfg->threads threads (unless h->own_threads): progress and metrics, validation, samples, --save-every with
 * --keep-last, the divergence stop, the Ctrl-C stop, and the final save and saved model.
 * Fills *summary. t stays the caller's. */
zb_status_t zb_train_loop(const zb_train_config_t *cfg, FILE *human, zb_trainer_t *t,
                          const zb_train_hooks_t *h, zb_train_summary_t *summary, zb_err_t *err);

#endif
