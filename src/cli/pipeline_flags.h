/* zbpp CLI — the pipeline flags of `zbpp train` (--ranks, --schedule, ...), parsed here so
 * cmd_train.c only forwards unknown options and calls zb_cli_pipeline_run (pipeline_run.h) when
 * the run goes through the pipeline trainer. */
#ifndef ZBPP_CLI_PIPELINE_FLAGS_H
#define ZBPP_CLI_PIPELINE_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

#include "zbpp/pipeline.h"

typedef struct {
    zb_pipeline_opts_t opts;
    int given; /* any pipeline flag seen */
    int mpi;   /* --transport mpi: one rank per MPI process (cli/mpi_run.h) */
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
/* True when the run must go through the pipeline trainer even with one rank (MPI, sharded
 * checkpoints in or out). */
int zb_cli_pipeline_wanted(const zb_cli_pipeline_t *pc, const zb_train_config_t *c);
/* --schedule-file: read the file and take its ranks (and microbatches, unless
 * microbatches_given) into the run; a --ranks that disagrees, or --schedule with it, is an
 * error. Returns 0, or the exit status after printing one line. */
int zb_cli_pipeline_schedule_file(zb_cli_pipeline_t *pc, zb_train_config_t *c,
                                  bool microbatches_given);

#endif
