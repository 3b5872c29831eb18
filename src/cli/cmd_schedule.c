/* zbpp schedule — generate a schedule of a family, validate it, and show or export it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/planner_opts.h"
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
    zb_cli_all_costs_help(out);
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

/* schedule's own options: the family, its shape, auto's and optimal's knobs, the output. */
enum { OPT_ANY_PLACEMENT = 3001, OPT_TIME_LIMIT, OPT_ARROWS };

typedef struct {
    const char *name;
    int ranks, mbs, chunks;
    bool any_placement; /* auto: also try other chunkings */
    bool arrows;        /* svg: message arrows */
    double time_limit;  /* optimal: solver seconds (0 = default) */
    zb_cli_output_t out;
} opts_t;

static zb_status_t own_option(void *own, int c, const char *arg, zb_err_t *err)
{
    opts_t *o = own;
    switch (c) {
    case 's': o->name = arg; return ZB_OK;
    case 'p': return zb_cli_parse_int(arg, 1, 4096, "-p (ranks)", &o->ranks, err);
    case 'm': return zb_cli_parse_int(arg, 1, 1000000, "-m (microbatches)", &o->mbs, err);
    case 'v': return zb_cli_parse_int(arg, 1, 64, "-v (chunks)", &o->chunks, err);
    case OPT_ANY_PLACEMENT: o->any_placement = true; return ZB_OK;
    case OPT_ARROWS: o->arrows = true; return ZB_OK;
    case OPT_TIME_LIMIT: return zb_cli_parse_number(arg, true, "--time-limit", &o->time_limit, err);
    default: return zb_cli_output_option(&o->out, c, arg, err);
    }
}

int zb_cmd_schedule(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"schedule", required_argument, NULL, 's'},
        {"ranks", required_argument, NULL, 'p'},
        {"microbatches", required_argument, NULL, 'm'},
        {"chunks", required_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},
        ZB_CLI_ALL_COST_OPTIONS,
        {"format", required_argument, NULL, ZB_OPT_FORMAT},
        {"width", required_argument, NULL, ZB_OPT_WIDTH},
        {"any-placement", no_argument, NULL, OPT_ANY_PLACEMENT},
        {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
        {"arrows", no_argument, NULL, OPT_ARROWS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opts_t o = {.out = {.fmt = ZB_FMT_ASCII}};
    const zb_cli_command_t cmd = {CMD, ":s:p:m:v:o:h", longopts, help, own_option, &o};
    zb_cli_costs_t copt; /* zb_cli_planner_options sets it up */
    zb_err_t err = {0};
    zb_status_t st;
    int rc = zb_cli_planner_options(&cmd, argc, argv, &copt);
    if (rc != ZB_CLI_OPTIONS_READ)
        goto out;
    rc = ZB_EXIT_USAGE;
    const char *name = o.name;
    const int ranks = o.ranks, mbs = o.mbs;
    int chunks = o.chunks;
    if (!zb_cli_no_operands(CMD, argc, argv, optind))
        goto out;
    if (!name || !ranks || !mbs) {
        zb_cli_error(CMD, "missing %s (see zbpp schedule --help)",
                     !name ? "-s NAME" : !ranks ? "-p RANKS" : "-m MICROBATCHES");
        goto out;
    }
    if (o.arrows && o.out.fmt != ZB_FMT_SVG) {
        zb_cli_error(CMD, "--arrows needs --format svg");
        goto out;
    }
    zb_cli_set_svg_arrows(o.arrows);
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
                         .any_placement = o.any_placement, .time_limit = o.time_limit,
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
        rc = zb_cli_emit(CMD, s, &costs, o.out.fmt, o.out.path, o.out.width);
    }
    zb_schedule_free(s);
    zb_costs_free(&costs);
out:
    zb_cli_costs_free(&copt);
    return rc;
}
