/* Error bounds of flash attention against the materialised fp32 attention on the same inputs:
 * max |flash − reference| / max |reference| per tensor; lse: |error| / max(1, |lse|).
 * Shared by the host reference's test and the GPU test; docs/cuda.md ("Flash attention")
 * derives them.
 *
 * fp32 (the host reference without rounding): only the summation order and exp2 vs exp differ,
 * measured ≤ 8.5e-7 on the test's shapes; the bound is 5e-6.
 * bf16 (the kernel's rounding points: P and dS rounded before their products, the outputs when
 * stored; inputs are bf16 values on both sides): one rounding is ≤ u = 2^-9 relative. Each
 * output carries its own final rounding (≤ u of the largest entry) plus the propagated
 * roundings of P or dS, independent per term, which add up like a random walk next to a result
 * that grows at least as fast; measured ≤ 3.2u (dk at T = 1024, hs = 64, host model) and the
 * bound is 8u. lse is computed from the unrounded exponentials: the fp32 bound, widened to 1e-5
 * for the GPU's approximate exp2 / log2 (2 ulp each). */
#ifndef ZBPP_TESTS_FLASH_BOUNDS_H
#define ZBPP_TESTS_FLASH_BOUNDS_H

#include <math.h>
#include <stdbool.h>

typedef struct {
    double out, dq, dk, dv, lse;
} flash_bounds_t;

#define FLASH_BF16_U (1.0 / 512.0)

static inline flash_bounds_t flash_bounds(bool bf16)
{
    if (!bf16)
        return (flash_bounds_t){5e-6, 5e-6, 5e-6, 5e-6, 2e-6};
    double b = 8 * FLASH_BF16_U;
    return (flash_bounds_t){b, b, b, b, 1e-5};
}

/* The fp32 kernel (src/cuda/flash_attn32.cu, fp32 FMAs throughout) at sequence length T: each
 * output sums up to T terms whose fp32 roundings (u = 2^-24 each, in the scores' dot products,
 * exp2 and the running sums) are independent, so its error relative to the largest entry grows
 * like √T·u: measured ≤ 1.1·√T·u against the exact (double) attention in the CPU emulation
 * (T ≤ 130). The bounds: 4·√T·u against the exact attention (vs_exact), 8·√T·u against another
 * fp32 computation (the GPU's materialised attention, which carries its own error), never below
 * 2e-6. lse: 2e-6 (exp2 / log2 of the host's libm), 1e-5 on a GPU (2 ulp each). */
#define FLASH_FP32_U (1.0 / 16777216.0)

static inline flash_bounds_t flash32_bounds(int T, bool vs_exact, bool gpu)
{
    double b = (vs_exact ? 4.0 : 8.0) * sqrt((double)T) * FLASH_FP32_U;
    b = b > 2e-6 ? b : 2e-6;
    return (flash_bounds_t){b, b, b, b, gpu ? 1e-5 : 2e-6};
}

/* The TF32 kernel (src/cuda/flash_attn_tf32.cu): every product's operands rounded to TF32
 * (u = 2^-11 relative, round to nearest), fp32 accumulation, the outputs stored in fp32. The
 * errors are the bf16 kernel's with a 4x smaller u and no rounding of the stored outputs:
 * 8u relative to the largest entry against the exact attention; lse from fp32 exponentials of
 * rounded scores: 8u as well (1e-5 more on a GPU for exp2 / log2). */
#define FLASH_TF32_U (1.0 / 2048.0)

static inline flash_bounds_t flash_tf32_bounds(bool gpu)
{
    double b = 8 * FLASH_TF32_U;
    return (flash_bounds_t){b, b, b, b, b + (gpu ? 1e-5 : 0.0)};
}

/* The 3xTF32 kernels (the same file, Tf32x3): each product keeps ~2^-20 of relative error (the
 * dropped small·small term and the rounding of each small part, ≤ 2^-22 |a·b| each) where an
 * fp32 FMA keeps 2^-24, and every sum is fp32 as in the FMA kernel: the FMA kernel's √T·u
 * shape with a larger constant. Measured in the CPU emulation (T ≤ 130, the same inputs as the
 * FMA kernel's test): ≤ 1.43·√T·u (dk, T 130, hs 64), 1.0–2.4x the FMA kernel's errors; the
 * bounds are flash32_bounds' times 2 (8·√T·u against the exact attention). A kernel that
 * rounded its operands to TF32 once (errors ~2^-11) fails them by two orders of magnitude. */
static inline flash_bounds_t flash_3xtf32_bounds(int T, bool vs_exact, bool gpu)
{
    flash_bounds_t b = flash32_bounds(T, vs_exact, gpu);
    b.out *= 2, b.dq *= 2, b.dk *= 2, b.dv *= 2;
    return b;
}

#endif
