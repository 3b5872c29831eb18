// bf16-storage kernels on a GEMM's output (kernels_bf16.h): the classifier's softmax +
// cross-entropy + gradient on the logits, and the epilogue where cuBLASLt has no fused one.
// fp32 arithmetic, bf16 stores rounded to nearest even; fixed reduction trees, no atomics.
#include "cuda/kernels_bf16.h"
#include "cuda/kernels_bf16_device.h"

#include <cuda_bf16.h>
#include <math.h>

namespace {

constexpr int kClassifierThreads = 512;

// ---- the classifier: softmax + cross-entropy + its gradient, one block per row ----

// (max, sum of exp(x − max)) pairs, merged; an empty side is (−inf, 0)
struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b)
{
    if (a.m == -INFINITY)
        return b;
    if (b.m == -INFINITY)
        return a;
    float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum t = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
        v = merge(v, t);
    }
    return v;
}

// Merged over the block in a fixed tree; the result on every thread.
__device__ MaxSum block_merge(MaxSum v, MaxSum *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_merge(v);
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    MaxSum r = lane < nw ? sh[lane] : MaxSum{-INFINITY, 0.0f};
    return warp_merge(r);
}

// W: elements per access (8 when Vp % 8 == 0 and the rows are 16-byte aligned). Each thread
// reads, then overwrites, only its own elements, so the in-place update needs no barrier.
template <int W>
__global__ void __launch_bounds__(kClassifierThreads)
    crossentropy_fused_k(float *losses, zb_bf16_t *logits, const int *targets, float dloss, int V,
                         int Vp)
{
    __shared__ MaxSum sh[32];
    size_t n = blockIdx.x;
    zb_bf16_t *row = logits + n * Vp;
    int target = targets[n];
    float target_logit = 0.0f;
    if (threadIdx.x == 0)
        target_logit = __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(row)[target]);
    MaxSum acc = {-INFINITY, 0.0f};
    for (int j = threadIdx.x * W; j < V; j += blockDim.x * W) {
        float x[W];
        load_bf16<W>(row + j, x);
        // online: one running max per thread, the sum rescaled when it grows
#pragma unroll
        for (int k = 0; k < W; k++) {
            if (j + k >= V)
                break;
            if (x[k] > acc.m) {
                acc.s = acc.s * expf(acc.m - x[k]) + 1.0f;
                acc.m = x[k];
            } else {
                acc.s += expf(x[k] - acc.m);
            }
        }
    }
    MaxSum tot = block_merge(acc, sh);
    float inv = 1.0f / tot.s;
    if (threadIdx.x == 0)
        losses[n] = tot.m + logf(tot.s) - target_logit;
    for (int j = threadIdx.x * W; j < Vp; j += blockDim.x * W) {
        float x[W];
        load_bf16<W>(row + j, x);
#pragma unroll
        for (int k = 0; k < W; k++) {
            int col = j + k;
            float p = expf(x[k] - tot.m) * inv;
            if (col == target)
                p -= 1.0f;
            x[k] = col < V ? p * dloss : 0.0f;
        }
        store_bf16<W>(row + j, x);
    }
}

// ---- the GEMM epilogue where cuBLASLt has no fused one: one thread per element ----

template <typename T> __device__ __forceinline__ float load_as_float(const T *p)
{
    if constexpr (sizeof(T) == 2)
        return __bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p));
    else
        return *p;
}

template <typename T> __device__ __forceinline__ void store_from_float(T *p, float v)
{
    if constexpr (sizeof(T) == 2)
        *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(v);
    else
        *p = v;
}

// epilogue values as zb_cu_epilogue_t (gemm.h): 1 bias, 2 GELU with aux and bias, 3 GELU grad
template <typename T, typename BT>
__global__ void epilogue_apply_k(int epilogue, T *C, int ldc, T *aux, int ldaux, const BT *bias,
                                 int M, int N)
{
    size_t total = (size_t)M * N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / N;
        int j = (int)(i % N);
        T *c = C + r * ldc + j;
        float v = load_as_float(c);
        if (epilogue == 1) {
            store_from_float(c, v + load_as_float(bias + j));
        } else if (epilogue == 2) {
            T *a = aux + r * ldaux + j;
            store_from_float(a, v + load_as_float(bias + j));
            store_from_float(c, gelu(load_as_float(a)));
        } else {
            store_from_float(c, v * gelu_grad(load_as_float(aux + r * ldaux + j)));
        }
    }
}

template <typename T>
void epilogue_apply_as(cudaStream_t s, int epilogue, T *C, int ldc, T *aux, int ldaux,
                       const void *bias, int bias_bf16, int M, int N)
{
    size_t total = (size_t)M * N;
    if (bias_bf16)
        epilogue_apply_k<<<blocks_for(total), kThreads, 0, s>>>(
            epilogue, C, ldc, aux, ldaux, (const zb_bf16_t *)bias, M, N);
    else
        epilogue_apply_k<<<blocks_for(total), kThreads, 0, s>>>(epilogue, C, ldc, aux, ldaux,
                                                                (const float *)bias, M, N);
}

} // namespace

extern "C" {

void zb_cuk16_crossentropy_fused(cudaStream_t s, float *losses, zb_bf16_t *logits,
                                 const int *targets, float dloss, int N, int V, int Vp)
{
    if (N <= 0)
        return;
    if (Vp % kVec == 0 && aligned16(logits))
        crossentropy_fused_k<kVec><<<N, kClassifierThreads, 0, s>>>(losses, logits, targets, dloss,
                                                                   V, Vp);
    else
        crossentropy_fused_k<1><<<N, kClassifierThreads, 0, s>>>(losses, logits, targets, dloss, V,
                                                                Vp);
}

void zb_cuk16_epilogue_apply(cudaStream_t s, int epilogue, void *C, int ldc, int c_bf16,
                             void *aux, int ldaux, const void *bias, int bias_bf16, int M, int N)
{
    if ((size_t)M * N == 0 || epilogue < 1 || epilogue > 3)
        return;
    if (c_bf16)
        epilogue_apply_as(s, epilogue, (zb_bf16_t *)C, ldc, (zb_bf16_t *)aux, ldaux, bias,
                          bias_bf16, M, N);
    else
        epilogue_apply_as(s, epilogue, (float *)C, ldc, (float *)aux, ldaux, bias, bias_bf16, M,
                          N);
}

} // extern "C"
