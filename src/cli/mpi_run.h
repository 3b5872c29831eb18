/* zbpp CLI — `zbpp train --transport mpi` (mpi_run.c). */
#ifndef ZBPP_CLI_MPI_RUN_H
#define ZBPP_CLI_MPI_RUN_H

#include "cli/pipeline_flags.h"

/* Open MPI, run one pipeline rank in this process, print on rank 0; returns the exit status
 * (MPI_Abort on a failure that not every rank knows about). */
int zb_cli_pipeline_run_mpi(zb_cli_pipeline_t *pc, const zb_train_config_t *c);

#endif
