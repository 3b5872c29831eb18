/* zbpp CLI — the pipeline flags of `zbpp train` (--ranks, --schedule, ...), parsed here so
 * cmd_train.c only forwards unknown options and calls zb_cli_pipeline_run when --ranks > 1. */
#ifndef ZBPP_CLI_PIPELINE_FLAGS_H
#define ZBPP_CLI_PIPELINE_FLAGS_H

#include <stdio.h>

#include "zbpp/pipeline.h"

typedef struct {
    zb_pipeline_opts_t opts;
    int given; /* any pipeline flag seen */
} zb_cli_pipeline_t;

void zb_cli_pipeline_init(zb_cli_pipeline_t *pc);
/* Try flag `a` with value `v`: 1 = consumed, 0 = not a pipeline flag, -1 = bad value (a line
 * was printed on stderr). */
int zb_cli_pipeline_flag(zb_cli_pipeline_t *pc, const char *a, const char *v);
/* The usage lines of the pipeline flags. */
void zb_cli_pipeline_usage(FILE *out);
/* Run the pipeline trainer and print its report; returns the exit status. */
int zb_cli_pipeline_run(zb_cli_pipeline_t *pc, const zb_train_config_t *c);

#endif
