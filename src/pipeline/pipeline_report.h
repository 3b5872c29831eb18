/* zbpp — the run's figures after it (pipeline_report.c) */
#ifndef ZBPP_PL_REPORT_H
#define ZBPP_PL_REPORT_H

#include "pipeline/pipeline_local.h"

/* pipeline_report.c: pl_report_run: after the run, the figures of the local ranks into rep
 * (rollbacks, stash peaks, whole-rank memory, RSS) and, when `stepped`, the measured bubble and
 * --trace files of the last step (replica 0's timelines; over a transport gathered to rank 0 by
 * pl_gather_report, pipeline_dist.h). pl_report_measured: those from replica 0's P timelines and
 * stash peaks. */
zb_status_t pl_report_run(const pl_local_t *L, bool stepped, zb_pipeline_report_t *rep,
                          zb_err_t *err);
zb_status_t pl_report_measured(pl_t *pl, const zb_exec_timeline_t *tls, const double *peaks,
                               zb_pipeline_report_t *rep, zb_err_t *err);

#endif
