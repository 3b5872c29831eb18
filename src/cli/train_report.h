/* zbpp CLI — lines of the `zbpp train` report shared by the single-process, thread-pipeline and
 * MPI runs (cmd_train.c, pipeline_flags.c, mpi_run.c). */
#ifndef ZBPP_CLI_TRAIN_REPORT_H
#define ZBPP_CLI_TRAIN_REPORT_H

#include <stdbool.h>

#include "zbpp/train.h"

/* Where the MFU's peak comes from, named in the report ("--peak-tflops" unless set). */
void zb_cli_set_peak_source(const char *source);

/* "model FLOP/s ... mfu X% of --peak-tflops" (or "mfu n/a"), "val loss ...", "interrupted ..."
 * after a run that did steps; nothing else. */
void zb_cli_print_run_extras(const zb_train_config_t *c, const zb_train_summary_t *sum);

/* The run header's kernel line on stderr, "zbpp train: CPU kernels: OpenBLAS X (why)", and the
 * CPU's features, with `verbose`; a warning (kernels below the CPU's best that zbpp could not
 * fix) always, even when `quiet`. */
void zb_cli_print_kernel_header(bool verbose);

#endif
