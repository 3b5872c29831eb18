/* The host logic of the typed product zb_cu_gemm_ex (src/cuda/gemm.c) and the plan cache
 * (src/cuda/ctx.c) against a fake cuBLASLt that records what it is asked, no GPU:
 *   - the row-major to column-major mapping: cuBLASLt's A is our B, layouts of the stored
 *     shapes with the right types, C's layout [N, M] with ldc;
 *   - bf16 operands compute in CUBLAS_COMPUTE_32F, fp32 ones in the context's precision;
 *   - the epilogue attributes: cuBLASLt's epilogue, an fp32 bias, the aux leading dimension, and
 *     the bias / aux pointers of THIS call on a cached plan;
 *   - the cache key separates types, epilogues and aux layouts, and reuses a plan otherwise;
 *   - where the heuristic has no fused epilogue (or the test switch asks), the plain product
 *     runs and the epilogue kernel follows with the call's arguments, the "no algorithm" answer
 *     cached;
 *   - bad arguments are refused with a message, and zb_cu_gemm still plans fp32.
 * Skipped (77) in a build without CUDA (it needs the toolkit's headers). */
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

#include "../src/cuda/ctx.c" /* the code under test */
#include "../src/cuda/gemm.c"

/* ---- the fake cuBLASLt: pools of opaque objects and what was set on them ---- */

enum { POOL = 512 };

typedef struct {
    int used;
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa, transb, sms;
    uint32_t epilogue;
    int32_t bias_type;
    int64_t aux_ld;
    const void *bias, *aux;
} fake_desc_t;

typedef struct {
    int used;
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
} fake_layout_t;

static cublasLtMatmulDescOpaque_t desc_pool[POOL];
static fake_desc_t descs[POOL];
static cublasLtMatrixLayoutOpaque_t layout_pool[POOL];
static fake_layout_t layouts[POOL];
static cublasLtMatmulPreferenceOpaque_t pref_pool[POOL];
static int npref;

static int heuristic_calls;
static int refuse_epilogues; /* the heuristic finds nothing for a desc with an epilogue */

static struct {
    int calls;
    fake_desc_t desc;
    fake_layout_t a, b, c, d;
    const void *A, *B, *C;
    void *D;
    float alpha, beta;
} mm;

static struct {
    int calls, epilogue, ldc, c_bf16, ldaux, M, N;
    void *C, *aux;
    const void *bias;
    int bias_bf16;
} epi_kernel;

static fake_desc_t *desc_of(cublasLtMatmulDesc_t d)
{
    return &descs[d - desc_pool];
}

static fake_layout_t *layout_of(cublasLtMatrixLayout_t l)
{
    return &layouts[l - layout_pool];
}

/* defined so the real shim (src/cuda/cublaslt_lazy.c) is not linked in beside these */
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = NULL;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    (void)h;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    return status == CUBLAS_STATUS_SUCCESS ? "success" : "fake failure";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct,
                                        cudaDataType_t scale)
{
    for (int i = 0; i < POOL; i++)
        if (!descs[i].used) {
            descs[i] = (fake_desc_t){.used = 1, .compute = ct, .scale = scale, .bias_type = -1,
                                     .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
            *d = &desc_pool[i];
            return CUBLAS_STATUS_SUCCESS;
        }
    return CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    desc_of(d)->used = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
    fake_desc_t *f = desc_of(d);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
        assert_int_equal(size, sizeof f->transa);
        memcpy(&f->transa, buf, size);
        break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
        assert_int_equal(size, sizeof f->transb);
        memcpy(&f->transb, buf, size);
        break;
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET:
        memcpy(&f->sms, buf, sizeof f->sms);
        break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        assert_int_equal(size, sizeof f->epilogue);
        memcpy(&f->epilogue, buf, size);
        break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        assert_int_equal(size, sizeof f->bias_type);
        memcpy(&f->bias_type, buf, size);
        break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
        assert_int_equal(size, sizeof f->aux_ld);
        memcpy(&f->aux_ld, buf, size);
        break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        assert_int_equal(size, sizeof f->bias);
        memcpy(&f->bias, buf, size);
        break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        assert_int_equal(size, sizeof f->aux);
        memcpy(&f->aux, buf, size);
        break;
    default:
        fail_msg("unexpected descriptor attribute %d", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    for (int i = 0; i < POOL; i++)
        if (!layouts[i].used) {
            layouts[i] = (fake_layout_t){.used = 1, .type = type, .rows = rows, .cols = cols,
                                         .ld = ld};
            *l = &layout_pool[i];
            return CUBLAS_STATUS_SUCCESS;
        }
    return CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    layout_of(l)->used = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size)
{
    (void)l, (void)attr, (void)buf, (void)size;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = &pref_pool[npref++ % POOL];
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    (void)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    (void)p, (void)attr, (void)buf, (void)size;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t res[], int *found)
{
    (void)h, (void)a, (void)b, (void)c, (void)dl, (void)p, (void)requested;
    heuristic_calls++;
    memset(res, 0, sizeof *res);
    *found = refuse_epilogues && desc_of(d)->epilogue != CUBLASLT_EPILOGUE_DEFAULT ? 0 : 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t la, const void *B,
                              cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                              cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t s)
{
    (void)h, (void)algo, (void)ws, (void)ws_bytes, (void)s;
    mm.calls++;
    mm.desc = *desc_of(d);
    mm.a = *layout_of(la), mm.b = *layout_of(lb), mm.c = *layout_of(lc), mm.d = *layout_of(ld);
    mm.A = A, mm.B = B, mm.C = C, mm.D = D;
    memcpy(&mm.alpha, alpha, sizeof mm.alpha);
    memcpy(&mm.beta, beta, sizeof mm.beta);
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the fake runtime calls ctx.c and gemm.c make, and the epilogue kernel ---- */

cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    (void)p;
    return cudaSuccess;
}

void zb_cuk16_epilogue_apply(cudaStream_t s, int epilogue, void *C, int ldc, int c_bf16,
                             void *aux, int ldaux, const void *bias, int bias_bf16, int M,
                             int N)
{
    (void)s;
    epi_kernel.calls++;
    epi_kernel.epilogue = epilogue, epi_kernel.C = C, epi_kernel.ldc = ldc;
    epi_kernel.c_bf16 = c_bf16, epi_kernel.aux = aux, epi_kernel.ldaux = ldaux;
    epi_kernel.bias = bias, epi_kernel.bias_bf16 = bias_bf16, epi_kernel.M = M, epi_kernel.N = N;
}

/* ---- tests ---- */

static zb_cu_ctx_t ctx;

/* "device" buffers: only their addresses (16-byte aligned) reach the fake */
static _Alignas(16) unsigned char mem[8][4096];

static int setup(void **state)
{
    (void)state;
    memset(&ctx, 0, sizeof ctx);
    memset(&mm, 0, sizeof mm);
    memset(&epi_kernel, 0, sizeof epi_kernel);
    memset(descs, 0, sizeof descs);
    memset(layouts, 0, sizeof layouts);
    heuristic_calls = 0, refuse_epilogues = 0;
    ctx.prec = ZB_CUDA_BF16;
    ctx.ws_bytes = 1 << 20;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zb_cu_ctx_destroy(&ctx);
    for (int i = 0; i < POOL; i++) /* every plan's objects were released */
        assert_false(descs[i].used || layouts[i].used);
    return 0;
}

/* fc forward of a 72-row block: out[72,256] = gelu(x[72,64]·W[256,64]^T + b), aux = pre */
static zb_cu_gemm_args_t fc_forward(void)
{
    return (zb_cu_gemm_args_t){
        .ta = 0, .tb = 1, .M = 72, .N = 256, .K = 64, .alpha = 1.0f, .beta = 0.0f,
        .A = mem[0], .B = mem[1], .C = mem[2], .lda = 64, .ldb = 64, .ldc = 256,
        .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_BF16, .epilogue = ZB_CU_EPI_GELU_AUX_BIAS,
        .bias = mem[3], .bias_type = ZB_CU_BF16, .aux = mem[4], .ldaux = 264};
}

static void expect_ok(void)
{
    if (ctx.status != ZB_OK)
        fail_msg("context failed: %s", ctx.msg);
}

static void test_mapping_and_epilogue(void **state)
{
    (void)state;
    zb_cu_gemm_args_t g = fc_forward();
    zb_cu_gemm_ex(&ctx, &g);
    expect_ok();
    assert_int_equal(mm.calls, 1);
    /* cuBLASLt's A is our B, stored [256,64] = column-major 64x256, transposed */
    assert_ptr_equal(mm.A, g.B);
    assert_ptr_equal(mm.B, g.A);
    assert_int_equal(mm.a.type, CUDA_R_16BF);
    assert_int_equal(mm.a.rows, 64), assert_int_equal(mm.a.cols, 256), assert_int_equal(mm.a.ld, 64);
    assert_int_equal(mm.desc.transa, CUBLAS_OP_T);
    /* its B is our A, stored [72,64] = column-major 64x72, not transposed */
    assert_int_equal(mm.b.type, CUDA_R_16BF);
    assert_int_equal(mm.b.rows, 64), assert_int_equal(mm.b.cols, 72), assert_int_equal(mm.b.ld, 64);
    assert_int_equal(mm.desc.transb, CUBLAS_OP_N);
    /* C = D: row-major [72,256] is column-major [256,72] */
    assert_ptr_equal(mm.C, g.C);
    assert_ptr_equal(mm.D, g.C);
    assert_int_equal(mm.c.type, CUDA_R_16BF);
    assert_int_equal(mm.c.rows, 256), assert_int_equal(mm.c.cols, 72), assert_int_equal(mm.c.ld, 256);
    assert_int_equal(mm.d.rows, 256);
    /* bf16 operands: full fp32 accumulation whatever the context's precision */
    assert_int_equal(mm.desc.compute, CUBLAS_COMPUTE_32F);
    assert_int_equal(mm.desc.scale, CUDA_R_32F);
    /* the epilogue: bias per row of D (our column), bf16 as D; aux with our row stride */
    assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    assert_int_equal(mm.desc.bias_type, CUDA_R_16BF);
    assert_ptr_equal(mm.desc.bias, g.bias);
    assert_ptr_equal(mm.desc.aux, g.aux);
    assert_int_equal(mm.desc.aux_ld, 264);
    assert_true(mm.alpha == 1.0f && mm.beta == 0.0f);
    assert_int_equal(epi_kernel.calls, 0);
    assert_int_equal(ctx.gemm_epilogue_fallbacks, 0);
}

/* An fp32 bias is a different plan (the key holds the bias type) and is declared as fp32. */
static void test_fp32_bias_is_its_own_plan(void **state)
{
    (void)state;
    zb_cu_gemm_args_t g = fc_forward();
    zb_cu_gemm_ex(&ctx, &g);
    int plans = ctx.nplans;
    g.bias_type = ZB_CU_F32;
    zb_cu_gemm_ex(&ctx, &g);
    expect_ok();
    assert_int_equal(ctx.nplans, plans + 1);
    assert_int_equal(mm.desc.bias_type, CUDA_R_32F);
    assert_ptr_equal(mm.desc.bias, g.bias);
}

static void test_plan_reused_with_this_calls_pointers(void **state)
{
    (void)state;
    zb_cu_gemm_args_t g = fc_forward();
    zb_cu_gemm_ex(&ctx, &g);
    g.C = mem[5], g.bias = mem[6], g.aux = mem[7];
    zb_cu_gemm_ex(&ctx, &g);
    expect_ok();
    assert_int_equal(ctx.nplans, 1);
    assert_int_equal(heuristic_calls, 1);
    assert_ptr_equal(mm.D, mem[5]);
    assert_ptr_equal(mm.desc.bias, mem[6]);
    assert_ptr_equal(mm.desc.aux, mem[7]);
}

static void test_key_separates_forms(void **state)
{
    (void)state;
    zb_cu_gemm_args_t g = fc_forward();
    zb_cu_gemm_ex(&ctx, &g);
    g.tc_type = ZB_CU_F32; /* fp32 output (and aux) */
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(mm.c.type, CUDA_R_32F);
    g.ldaux = 256; /* another aux layout */
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(mm.desc.aux_ld, 256);
    g.epilogue = ZB_CU_EPI_BIAS;
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_BIAS);
    assert_null(mm.desc.aux);
    g.epilogue = ZB_CU_EPI_DGELU; /* reads aux, no bias */
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_DGELU);
    assert_null(mm.desc.bias);
    assert_int_equal(mm.desc.bias_type, -1);
    g.epilogue = ZB_CU_EPI_NONE;
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_DEFAULT);
    expect_ok();
    assert_int_equal(ctx.nplans, 6);
    /* the fp32 product of zb_cu_gemm on the same shape is its own plan, in the context's
     * precision, with fp32 layouts */
    zb_cu_gemm(&ctx, 0, 1, 72, 256, 64, 1.0f, (const float *)mem[0], 64, 0,
               (const float *)mem[1], 64, 0, 0.0f, (float *)mem[2], 256, 0, 1);
    expect_ok();
    assert_int_equal(ctx.nplans, 7);
    assert_int_equal(mm.desc.compute, CUBLAS_COMPUTE_32F_FAST_16BF);
    assert_int_equal(mm.a.type, CUDA_R_32F);
    assert_int_equal(mm.c.type, CUDA_R_32F);
    assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_DEFAULT);
}

static void test_weight_gradient(void **state)
{
    (void)state;
    /* dW[256,64] (fp32) += dpre[72,256]^T · x[72,64] */
    zb_cu_gemm_args_t g = {.ta = 1, .tb = 0, .M = 256, .N = 64, .K = 72, .alpha = 1.0f,
                           .beta = 1.0f, .A = mem[0], .B = mem[1], .C = mem[2], .lda = 256,
                           .ldb = 64, .ldc = 64, .ta_type = ZB_CU_BF16, .tc_type = ZB_CU_F32};
    zb_cu_gemm_ex(&ctx, &g);
    expect_ok();
    assert_true(mm.beta == 1.0f);
    assert_int_equal(mm.a.type, CUDA_R_16BF), assert_int_equal(mm.b.type, CUDA_R_16BF);
    assert_int_equal(mm.c.type, CUDA_R_32F);
    /* our B = x [72,64] not transposed: column-major 64x72; our A = dpre transposed */
    assert_int_equal(mm.a.rows, 64), assert_int_equal(mm.a.cols, 72);
    assert_int_equal(mm.desc.transa, CUBLAS_OP_N), assert_int_equal(mm.desc.transb, CUBLAS_OP_T);
    assert_int_equal(mm.b.rows, 256), assert_int_equal(mm.b.cols, 72), assert_int_equal(mm.b.ld, 256);
    assert_int_equal(mm.c.rows, 64), assert_int_equal(mm.c.cols, 256);
    assert_int_equal(mm.desc.compute, CUBLAS_COMPUTE_32F);
    /* beta = 0 is another plan (cuBLASLt may pick another algorithm when C is not read) */
    g.beta = 0.0f;
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(ctx.nplans, 2);
}

static void test_fallback_epilogue(void **state)
{
    (void)state;
    refuse_epilogues = 1;
    zb_cu_gemm_args_t g = fc_forward();
    for (int rep = 0; rep < 2; rep++) {
        zb_cu_gemm_ex(&ctx, &g);
        expect_ok();
        /* the plain product into C, then the kernel with the call's arguments */
        assert_int_equal(mm.calls, rep + 1);
        assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_DEFAULT);
        assert_null(mm.desc.bias);
        assert_null(mm.desc.aux);
        assert_ptr_equal(mm.D, g.C);
        assert_int_equal(epi_kernel.calls, rep + 1);
        assert_int_equal(epi_kernel.epilogue, ZB_CU_EPI_GELU_AUX_BIAS);
        assert_ptr_equal(epi_kernel.C, g.C);
        assert_int_equal(epi_kernel.ldc, 256);
        assert_int_equal(epi_kernel.c_bf16, 1);
        assert_ptr_equal(epi_kernel.aux, g.aux);
        assert_int_equal(epi_kernel.ldaux, 264);
        assert_ptr_equal(epi_kernel.bias, g.bias);
        assert_int_equal(epi_kernel.bias_bf16, 1);
        assert_int_equal(epi_kernel.M, 72), assert_int_equal(epi_kernel.N, 256);
    }
    /* the heuristic ran once for the fused form (no algorithm, remembered) and once plain */
    assert_int_equal(heuristic_calls, 2);
    assert_int_equal(ctx.gemm_epilogue_fallbacks, 2);

    /* the test switch takes the same path where the fused form exists */
    refuse_epilogues = 0;
    ctx.gemm_epilogue_off = 1;
    g.epilogue = ZB_CU_EPI_DGELU, g.tc_type = ZB_CU_F32;
    zb_cu_gemm_ex(&ctx, &g);
    expect_ok();
    assert_int_equal(epi_kernel.calls, 3);
    assert_int_equal(epi_kernel.epilogue, ZB_CU_EPI_DGELU);
    assert_int_equal(epi_kernel.c_bf16, 0);
    assert_int_equal(mm.desc.epilogue, CUBLASLT_EPILOGUE_DEFAULT);
    /* no epilogue: nothing to run after the product */
    g.epilogue = ZB_CU_EPI_NONE;
    zb_cu_gemm_ex(&ctx, &g);
    assert_int_equal(epi_kernel.calls, 3);
}

static void expect_refused(zb_cu_gemm_args_t g, const char *needle)
{
    zb_cu_ctx_t c;
    memset(&c, 0, sizeof c);
    c.ws_bytes = 1 << 20;
    zb_cu_gemm_ex(&c, &g);
    assert_int_equal(c.status, ZB_EINVAL);
    printf("  refused: %s\n", c.msg);
    assert_non_null(strstr(c.msg, needle));
    assert_int_equal(c.nplans, 0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    int calls = mm.calls;
    zb_cu_gemm_args_t g = fc_forward();
    g.bias = NULL;
    expect_refused(g, "no bias");
    g = fc_forward();
    g.aux = NULL;
    expect_refused(g, "aux matrix");
    g.aux = mem[4], g.ldaux = 260;
    expect_refused(g, "multiple of 8");
    g.ldaux = 248;
    expect_refused(g, "at least N");
    g = fc_forward();
    g.K = 0;
    expect_refused(g, "positive");
    assert_int_equal(mm.calls, calls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mapping_and_epilogue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fp32_bias_is_its_own_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_reused_with_this_calls_pointers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_key_separates_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_weight_gradient, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_epilogue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
