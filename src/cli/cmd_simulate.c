/* zbpp simulate — read a PyTorch pipelining CSV, check it, simulate it with given costs and show
 * or export the result. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/planner_opts.h"
#include "cli/planner_out.h"

static const char *const CMD = "simulate";

static void help(FILE *out)
{
    fputs("usage: zbpp simulate FILE.csv [--cost F,B,W[,C] | --cost-file FILE] [--mem F,B,W]\n"
          "                     [--mem-limit X | --mem-limit-ranks A,B,...] [--recompute none|all]\n"
          "                     [--mem-recompute X]\n"
          "                     [--recompute-time X] [--offload none|all|auto] [--stash-bytes X]\n"
          "                     [--copy-bw D[,H]] [--copy-latency X] [--format FMT] [--width N]\n"
          "                     [-o FILE]\n\n"
          "Read a schedule written as a PyTorch pipelining CSV (one row per rank, cells like\n"
          "0F0, 2I1, 0W3, 1B2, 1SEND_F2; compute-only or with SEND/RECV), check it and simulate\n"
          "it. P, S, v, M and the stage placement (loop or V) are inferred from the file.\n\n",
          out);
    zb_cli_all_costs_help(out);
    fprintf(out,
            "  --format FMT        output: %s (default ascii)\n"
            "  --width N           widest ascii grid in characters (default 200)\n"
            "  -o, --output FILE   write there (atomically) instead of standard output\n"
            "  -h, --help          this help\n",
            zb_cli_format_names());
}

int zb_cmd_simulate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        ZB_CLI_COST_OPTIONS,
        ZB_CLI_MEM_OPTIONS,
        {"mem-limit-ranks", required_argument, NULL, ZB_OPT_MEM_LIMIT_RANKS},
        ZB_CLI_RECOMPUTE_OPTIONS,
        ZB_CLI_OFFLOAD_OPTIONS,
        {"format", required_argument, NULL, ZB_OPT_FORMAT},
        {"width", required_argument, NULL, ZB_OPT_WIDTH},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    zb_cli_output_t o = {.fmt = ZB_FMT_ASCII};
    const zb_cli_command_t cmd = {CMD, ":o:h", longopts, help, zb_cli_output_option, &o};
    zb_cli_csv_input_t in;
    int rc = zb_cli_read_csv_command(&cmd, argc, argv, &in);
    if (rc == ZB_CLI_OPTIONS_READ)
        rc = zb_cli_emit(CMD, in.s, &in.costs, o.fmt, o.path, o.width);
    zb_cli_csv_input_free(&in);
    return rc;
}
