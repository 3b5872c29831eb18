/* zbpp — a training step's phases after the pipeline's actions (zb_step_phases_t): each one's
 * host wall time, and its device time where the rank's device records events around it
 * (pl_rank_dev_t.time_phase). Used by pipeline_rank.c around the step's parts. */
#ifndef ZBPP_PL_STEP_PHASES_H
#define ZBPP_PL_STEP_PHASES_H

#include "pipeline/pipeline_types.h"

/* A new step: the rank's phases zeroed. */
void pl_phases_step_begin(pl_rank_t *R);

/* Phase p of rank R begins (begin) or ends; one phase open at a time. The device, if it times
 * phases, records its event for the interval (the step's next segment). */
zb_status_t pl_phase(pl_rank_t *R, zb_step_phase_t p, bool begin, zb_err_t *err);

#endif
