/* Internal: launchers of the CUDA kernels (src/cuda/kernels.cu), callable from C. Every pointer
 * is a device pointer unless named *_host; every launch goes on `stream` and returns at once
 * (errors surface through cudaGetLastError, which the callers check).
 *
 * Determinism: no atomics anywhere. Reductions are either one thread walking rows in order, or
 * fixed-size partial sums over fixed row chunks followed by an in-order sum of the partials, and
 * block reductions use a fixed shuffle tree, so the same inputs give the same bits on the same
 * GPU model, whatever the launch timing. */
#ifndef ZBPP_CUDA_KERNELS_H
#define ZBPP_CUDA_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per chunk of the column-sum partials (dbias, LayerNorm dweight/dbias). */
#define ZB_CU_COLSUM_ROWS 32
/* Blocks of the sum-of-squares partials (grad-norm units); the host adds them in order. */
#define ZB_CU_SUMSQ_BLOCKS 264

static inline int zb_cu_colsum_chunks(int N)
{
    return (N + ZB_CU_COLSUM_ROWS - 1) / ZB_CU_COLSUM_ROWS;
}

/* out[B,T,C] = wte[tokens[b,t]] + wpe[t]. */
void zb_cuk_encoder_forward(cudaStream_t s, float *out, const int *tokens, const float *wte,
                            const float *wpe, int B, int T, int C);
/* dwte[uniq[u]] += sum over rows[start[u] .. start[u+1]) of dout[row] (rows ascending: the
 * CPU kernel's order, so the bits match it). */
void zb_cuk_encoder_backward_wte(cudaStream_t s, float *dwte, const float *dout, const int *uniq,
                                 const int *start, const int *rows, int U, int C);
/* dwpe[t] += dout[b,t] for b = 0..B-1 in order. */
void zb_cuk_encoder_backward_wpe(cudaStream_t s, float *dwpe, const float *dout, int B, int T,
                                 int C);

void zb_cuk_layernorm_forward(cudaStream_t s, float *out, float *mean, float *rstd,
                              const float *inp, const float *weight, const float *bias, int N,
                              int C);
void zb_cuk_layernorm_backward_input(cudaStream_t s, float *dinp, const float *dout,
                                     const float *inp, const float *mean, const float *rstd,
                                     const float *weight, int N, int C);
/* part_w/part_b[chunks, C] = per-chunk sums of dout·xhat and dout. */
void zb_cuk_layernorm_weight_partials(cudaStream_t s, float *part_w, float *part_b,
                                      const float *dout, const float *inp, const float *mean,
                                      const float *rstd, int N, int C);
/* part[chunks, OC] = per-chunk column sums of a[N, OC]. */
void zb_cuk_colsum_partials(cudaStream_t s, float *part, const float *a, int N, int OC);
/* out[j] += sum over chunks c (in order) of part[c, j]. */
void zb_cuk_colsum_finish(cudaStream_t s, float *out, const float *part, int chunks, int OC);

void zb_cuk_gelu_forward(cudaStream_t s, float *out, const float *inp, size_t n);
void zb_cuk_gelu_backward_input(cudaStream_t s, float *dinp, const float *inp, const float *dout,
                                size_t n);
void zb_cuk_residual_forward(cudaStream_t s, float *out, const float *a, const float *b,
                             size_t n);
/* da += dout; db += dout. */
void zb_cuk_residual_backward_input(cudaStream_t s, float *da, float *db, const float *dout,
                                    size_t n);
/* y += x. */
void zb_cuk_add_inplace(cudaStream_t s, float *y, const float *x, size_t n);
/* dst[i] = src[i] for n 4-byte words, by the SMs: either side may be page-locked host memory
 * (unified addressing), so a small transfer never queues on a copy engine (cuda/small_copy.h). */
void zb_cuk_copy_words(cudaStream_t s, void *dst, const void *src, size_t n);

/* In place on rows of att[rows, T] (row r is query t = r % T): causal softmax, upper part 0. */
void zb_cuk_causal_softmax_forward(cudaStream_t s, float *att, size_t rows, int T);
/* In place on datt[rows, T]: datt = att·(datt − <att, datt>)·scale over u <= t, upper part 0. */
void zb_cuk_causal_softmax_backward(cudaStream_t s, float *datt, const float *att, size_t rows,
                                    int T, float scale);

/* probs[N,Vp]: logits in, softmax over the first V columns out (rest 0); losses[N]. dloss != 0:
 * the gradient (p − onehot)·dloss out instead, the bits of the backward below after it. */
void zb_cuk_crossentropy_forward(cudaStream_t s, float *losses, float *probs, const int *targets,
                                 int N, int V, int Vp, float dloss);
/* probs -> (p − onehot)·dloss in place, padded columns 0. */
void zb_cuk_crossentropy_backward(cudaStream_t s, float *probs, const int *targets, float dloss,
                                  int N, int V, int Vp);

/* AdamW on n elements, the formula of src/model/optim.c. */
void zb_cuk_adamw(cudaStream_t s, float *p, const float *g, float *m, float *v, size_t n, float b1,
                  float b2, float bc1, float bc2, float eps, float wd, float lr, float gs);
/* part[ZB_CU_SUMSQ_BLOCKS] = partial sums of g² in double (grid-stride, fixed grid). */
void zb_cuk_sumsq_partials(cudaStream_t s, double *part, const float *g, size_t n);
/* One range of zb_cuk_sumsq_multi: n floats of g, their ZB_CU_SUMSQ_BLOCKS partials into part. */
typedef struct {
    const float *g;
    double *part;
    size_t n;
} zb_cu_sumsq_range_t;
/* zb_cuk_sumsq_partials of every range of ranges[0..count) (a device array) in one launch:
 * block b of range r sums the elements block b of a launch for that range alone would, with
 * the same tree, so every partial has the same bits. */
void zb_cuk_sumsq_multi(cudaStream_t s, const zb_cu_sumsq_range_t *ranges, int count);

#ifdef __cplusplus
}
#endif

#endif
