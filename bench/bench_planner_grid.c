/* The planner over a grid of shapes and cost ratios, each figure next to a reference:
 *  1. V families at F = B = W = 1 per chunk (memory +1/0/-1 per chunk): v-half, v-min, zb-v and
 *     1F1B (closed form (P-1)/(M+P-1)) with the bubble rates the Controllable-Memory paper's own
 *     V-Half/V-Min scheduler prints for the same shapes (its published algorithm, run once by
 *     hand; "-" where not run), and each peak in microbatches of activations.
 *  2. One chunk per rank, four cost models: zb-h1 and zb-h2 (with their closed forms where
 *     comm = 0), auto given each one's peak as its limit, and the zero-bubble paper's heuristic
 *     (ZB-1p / ZB-2p) at the same limits.
 *  3. Small shapes: auto against the exact MILP (`optimal`, GLPK; its lower bound and gap).
 *  4. Planning time of auto, one core: median of `runs` calls.
 * Usage: bench_planner_grid [runs [v|chunk|exact|time]]   (default 3 runs, every section) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schedule/auto_heuristic.h"
#include "zbpp/schedule.h"
#include "zbpp/util.h"

typedef struct {
    double rate, peak, secs, cpu; /* wall (monotonic) and CPU seconds of the generation */
    char note[256];
    bool ok;
} res_t;

/* Generate `family`, validate and simulate it under c (limit included). */
static res_t run(const char *family, int P, int M, int v, const zb_costs_t *c)
{
    res_t r = {NAN, NAN, NAN, NAN, "", false};
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .chunks = v, .costs = c,
                         .time_limit = 5};
    zb_schedule_t *s = NULL;
    zb_err_t e;
    double t0 = zb_now();
    clock_t c0 = clock();
    if (zb_generate(family, &p, &s, &e) != ZB_OK)
        return r;
    r.secs = zb_now() - t0;
    r.cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    snprintf(r.note, sizeof r.note, "%s", p.note);
    zb_sim_t sim;
    if (zb_validate(s, c, &e) == ZB_OK && zb_simulate(s, c, &sim, &e) == ZB_OK) {
        r.rate = sim.bubble_rate;
        r.peak = 0;
        for (int k = 0; k < P; k++)
            r.peak = fmax(r.peak, sim.peak_mem[k]);
        r.ok = true;
        zb_sim_free(&sim);
    }
    zb_schedule_free(s);
    return r;
}

static void cell(double x)
{
    if (isnan(x))
        printf(" - |");
    else
        printf(" %.4f |", x);
}

/* The Controllable-Memory paper's scheduler at F = B = W = 1 per chunk (bubble rates). */
typedef struct {
    int P, M;
    double half, min;
} paper_v_t;

static const paper_v_t paper_v[] = {
    {4, 4, 0.2941, 0.3143},    {4, 8, 0.0943, 0.1864},    {4, 16, 0.0495, 0.1028},
    {4, 32, 0.0254, 0.0542},   {6, 6, 0.2500, 0.3208},    {6, 12, 0.1325, 0.1910},
    {6, 24, 0.0710, 0.1056},   {6, 48, 0.0368, 0.0557},   {8, 8, 0.2615, 0.3600},
    {8, 16, 0.1504, 0.2195},   {8, 32, 0.0813, 0.1233},   {8, 64, 0.0424, 0.0657},
    {12, 12, 0.2871, 0.3628},  {12, 24, 0.1676, 0.2216},  {12, 48, 0.0915, 0.1246},
    {12, 96, 0.0479, 0.0665},  {16, 16, 0.2993, 0.3806},  {16, 32, 0.1760, 0.2351},
    {16, 64, 0.0965, 0.1332},  {16, 128, 0.0507, 0.0713}, {24, 96, 0.1014, NAN},
};

static void v_families(void)
{
    printf("## 1. V families, F = B = W = 1 per chunk (bubble rate; peak in microbatches)\n\n");
    printf("| P | M | 1f1b (closed form) | zb-v | v-half | paper V-Half | peak | v-min | paper "
           "V-Min | peak |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof paper_v / sizeof paper_v[0]; i++) {
        const int P = paper_v[i].P, M = paper_v[i].M;
        zb_costs_t c;
        zb_err_t e;
        if (zb_costs_init_uniform(&c, 2 * P, 1, 1, 1, 0, 1, 0, -1, &e) != ZB_OK)
            return;
        res_t z = run("zb-v", P, M, 2, &c), h = run("v-half", P, M, 2, &c);
        res_t m = run("v-min", P, M, 2, &c);
        printf("| %d | %d |", P, M);
        cell((double)(P - 1) / (M + P - 1));
        cell(z.rate);
        cell(h.rate);
        cell(paper_v[i].half);
        printf(" %g |", h.peak / 2);
        cell(m.rate);
        cell(paper_v[i].min);
        printf(" %g |\n", m.peak / 2);
        zb_costs_free(&c);
        fflush(stdout);
    }
}

typedef struct {
    const char *name;
    double f, b, w, c;
    bool paper_memory; /* m_f = 34h + 5as, m_w = -32h (h = 2304, a = 24, s = 1024) */
} model_t;

static const model_t models[] = {
    {"1:1:1", 1, 1, 1, 0, false},
    {"1:2:1", 1, 2, 1, 0, false},
    {"paper 18522:18086:9337 c=601", 18522, 18086, 9337, 601, true},
    {"cheap W 1:1.2:0.3 c=0.05", 1, 1.2, 0.3, 0.05, true},
};

static int model_costs(zb_costs_t *c, int P, const model_t *m)
{
    const double mf = 34.0 * 2304 + 5.0 * 24 * 1024, mw = -32.0 * 2304;
    zb_err_t e;
    return m->paper_memory
               ? zb_costs_init_uniform(c, P, m->f, m->b, m->w, m->c, mf, -(mf + mw), mw, &e)
               : zb_costs_init_uniform(c, P, m->f, m->b, m->w, m->c, 1, 0, -1, &e);
}

/* Best bubble rate of the paper's heuristic's variants under c's limit. */
static double heuristic_rate(int P, int M, const zb_costs_t *c)
{
    double best = NAN;
    for (int k = 0; k < ZB_HEURISTIC_VARIANTS; k++) {
        zb_schedule_t *s = NULL;
        zb_err_t e;
        if (zb_zb_heuristic(P, M, c, k, &s, NULL, NULL, &e) != ZB_OK)
            continue;
        zb_sim_t sim;
        if (zb_validate(s, c, &e) == ZB_OK && zb_simulate(s, c, &sim, &e) == ZB_OK) {
            if (!(sim.bubble_rate >= best))
                best = sim.bubble_rate;
            zb_sim_free(&sim);
        }
        zb_schedule_free(s);
    }
    return best;
}

/* Closed-form bubble rate of ZB-H1 (h = 1) / ZB-H2 (h = 2) at comm 0, uniform stages. */
static double closed_zbh(int h, int P, int M, const model_t *m)
{
    if (m->c != 0 || M < (h == 1 ? P : 2 * P - 1))
        return NAN;
    double busy = M * (m->f + m->b + m->w);
    double bubble = fmax(0.0, (P - 1) * (m->f + m->b - h * m->w));
    return bubble / (busy + bubble);
}

static void one_chunk(void)
{
    printf("\n## 2. One chunk per rank: auto at zb-h1's and zb-h2's own peak (bubble rate)\n\n");
    printf("| costs | P | M | zb-h1 | closed | auto | ZB-1p heur. | zb-h2 | closed | auto | "
           "ZB-2p heur. |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    const int Ps[] = {4, 8, 16, 32};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; pi++) {
            const int P = Ps[pi];
            const int Ms[] = {P, 2 * P, 4 * P, 8 * P};
            for (int k = 0; k < 4; k++) {
                const int M = Ms[k];
                zb_costs_t c;
                if (model_costs(&c, P, &models[mi]) != ZB_OK)
                    return;
                printf("| %s | %d | %d |", models[mi].name, P, M);
                for (int h = 1; h <= 2; h++) {
                    c.mem_limit = INFINITY;
                    res_t fam = run(h == 1 ? "zb-h1" : "zb-h2", P, M, 1, &c);
                    c.mem_limit = fam.peak;
                    res_t a = run("auto", P, M, 1, &c);
                    cell(fam.rate);
                    cell(closed_zbh(h, P, M, &models[mi]));
                    cell(a.rate);
                    cell(heuristic_rate(P, M, &c));
                }
                printf("\n");
                zb_costs_free(&c);
                fflush(stdout);
            }
        }
}

static void small_exact(void)
{
    printf("\n## 3. Small shapes: auto against the exact MILP (5 s per solve)\n\n");
    printf("| P | M | F,B,W,c | limit | auto makespan | optimal | note |\n"
           "|---|---|---|---|---|---|---|\n");
    const struct {
        int P, M;
        double f, b, w, c, limit;
    } rows[] = {
        {2, 4, 1, 1, 1, 0, 2},        {3, 6, 1, 1, 0.5, 0.1, 4},  {4, 8, 1, 1, 1, 0, 4},
        {4, 8, 1, 1.3, 0.6, 0.05, 5}, {2, 8, 1, 1, 0.5, 0.2, 3},  {4, 6, 1, 1, 0.7, 0.05, 5},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        zb_costs_t c;
        zb_err_t e;
        if (zb_costs_init_uniform(&c, rows[i].P, rows[i].f, rows[i].b, rows[i].w, rows[i].c, 1,
                                  0, -1, &e) != ZB_OK)
            return;
        c.mem_limit = rows[i].limit;
        zb_gen_params_t p = {.ranks = rows[i].P, .microbatches = rows[i].M, .chunks = 1,
                             .costs = &c};
        zb_schedule_t *s = NULL;
        double amk = NAN;
        if (zb_generate("auto", &p, &s, &e) == ZB_OK) {
            zb_sim_t sim;
            if (zb_simulate(s, &c, &sim, &e) == ZB_OK) {
                amk = sim.makespan;
                zb_sim_free(&sim);
            }
            zb_schedule_free(s);
        }
        zb_gen_params_t q = {.ranks = rows[i].P, .microbatches = rows[i].M, .chunks = 1,
                             .costs = &c, .time_limit = 5};
        double omk = NAN;
        if (zb_generate("optimal", &q, &s, &e) == ZB_OK) {
            zb_sim_t sim;
            if (zb_simulate(s, &c, &sim, &e) == ZB_OK) {
                omk = sim.makespan;
                zb_sim_free(&sim);
            }
            zb_schedule_free(s);
        } else {
            snprintf(q.note, sizeof q.note, "%.200s", e.msg);
        }
        printf("| %d | %d | %g,%g,%g,%g | %g | %.4g | %.4g | %s |\n", rows[i].P, rows[i].M,
               rows[i].f, rows[i].b, rows[i].w, rows[i].c, rows[i].limit, amk, omk, q.note);
        zb_costs_free(&c);
        fflush(stdout);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void planning_time(int runs)
{
    printf("\n## 4. Planning time of auto (paper costs 11325,11308,8109,378, h=5120 a=40; median "
           "of %d; wall time, and CPU time, which a machine shared with other jobs inflates "
           "less)\n\n| P | M | limit | bubble | median wall s | median CPU s |\n"
           "|---|---|---|---|---|---|\n", runs);
    const struct {
        int P, M;
        double k; /* limit in P·M_F */
    } rows[] = {{64, 512, 2}, {128, 1024, 1}, {128, 1024, 2}, {256, 2048, 1}, {256, 2048, 2}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const int P = rows[i].P;
        const double mf = 34.0 * 5120 + 5.0 * 40 * 1024, mw = -32.0 * 5120;
        zb_costs_t c;
        zb_err_t e;
        if (zb_costs_init_uniform(&c, P, 11325, 11308, 8109, 378, mf, -(mf + mw), mw, &e))
            return;
        c.mem_limit = rows[i].k * P * mf;
        double t[32], u[32], rate = NAN;
        int n = runs < 32 ? runs : 32;
        for (int k = 0; k < n; k++) {
            res_t r = run("auto", P, rows[i].M, 1, &c);
            t[k] = r.secs;
            u[k] = r.cpu;
            rate = r.rate;
        }
        qsort(t, (size_t)n, sizeof t[0], cmp_double);
        qsort(u, (size_t)n, sizeof u[0], cmp_double);
        printf("| %d | %d | %gP·M_F | %.4f | %.3f | %.3f |\n", P, rows[i].M, rows[i].k, rate,
               t[n / 2], u[n / 2]);
        zb_costs_free(&c);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 3;
    if (runs < 1 || runs > 32) {
        fprintf(stderr, "bench_planner_grid: runs must be in [1, 32]\n");
        return 2;
    }
    const char *only = argc > 2 ? argv[2] : "";
    if (!*only || !strcmp(only, "v"))
        v_families();
    if (!*only || !strcmp(only, "chunk"))
        one_chunk();
    if (!*only || !strcmp(only, "exact"))
        small_exact();
    if (!*only || !strcmp(only, "time"))
        planning_time(runs);
    return 0;
}
