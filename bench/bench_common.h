/* What several benchmarks share: positional integer arguments, medians, GPT-2 124M shapes.
 * Header-only: each bench is one executable. */
#ifndef ZBPP_BENCH_COMMON_H
#define ZBPP_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "zbpp/gpt2.h"

/* argv[i] as an integer in [lo, hi], or `def` when absent. A bad value prints
 * "<prog>: <name> must be an integer in [lo, hi]" and exits 2 (bad usage). */
static inline int bench_int_arg(const char *prog, int argc, char **argv, int i, int def, int lo,
                                int hi, const char *name)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s must be an integer in [%d, %d]\n", prog, name, lo, hi);
        exit(2);
    }
    return (int)v;
}

/* qsort's order for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (v is sorted in place; the upper middle for an even n). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* GPT-2 124M (C = 768, NH = 12, vocabulary 50257 padded to 50304, 1024 positions) with `layers`
 * blocks (12 in the real model). */
static inline zb_gpt2_config_t bench_gpt2_124m(int layers)
{
    return (zb_gpt2_config_t){.max_seq = 1024, .vocab = 50257, .padded_vocab = 50304,
                              .layers = layers, .heads = 12, .channels = 768};
}

/* The GPT-2 124M matrix products of one microbatch of 256 tokens (M x N x K, transposes):
 * forward out = inp · W^T (NT); B: dinp = dout · W (NN); W: dW = dout^T · inp (TN). */
typedef struct {
    const char *what;
    int ta, tb, M, N, K;
} bench_gemm_shape_t;

enum { BENCH_GPT2_GEMM_SHAPES = 8 };
static const bench_gemm_shape_t bench_gpt2_gemm_shapes[BENCH_GPT2_GEMM_SHAPES] = {
    {"qkv fwd      256x2304x768 NT", 0, 1, 256, 2304, 768},
    {"fc fwd       256x3072x768 NT", 0, 1, 256, 3072, 768},
    {"fcproj fwd   256x768x3072 NT", 0, 1, 256, 768, 3072},
    {"lm head fwd  256x50304x768 NT", 0, 1, 256, 50304, 768},
    {"fc B         256x768x3072 NN", 0, 0, 256, 768, 3072},
    {"fc W         3072x768x256 TN", 1, 0, 3072, 768, 256},
    {"lm head B    256x768x50304 NN", 0, 0, 256, 768, 50304},
    {"lm head W    50304x768x256 TN", 1, 0, 50304, 768, 256},
};

#endif
