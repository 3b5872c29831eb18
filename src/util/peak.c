/* The fp32 FMA ceiling of one core of this CPU, measured (zbpp/util.h): the MFU denominator when
 * the user gives none. Independent chains of fused multiply-adds on the widest vectors the build
 * targets (-march=native), enough of them to hide the FMA latency, as bench/bench_peak.c does;
 * a scalar loop where the target has no FMA vectors (its figure is then that target's). */
#include "zbpp/util.h"

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec_t;
#define LANES 16
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VFIRST(v) _mm512_cvtss_f32(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec_t;
#define LANES 8
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VFIRST(v) _mm256_cvtss_f32(v)
#else
typedef float vec_t;
#define LANES 1
#define VSET1(x) (x)
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VFIRST(v) (v)
#endif

#define CHAINS 12 /* > FMA latency (4) x ports (2): both pipes stay busy */
static volatile float g_sink; /* the loops' result is stored: they cannot be dropped */

static double fma_seconds(long iters)
{
    vec_t acc[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        acc[i] = VSET1(0.001f * (float)i);
    const vec_t a = VSET1(0.999999f), b = VSET1(1e-7f);
    double t0 = zb_now();
    for (long it = 0; it < iters; it++) {
        /* unrolled at any -O, so the chains live in registers, not memory */
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++)
            acc[i] = VFMA(acc[i], a, b);
    }
    double t = zb_now() - t0;
    float s = 0;
    for (int i = 0; i < CHAINS; i++)
        s += VFIRST(acc[i]);
    g_sink = s;
    return t;
}

double zb_cpu_peak_flops_per_core(void)
{
    static double cached;
    if (cached > 0)
        return cached;
    const long iters = 200000; /* a millisecond or two */
    double best = 0;
    for (int run = 0; run < 5; run++) { /* the best run: an interruption slows only one */
        double t = fma_seconds(iters);
        double flops = 2.0 * LANES * CHAINS * (double)iters / (t > 0 ? t : 1e-9);
        if (flops > best)
            best = flops;
    }
    cached = best;
    return cached;
}
