/* bfloat16 on the host: the raw 16 bits (the top half of an IEEE float) and the two
 * conversions, round to nearest even as the GPU's __float2bfloat16_rn does (NaN stays a quiet
 * NaN). Used by the host side of the bf16 GPU path and by the tests' fake device, which must
 * round exactly as the device kernels do. */
#ifndef ZBPP_UTIL_BF16_H
#define ZBPP_UTIL_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t zb_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* ties to even */
    return (uint16_t)(u >> 16);
}

static inline float zb_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* x rounded to the nearest bf16, as a float. */
static inline float zb_bf16_round(float x) { return zb_bf16_to_f32(zb_bf16_from_f32(x)); }

#endif
