/* Offload costs: the bytes of each stage's stash and the rank's copy channels. */
#include "zbpp/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_index.h"

static bool in_range(double v) { return isfinite(v) && v >= 0 && v <= ZB_COST_MAX; }

zb_status_t zb_costs_check_offload(const zb_costs_t *c, zb_err_t *err)
{
    const double v[3] = {c->bw_d2h, c->bw_h2d, c->copy_latency};
    const char *name[3] = {"device->host bandwidth", "host->device bandwidth", "copy latency"};
    for (int i = 0; i < 3; i++)
        if (!in_range(v[i]))
            return zb_err_set(err, ZB_EINVAL, "costs: %s %g must be in [0, %g]", name[i], v[i],
                              ZB_COST_MAX);
    for (int s = 0; c->stash_bytes && s < c->stages; s++)
        if (!in_range(c->stash_bytes[s]))
            return zb_err_set(err, ZB_EINVAL, "costs: stage %d: stash bytes %g must be in [0, %g]",
                              s, c->stash_bytes[s], ZB_COST_MAX);
    return ZB_OK;
}

zb_status_t zb_costs_set_offload(zb_costs_t *c, double stash_bytes, double bw_d2h, double bw_h2d,
                                 double copy_latency, zb_err_t *err)
{
    if (!c || c->stages < 1 || !c->m_f)
        return zb_err_set(err, ZB_EINVAL, "costs: NULL or uninitialised cost model");
    const double v[4] = {stash_bytes < 0 ? 0 : stash_bytes, bw_d2h, bw_h2d, copy_latency};
    const char *name[4] = {"stash bytes", "device->host bandwidth", "host->device bandwidth",
                           "copy latency"};
    for (int i = 0; i < 4; i++)
        if (!in_range(v[i]))
            return zb_err_set(err, ZB_EINVAL, "costs: %s %g must be in [0, %g]", name[i], v[i],
                              ZB_COST_MAX);
    if (stash_bytes >= 0) {
        if (!c->stash_bytes && !(c->stash_bytes = malloc((size_t)c->stages * sizeof(double))))
            return zb_err_set(err, ZB_ENOMEM, "costs: out of memory for %d stages", c->stages);
        for (int s = 0; s < c->stages; s++)
            c->stash_bytes[s] = stash_bytes;
    }
    c->bw_d2h = bw_d2h;
    c->bw_h2d = bw_h2d;
    c->copy_latency = copy_latency;
    return ZB_OK;
}

zb_status_t zb_costs_copy_offload(zb_costs_t *dst, const zb_costs_t *src, int chunks,
                                  zb_placement_t pl, zb_err_t *err)
{
    dst->bw_d2h = src->bw_d2h;
    dst->bw_h2d = src->bw_h2d;
    dst->copy_latency = src->copy_latency;
    free(dst->stash_bytes);
    dst->stash_bytes = NULL;
    if (!src->stash_bytes)
        return ZB_OK;
    if (!(dst->stash_bytes = malloc((size_t)dst->stages * sizeof(double))))
        return zb_err_set(err, ZB_ENOMEM, "costs: out of memory for %d stages", dst->stages);
    const bool same = dst->stages == src->stages;
    for (int s = 0; s < dst->stages; s++)
        dst->stash_bytes[s] = same ? src->stash_bytes[s]
                                   : src->stash_bytes[zb_stage_rank_of(src->stages, chunks, pl,
                                                                       s)] / chunks;
    return ZB_OK;
}

double zb_costs_t_copy(const zb_costs_t *c, int type, int s)
{
    return zb_sched_copy_time(c, type, s);
}
