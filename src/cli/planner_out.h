/* zbpp CLI — what `schedule` and `simulate` share: simulate a schedule and write it in the
 * chosen format, atomically when -o names a file. */
#ifndef ZBPP_CLI_PLANNER_OUT_H
#define ZBPP_CLI_PLANNER_OUT_H

#include "cli/args.h"
#include "zbpp/schedule.h"

/* Simulate `s` with `costs` and write it as `fmt` to `path` (NULL = stdout). The ascii format
 * adds a summary line (makespan, bubble rate, peak memory). Errors are printed as
 * "zbpp <cmd>: ..."; returns the exit status. A failed run leaves no file at `path` (an existing
 * one is untouched). */
int zb_cli_emit(const char *cmd, const zb_schedule_t *s, const zb_costs_t *costs,
                zb_cli_format_t fmt, const char *path, int width);

/* `--arrows`: the svg format draws message arrows between ranks (off by default). */
void zb_cli_set_svg_arrows(bool on);

/* One line: "makespan X, span T, bubble rate Y%, peak memory Z (rank r)" (T = the longest
 * per-rank span, from its first F to its last action: the bubble rate's denominator). */
void zb_cli_summary_line(FILE *out, const zb_sim_t *sim);

/* Read and parse a PyTorch pipelining CSV file into *out and build the cost model of its stages
 * from the cost/memory options. On failure prints the error, leaves nothing allocated and returns
 * the exit status (ZB_EXIT_FAIL for the file, ZB_EXIT_USAGE for the costs); ZB_EXIT_OK on
 * success, when the caller frees *out and *costs. */
/* (--recompute all adds an R before every backward of the file's schedule; auto is refused.
 * --offload all or auto applies zb_plan_offload to it, see zb_cli_apply_offload.) */
int zb_cli_load_csv(const char *cmd, const char *path, const zb_cli_costs_t *copt,
                    zb_schedule_t **out, zb_costs_t *costs);

/* Apply copt->offload (none: nothing) to *s with `costs` (zb_plan_offload), replacing *s and
 * printing auto's choice as a note on stderr. --offload with --recompute other than none is a
 * usage error (auto already weighs recompute). Prints errors; returns the exit status. */
int zb_cli_apply_offload(const char *cmd, const zb_cli_costs_t *copt, zb_schedule_t **s,
                         const zb_costs_t *costs);

#endif
