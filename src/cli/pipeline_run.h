/* zbpp CLI — running `zbpp train` through the pipeline trainer (ranks as threads, or one per MPI
 * process with --transport mpi). */
#ifndef ZBPP_CLI_PIPELINE_RUN_H
#define ZBPP_CLI_PIPELINE_RUN_H

#include "cli/pipeline_flags.h"

/* Run the pipeline trainer and print its report; returns the exit status. */
int zb_cli_pipeline_run(zb_cli_pipeline_t *pc, const zb_train_config_t *c);

#endif
