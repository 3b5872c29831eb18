/* What several benchmarks share: positional integer arguments, GPT-2 124M shapes.
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

/* GPT-2 124M (C = 768, NH = 12, vocabulary 50257 padded to 50304, 1024 positions) with `layers`
 * blocks (12 in the real model). */
static inline zb_gpt2_config_t bench_gpt2_124m(int layers)
{
    return (zb_gpt2_config_t){.max_seq = 1024, .vocab = 50257, .padded_vocab = 50304,
                              .layers = layers, .heads = 12, .channels = 768};
}

#endif
