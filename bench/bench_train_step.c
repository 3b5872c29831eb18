/* The trainer's whole step as `zbpp train` runs it: next batch from the loader, compute
 * (F, B, W per microbatch, fold tied, grad norm partials by unit), then norm + clip + AdamW.
 * GPT-2 124M shapes by default, on the demo corpus (byte tokens are valid GPT-2 ids).
 * Prints the median of each phase, tokens/s and effective GFLOP/s = 6 · params · tokens / time.
 * Usage: bench_train_step [steps=3] [B=4] [T=64] [layers=12] [corpus=data/demo_corpus.txt] */
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/nn.h"
#include "zbpp/train.h"
#include "zbpp/util.h"

#include "bench_common.h"

static int arg(int argc, char **argv, int i, int def, int lo, int hi, const char *name)
{
    return bench_int_arg("bench_train_step", argc, argv, i, def, lo, hi, name);
}

int main(int argc, char **argv)
{
    int steps = arg(argc, argv, 1, 3, 1, 100, "steps");
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    c.batch = arg(argc, argv, 2, 4, 1, 64, "B");
    c.seq = arg(argc, argv, 3, 64, 1, 1024, "T");
    c.model = bench_gpt2_124m(arg(argc, argv, 4, 12, 1, 48, "layers"));
    c.text_path = argc > 5 ? argv[5] : "data/demo_corpus.txt";
    c.steps = steps + 1;
    c.quiet = true;
    zb_trainer_t t;
    zb_err_t err;
    if (zb_trainer_init(&t, &c, &err) != ZB_OK) {
        fprintf(stderr, "bench_train_step: %s\n", err.msg);
        return 1;
    }
    size_t nparams = t.params.count - t.params.sizes[ZB_WPE];
    printf("trainer step: GPT-2 L=%d C=768 NH=12 Vp=50304, B=%d T=%d, %.1fM params, BLAS %s\n",
           c.model.layers, c.batch, c.seq, t.params.count / 1e6, zb_blas_init());
    double *td = malloc(sizeof(double) * (size_t)steps), *tc = malloc(sizeof(double) * (size_t)steps);
    double *tu = malloc(sizeof(double) * (size_t)steps), *tt = malloc(sizeof(double) * (size_t)steps);
    int *units = malloc(sizeof(int) * (size_t)t.n_units);
    for (int u = 0; u < t.n_units; u++)
        units[u] = u;
    for (int it = -1; it < steps; it++) { /* step -1 warms up page faults and caches */
        float loss;
        zb_step_stats_t s;
        double t0 = zb_now();
        if (zb_trainer_next_batch(&t, &err) != ZB_OK ||
            zb_trainer_compute(&t, &loss, &err) != ZB_OK) {
            fprintf(stderr, "bench_train_step: %s\n", err.msg);
            return 1;
        }
        double t1 = zb_now();
        zb_train_update(&t.cfg, &t.params, &t.grads.g, &t.opt, t.step, t.step + 1, t.unit_sumsq,
                        t.n_units, units, t.n_units, &s);
        t.step++;
        double t2 = zb_now();
        if (it >= 0) {
            td[it] = 0, tc[it] = t1 - t0, tu[it] = t2 - t1, tt[it] = t2 - t0;
            printf("step %d: loss %.4f  compute %.0f ms  norm+clip+AdamW %.0f ms\n", it, loss,
                   tc[it] * 1e3, tu[it] * 1e3);
        }
    }
    double mc = zb_median(tc, steps), mu = zb_median(tu, steps), mt = zb_median(tt, steps);
    double tokens = (double)c.batch * c.seq;
    printf("\nmedian over %d steps (ms):\n", steps);
    printf("  %-30s %8.1f\n", "batch + F/B/W + fold + norms", mc * 1e3);
    printf("  %-30s %8.1f\n", "clip + AdamW", mu * 1e3);
    printf("  %-30s %8.1f   (%.0f tokens/s, %.1f effective GFLOP/s)\n", "whole step", mt * 1e3,
           tokens / mt, 6.0 * (double)nparams * tokens / mt / 1e9);
    free(td), free(tc), free(tu), free(tt), free(units);
    zb_trainer_free(&t);
    return 0;
}
