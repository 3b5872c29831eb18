/* SM partitions and CUDA-event timing in a build without CUDA (-DZB_CUDA=OFF, or no toolkit):
 * every call fails with one line saying so. The plan (src/cuda/green_plan.c) is host code and
 * works in every build. */
#include "cuda/stream.h"
#include "zbpp/cuda.h"

#define NO_CUDA(err) zb_err_set((err), ZB_EUNSUPPORTED, "zbpp was built without CUDA (ZB_CUDA=OFF)")

zb_status_t zb_cuda_sm_query(int device, zb_cuda_sm_info_t *out, zb_err_t *err)
{
    (void)device, (void)out;
    return NO_CUDA(err);
}

zb_status_t zb_cuda_partitions_new(int device, int ranks, int sm_per_rank,
                                   zb_cuda_partitions_t **out, zb_err_t *err)
{
    (void)device, (void)ranks, (void)sm_per_rank;
    *out = NULL;
    return NO_CUDA(err);
}

void zb_cuda_partitions_free(zb_cuda_partitions_t *p) { (void)p; }

const zb_cuda_sm_plan_t *zb_cuda_partitions_plan(const zb_cuda_partitions_t *p)
{
    (void)p;
    return NULL;
}

struct CUstream_st *zb_cuda_partition_stream(const zb_cuda_partitions_t *p, int r)
{
    (void)p, (void)r;
    return NULL;
}

int zb_cuda_partition_sms(const zb_cuda_partitions_t *p, int r)
{
    (void)p, (void)r;
    return -1;
}

zb_status_t zb_cuda_timer_new(struct CUstream_st *stream, int n, zb_cuda_timer_t **out,
                              zb_err_t *err)
{
    (void)stream, (void)n;
    *out = NULL;
    return NO_CUDA(err);
}

void zb_cuda_timer_free(zb_cuda_timer_t *t) { (void)t; }

zb_status_t zb_cuda_timer_step_begin(zb_cuda_timer_t *t, zb_err_t *err)
{
    (void)t;
    return NO_CUDA(err);
}

zb_status_t zb_cuda_timer_begin(zb_cuda_timer_t *t, int i, zb_err_t *err)
{
    (void)t, (void)i;
    return NO_CUDA(err);
}

zb_status_t zb_cuda_timer_end(zb_cuda_timer_t *t, int i, zb_err_t *err)
{
    (void)t, (void)i;
    return NO_CUDA(err);
}

zb_status_t zb_cuda_timer_resolve(zb_cuda_timer_t *t, const zb_cuda_timer_t *origin,
                                  double origin_s, double *start, double *end, int n,
                                  zb_err_t *err)
{
    (void)t, (void)origin, (void)origin_s, (void)start, (void)end, (void)n;
    return NO_CUDA(err);
}
