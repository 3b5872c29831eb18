/* `auto --recompute auto` against the fixed answers to a tight memory limit (issue 11), simulated.
 *
 * Costs per rank: F=1, B=1, W=0.6, comm 0.05, R = F; memory M_F=1, M_B=-0.5, M_W=-0.5, a
 * non-saving F keeps m_keep (0.1, 0.05 and 0 by default). For P in {4, 8} and M in {2P, 4P},
 * limits from the recompute minimum (one microbatch at a time, every F recomputed, best
 * chunking) up to ZB-H2's peak (10 steps) plus P/2 (half of 1F1B's activations). Baselines:
 * 1F1B and ZB-H1 with every F recomputed, V-Min and V-Half ("-" where over the limit); ratio =
 * auto / best baseline (<= 1 is the goal), and at P/2 the speed-up over 1F1B+R (>= 10%).
 * Usage: bench_recompute_sim [m_keep ...]   (default 0.1 0.05 0) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/plan.h"
#include "zbpp/schedule.h"
#include "zbpp/util.h"

static int init_costs(zb_costs_t *c, int P, double keep, double limit)
{
    zb_err_t e;
    if (zb_costs_init_uniform(c, P, 1, 1, 0.6, 0.05, 1, -0.5, -0.5, &e) != ZB_OK ||
        zb_costs_set_recompute(c, 1, keep, &e) != ZB_OK) {
        fprintf(stderr, "bench_recompute_sim: %s\n", e.msg);
        return 1;
    }
    c->mem_limit = limit;
    return 0;
}

/* Makespan of `family` (recompute mode rc) for P, M under c (one stage per rank), INFINITY when
 * it fails or is over the limit; *peak (may be NULL) its peak memory. */
static double run(const char *family, zb_recompute_t rc, int P, int M, const zb_costs_t *c,
                  double *peak)
{
    bool is_auto = family[0] == 'a';
    zb_gen_params_t q = {.ranks = P, .microbatches = M};
    zb_schedule_t *s = NULL;
    double mk = INFINITY;
    if (peak)
        *peak = INFINITY;
    int v = 1;
    zb_placement_t pl = ZB_PLACE_LOOP;
    if (!is_auto) { /* the family's chunking, then costs to match */
        if (zb_generate(family, &q, &s, NULL) != ZB_OK)
            return mk;
        v = s->chunks;
        pl = s->placement;
        zb_schedule_free(s);
        s = NULL;
    }
    zb_costs_t cc;
    if (zb_costs_rechunk(c, P, v, pl, &cc, NULL) != ZB_OK)
        return mk;
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .chunks = v, .costs = &cc,
                         .any_placement = is_auto, .recompute = rc};
    if (zb_generate(family, &p, &s, NULL) == ZB_OK) {
        zb_costs_t sc;
        const zb_costs_t *use = &cc;
        bool own = false;
        if ((s->chunks != v || s->placement != pl) &&
            zb_costs_rechunk(c, P, s->chunks, s->placement, &sc, NULL) == ZB_OK) {
            use = &sc;
            own = true;
        }
        zb_sim_t sim;
        if (zb_validate(s, use, NULL) == ZB_OK && zb_simulate(s, use, &sim, NULL) == ZB_OK) {
            mk = sim.makespan;
            if (peak) {
                *peak = 0;
                for (int r = 0; r < sim.ranks; r++)
                    *peak = fmax(*peak, sim.peak_mem[r]);
            }
            zb_sim_free(&sim);
        }
        if (own)
            zb_costs_free(&sc);
    }
    zb_schedule_free(s);
    zb_costs_free(&cc);
    return mk;
}

static void cell(double x)
{
    if (isfinite(x))
        printf(" %9.2f", x);
    else
        printf(" %9s", "-");
}

/* One table; returns the number of rows that miss a goal. */
static int table(int P, int M, double keep)
{
    zb_costs_t c, vc;
    if (init_costs(&c, P, keep, INFINITY))
        return 1;
    double lo = zb_min_feasible_memory_recompute(P, 1, ZB_PLACE_LOOP, &c);
    const zb_placement_t pls[2] = {ZB_PLACE_LOOP, ZB_PLACE_V};
    for (int k = 0; k < 2; k++)
        if (zb_costs_rechunk(&c, P, 2, pls[k], &vc, NULL) == ZB_OK) {
            lo = fmin(lo, zb_min_feasible_memory_recompute(P, 2, pls[k], &vc));
            zb_costs_free(&vc);
        }
    double hi;
    run("zb-h2", ZB_RECOMPUTE_NONE, P, M, &c, &hi);
    zb_costs_free(&c);
    printf("\nP=%d M=%d m_keep=%g: limits %.3g (recompute minimum) .. %.3g (ZB-H2 peak)\n", P, M,
           keep, lo, hi);
    printf("%8s %9s %9s %9s %9s %9s %9s %7s %s\n", "limit", "1f1b+R", "zb-h1+R", "v-min",
           "v-half", "best", "auto", "ratio", "");
    const char *fam[4] = {"1f1b", "zb-h1", "v-min", "v-half"};
    const zb_recompute_t rcm[4] = {ZB_RECOMPUTE_ALL, ZB_RECOMPUTE_ALL, ZB_RECOMPUTE_NONE,
                                   ZB_RECOMPUTE_NONE};
    const int steps = 10;
    int misses = 0;
    for (int i = 0; i <= steps; i++) {
        /* ten steps from lo to hi, and P/2 (half of 1F1B's activations) in its place */
        double L = i == steps ? P / 2.0 : lo + (hi - lo) * i / (steps - 1);
        if (init_costs(&c, P, keep, L))
            return 1;
        double b[4], best = INFINITY;
        printf("%8.3f", L);
        for (int k = 0; k < 4; k++) {
            b[k] = run(fam[k], rcm[k], P, M, &c, NULL);
            best = fmin(best, b[k]);
            cell(b[k]);
        }
        double t0 = zb_now();
        double a = run("auto", ZB_RECOMPUTE_AUTO, P, M, &c, NULL);
        double secs = zb_now() - t0;
        cell(best);
        cell(a);
        double ratio = isfinite(best) ? a / best : NAN;
        bool miss = isfinite(best) && !(a <= best * (1 + 1e-9));
        if (isfinite(ratio))
            printf(" %7.3f", ratio);
        else
            printf(" %7s", "-");
        if (i == steps) {
            double gain = isfinite(b[0]) ? 1 - a / b[0] : NAN;
            printf("  half of 1F1B: %.1f%% faster than 1f1b+R", 100 * gain);
            miss |= !(gain >= 0.10);
        }
        printf("  (%.2fs)%s\n", secs, miss ? "  MISS" : "");
        misses += miss;
        zb_costs_free(&c);
    }
    return misses;
}

int main(int argc, char **argv)
{
    double keeps[8] = {0.1, 0.05, 0};
    int nk = 3;
    if (argc > 1) {
        nk = 0;
        for (int i = 1; i < argc && nk < 8; i++) {
            char *end;
            keeps[nk] = strtod(argv[i], &end);
            if (*end || !(keeps[nk] >= 0 && keeps[nk] <= 1)) {
                fprintf(stderr, "bench_recompute_sim: m_keep '%s' must be in [0, 1]\n", argv[i]);
                return 2;
            }
            nk++;
        }
    }
    printf("bench_recompute_sim: F=1 B=1 W=0.6 c=0.05 R=F, memory 1/-0.5/-0.5; auto = -s auto "
           "--any-placement --recompute auto\n");
    int misses = 0;
    for (int k = 0; k < nk; k++)
        for (int P = 4; P <= 8; P *= 2)
            for (int M = 2 * P; M <= 4 * P; M *= 2)
                misses += table(P, M, keeps[k]);
    printf("\n%d row%s miss%s a goal\n", misses, misses == 1 ? "" : "s", misses == 1 ? "es" : "");
    return misses ? 1 : 0;
}
