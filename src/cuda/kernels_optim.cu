// The optimizer's many-tensor launches (kernels_optim.h): multi-tensor AdamW and the in-order
// sum of the gradient-norm partials.
#include "cuda/kernels_optim.h"

#include <cuda_bf16.h>
#include <stdint.h>

#include "cuda/adamw_elem.h"

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocksPerTensor = 1024; // grid-stride beyond
constexpr size_t kSharedRowBytes = 48 * 1024;  // dynamic shared memory without an opt-in

// blockIdx.y: the tensor (looping past 65535); blockIdx.x: a grid-stride share of its elements
__device__ __forceinline__ bool aligned(const void *p, unsigned bytes)
{
    return ((uintptr_t)p & (bytes - 1)) == 0;
}

__device__ __forceinline__ unsigned short to_bf16(float x)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Four elements per 16-byte load of p, g, m and v (and an 8-byte store of the bf16 shadow): the
// update reads and writes 30 bytes per parameter and is bound by the memory's bandwidth, which
// wide accesses use better. Each element computes zb_adamw_value as the scalar path does.
__device__ __forceinline__ void adamw4(const zb_cu_adamw_tensor_t &d, size_t q, float b1,
                                       float b2, float bc1, float bc2, float eps, float lr,
                                       float gs)
{
    float4 p = reinterpret_cast<const float4 *>(d.p)[q];
    const float4 g = reinterpret_cast<const float4 *>(d.g)[q];
    float4 m = reinterpret_cast<const float4 *>(d.m)[q];
    float4 v = reinterpret_cast<const float4 *>(d.v)[q];
    p.x = zb_adamw_value(p.x, g.x, m.x, v.x, b1, b2, bc1, bc2, eps, d.wd, lr, gs);
    p.y = zb_adamw_value(p.y, g.y, m.y, v.y, b1, b2, bc1, bc2, eps, d.wd, lr, gs);
    p.z = zb_adamw_value(p.z, g.z, m.z, v.z, b1, b2, bc1, bc2, eps, d.wd, lr, gs);
    p.w = zb_adamw_value(p.w, g.w, m.w, v.w, b1, b2, bc1, bc2, eps, d.wd, lr, gs);
    reinterpret_cast<float4 *>(d.p)[q] = p;
    reinterpret_cast<float4 *>(d.m)[q] = m;
    reinterpret_cast<float4 *>(d.v)[q] = v;
    if (d.shadow)
        reinterpret_cast<ushort4 *>(d.shadow)[q] =
            make_ushort4(to_bf16(p.x), to_bf16(p.y), to_bf16(p.z), to_bf16(p.w));
}

__global__ void adamw_multi_k(const zb_cu_adamw_tensor_t *descs, int count, float b1, float b2,
                              float bc1, float bc2, float eps, float lr, float gs)
{
    const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x,
                 stride = (size_t)gridDim.x * blockDim.x;
    for (int t = blockIdx.y; t < count; t += gridDim.y) {
        const zb_cu_adamw_tensor_t d = descs[t];
        size_t done = 0; /* elements the wide path updated */
        if (aligned(d.p, 16) && aligned(d.g, 16) && aligned(d.m, 16) && aligned(d.v, 16) &&
            (!d.shadow || aligned(d.shadow, 8))) {
            for (size_t q = first; q < d.n / 4; q += stride)
                adamw4(d, q, b1, b2, bc1, bc2, eps, lr, gs);
            done = d.n / 4 * 4;
        }
        for (size_t i = done + first; i < d.n; i += stride) {
            float p = zb_adamw_elem(d.p, d.g, d.m, d.v, i, b1, b2, bc1, bc2, eps, d.wd, lr, gs);
            if (d.shadow)
                d.shadow[i] = to_bf16(p);
        }
    }
}

// One block per row: the block stages the row in shared memory (coalesced), then one thread
// adds it in index order (the host's order): a chain of dependent adds on shared memory instead
// of dependent global loads. A row too long for the shared memory is read from global memory.
__global__ void sum_rows_k(double *out, const double *parts, int len, bool staged)
{
    extern __shared__ double row_sh[];
    const double *row = parts + (size_t)blockIdx.x * (size_t)len;
    if (staged) {
        for (int i = threadIdx.x; i < len; i += blockDim.x)
            row_sh[i] = row[i];
        __syncthreads();
        row = row_sh;
    }
    if (threadIdx.x != 0)
        return;
    double s = 0.0;
    for (int i = 0; i < len; i++)
        s += row[i];
    out[blockIdx.x] = s;
}

} // namespace

extern "C" {

void zb_cuk_adamw_multi(cudaStream_t s, const zb_cu_adamw_tensor_t *descs, int count,
                        size_t max_n, float b1, float b2, float bc1, float bc2, float eps,
                        float lr, float gs)
{
    if (count < 1 || max_n == 0)
        return;
    size_t bx = (max_n / 4 + kThreads - 1) / kThreads; /* four elements a thread (adamw4) */
    bx = bx > 0 ? bx : 1;
    dim3 grid((unsigned)(bx < kMaxBlocksPerTensor ? bx : kMaxBlocksPerTensor),
              (unsigned)(count < 65535 ? count : 65535));
    adamw_multi_k<<<grid, kThreads, 0, s>>>(descs, count, b1, b2, bc1, bc2, eps, lr, gs);
}

void zb_cuk_sum_rows(cudaStream_t s, double *out, const double *parts, int rows, int len)
{
    if (rows < 1 || len < 0)
        return;
    size_t bytes = (size_t)len * sizeof(double);
    bool staged = bytes <= kSharedRowBytes;
    sum_rows_k<<<(unsigned)rows, kThreads, staged ? bytes : 0, s>>>(out, parts, len, staged);
}

} // extern "C"
