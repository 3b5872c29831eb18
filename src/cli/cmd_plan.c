/* zbpp plan — compare every schedule family under one cost model and memory limit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/planner_opts.h"
#include "zbpp/plan.h"

#define CMD "plan"

enum { OPT_TIME_LIMIT = 2000 };

static void help(FILE *out)
{
    fputs("usage: zbpp plan -p RANKS -m MICROBATCHES [--cost F,B,W[,C]] [--mem F,B,W]\n"
          "                 [--mem-limit X | --mem-limit-ranks A,B,...] [--recompute none|all|auto]\n"
          "                 [--mem-recompute X] [--recompute-time X]\n"
          "                 [--offload none|all|auto] [--stash-bytes X] [--copy-bw D[,H]]\n"
          "                 [--copy-latency X] [--time-limit S] [--format table|json]\n\n"
          "Generate every schedule family for the same model and rank them: makespan, bubble\n"
          "rate, peak memory per rank and cross-rank messages. Costs and memory are those of one\n"
          "rank's share of the model (as in zbpp schedule); families with v chunks per rank\n"
          "give each chunk 1/v.\n"
          "Families that fit the limit come first, best first; the others follow with a reason.\n\n"
          "  -p, --ranks P          pipeline ranks\n"
          "  -m, --microbatches M   microbatches per step\n",
          out);
    zb_cli_costs_help(out, true);
    zb_cli_recompute_help(out, true, true);
    fputs("                      plan: all and auto add a row per family with every F\n"
          "                      recomputed (family+R) and auto's recompute search (auto+R)\n",
          out);
    zb_cli_offload_help(out, true);
    fputs("                      plan: all and auto add a row per family (family+O), generated\n"
          "                      without the limit, then offloaded (auto: and recomputed) to\n"
          "                      fit it; --offload and --recompute combine here (separate rows)\n",
          out);
    fputs("  --time-limit S       bound the whole comparison to about S seconds: a family is\n"
          "                       started only while time is left (listed as skipped after);\n"
          "                       the exact solver (optimal, P*M <= 64) gets at most 10 s and\n"
          "                       at most what is left (default: no bound)\n"
          "  --format table|json  output (default table)\n"
          "Messages: SEND actions per step after lowering; volume counts one activation-sized\n"
          "tensor (microbatch x sequence x hidden) per message.\n",
          out);
}

static void print_peaks(FILE *f, const zb_plan_row_t *row, int P, bool json)
{
    for (int r = 0; r < P; r++)
        fprintf(f, json ? "%s%.6g" : "%s%.4g", r ? (json ? ", " : " ") : "", row->peak[r]);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void print_table(const zb_plan_t *pl)
{
    printf("P=%d M=%d, ", pl->ranks, pl->microbatches);
    if (pl->mem_limit_ranks) {
        printf("memory limits per rank");
        for (int r = 0; r < pl->ranks; r++)
            printf(isfinite(pl->mem_limit_ranks[r]) ? " %.6g" : " none", pl->mem_limit_ranks[r]);
        printf("\n");
    } else {
        printf("memory limit %s%.6g\n", isfinite(pl->mem_limit) ? "" : "none ",
               isfinite(pl->mem_limit) ? pl->mem_limit : 0.0);
    }
    printf("%-4s %-17s %-9s %12s %8s %10s %9s  %s\n", "rank", "family", "chunking", "makespan",
           "bubble", "peak(max)", "messages", "peak per rank");
    int n = 0;
    for (int i = 0; i < pl->count; i++) {
        const zb_plan_row_t *row = &pl->rows[i];
        if (!row->fits)
            continue;
        char chunking[24];
        snprintf(chunking, sizeof chunking, "v=%d %s", row->chunks,
                 zb_placement_name(row->placement));
        printf("%-4d %-17s %-9s %12.6g %7.2f%% %10.4g %9ld  ", ++n, row->family, chunking,
               row->makespan, 100 * row->bubble_rate, row->peak_max, row->messages);
        print_peaks(stdout, row, pl->ranks, false);
        printf("\n");
        if (row->note[0])
            printf("     (%s)\n", row->note);
    }
    if (pl->fitting < pl->count) {
        printf("\nnot applicable or over the limit:\n");
        for (int i = 0; i < pl->count; i++)
            if (!pl->rows[i].fits)
                printf("  %-17s %s\n", pl->rows[i].family, pl->rows[i].reason);
    }
}

/* A number after `sep`, null when not finite (JSON has no infinity: a rank without a limit). */
static void json_number(double x, const char *sep)
{
    printf(isfinite(x) ? "%s%.17g" : "%snull", sep, x);
}

static void print_json(const zb_plan_t *pl)
{
    printf("{\n  \"ranks\": %d,\n  \"microbatches\": %d,\n  \"mem_limit\": ", pl->ranks,
           pl->microbatches);
    if (isfinite(pl->mem_limit))
        printf("%.17g", pl->mem_limit);
    else
        printf("null");
    printf(",\n  \"mem_limit_ranks\": ");
    if (pl->mem_limit_ranks) {
        for (int r = 0; r < pl->ranks; r++)
            json_number(pl->mem_limit_ranks[r], r ? ", " : "[");
        printf("]");
    } else {
        printf("null");
    }
    printf(",\n  \"families\": [");
    for (int i = 0; i < pl->count; i++) {
        const zb_plan_row_t *row = &pl->rows[i];
        printf("%s\n    {\"family\": ", i ? "," : "");
        json_str(stdout, row->family);
        printf(", \"fits\": %s", row->fits ? "true" : "false");
        if (row->fits) {
            printf(", \"chunks\": %d, \"placement\": \"%s\", \"makespan\": %.17g, "
                   "\"bubble_rate\": %.17g, \"peak_memory_max\": %.17g, \"peak_memory\": [",
                   row->chunks, zb_placement_name(row->placement), row->makespan,
                   row->bubble_rate, row->peak_max);
            print_peaks(stdout, row, pl->ranks, true);
            printf("], \"messages\": %ld, \"volume\": %.17g, \"note\": ", row->messages,
                   row->volume);
            json_str(stdout, row->note);
        } else {
            printf(", \"reason\": ");
            json_str(stdout, row->reason);
        }
        printf("}");
    }
    printf("\n  ]\n}\n");
}

/* plan's own options. */
typedef struct {
    int ranks, mbs;
    bool json;
    double time_limit;
} opts_t;

static zb_status_t own_option(void *own, int c, const char *arg, zb_err_t *err)
{
    opts_t *o = own;
    switch (c) {
    case 'p': return zb_cli_parse_int(arg, 1, 4096, "-p (ranks)", &o->ranks, err);
    case 'm': return zb_cli_parse_int(arg, 1, 100000, "-m (microbatches)", &o->mbs, err);
    case OPT_TIME_LIMIT:
        return zb_cli_parse_number(arg, true, "--time-limit", &o->time_limit, err);
    case ZB_OPT_FORMAT:
        if (strcmp(arg, "table") && strcmp(arg, "json"))
            return zb_err_set(err, ZB_EINVAL, "--format: '%s' is not table or json", arg);
        o->json = !strcmp(arg, "json");
        return ZB_OK;
    default: return zb_err_set(err, ZB_EINVAL, "internal: option %d", c);
    }
}

int zb_cmd_plan(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'p'},
        {"microbatches", required_argument, NULL, 'm'},
        ZB_CLI_ALL_COST_OPTIONS,
        {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
        {"format", required_argument, NULL, ZB_OPT_FORMAT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opts_t o = {0};
    const zb_cli_command_t cmd = {CMD, ":p:m:h", longopts, help, own_option, &o};
    zb_cli_costs_t copt; /* zb_cli_planner_options sets it up */
    zb_err_t err = {0};
    zb_status_t st;
    int rc = zb_cli_planner_options(&cmd, argc, argv, &copt);
    if (rc != ZB_CLI_OPTIONS_READ)
        goto out;
    rc = ZB_EXIT_USAGE;
    const int ranks = o.ranks, mbs = o.mbs;
    const double time_limit = o.time_limit;
    if (!zb_cli_no_operands(CMD, argc, argv, optind))
        goto out;
    if (!ranks || !mbs) {
        zb_cli_error(CMD, "missing %s (see zbpp plan --help)",
                     !ranks ? "-p RANKS" : "-m MICROBATCHES");
        goto out;
    }
    zb_costs_t costs;
    if ((st = zb_cli_costs_build(&copt, ranks, 1, &costs, &err)) != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    /* A limit nothing can meet is an error, not an empty table. */
    double need = zb_min_feasible_memory(ranks, 1, ZB_PLACE_LOOP, &costs);
    if (ranks >= 1) {
        zb_costs_t vc;
        if (zb_costs_rechunk(&costs, ranks, 2, ZB_PLACE_V, &vc, NULL) == ZB_OK) {
            need = fmin(need, zb_min_feasible_memory(ranks, 2, ZB_PLACE_V, &vc));
            if (copt.recompute != ZB_RECOMPUTE_NONE || copt.offload == ZB_OFFLOAD_AUTO)
                need = fmin(need, zb_min_feasible_memory_recompute(ranks, 2, ZB_PLACE_V, &vc));
            zb_costs_free(&vc);
        }
        if (copt.recompute != ZB_RECOMPUTE_NONE || copt.offload == ZB_OFFLOAD_AUTO)
            need = fmin(need, zb_min_feasible_memory_recompute(ranks, 1, ZB_PLACE_LOOP, &costs));
    }
    const double loosest = zb_costs_limit_max(&costs, ranks);
    if (loosest < need - 1e-9 * fmax(1.0, need)) {
        zb_cli_error(CMD, "memory limit %g is below the minimum %g that any schedule needs",
                     loosest, need);
        zb_costs_free(&costs);
        rc = ZB_EXIT_FAIL;
        goto out;
    }
    zb_plan_t plan;
    zb_plan_opts_t popt = {.time_limit = time_limit, .recompute = copt.recompute,
                           .offload = copt.offload};
    st = zb_plan_compare_opts(ranks, mbs, &costs, &popt, &plan, &err);
    const bool per_rank = costs.rank_limit != NULL;
    zb_costs_free(&costs);
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        rc = zb_cli_exit_code(st);
        goto out;
    }
    if (o.json)
        print_json(&plan);
    else
        print_table(&plan);
    rc = plan.fitting > 0 ? ZB_EXIT_OK : ZB_EXIT_FAIL;
    if (!plan.fitting) {
        bool timed_out = false;
        for (int i = 0; i < plan.count; i++)
            timed_out |= strstr(plan.rows[i].reason, "time limit") != NULL;
        if (timed_out)
            zb_cli_error(CMD, "no schedule family finished within --time-limit %g s", time_limit);
        else if (per_rank)
            zb_cli_error(CMD, "no schedule family fits the per-rank memory limits");
        else
            zb_cli_error(CMD, "no schedule family fits memory limit %g", plan.mem_limit);
    }
    zb_plan_free(&plan);
out:
    zb_cli_costs_free(&copt);
    return rc;
}
