// CUDA only (included by .cu files). One AdamW element update, shared by the per-tensor
// kernel (kernels.cu) and the multi-tensor one (kernels_optim.cu) so that both compile the
// same expression: the same bits. Formula of src/model/optim.c.
#ifndef ZBPP_CUDA_ADAMW_ELEM_H
#define ZBPP_CUDA_ADAMW_ELEM_H

// The update of one element from its values: m and v in place, the new parameter returned.
// Every kernel that updates (scalar or four elements per load) computes this expression.
__device__ __forceinline__ float zb_adamw_value(float p, float g, float &m, float &v, float b1,
                                                float b2, float bc1, float bc2, float eps,
                                                float wd, float lr, float gs)
{
    float gi = g * gs;
    float mi = b1 * m + (1.0f - b1) * gi;
    float vi = b2 * v + (1.0f - b2) * gi * gi;
    m = mi;
    v = vi;
    float mhat = mi / bc1;
    float vhat = vi / bc2;
    return p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
}

__device__ __forceinline__ float zb_adamw_elem(float *p, const float *g, float *m, float *v,
                                               size_t i, float b1, float b2, float bc1,
                                               float bc2, float eps, float wd, float lr,
                                               float gs)
{
    float mi = m[i], vi = v[i];
    float pi = zb_adamw_value(p[i], g[i], mi, vi, b1, b2, bc1, bc2, eps, wd, lr, gs);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    return pi;
}

#endif
