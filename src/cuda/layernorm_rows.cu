// fp32 LayerNorm, one warp a row with the row in registers (layernorm_rows.h). For rows of
// C = 4·32·NV channels or fewer (NV float4's a lane, NV <= kRowVecs) with 16-byte aligned rows:
// one read of x (and dout), no block barriers, where the block kernels of kernels.cu read x
// three times with two block reductions a row.
//
// ZB_FLASH_EMULATE builds this file as plain C++ for the CPU (tests/flash_emulation.h supplies
// threads and shuffles), so that the kernels run in a CPU test against the CPU's LayerNorm
// (tests/test_layernorm_rows_emulated.c).
#include "cuda/layernorm_rows.h"

#include <math.h>
#include <stdint.h>
#include <type_traits>

#ifndef ZB_FLASH_EMULATE
#define FLASH_LAUNCH(kernel, grid, block, stream, ...) \
    ((kernel)<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__))
#endif

namespace {

template <typename T> __device__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

constexpr int kRowWarps = 4;  // rows per block
constexpr int kRowVecs = 8;   // float4's a lane at most: C <= 1024

template <int NV>
__global__ void __launch_bounds__(kRowWarps * 32)
    layernorm_forward_rows_k(float *out, float *mean, float *rstd, const float *inp,
                             const float *weight, const float *bias, int N, int C)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * kRowWarps + (threadIdx.x >> 5);
    if (row >= N)
        return;  // the whole warp leaves: the shuffles below see full warps
    int nv = C / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(inp + (size_t)row * C);
    float4 x[NV] = {}; /* set where k < nv, read only there */
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (lane + 32 * i < nv) {
            x[i] = x4[lane + 32 * i];
            s += (double)x[i].x + x[i].y + x[i].z + x[i].w;
        }
    double m = warp_sum(s) / C, v = 0.0;
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (lane + 32 * i < nv) {
            double a = x[i].x - m, b = x[i].y - m, c = x[i].z - m, d = x[i].w - m;
            v += a * a + b * b + c * c + d * d;
        }
    v = warp_sum(v);
    float mf = (float)m, rf = (float)(1.0 / sqrt(v / C + 1e-5));
    float4 *o4 = reinterpret_cast<float4 *>(out + (size_t)row * C);
    const float4 *w4 = reinterpret_cast<const float4 *>(weight),
                 *b4 = reinterpret_cast<const float4 *>(bias);
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int k = lane + 32 * i;
        if (k < nv) {
            float4 w = w4[k], b = b4[k], y;
            y.x = (x[i].x - mf) * rf * w.x + b.x;
            y.y = (x[i].y - mf) * rf * w.y + b.y;
            y.z = (x[i].z - mf) * rf * w.z + b.z;
            y.w = (x[i].w - mf) * rf * w.w + b.w;
            o4[k] = y;
        }
    }
    if (lane == 0) {
        mean[row] = mf;
        rstd[row] = rf;
    }
}

template <int NV>
__global__ void __launch_bounds__(kRowWarps * 32)
    layernorm_backward_input_rows_k(float *dinp, const float *dout, const float *inp,
                                    const float *mean, const float *rstd, const float *weight,
                                    int N, int C)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * kRowWarps + (threadIdx.x >> 5);
    if (row >= N)
        return;
    int nv = C / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(inp + (size_t)row * C),
                 *d4 = reinterpret_cast<const float4 *>(dout + (size_t)row * C),
                 *w4 = reinterpret_cast<const float4 *>(weight);
    float m = mean[row], r = rstd[row];
    float4 xhat[NV] = {}, dnorm[NV] = {}; /* set where k < nv, read only there */
    float a = 0.0f, b = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int k = lane + 32 * i;
        if (k < nv) {
            float4 x = x4[k], d = d4[k], w = w4[k];
            xhat[i] = float4{(x.x - m) * r, (x.y - m) * r, (x.z - m) * r, (x.w - m) * r};
            dnorm[i] = float4{w.x * d.x, w.y * d.y, w.z * d.z, w.w * d.w};
            a += dnorm[i].x + dnorm[i].y + dnorm[i].z + dnorm[i].w;
            b += dnorm[i].x * xhat[i].x + dnorm[i].y * xhat[i].y + dnorm[i].z * xhat[i].z +
                 dnorm[i].w * xhat[i].w;
        }
    }
    float dm = warp_sum(a) / (float)C, dxm = warp_sum(b) / (float)C;
    float4 *dx4 = reinterpret_cast<float4 *>(dinp + (size_t)row * C);
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int k = lane + 32 * i;
        if (k < nv) {
            float4 g = dx4[k];
            g.x += (dnorm[i].x - dm - xhat[i].x * dxm) * r;
            g.y += (dnorm[i].y - dm - xhat[i].y * dxm) * r;
            g.z += (dnorm[i].z - dm - xhat[i].z * dxm) * r;
            g.w += (dnorm[i].w - dm - xhat[i].w * dxm) * r;
            dx4[k] = g;
        }
    }
}

// NV (float4's a lane) for N rows the warp kernels take, 0 for the block kernels' rows
int ln_row_vecs(int N, int C, const void *p0, const void *p1, const void *p2, const void *p3)
{
    auto al = [](const void *p) { return ((uintptr_t)p & 15) == 0; };
    if (N < 1 || C % 4 || !al(p0) || !al(p1) || !al(p2) || !al(p3))
        return 0;
    int nv = (C / 4 + 31) / 32;
    return nv <= kRowVecs ? nv : 0;
}

// launch(NV) for nv float4's a lane (1..kRowVecs, NV as a compile-time constant); false else
template <typename Launch> bool by_row_vecs(int nv, Launch launch)
{
    switch (nv) {
    case 1: launch(std::integral_constant<int, 1>{}); return true;
    case 2: launch(std::integral_constant<int, 2>{}); return true;
    case 3: launch(std::integral_constant<int, 3>{}); return true;
    case 4: launch(std::integral_constant<int, 4>{}); return true;
    case 5: launch(std::integral_constant<int, 5>{}); return true;
    case 6: launch(std::integral_constant<int, 6>{}); return true;
    case 7: launch(std::integral_constant<int, 7>{}); return true;
    case 8: launch(std::integral_constant<int, 8>{}); return true;
    default: return false;
    }
}

}  // namespace

bool zb_cuk_layernorm_rows_forward(cudaStream_t s, float *out, float *mean, float *rstd,
                                   const float *inp, const float *weight, const float *bias,
                                   int N, int C)
{
    const int nv = ln_row_vecs(N, C, out, inp, weight, bias);
    const int blocks = (N + kRowWarps - 1) / kRowWarps, threads = kRowWarps * 32;
    return by_row_vecs(nv, [&](auto v) {
        FLASH_LAUNCH(layernorm_forward_rows_k<decltype(v)::value>, blocks, threads, s, out, mean,
                     rstd, inp, weight, bias, N, C);
    });
}

bool zb_cuk_layernorm_rows_backward_input(cudaStream_t s, float *dinp, const float *dout,
                                          const float *inp, const float *mean, const float *rstd,
                                          const float *weight, int N, int C)
{
    const int nv = ln_row_vecs(N, C, dinp, dout, inp, weight);
    const int blocks = (N + kRowWarps - 1) / kRowWarps, threads = kRowWarps * 32;
    return by_row_vecs(nv, [&](auto v) {
        FLASH_LAUNCH(layernorm_backward_input_rows_k<decltype(v)::value>, blocks, threads, s, dinp,
                     dout, inp, mean, rstd, weight, N, C);
    });
}
