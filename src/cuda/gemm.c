/* The typed cuBLASLt matrix product with epilogues (gemm.h), on the context's plan cache
 * (ctx.c), whose key holds the types, the epilogue and the aux leading dimension.
 *
 * Row-major C[M,N] is column-major D[N,M] (cuBLASLt's A is our B, see ctx.c), so:
 *   - our bias[N], one value per column of C, is one value per ROW of D: exactly cuBLASLt's bias
 *     vector, whose length is D's row count (N);
 *   - our aux[M,N] with ldaux elements between rows is column-major [N,M] with leading
 *     dimension ldaux: the layout of D with ldaux for ldc, which CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD
 *     describes (cuBLASLt wants it a multiple of 8 and at least D's rows, N).
 *
 * Where cuBLASLt has no algorithm with the fused epilogue (a type combination it does not
 * fuse), the plain product runs and the epilogue follows as a kernel: the same formulas, one
 * more pass over C. The choice is cached with the plan, so it is the same on every call. */
#include "cuda/gemm.h"

#include <string.h>

#include "cuda/kernels_bf16.h"

/* zb_cuk16_epilogue_apply takes the epilogue as these numbers */
_Static_assert(ZB_CU_EPI_BIAS == 1 && ZB_CU_EPI_GELU_AUX_BIAS == 2 && ZB_CU_EPI_DGELU == 3,
               "epilogue numbering shared with the fallback kernel");

static size_t dtype_bytes(zb_cu_dtype_t t)
{
    return t == ZB_CU_BF16 ? 2 : 4;
}

static int cuda_type(zb_cu_dtype_t t)
{
    return t == ZB_CU_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static int cublaslt_epilogue(zb_cu_epilogue_t e)
{
    switch (e) {
    case ZB_CU_EPI_BIAS:
        return CUBLASLT_EPILOGUE_BIAS;
    case ZB_CU_EPI_GELU_AUX_BIAS:
        return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case ZB_CU_EPI_DGELU:
        return CUBLASLT_EPILOGUE_DGELU;
    case ZB_CU_EPI_NONE:
        break;
    }
    return 0; /* the key's "none" */
}

static int epilogue_uses_bias(zb_cu_epilogue_t e)
{
    return e == ZB_CU_EPI_BIAS || e == ZB_CU_EPI_GELU_AUX_BIAS;
}

static int epilogue_uses_aux(zb_cu_epilogue_t e)
{
    return e == ZB_CU_EPI_GELU_AUX_BIAS || e == ZB_CU_EPI_DGELU;
}

/* A call that cannot be right is refused with a message rather than sent to cuBLASLt. */
static int args_ok(zb_cu_ctx_t *c, const zb_cu_gemm_args_t *g)
{
    if (g->M <= 0 || g->N <= 0 || g->K <= 0) {
        zb_cu_fail(c, ZB_EINVAL, "matrix product %dx%dx%d: every dimension must be positive", g->M,
                   g->N, g->K);
        return 0;
    }
    if (epilogue_uses_bias(g->epilogue) && !g->bias) {
        zb_cu_fail(c, ZB_EINVAL, "matrix product %dx%dx%d: the bias epilogue has no bias", g->M,
                   g->N, g->K);
        return 0;
    }
    if (epilogue_uses_aux(g->epilogue) && !g->aux) {
        zb_cu_fail(c, ZB_EINVAL, "matrix product %dx%dx%d: the GELU epilogue has no aux matrix",
                   g->M, g->N, g->K);
        return 0;
    }
    if (epilogue_uses_aux(g->epilogue) && (g->ldaux < g->N || g->ldaux % 8 != 0)) {
        zb_cu_fail(c, ZB_EINVAL,
                   "matrix product %dx%dx%d: the GELU epilogue needs an aux matrix whose row "
                   "stride (%d) is a multiple of 8 and at least N",
                   g->M, g->N, g->K, g->ldaux);
        return 0;
    }
    return 1;
}

void zb_cu_gemm_ex(zb_cu_ctx_t *c, const zb_cu_gemm_args_t *g)
{
    if (c->status != ZB_OK || !args_ok(c, g))
        return;
    int uses_bias = epilogue_uses_bias(g->epilogue), uses_aux = epilogue_uses_aux(g->epilogue);
    size_t ab = dtype_bytes(g->ta_type), cb = dtype_bytes(g->tc_type);
    zb_cu_gemm_key_t key;
    memset(&key, 0, sizeof key); /* compared as bytes: no stray padding */
    key.ta = g->ta, key.tb = g->tb, key.M = g->M, key.N = g->N, key.K = g->K;
    key.lda = g->lda, key.ldb = g->ldb, key.ldc = g->ldc, key.batch = 1;
    key.beta_zero = g->beta == 0.0f;
    key.ab_type = cuda_type(g->ta_type), key.c_type = cuda_type(g->tc_type);
    key.epilogue = cublaslt_epilogue(g->epilogue);
    key.align_a = zb_cu_align_of(g->A, g->lda, 0, 1, ab);
    key.align_b = zb_cu_align_of(g->B, g->ldb, 0, 1, ab);
    key.align_c = zb_cu_align_of(g->C, g->ldc, 0, 1, cb);
    if (uses_aux) {
        key.ldaux = g->ldaux;
        key.align_aux = zb_cu_align_of(g->aux, g->ldaux, 0, 1, cb);
    }
    if (uses_bias) {
        key.bias_type = cuda_type(g->bias_type);
        key.align_bias = zb_cu_align_of(g->bias, 0, 0, 1, dtype_bytes(g->bias_type));
    }
    const void *bias = uses_bias ? (const void *)g->bias : NULL;
    const void *aux = uses_aux ? g->aux : NULL;
    zb_cu_gemm_plan_t *p = NULL;
    if (g->epilogue != ZB_CU_EPI_NONE && !c->gemm_epilogue_off)
        p = zb_cu_gemm_plan(c, &key, bias, aux, 1);
    int fused = p != NULL || g->epilogue == ZB_CU_EPI_NONE;
    if (!p && c->status == ZB_OK) {
        zb_cu_gemm_key_t plain = key;
        plain.epilogue = 0, plain.ldaux = 0, plain.align_aux = plain.align_bias = 0;
        plain.bias_type = 0;
        bias = aux = NULL;
        p = zb_cu_gemm_plan(c, &plain, NULL, NULL, 0);
    }
    if (!p)
        return;
    /* the cached descriptor still points at the first call's bias / aux */
    if (!zb_cu_gemm_set_pointers(p->desc, bias, aux)) {
        zb_cu_fail(c, ZB_EIO, "cuBLASLt: cannot set the epilogue's pointers");
        return;
    }
    cublasStatus_t st =
        cublasLtMatmul(c->lt, p->desc, &g->alpha, g->B, p->la, g->A, p->lb, &g->beta, g->C, p->lc,
                       g->C, p->lc, &p->algo, c->ws, c->ws_bytes, c->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        zb_cu_fail(c, ZB_EIO, "cuBLASLt matmul %dx%dx%d (typed): %s", g->M, g->N, g->K,
                   cublasLtGetStatusString(st));
        return;
    }
    if (!fused) {
        zb_cuk16_epilogue_apply(c->stream, (int)g->epilogue, g->C, g->ldc,
                                g->tc_type == ZB_CU_BF16, g->aux, g->ldaux, g->bias,
                                g->bias_type == ZB_CU_BF16, g->M, g->N);
        c->gemm_epilogue_fallbacks++;
        zb_cu_launch_check(c, "matrix product epilogue");
    }
}
