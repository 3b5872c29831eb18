/* The op layer (cuda/ctx.h): include/zbpp/nn.h's kernels on device pointers. Linear layers and
 * the attention products go through zb_cu_gemm (cuBLASLt); the rest are kernels.cu launches.
 * W of a linear layer is one product with beta = 1 into the fp32 gradient plus a deterministic
 * column sum for the bias, independent of B: deferring it costs nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ctx.h"
#include "cuda/small_copy.h"
#include "cuda/flash_attn32.h"
#include "cuda/flash_attn_tf32.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/prof.h"

#define LAUNCHED(c, what) zb_cu_launch_check((c), (what))

void zb_cu_encoder_forward(zb_cu_ctx_t *c, float *out, const int *tokens, const float *wte,
                           const float *wpe, int B, int T, int C)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk_encoder_forward(c->stream, out, tokens, wte, wpe, B, T, C));
    LAUNCHED(c, "encoder forward");
}

size_t zb_cu_encoder_bucket_ints(int B, int T)
{
    return 3 * (size_t)B * T + 1;
}

/* Rows of each distinct token, ascending (a stable counting sort on the host): uniq[U], start[U+1]
 * offsets into rows[N]. Each (token, channel) is then one thread adding its rows in order. */
void zb_cu_encoder_backward_weight(zb_cu_ctx_t *c, float *dwte, float *dwpe, const float *dout,
                                   const int *tokens_host, int *bucket_dev, int B, int T, int C,
                                   int V)
{
    if (c->status != ZB_OK)
        return;
    int N = B * T;
    int *count = calloc((size_t)V + 1, sizeof *count);
    int *host = malloc(zb_cu_encoder_bucket_ints(B, T) * sizeof *host);
    if (!count || !host) {
        free(count);
        free(host);
        zb_cu_fail(c, ZB_ENOMEM, "cannot allocate the embedding's token buckets");
        return;
    }
    int *uniq = host, *start = host + N, *rows = host + 2 * N + 1;
    for (int n = 0; n < N; n++)
        count[tokens_host[n] + 1]++;
    for (int v = 0; v < V; v++)
        count[v + 1] += count[v]; /* count[v] = first slot of token v */
    int U = 0;
    for (int v = 0; v < V; v++)
        if (count[v + 1] > count[v]) {
            uniq[U] = v;
            start[U] = count[v];
            U++;
        }
    start[U] = N;
    for (int n = 0; n < N; n++)
        rows[count[tokens_host[n]]++] = n;
    /* device layout mirrors the host one: uniq at 0, start at N, rows at 2N+1 */
    /* by the SMs through a page-locked slot, which holds a copy by now: freeing is safe */
    zb_cu_upload_small(c, bucket_dev, host, zb_cu_encoder_bucket_ints(B, T) * sizeof(int));
    free(count);
    free(host);
    if (c->status != ZB_OK)
        return;
    zb_cu_prof_begin(c, ZB_CUDA_K_ELEMENTWISE);
    zb_cuk_encoder_backward_wte(c->stream, dwte, dout, bucket_dev, bucket_dev + N,
                                bucket_dev + 2 * N + 1, U, C);
    zb_cuk_encoder_backward_wpe(c->stream, dwpe, dout, B, T, C);
    zb_cu_prof_end(c);
    LAUNCHED(c, "encoder backward_weight");
}

void zb_cu_layernorm_forward(zb_cu_ctx_t *c, float *out, float *mean, float *rstd,
                             const float *inp, const float *weight, const float *bias, int N,
                             int C)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_NORM, zb_cuk_layernorm_forward(c->stream, out, mean, rstd, inp, weight, bias, N, C));
    LAUNCHED(c, "layernorm forward");
}

void zb_cu_layernorm_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                    const float *inp, const float *mean, const float *rstd,
                                    const float *weight, int N, int C)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_NORM, zb_cuk_layernorm_backward_input(c->stream, dinp, dout, inp, mean, rstd, weight, N, C));
    LAUNCHED(c, "layernorm backward_input");
}

void zb_cu_layernorm_backward_weight(zb_cu_ctx_t *c, float *dweight, float *dbias,
                                     const float *dout, const float *inp, const float *mean,
                                     const float *rstd, int N, int C)
{
    int chunks = zb_cu_colsum_chunks(N);
    if (!zb_cu_part_reserve(c, 2 * (size_t)chunks * C))
        return;
    float *pw = c->part, *pb = c->part + (size_t)chunks * C;
    zb_cu_prof_begin(c, ZB_CUDA_K_NORM);
    zb_cuk_layernorm_weight_partials(c->stream, pw, pb, dout, inp, mean, rstd, N, C);
    zb_cuk_colsum_finish(c->stream, dweight, pw, chunks, C);
    zb_cuk_colsum_finish(c->stream, dbias, pb, chunks, C);
    zb_cu_prof_end(c);
    LAUNCHED(c, "layernorm backward_weight");
}

void zb_cu_matmul_forward(zb_cu_ctx_t *c, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC)
{
    /* out[N,OC] = inp[N,C] · weight[OC,C]^T (+ bias: the product's epilogue, gemm.h) */
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    if (bias)
        zb_cu_gemm_ex(c, &(zb_cu_gemm_args_t){
                             .ta = 0, .tb = 1, .M = N, .N = OC, .K = C, .alpha = 1.0f,
                             .beta = 0.0f, .A = inp, .lda = C, .B = weight, .ldb = C, .C = out,
                             .ldc = OC, .ta_type = ZB_CU_F32, .tc_type = ZB_CU_F32,
                             .epilogue = ZB_CU_EPI_BIAS, .bias = bias, .bias_type = ZB_CU_F32});
    else
        zb_cu_gemm(c, 0, 1, N, OC, C, 1.0f, inp, C, 0, weight, C, 0, 0.0f, out, OC, 0, 1);
    zb_cu_prof_end(c);
}

void zb_cu_matmul_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                 const float *weight, int N, int C, int OC)
{
    /* dinp[N,C] += dout[N,OC] · weight[OC,C] */
    ZB_CU_PROF(c, ZB_CUDA_K_GEMM,
               zb_cu_gemm(c, 0, 0, N, C, OC, 1.0f, dout, OC, 0, weight, C, 0, 1.0f, dinp, C, 0,
                          1));
}

void zb_cu_matmul_backward_weight(zb_cu_ctx_t *c, float *dweight, float *dbias, const float *dout,
                                  const float *inp, int N, int C, int OC)
{
    /* dweight[OC,C] += dout^T · inp (beta = 1: gradients accumulate in fp32) */
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    zb_cu_gemm(c, 1, 0, OC, C, N, 1.0f, dout, OC, 0, inp, C, 0, 1.0f, dweight, C, 0, 1);
    int chunks = zb_cu_colsum_chunks(N);
    if (dbias && zb_cu_part_reserve(c, (size_t)chunks * OC)) {
        zb_cuk_colsum_partials(c->stream, c->part, dout, N, OC);
        zb_cuk_colsum_finish(c->stream, dbias, c->part, chunks, OC);
        LAUNCHED(c, "matmul dbias");
    }
    zb_cu_prof_end(c);
}

void zb_cu_gelu_forward(zb_cu_ctx_t *c, float *out, const float *inp, size_t n)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk_gelu_forward(c->stream, out, inp, n));
    LAUNCHED(c, "gelu forward");
}

void zb_cu_gelu_backward_input(zb_cu_ctx_t *c, float *dinp, const float *inp, const float *dout,
                               size_t n)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk_gelu_backward_input(c->stream, dinp, inp, dout, n));
    LAUNCHED(c, "gelu backward_input");
}

void zb_cu_residual_forward(zb_cu_ctx_t *c, float *out, const float *a, const float *b, size_t n)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk_residual_forward(c->stream, out, a, b, n));
    LAUNCHED(c, "residual forward");
}

void zb_cu_residual_backward_input(zb_cu_ctx_t *c, float *da, float *db, const float *dout,
                                   size_t n)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_ELEMENTWISE, zb_cuk_residual_backward_input(c->stream, da, db, dout, n));
    LAUNCHED(c, "residual backward_input");
}

size_t zb_cu_attention_scratch_floats(int T, int NH)
{
    return (size_t)NH * T * T;
}

/* Per sequence b, one strided-batched product over the NH heads (head h's q/k/v start h·hs
 * floats apart inside each row of qkv), exactly the CPU kernel's per-head products. */
void zb_cu_attention_forward(zb_cu_ctx_t *c, float *out, float *att, const float *qkv, int B,
                             int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    zb_cu_prof_begin(c, ZB_CUDA_K_ATTENTION);
    for (int b = 0; b < B && c->status == ZB_OK; b++) {
        const float *q = qkv + (size_t)b * T * 3 * C, *k = q + C, *v = q + 2 * C;
        float *a = att + (size_t)b * NH * TT;
        /* scores[h] = scale · q_h · k_h^T */
        zb_cu_gemm(c, 0, 1, T, T, hs, scale, q, 3 * C, hs, k, 3 * C, hs, 0.0f, a, T, TT, NH);
        if (c->status != ZB_OK)
            return;
        zb_cuk_causal_softmax_forward(c->stream, a, (size_t)NH * T, T);
        if (LAUNCHED(c, "attention softmax"))
            return;
        /* out_h = att_h · v_h, written into the head's columns of out[b] */
        zb_cu_gemm(c, 0, 0, T, hs, T, 1.0f, a, T, TT, v, 3 * C, hs, 0.0f,
                   out + (size_t)b * T * C, C, hs, NH);
    }
    zb_cu_prof_end(c);
}

void zb_cu_attention_backward_input(zb_cu_ctx_t *c, float *dqkv, float *scratch,
                                    const float *dout, const float *qkv, const float *att, int B,
                                    int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    zb_cu_prof_begin(c, ZB_CUDA_K_ATTENTION);
    for (int b = 0; b < B && c->status == ZB_OK; b++) {
        size_t qoff = (size_t)b * T * 3 * C;
        const float *q = qkv + qoff, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
        const float *a = att + (size_t)b * NH * TT;
        const float *dy = dout + (size_t)b * T * C;
        /* datt = dy · v^T ; dv += att^T · dy */
        zb_cu_gemm(c, 0, 1, T, T, hs, 1.0f, dy, C, hs, v, 3 * C, hs, 0.0f, scratch, T, TT, NH);
        zb_cu_gemm(c, 1, 0, T, hs, T, 1.0f, a, T, TT, dy, C, hs, 1.0f, dv, 3 * C, hs, NH);
        if (c->status != ZB_OK)
            return;
        zb_cuk_causal_softmax_backward(c->stream, scratch, a, (size_t)NH * T, T, scale);
        if (LAUNCHED(c, "attention softmax backward"))
            return;
        /* dq += dpre · k ; dk += dpre^T · q */
        zb_cu_gemm(c, 0, 0, T, hs, T, 1.0f, scratch, T, TT, k, 3 * C, hs, 1.0f, dq, 3 * C, hs,
                   NH);
        zb_cu_gemm(c, 1, 0, T, hs, T, 1.0f, scratch, T, TT, q, 3 * C, hs, 1.0f, dk, 3 * C, hs,
                   NH);
    }
    zb_cu_prof_end(c);
}

/* The fp32-storage attention's kernel. tf32: on the TF32 tensor cores where the head size has
 * that kernel (flash_attn_tf32.cu), as its matrix products are; fp32: the FMA kernel, or 3xTF32
 * where the stage asked for it (zb_cuda_stage_set_fp32_attention checked the head size). All
 * keep the same lse and scratch (B·NH·T floats), so a stage's buffers do not depend on it. */
typedef enum { FLASH32_FMA, FLASH32_TF32, FLASH32_3XTF32 } flash32_kind_t;

static flash32_kind_t flash32_kind(const zb_cu_ctx_t *c, int hs)
{
    if (!zb_cuk_flash_tf32_supported(hs))
        return FLASH32_FMA;
    if (c->prec == ZB_CUDA_TF32)
        return FLASH32_TF32;
    return c->fp32_attn == ZB_CUDA_ATTN_3XTF32 ? FLASH32_3XTF32 : FLASH32_FMA;
}

size_t zb_cu_flash32_scratch_floats(int B, int T, int NH, int hs)
{
    return (zb_cuk_flash32_backward_scratch_bytes(B, T, NH, hs) + sizeof(float) - 1) /
           sizeof(float);
}

void zb_cu_flash32_forward(zb_cu_ctx_t *c, float *out, float *lse, const float *qkv, int B, int T,
                           int C, int NH)
{
    if (c->status != ZB_OK)
        return;
    switch (flash32_kind(c, C / NH)) {
    case FLASH32_TF32:
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash_tf32_forward(c->stream, out, lse, qkv, B, T, NH, C / NH));
        LAUNCHED(c, "tf32 flash attention forward");
        return;
    case FLASH32_3XTF32:
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash_3xtf32_forward(c->stream, out, lse, qkv, B, T, NH, C / NH));
        LAUNCHED(c, "3xtf32 flash attention forward");
        return;
    case FLASH32_FMA:
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash32_forward(c->stream, out, lse, qkv, B, T, NH, C / NH));
        LAUNCHED(c, "fp32 flash attention forward");
        return;
    }
}

void zb_cu_flash32_backward_input(zb_cu_ctx_t *c, float *dqkv, float *scratch, const float *dout,
                                  const float *qkv, const float *out, const float *lse, int B,
                                  int T, int C, int NH)
{
    if (c->status != ZB_OK)
        return;
    switch (flash32_kind(c, C / NH)) {
    case FLASH32_TF32:
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash_tf32_backward(c->stream, dqkv, scratch, dout, qkv, out, lse, B,
                                              T, NH, C / NH));
        LAUNCHED(c, "tf32 flash attention backward");
        return;
    case FLASH32_3XTF32:
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash_3xtf32_backward(c->stream, dqkv, scratch, dout, qkv, out, lse, B,
                                                T, NH, C / NH));
        LAUNCHED(c, "3xtf32 flash attention backward");
        return;
    case FLASH32_FMA:
        ZB_CU_PROF(c, ZB_CUDA_K_ATTENTION,
                   zb_cuk_flash32_backward(c->stream, dqkv, scratch, dout, qkv, out, lse, B, T,
                                           NH, C / NH));
        LAUNCHED(c, "fp32 flash attention backward");
        return;
    }
}

void zb_cu_crossentropy_forward(zb_cu_ctx_t *c, float *losses, float *probs, const int *targets,
                                int N, int V, int Vp, float dloss)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_CLASSIFIER, zb_cuk_crossentropy_forward(c->stream, losses, probs, targets, N, V, Vp, dloss));
    LAUNCHED(c, "crossentropy forward");
}

void zb_cu_crossentropy_backward(zb_cu_ctx_t *c, float *probs, const int *targets, float dloss,
                                 int N, int V, int Vp)
{
    if (c->status != ZB_OK)
        return;
    ZB_CU_PROF(c, ZB_CUDA_K_CLASSIFIER, zb_cuk_crossentropy_backward(c->stream, probs, targets, dloss, N, V, Vp));
    LAUNCHED(c, "crossentropy backward");
}
