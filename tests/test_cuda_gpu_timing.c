/* CUDA-event action timing on a real GPU (label gpu): a timer around three actions (a 64 MiB
 * memset, a probe kernel, a small memset) on a stream, two steps: every action gets
 * start <= end, actions follow each other in program order, all finite and after the step
 * start; then two ranks on two SM partitions, rank 1 resolved on rank 0's clock (events of the
 * primary context recorded on green-context streams). Skipped (exit 77) without a device. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_testutil.h"
#include "zbpp/executor.h"

#ifndef ZB_HAVE_CUDA
int main(void)
{
    cuda_test_require_device();
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "cuda/probe.h"

enum { BIG = 64 << 20, BLOCKS = 256 };

static void *big_dev, *small_dev;
static int *smid_dev;

/* the three actions of the program, each timed */
static void run_step(zb_cuda_timer_t *t, cudaStream_t s)
{
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_step_begin(t, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_begin(t, 0, &err), ZB_OK);
    assert_int_equal(cudaMemsetAsync(big_dev, 1, BIG, s), cudaSuccess);
    assert_int_equal(zb_cuda_timer_end(t, 0, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_begin(t, 1, &err), ZB_OK);
    assert_int_equal(zb_cu_smid_probe(s, smid_dev, BLOCKS, 100000), cudaSuccess);
    assert_int_equal(zb_cuda_timer_end(t, 1, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_begin(t, 2, &err), ZB_OK);
    assert_int_equal(cudaMemsetAsync(small_dev, 2, 4096, s), cudaSuccess);
    assert_int_equal(zb_cuda_timer_end(t, 2, &err), ZB_OK);
}

static void check_ordered(const zb_exec_timeline_t *tl, double origin)
{
    for (int i = 0; i < tl->len; i++) {
        printf("  action %d: %.6f .. %.6f s\n", i, tl->start[i], tl->end[i]);
        assert_true(isfinite(tl->start[i]) && isfinite(tl->end[i]));
        assert_true(tl->start[i] <= tl->end[i]);
        assert_true(tl->start[i] >= origin);
        if (i > 0)
            assert_true(tl->end[i - 1] <= tl->start[i]);
    }
}

static void test_one_stream(void **state)
{
    (void)state;
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    zb_cuda_timer_t *t = NULL;
    zb_exec_timeline_t tl;
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_new(s, 3, &t, &err), ZB_OK);
    assert_int_equal(zb_exec_timeline_alloc(&tl, 3, &err), ZB_OK);
    for (int step = 0; step < 2; step++) {
        run_step(t, s);
        if (zb_cuda_timer_resolve(t, NULL, 5.0, tl.start, tl.end, tl.len, &err) != ZB_OK)
            fail_msg("%s", err.msg);
        printf("step %d:\n", step);
        check_ordered(&tl, 5.0);
    }
    zb_exec_timeline_free(&tl);
    zb_cuda_timer_free(t);
    cudaStreamDestroy(s);
}

static void test_two_partitions(void **state)
{
    (void)state;
    zb_cuda_partitions_t *p = NULL;
    zb_err_t err;
    if (zb_cuda_partitions_new(0, 2, 0, &p, &err) != ZB_OK)
        fail_msg("%s", err.msg);
    zb_cuda_timer_t *t[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++)
        if (zb_cuda_timer_new(zb_cuda_partition_stream(p, r), 3, &t[r], &err) != ZB_OK)
            fail_msg("rank %d: %s", r, err.msg);
    zb_exec_timeline_t tl;
    assert_int_equal(zb_exec_timeline_alloc(&tl, 3, &err), ZB_OK);
    /* one after the other, so the shared buffers are not written by both at once */
    for (int r = 0; r < 2; r++) {
        run_step(t[r], zb_cuda_partition_stream(p, r));
        assert_int_equal(cudaStreamSynchronize(zb_cuda_partition_stream(p, r)), cudaSuccess);
    }
    for (int r = 0; r < 2; r++) {
        if (zb_cuda_timer_resolve(t[r], t[0], 0.0, tl.start, tl.end, tl.len, &err) != ZB_OK)
            fail_msg("rank %d: %s", r, err.msg);
        printf("rank %d on rank 0's clock:\n", r);
        check_ordered(&tl, 0.0); /* rank 1 started after rank 0 finished */
    }
    zb_exec_timeline_free(&tl);
    for (int r = 0; r < 2; r++)
        zb_cuda_timer_free(t[r]);
    zb_cuda_partitions_free(p);
}

int main(void)
{
    cuda_test_require_device();
    assert_int_equal(cudaMalloc(&big_dev, BIG), cudaSuccess);
    assert_int_equal(cudaMalloc(&small_dev, 4096), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&smid_dev, BLOCKS * sizeof(int)), cudaSuccess);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_stream),
        cmocka_unit_test(test_two_partitions),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cudaFree(big_dev);
    cudaFree(small_dev);
    cudaFree(smid_dev);
    return rc;
}
#endif
