/* Shared helpers of the GPU tests (label `gpu`): skip with exit code 77 and one line where no
 * CUDA device is usable, device copies, and error measures against the CPU kernels. */
#ifndef ZBPP_TESTS_CUDA_TESTUTIL_H
#define ZBPP_TESTS_CUDA_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/stream.h"
#include "zbpp/cuda.h"

/* Exit 77 ("skipped: no CUDA device") when there is no usable device: ctest shows SKIPPED. */
static inline void cuda_test_require_device(void)
{
    int n = 0;
    zb_err_t e;
    if (zb_cuda_device_count(&n, &e) != ZB_OK || n == 0) {
        printf("skipped: no CUDA device%s\n", zb_cuda_built() ? "" : " (built without CUDA)");
        exit(77);
    }
    char desc[256];
    if (zb_cuda_device_describe(0, desc, sizeof desc, &e) == ZB_OK)
        printf("device: %s\n", desc);
}

/* Deterministic uniform values in [-scale, scale). */
static inline void fill_random(float *x, size_t n, uint64_t seed, float scale)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = scale * (2.0f * (float)((s >> 40) & 0xFFFFFF) / 16777216.0f - 1.0f);
    }
}

/* max |a - b| / max |b| (0 when both are 0): error relative to the reference's scale. */
static inline double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d) || isnan(num))
            num = NAN; /* NaN sticks: a later finite d must not replace it */
        else if (d > num)
            num = d;
        if (fabs((double)b[i]) > den)
            den = fabs((double)b[i]);
    }
    return den > 0 ? num / den : num;
}

#endif
