/* One GPT-2 training step on one core: forward, backward_input (B), backward_weight (W), then
 * fold the tied gradient and AdamW over the whole buffer. Prints the median of each phase over
 * the timed steps, tokens/s and effective GFLOP/s = 6 · params · tokens / (F+B+W time).
 * Usage: bench_gpt2_step [steps=3] [B=4] [T=64] [layers=12]   (GPT-2 124M shapes otherwise) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zbpp/gpt2.h"
#include "zbpp/nn.h"
#include "zbpp/optim.h"
#include "zbpp/util.h"

#include "bench_common.h"

/* CPU time of this thread: on a shared machine it excludes time spent descheduled, so it is a
 * better proxy for the unloaded cost than wall time (caches are still shared). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int arg(int argc, char **argv, int i, int def, int lo, int hi, const char *name)
{
    return bench_int_arg("bench_gpt2_step", argc, argv, i, def, lo, hi, name);
}

int main(int argc, char **argv)
{
    int steps = arg(argc, argv, 1, 3, 1, 100, "steps");
    int B = arg(argc, argv, 2, 4, 1, 64, "B");
    int T = arg(argc, argv, 3, 64, 1, 1024, "T");
    int L = arg(argc, argv, 4, 12, 1, 48, "layers");
    zb_gpt2_config_t cfg = bench_gpt2_124m(L);
    zb_gpt2_span_t span = {0, L, true, true};
    zb_err_t e;
    zb_gpt2_params_t p;
    zb_gpt2_grads_t g;
    zb_adamw_state_t opt;
    zb_gpt2_stash_t *st;
    if (zb_gpt2_params_alloc(&p, &cfg, &e) || zb_gpt2_grads_alloc(&g, &cfg, &e) ||
        zb_adamw_state_alloc(&opt, &cfg, &e) || zb_gpt2_stash_new(&cfg, &span, B, T, &st, &e)) {
        fprintf(stderr, "bench_gpt2_step: %s\n", e.msg);
        return 1;
    }
    zb_gpt2_params_init_random(&p, 1);
    int N = B * T;
    int *tok = malloc((size_t)N * sizeof(int)), *tgt = malloc((size_t)N * sizeof(int));
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        tok[i] = (int)((s >> 8) % (unsigned)cfg.vocab);
        tgt[i] = (int)((s >> 4) % (unsigned)cfg.vocab);
    }
    zb_adamw_hparams_t h = zb_adamw_defaults();
    int units_n = zb_gpt2_num_units(&cfg);
    int *units = malloc((size_t)units_n * sizeof(int));
    for (int u = 0; u < units_n; u++)
        units[u] = u;

    /* parameters excluding the position embedding, as GPT-2's "124M" counts them */
    size_t nparams = p.count - p.sizes[ZB_WPE];
    printf("GPT-2 L=%d C=768 NH=12 Vp=50304, B=%d T=%d, %zu params (%.1fM), BLAS %s\n", L, B, T,
           p.count, p.count / 1e6, zb_blas_init());
    double *tf = malloc(sizeof(double) * (size_t)steps), *tb = malloc(sizeof(double) * (size_t)steps);
    double *tw = malloc(sizeof(double) * (size_t)steps), *to = malloc(sizeof(double) * (size_t)steps);
    double *tc = malloc(sizeof(double) * (size_t)steps);
    double *tcs = malloc(sizeof(double) * (size_t)steps); /* whole step, thread CPU time */
    float loss = 0;
    for (int it = -1; it < steps; it++) { /* step -1 warms up caches and page faults */
        zb_gpt2_grads_zero(&g);
        double c0 = cpu_now();
        double t0 = zb_now();
        if (zb_gpt2_forward(&p, &span, st, tok, NULL, tgt, NULL, &loss, &e)) {
            fprintf(stderr, "bench_gpt2_step: %s\n", e.msg);
            return 1;
        }
        double t1 = zb_now();
        zb_gpt2_backward_input(&p, &span, st, NULL, 1.0f / N, NULL, &e);
        double t2 = zb_now();
        zb_gpt2_backward_weight(&p, &span, st, &g, &e);
        double t3 = zb_now();
        double c3 = cpu_now();
        zb_gpt2_fold_tied(&g);
        zb_adamw_update_units(&p, &g.g, &opt, &h, h.lr, it + 2, 1.0f, units, units_n);
        double t4 = zb_now();
        double c4 = cpu_now();
        if (it >= 0) {
            tc[it] = c3 - c0;
            tcs[it] = c4 - c0;
            tf[it] = t1 - t0, tb[it] = t2 - t1, tw[it] = t3 - t2, to[it] = t4 - t3;
            printf("step %d: loss %.4f  F %.0f ms  B %.0f ms  W %.0f ms  optimizer %.0f ms\n", it,
                   loss, tf[it] * 1e3, tb[it] * 1e3, tw[it] * 1e3, to[it] * 1e3);
        }
    }
    double mc = zb_median(tc, steps);
    double *tot = malloc(sizeof(double) * (size_t)steps);
    for (int i = 0; i < steps; i++)
        tot[i] = tf[i] + tb[i] + tw[i];
    double mf = zb_median(tf, steps), mb = zb_median(tb, steps), mw = zb_median(tw, steps);
    double mo = zb_median(to, steps), mt = zb_median(tot, steps);
    double gflops = 6.0 * (double)nparams * N / mt / 1e9;
    printf("\nmedian over %d steps (ms):\n", steps);
    printf("  %-22s %8.1f\n  %-22s %8.1f\n  %-22s %8.1f\n", "forward (F)", mf * 1e3,
           "backward_input (B)", mb * 1e3, "backward_weight (W)", mw * 1e3);
    printf("  %-22s %8.1f   (%.0f tokens/s, %.1f effective GFLOP/s)\n", "F+B+W", mt * 1e3,
           N / mt, gflops);
    printf("  %-22s %8.1f   (%.1f effective GFLOP/s by CPU time)\n", "F+B+W thread CPU time",
           mc * 1e3, 6.0 * (double)nparams * N / mc / 1e9);
    printf("  %-22s %8.1f\n  %-22s %8.1f   (%.0f tokens/s)\n", "fold + AdamW", mo * 1e3,
           "whole step", (mt + mo) * 1e3, N / (mt + mo));
    printf("  %-22s %8.1f\n", "whole step thread CPU", zb_median(tcs, steps) * 1e3);
    size_t af, ab;
    zb_gpt2_stage_mem(&cfg, &span, B, T, &af, &ab);
    printf("stash: %.1f MB after F, %.1f MB after B\n", af / 1e6, ab / 1e6);
    zb_gpt2_stash_free(st);
    zb_adamw_state_free(&opt);
    zb_gpt2_grads_free(&g);
    zb_gpt2_params_free(&p);
    free(tok), free(tgt), free(units), free(tf), free(tb), free(tw), free(to), free(tot), free(tc), free(tcs);
    return 0;
}
