/* SM partitions on a real GPU (label gpu): device 0 split into 2 and 4 green contexts (even
 * split) and 2 x 16 SMs (explicit). For each: the driver reports the planned SM count for every
 * rank's context; a memset on every rank's stream lands; a probe kernel queued on all streams at
 * once (4 blocks per SM of the device each) runs rank r's blocks on at most its partition's SMs,
 * and no SM runs blocks of two ranks (the partitions are disjoint). Skipped (exit 77) where
 * there is no CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_testutil.h"

#ifndef ZB_HAVE_CUDA
int main(void)
{
    cuda_test_require_device();
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "cuda/probe.h"

enum { MAX_SM = 1024 };

static int device_sms(void)
{
    struct cudaDeviceProp p;
    assert_int_equal(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    return p.multiProcessorCount;
}

static void test_query(void **state)
{
    (void)state;
    zb_cuda_sm_info_t info;
    zb_err_t err;
    if (zb_cuda_sm_query(0, &info, &err) != ZB_OK)
        fail_msg("%s", err.msg);
    printf("device 0: %d SMs, partitions of at least %d, multiples of %d\n", info.sm_count,
           info.min_partition, info.alignment);
    assert_int_equal(info.sm_count, device_sms());
    assert_true(info.min_partition >= 1 && info.alignment >= 1);
}

/* Partition device 0 for `ranks` (k SMs each, 0 = even) and check it on the GPU. */
static void check_split(int ranks, int k)
{
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    if (zb_cuda_partitions_new(0, ranks, k, &p, &err) != ZB_OK)
        fail_msg("%d ranks, %d SMs each: %s", ranks, k, err.msg);
    const zb_cuda_sm_plan_t *plan = zb_cuda_partitions_plan(p);
    const int nsm = device_sms();
    char desc[128];
    zb_cuda_sm_plan_describe(plan, nsm, desc, sizeof desc);
    printf("partition: %s\n", desc);
    assert_int_equal(plan->ranks, ranks);
    if (k)
        assert_int_equal(plan->sm_per_rank, k);
    const int blocks = 4 * nsm;
    int *smid_dev[16];
    unsigned char *bytes_dev[16];
    for (int r = 0; r < ranks; r++) {
        assert_int_equal(zb_cuda_partition_sms(p, r), plan->sm_per_rank);
        cudaStream_t s = zb_cuda_partition_stream(p, r);
        assert_non_null(s);
        assert_int_equal(cudaMalloc((void **)&smid_dev[r], (size_t)blocks * sizeof(int)),
                         cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&bytes_dev[r], 4096), cudaSuccess);
        assert_int_equal(cudaMemsetAsync(bytes_dev[r], 0x10 + r, 4096, s), cudaSuccess);
        assert_int_equal(zb_cu_smid_probe(s, smid_dev[r], blocks, 200000), cudaSuccess);
    }
    static int owner[MAX_SM];
    for (int i = 0; i < MAX_SM; i++)
        owner[i] = -1;
    int *smid = malloc((size_t)blocks * sizeof(int));
    unsigned char host[4096];
    for (int r = 0; r < ranks; r++) {
        cudaStream_t s = zb_cuda_partition_stream(p, r);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        assert_int_equal(cudaMemcpy(host, bytes_dev[r], 4096, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        for (int i = 0; i < 4096; i++)
            assert_int_equal(host[i], 0x10 + r);
        assert_int_equal(cudaMemcpy(smid, smid_dev[r], (size_t)blocks * sizeof(int),
                                    cudaMemcpyDeviceToHost), cudaSuccess);
        int distinct = 0;
        for (int b = 0; b < blocks; b++) {
            assert_true(smid[b] >= 0 && smid[b] < MAX_SM);
            if (owner[smid[b]] == r)
                continue;
            if (owner[smid[b]] >= 0)
                fail_msg("SM %d ran blocks of ranks %d and %d", smid[b], owner[smid[b]], r);
            owner[smid[b]] = r;
            distinct++;
        }
        printf("rank %d: %d blocks on %d distinct SMs (partition of %d)\n", r, blocks, distinct,
               plan->sm_per_rank);
        assert_true(distinct >= 1 && distinct <= plan->sm_per_rank);
        cudaFree(smid_dev[r]);
        cudaFree(bytes_dev[r]);
    }
    free(smid);
    zb_cuda_partitions_free(p);
}

static void test_two(void **state)
{
    (void)state;
    check_split(2, 0);
}
static void test_four(void **state)
{
    (void)state;
    check_split(4, 0);
}
static void test_two_explicit(void **state)
{
    (void)state;
    zb_cuda_sm_info_t info;
    zb_err_t err;
    assert_int_equal(zb_cuda_sm_query(0, &info, &err), ZB_OK);
    int k = info.min_partition > 16 ? info.min_partition : 16;
    k = (k + info.alignment - 1) / info.alignment * info.alignment;
    check_split(2, k);
}

/* A size the GPU cannot make: one line, nothing created. */
static void test_refused(void **state)
{
    (void)state;
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_partitions_new(0, 2, device_sms(), &p, &err), ZB_EINVAL);
    printf("refused as expected: %s\n", err.msg);
    assert_null(p);
}

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query),        cmocka_unit_test(test_two),
        cmocka_unit_test(test_four),         cmocka_unit_test(test_two_explicit),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
