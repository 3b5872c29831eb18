// CUDA kernels of the GPT-2 stage (everything except the matrix products, which go through
// cuBLASLt in ctx.c). One translation unit on purpose: nvcc time is the build's bottleneck.
// Formulas follow src/nn/*.c; reductions are atomic-free and in a fixed order (kernels.h).
#include "cuda/kernels.h"
#include "cuda/adamw_elem.h"
#include "cuda/layernorm_rows.h"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

int blocks_for(size_t n, int threads = kThreads)
{
    size_t b = (n + threads - 1) / threads;
    return (int)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);  // grid-stride beyond this
}

// gridDim.y is limited to 65535: kernels loop over y beyond that
unsigned grid_y(int n)
{
    return (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n);
}

template <typename T> __device__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024): a fixed tree, the result on
// every thread. `sh` holds 32 values; the call ends with a barrier so it can be reused.
template <typename T> __device__ T block_sum(T v, T *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    T r = lane < nw ? sh[lane] : (T)0;
    r = warp_sum(r);
    __syncthreads();
    return r;
}

__device__ float block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : -INFINITY;
    r = warp_max(r);
    __syncthreads();
    return r;
}

// ---- embedding ----

__global__ void encoder_forward_k(float *out, const int *tokens, const float *wte,
                                  const float *wpe, int T, int C, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)t * C + c];
    }
}

__global__ void encoder_backward_wte_k(float *dwte, const float *dout, const int *uniq,
                                       const int *start, const int *rows, int U, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int u = blockIdx.y; u < U; u += gridDim.y) {
        float *w = dwte + (size_t)uniq[u] * C + c;
        float acc = *w;
        for (int i = start[u]; i < start[u + 1]; i++)
            acc += dout[(size_t)rows[i] * C + c];
        *w = acc;
    }
}

__global__ void encoder_backward_wpe_k(float *dwpe, const float *dout, int B, int T, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        float *w = dwpe + (size_t)t * C + c;
        float acc = *w;
        for (int b = 0; b < B; b++)
            acc += dout[((size_t)b * T + t) * C + c];
        *w = acc;
    }
}

// ---- LayerNorm (statistics in double, as the CPU kernel) ----

__global__ void layernorm_forward_k(float *out, float *mean, float *rstd, const float *inp,
                                    const float *weight, const float *bias, int C)
{
    __shared__ double sh[32];
    size_t n = blockIdx.x;
    const float *x = inp + n * C;
    double s = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        s += x[c];
    double m = block_sum(s, sh) / C;
    double v = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double d = x[c] - m;
        v += d * d;
    }
    v = block_sum(v, sh);
    double r = 1.0 / sqrt(v / C + 1e-5);
    float mf = (float)m, rf = (float)r;
    float *o = out + n * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        o[c] = (x[c] - mf) * rf * weight[c] + bias[c];
    if (threadIdx.x == 0) {
        mean[n] = mf;
        rstd[n] = rf;
    }
}

__global__ void layernorm_backward_input_k(float *dinp, const float *dout, const float *inp,
                                           const float *mean, const float *rstd,
                                           const float *weight, int C)
{
    __shared__ float sh[32];
    size_t n = blockIdx.x;
    const float *x = inp + n * C, *d = dout + n * C;
    float *dx = dinp + n * C;
    float m = mean[n], r = rstd[n];
    float a = 0.0f, b = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (x[c] - m) * r;
        float dnorm = weight[c] * d[c];
        a += dnorm;
        b += dnorm * xhat;
    }
    float dnorm_mean = block_sum(a, sh) / (float)C;
    float dnorm_xhat_mean = block_sum(b, sh) / (float)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (x[c] - m) * r;
        float dnorm = weight[c] * d[c];
        dx[c] += (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * r;
    }
}

__global__ void layernorm_weight_partials_k(float *part_w, float *part_b, const float *dout,
                                            const float *inp, const float *mean,
                                            const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int chunk = blockIdx.y; chunk * ZB_CU_COLSUM_ROWS < N; chunk += gridDim.y) {
        int n0 = chunk * ZB_CU_COLSUM_ROWS, n1 = min(N, n0 + ZB_CU_COLSUM_ROWS);
        float w = 0.0f, b = 0.0f;
        for (int n = n0; n < n1; n++) {
            float d = dout[(size_t)n * C + c];
            w += d * ((inp[(size_t)n * C + c] - mean[n]) * rstd[n]);
            b += d;
        }
        part_w[(size_t)chunk * C + c] = w;
        part_b[(size_t)chunk * C + c] = b;
    }
}

__global__ void colsum_partials_k(float *part, const float *a, int N, int OC)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= OC)
        return;
    for (int chunk = blockIdx.y; chunk * ZB_CU_COLSUM_ROWS < N; chunk += gridDim.y) {
        int n0 = chunk * ZB_CU_COLSUM_ROWS, n1 = min(N, n0 + ZB_CU_COLSUM_ROWS);
        float s = 0.0f;
        for (int n = n0; n < n1; n++)
            s += a[(size_t)n * OC + j];
        part[(size_t)chunk * OC + j] = s;
    }
}

__global__ void colsum_finish_k(float *out, const float *part, int chunks, int OC)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= OC)
        return;
    float s = 0.0f;
    for (int k = 0; k < chunks; k++)
        s += part[(size_t)k * OC + j];
    out[j] += s;
}

// ---- elementwise ----

__global__ void gelu_forward_k(float *out, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = inp[i];
        float u = kGeluScale * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

__global__ void gelu_backward_input_k(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = inp[i];
        float u = kGeluScale * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * sech2 * du) * dout[i];
    }
}

__global__ void residual_forward_k(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void residual_backward_k(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = dout[i];
        da[i] += d;
        if (db)
            db[i] += d;
    }
}

// ---- attention softmax: one warp per row ----

__global__ void causal_softmax_forward_k(float *att, size_t rows, int T)
{
    size_t wpb = blockDim.x >> 5; // warps per block; the loop is uniform per warp
    int lane = threadIdx.x & 31;
    for (size_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += gridDim.x * wpb) {
        int t = (int)(r % T);
        float *row = att + r * T;
        float mx = -INFINITY;
        for (int u = lane; u <= t; u += 32)
            mx = fmaxf(mx, row[u]);
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int u = lane; u <= t; u += 32) {
            float e = expf(row[u] - mx);
            row[u] = e;
            sum += e;
        }
        float inv = 1.0f / warp_sum(sum);
        for (int u = lane; u < T; u += 32)
            row[u] = u <= t ? row[u] * inv : 0.0f;
    }
}

__global__ void causal_softmax_backward_k(float *datt, const float *att, size_t rows, int T,
                                          float scale)
{
    size_t wpb = blockDim.x >> 5;
    int lane = threadIdx.x & 31;
    for (size_t r = blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += gridDim.x * wpb) {
        int t = (int)(r % T);
        const float *a = att + r * T;
        float *d = datt + r * T;
        float dot = 0.0f;
        for (int u = lane; u <= t; u += 32)
            dot += a[u] * d[u];
        dot = warp_sum(dot);
        for (int u = lane; u < T; u += 32)
            d[u] = u <= t ? a[u] * (d[u] - dot) * scale : 0.0f;
    }
}

// ---- softmax cross-entropy: one block per row ----

// Two passes over the row (it was three: the max, the exponentials, the normalisation): the
// first reads it once for each thread's running max and its sum of exp(x - that max), rescaled
// when the max grows, combined over the block at the row's max; the second writes the
// probabilities. The sum stays a double of float exponentials, as before.
// The logits' gradient at column j from its probability p: (p − onehot)·dloss, padded columns
// 0. Both the backward and the forward that folds it in (dloss != 0) write it, the same bits.
__device__ __forceinline__ float logit_grad(float p, int j, int target, int V, float dloss)
{
    if (j == target)
        p -= 1.0f;
    return j < V ? p * dloss : 0.0f;
}

__global__ void crossentropy_forward_k(float *losses, float *probs, const int *targets, int V,
                                       int Vp, float dloss)
{
    __shared__ float shf[32];
    __shared__ double shd[32];
    size_t n = blockIdx.x;
    float *row = probs + n * Vp;
    float target_logit = row[targets[n]];
    float mt = -INFINITY; // this thread's max so far, and its sum of exp(x - mt)
    double st = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float x = row[i];
        if (x > mt) {
            st = st * (double)expf(mt - x) + 1.0; // expf(-inf) = 0 on the first element
            mt = x;
        } else {
            st += (double)expf(x - mt);
        }
    }
    float mx = block_max(mt, shf);
    double sum = block_sum(st > 0.0 ? st * (double)expf(mt - mx) : 0.0, shd);
    float inv = (float)(1.0 / sum);
    if (dloss == 0.0f) {
        for (int i = threadIdx.x; i < Vp; i += blockDim.x)
            row[i] = i < V ? expf(row[i] - mx) * inv : 0.0f;
    } else {  // the backward's gradient of the probability just computed
        const int t = targets[n];
        for (int i = threadIdx.x; i < Vp; i += blockDim.x)
            row[i] = logit_grad(i < V ? expf(row[i] - mx) * inv : 0.0f, i, t, V, dloss);
    }
    if (threadIdx.x == 0)
        losses[n] = (float)((double)mx + log(sum) - (double)target_logit);
}

__global__ void crossentropy_backward_k(float *probs, const int *targets, float dloss, int V,
                                        int Vp, size_t total)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / Vp;
        int j = (int)(i % Vp);
        probs[i] = logit_grad(probs[i], j, targets[n], V, dloss);
    }
}

// ---- optimizer ----

__global__ void adamw_k(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2,
                        float bc1, float bc2, float eps, float wd, float lr, float gs)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        zb_adamw_elem(p, g, m, v, i, b1, b2, bc1, bc2, eps, wd, lr, gs);
}

// Block blockIdx.x's grid-stride share of g[0, n) squared, summed in double over the block
// (every thread gets it; block_sum's closing barrier lets sh be reused).
__device__ double sumsq_share(const float *g, size_t n, double *sh)
{
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += (double)g[i] * (double)g[i];
    return block_sum(s, sh);
}

__global__ void sumsq_partials_k(double *part, const float *g, size_t n)
{
    __shared__ double sh[32];
    double s = sumsq_share(g, n, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

// blockIdx.y: the range (looping past 65535); blockIdx.x over the same ZB_CU_SUMSQ_BLOCKS as
// sumsq_partials_k, so each partial is that kernel's
__global__ void sumsq_multi_k(const zb_cu_sumsq_range_t *ranges, int count)
{
    __shared__ double sh[32];
    for (int r = blockIdx.y; r < count; r += gridDim.y) {
        const zb_cu_sumsq_range_t d = ranges[r];
        double s = sumsq_share(d.g, d.n, sh);
        if (threadIdx.x == 0)
            d.part[blockIdx.x] = s;
    }
}

} // namespace

extern "C" {

void zb_cuk_encoder_forward(cudaStream_t s, float *out, const int *tokens, const float *wte,
                            const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    encoder_forward_k<<<blocks_for(n), kThreads, 0, s>>>(out, tokens, wte, wpe, T, C, n);
}

void zb_cuk_encoder_backward_wte(cudaStream_t s, float *dwte, const float *dout, const int *uniq,
                                 const int *start, const int *rows, int U, int C)
{
    if (U <= 0)
        return;
    dim3 grid((C + 127) / 128, grid_y(U));
    encoder_backward_wte_k<<<grid, 128, 0, s>>>(dwte, dout, uniq, start, rows, U, C);
}

void zb_cuk_encoder_backward_wpe(cudaStream_t s, float *dwpe, const float *dout, int B, int T,
                                 int C)
{
    dim3 grid((C + 127) / 128, grid_y(T));
    encoder_backward_wpe_k<<<grid, 128, 0, s>>>(dwpe, dout, B, T, C);
}

void zb_cuk_layernorm_forward(cudaStream_t s, float *out, float *mean, float *rstd,
                              const float *inp, const float *weight, const float *bias, int N,
                              int C)
{
    if (N > 0 && !zb_cuk_layernorm_rows_forward(s, out, mean, rstd, inp, weight, bias, N, C))
        layernorm_forward_k<<<N, kThreads, 0, s>>>(out, mean, rstd, inp, weight, bias, C);
}

void zb_cuk_layernorm_backward_input(cudaStream_t s, float *dinp, const float *dout,
                                     const float *inp, const float *mean, const float *rstd,
                                     const float *weight, int N, int C)
{
    if (N > 0 &&
        !zb_cuk_layernorm_rows_backward_input(s, dinp, dout, inp, mean, rstd, weight, N, C))
        layernorm_backward_input_k<<<N, kThreads, 0, s>>>(dinp, dout, inp, mean, rstd, weight, C);
}

void zb_cuk_layernorm_weight_partials(cudaStream_t s, float *part_w, float *part_b,
                                      const float *dout, const float *inp, const float *mean,
                                      const float *rstd, int N, int C)
{
    dim3 grid((C + 127) / 128, grid_y(zb_cu_colsum_chunks(N)));
    layernorm_weight_partials_k<<<grid, 128, 0, s>>>(part_w, part_b, dout, inp, mean, rstd, N, C);
}

void zb_cuk_colsum_partials(cudaStream_t s, float *part, const float *a, int N, int OC)
{
    dim3 grid((OC + 127) / 128, grid_y(zb_cu_colsum_chunks(N)));
    colsum_partials_k<<<grid, 128, 0, s>>>(part, a, N, OC);
}

void zb_cuk_colsum_finish(cudaStream_t s, float *out, const float *part, int chunks, int OC)
{
    colsum_finish_k<<<(OC + 127) / 128, 128, 0, s>>>(out, part, chunks, OC);
}

void zb_cuk_gelu_forward(cudaStream_t s, float *out, const float *inp, size_t n)
{
    gelu_forward_k<<<blocks_for(n), kThreads, 0, s>>>(out, inp, n);
}

void zb_cuk_gelu_backward_input(cudaStream_t s, float *dinp, const float *inp, const float *dout,
                                size_t n)
{
    gelu_backward_input_k<<<blocks_for(n), kThreads, 0, s>>>(dinp, inp, dout, n);
}

void zb_cuk_residual_forward(cudaStream_t s, float *out, const float *a, const float *b, size_t n)
{
    residual_forward_k<<<blocks_for(n), kThreads, 0, s>>>(out, a, b, n);
}

void zb_cuk_residual_backward_input(cudaStream_t s, float *da, float *db, const float *dout,
                                    size_t n)
{
    residual_backward_k<<<blocks_for(n), kThreads, 0, s>>>(da, db, dout, n);
}

__global__ void copy_words_k(uint32_t *__restrict__ dst, const uint32_t *__restrict__ src,
                             size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

void zb_cuk_copy_words(cudaStream_t s, void *dst, const void *src, size_t n)
{
    if (n == 0)
        return;
    size_t blocks = (n + kThreads - 1) / kThreads;
    copy_words_k<<<(unsigned)(blocks < 1024 ? blocks : 1024), kThreads, 0, s>>>(
        (uint32_t *)dst, (const uint32_t *)src, n);
}

void zb_cuk_add_inplace(cudaStream_t s, float *y, const float *x, size_t n)
{
    residual_backward_k<<<blocks_for(n), kThreads, 0, s>>>(y, nullptr, x, n);
}

void zb_cuk_causal_softmax_forward(cudaStream_t s, float *att, size_t rows, int T)
{
    causal_softmax_forward_k<<<blocks_for(rows * 32), kThreads, 0, s>>>(att, rows, T);
}

void zb_cuk_causal_softmax_backward(cudaStream_t s, float *datt, const float *att, size_t rows,
                                    int T, float scale)
{
    causal_softmax_backward_k<<<blocks_for(rows * 32), kThreads, 0, s>>>(datt, att, rows, T,
                                                                         scale);
}

void zb_cuk_crossentropy_forward(cudaStream_t s, float *losses, float *probs, const int *targets,
                                 int N, int V, int Vp, float dloss)
{
    crossentropy_forward_k<<<N, 1024, 0, s>>>(losses, probs, targets, V, Vp, dloss);
}

void zb_cuk_crossentropy_backward(cudaStream_t s, float *probs, const int *targets, float dloss,
                                  int N, int V, int Vp)
{
    size_t total = (size_t)N * Vp;
    crossentropy_backward_k<<<blocks_for(total), kThreads, 0, s>>>(probs, targets, dloss, V, Vp,
                                                                   total);
}

void zb_cuk_adamw(cudaStream_t s, float *p, const float *g, float *m, float *v, size_t n, float b1,
                  float b2, float bc1, float bc2, float eps, float wd, float lr, float gs)
{
    if (n == 0)
        return;
    adamw_k<<<blocks_for(n), kThreads, 0, s>>>(p, g, m, v, n, b1, b2, bc1, bc2, eps, wd, lr, gs);
}

void zb_cuk_sumsq_multi(cudaStream_t s, const zb_cu_sumsq_range_t *ranges, int count)
{
    if (count < 1)
        return;
    dim3 grid(ZB_CU_SUMSQ_BLOCKS, (unsigned)(count < 65535 ? count : 65535));
    sumsq_multi_k<<<grid, kThreads, 0, s>>>(ranges, count);
}

void zb_cuk_sumsq_partials(cudaStream_t s, double *part, const float *g, size_t n)
{
    sumsq_partials_k<<<ZB_CU_SUMSQ_BLOCKS, kThreads, 0, s>>>(part, g, n);
}

} // extern "C"
