/* zbpp schedule — generate a schedule of a family, validate it, and show or export it. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/planner_out.h"
#include "zbpp/plan.h"

static const char *const CMD = "schedule";

static void help(FILE *out)
{
    fputs("usage: zbpp schedule -s NAME -p RANKS -m MICROBATCHES [-v CHUNKS]\n"
          "                     [--cost F,B,W[,C] | --cost-file FILE] [--mem F,B,W]\n"
          "                     [--mem-limit X | --mem-limit-ranks A,B,...]\n"
          "                     [--recompute none|all|auto]\n"
          "                     [--mem-recompute X] [--recompute-time X]\n"
          "                     [--offload none|all|auto] [--stash-bytes X] [--copy-bw D[,H]]\n"
          "                     [--copy-latency X] [--format FMT] [--width N] [-o FILE]\n\n"
          "Generate a pipeline schedule, check it (completeness, dependencies, memory limit,\n"
          "deadlock), simulate it and print it.\n\n"
          "  -s, --schedule NAME  schedule family (see below)\n"
          "  -p, --ranks P        pipeline ranks (1..4096)\n"
          "  -m, --microbatches M microbatches per step (1..1000000)\n"
          "  -v, --chunks V       model chunks per rank, S = V*P stages (default: the family's)\n",
          out);
    zb_cli_costs_help(out, true);
    zb_cli_recompute_help(out, true, true);
    zb_cli_offload_help(out, true);
    fprintf(out,
            "  --format FMT        output: %s (default ascii)\n"
            "                      ascii: grid + summary; csv: PyTorch pipelining CSV (compute\n"
            "                      only); csv-comms: with SEND/RECV; json: summary; trace:\n"
            "                      Chrome/Perfetto trace (1 time unit = 1 ms); svg: Gantt chart\n"
            "  --width N           widest ascii grid in characters (default 200)\n"
            "  --arrows            svg: draw the messages between ranks as arrows\n"
            "  -o, --output FILE   write there (atomically) instead of standard output\n"
            "  --any-placement     auto: also try 2 chunks per rank (loop and V) from the\n"
            "                      one-stage-per-rank costs; says which won on stderr\n"
            "  --time-limit S      optimal: solver seconds (default 10)\n"
            "  -h, --help          this help\n\nschedule families:\n",
            zb_cli_format_names());
    size_t n;
    const zb_generator_info_t *g = zb_generators(&n);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  %-18s %s\n", g[i].name, g[i].summary);
}

/* The family's default chunking: generate once without a cost model (cheap for the handcrafted
 * families) and read it off. Families that need costs fail here; then v = 1 is assumed and the
 * family's own message asks for -v if that is wrong. */
static int default_chunks(const char *name, int ranks, int mbs)
{
    zb_gen_params_t p = {.ranks = ranks, .microbatches = mbs, .time_limit = 1e-3};
    zb_schedule_t *s = NULL;
    int v = 1;
    if (zb_generate(name, &p, &s, NULL) == ZB_OK)
        v = s->chunks;
    zb_schedule_free(s);
    return v;
}

int zb_cmd_schedule(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"schedule", required_argument, NULL, 's'},
        {"ranks", required_argument, NULL, 'p'},
        {"microbatches", required_argument, NULL, 'm'},
        {"chunks", required_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},
        {"cost", required_argument, NULL, ZB_OPT_COST},
        {"cost-file", required_argument, NULL, ZB_OPT_COST_FILE},
        {"mem", required_argument, NULL, ZB_OPT_MEM},
        {"mem-limit", required_argument, NULL, ZB_OPT_MEM_LIMIT},
        {"mem-limit-ranks", required_argument, NULL, ZB_OPT_MEM_LIMIT_RANKS},
        {"recompute", required_argument, NULL, ZB_OPT_RECOMPUTE},
        {"mem-recompute", required_argument, NULL, ZB_OPT_MEM_RECOMPUTE},
        {"recompute-time", required_argument, NULL, ZB_OPT_RECOMPUTE_TIME},
        ZB_CLI_OFFLOAD_OPTIONS,
        {"format", required_argument, NULL, ZB_OPT_FORMAT},
        {"width", required_argument, NULL, ZB_OPT_WIDTH},
        {"any-placement", no_argument, NULL, 3001},
        {"time-limit", required_argument, NULL, 3002},
        {"arrows", no_argument, NULL, 3003},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *name = NULL, *path = NULL;
    int ranks = 0, mbs = 0, chunks = 0, width = 0;
    bool any_placement = false; /* auto: also try other chunkings */
    bool arrows = false;        /* svg: message arrows */
    double time_limit = 0;      /* optimal: solver seconds (0 = default) */
    zb_cli_format_t fmt = ZB_FMT_ASCII;
    zb_cli_costs_t copt;
    zb_cli_costs_init(&copt);
    zb_err_t err = {0};
    int rc = ZB_EXIT_USAGE, c;
    zb_status_t st = ZB_OK;

    optind = 0; /* glibc: full re-initialisation */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:p:m:v:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's': name = optarg; break;
        case 'p': st = zb_cli_parse_int(optarg, 1, 4096, "-p (ranks)", &ranks, &err); break;
        case 'm':
            st = zb_cli_parse_int(optarg, 1, 1000000, "-m (microbatches)", &mbs, &err);
            break;
        case 'v': st = zb_cli_parse_int(optarg, 1, 64, "-v (chunks)", &chunks, &err); break;
        case 'o': path = optarg; break;
        case ZB_OPT_FORMAT: st = zb_cli_parse_format(optarg, &fmt, &err); break;
        case ZB_OPT_WIDTH: st = zb_cli_parse_int(optarg, 8, 100000, "--width", &width, &err); break;
        case 3001: any_placement = true; break;
        case 3003: arrows = true; break;
        case 3002: st = zb_cli_parse_number(optarg, true, "--time-limit", &time_limit, &err); break;
        case ZB_OPT_COST:
        case ZB_OPT_COST_FILE:
        case ZB_OPT_MEM:
        case ZB_OPT_RECOMPUTE:
        case ZB_OPT_MEM_RECOMPUTE:
        case ZB_OPT_RECOMPUTE_TIME:
        case ZB_OPT_MEM_LIMIT:
        case ZB_OPT_MEM_LIMIT_RANKS:
        case ZB_OPT_OFFLOAD:
        case ZB_OPT_STASH_BYTES:
        case ZB_OPT_COPY_BW:
        case ZB_OPT_COPY_LATENCY: st = zb_cli_costs_option(&copt, c, optarg, &err); break;
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
    if (!zb_cli_no_operands(CMD, argc, argv, optind))
        goto out;
    if (!name || !ranks || !mbs) {
        zb_cli_error(CMD, "missing %s (see zbpp schedule --help)",
                     !name ? "-s NAME" : !ranks ? "-p RANKS" : "-m MICROBATCHES");
        goto out;
    }
    if (arrows && fmt != ZB_FMT_SVG) {
        zb_cli_error(CMD, "--arrows needs --format svg");
        goto out;
    }
    zb_cli_set_svg_arrows(arrows);
    if (copt.offload != ZB_OFFLOAD_NONE && copt.recompute != ZB_RECOMPUTE_NONE) {
        zb_cli_error(CMD, "--offload %s and --recompute %s cannot be combined: a stash is kept, "
                          "offloaded or recomputed (--offload auto weighs recompute too)",
                     zb_offload_name(copt.offload), zb_recompute_name(copt.recompute));
        goto out;
    }
    if (!zb_generator_find(name)) {
        zb_gen_params_t p = {.ranks = ranks, .microbatches = mbs};
        zb_schedule_t *none = NULL;
        zb_generate(name, &p, &none, &err); /* its message lists the known families */
        zb_schedule_free(none);
        const char *near = zb_cli_suggest_schedule(name);
        const char *known = strstr(err.msg, "(known:");
        if (near)
            zb_cli_error(CMD, "unknown schedule family '%s': did you mean %s? %s", name, near,
                         known ? known : "");
        else
            zb_cli_error(CMD, "%s", err.msg);
        goto out;
    }

    /* Chunks: -v, else the cost file's stage count, else the family's default. */
    if (!chunks && copt.file_stages) {
        if (copt.file_stages % ranks) {
            zb_cli_error(CMD, "--cost-file has %d stages, not a multiple of P = %d",
                         copt.file_stages, ranks);
            goto out;
        }
        chunks = copt.file_stages / ranks;
    }
    if (!chunks)
        chunks = default_chunks(name, ranks, mbs);

    zb_costs_t costs;
    if ((st = zb_cli_costs_build(&copt, chunks * ranks, chunks, &costs, &err)) != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    zb_gen_params_t p = {.ranks = ranks, .microbatches = mbs, .chunks = chunks, .costs = &costs,
                         .any_placement = any_placement, .time_limit = time_limit,
                         .recompute = copt.recompute};
    zb_schedule_t *s = NULL;
    st = copt.offload != ZB_OFFLOAD_NONE ? zb_generate_offload(name, &p, copt.offload, &s, &err)
                                         : zb_generate(name, &p, &s, &err);
    if (st == ZB_OK && p.note[0])
        fprintf(stderr, "zbpp %s: %s\n", CMD, p.note);
    if (st == ZB_OK && (s->chunks != chunks || s->placement != ZB_PLACE_LOOP) && chunks == 1) {
        /* auto --any-placement chose another chunking: split the per-rank costs to match */
        zb_costs_t split;
        if ((st = zb_costs_rechunk(&costs, ranks, s->chunks, s->placement, &split, &err)) == ZB_OK) {
            zb_costs_free(&costs);
            costs = split;
        }
    }
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        rc = zb_cli_exit_code(st);
    } else if ((st = zb_validate(s, &costs, &err)) != ZB_OK) {
        /* A generated schedule that fails: most often the memory limit. */
        zb_cli_error(CMD, "%s", err.msg);
        rc = ZB_EXIT_FAIL;
    } else {
        rc = zb_cli_emit(CMD, s, &costs, fmt, path, width);
    }
    zb_schedule_free(s);
    zb_costs_free(&costs);
out:
    zb_cli_costs_free(&copt);
    return rc;
}
