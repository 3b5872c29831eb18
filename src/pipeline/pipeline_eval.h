/* zbpp — validation through the pipeline (pipeline_eval.c) */
#ifndef ZBPP_PL_EVAL_H
#define ZBPP_PL_EVAL_H

#include "pipeline/pipeline_local.h"

/* pipeline_eval.c: validation through the pipeline. pl_eval_plan: the forward-only program
 * (pl->eval_sched) from the lowered training program. pl_eval_step: the zb_rank_fn of one
 * validation batch (R->in->inputs / targets): F of every microbatch on every stage, each stash
 * emptied right after its F; every rank ends with the batch's loss in R->val_loss.
 * pl_validate: the mean loss over the K validation batches, run on the ranks of this process. */
zb_status_t pl_eval_plan(pl_t *pl, zb_err_t *err);
zb_status_t pl_eval_step(zb_transport_t *t, void *arg, zb_err_t *err);
struct zb_val;
zb_status_t pl_validate(pl_local_t *L, struct zb_val *val, float *loss, zb_err_t *err);

#endif
