/* `auto` on the zero-bubble paper's profiled costs (issue 10): bubble rate next to the paper's
 * ZB-2p, median time per call, and the time-vs-P·M curve at a fixed search effort.
 * Costs per stage: F, B, W, comm in µs; memory per F = 34h + 5as (s = 1024), per W = -32h, per B
 * the rest; limit 2P·M_F. Two curves: M = 8P (P·M grows 4x per row), and P·M fixed at 32768
 * (P alone grows). Rows marked "own" reuse the last paper row's costs at larger sizes.
 * Usage: bench_auto_paper [runs]   (default 5; medians) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/plan.h"
#include "zbpp/schedule.h"
#include "zbpp/util.h"

typedef struct {
    int P, M;
    double f, b, w, c;
    int h, a;
    double zb2p; /* paper's ZB-2p bubble rate; < 0 = our own row */
} row_t;

/* Median seconds of `runs` auto calls; *rate gets the bubble rate, *chunks the chunking. */
static int run_auto(const row_t *r, int runs, bool anyp, double *secs, double *rate, int *chunks)
{
    const double mf = 34.0 * r->h + 5.0 * r->a * 1024, mw = -32.0 * r->h;
    zb_costs_t c;
    zb_err_t e;
    if (zb_costs_init_uniform(&c, r->P, r->f, r->b, r->w, r->c, mf, -(mf + mw), mw, &e)) {
        fprintf(stderr, "bench_auto_paper: %s\n", e.msg);
        return 1;
    }
    c.mem_limit = 2.0 * r->P * mf;
    double *t = malloc(sizeof(double) * (size_t)runs);
    if (!t)
        return 1;
    for (int k = 0; k < runs; k++) {
        zb_gen_params_t p = {.ranks = r->P, .microbatches = r->M, .chunks = 1, .costs = &c,
                             .any_placement = anyp};
        zb_schedule_t *s = NULL;
        double t0 = zb_now();
        if (zb_generate("auto", &p, &s, &e) != ZB_OK) {
            fprintf(stderr, "bench_auto_paper: %s\n", e.msg);
            return 1;
        }
        t[k] = zb_now() - t0;
        zb_costs_t sc;
        const zb_costs_t *use = &c;
        if (s->chunks != 1 && zb_costs_rechunk(&c, r->P, s->chunks, s->placement, &sc, &e) == 0)
            use = &sc;
        zb_sim_t sim;
        if (zb_simulate(s, use, &sim, &e) == ZB_OK) {
            *rate = sim.bubble_rate;
            zb_sim_free(&sim);
        }
        *chunks = s->chunks;
        if (use == &sc)
            zb_costs_free(&sc);
        zb_schedule_free(s);
    }
    zb_sort_doubles(t, (size_t)runs);
    *secs = t[runs / 2];
    free(t);
    zb_costs_free(&c);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 100) {
        fprintf(stderr, "bench_auto_paper: runs must be in [1, 100]\n");
        return 2;
    }
    const row_t rows[] = {
        {8, 24, 18522, 18086, 9337, 601, 2304, 24, 0.0433},
        {8, 64, 18546, 18097, 9321, 762, 2304, 24, 0.0026},
        {16, 48, 11347, 11248, 8132, 377, 5120, 40, 0.0066},
        {16, 64, 11307, 11254, 8101, 379, 5120, 40, 0.0054},
        {16, 128, 11325, 11308, 8109, 378, 5120, 40, 0.0028},
        {32, 256, 11325, 11308, 8109, 378, 5120, 40, -1},
        {64, 512, 11325, 11308, 8109, 378, 5120, 40, -1},
        {64, 1024, 11325, 11308, 8109, 378, 5120, 40, -1},
        {128, 1024, 11325, 11308, 8109, 378, 5120, 40, -1},
    };
    printf("| P | M | ZB-2p (paper) | auto | median s | auto, any placement | median s |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row_t *r = &rows[i];
        double s1 = NAN, r1 = NAN, s2 = NAN, r2 = NAN;
        int v1 = 0, v2 = 0;
        if (run_auto(r, runs, false, &s1, &r1, &v1))
            return 1;
        /* any placement at the largest sizes takes tens of seconds (docs/auto.md): not run */
        bool big = (long)r->P * r->M > 20000;
        if (!big && run_auto(r, runs, true, &s2, &r2, &v2))
            return 1;
        char paper[16];
        if (r->zb2p >= 0)
            snprintf(paper, sizeof paper, "%.4f", r->zb2p);
        else
            snprintf(paper, sizeof paper, "(own row)");
        if (big)
            printf("| %d | %d | %s | %.4f | %.3f | not run | |\n", r->P, r->M, paper, r1, s1);
        else
            printf("| %d | %d | %s | %.4f | %.3f | %.4f (v=%d) | %.3f |\n", r->P, r->M, paper,
                   r1, s1, r2, v2, s2);
        fflush(stdout);
    }
    /* time vs P·M at the fixed search effort (the last row's costs, M = 8P) */
    printf("\ntime of one auto call vs P*M (M = 8P; median of %d):\n", runs);
    printf("| P | M | P*M | median s | s per 1e4 P*M |\n|---|---|---|---|---|\n");
    for (int P = 8; P <= 128; P *= 2) {
        row_t r = rows[4];
        r.P = P;
        r.M = 8 * P;
        double s = NAN, rate = NAN;
        int v = 0;
        int n = runs;
        if (run_auto(&r, n, false, &s, &rate, &v))
            return 1;
        printf("| %d | %d | %d | %.3f | %.4f |\n", P, r.M, P * r.M, s, s / (P * r.M) * 1e4);
        fflush(stdout);
    }
    /* the same at a fixed P*M: what P alone costs, apart from the data outgrowing the caches */
    printf("\ntime of one auto call vs P at fixed P*M = 32768 (median of %d):\n", runs);
    printf("| P | M | median s | s per 1e4 P*M |\n|---|---|---|---|\n");
    for (int P = 32; P <= 256; P *= 2) {
        row_t r = rows[4];
        r.P = P;
        r.M = 32768 / P;
        double s = NAN, rate = NAN;
        int v = 0;
        if (run_auto(&r, runs, false, &s, &rate, &v))
            return 1;
        printf("| %d | %d | %.3f | %.4f |\n", P, r.M, s, s / 32768 * 1e4);
        fflush(stdout);
    }
    return 0;
}
