/* bench_peak — the single-core fp32 FMA ceiling of this CPU, to judge BLAS figures against.
 *
 * Runs independent chains of fused multiply-adds on the widest vectors the compiler targets
 * (-march=native: AVX-512 here) with enough accumulators to hide FMA latency, and reports
 * GFLOP/s (2 FLOP per lane per FMA), median of several runs. No library involved.
 * Where the CPU has AVX512-BF16, the same for its bf16 dot product (vdpbf16ps: 32 bf16 pairs into
 * 16 fp32 sums, 64 FLOP), the ceiling of `--precision bf16` products without AMX, and its ratio
 * to the fp32 peak (about 0.5 on an Emerald Rapids VM: bf16 cannot beat fp32 there).
 * Usage: bench_peak [runs] */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/nn.h"
#include "zbpp/util.h"

#if defined(__AVX512F__)
typedef __m512 vec_t;
#define LANES 16
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUM(v) _mm512_reduce_add_ps(v)
#define ISA "AVX-512"
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec_t;
#define LANES 8
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
static float vsum256(__m256 v)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#define VSUM(v) vsum256(v)
#define ISA "AVX2+FMA"
#else
#error "bench_peak needs AVX2+FMA or AVX-512 (build with -march=native)"
#endif

#define ACCS 12 /* > latency (4) x ports (2): keeps both FMA pipes busy */

static float fma_loop(long iters, float *sink)
{
    vec_t acc[ACCS];
    for (int i = 0; i < ACCS; i++)
        acc[i] = VSET1(0.001f * (float)i);
    const vec_t a = VSET1(0.999999f), b = VSET1(1e-7f);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < ACCS; i++)
            acc[i] = VFMA(acc[i], a, b);
    vec_t s = acc[0];
    for (int i = 1; i < ACCS; i++)
        s = VADD(s, acc[i]);
    *sink = VSUM(s);
    return *sink;
}

/* The same chains of vdpbf16ps; compiled for AVX512-BF16 whatever -march says, run only where
 * the CPU has it. */
__attribute__((target("avx512f,avx512bf16"))) static float bf16_dot_loop(long iters, float *sink)
{
    __m512 acc[ACCS];
    for (int i = 0; i < ACCS; i++) /* distinct, or the compiler merges the chains */
        acc[i] = _mm512_set1_ps(0.001f * (float)i);
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80); /* 1.0 */
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380); /* 2^-24 */
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < ACCS; i++)
            acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    float s = 0;
    for (int i = 0; i < ACCS; i++)
        s += _mm512_reduce_add_ps(acc[i]);
    *sink = s;
    return s;
}

/* Median GFLOP/s of `runs` timed calls of loop (flop per iteration given), after a warm-up. */
static double median_gflops(float (*loop)(long, float *), double flop_per_iter, int runs,
                            float *sink, double *best)
{
    const long iters = 20L * 1000 * 1000;
    double gflops[100];
    loop(iters / 10, sink); /* warm up clocks */
    for (int r = 0; r < runs; r++) {
        double t0 = zb_now();
        loop(iters, sink);
        gflops[r] = flop_per_iter * (double)iters / (zb_now() - t0) / 1e9;
    }
    zb_sort_doubles(gflops, (size_t)runs);
    *best = gflops[runs - 1];
    return gflops[runs / 2];
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 100) {
        fprintf(stderr, "bench_peak: runs must be 1..100\n");
        return 2;
    }
    float sink = 0;
    double best, fp32 = median_gflops(fma_loop, 2.0 * LANES * ACCS, runs, &sink, &best);
    printf("single-core fp32 FMA peak (%s, %d accumulators): median %.1f GFLOP/s, best %.1f "
           "(runs %d, checksum %g)\n",
           ISA, ACCS, fp32, best, runs, (double)sink);
    if (!(zb_cpu_features() & ZB_CPU_AVX512_BF16)) {
        printf("single-core bf16 dot-product peak: not measured (no AVX512-BF16)\n");
        return 0;
    }
    double bf16 = median_gflops(bf16_dot_loop, 64.0 * ACCS, runs, &sink, &best);
    printf("single-core bf16 dot-product peak (AVX512-BF16 vdpbf16ps, %d accumulators): median "
           "%.1f GFLOP/s, best %.1f, %.2fx the fp32 peak (checksum %g)\n",
           ACCS, bf16, best, bf16 / fp32, (double)sink);
    return 0;
}
