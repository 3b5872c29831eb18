/* SM partition creation (src/cuda/green.c) against a fake CUDA driver, no GPU: green.c is
 * compiled into this test with ZB_GREEN_FAKE_DRIVER, so its driver table points at the fakes
 * below (a 132-SM device in multiples of 8 whose split may make fewer groups than SMs / size,
 * as a real GPU's clusters can, or round a size up, and whose calls can be made to fail).
 * Checked: one green context + stream per rank with the planned SM count; the compute
 * capability's granularity is a floor under the driver's fields; the even split steps down to
 * a size the driver makes exactly for every rank, an explicit size is refused instead (too few
 * groups, or rounded up); a failure at any rank leaves no context or stream behind. Skipped (77)
 * in a build without CUDA (it needs the toolkit's headers). */
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

#define ZB_GREEN_FAKE_DRIVER 1
#include "../src/cuda/green.c" /* the code under test */

/* ---- the fake device and driver ---- */
struct CUgreenCtx_st {
    unsigned sms;
};
struct CUstream_st {
    int ctx_sms;
};
struct CUdevResourceDesc_st {
    unsigned sms;
};

static struct {
    unsigned sms, min, align; /* what cuDeviceGetDevResource reports */
    unsigned real_align;      /* the split rounds sizes up to this (>= align) */
    unsigned max_groups;      /* the split makes at most this many groups (0: SMs / size) */
    unsigned max_groups_at;   /* ... for sizes >= this */
    int fail_ctx_at, fail_stream_at, fail_resource_at; /* 1-based call to fail, 0 none */
    int ctx_calls, stream_calls, resource_calls;
    int live_ctx, live_streams;
    struct CUdevResourceDesc_st descs[64]; /* the API has no destroy for descriptors */
    int ndescs;
} fake;
static int fake_cc_major = 9; /* compute capability the fake runtime reports (x.0) */

static void fake_reset(void)
{
    memset(&fake, 0, sizeof fake);
    fake_cc_major = 9;
    fake.sms = 132;
    fake.min = fake.align = fake.real_align = 8;
}

static CUresult f_init(unsigned f)
{
    (void)f;
    return CUDA_SUCCESS;
}
static CUresult f_error_string(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "fake out of memory" : "fake driver error";
    return CUDA_SUCCESS;
}
static CUresult f_device_get(CUdevice *d, int ordinal)
{
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult f_device_resource(CUdevice d, CUdevResource *r, CUdevResourceType type)
{
    (void)d;
    assert_int_equal(type, CU_DEV_RESOURCE_TYPE_SM);
    r->type = CU_DEV_RESOURCE_TYPE_SM;
    r->sm.smCount = fake.sms;
    r->sm.minSmPartitionSize = fake.min;
    r->sm.smCoscheduledAlignment = fake.align;
    return CUDA_SUCCESS;
}
static CUresult f_split(CUdevResource *result, unsigned *nb, const CUdevResource *in,
                        CUdevResource *rem, unsigned flags, unsigned min_count)
{
    (void)rem;
    assert_int_equal(flags, 0);
    assert_int_equal(in->sm.smCount, fake.sms);
    if (min_count > in->sm.smCount)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned k = min_count < fake.min ? fake.min : min_count;
    k = (k + fake.real_align - 1) / fake.real_align * fake.real_align;
    unsigned avail = fake.sms / k;
    if (fake.max_groups && k >= fake.max_groups_at && avail > fake.max_groups)
        avail = fake.max_groups;
    if (!result) {
        *nb = avail;
        return CUDA_SUCCESS;
    }
    unsigned n = *nb < avail ? *nb : avail;
    for (unsigned i = 0; i < n; i++) {
        memset(&result[i], 0, sizeof result[i]);
        result[i].type = CU_DEV_RESOURCE_TYPE_SM;
        result[i].sm.smCount = k;
    }
    *nb = n;
    return CUDA_SUCCESS;
}
static CUresult f_generate_desc(CUdevResourceDesc *d, CUdevResource *res, unsigned n)
{
    assert_int_equal(n, 1);
    assert_true(fake.ndescs < 64);
    *d = &fake.descs[fake.ndescs++];
    (*d)->sms = res->sm.smCount;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_create(CUgreenCtx *c, CUdevResourceDesc d, CUdevice dev, unsigned flags)
{
    (void)dev;
    assert_int_equal(flags, CU_GREEN_CTX_DEFAULT_STREAM);
    if (++fake.ctx_calls == fake.fail_ctx_at)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = malloc(sizeof **c);
    (*c)->sms = d->sms;
    fake.live_ctx++;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_destroy(CUgreenCtx c)
{
    free(c);
    fake.live_ctx--;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_resource(CUgreenCtx c, CUdevResource *r, CUdevResourceType type)
{
    assert_int_equal(type, CU_DEV_RESOURCE_TYPE_SM);
    if (++fake.resource_calls == fake.fail_resource_at)
        return CUDA_ERROR_INVALID_CONTEXT;
    r->type = CU_DEV_RESOURCE_TYPE_SM;
    r->sm.smCount = c->sms;
    return CUDA_SUCCESS;
}
static CUresult f_stream_create(CUstream *s, CUgreenCtx c, unsigned flags, int prio)
{
    assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
    assert_int_equal(prio, 0);
    if (++fake.stream_calls == fake.fail_stream_at)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *s = malloc(sizeof **s);
    (*s)->ctx_sms = (int)c->sms;
    fake.live_streams++;
    return CUDA_SUCCESS;
}
static CUresult f_stream_destroy(CUstream s)
{
    free(s);
    fake.live_streams--;
    return CUDA_SUCCESS;
}

static zb_status_t fake_driver_load(void)
{
    drv.init = f_init;
    drv.error_string = f_error_string;
    drv.device_get = f_device_get;
    drv.device_resource = f_device_resource;
    drv.split = f_split;
    drv.generate_desc = f_generate_desc;
    drv.ctx_create = f_ctx_create;
    drv.ctx_destroy = f_ctx_destroy;
    drv.ctx_resource = f_ctx_resource;
    drv.stream_create = f_stream_create;
    drv.stream_destroy = f_stream_destroy;
    return ZB_OK;
}

/* the runtime calls green.c makes (compute capability, primary context) */
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
    if (d != 0)
        return cudaErrorInvalidDevice;
    if (a == cudaDevAttrComputeCapabilityMajor)
        *v = fake_cc_major;
    else if (a == cudaDevAttrComputeCapabilityMinor)
        *v = 0;
    else
        return cudaErrorInvalidValue;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d)
{
    return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaFree(void *p)
{
    assert_null(p);
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e)
{
    (void)e;
    return "fake CUDA error";
}

/* ---- tests ---- */

static void test_four_partitions(void **state)
{
    (void)state;
    fake_reset();
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    zb_cuda_sm_info_t info;
    assert_int_equal(zb_cuda_sm_query(0, &info, &err), ZB_OK);
    assert_int_equal(info.sm_count, 132);
    assert_int_equal(info.alignment, 8);
    assert_int_equal(zb_cuda_partitions_new(0, 4, 0, &p, &err), ZB_OK);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_per_rank, 32);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_unused, 4);
    assert_int_equal(fake.live_ctx, 4);
    assert_int_equal(fake.live_streams, 4);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(zb_cuda_partition_sms(p, r), 32);
        struct CUstream_st *s = zb_cuda_partition_stream(p, r);
        assert_non_null(s);
        assert_int_equal(s->ctx_sms, 32); /* the stream is in that rank's green context */
        for (int q = 0; q < r; q++)
            assert_ptr_not_equal(s, zb_cuda_partition_stream(p, q));
    }
    assert_null(zb_cuda_partition_stream(p, 4));
    assert_null(zb_cuda_partition_stream(p, -1));
    assert_int_equal(zb_cuda_partition_sms(p, 4), -1);
    zb_cuda_partitions_free(p);
    assert_int_equal(fake.live_ctx, 0);
    assert_int_equal(fake.live_streams, 0);
    /* an explicit size */
    assert_int_equal(zb_cuda_partitions_new(0, 2, 16, &p, &err), ZB_OK);
    assert_int_equal(zb_cuda_partition_sms(p, 1), 16);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_unused, 100);
    zb_cuda_partitions_free(p);
}

/* The driver can make only 2 groups of 40 or more SMs (cluster limits): 3 ranks evenly get 32
 * each (the largest size it can make 3 of); 3 x 40 asked explicitly is refused. */
static void test_driver_makes_fewer(void **state)
{
    (void)state;
    fake_reset();
    fake.max_groups = 2;
    fake.max_groups_at = 40;
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_partitions_new(0, 3, 0, &p, &err), ZB_OK);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_per_rank, 32);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_unused, 132 - 96);
    assert_int_equal(zb_cuda_partition_sms(p, 2), 32);
    zb_cuda_partitions_free(p);
    zb_err_clear(&err);
    assert_int_equal(zb_cuda_partitions_new(0, 3, 40, &p, &err), ZB_EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "the driver makes only 2 partitions of 40 SMs"));
    /* and no size works at all: 17 x 8 is beyond the plan already */
    fake.max_groups = 15;
    fake.max_groups_at = 8;
    assert_int_equal(zb_cuda_partitions_new(0, 16, 0, &p, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "only 15 partitions of 8 SMs"));
    assert_int_equal(fake.live_ctx, 0);
}

/* The co-scheduling alignment the driver reports (2 here) is not the split's granularity: on
 * compute capability 9.0 the documented multiples of 8 are the floor, so 12 SMs is refused by
 * the plan, before the driver is asked. */
static void test_guideline_floor(void **state)
{
    (void)state;
    fake_reset();
    fake.align = 2;
    fake.min = 2;
    zb_cuda_sm_info_t info;
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_sm_query(0, &info, &err), ZB_OK);
    assert_int_equal(info.alignment, 8);
    assert_int_equal(info.min_partition, 8);
    assert_int_equal(zb_cuda_partitions_new(0, 2, 12, &p, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "12 SMs per rank is not a multiple of 8"));
    assert_int_equal(fake.ctx_calls, 0);
}

/* A driver that rounds sizes up to 8 while the planning granularity says 2 (a compute
 * capability 8.0 fake: min 4, multiples of 2): an explicit 12 becomes 16 -> refused, the ranks
 * would not get the printed plan; the even split steps down past rounded sizes (44, 42 -> 48
 * make only 2 groups) to 40, which the driver makes exactly. */
static void test_driver_rounds_up(void **state)
{
    (void)state;
    fake_reset();
    fake_cc_major = 8;
    fake.align = 2;
    fake.min = 4;
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_partitions_new(0, 2, 12, &p, &err), ZB_EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "asked for 12 SMs per rank, the driver made 16"));
    assert_int_equal(fake.live_ctx, 0);
    assert_int_equal(zb_cuda_partitions_new(0, 3, 0, &p, &err), ZB_OK);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_per_rank, 40);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_unused, 12);
    assert_int_equal(zb_cuda_partition_sms(p, 0), 40);
    zb_cuda_partitions_free(p);
    /* 2 ranks: 66 -> 72 makes 1 group; ... 64 is made exactly */
    assert_int_equal(zb_cuda_partitions_new(0, 2, 0, &p, &err), ZB_OK);
    assert_int_equal(zb_cuda_partitions_plan(p)->sm_per_rank, 64);
    zb_cuda_partitions_free(p);
    assert_int_equal(fake.live_ctx, 0);
}

/* A failure at any step of any rank: one line naming the rank and the call, nothing left. */
static void test_failures_clean_up(void **state)
{
    (void)state;
    for (int at = 1; at <= 4; at++) {
        for (int which = 0; which < 3; which++) {
            fake_reset();
            if (which == 0)
                fake.fail_ctx_at = at;
            else if (which == 1)
                fake.fail_stream_at = at;
            else
                fake.fail_resource_at = at;
            zb_cuda_partitions_t *p = (zb_cuda_partitions_t *)&fake;
            zb_err_t err;
            zb_err_clear(&err);
            zb_status_t st = zb_cuda_partitions_new(0, 4, 0, &p, &err);
            assert_true(st == ZB_EIO);
            assert_null(p);
            char rank[16];
            snprintf(rank, sizeof rank, "rank %d: ", at - 1);
            if (!strstr(err.msg, rank))
                fail_msg("'%s' does not name %s", err.msg, rank);
            static const char *const call[] = {"cuGreenCtxCreate", "cuGreenCtxStreamCreate",
                                               "cuGreenCtxGetDevResource"};
            assert_non_null(strstr(err.msg, call[which]));
            assert_int_equal(fake.live_ctx, 0);
            assert_int_equal(fake.live_streams, 0);
        }
    }
}

static void test_bad_requests(void **state)
{
    (void)state;
    fake_reset();
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_partitions_new(0, 17, 0, &p, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "at most 16 partitions"));
    assert_int_equal(zb_cuda_partitions_new(0, 2, 12, &p, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "not a multiple of 8"));
    assert_int_equal(zb_cuda_partitions_new(1, 2, 0, &p, &err), ZB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "no CUDA device 1"));
    assert_null(p);
    assert_int_equal(fake.ctx_calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_partitions),   cmocka_unit_test(test_driver_makes_fewer),
        cmocka_unit_test(test_guideline_floor),   cmocka_unit_test(test_driver_rounds_up),
        cmocka_unit_test(test_failures_clean_up),
        cmocka_unit_test(test_bad_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
