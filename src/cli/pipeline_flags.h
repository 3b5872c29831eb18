/* zbpp CLI — the pipeline flags of `zbpp train` (--ranks, --schedule, ...), parsed here so
 * cmd_train.c only puts them in its getopt_long table, forwards them and calls
 * zb_cli_pipeline_run (pipeline_run.h) when the run goes through the pipeline trainer. */
#ifndef ZBPP_CLI_PIPELINE_FLAGS_H
#define ZBPP_CLI_PIPELINE_FLAGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "zbpp/error.h"
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
    bool file_offloads; /* --schedule-file has O/L actions (GPU ranks only: zb_cli_pipeline_offload) */
    double mem_limits[1024]; /* --mem-limit A,B,...: one per rank (opts.mem_limit_ranks) */
} zb_cli_pipeline_t;

/* The pipeline flags, all with a value: X(ID, "name"). A flag is added here and in
 * zb_cli_pipeline_option (and the usage). */
#define ZB_CLI_PIPELINE_FLAGS(X)                                                                 \
    X(RANKS, "ranks") X(DP, "dp") X(SCHEDULE, "schedule") X(SCHEDULE_FILE, "schedule-file")       \
    X(CHUNKS, "chunks") X(OPTIMIZER_SYNC, "optimizer-sync") X(MEM_LIMIT, "mem-limit")             \
    X(MEM_LIMIT_MB, "mem-limit-mb") X(TRACE, "trace") X(TRACE_SVG, "trace-svg")                   \
    X(PARTITION, "partition") X(TRANSPORT, "transport") X(COMM_TIMEOUT, "comm-timeout")           \
    X(RECOMPUTE, "recompute") X(KEEP_ACTIVATIONS, "keep-activations")                             \
    X(CHECKPOINT_FORMAT, "checkpoint-format") X(OFFLOAD, "offload")

/* getopt_long codes of the pipeline flags (above the shared ones of args.h) */
#define ZB_CLI_PIPELINE_ID(id, name) ZB_OPT_PIPE_##id,
enum { ZB_OPT_PIPE_FIRST = 1200, ZB_CLI_PIPELINE_FLAGS(ZB_CLI_PIPELINE_ID) ZB_OPT_PIPE_END };
/* Their entries for a command's getopt_long table: `ZB_CLI_PIPELINE_FLAGS(ZB_CLI_PIPELINE_OPTION)` */
#define ZB_CLI_PIPELINE_OPTION(id, name) {name, required_argument, NULL, ZB_OPT_PIPE_##id},

void zb_cli_pipeline_init(zb_cli_pipeline_t *pc);
/* Take pipeline flag `id` (ZB_OPT_PIPE_*) with value v: ZB_OK, or ZB_EINVAL with one line in
 * err ("--ranks expects a positive integer, got '0'"). */
zb_status_t zb_cli_pipeline_option(zb_cli_pipeline_t *pc, int id, const char *v, zb_err_t *err);
/* The usage lines of the pipeline flags. */
void zb_cli_pipeline_usage(FILE *out);
/* True when the run must go through the pipeline trainer even with one rank (MPI, sharded
 * checkpoints in or out). */
int zb_cli_pipeline_wanted(const zb_cli_pipeline_t *pc, const zb_train_config_t *c);
/* 2 after one line on stderr when the run offloads (--offload, or a schedule file with O/L)
 * but its ranks are on the CPU (cuda false); else 0. */
int zb_cli_pipeline_offload(const zb_cli_pipeline_t *pc, bool cuda);
/* --schedule-file: read the file and take its ranks (and microbatches, unless
 * microbatches_given) into the run; a --ranks that disagrees, or --schedule with it, is an
 * error. Returns 0, or the exit status after printing one line. */
int zb_cli_pipeline_schedule_file(zb_cli_pipeline_t *pc, zb_train_config_t *c,
                                  bool microbatches_given);

#endif
