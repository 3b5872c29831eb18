/* zbpp CLI — printing a pipeline run's report: the one printer used by the thread and MPI runs,
 * and its pieces (zbpp profile prints the memory table too). */
#ifndef ZBPP_CLI_PIPELINE_PRINT_H
#define ZBPP_CLI_PIPELINE_PRINT_H

#include <stdbool.h>

#include "cli/pipeline_flags.h"
#include "zbpp/pipeline.h"

/* The one printer of a pipeline run's report (threads and MPI): `world` ranks; figures (NULL
 * with threads) = each rank's own, gathered (zb_pipeline_gather_rank_figures). */
void zb_cli_print_pipeline_report(const zb_cli_pipeline_t *pc, const zb_train_config_t *c,
                                  const zb_train_summary_t *sum, const zb_pipeline_report_t *rep,
                                  const zb_pipeline_rank_figures_t *figures, int world);
/* The whole-rank memory table of a pipeline run: predicted and measured per rank, the limit,
 * peak RSS. */
void zb_cli_print_rank_memory(const zb_pipeline_report_t *rep, int ranks, double limit,
                              const double *limits);
/* The bubble line (measured and predicted) and, when the costs were profiled (seconds), the
 * last step's measured pipeline span against the simulator's. `replicas`: --dp > 1. */
void zb_cli_print_bubble(const zb_pipeline_report_t *rep, bool replicas, bool profiled);
/* The "trace: measured ..., predicted ..." and "svg: ..." lines naming the four files --trace
 * wrote (zb_pipeline_trace_path). */
void zb_cli_print_trace_paths(const char *trace_path);
/* The error line of replicas whose state differs after the run (on stderr; never expected). */
void zb_cli_print_replicas_differ(const zb_pipeline_report_t *rep);

#endif
