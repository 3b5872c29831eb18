/* SM partitions of one GPU (include/zbpp/cuda.h, "SM partitions"): one CUDA green context and
 * one stream per rank, with disjoint SMs, through the driver API:
 *   cuDeviceGetDevResource -> cuDevSmResourceSplitByCount -> cuDevResourceGenerateDesc
 *   -> cuGreenCtxCreate -> cuGreenCtxStreamCreate.
 * libzbpp links the CUDA runtime, not the driver: libcuda.so.1 is opened here on first use and
 * every entry point is fetched with cuGetProcAddress at the ABI version of its PFN_ type in
 * <cudaTypedefs.h> (so the compiler checks each call), and a machine with no driver gets one
 * line (ZB_EUNSUPPORTED) instead of a loader failure. The plan (how many SMs per rank) is
 * src/cuda/green_plan.c; here the driver's own granularity feeds it, and the driver's answer
 * (how many groups of that size it can really make) is checked before anything is created. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "cuda/stream.h"
#include "zbpp/cuda.h"

static struct {
    PFN_cuInit_v2000 init;
    PFN_cuGetErrorString_v6000 error_string;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDeviceGetDevResource_v12040 device_resource;
    PFN_cuDevSmResourceSplitByCount_v12040 split;
    PFN_cuDevResourceGenerateDesc_v12040 generate_desc;
    PFN_cuGreenCtxCreate_v12040 ctx_create;
    PFN_cuGreenCtxDestroy_v12040 ctx_destroy;
    PFN_cuGreenCtxGetDevResource_v12040 ctx_resource;
    PFN_cuGreenCtxStreamCreate_v12050 stream_create;
    PFN_cuStreamDestroy_v4000 stream_destroy;
} drv;
static zb_status_t drv_status = ZB_EUNSUPPORTED; /* ZB_OK once every entry point resolved */
static char drv_why[200] = "SM partitions: the CUDA driver was not loaded";
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

#ifdef ZB_GREEN_FAKE_DRIVER
/* tests/test_cuda_green_fake.c: fills drv with a fake driver and returns its status */
static zb_status_t fake_driver_load(void);
static void drv_load(void) { drv_status = fake_driver_load(); }
#else
/* fetch one entry point at ABI version `ver` into the field `f` (POSIX function-pointer idiom) */
#define GET(f, name, ver)                                                                          \
    (getproc((name), (void **)&drv.f, (ver), CU_GET_PROC_ADDRESS_DEFAULT, &found) ==              \
         CUDA_SUCCESS &&                                                                           \
     found == CU_GET_PROC_ADDRESS_SUCCESS && drv.f != NULL)

static void drv_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(drv_why, sizeof drv_why,
                 "SM partitions: no CUDA driver (libcuda.so.1 cannot be opened)");
        return;
    }
    PFN_cuGetProcAddress_v12000 getproc = NULL;
    *(void **)&getproc = dlsym(lib, "cuGetProcAddress_v2");
    if (!getproc) {
        snprintf(drv_why, sizeof drv_why,
                 "SM partitions: the CUDA driver is older than 12.0 (no cuGetProcAddress_v2); "
                 "green contexts need a 12.4 driver or later");
        return;
    }
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    int ok = GET(init, "cuInit", 2000) && GET(error_string, "cuGetErrorString", 6000) &&
             GET(device_get, "cuDeviceGet", 2000) && GET(stream_destroy, "cuStreamDestroy", 4000);
    if (!ok) {
        snprintf(drv_why, sizeof drv_why, "SM partitions: the CUDA driver lacks basic entry points");
        return;
    }
    ok = GET(device_resource, "cuDeviceGetDevResource", 12040) &&
         GET(split, "cuDevSmResourceSplitByCount", 12040) &&
         GET(generate_desc, "cuDevResourceGenerateDesc", 12040) &&
         GET(ctx_create, "cuGreenCtxCreate", 12040) &&
         GET(ctx_destroy, "cuGreenCtxDestroy", 12040) &&
         GET(ctx_resource, "cuGreenCtxGetDevResource", 12040) &&
         GET(stream_create, "cuGreenCtxStreamCreate", 12050);
    if (!ok) {
        snprintf(drv_why, sizeof drv_why,
                 "SM partitions: this CUDA driver has no green contexts (needs 12.5 or later)");
        return;
    }
    drv_status = ZB_OK; /* the library stays open for the life of the process */
}
#undef GET
#endif

static const char *cu_str(CUresult r)
{
    const char *s = NULL;
    if (drv.error_string && drv.error_string(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUDA driver error";
}

/* Load the driver, cuInit, and the CUdevice of runtime ordinal `device`. */
static zb_status_t driver_device(int device, CUdevice *dev, zb_err_t *err)
{
    pthread_once(&drv_once, drv_load);
    if (drv_status != ZB_OK)
        return zb_err_set(err, drv_status, "%s", drv_why);
    CUresult r = drv.init(0);
    if (r == CUDA_ERROR_NO_DEVICE)
        return zb_err_set(err, ZB_EUNSUPPORTED, "SM partitions: no CUDA device");
    if (r != CUDA_SUCCESS)
        return zb_err_set(err, ZB_EUNSUPPORTED, "SM partitions: CUDA driver: %s", cu_str(r));
    r = drv.device_get(dev, device);
    if (r != CUDA_SUCCESS)
        return zb_err_set(err, ZB_EUNSUPPORTED, "SM partitions: no CUDA device %d (%s)", device,
                          cu_str(r));
    return ZB_OK;
}

static zb_status_t sm_resource(int device, CUdevice *dev, CUdevResource *res,
                               zb_cuda_sm_info_t *info, zb_err_t *err)
{
    zb_status_t st = driver_device(device, dev, err);
    if (st != ZB_OK)
        return st;
    memset(res, 0, sizeof *res);
    CUresult r = drv.device_resource(*dev, res, CU_DEV_RESOURCE_TYPE_SM);
    if (r != CUDA_SUCCESS)
        return zb_err_set(err, ZB_EIO, "SM partitions: device %d: cuDeviceGetDevResource: %s",
                          device, cu_str(r));
    info->sm_count = (int)res->sm.smCount;
    info->min_partition = (int)res->sm.minSmPartitionSize;
    info->alignment = (int)res->sm.smCoscheduledAlignment;
    /* The documented granularity of the compute capability is a floor: smCoscheduledAlignment
     * divides smCount (132 on an H100) while Hopper partitions are multiples of 8, so the
     * fields alone could plan sizes the split then rounds up. */
    int major = 0, minor = 0;
    zb_cuda_sm_info_t g;
    zb_err_t gerr;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        zb_cuda_sm_guideline(major, minor, info->sm_count, &g, &gerr) == ZB_OK) {
        if (g.min_partition > info->min_partition)
            info->min_partition = g.min_partition;
        if (g.alignment > info->alignment)
            info->alignment = g.alignment;
    }
    cudaGetLastError();
    if (info->min_partition < 1)
        info->min_partition = 1;
    if (info->alignment < 1)
        info->alignment = 1;
    return ZB_OK;
}

zb_status_t zb_cuda_sm_query(int device, zb_cuda_sm_info_t *out, zb_err_t *err)
{
    CUdevice dev;
    CUdevResource res;
    return sm_resource(device, &dev, &res, out, err);
}

struct zb_cuda_partitions {
    zb_cuda_sm_plan_t plan;
    int n;                /* green contexts created */
    CUgreenCtx *ctx;      /* [plan.ranks] */
    CUstream *stream;     /* [plan.ranks], NULL until created */
    int *sms;             /* [plan.ranks] SMs the driver reports per context */
};

void zb_cuda_partitions_free(zb_cuda_partitions_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        if (p->stream[i])
            drv.stream_destroy(p->stream[i]); /* streams first: the context does not own them */
        drv.ctx_destroy(p->ctx[i]);
    }
    free(p->ctx);
    free(p->stream);
    free(p->sms);
    free(p);
}

/* Split res into groups of k SMs, asking for `ranks` of them: ZB_OK with *exact = 1 when the
 * driver made `ranks` groups of exactly k (in part), *exact = 0 with *made / *size saying what
 * it did otherwise; ZB_EIO for a driver failure. */
static zb_status_t split(const CUdevResource *res, int ranks, int k, CUdevResource *part,
                         int *exact, unsigned *made, unsigned *size, zb_err_t *err)
{
    *exact = 0;
    *made = (unsigned)ranks;
    *size = 0;
    memset(part, 0, (size_t)ranks * sizeof *part);
    CUresult r = drv.split(part, made, res, NULL, 0, (unsigned)k);
    if (r != CUDA_SUCCESS)
        return zb_err_set(err, ZB_EIO, "SM partitions: cuDevSmResourceSplitByCount(%d SMs): %s",
                          k, cu_str(r));
    if (*made > 0)
        *size = part[0].sm.smCount;
    int ok = *made >= (unsigned)ranks;
    for (unsigned i = 0; ok && i < *made; i++)
        ok = part[i].sm.smCount == (unsigned)k;
    *exact = ok;
    return ZB_OK;
}

zb_status_t zb_cuda_partitions_new(int device, int ranks, int sm_per_rank,
                                   zb_cuda_partitions_t **out, zb_err_t *err)
{
    *out = NULL;
    CUdevice dev;
    CUdevResource res;
    zb_cuda_sm_info_t info;
    zb_cuda_sm_plan_t plan;
    zb_status_t st = sm_resource(device, &dev, &res, &info, err);
    if (st == ZB_OK)
        st = zb_cuda_sm_plan(&info, ranks, sm_per_rank, &plan, err);
    if (st != ZB_OK)
        return st;
    zb_cuda_partitions_t *p = calloc(1, sizeof *p);
    CUdevResource *part = calloc((size_t)ranks, sizeof *part);
    if (p) {
        p->ctx = calloc((size_t)ranks, sizeof *p->ctx);
        p->stream = calloc((size_t)ranks, sizeof *p->stream);
        p->sms = calloc((size_t)ranks, sizeof *p->sms);
    }
    if (!p || !part || !p->ctx || !p->stream || !p->sms) {
        free(part);
        zb_cuda_partitions_free(p);
        return zb_err_set(err, ZB_ENOMEM, "SM partitions: out of memory");
    }
    /* The split is symmetric and follows the GPU's clusters, so the driver may make fewer groups
     * of k than sm_count / k, or round k up. Splitting makes nothing yet (resources are
     * descriptions until a context is created), so sizes are tried for real: the even split
     * steps down to the largest size the driver makes exactly, for every rank; an explicit size
     * is the user's choice and is refused instead. */
    for (;;) {
        int exact = 0;
        unsigned made = 0, size = 0;
        st = split(&res, ranks, plan.sm_per_rank, part, &exact, &made, &size, err);
        if (st != ZB_OK)
            goto fail;
        if (exact)
            break;
        if (sm_per_rank == 0 && plan.sm_per_rank - info.alignment >= info.min_partition) {
            plan.sm_per_rank -= info.alignment;
            plan.sm_unused += ranks * info.alignment;
            continue;
        }
        if (made < (unsigned)ranks)
            st = zb_err_set(err, ZB_EINVAL,
                            "SM partitions: the driver makes only %u partition%s of %d SMs on "
                            "device %d (%d SMs), %d ranks asked", made, made == 1 ? "" : "s",
                            plan.sm_per_rank, device, info.sm_count, ranks);
        else
            st = zb_err_set(err, ZB_EINVAL,
                            "SM partitions: asked for %d SMs per rank, the driver made %u "
                            "(granularity: multiples of %d, at least %d)", plan.sm_per_rank,
                            size, info.alignment, info.min_partition);
        goto fail;
    }
    p->plan = plan;
    /* the primary context active first, as cuGreenCtxCreate advises (and the runtime's memory
     * lives there) */
    cudaError_t ce = cudaSetDevice(device);
    if (ce == cudaSuccess)
        ce = cudaFree(NULL);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        st = zb_err_set(err, ZB_EIO, "SM partitions: CUDA device %d: %s", device,
                        cudaGetErrorString(ce));
        goto fail;
    }
    CUresult r;
    for (int i = 0; i < ranks; i++) {
        CUdevResourceDesc desc = NULL;
        const char *what = "cuDevResourceGenerateDesc";
        r = drv.generate_desc(&desc, &part[i], 1);
        if (r == CUDA_SUCCESS) {
            what = "cuGreenCtxCreate";
            r = drv.ctx_create(&p->ctx[i], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
        }
        if (r != CUDA_SUCCESS) {
            st = zb_err_set(err, ZB_EIO, "SM partitions: rank %d: %s: %s", i, what, cu_str(r));
            goto fail;
        }
        p->n = i + 1;
        r = drv.stream_create(&p->stream[i], p->ctx[i], CU_STREAM_NON_BLOCKING, 0);
        if (r != CUDA_SUCCESS) {
            p->stream[i] = NULL;
            st = zb_err_set(err, ZB_EIO, "SM partitions: rank %d: cuGreenCtxStreamCreate: %s", i,
                            cu_str(r));
            goto fail;
        }
        CUdevResource got;
        memset(&got, 0, sizeof got);
        r = drv.ctx_resource(p->ctx[i], &got, CU_DEV_RESOURCE_TYPE_SM);
        if (r != CUDA_SUCCESS) {
            st = zb_err_set(err, ZB_EIO, "SM partitions: rank %d: cuGreenCtxGetDevResource: %s",
                            i, cu_str(r));
            goto fail;
        }
        p->sms[i] = (int)got.sm.smCount;
    }
    free(part);
    *out = p;
    return ZB_OK;
fail:
    free(part);
    zb_cuda_partitions_free(p);
    return st;
}

const zb_cuda_sm_plan_t *zb_cuda_partitions_plan(const zb_cuda_partitions_t *p)
{
    return &p->plan;
}

struct CUstream_st *zb_cuda_partition_stream(const zb_cuda_partitions_t *p, int r)
{
    return p && r >= 0 && r < p->n ? p->stream[r] : NULL;
}

int zb_cuda_partition_sms(const zb_cuda_partitions_t *p, int r)
{
    return p && r >= 0 && r < p->n ? p->sms[r] : -1;
}
