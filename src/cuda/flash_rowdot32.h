// The fp32 attention backward's first step, D = rowsum(dO ∘ O) per (sequence, head, row) in the
// lse's layout: one kernel for the FMA (flash_attn32.cu) and TF32 (flash_attn_tf32.cu) kernels,
// which keep the same fp32 out, dout and scratch. Included inside each file's anonymous
// namespace (after its device definitions, or tests/flash_emulation.h's).
#ifndef ZBPP_CUDA_FLASH_ROWDOT32_H
#define ZBPP_CUDA_FLASH_ROWDOT32_H

template <int HS>
__global__ void flash32_rowdot_k(float *dsum, const float *dout, const float *out, int B, int T,
                                 int NH)
{
    const size_t n = (size_t)B * NH * T;
    const int C = NH * HS;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        // i runs over (b, t, h) so neighbouring threads read neighbouring heads of one row
        const int h = (int)(i % NH);
        const size_t bt = i / NH, b = bt / T;
        const float *dy = dout + bt * C + (size_t)h * HS, *y = out + bt * C + (size_t)h * HS;
        float acc = 0.0f;
#pragma unroll
        for (int c = 0; c < HS; c++)
            acc = fmaf(dy[c], y[c], acc);
        dsum[(b * NH + h) * T + bt % T] = acc;
    }
}

#endif
