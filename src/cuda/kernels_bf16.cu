// bf16-storage kernels of the GPT-2 stage (kernels_bf16.h): fp32 arithmetic, bf16 loads and
// stores rounded to nearest even, 8 bf16 (128 bits) per access where the shape and the pointers
// allow it (a scalar path otherwise, so an odd size is slow, never wrong). Reductions use fixed
// shuffle trees and fixed row chunks: no atomics, the same bits on every run. The classifier and
// the GEMM epilogue are in kernels_bf16_gemm_out.cu; the helpers both use in kernels_bf16_device.h.
#include "cuda/kernels.h"
#include "cuda/kernels_bf16.h"
#include "cuda/kernels_bf16_device.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr int kRowWarps = 4;                       // rows (one warp each) per LayerNorm block
constexpr int kMaxRegVecs = 8;                     // LayerNorm rows up to 32·8·8 = 2048 in registers
constexpr float kLnEps = 1e-5f;

unsigned grid_y(int n)
{
    return (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n);
}

// fp32 master parameters: scalar loads (their offsets in the packed parameter buffer need not
// be 16-byte aligned; they are few and stay in L1)
__device__ __forceinline__ void load_param8(const float *p, float *f)
{
#pragma unroll
    for (int k = 0; k < kVec; k++)
        f[k] = __ldg(p + k);
}

__device__ __forceinline__ float round_bf16(float x)
{
    return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ---- conversions and elementwise: groups of W elements, grid-stride ----

template <int W> __global__ void from_f32_k(zb_bf16_t *dst, const float *src, size_t groups)
{
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups;
         g += (size_t)gridDim.x * blockDim.x) {
        float f[W];
        load_f32<W>(src + g * W, f);
        store_bf16<W>(dst + g * W, f);
    }
}

template <int W> __global__ void to_f32_k(float *dst, const zb_bf16_t *src, size_t groups)
{
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups;
         g += (size_t)gridDim.x * blockDim.x) {
        float f[W];
        load_bf16<W>(src + g * W, f);
        store_f32<W>(dst + g * W, f);
    }
}

enum class Ew { Gelu, GeluBackward, Add };

// out = op(x, y) per element: gelu(x), y·gelu'(x), x + y
template <Ew OP, int W>
__global__ void elementwise_k(zb_bf16_t *out, const zb_bf16_t *x, const zb_bf16_t *y,
                              size_t groups)
{
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups;
         g += (size_t)gridDim.x * blockDim.x) {
        float a[W], b[W];
        load_bf16<W>(x + g * W, a);
        if constexpr (OP != Ew::Gelu)
            load_bf16<W>(y + g * W, b);
#pragma unroll
        for (int k = 0; k < W; k++) {
            if constexpr (OP == Ew::Gelu)
                a[k] = gelu(a[k]);
            else if constexpr (OP == Ew::GeluBackward)
                a[k] = b[k] * gelu_grad(a[k]);
            else
                a[k] = a[k] + b[k];
        }
        store_bf16<W>(out + g * W, a);
    }
}

// one thread per 8 channels of a row
__global__ void encoder_forward_k(zb_bf16_t *out, const int *tokens, const float *wte,
                                  const float *wpe, int T, int C, size_t groups)
{
    int gpr = C / kVec;
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups;
         g += (size_t)gridDim.x * blockDim.x) {
        size_t bt = g / gpr;
        int c = (int)(g % gpr) * kVec, t = (int)(bt % T);
        float e[kVec], p[kVec];
        load_param8(wte + (size_t)tokens[bt] * C + c, e);
        load_param8(wpe + (size_t)t * C + c, p);
#pragma unroll
        for (int k = 0; k < kVec; k++)
            e[k] += p[k];
        store_bf16<kVec>(out + bt * C + c, e);
    }
}

// ---- residual add + LayerNorm forward: one warp per row ----
//
// NV > 0: the row's vectors (lane, lane + 32, ...) stay in NV register groups of 8, one read
// of the inputs. NV == 0 (rows over 2048 channels): the same arithmetic in three passes over
// global memory, x read back from res_out (this thread wrote it; res_out may be a itself, an
// in-place residual stream) or, without res_out, recomputed from a and b (same bits).

template <int NV>
__global__ void __launch_bounds__(kRowWarps * 32)
    residual_layernorm_forward_k(zb_bf16_t *res_out, zb_bf16_t *ln_out, float *mean, float *rstd,
                                 const zb_bf16_t *a, const zb_bf16_t *b, const float *weight,
                                 const float *bias, int N, int C)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * kRowWarps + (threadIdx.x >> 5);
    if (row >= N)
        return;  // the whole warp leaves: the shuffles below see full warps
    int nv = C / kVec;
    size_t off = (size_t)row * C;
    constexpr int R = NV > 0 ? NV : 1;
    float x[R][kVec];
    // x = bf16(a + b), as res_out stores it
    auto load_x = [&](int v, float *f) {
        load_bf16<kVec>(a + off + v * kVec, f);
        if (b) {
            float t[kVec];
            load_bf16<kVec>(b + off + v * kVec, t);
#pragma unroll
            for (int k = 0; k < kVec; k++)
                f[k] = round_bf16(f[k] + t[k]);
        }
    };
    float s = 0.0f;
    if constexpr (NV > 0) {
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int v = lane + 32 * i;
            if (v < nv) {
                load_x(v, x[i]);
                if (res_out)
                    store_bf16<kVec>(res_out + off + v * kVec, x[i]);
#pragma unroll
                for (int k = 0; k < kVec; k++)
                    s += x[i][k];
            }
        }
    } else {
        for (int v = lane; v < nv; v += 32) {
            load_x(v, x[0]);
            if (res_out)
                store_bf16<kVec>(res_out + off + v * kVec, x[0]);
#pragma unroll
            for (int k = 0; k < kVec; k++)
                s += x[0][k];
        }
    }
    auto reload_x = [&](int v, float *f) {
        if (res_out)
            load_bf16<kVec>(res_out + off + v * kVec, f);
        else
            load_x(v, f);
    };
    float m = warp_sum(s) / (float)C;
    float q = 0.0f;
    if constexpr (NV > 0) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane + 32 * i < nv) {
#pragma unroll
                for (int k = 0; k < kVec; k++) {
                    float d = x[i][k] - m;
                    q += d * d;
                }
            }
    } else {
        for (int v = lane; v < nv; v += 32) {
            reload_x(v, x[0]);
#pragma unroll
            for (int k = 0; k < kVec; k++) {
                float d = x[0][k] - m;
                q += d * d;
            }
        }
    }
    float r = rsqrtf(warp_sum(q) / (float)C + kLnEps);
    auto normalise = [&](int v, const float *xv) {
        float w[kVec], bb[kVec], o[kVec];
        load_param8(weight + v * kVec, w);
        load_param8(bias + v * kVec, bb);
#pragma unroll
        for (int k = 0; k < kVec; k++)
            o[k] = (xv[k] - m) * r * w[k] + bb[k];
        store_bf16<kVec>(ln_out + off + v * kVec, o);
    };
    if constexpr (NV > 0) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane + 32 * i < nv)
                normalise(lane + 32 * i, x[i]);
    } else {
        for (int v = lane; v < nv; v += 32) {
            reload_x(v, x[0]);
            normalise(v, x[0]);
        }
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// ---- LayerNorm backward (input), plus the residual gradient: one warp per row ----
//
// dinp = dres + (dnorm − mean(dnorm) − xhat·mean(dnorm·xhat))·rstd with dnorm = weight·dout,
// the formula of the fp32 kernel. NV as above (registers hold xhat and dnorm).

template <int NV>
__global__ void __launch_bounds__(kRowWarps * 32)
    layernorm_backward_input_k(zb_bf16_t *dinp, const zb_bf16_t *dres, const zb_bf16_t *dout,
                               const zb_bf16_t *inp, const float *mean, const float *rstd,
                               const float *weight, int N, int C)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * kRowWarps + (threadIdx.x >> 5);
    if (row >= N)
        return;
    int nv = C / kVec;
    size_t off = (size_t)row * C;
    float m = mean[row], r = rstd[row];
    constexpr int R = NV > 0 ? NV : 1;
    float xhat[R][kVec], dn[R][kVec];
    auto load_row = [&](int v, float *xh, float *dnorm) {
        float w[kVec];
        load_bf16<kVec>(inp + off + v * kVec, xh);
        load_bf16<kVec>(dout + off + v * kVec, dnorm);
        load_param8(weight + v * kVec, w);
#pragma unroll
        for (int k = 0; k < kVec; k++) {
            xh[k] = (xh[k] - m) * r;
            dnorm[k] *= w[k];
        }
    };
    float sa = 0.0f, sb = 0.0f;
    auto accumulate = [&](const float *xh, const float *dnorm) {
#pragma unroll
        for (int k = 0; k < kVec; k++) {
            sa += dnorm[k];
            sb += dnorm[k] * xh[k];
        }
    };
    if constexpr (NV > 0) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane + 32 * i < nv) {
                load_row(lane + 32 * i, xhat[i], dn[i]);
                accumulate(xhat[i], dn[i]);
            }
    } else {
        for (int v = lane; v < nv; v += 32) {
            load_row(v, xhat[0], dn[0]);
            accumulate(xhat[0], dn[0]);
        }
    }
    float dnorm_mean = warp_sum(sa) / (float)C;
    float dnorm_xhat_mean = warp_sum(sb) / (float)C;
    auto write = [&](int v, const float *xh, const float *dnorm) {
        float o[kVec];
        if (dres)
            load_bf16<kVec>(dres + off + v * kVec, o);
#pragma unroll
        for (int k = 0; k < kVec; k++) {
            float g = (dnorm[k] - dnorm_mean - xh[k] * dnorm_xhat_mean) * r;
            o[k] = dres ? o[k] + g : g;
        }
        store_bf16<kVec>(dinp + off + v * kVec, o);
    };
    if constexpr (NV > 0) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane + 32 * i < nv)
                write(lane + 32 * i, xhat[i], dn[i]);
    } else {
        for (int v = lane; v < nv; v += 32) {
            load_row(v, xhat[0], dn[0]);
            write(v, xhat[0], dn[0]);
        }
    }
}

// ---- column partial sums over fixed chunks of ZB_CU_COLSUM_ROWS rows ----
//
// One thread per W columns of a chunk, rows in order: the same order on every run.

template <int W>
__global__ void layernorm_weight_partials_k(float *part_w, float *part_b, const zb_bf16_t *dout,
                                            const zb_bf16_t *inp, const float *mean,
                                            const float *rstd, int N, int C)
{
    int c = (blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (c >= C)
        return;
    for (int chunk = blockIdx.y; chunk * ZB_CU_COLSUM_ROWS < N; chunk += gridDim.y) {
        int n0 = chunk * ZB_CU_COLSUM_ROWS, n1 = min(N, n0 + ZB_CU_COLSUM_ROWS);
        float w[W] = {}, b[W] = {};
        for (int n = n0; n < n1; n++) {
            float d[W], x[W];
            load_bf16<W>(dout + (size_t)n * C + c, d);
            load_bf16<W>(inp + (size_t)n * C + c, x);
            float m = mean[n], r = rstd[n];
#pragma unroll
            for (int k = 0; k < W; k++) {
                w[k] += d[k] * ((x[k] - m) * r);
                b[k] += d[k];
            }
        }
        store_f32<W>(part_w + (size_t)chunk * C + c, w);
        store_f32<W>(part_b + (size_t)chunk * C + c, b);
    }
}

template <int W> __global__ void colsum_partials_k(float *part, const zb_bf16_t *a, int N, int OC)
{
    int j = (blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (j >= OC)
        return;
    for (int chunk = blockIdx.y; chunk * ZB_CU_COLSUM_ROWS < N; chunk += gridDim.y) {
        int n0 = chunk * ZB_CU_COLSUM_ROWS, n1 = min(N, n0 + ZB_CU_COLSUM_ROWS);
        float s[W] = {};
        for (int n = n0; n < n1; n++) {
            float x[W];
            load_bf16<W>(a + (size_t)n * OC + j, x);
#pragma unroll
            for (int k = 0; k < W; k++)
                s[k] += x[k];
        }
        store_f32<W>(part + (size_t)chunk * OC + j, s);
    }
}

// A launch that cannot start: for a row shape the vector kernels cannot take (C not a multiple
// of 8, a row not 16-byte aligned), the caller's launch check then reports the runtime's launch
// error (an empty grid: "invalid argument" on CUDA 13) instead of a kernel computing part of
// each row.
__global__ void refuse_k() {}

void refuse(cudaStream_t s)
{
    refuse_k<<<0, 1, 0, s>>>();
}

bool rows_ok(int C, const void *p, const void *q, const void *r = nullptr)
{
    return C % kVec == 0 && aligned16(p) && aligned16(q) && aligned16(r);
}

// rows of C channels in registers: vectors per lane (0: C over 2048, the looped variant)
int row_vecs(int C)
{
    int nv = (C / kVec + 31) / 32;
    return nv <= kMaxRegVecs ? nv : 0;
}

void elementwise(cudaStream_t s, Ew op, zb_bf16_t *out, const zb_bf16_t *x,
                        const zb_bf16_t *y, size_t n)
{
    if (n == 0)
        return;
    bool vec = n % kVec == 0 && aligned16(out) && aligned16(x) && (!y || aligned16(y));
    size_t groups = vec ? n / kVec : n;
    int blocks = blocks_for(groups);
#define EW(OP)                                                                                    \
    (vec ? elementwise_k<OP, kVec><<<blocks, kThreads, 0, s>>>(out, x, y, groups)                  \
         : elementwise_k<OP, 1><<<blocks, kThreads, 0, s>>>(out, x, y, groups))
    switch (op) {
    case Ew::Gelu: EW(Ew::Gelu); break;
    case Ew::GeluBackward: EW(Ew::GeluBackward); break;
    case Ew::Add: EW(Ew::Add); break;
    }
#undef EW
}

} // namespace

extern "C" {

void zb_cuk16_from_f32(cudaStream_t s, zb_bf16_t *dst, const float *src, size_t n)
{
    if (n == 0)
        return;
    if (n % kVec == 0 && aligned16(dst) && aligned16(src))
        from_f32_k<kVec><<<blocks_for(n / kVec), kThreads, 0, s>>>(dst, src, n / kVec);
    else
        from_f32_k<1><<<blocks_for(n), kThreads, 0, s>>>(dst, src, n);
}

void zb_cuk16_to_f32(cudaStream_t s, float *dst, const zb_bf16_t *src, size_t n)
{
    if (n == 0)
        return;
    if (n % kVec == 0 && aligned16(dst) && aligned16(src))
        to_f32_k<kVec><<<blocks_for(n / kVec), kThreads, 0, s>>>(dst, src, n / kVec);
    else
        to_f32_k<1><<<blocks_for(n), kThreads, 0, s>>>(dst, src, n);
}

void zb_cuk16_encoder_forward(cudaStream_t s, zb_bf16_t *out, const int *tokens, const float *wte,
                              const float *wpe, int B, int T, int C)
{
    size_t groups = (size_t)B * T * (C / kVec);
    if (!rows_ok(C, out, out))
        return refuse(s);
    if (groups)
        encoder_forward_k<<<blocks_for(groups), kThreads, 0, s>>>(out, tokens, wte, wpe, T, C,
                                                                  groups);
}

void zb_cuk16_residual_layernorm_forward(cudaStream_t s, zb_bf16_t *res_out, zb_bf16_t *ln_out,
                                         float *mean, float *rstd, const zb_bf16_t *a,
                                         const zb_bf16_t *b, const float *weight,
                                         const float *bias, int N, int C)
{
    if (N <= 0)
        return;
    if (!rows_ok(C, ln_out, a, b) || !aligned16(res_out))
        return refuse(s);
    int blocks = (N + kRowWarps - 1) / kRowWarps, threads = kRowWarps * 32;
#define LN_FWD(NV)                                                                                \
    residual_layernorm_forward_k<NV><<<blocks, threads, 0, s>>>(res_out, ln_out, mean, rstd, a, b, \
                                                                weight, bias, N, C)
    switch (row_vecs(C)) {
    case 1: LN_FWD(1); break;
    case 2: LN_FWD(2); break;
    case 3: LN_FWD(3); break;
    case 4: LN_FWD(4); break;
    case 5: LN_FWD(5); break;
    case 6: LN_FWD(6); break;
    case 7: LN_FWD(7); break;
    case 8: LN_FWD(8); break;
    default: LN_FWD(0); break;
    }
#undef LN_FWD
}

void zb_cuk16_layernorm_backward_input(cudaStream_t s, zb_bf16_t *dinp, const zb_bf16_t *dres,
                                       const zb_bf16_t *dout, const zb_bf16_t *inp,
                                       const float *mean, const float *rstd, const float *weight,
                                       int N, int C)
{
    if (N <= 0)
        return;
    if (!rows_ok(C, dinp, dout, inp) || !aligned16(dres))
        return refuse(s);
    int blocks = (N + kRowWarps - 1) / kRowWarps, threads = kRowWarps * 32;
#define LN_BWD(NV)                                                                                \
    layernorm_backward_input_k<NV><<<blocks, threads, 0, s>>>(dinp, dres, dout, inp, mean, rstd,  \
                                                              weight, N, C)
    switch (row_vecs(C)) {
    case 1: LN_BWD(1); break;
    case 2: LN_BWD(2); break;
    case 3: LN_BWD(3); break;
    case 4: LN_BWD(4); break;
    case 5: LN_BWD(5); break;
    case 6: LN_BWD(6); break;
    case 7: LN_BWD(7); break;
    case 8: LN_BWD(8); break;
    default: LN_BWD(0); break;
    }
#undef LN_BWD
}

void zb_cuk16_layernorm_weight_partials(cudaStream_t s, float *part_w, float *part_b,
                                        const zb_bf16_t *dout, const zb_bf16_t *inp,
                                        const float *mean, const float *rstd, int N, int C)
{
    if (N <= 0)
        return;
    unsigned chunks = grid_y(zb_cu_colsum_chunks(N));
    if (C % kVec == 0 && aligned16(dout) && aligned16(inp) && aligned16(part_w) &&
        aligned16(part_b)) {
        dim3 grid((C / kVec + 127) / 128, chunks);
        layernorm_weight_partials_k<kVec><<<grid, 128, 0, s>>>(part_w, part_b, dout, inp, mean,
                                                               rstd, N, C);
    } else {
        dim3 grid((C + 127) / 128, chunks);
        layernorm_weight_partials_k<1><<<grid, 128, 0, s>>>(part_w, part_b, dout, inp, mean, rstd,
                                                            N, C);
    }
}

void zb_cuk16_colsum_partials(cudaStream_t s, float *part, const zb_bf16_t *a, int N, int OC)
{
    if (N <= 0)
        return;
    unsigned chunks = grid_y(zb_cu_colsum_chunks(N));
    if (OC % kVec == 0 && aligned16(a) && aligned16(part)) {
        dim3 grid((OC / kVec + 127) / 128, chunks);
        colsum_partials_k<kVec><<<grid, 128, 0, s>>>(part, a, N, OC);
    } else {
        dim3 grid((OC + 127) / 128, chunks);
        colsum_partials_k<1><<<grid, 128, 0, s>>>(part, a, N, OC);
    }
}

void zb_cuk16_gelu_forward(cudaStream_t s, zb_bf16_t *out, const zb_bf16_t *inp, size_t n)
{
    elementwise(s, Ew::Gelu, out, inp, nullptr, n);
}

void zb_cuk16_gelu_backward_input(cudaStream_t s, zb_bf16_t *dinp, const zb_bf16_t *inp,
                                  const zb_bf16_t *dout, size_t n)
{
    elementwise(s, Ew::GeluBackward, dinp, inp, dout, n);
}

void zb_cuk16_residual_forward(cudaStream_t s, zb_bf16_t *out, const zb_bf16_t *a,
                               const zb_bf16_t *b, size_t n)
{
    elementwise(s, Ew::Add, out, a, b, n);
}

} // extern "C"
