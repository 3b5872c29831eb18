// The optimizer's many-tensor launches (kernels_optim.h): multi-tensor AdamW and the in-order
// sum of the gradient-norm partials.
#include "cuda/kernels_optim.h"

#include <cuda_bf16.h>

#include "cuda/adamw_elem.h"

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocksPerTensor = 1024; // grid-stride beyond
constexpr size_t kSharedRowBytes = 48 * 1024;  // dynamic shared memory without an opt-in

// blockIdx.y: the tensor (looping past 65535); blockIdx.x: a grid-stride share of its elements
__global__ void adamw_multi_k(const zb_cu_adamw_tensor_t *descs, int count, float b1, float b2,
                              float bc1, float bc2, float eps, float lr, float gs)
{
    for (int t = blockIdx.y; t < count; t += gridDim.y) {
        const zb_cu_adamw_tensor_t d = descs[t];
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < d.n;
             i += (size_t)gridDim.x * blockDim.x) {
            float p = zb_adamw_elem(d.p, d.g, d.m, d.v, i, b1, b2, bc1, bc2, eps, d.wd, lr, gs);
            if (d.shadow)
                d.shadow[i] = __bfloat16_as_ushort(__float2bfloat16_rn(p));
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
    size_t bx = (max_n + kThreads - 1) / kThreads;
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
