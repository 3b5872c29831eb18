/* zbpp CLI — the pipeline flags of `zbpp train` (--ranks, --schedule, ...), parsed here so
 * cmd_train.c only forwards unknown options and calls zb_cli_pipeline_run when --ranks > 1. */
#ifndef ZBPP_CLI_PIPELINE_FLAGS_H
#define ZBPP_CLI_PIPELINE_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

#include "zbpp/pipeline.h"

typedef struct {
    zb_pipeline_opts_t opts;
    int given; /* any pipeline flag seen */
    int mpi;   /* --transport mpi: one rank per MPI process (cli/mpi_run.c) */
    int ranks_given, timeout_given, dp_given, schedule_given;
    /* a flag that only the pipeline trainer acts on (--schedule, --chunks, --trace,
     * --mem-limit*): it runs the pipeline trainer even with one rank */
    const char *routes;
    /* a pipeline flag without effect for one rank in one process (--optimizer-sync,
     * --partition, --comm-timeout): a warning when the single-process trainer runs */
    const char *inert;
} zb_cli_pipeline_t;

void zb_cli_pipeline_init(zb_cli_pipeline_t *pc);
/* The names (without "--") of the flags zb_cli_pipeline_flag takes, all with a value;
 * NULL-terminated (zbpp train builds its getopt_long table from it). */
extern const char *const zb_cli_pipeline_flag_names[];
/* Try flag `a` with value `v`: 1 = consumed, 0 = not a pipeline flag, -1 = bad value (a line
 * was printed on stderr). */
int zb_cli_pipeline_flag(zb_cli_pipeline_t *pc, const char *a, const char *v);
/* The usage lines of the pipeline flags. */
void zb_cli_pipeline_usage(FILE *out);
/* Run the pipeline trainer and print its report; returns the exit status. */
int zb_cli_pipeline_run(zb_cli_pipeline_t *pc, const zb_train_config_t *c);
/* True when the run must go through the pipeline trainer even with one rank (MPI, sharded
 * checkpoints in or out). */
int zb_cli_pipeline_wanted(const zb_cli_pipeline_t *pc, const zb_train_config_t *c);
/* The "trace: measured ..., predicted ..." and "svg: ..." lines naming the four files --trace
 * wrote (zb_pipeline_trace_path). Shared by the thread and MPI runs. */
void zb_cli_print_trace_paths(const char *trace_path);
/* --transport mpi: open MPI, run, print on rank 0, exit status (MPI_Abort on a failure that
 * not every rank knows about). In cli/mpi_run.c. */
int zb_cli_pipeline_run_mpi(zb_cli_pipeline_t *pc, const zb_train_config_t *c);

/* The whole-rank memory table of a pipeline run: predicted and measured per rank, the limit,
 * peak RSS. */
void zb_cli_print_rank_memory(const zb_pipeline_report_t *rep, int ranks, double limit);
/* The bubble line (measured and predicted) and, when the costs were profiled (seconds), the
 * last step's measured pipeline span against the simulator's. `replicas`: --dp > 1. */
void zb_cli_print_bubble(const zb_pipeline_report_t *rep, bool replicas, bool profiled);

/* The one printer of a pipeline run's report (threads and MPI): `world` ranks; figures (NULL
 * with threads) = each rank's own, gathered (zb_pipeline_gather_rank_figures). */
void zb_cli_print_pipeline_report(const zb_cli_pipeline_t *pc, const zb_train_config_t *c,
                                  const zb_train_summary_t *sum, const zb_pipeline_report_t *rep,
                                  const zb_pipeline_rank_figures_t *figures, int world);

/* --schedule-file: read the file and take its ranks (and microbatches, unless
 * microbatches_given) into the run; a --ranks that disagrees, or --schedule with it, is an
 * error. Returns 0, or the exit status after printing one line. */
int zb_cli_pipeline_schedule_file(zb_cli_pipeline_t *pc, zb_train_config_t *c,
                                  bool microbatches_given);

#endif
