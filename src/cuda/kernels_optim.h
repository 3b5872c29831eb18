/* Internal: the optimizer's launches that take many tensors at once (kernels_optim.cu), callable
 * from C: one AdamW launch for all of a stage's tensors, and the in-order sum of gradient-norm
 * partials on the device. Device pointers, launches on `stream`, as kernels.h. */
#ifndef ZBPP_CUDA_KERNELS_OPTIM_H
#define ZBPP_CUDA_KERNELS_OPTIM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor of a multi-tensor AdamW launch: n elements of p, g, m, v with weight decay wd;
 * shadow: where the updated p is also written as bfloat16 bits (round to nearest even), NULL
 * for none (the bf16 stage path keeps such a copy for its GEMMs). */
typedef struct {
    float *p;
    const float *g;
    float *m, *v;
    unsigned short *shadow;
    size_t n;
    float wd;
} zb_cu_adamw_tensor_t;

/* AdamW on every tensor of descs[0..count) (a device array), one launch: per element the
 * update of zb_cuk_adamw (the same bits); max_n = the largest n (sizes the grid). */
void zb_cuk_adamw_multi(cudaStream_t s, const zb_cu_adamw_tensor_t *descs, int count,
                        size_t max_n, float b1, float b2, float bc1, float bc2, float eps,
                        float lr, float gs);

/* out[r] = parts[r·len] + parts[r·len + 1] + ... in index order from 0.0 (one block per row,
 * one thread adding): the host loop's sum, the same bits. */
void zb_cuk_sum_rows(cudaStream_t s, double *out, const double *parts, int rows, int len);

#ifdef __cplusplus
}
#endif

#endif
