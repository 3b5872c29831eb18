/* zbpp — the --trace files of a run (pipeline_trace.c) */
#ifndef ZBPP_PL_TRACE_H
#define ZBPP_PL_TRACE_H

#include "pipeline/pipeline_types.h"

/* pipeline_trace.c: the --trace files (measured, and `pred`: the plan's schedule simulated
 * under its costs); the measured trace also shows the ranks' step phases `phases` ([P], NULL =
 * none), whose times are on the clock of the raw timelines, `shift` seconds before the
 * measured sim's. */
zb_status_t pl_write_traces(pl_t *pl, const zb_sim_t *measured, const zb_sim_t *pred,
                            const zb_step_phases_t *phases, double shift, zb_err_t *err);

#endif
