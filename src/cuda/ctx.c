/* The CUDA context of a stage and the cuBLASLt matrix product (one entry point, plans cached by
 * shape so the heuristic runs once per shape). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda/ctx.h"
#include "cuda/kernels.h"


static void plan_release(zb_cu_gemm_plan_t *p);

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
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        zb_cu_fail(c, ZB_EIO, "CUDA %s: %s", what, cudaGetErrorString(e));
    return c->status != ZB_OK;
}

zb_status_t zb_cu_ctx_check(zb_cu_ctx_t *c, const char *what, zb_err_t *err)
{
    zb_cu_launch_check(c, what);
    if (c->status != ZB_OK)
        return zb_err_set(err, c->status, "%s: %s", what, c->msg);
    return ZB_OK;
}

int zb_cu_part_reserve(zb_cu_ctx_t *c, size_t n)
{
    if (c->status != ZB_OK)
        return 0;
    if (n <= c->part_cap)
        return 1;
    /* kernels queued on the stream may still read the old buffer: cudaFree's implicit device
     * synchronisation is not documented for green-context streams, so wait (it grows only a
     * few times, in the first W) */
    if (c->part)
        cudaStreamSynchronize(c->stream);
    cudaFree(c->part);
    c->part = NULL;
    c->part_cap = 0;
    if (cudaMalloc((void **)&c->part, n * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        zb_cu_fail(c, ZB_ENOMEM, "cannot allocate %zu bytes of reduction scratch on the GPU",
                   n * sizeof(float));
        return 0;
    }
    c->part_cap = n;
    return 1;
}

zb_status_t zb_cu_ctx_init(zb_cu_ctx_t *c, int device, zb_cuda_precision_t prec, zb_err_t *err)
{
    memset(c, 0, sizeof *c);
    c->device = device;
    c->prec = prec;
    c->fp32_attn = ZB_CUDA_ATTN_FMA; /* a bare stage's; the trainers ask for auto */
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamCreate(&c->stream);
    if (e == cudaSuccess)
        e = cudaMalloc(&c->ws, ZB_CU_LT_WS_BYTES);
    if (e != cudaSuccess) {
        cudaGetLastError();
        zb_cu_ctx_destroy(c);
        return zb_err_set(err, ZB_EIO, "CUDA device %d: %s", device, cudaGetErrorString(e));
    }
    c->ws_bytes = ZB_CU_LT_WS_BYTES;
    cublasStatus_t bs = cublasLtCreate(&c->lt);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        c->lt = NULL;
        zb_cu_ctx_destroy(c);
        return zb_err_set(err, ZB_EIO, "cuBLASLt init failed: %s", cublasLtGetStatusString(bs));
    }
    return ZB_OK;
}

void zb_cu_ctx_destroy(zb_cu_ctx_t *c)
{
    zb_cu_small_free(c);
    for (int i = 0; i < c->nplans; i++) {
        if (c->plans[i].desc) /* a cached "no algorithm" entry holds nothing */
            plan_release(&c->plans[i]);
    }
    c->nplans = 0;
    if (c->lt)
        cublasLtDestroy(c->lt);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    cudaFree(c->ws);
    cudaFree(c->part);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    memset(c, 0, sizeof *c);
}

/* ---- matrix product ---- */

static cublasComputeType_t compute_type(zb_cuda_precision_t p)
{
    switch (p) {
    case ZB_CUDA_TF32:
        return CUBLAS_COMPUTE_32F_FAST_TF32;
    case ZB_CUDA_BF16:
        return CUBLAS_COMPUTE_32F_FAST_16BF;
    default:
        return CUBLAS_COMPUTE_32F; /* full fp32: cuBLASLt uses TF32 only when asked (FAST_TF32) */
    }
}

static int layout_new(cublasLtMatrixLayout_t *l, int type, int rows, int cols, int ld, int batch,
                      long long stride)
{
    if (cublasLtMatrixLayoutCreate(l, (cudaDataType_t)type, (uint64_t)rows, (uint64_t)cols, ld) !=
        CUBLAS_STATUS_SUCCESS)
        return 0;
    if (batch > 1) {
        /* checked: a failed set would silently compute batch 0 only */
        int32_t b = batch;
        int64_t s = stride;
        return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b,
                                                sizeof b) == CUBLAS_STATUS_SUCCESS &&
               cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &s, sizeof s) == CUBLAS_STATUS_SUCCESS;
    }
    return 1;
}

/* Column-major view: row-major C[M,N] = op(A)·op(B) is column-major C'[N,M] = op(B)'·op(A)'.
 * So cuBLASLt's "A" is our B (N×K after op), its "B" our A. */
/* The alignment cuBLASLt may assume for an operand: of its pointer, of every column (ld) and of
 * every batch (stride), capped at 16 bytes. Part of the plan's key, so a plan chosen for aligned
 * pointers is never run on less aligned ones. The cap is 16, not cuBLASLt's default 256: 16 is
 * what its vector loads and Hopper's tensor-memory copies need, and a larger cap would make the
 * key (and so possibly the algorithm and the bits) depend on where a tensor happens to start:
 * a stage's parameters are packed, so a weight's offset depends on how many layers the stage
 * holds, and a 1-stage and a 2-stage split must give the same bits. */
unsigned zb_cu_align_of(const void *p, int ld, long long stride, int batch, size_t elem_bytes)
{
    uintptr_t a = (uintptr_t)p | 16u | ((uintptr_t)ld * elem_bytes);
    if (batch > 1)
        a |= (uintptr_t)stride * elem_bytes;
    return (unsigned)(a & (~a + 1));
}

/* The key's epilogue, with the key's bias type where a bias is given and the key's aux leading
 * dimension where an aux matrix is: aux has D's type (cuBLASLt's default) and D's shape,
 * column-major, so only its leading dimension is needed. */
static int set_epilogue(cublasLtMatmulDesc_t d, const zb_cu_gemm_key_t *k, const void *bias,
                        const void *aux)
{
    if (k->epilogue == 0)
        return 1;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->epilogue;
    int ok = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ==
             CUBLAS_STATUS_SUCCESS;
    if (bias) {
        int32_t bt = k->bias_type;
        ok = ok && cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                  sizeof bt) == CUBLAS_STATUS_SUCCESS;
    }
    if (aux) {
        int64_t ld = k->ldaux;
        ok = ok && cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                                  sizeof ld) == CUBLAS_STATUS_SUCCESS;
    }
    return ok && zb_cu_gemm_set_pointers(d, bias, aux);
}

int zb_cu_gemm_set_pointers(cublasLtMatmulDesc_t d, const void *bias, const void *aux)
{
    int ok = 1;
    if (bias)
        ok = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias) == CUBLAS_STATUS_SUCCESS;
    if (aux)
        ok = ok && cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &aux, sizeof aux) == CUBLAS_STATUS_SUCCESS;
    return ok;
}

/* bf16 operands always accumulate in full fp32; fp32 ones as the context's precision says */
static cublasComputeType_t plan_compute_type(const zb_cu_ctx_t *c, const zb_cu_gemm_key_t *k)
{
    return k->ab_type == CUDA_R_16BF ? CUBLAS_COMPUTE_32F : compute_type(c->prec);
}

static void plan_release(zb_cu_gemm_plan_t *p)
{
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        cublasLtMatrixLayoutDestroy(p->lc);
    if (p->desc)
        cublasLtMatmulDescDestroy(p->desc);
    p->la = p->lb = p->lc = NULL;
    p->desc = NULL;
}

zb_cu_gemm_plan_t *zb_cu_gemm_plan(zb_cu_ctx_t *c, const zb_cu_gemm_key_t *key_in,
                                   const void *bias, const void *aux, int quiet)
{
    zb_cu_gemm_key_t key = *key_in;
    key.sm_target = c->sm_target;
    for (int i = 0; i < c->nplans; i++) {
        zb_cu_gemm_plan_t *p = &c->plans[i];
        if (memcmp(&p->key, &key, sizeof key) == 0)
            return p->desc ? p : NULL; /* NULL: cached "no algorithm" (quiet callers only) */
    }
    if (c->nplans == ZB_CU_GEMM_CACHE) {
        zb_cu_fail(c, ZB_EUNSUPPORTED, "more than %d matrix-product shapes", ZB_CU_GEMM_CACHE);
        return NULL;
    }
    const zb_cu_gemm_key_t *k = &key;
    zb_cu_gemm_plan_t *p = &c->plans[c->nplans];
    memset(p, 0, sizeof *p);
    p->key = key;
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt A = our B */
    cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ok = cublasLtMatmulDescCreate(&p->desc, plan_compute_type(c, k), CUDA_R_32F) ==
             CUBLAS_STATUS_SUCCESS;
    ok = ok &&
         cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) ==
             CUBLAS_STATUS_SUCCESS;
    /* in an SM partition the heuristic must plan for its SMs, not the whole device's (wave
     * count, split-K); part of the key, so the same partition size gives the same algorithm */
    int32_t sms = c->sm_target;
    ok = ok && (sms == 0 || cublasLtMatmulDescSetAttribute(p->desc,
                                                           CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                           &sms, sizeof sms) ==
                                CUBLAS_STATUS_SUCCESS);
    ok = ok && set_epilogue(p->desc, k, bias, aux);
    /* stored shapes (before op), column-major */
    int M = k->M, N = k->N, K = k->K;
    ok = ok && layout_new(&p->la, k->ab_type, k->tb ? K : N, k->tb ? N : K, k->ldb, k->batch,
                          k->sb);
    ok = ok && layout_new(&p->lb, k->ab_type, k->ta ? M : K, k->ta ? K : M, k->lda, k->batch,
                          k->sa);
    ok = ok && layout_new(&p->lc, k->c_type, N, M, k->ldc, k->batch, k->sc);
    cublasLtMatmulPreference_t pref = NULL;
    ok = ok && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (ok) {
        uint64_t ws = c->ws_bytes;
        /* cuBLASLt's A is our B and its B our A (see above) */
        uint32_t la = k->align_b, lb = k->align_a, lc = k->align_c;
        const struct {
            cublasLtMatmulPreferenceAttributes_t what;
            const void *value;
            size_t size;
        } prefs[] = {{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &la, sizeof la},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &lb, sizeof lb},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &lc, sizeof lc},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &lc, sizeof lc}};
        /* a preference not set could let the heuristic pick an algorithm our pointers break */
        for (size_t i = 0; ok && i < sizeof prefs / sizeof prefs[0]; i++)
            ok = cublasLtMatmulPreferenceSetAttribute(pref, prefs[i].what, prefs[i].value,
                                                      prefs[i].size) == CUBLAS_STATUS_SUCCESS;
        if (ok)
            cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1,
                                           &res, &found);
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (!ok || found < 1) {
        plan_release(p);
        if (quiet) {
            /* remembered: the caller's fallback runs on every call, the heuristic only once */
            if (ok)
                c->nplans++;
            return NULL;
        }
        zb_cu_fail(c, ZB_EUNSUPPORTED,
                   "cuBLASLt has no algorithm for a %dx%dx%d product (batch %d, %s%s%s)", M, N, K,
                   k->batch, k->ab_type == CUDA_R_16BF ? "bf16" : zb_cuda_precision_name(c->prec),
                   k->c_type == CUDA_R_16BF ? ", bf16 output" : "",
                   k->epilogue != 0 ? ", with an epilogue" : "");
        return NULL;
    }
    p->algo = res.algo;
    c->nplans++;
    return p;
}

void zb_cu_gemm(zb_cu_ctx_t *c, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                int lda, long long sa, const float *B, int ldb, long long sb, float beta, float *C,
                int ldc, long long sc, int batch)
{
    if (c->status != ZB_OK)
        return;
    if (batch <= 1)
        sa = sb = sc = 0, batch = 1;
    zb_cu_gemm_key_t key;
    memset(&key, 0, sizeof key);
    key.ta = ta, key.tb = tb, key.M = M, key.N = N, key.K = K, key.lda = lda, key.ldb = ldb;
    key.ldc = ldc, key.batch = batch, key.sa = sa, key.sb = sb, key.sc = sc;
    key.beta_zero = beta == 0.0f;
    key.align_a = zb_cu_align_of(A, lda, sa, batch, sizeof(float));
    key.align_b = zb_cu_align_of(B, ldb, sb, batch, sizeof(float));
    key.align_c = zb_cu_align_of(C, ldc, sc, batch, sizeof(float));
    zb_cu_gemm_plan_t *p = zb_cu_gemm_plan(c, &key, NULL, NULL, batch > 1);
    cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (p)
        st = cublasLtMatmul(c->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc,
                            &p->algo, c->ws, c->ws_bytes, c->stream);
    if (st != CUBLAS_STATUS_SUCCESS && batch > 1 && c->status == ZB_OK) {
        /* no batched kernel for these interleaved strides: the same products one by one (the
         * choice depends only on shapes and alignment, so it is the same every run) */
        for (int i = 0; i < batch && c->status == ZB_OK; i++)
            zb_cu_gemm(c, ta, tb, M, N, K, alpha, A + i * sa, lda, 0, B + i * sb, ldb, 0, beta,
                       C + i * sc, ldc, 0, 1);
        return;
    }
    if (!p)
        return;
    if (st != CUBLAS_STATUS_SUCCESS)
        zb_cu_fail(c, ZB_EIO, "cuBLASLt matmul %dx%dx%d: %s", M, N, K,
                   cublasLtGetStatusString(st));
}
