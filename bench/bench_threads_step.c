/* One GPT-2 training step (zb_trainer_step: batch, F/B/W, norm, clip, AdamW) on one rank with 1
 * thread and with N threads, the two taking turns step by step in one process, so that a noisy
 * neighbour on a shared machine hits both alike. Prints, per thread count, the median and the
 * fastest step (wall) and the median CPU time of the process per step: on an idle machine the
 * speed-up approaches CPU(1) / (CPU(N) / N) less the hand-off waits, so the CPU figures show
 * what the threads cost even when the machine is too busy for the wall times to. Also the BLAS
 * kernel that ran.
 * Usage: bench_threads_step [steps=5] [threads=2] [layers=12]   (GPT-2 124M, B=4, T=64) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "zbpp/nn.h"
#include "zbpp/train.h"
#include "zbpp/util.h"
#include "zbpp/workers.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *me = "bench_threads_step";
    int steps = bench_int_arg(me, argc, argv, 1, 5, 1, 100, "steps");
    int nt = bench_int_arg(me, argc, argv, 2, 2, 2, ZB_WORKERS_MAX, "threads");
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    c.model = bench_gpt2_124m(bench_int_arg(me, argc, argv, 3, 12, 1, 48, "layers"));
    c.batch = 4, c.seq = 64, c.steps = 2L * (steps + 1), c.quiet = true;
    c.text_path = "data/demo_corpus.txt";
    zb_trainer_t t;
    zb_err_t err;
    zb_workers_t *g[2] = {NULL, NULL};
    if (zb_trainer_init(&t, &c, &err) != ZB_OK ||
        zb_workers_new_for_rank(0, 1, true, &g[0], &err) != ZB_OK ||
        zb_workers_new_for_rank(0, nt, true, &g[1], &err) != ZB_OK) {
        fprintf(stderr, "%s: %s\n", me, err.msg);
        return 1;
    }
    double *wall = malloc(sizeof(double) * 2 * (size_t)steps);
    double *cpu = malloc(sizeof(double) * 2 * (size_t)steps);
    for (int it = -1; it < steps; it++) /* round -1 warms up page faults and caches */
        for (int k = 0; k < 2; k++) {
            zb_workers_enter(g[k]);
            zb_step_stats_t s;
            double w0 = zb_now(), c0 = cpu_now();
            if (zb_trainer_step(&t, &s, &err) != ZB_OK) {
                fprintf(stderr, "%s: %s\n", me, err.msg);
                return 1;
            }
            if (it >= 0) {
                wall[k * steps + it] = zb_now() - w0;
                cpu[k * steps + it] = cpu_now() - c0;
            }
        }
    zb_workers_enter(NULL);
    printf("GPT-2 L=%d C=768, B=4 T=64, one rank, %d steps each, turns alternating; BLAS %s; "
           "load average before the end: ",
           c.model.layers, steps, zb_blas_init());
    FILE *la = fopen("/proc/loadavg", "r");
    char buf[64] = "?";
    if (la && fgets(buf, sizeof buf, la))
        buf[strcspn(buf, " ")] = 0;
    if (la)
        fclose(la);
    printf("%s\n", buf);
    printf("%-9s %14s %14s %16s\n", "threads", "median ms", "fastest ms", "CPU ms / step");
    double med[2], best[2], cmed[2];
    for (int k = 0; k < 2; k++) {
        med[k] = zb_median(wall + k * steps, (size_t)steps) * 1e3; /* sorts: [0] is the fastest */
        best[k] = wall[k * steps] * 1e3;
        cmed[k] = zb_median(cpu + k * steps, (size_t)steps) * 1e3;
        printf("%-9d %14.1f %14.1f %16.1f\n", k ? nt : 1, med[k], best[k], cmed[k]);
    }
    printf("step rate %d threads / 1 thread: median %.2fx, fastest %.2fx; CPU per step %.2fx of "
           "1 thread's\n",
           nt, med[0] / med[1], best[0] / best[1], cmed[1] / cmed[0]);
    zb_workers_free(g[0]);
    zb_workers_free(g[1]);
    zb_trainer_free(&t);
    free(wall), free(cpu);
    return 0;
}
