/* The CUDA stage's host logic on any machine: src/cuda/stage.c (buffer layout, F/B/W op
 * sequence, stash states, parameter/gradient/moment transfers, unit ranges of the grad norm and
 * AdamW) is compiled into this test against a fake device: "device" memory is host memory,
 * poisoned with NaN bytes when allocated (a read before a write shows up as NaN), every zb_cu_*
 * op is the CPU kernel of include/zbpp/nn.h, and the CUDA runtime calls stage.c makes are host
 * memcpy/memset. It runs the tests of tests/cuda_stage_tests.inc (the GPU stage test) except the
 * precision one. Kernels and cuBLASLt themselves are covered on a GPU by test_cuda_gpu_ops.
 * Skipped (exit 77) in a build without CUDA (the toolkit's headers are needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include "../src/cuda/stage.c" /* the code under test */
#include "cuda_testutil.h"
#include "zbpp/nn.h"
#include "zbpp/optim.h"

/* ---- fake CUDA runtime: the calls stage.c makes ---- */

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p)
        return cudaErrorMemoryAllocation;
    memset(*p, 0xFF, n); /* NaN floats, -1 ints: a read before a write shows */
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n)
{
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s)
{
    (void)k, (void)s;
    memmove(d, src, n);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e)
{
    (void)e;
    return "fake CUDA error";
}
cudaError_t cudaSetDevice(int d)
{
    (void)d;
    return cudaSuccess;
}

/* ---- fake device discovery and context ---- */

bool zb_cuda_built(void) { return true; }
zb_status_t zb_cuda_device_count(int *n, zb_err_t *err)
{
    (void)err;
    *n = 1;
    return ZB_OK;
}
zb_status_t zb_cuda_device_describe(int dev, char *buf, size_t len, zb_err_t *err)
{
    (void)dev, (void)err;
    snprintf(buf, len, "fake CUDA device (host memory, CPU kernels)");
    return ZB_OK;
}
zb_status_t zb_cu_ctx_init(zb_cu_ctx_t *c, int device, zb_cuda_precision_t prec, zb_err_t *err)
{
    (void)err;
    memset(c, 0, sizeof *c);
    c->device = device;
    c->prec = prec;
    c->sumsq = malloc(16 * ZB_CU_SUMSQ_BLOCKS * sizeof(double));
    return c->sumsq ? ZB_OK : ZB_ENOMEM;
}
void zb_cu_ctx_destroy(zb_cu_ctx_t *c)
{
    free(c->sumsq);
    memset(c, 0, sizeof *c);
}
void zb_cu_fail(zb_cu_ctx_t *c, zb_status_t st, const char *fmt, ...)
{
    if (c->status != ZB_OK)
        return;
    c->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
}
int zb_cu_launch_check(zb_cu_ctx_t *c, const char *what)
{
    (void)what;
    return c->status != ZB_OK;
}
zb_status_t zb_cu_ctx_check(zb_cu_ctx_t *c, const char *what, zb_err_t *err)
{
    if (c->status != ZB_OK)
        return zb_err_set(err, c->status, "%s: %s", what, c->msg);
    return ZB_OK;
}

/* ---- fake ops and kernels: the CPU kernels ---- */

void zb_cu_encoder_forward(zb_cu_ctx_t *c, float *out, const int *tokens, const float *wte,
                           const float *wpe, int B, int T, int C)
{
    (void)c;
    zb_encoder_forward(out, tokens, wte, wpe, B, T, C);
}
size_t zb_cu_encoder_bucket_ints(int B, int T) { return 3 * (size_t)B * T + 1; }
void zb_cu_encoder_backward_weight(zb_cu_ctx_t *c, float *dwte, float *dwpe, const float *dout,
                                   const int *tokens_host, int *bucket_dev, int B, int T, int C,
                                   int V)
{
    (void)c, (void)bucket_dev, (void)V;
    zb_encoder_backward_weight(dwte, dwpe, dout, tokens_host, B, T, C);
}
void zb_cu_layernorm_forward(zb_cu_ctx_t *c, float *out, float *mean, float *rstd,
                             const float *inp, const float *weight, const float *bias, int N,
                             int C)
{
    (void)c;
    zb_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}
void zb_cu_layernorm_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                    const float *inp, const float *mean, const float *rstd,
                                    const float *weight, int N, int C)
{
    (void)c;
    zb_layernorm_backward_input(dinp, dout, inp, mean, rstd, weight, N, C);
}
void zb_cu_layernorm_backward_weight(zb_cu_ctx_t *c, float *dweight, float *dbias,
                                     const float *dout, const float *inp, const float *mean,
                                     const float *rstd, int N, int C)
{
    (void)c;
    zb_layernorm_backward_weight(dweight, dbias, dout, inp, mean, rstd, N, C);
}
void zb_cu_matmul_forward(zb_cu_ctx_t *c, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC)
{
    (void)c;
    zb_matmul_forward(out, inp, weight, bias, N, C, OC);
}
void zb_cu_matmul_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                 const float *weight, int N, int C, int OC)
{
    (void)c;
    zb_matmul_backward_input(dinp, dout, weight, N, C, OC);
}
void zb_cu_matmul_backward_weight(zb_cu_ctx_t *c, float *dweight, float *dbias, const float *dout,
                                  const float *inp, int N, int C, int OC)
{
    (void)c;
    zb_matmul_backward_weight(dweight, dbias, dout, inp, N, C, OC);
}
void zb_cu_gelu_forward(zb_cu_ctx_t *c, float *out, const float *inp, size_t n)
{
    (void)c;
    zb_gelu_forward(out, inp, n);
}
void zb_cu_gelu_backward_input(zb_cu_ctx_t *c, float *dinp, const float *inp, const float *dout,
                               size_t n)
{
    (void)c;
    zb_gelu_backward_input(dinp, inp, dout, n);
}
void zb_cu_residual_forward(zb_cu_ctx_t *c, float *out, const float *a, const float *b, size_t n)
{
    (void)c;
    zb_residual_forward(out, a, b, n);
}
void zb_cu_residual_backward_input(zb_cu_ctx_t *c, float *da, float *db, const float *dout,
                                   size_t n)
{
    (void)c;
    zb_residual_backward_input(da, db, dout, n);
}
size_t zb_cu_attention_scratch_floats(int T, int NH) { return (size_t)NH * T * T; }
void zb_cu_attention_forward(zb_cu_ctx_t *c, float *out, float *att, const float *qkv, int B,
                             int T, int C, int NH)
{
    (void)c;
    zb_attention_forward(out, att, qkv, B, T, C, NH);
}
void zb_cu_attention_backward_input(zb_cu_ctx_t *c, float *dqkv, float *scratch,
                                    const float *dout, const float *qkv, const float *att, int B,
                                    int T, int C, int NH)
{
    (void)c;
    zb_attention_backward_input(dqkv, scratch, dout, qkv, att, B, T, C, NH);
}
void zb_cu_crossentropy_forward(zb_cu_ctx_t *c, float *losses, float *probs, const int *targets,
                                int N, int V, int Vp)
{
    (void)c;
    zb_crossentropy_forward(losses, probs, targets, N, V, Vp);
}
void zb_cu_crossentropy_backward(zb_cu_ctx_t *c, float *probs, const int *targets, float dloss,
                                 int N, int V, int Vp)
{
    (void)c;
    zb_crossentropy_backward(probs, targets, dloss, N, V, Vp);
}
void zb_cuk_add_inplace(cudaStream_t s, float *y, const float *x, size_t n)
{
    (void)s;
    for (size_t i = 0; i < n; i++)
        y[i] = y[i] + x[i];
}
void zb_cuk_sumsq_partials(cudaStream_t s, double *part, const float *g, size_t n)
{
    (void)s;
    /* the GPU's grid-stride assignment: element i goes to block (i / 256) % BLOCKS */
    memset(part, 0, ZB_CU_SUMSQ_BLOCKS * sizeof(double));
    for (size_t i = 0; i < n; i++)
        part[(i / 256) % ZB_CU_SUMSQ_BLOCKS] += (double)g[i] * (double)g[i];
}
void zb_cuk_adamw(cudaStream_t s, float *p, const float *g, float *m, float *v, size_t n, float b1,
                  float b2, float bc1, float bc2, float eps, float wd, float lr, float gs)
{
    (void)s;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1;
        float vhat = vi / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

#define CUDA_STAGE_FAKE 1
#include "cuda_stage_tests.inc"

/* On the fake device the stage runs the CPU kernels in the CPU stage's order: the same bits. */
static void test_fake_is_the_cpu_stage(void **state)
{
    (void)state;
    zb_err_t e;
    zb_gpt2_grads_t gc, gg;
    must(zb_gpt2_grads_alloc(&gc, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&gg, &CFG, &e), &e);
    make_batch(9);
    zb_gpt2_grads_zero(&gc);
    float closs = cpu_chain(&P0, THREE, 3, &gc, 1.0f / NTOK, NULL, NULL);
    zb_gpt2_fold_tied(&gc);
    gchain_t g;
    gchain_new(&g, THREE, 3, ZB_CUDA_FP32);
    g_zero(&g);
    float gloss = g_forward(&g, 0);
    g_backward_input(&g, 0, 1.0f / NTOK);
    g_backward_weight(&g, 0);
    g_gather(&g, &gg);
    assert_memory_equal(&gloss, &closs, sizeof gloss);
    assert_memory_equal(gg.g.data, gc.g.data, gc.g.count * sizeof(float));
    gchain_free(&g);
    zb_gpt2_grads_free(&gc);
    zb_gpt2_grads_free(&gg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_is_the_cpu_stage),
        cmocka_unit_test(test_matches_cpu),
        cmocka_unit_test(test_deferred_w_same_bits),
        cmocka_unit_test(test_partitions_same_bits),
        cmocka_unit_test(test_training_matches_cpu_and_repeats),
        cmocka_unit_test(test_stash_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
#endif
