/* Planning SM partitions (include/zbpp/cuda.h, "SM partitions"): how many SMs each rank sharing
 * a GPU gets. Pure host arithmetic, compiled in every build (with or without CUDA), so the rules
 * are tested where there is no GPU; src/cuda/green.c asks the driver for the real granularity
 * and creates the partitions. */
#include <stdio.h>

#include "zbpp/cuda.h"

zb_status_t zb_cuda_sm_guideline(int major, int minor, int sm_count, zb_cuda_sm_info_t *out,
                                 zb_err_t *err)
{
    (void)minor; /* the documented rules depend on the major version only */
    if (sm_count < 1)
        return zb_err_set(err, ZB_EINVAL, "SM partitions: a device with %d SMs", sm_count);
    if (major < 6)
        return zb_err_set(err, ZB_EINVAL,
                          "SM partitions: compute capability %d.%d has no green contexts "
                          "(6.0 or later needed)", major, minor);
    out->sm_count = sm_count;
    out->min_partition = major >= 9 ? 8 : major == 8 ? 4 : 2;
    out->alignment = major >= 9 ? 8 : 2;
    return ZB_OK;
}

/* smallest legal partition: min_partition rounded up to the alignment */
static int smallest(const zb_cuda_sm_info_t *d)
{
    return (d->min_partition + d->alignment - 1) / d->alignment * d->alignment;
}

zb_status_t zb_cuda_sm_plan(const zb_cuda_sm_info_t *dev, int ranks, int sm_per_rank,
                            zb_cuda_sm_plan_t *out, zb_err_t *err)
{
    if (!dev || dev->sm_count < 1 || dev->min_partition < 1 || dev->alignment < 1)
        return zb_err_set(err, ZB_EINVAL,
                          "SM partitions: bad device description (SMs %d, minimum %d, "
                          "multiple of %d)", dev ? dev->sm_count : 0,
                          dev ? dev->min_partition : 0, dev ? dev->alignment : 0);
    if (ranks < 1)
        return zb_err_set(err, ZB_EINVAL, "SM partitions: %d ranks (need at least 1)", ranks);
    if (sm_per_rank < 0)
        return zb_err_set(err, ZB_EINVAL, "SM partitions: %d SMs per rank is negative",
                          sm_per_rank);
    const int n = dev->sm_count, a = dev->alignment, lo = smallest(dev);
    const int most = n / lo; /* partitions of the smallest legal size that fit */
    if (ranks > most)
        return zb_err_set(err, ZB_EINVAL,
                          "SM partitions: %d ranks on one GPU of %d SMs, but it has at most %d "
                          "partitions (at least %d SMs each, multiples of %d)",
                          ranks, n, most, lo, a);
    int k = sm_per_rank;
    if (k == 0) {
        k = n / ranks / a * a; /* >= lo, since ranks <= most */
    } else {
        if (k % a != 0)
            return zb_err_set(err, ZB_EINVAL,
                              "SM partitions: %d SMs per rank is not a multiple of %d (the "
                              "partition granularity of this GPU)", k, a);
        if (k < lo)
            return zb_err_set(err, ZB_EINVAL,
                              "SM partitions: %d SMs per rank is below this GPU's smallest "
                              "partition (%d SMs)", k, lo);
        if ((long long)k * ranks > n)
            return zb_err_set(err, ZB_EINVAL,
                              "SM partitions: %d ranks x %d SMs = %lld SMs, more than the GPU's "
                              "%d (at most %d SMs per rank)", ranks, k, (long long)k * ranks, n,
                              n / ranks / a * a);
    }
    out->ranks = ranks;
    out->sm_per_rank = k;
    out->sm_unused = n - ranks * k;
    return ZB_OK;
}

void zb_cuda_sm_plan_describe(const zb_cuda_sm_plan_t *p, int sm_count, char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    snprintf(buf, len, "%d rank%s x %d SMs (%d of %d SMs unused)", p->ranks,
             p->ranks == 1 ? "" : "s", p->sm_per_rank, p->sm_unused, sm_count);
}
