/* zbpp — the validation data of a training run (cfg val_*): a loader read from its start every
 * time, so each validation sees the same K batches. Shared by the single-process trainer
 * (trainer.c, zb_trainer_validate) and the pipeline (pipeline_eval.c). */
#ifndef ZBPP_RUNTIME_VAL_H
#define ZBPP_RUNTIME_VAL_H

#include "zbpp/data.h"
#include "zbpp/train.h"

struct zb_val {
    zb_data_t *data;
    zb_data_pos_t start; /* where every validation begins */
    int *inputs, *targets; /* [B·T] the current batch */
    int steps;             /* K */
};

/* Open and configure the validation data of `c` (B, T, in order) for a model of `vocab` tokens;
 * *out = NULL when `c` names none. Errors name the file and the flag. */
zb_status_t zb_val_open(const zb_train_config_t *c, int vocab, struct zb_val **out,
                        zb_err_t *err);
void zb_val_free(struct zb_val *v);
/* Back to the first batch. */
zb_status_t zb_val_rewind(struct zb_val *v, zb_err_t *err);
/* The next batch into v->inputs / v->targets. */
zb_status_t zb_val_next(struct zb_val *v, zb_err_t *err);

#endif
