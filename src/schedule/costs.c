/* Per-stage cost and memory model (durations, comm latency, memory deltas, limit). */
#include "zbpp/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_index.h"

/* Memory deltas must cancel: F allocates what B and W free. */
static bool mem_sums_to_zero(double mf, double mb, double mw)
{
    double scale = fabs(mf) + fabs(mb) + fabs(mw);
    return fabs(mf + mb + mw) <= 1e-9 * (scale > 1.0 ? scale : 1.0);
}

static zb_status_t check_stage(int s, double f, double b, double w, double comm, double mf,
                               double mb, double mw, zb_err_t *err)
{
    const double t[4] = {f, b, w, comm};
    const char *tn[4] = {"F time", "B time", "W time", "comm latency"};
    for (int i = 0; i < 4; i++)
        if (!isfinite(t[i]) || t[i] < 0 || t[i] > ZB_COST_MAX)
            return zb_err_set(err, ZB_EINVAL, "costs: stage %d: %s %g must be in [0, %g]", s,
                              tn[i], t[i], ZB_COST_MAX);
    if (!isfinite(mf) || !isfinite(mb) || !isfinite(mw) || fabs(mf) > ZB_COST_MAX ||
        fabs(mb) > ZB_COST_MAX || fabs(mw) > ZB_COST_MAX)
        return zb_err_set(err, ZB_EINVAL, "costs: stage %d: memory deltas must be finite and "
                                          "at most %g in size", s, ZB_COST_MAX);
    if (!mem_sums_to_zero(mf, mb, mw))
        return zb_err_set(err, ZB_EINVAL,
                          "costs: stage %d: memory deltas F %g + B %g + W %g must sum to 0", s, mf,
                          mb, mw);
    return ZB_OK;
}

/* A non-saving F keeps between nothing and everything F would have kept. */
static zb_status_t check_recompute(int s, double t_r, double keep, double mf, zb_err_t *err)
{
    if (!isfinite(t_r) || t_r < 0 || t_r > ZB_COST_MAX)
        return zb_err_set(err, ZB_EINVAL, "costs: stage %d: recompute time %g must be in [0, %g]",
                          s, t_r, ZB_COST_MAX);
    if (!isfinite(keep) || keep < 0 || keep > fabs(mf))
        return zb_err_set(err, ZB_EINVAL,
                          "costs: stage %d: memory kept by a non-saving F %g must be in [0, %g] "
                          "(0 up to F's memory)",
                          s, keep, fabs(mf));
    return ZB_OK;
}

double zb_costs_t_r(const zb_costs_t *c, int s)
{
    return c->t_r ? c->t_r[s] : c->t_f[s];
}

double zb_costs_m_keep(const zb_costs_t *c, int s)
{
    return c->m_keep ? c->m_keep[s] : 0.0;
}

zb_status_t zb_costs_set_recompute(zb_costs_t *c, double t_r, double m_keep, zb_err_t *err)
{
    if (!c || c->stages < 1 || !c->m_f)
        return zb_err_set(err, ZB_EINVAL, "costs: NULL or uninitialised cost model");
    for (int s = 0; s < c->stages; s++) {
        zb_status_t st = check_recompute(s, t_r, m_keep, c->m_f[s], err);
        if (st != ZB_OK)
            return st;
    }
    if (!c->t_r)
        c->t_r = malloc((size_t)c->stages * sizeof(double));
    if (!c->m_keep)
        c->m_keep = malloc((size_t)c->stages * sizeof(double));
    if (!c->t_r || !c->m_keep)
        return zb_err_set(err, ZB_ENOMEM, "costs: out of memory for %d stages", c->stages);
    for (int s = 0; s < c->stages; s++) {
        c->t_r[s] = t_r;
        c->m_keep[s] = m_keep;
    }
    return ZB_OK;
}

/* Each array is its own malloc block so that callers who build a cost model by hand (malloc per
 * array) can still release it with zb_costs_free. */
static zb_status_t alloc_arrays(zb_costs_t *c, int stages, zb_err_t *err)
{
    memset(c, 0, sizeof *c);
    double **arrays[7] = {&c->t_f, &c->t_b, &c->t_w, &c->comm, &c->m_f, &c->m_b, &c->m_w};
    for (int i = 0; i < 7; i++) {
        *arrays[i] = calloc((size_t)stages, sizeof(double));
        if (!*arrays[i]) {
            zb_costs_free(c);
            return zb_err_set(err, ZB_ENOMEM, "costs: out of memory for %d stages", stages);
        }
    }
    c->stages = stages;
    c->mem_limit = INFINITY;
    return ZB_OK;
}

zb_status_t zb_costs_init_uniform(zb_costs_t *c, int stages, double f, double b, double w,
                                  double comm, double mf, double mb, double mw, zb_err_t *err)
{
    if (!c)
        return zb_err_set(err, ZB_EINVAL, "costs: NULL cost model");
    memset(c, 0, sizeof *c);
    if (stages < 1 || stages > (1 << 24))
        return zb_err_set(err, ZB_EINVAL, "costs: stages %d out of range (1..%d)", stages,
                          1 << 24);
    zb_status_t st = check_stage(0, f, b, w, comm, mf, mb, mw, err);
    if (st != ZB_OK)
        return st;
    st = alloc_arrays(c, stages, err);
    if (st != ZB_OK)
        return st;
    for (int s = 0; s < stages; s++) {
        c->t_f[s] = f;
        c->t_b[s] = b;
        c->t_w[s] = w;
        c->comm[s] = comm;
        c->m_f[s] = mf;
        c->m_b[s] = mb;
        c->m_w[s] = mw;
    }
    return ZB_OK;
}

zb_status_t zb_costs_check(const zb_costs_t *c, zb_err_t *err)
{
    if (!c)
        return zb_err_set(err, ZB_EINVAL, "costs: NULL cost model");
    if (c->stages < 1)
        return zb_err_set(err, ZB_EINVAL, "costs: stages %d must be >= 1", c->stages);
    if (!c->t_f || !c->t_b || !c->t_w || !c->comm || !c->m_f || !c->m_b || !c->m_w)
        return zb_err_set(err, ZB_EINVAL, "costs: missing per-stage arrays");
    for (int s = 0; s < c->stages; s++) {
        zb_status_t st = check_stage(s, c->t_f[s], c->t_b[s], c->t_w[s], c->comm[s], c->m_f[s],
                                     c->m_b[s], c->m_w[s], err);
        if (st != ZB_OK)
            return st;
    }
    for (int s = 0; s < c->stages; s++) {
        zb_status_t st = check_recompute(s, zb_costs_t_r(c, s), zb_costs_m_keep(c, s), c->m_f[s],
                                         err);
        if (st != ZB_OK)
            return st;
    }
    zb_status_t st = zb_costs_check_offload(c, err);
    if (st != ZB_OK)
        return st;
    if ((st = zb_share_check(&c->share, err)) != ZB_OK)
        return st;
    if (isnan(c->mem_limit))
        return zb_err_set(err, ZB_EINVAL, "costs: memory limit is NaN");
    if (c->limit_ranks < 0 || (c->limit_ranks > 0 && !c->rank_limit))
        return zb_err_set(err, ZB_EINVAL, "costs: per-rank limits missing");
    for (int r = 0; r < c->limit_ranks; r++)
        if (isnan(c->rank_limit[r]))
            return zb_err_set(err, ZB_EINVAL, "costs: memory limit of rank %d is NaN", r);
    return ZB_OK;
}

static const char *share_phase(int p) { return p == 0 ? "F" : p == 1 ? "B" : "W"; }

bool zb_share_has_mix(const zb_share_t *sh)
{
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            if (sh->mix[p][q] != 0)
                return true;
    return false;
}

zb_status_t zb_share_check(const zb_share_t *sh, zb_err_t *err)
{
    if (sh->n < 0 || sh->n > ZB_SHARE_MAX)
        return zb_err_set(err, ZB_EINVAL, "costs: %d ranks sharing a device (0..%d)", sh->n,
                          ZB_SHARE_MAX);
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < sh->n; k++)
            if (!(sh->f[p][k] > 0) || !(sh->f[p][k] <= 1e3))
                return zb_err_set(err, ZB_EINVAL,
                                  "costs: sharing factor of %s with %d others busy is %g (must be "
                                  "in (0, 1000])",
                                  share_phase(p), k, sh->f[p][k]);
    if (sh->bw != 0 && !(sh->bw > 0 && sh->bw <= 1e3))
        return zb_err_set(err, ZB_EINVAL,
                          "costs: sharing factor of a fused BW is %g (0, or in (0, 1000])",
                          sh->bw);
    for (int d = 0; d < 2; d++)
        if (sh->link[d] != 0 && !(sh->link[d] > 0 && sh->link[d] <= ZB_COST_MAX))
            return zb_err_set(err, ZB_EINVAL,
                              "costs: host link bandwidth %s is %g (0, or in (0, %g])",
                              d ? "host to device" : "device to host", sh->link[d], ZB_COST_MAX);
    if (sh->link_both != 0 && !(sh->link_both > 0 && sh->link_both <= ZB_COST_MAX))
        return zb_err_set(err, ZB_EINVAL,
                          "costs: host link bandwidth both ways is %g (0, or in (0, %g])",
                          sh->link_both, ZB_COST_MAX);
    for (int p = 0; p < 3; p++)
        if (sh->copy_slow[p] != 0 && !(sh->copy_slow[p] > 0 && sh->copy_slow[p] <= 1e3))
            return zb_err_set(err, ZB_EINVAL,
                              "costs: factor of %s beside copies is %g (0, or in (0, 1000])",
                              share_phase(p), sh->copy_slow[p]);
    for (int p = 0; p < 3 && zb_share_has_mix(sh); p++)
        for (int q = 0; q < 3; q++)
            if (!(sh->mix[p][q] > 0) || !(sh->mix[p][q] <= 1e3))
                return zb_err_set(err, ZB_EINVAL,
                                  "costs: sharing mix of %s beside %s's is %g (all 0, or all in "
                                  "(0, 1000])",
                                  share_phase(p), share_phase(q), sh->mix[p][q]);
    return ZB_OK;
}

zb_status_t zb_costs_set_rank_limits(zb_costs_t *c, int ranks, const double *limits,
                                     zb_err_t *err)
{
    if (!c || ranks < 0)
        return zb_err_set(err, ZB_EINVAL, "costs: bad per-rank limits");
    for (int r = 0; limits && r < ranks; r++)
        if (isnan(limits[r]))
            return zb_err_set(err, ZB_EINVAL, "costs: memory limit of rank %d is NaN", r);
    double *copy = NULL;
    if (limits && ranks > 0) {
        if (!(copy = malloc(sizeof(double) * (size_t)ranks)))
            return zb_err_set(err, ZB_ENOMEM, "costs: out of memory for %d ranks", ranks);
        memcpy(copy, limits, sizeof(double) * (size_t)ranks);
    }
    free(c->rank_limit);
    c->rank_limit = copy;
    c->limit_ranks = copy ? ranks : 0;
    return ZB_OK;
}

double zb_costs_limit(const zb_costs_t *c, int rank)
{
    if (c->rank_limit && rank >= 0 && rank < c->limit_ranks)
        return c->rank_limit[rank];
    return c->mem_limit;
}

double zb_costs_limit_max(const zb_costs_t *c, int ranks)
{
    if (!c->rank_limit)
        return c->mem_limit;
    double most = -INFINITY;
    for (int r = 0; r < ranks; r++)
        most = fmax(most, zb_costs_limit(c, r));
    return most;
}

bool zb_costs_limited(const zb_costs_t *c)
{
    if (!c->rank_limit)
        return isfinite(c->mem_limit);
    for (int r = 0; r < c->limit_ranks; r++)
        if (isfinite(c->rank_limit[r]))
            return true;
    return false;
}

zb_status_t zb_costs_clone(zb_costs_t *dst, const zb_costs_t *src, zb_err_t *err)
{
    if (!dst || !src)
        return zb_err_set(err, ZB_EINVAL, "costs: NULL cost model");
    memset(dst, 0, sizeof *dst);
    if (src->stages < 1 || !src->t_f || !src->t_b || !src->t_w || !src->comm || !src->m_f ||
        !src->m_b || !src->m_w)
        return zb_err_set(err, ZB_EINVAL, "costs: cannot clone an uninitialised cost model");
    zb_status_t st = alloc_arrays(dst, src->stages, err);
    if (st != ZB_OK)
        return st;
    size_t n = (size_t)src->stages * sizeof(double);
    memcpy(dst->t_f, src->t_f, n);
    memcpy(dst->t_b, src->t_b, n);
    memcpy(dst->t_w, src->t_w, n);
    memcpy(dst->comm, src->comm, n);
    memcpy(dst->m_f, src->m_f, n);
    memcpy(dst->m_b, src->m_b, n);
    memcpy(dst->m_w, src->m_w, n);
    dst->mem_limit = src->mem_limit;
    dst->share = src->share;
    if (src->rank_limit && (st = zb_costs_set_rank_limits(dst, src->limit_ranks,
                                                          src->rank_limit, err)) != ZB_OK) {
        zb_costs_free(dst);
        return st;
    }
    if (src->t_r || src->m_keep) {
        dst->t_r = malloc(n);
        dst->m_keep = malloc(n);
        if (!dst->t_r || !dst->m_keep) {
            zb_costs_free(dst);
            return zb_err_set(err, ZB_ENOMEM, "costs: out of memory for %d stages", src->stages);
        }
        for (int s = 0; s < src->stages; s++) {
            dst->t_r[s] = zb_costs_t_r(src, s);
            dst->m_keep[s] = zb_costs_m_keep(src, s);
        }
    }
    if ((st = zb_costs_copy_offload(dst, src, 1, ZB_PLACE_LOOP, err)) != ZB_OK)
        zb_costs_free(dst);
    return st;
}

void zb_costs_free(zb_costs_t *c)
{
    if (!c)
        return;
    free(c->t_f);
    free(c->t_b);
    free(c->t_w);
    free(c->comm);
    free(c->m_f);
    free(c->m_b);
    free(c->m_w);
    free(c->t_r);
    free(c->m_keep);
    free(c->rank_limit);
    free(c->stash_bytes);
    memset(c, 0, sizeof *c);
}
