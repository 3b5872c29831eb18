/* zbpp — the --trace files of a run (pipeline_trace.c) */
#ifndef ZBPP_PL_TRACE_H
#define ZBPP_PL_TRACE_H

#include "pipeline/pipeline_types.h"

/* pipeline_trace.c: the --trace files (measured, and predicted with the plan's costs). */
zb_status_t pl_write_traces(pl_t *pl, const zb_sim_t *measured, zb_err_t *err);

#endif
