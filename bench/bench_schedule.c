/* Benchmark: generate + lower + validate + simulate ZB-H2 at P=64, M=1024 (about 196k compute
 * actions plus 2·63·1024·2 messages). Prints the median over several runs of each phase.
 * Usage: bench_schedule [P] [M] [runs] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zbpp/schedule.h"
#include "zbpp/util.h"

/* CPU seconds of this process: less sensitive than wall time to other jobs on a shared box. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int P = argc > 1 ? atoi(argv[1]) : 64;
    int M = argc > 2 ? atoi(argv[2]) : 1024;
    int runs = argc > 3 ? atoi(argv[3]) : 7;
    if (P < 1 || M < 1 || runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: bench_schedule [P>=1] [M>=1] [runs 1..1000]\n");
        return 2;
    }
    enum { GEN, LOWER, VALIDATE, SIMULATE, TOTAL, CPU, NPHASE };
    const char *names[NPHASE] = {"generate", "insert comms", "validate", "simulate", "total", "total (cpu)"};
    double *t[NPHASE];
    for (int k = 0; k < NPHASE; k++)
        t[k] = malloc((size_t)runs * sizeof(double));
    size_t n_compute = 0, n_lowered = 0;
    double makespan = 0;
    zb_err_t err;
    for (int i = 0; i < runs; i++) {
        zb_gen_params_t gp = {.ranks = P, .microbatches = M};
        zb_schedule_t *s = NULL, *low = NULL;
        zb_costs_t c;
        if (zb_costs_init_uniform(&c, P, 1, 1, 1, 0.1, 1, 0, -1, &err) != ZB_OK)
            goto fail;
        double c0 = cpu_now(), t0 = zb_now();
        if (zb_generate("zb-h2", &gp, &s, &err) != ZB_OK)
            goto fail;
        double t1 = zb_now();
        if (zb_insert_comms(s, &low, &err) != ZB_OK)
            goto fail;
        double t2 = zb_now();
        if (zb_validate(low, &c, &err) != ZB_OK)
            goto fail;
        double t3 = zb_now();
        zb_sim_t sim;
        if (zb_simulate(low, &c, &sim, &err) != ZB_OK)
            goto fail;
        double t4 = zb_now(), c4 = cpu_now();
        makespan = sim.makespan;
        zb_sim_free(&sim);
        t[GEN][i] = t1 - t0;
        t[LOWER][i] = t2 - t1;
        t[VALIDATE][i] = t3 - t2;
        t[SIMULATE][i] = t4 - t3;
        t[TOTAL][i] = t4 - t0;
        t[CPU][i] = c4 - c0;
        n_compute = n_lowered = 0;
        for (int r = 0; r < P; r++) {
            n_compute += (size_t)s->rank[r].len;
            n_lowered += (size_t)low->rank[r].len;
        }
        zb_schedule_free(s);
        zb_schedule_free(low);
        zb_costs_free(&c);
    }
    printf("zb-h2 P=%d M=%d: %zu compute actions, %zu after lowering, makespan %.1f\n", P, M,
           n_compute, n_lowered, makespan);
    printf("%-14s %10s  (median of %d runs; wall clock except the last row)\n", "phase", "ms",
           runs);
    for (int k = 0; k < NPHASE; k++)
        printf("%-14s %10.2f\n", names[k], 1e3 * zb_median(t[k], (size_t)runs));
    for (int k = 0; k < NPHASE; k++)
        free(t[k]);
    return 0;
fail:
    fprintf(stderr, "bench_schedule: %s\n", err.msg);
    return 1;
}
