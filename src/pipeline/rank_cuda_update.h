/* zbpp — a GPU rank's optimizer side (rank_cuda_update.c): pl_rank_cuda's hooks for the gradient
 * norm, the update and post-validation (see pl_rank_dev_t in rank_device.h). */
#ifndef ZBPP_PL_RANK_CUDA_UPDATE_H
#define ZBPP_PL_RANK_CUDA_UPDATE_H

#include "pipeline/pipeline_types.h"

/* The rank ends the step's programs last (pl_plan_t.tail): its work after the program runs on
 * the whole GPU (zb_cuda_stage_widen), no other rank computes then. pl_cu_narrow_back: back to
 * the partition after such work (also after a failure st; the first error is reported). */
bool pl_cu_on_tail(const pl_rank_t *R);
zb_status_t pl_cu_narrow_back(zb_cuda_stage_t *s, zb_status_t st, zb_err_t *err);
/* Squared gradient norms: of one unit; of every unit the rank owns, into vec[unit]. */
zb_status_t pl_cu_unit_sumsq(pl_rank_t *R, int unit, double *out, zb_err_t *err);
zb_status_t pl_cu_units_sumsq(pl_rank_t *R, double *vec, zb_err_t *err);
/* The step's update: zb_train_update's rules, then AdamW on the device (on the whole GPU). */
zb_status_t pl_cu_update(pl_rank_t *R, const double *sumsq, zb_err_t *err);
/* Post-validation: the whole update is optimistic; the backup saves or restores all of it, and
 * the device steps all of it or nothing. */
size_t pl_cu_optimistic_elems(const pl_rank_t *R);
zb_status_t pl_cu_backup(pl_rank_t *R, size_t K, bool save, zb_err_t *err);
zb_status_t pl_cu_step_elems(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t,
                             zb_err_t *err);

#endif
