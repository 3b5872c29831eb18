// CUDA only (included by .cu files). One AdamW element update, shared by the per-tensor
// kernel (kernels.cu) and the multi-tensor one (kernels_optim.cu) so that both compile the
// same expression: the same bits. Formula of src/model/optim.c.
#ifndef ZBPP_CUDA_ADAMW_ELEM_H
#define ZBPP_CUDA_ADAMW_ELEM_H

__device__ __forceinline__ float zb_adamw_elem(float *p, const float *g, float *m, float *v,
                                               size_t i, float b1, float b2, float bc1,
                                               float bc2, float eps, float wd, float lr,
                                               float gs)
{
    float gi = g[i] * gs;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1;
    float vhat = vi / bc2;
    float pi = p[i] - lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    p[i] = pi;
    return pi;
}

#endif
