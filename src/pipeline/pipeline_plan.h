/* zbpp — the run's plan and cost model (pipeline_plan.c) */
#ifndef ZBPP_PL_PLAN_H
#define ZBPP_PL_PLAN_H

#include "pipeline/pipeline_types.h"

/* pipeline_plan.c. pl_profile: measure the costs when opts->profile (with a transport: on rank 0
 * only, which pl_share_profile then sends to the others) into pl->prof.
 * pl_plan_build: the plan of the run from pl's shape, options and profile (pl is not changed):
 * the schedule (family, file or planned with costs, then --recompute), the partition its cost
 * model balances, validated against the memory limit, lowered; fills the prediction of `rep`
 * (bubble, span, busy, stash peaks, whole-rank memory per rank, stages, partition, note).
 * pl_plan_free: the plan and the profile. */
zb_status_t pl_profile(pl_t *pl, const zb_gpt2_params_t *params, zb_err_t *err);
zb_status_t pl_plan_build(const pl_t *pl, pl_plan_t *plan, zb_pipeline_report_t *rep,
                          zb_err_t *err);
void pl_plan_free(pl_t *pl);

#endif
