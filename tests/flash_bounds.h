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

#endif
