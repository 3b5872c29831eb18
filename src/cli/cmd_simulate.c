/* zbpp simulate — read a PyTorch pipelining CSV, check it, simulate it with given costs and show
 * or export the result. */
#include <getopt.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/planner_out.h"

static const char *const CMD = "simulate";

static void help(FILE *out)
{
    fputs("usage: zbpp simulate FILE.csv [--cost F,B,W[,C] | --cost-file FILE] [--mem F,B,W]\n"
          "                     [--mem-limit X] [--recompute none|all] [--mem-recompute X]\n"
          "                     [--recompute-time X] [--offload none|all|auto] [--stash-bytes X]\n"
          "                     [--copy-bw D[,H]] [--copy-latency X] [--format FMT] [--width N]\n"
          "                     [-o FILE]\n\n"
          "Read a schedule written as a PyTorch pipelining CSV (one row per rank, cells like\n"
          "0F0, 2I1, 0W3, 1B2, 1SEND_F2; compute-only or with SEND/RECV), check it and simulate\n"
          "it. P, S, v, M and the stage placement (loop or V) are inferred from the file.\n\n",
          out);
    zb_cli_costs_help(out, true);
    zb_cli_recompute_help(out, true, true);
    zb_cli_offload_help(out, true);
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
        {"cost", required_argument, NULL, ZB_OPT_COST},
        {"cost-file", required_argument, NULL, ZB_OPT_COST_FILE},
        {"mem", required_argument, NULL, ZB_OPT_MEM},
        {"mem-limit", required_argument, NULL, ZB_OPT_MEM_LIMIT},
        {"recompute", required_argument, NULL, ZB_OPT_RECOMPUTE},
        {"mem-recompute", required_argument, NULL, ZB_OPT_MEM_RECOMPUTE},
        {"recompute-time", required_argument, NULL, ZB_OPT_RECOMPUTE_TIME},
        ZB_CLI_OFFLOAD_OPTIONS,
        {"format", required_argument, NULL, ZB_OPT_FORMAT},
        {"width", required_argument, NULL, ZB_OPT_WIDTH},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    int width = 0, c, rc = ZB_EXIT_USAGE;
    zb_cli_format_t fmt = ZB_FMT_ASCII;
    zb_cli_costs_t copt;
    zb_cli_costs_init(&copt);
    zb_err_t err = {0};
    zb_status_t st = ZB_OK;

    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': path = optarg; break;
        case ZB_OPT_FORMAT: st = zb_cli_parse_format(optarg, &fmt, &err); break;
        case ZB_OPT_WIDTH: st = zb_cli_parse_int(optarg, 8, 100000, "--width", &width, &err); break;
        case ZB_OPT_COST:
        case ZB_OPT_COST_FILE:
        case ZB_OPT_MEM:
        case ZB_OPT_RECOMPUTE:
        case ZB_OPT_MEM_RECOMPUTE:
        case ZB_OPT_RECOMPUTE_TIME:
        case ZB_OPT_OFFLOAD:
        case ZB_OPT_STASH_BYTES:
        case ZB_OPT_COPY_BW:
        case ZB_OPT_COPY_LATENCY:
        case ZB_OPT_MEM_LIMIT: st = zb_cli_costs_option(&copt, c, optarg, &err); break;
        case 'h':
            help(stdout);
            rc = ZB_EXIT_OK;
            goto out;
        default: rc = zb_cli_bad_option(CMD, c, argv); goto out;
        }
        if (st != ZB_OK) {
            rc = zb_cli_bad_value(CMD, st, &err);
            goto out;
        }
    }
    const char *file = zb_cli_one_file(CMD, argc, argv, optind);
    if (!file)
        goto out;
    zb_schedule_t *s = NULL;
    zb_costs_t costs;
    if ((rc = zb_cli_load_csv(CMD, file, &copt, &s, &costs)) != ZB_EXIT_OK)
        goto out;
    if ((st = zb_validate(s, &costs, &err)) != ZB_OK) {
        zb_cli_error(CMD, "%s: %s", file, err.msg);
        rc = ZB_EXIT_FAIL;
    } else {
        rc = zb_cli_emit(CMD, s, &costs, fmt, path, width);
    }
    zb_costs_free(&costs);
    zb_schedule_free(s);
out:
    zb_cli_costs_free(&copt);
    return rc;
}
