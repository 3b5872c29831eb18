/* zbpp validate — check a PyTorch pipelining CSV schedule: every action present once, on the
 * right rank, dependencies satisfiable, memory within the limit, no deadlock once lowered. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"
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

int zb_cmd_validate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"mem", required_argument, NULL, ZB_OPT_MEM},
        {"mem-limit", required_argument, NULL, ZB_OPT_MEM_LIMIT},
        {"mem-limit-ranks", required_argument, NULL, ZB_OPT_MEM_LIMIT_RANKS},
        {"recompute", required_argument, NULL, ZB_OPT_RECOMPUTE},
        {"mem-recompute", required_argument, NULL, ZB_OPT_MEM_RECOMPUTE},
        {"recompute-time", required_argument, NULL, ZB_OPT_RECOMPUTE_TIME},
        ZB_CLI_OFFLOAD_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, rc = ZB_EXIT_USAGE;
    zb_cli_costs_t copt;
    zb_cli_costs_init(&copt);
    zb_err_t err = {0};
    zb_status_t st = ZB_OK;

    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case ZB_OPT_MEM:
        case ZB_OPT_RECOMPUTE:
        case ZB_OPT_MEM_RECOMPUTE:
        case ZB_OPT_RECOMPUTE_TIME:
        case ZB_OPT_OFFLOAD:
        case ZB_OPT_STASH_BYTES:
        case ZB_OPT_COPY_BW:
        case ZB_OPT_COPY_LATENCY:
        case ZB_OPT_MEM_LIMIT:
        case ZB_OPT_MEM_LIMIT_RANKS: st = zb_cli_costs_option(&copt, c, optarg, &err); break;
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
    zb_sim_t sim;
    if ((st = zb_validate(s, &costs, &err)) != ZB_OK ||
        (st = zb_simulate(s, &costs, &sim, &err)) != ZB_OK) {
        zb_cli_error(CMD, "%s: %s", file, err.msg);
        rc = ZB_EXIT_FAIL;
    } else {
        double peak = 0;
        long n = 0;
        for (int r = 0; r < s->ranks; r++) {
            peak = r == 0 || sim.peak_mem[r] > peak ? sim.peak_mem[r] : peak;
            n += s->rank[r].len;
        }
        printf("valid: %s: P=%d v=%d S=%d M=%d, %s placement, %ld actions, %s backward, %s, "
               "peak memory %.6g",
               file, s->ranks, s->chunks, s->stages, s->microbatches,
               zb_placement_name(s->placement), n, zb_schedule_is_split(s) ? "split" : "fused",
               zb_schedule_has_comms(s) ? "with comms" : "compute only", peak);
        if (costs.rank_limit)
            printf(" (limits per rank)");
        else if (isfinite(costs.mem_limit))
            printf(" (limit %.6g)", costs.mem_limit);
        printf("\n");
        zb_sim_free(&sim);
        rc = ZB_EXIT_OK;
    }
    zb_costs_free(&costs);
    zb_schedule_free(s);
out:
    zb_cli_costs_free(&copt);
    return rc;
}
