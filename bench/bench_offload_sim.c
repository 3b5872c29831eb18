/* Activation offload against recompute at half of zb-h1's activation memory, simulated with
 * H100-like costs (the goal setting: P=4 SM partitions of one H100, GPT-2 124M-like L=16,
 * so 4 layers per rank, T=1024, one sequence per microbatch, M=8).
 *
 * Stage times: the measured 1f1b M=8 span of that setting on the H100 (89.23 ms predicted from
 * measured stage costs, docs/cuda.md / h100 README) is (M+P-1)(F+B+W) = 11 (F+B+W), split as the
 * single-GPU bf16 phases F:B:W = 111.7:153.1:58.3 ms. Memory: what a 4-layer stage's F keeps and
 * its B frees, two models: (a) zbpp's own stash accounting (zb_gpt2_stage_mem_keep: fp32, with
 * the T x T attention probabilities, as the stage keeps them today), (b) a bf16 stash with flash
 * attention (18 C values per token and layer: ln1, qkv, attention out, its projection, residual,
 * ln2, fc, gelu, fc projection, residual; B frees the same share as in (a)). A recomputed F
 * keeps its input (B*T*C fp32), its R takes T_F.
 * Copies: PCIe Gen5 about 50 GB/s per direction (or GBPS), 10 us a copy; first column: each rank
 * has a link of its own (one GPU each); second column: the four ranks share one GPU's link
 * (zb_share_t.link: k copies in flight in a direction get 50 / k each; compute factors 1).
 * Rows: zb-h1 (no limit), then at limit = half zb-h1's peak: zb-h1 with --offload auto, auto
 * with --recompute auto (the project's recompute search), zb-h1 with every F recomputed, auto
 * (unlimited) with --offload auto; and zb-h1 --offload all (no limit). Then what `zbpp plan
 * --offload auto --recompute auto` finds at that limit: its best <family>+O row and its best row
 * without offload (recompute allowed), by makespan. Ratios vs zb-h1 (span, or makespan for the
 * plan rows).
 * The shared column can also carry the link's total both ways (BOTH GB/s, 0 = none:
 * share.link_both) and a compute factor while copies are in flight (SLOW, 1 = none:
 * share.copy_slow, every phase): the H100 of 2026-11-28 measured 55 GB/s one way, 86.6 both
 * ways and a W-shaped bf16 product 1.10x slower beside copies (`bench_offload_sim 8 55 86.6
 * 1.1`).
 * Usage: bench_offload_sim [M [GBPS [BOTH [SLOW]]]]   (defaults 8, 50, 0, 1; the H100 of
 * 2026-11-27c looked like 35-38 GB/s for four ranks copying at once: docs/offload.md) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/gpt2.h"
#include "zbpp/plan.h"
#include "zbpp/schedule.h"

#define MiB (1024.0 * 1024.0)

enum { P = 4, LAYERS = 16, T = 1024, C = 768 };

typedef struct {
    double span, peak;
    char note[96];
} result_t;

static int stash_model; /* 0: zbpp's fp32 stash, 1: bf16 with flash attention */

enum { OWN_LINKS, SHARED_LINK }; /* the columns: a link per rank, or one the ranks share */
static double LINK = 50e9 / 1e3; /* bytes per ms, per direction (main's GBPS) */
static double LINK_BOTH = 0;      /* bytes per ms, both directions together (BOTH; 0 = none) */
static double COPY_SLOW = 1;      /* compute factor beside copies (SLOW) */

static void costs_init(zb_costs_t *c, int links, double limit)
{
    const double bw = LINK;
    const zb_gpt2_config_t cfg = {.max_seq = T, .vocab = 50257, .padded_vocab = 50304,
                                  .layers = LAYERS, .heads = 12, .channels = C};
    const zb_gpt2_span_t mid = {.layer_begin = 4, .layer_end = 8};
    size_t after_f = 0, after_b = 0;
    zb_gpt2_stage_mem_keep(&cfg, &mid, 1, T, ZB_GPT2_KEEP_ALL, &after_f, &after_b);
    if (stash_model == 1) {
        double share = (double)after_b / (double)after_f;
        after_f = (size_t)4 * T * 18 * C * 2;
        after_b = (size_t)(share * (double)after_f);
    }
    const double sum = 89.23 / (8 + P - 1), tot = 111.7 + 153.1 + 58.3;
    zb_err_t e;
    if (zb_costs_init_uniform(c, P, sum * 111.7 / tot, sum * 153.1 / tot, sum * 58.3 / tot, 0.05,
                              (double)after_f, (double)after_b - (double)after_f,
                              -(double)after_b, &e) != ZB_OK ||
        zb_costs_set_recompute(c, sum * 111.7 / tot, (double)T * C * 4, &e) != ZB_OK ||
        zb_costs_set_offload(c, (double)after_f, bw, bw, 0.01, &e) != ZB_OK) {
        fprintf(stderr, "bench_offload_sim: %s\n", e.msg);
        exit(1);
    }
    c->mem_limit = limit;
    if (links == SHARED_LINK) { /* the ranks share the device: only its link slows them */
        c->share.n = P;
        for (int ph = 0; ph < 3; ph++)
            for (int k = 0; k < P; k++)
                c->share.f[ph][k] = 1.0;
        c->share.link[0] = c->share.link[1] = LINK;
        c->share.link_both = LINK_BOTH;
        for (int ph = 0; ph < 3; ph++)
            c->share.copy_slow[ph] = COPY_SLOW;
    }
}

/* `family` with recompute mode rc, or through zb_generate_offload with `off`; span = the
 * simulator's T (max per-rank span), peak = max over ranks; note = the planner's remark or why
 * it failed. */
static result_t run(const char *family, zb_recompute_t rc, zb_offload_t off, int M,
                    const zb_costs_t *rank_costs, int chunks)
{
    result_t out = {.span = INFINITY, .peak = INFINITY};
    zb_costs_t chunked;
    zb_err_t e;
    const zb_costs_t *c = rank_costs;
    if (chunks > 1) { /* each rank's figures split over its chunks, looped placement */
        if (zb_costs_rechunk(rank_costs, P, chunks, ZB_PLACE_LOOP, &chunked, &e) != ZB_OK) {
            snprintf(out.note, sizeof out.note, "%.95s", e.msg);
            return out;
        }
        c = &chunked;
    }
    zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = chunks, .costs = c,
                         .recompute = rc};
    zb_schedule_t *s = NULL;
    zb_status_t st = off == ZB_OFFLOAD_NONE ? zb_generate(family, &q, &s, &e)
                                            : zb_generate_offload(family, &q, off, &s, &e);
    snprintf(out.note, sizeof out.note, "%.95s", st == ZB_OK ? q.note : e.msg);
    zb_sim_t sim;
    if (st == ZB_OK && (st = zb_validate(s, c, &e)) == ZB_OK &&
        (st = zb_simulate(s, c, &sim, &e)) == ZB_OK) {
        out.span = sim.span_max;
        out.peak = 0;
        for (int r = 0; r < P; r++)
            out.peak = fmax(out.peak, sim.peak_mem[r]);
        zb_sim_free(&sim);
    } else if (st != ZB_OK) {
        snprintf(out.note, sizeof out.note, "%.95s", e.msg);
    }
    zb_schedule_free(s);
    if (c == &chunked)
        zb_costs_free(&chunked);
    return out;
}

/* The best fitting row of `zbpp plan --offload auto --recompute auto` with (with_o) or without
 * offload; makespan INFINITY when none fits. */
static zb_plan_row_t best_row(const zb_plan_t *plan, bool with_o)
{
    zb_plan_row_t best = {.makespan = INFINITY};
    for (int i = 0; i < plan->count; i++) {
        const zb_plan_row_t *r = &plan->rows[i];
        size_t n = strlen(r->family);
        bool is_o = n > 2 && !strcmp(r->family + n - 2, "+O");
        if (r->fits && is_o == with_o && r->makespan < best.makespan)
            best = *r;
    }
    return best;
}

static void plan_rows(int M, double limit, result_t h1)
{
    zb_plan_row_t rows[2][2];
    double h1_make[2];
    for (int k = 0; k < 2; k++) {
        zb_costs_t c;
        costs_init(&c, k, INFINITY);
        zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = 1, .costs = &c};
        zb_schedule_t *s = NULL;
        zb_sim_t sim;
        h1_make[k] = NAN;
        if (zb_generate("zb-h1", &q, &s, NULL) == ZB_OK && zb_simulate(s, &c, &sim, NULL) == ZB_OK) {
            h1_make[k] = sim.makespan;
            zb_sim_free(&sim);
        }
        zb_schedule_free(s);
        c.mem_limit = limit;
        zb_plan_t plan;
        zb_plan_opts_t o = {.recompute = ZB_RECOMPUTE_AUTO, .offload = ZB_OFFLOAD_AUTO};
        zb_err_t e;
        rows[k][0] = rows[k][1] = (zb_plan_row_t){.makespan = INFINITY};
        if (zb_plan_compare_opts(P, M, &c, &o, &plan, &e) == ZB_OK) {
            rows[k][0] = best_row(&plan, true);
            rows[k][1] = best_row(&plan, false);
            zb_plan_free(&plan);
        } else {
            fprintf(stderr, "bench_offload_sim: plan: %s\n", e.msg);
        }
        zb_costs_free(&c);
    }
    (void)h1;
    const char *names[2] = {"plan: best +O", "plan: best, no offload"};
    for (int j = 0; j < 2; j++) {
        printf("%-22s", names[j]);
        for (int k = 0; k < 2; k++) {
            const zb_plan_row_t *r = &rows[k][j];
            if (isfinite(r->makespan))
                printf(" | %8.2f %6.3f %8.1f", r->makespan, r->makespan / h1_make[k],
                       r->peak_max / MiB);
            else
                printf(" | %8s %6s %8s", "-", "-", "-");
        }
        printf(" | makespan; %s | %s\n", rows[0][j].family, rows[1][j].family);
    }
}

static void table(int M)
{
    zb_costs_t c;
    costs_init(&c, OWN_LINKS, INFINITY);
    result_t h1 = run("zb-h1", ZB_RECOMPUTE_NONE, ZB_OFFLOAD_NONE, M, &c, 1);
    const double limit = h1.peak / 2;
    printf("\n(%c) %s\n", 'a' + stash_model,
           stash_model ? "bf16 stash, flash attention (no T x T probabilities)"
                       : "zbpp's stash today: fp32 with the T x T attention probabilities");
    printf("stage ms: F %.3f  B %.3f  W %.3f; stash %.1f MiB per (stage, mb), B frees %.1f; "
           "a copy takes %.3f ms at %.0f GB/s, %.3f with four at once on one such link\n",
           c.t_f[0], c.t_b[0], c.t_w[0], c.m_f[0] / MiB, -c.m_b[0] / MiB,
           zb_costs_t_copy(&c, ZB_ACT_O, 0), LINK / 1e6, 0.01 + 4 * c.m_f[0] / LINK);
    printf("zb-h1 peak %.1f MiB per rank; limit = half: %.1f MiB\n", h1.peak / MiB, limit / MiB);
    zb_costs_free(&c);
    static const struct {
        const char *name, *family;
        zb_recompute_t rc;
        zb_offload_t off;
        bool limited;
        int chunks;
    } rows[] = {
        {"zb-h1 (no limit)", "zb-h1", ZB_RECOMPUTE_NONE, ZB_OFFLOAD_NONE, false, 1},
        {"zb-h1 --offload auto", "zb-h1", ZB_RECOMPUTE_NONE, ZB_OFFLOAD_AUTO, true, 1},
        {"auto --offload auto", "auto", ZB_RECOMPUTE_NONE, ZB_OFFLOAD_AUTO, true, 1},
        {"auto --offload auto v2", "auto", ZB_RECOMPUTE_NONE, ZB_OFFLOAD_AUTO, true, 2},
        {"auto --recompute auto", "auto", ZB_RECOMPUTE_AUTO, ZB_OFFLOAD_NONE, true, 1},
        {"zb-h1 --recompute all", "zb-h1", ZB_RECOMPUTE_ALL, ZB_OFFLOAD_NONE, true, 1},
        {"zb-h1 --offload all", "zb-h1", ZB_RECOMPUTE_NONE, ZB_OFFLOAD_ALL, false, 1},
    };
    printf("%-22s | %8s %6s %8s | %8s %6s %8s | %s\n", "schedule", "span ms", "ratio",
           "peak MiB", "span ms", "ratio", "peak MiB", "a link per rank | one link shared");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("%-22s", rows[i].name);
        char note[2][96];
        for (int k = 0; k < 2; k++) {
            costs_init(&c, k, rows[i].limited ? limit : INFINITY);
            result_t x = run(rows[i].family, rows[i].rc, rows[i].off, M, &c, rows[i].chunks);
            zb_costs_free(&c);
            if (isfinite(x.span))
                printf(" | %8.2f %6.3f %8.1f", x.span, x.span / h1.span, x.peak / MiB);
            else
                printf(" | %8s %6s %8s", "-", "-", "-");
            snprintf(note[k], sizeof note[k], "%s", x.note);
        }
        printf(" | %.60s | %.60s\n", note[0], note[1]);
    }
    plan_rows(M, limit, h1);
}

int main(int argc, char **argv)
{
    const int M = argc > 1 ? atoi(argv[1]) : 8;
    const double gbps = argc > 2 ? atof(argv[2]) : 50.0;
    const double both = argc > 3 ? atof(argv[3]) : 0.0, slow = argc > 4 ? atof(argv[4]) : 1.0;
    if (M < 1 || M > 1024 || !(gbps >= 1.0 && gbps <= 10000.0) ||
        !(both == 0.0 || (both >= 1.0 && both <= 10000.0)) || !(slow >= 1.0 && slow <= 10.0) ||
        argc > 5) {
        fprintf(stderr, "usage: bench_offload_sim [M (1..1024) [GBPS (1..10000) [BOTH (0 or "
                        "1..10000) [SLOW (1..10)]]]]\n");
        return 2;
    }
    LINK = gbps * 1e9 / 1e3;
    LINK_BOTH = both * 1e9 / 1e3;
    COPY_SLOW = slow;
    printf("P=%d M=%d, GPT-2 124M-like: 4 of %d layers per rank, T=%d, one sequence per "
           "microbatch; span = the simulator's T; links %.0f GB/s", P, M, LAYERS, T, gbps);
    if (both > 0 || slow > 1)
        printf(" (shared: %.1f GB/s both ways, compute %.2fx beside copies)", both, slow);
    printf("\n");
    for (stash_model = 0; stash_model < 2; stash_model++)
        table(M);
    return 0;
}
