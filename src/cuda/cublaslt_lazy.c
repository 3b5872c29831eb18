/* cuBLASLt, loaded when first used. libcublasLt is over 500 MB; linked normally it would be
 * mapped into every zbpp process at start-up, CPU runs included (the CLI reaches the CUDA stage
 * for --device cuda), which breaks runs under `ulimit -v` and slows every start. So libzbpp does
 * not link it: this file defines the cuBLASLt entry points src/cuda/ uses (the prototypes come
 * from <cublasLt.h>, so the compiler checks them) and forwards each to the real library, opened
 * with dlopen on the first call (the path CMake found, then the soname, then the plain name).
 * If it cannot be opened, every call fails with CUBLAS_STATUS_NOT_INITIALIZED and
 * cublasLtGetStatusString says why, so zb_cu_ctx_init reports one line. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include <cublasLt.h>

#ifndef ZB_CUBLASLT_PATH
#define ZB_CUBLASLT_PATH "libcublasLt.so"
#endif
#ifndef ZB_CUBLASLT_SONAME
#define ZB_CUBLASLT_SONAME "libcublasLt.so"
#endif

static struct {
    cublasStatus_t (*create)(cublasLtHandle_t *);
    cublasStatus_t (*destroy)(cublasLtHandle_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                             cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
                             const void *, const void *, cublasLtMatrixLayout_t, void *,
                             cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                             cudaStream_t);
    cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                cublasLtMatmulHeuristicResult_t[], int *);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *,
                               size_t);
    cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                               const void *, size_t);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t,
                                    int64_t);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*layout_set)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                                 const void *, size_t);
} api;
static int loaded; /* every entry point resolved */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dlsym into a function pointer without an object-to-function pointer cast (POSIX idiom) */
#define RESOLVE(lib, field, name) (*(void **)(&api.field) = dlsym((lib), (name)), api.field != NULL)

static void load(void)
{
    static const char *const names[] = {ZB_CUBLASLT_PATH, ZB_CUBLASLT_SONAME, "libcublasLt.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    int ok = RESOLVE(lib, create, "cublasLtCreate");
    ok = ok && RESOLVE(lib, destroy, "cublasLtDestroy");
    ok = ok && RESOLVE(lib, status_string, "cublasLtGetStatusString");
    ok = ok && RESOLVE(lib, matmul, "cublasLtMatmul");
    ok = ok && RESOLVE(lib, heuristic, "cublasLtMatmulAlgoGetHeuristic");
    ok = ok && RESOLVE(lib, desc_create, "cublasLtMatmulDescCreate");
    ok = ok && RESOLVE(lib, desc_destroy, "cublasLtMatmulDescDestroy");
    ok = ok && RESOLVE(lib, desc_set, "cublasLtMatmulDescSetAttribute");
    ok = ok && RESOLVE(lib, pref_create, "cublasLtMatmulPreferenceCreate");
    ok = ok && RESOLVE(lib, pref_destroy, "cublasLtMatmulPreferenceDestroy");
    ok = ok && RESOLVE(lib, pref_set, "cublasLtMatmulPreferenceSetAttribute");
    ok = ok && RESOLVE(lib, layout_create, "cublasLtMatrixLayoutCreate");
    ok = ok && RESOLVE(lib, layout_destroy, "cublasLtMatrixLayoutDestroy");
    ok = ok && RESOLVE(lib, layout_set, "cublasLtMatrixLayoutSetAttribute");
    loaded = ok; /* the library stays open for the life of the process */
}

static int ready(void)
{
    pthread_once(&once, load);
    return loaded;
}

#define FAIL CUBLAS_STATUS_NOT_INITIALIZED

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    return ready() ? api.create(lightHandle) : FAIL;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    return ready() ? api.destroy(lightHandle) : FAIL;
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    return ready() ? api.status_string(status)
                   : "cuBLASLt could not be loaded (" ZB_CUBLASLT_SONAME " not found or incomplete)";
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    return ready() ? api.matmul(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C,
                                Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes, stream)
                   : FAIL;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount)
{
    return ready() ? api.heuristic(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc,
                                   preference, requestedAlgoCount, heuristicResultsArray,
                                   returnAlgoCount)
                   : FAIL;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    return ready() ? api.desc_create(matmulDesc, computeType, scaleType) : FAIL;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    return ready() ? api.desc_destroy(matmulDesc) : FAIL;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes)
{
    return ready() ? api.desc_set(matmulDesc, attr, buf, sizeInBytes) : FAIL;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    return ready() ? api.pref_create(pref) : FAIL;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return ready() ? api.pref_destroy(pref) : FAIL;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    return ready() ? api.pref_set(pref, attr, buf, sizeInBytes) : FAIL;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    return ready() ? api.layout_create(matLayout, type, rows, cols, ld) : FAIL;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    return ready() ? api.layout_destroy(matLayout) : FAIL;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    return ready() ? api.layout_set(matLayout, attr, buf, sizeInBytes) : FAIL;
}
