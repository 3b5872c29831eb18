/* How long `auto` takes and what it reaches: median wall time over several runs, with the bubble
 * rate and the bubble of ZB-H1 / ZB-H2 on the same costs for comparison.
 * Usage: bench_auto [runs]   (default 5; the headline case is P=32, M=256) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/schedule.h"
#include "zbpp/util.h"

typedef struct {
    int P, M;
    double f, b, w, comm, mb; /* mem: F +1, B mb, W -1-mb */
    double limit_in_p;        /* limit = limit_in_p * P */
} case_t;

static double bubble_of(const char *fam, const case_t *k, zb_costs_t *c)
{
    zb_gen_params_t p = {.ranks = k->P, .microbatches = k->M, .chunks = 1, .costs = c};
    zb_schedule_t *s = NULL;
    if (zb_generate(fam, &p, &s, NULL) != ZB_OK)
        return NAN;
    double r = NAN;
    zb_sim_t sim;
    if (zb_validate(s, c, NULL) == ZB_OK && zb_simulate(s, c, &sim, NULL) == ZB_OK) {
        r = sim.bubble_rate;
        zb_sim_free(&sim);
    }
    zb_schedule_free(s);
    return r;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 100) {
        fprintf(stderr, "bench_auto: runs must be in [1, 100]\n");
        return 2;
    }
    const case_t cases[] = {
        {8, 64, 1, 1, 0.6, 0.05, 0, 2},     {8, 64, 1, 1, 0.6, 0.05, -0.5, 2},
        {16, 128, 1, 1.1, 0.5, 0.08, -0.5, 2}, {32, 256, 1, 1, 0.6, 0.05, -0.5, 2},
        {32, 256, 1, 1, 0.6, 0.05, 0, 1},   {32, 256, 1, 1, 1, 0, 0, 2},
    };
    printf("%-4s %-5s %-22s %-6s %10s %9s %9s %9s\n", "P", "M", "cost F,B,W,c / mem B", "limit",
           "median s", "auto", "zb-h1", "zb-h2");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const case_t *k = &cases[i];
        zb_costs_t c;
        zb_err_t e;
        if (zb_costs_init_uniform(&c, k->P, k->f, k->b, k->w, k->comm, 1, k->mb, -1 - k->mb,
                                  &e) != ZB_OK) {
            fprintf(stderr, "bench_auto: %s\n", e.msg);
            return 1;
        }
        c.mem_limit = k->limit_in_p * k->P;
        double *t = malloc(sizeof(double) * (size_t)runs), rate = NAN;
        for (int r = 0; r < runs; r++) {
            zb_gen_params_t p = {.ranks = k->P, .microbatches = k->M, .chunks = 1, .costs = &c};
            zb_schedule_t *s = NULL;
            double t0 = zb_now();
            zb_status_t st = zb_generate("auto", &p, &s, &e);
            t[r] = zb_now() - t0;
            if (st != ZB_OK) {
                fprintf(stderr, "bench_auto: %s\n", e.msg);
                return 1;
            }
            zb_sim_t sim;
            if (zb_simulate(s, &c, &sim, NULL) == ZB_OK) {
                rate = sim.bubble_rate;
                zb_sim_free(&sim);
            }
            zb_schedule_free(s);
        }
        zb_sort_doubles(t, (size_t)runs);
        char desc[128];
        snprintf(desc, sizeof desc, "%g,%g,%g,%g / %g", k->f, k->b, k->w, k->comm, k->mb);
        char lim[16];
        snprintf(lim, sizeof lim, "%gP", k->limit_in_p);
        printf("%-4d %-5d %-22s %-6s %10.3f %8.2f%% %8.2f%% %8.2f%%\n", k->P, k->M, desc, lim,
               t[runs / 2], 100 * rate, 100 * bubble_of("zb-h1", k, &c),
               100 * bubble_of("zb-h2", k, &c));
        free(t);
        zb_costs_free(&c);
    }
    printf("(zb-h1 / zb-h2 shown as nan when they do not fit the limit)\n");
    return 0;
}
