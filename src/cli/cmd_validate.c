/* zbpp validate — check a PyTorch pipelining CSV schedule: every action present once, on the
 * right rank, dependencies satisfiable, memory within the limit, no deadlock once lowered. */
#include <math.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/planner_opts.h"
#include "cli/planner_out.h"

static const char *const CMD = "validate";

static void help(FILE *out)
{
    fputs("usage: zbpp validate FILE.csv [--mem F,B,W] [--mem-limit X] [--recompute none|all]\n"
          "                     [--mem-limit-ranks A,B,...] [--mem-recompute X]\n"
          "                     [--offload none|all|auto] [--stash-bytes X] [--copy-bw D[,H]]\n"
          "                     [--copy-latency X]\n\n"
          "Check a schedule written as a PyTorch pipelining CSV: each (stage, microbatch) has one\n"
          "F and one backward (B and W, or a fused BW), every action sits on the rank holding its\n"
          "stage, W follows its B, the dependencies can be met, the per-rank memory stays within\n"
          "--mem-limit, and the program with SEND/RECV inserted cannot deadlock.\n"
          "Prints 'valid: ...' and exits 0, or prints the problem and exits 1.\n\n",
          out);
    zb_cli_costs_help(out, false);
    zb_cli_recompute_help(out, true, false);
    zb_cli_offload_help(out, true);
    fputs("  -h, --help          this help\n", out);
}

/* The valid schedule's summary line: simulated for its peak memory. */
static int report_valid(const zb_cli_csv_input_t *in)
{
    const zb_schedule_t *s = in->s;
    zb_err_t err = {0};
    zb_sim_t sim;
    if (zb_simulate(s, &in->costs, &sim, &err) != ZB_OK) {
        zb_cli_error(CMD, "%s: %s", in->file, err.msg);
        return ZB_EXIT_FAIL;
    }
    double peak = 0;
    long n = 0;
    for (int r = 0; r < s->ranks; r++) {
        peak = r == 0 || sim.peak_mem[r] > peak ? sim.peak_mem[r] : peak;
        n += s->rank[r].len;
    }
    printf("valid: %s: P=%d v=%d S=%d M=%d, %s placement, %ld actions, %s backward, %s, "
           "peak memory %.6g",
           in->file, s->ranks, s->chunks, s->stages, s->microbatches,
           zb_placement_name(s->placement), n, zb_schedule_is_split(s) ? "split" : "fused",
           zb_schedule_has_comms(s) ? "with comms" : "compute only", peak);
    if (in->costs.rank_limit)
        printf(" (limits per rank)");
    else if (isfinite(in->costs.mem_limit))
        printf(" (limit %.6g)", in->costs.mem_limit);
    printf("\n");
    zb_sim_free(&sim);
    return ZB_EXIT_OK;
}

int zb_cmd_validate(int argc, char **argv)
{
    static const struct option longopts[] = {
        ZB_CLI_MEM_OPTIONS,
        {"mem-limit-ranks", required_argument, NULL, ZB_OPT_MEM_LIMIT_RANKS},
        ZB_CLI_RECOMPUTE_OPTIONS,
        ZB_CLI_OFFLOAD_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const zb_cli_command_t cmd = {CMD, ":h", longopts, help, NULL, NULL};
    zb_cli_csv_input_t in;
    int rc = zb_cli_read_csv_command(&cmd, argc, argv, &in);
    if (rc == ZB_CLI_OPTIONS_READ)
        rc = report_valid(&in);
    zb_cli_csv_input_free(&in);
    return rc;
}
