// CUDA only (included by the bf16 .cu files). The device helpers the bf16 kernels share
// (kernels_bf16.cu, kernels_bf16_gemm_out.cu): launch sizes, loads and stores of W consecutive
// elements, GELU. They sit in an unnamed namespace, as they did when one file held all the
// kernels: each file gets its own internal copy, inlined, and compiles the same code.
#ifndef ZBPP_CUDA_KERNELS_BF16_DEVICE_H
#define ZBPP_CUDA_KERNELS_BF16_DEVICE_H

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "cuda/bf16_type.h"

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;                            // bf16 per 128-bit access
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

int blocks_for(size_t n, int threads = kThreads)
{
    size_t b = (n + threads - 1) / threads;
    return (int)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);  // grid-stride beyond this
}

bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

// ---- loads and stores of W consecutive elements (W = 8: one 128-bit access; W = 1: scalar) ----

template <int W> __device__ __forceinline__ void load_bf16(const zb_bf16_t *p, float *f)
{
    if constexpr (W == kVec) {
        uint4 u = *reinterpret_cast<const uint4 *>(p);
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float2 t = __bfloat1622float2(h[k]);
            f[2 * k] = t.x;
            f[2 * k + 1] = t.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < W; k++)
            f[k] = __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[k]);
    }
}

template <int W> __device__ __forceinline__ void store_bf16(zb_bf16_t *p, const float *f)
{
    if constexpr (W == kVec) {
        uint4 u;
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
        for (int k = 0; k < 4; k++)
            h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
        *reinterpret_cast<uint4 *>(p) = u;
    } else {
#pragma unroll
        for (int k = 0; k < W; k++)
            reinterpret_cast<__nv_bfloat16 *>(p)[k] = __float2bfloat16_rn(f[k]);
    }
}

template <int W> __device__ __forceinline__ void load_f32(const float *p, float *f)
{
    if constexpr (W == kVec) {
        float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z,
        f[7] = b.w;
    } else {
#pragma unroll
        for (int k = 0; k < W; k++)
            f[k] = p[k];
    }
}

template <int W> __device__ __forceinline__ void store_f32(float *p, const float *f)
{
    if constexpr (W == kVec) {
        reinterpret_cast<float4 *>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
        reinterpret_cast<float4 *>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
    } else {
#pragma unroll
        for (int k = 0; k < W; k++)
            p[k] = f[k];
    }
}

// GELU, tanh form, as src/nn/elementwise.c
__device__ __forceinline__ float gelu(float x)
{
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float gelu_grad(float x)
{
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
}

} // namespace

#endif
