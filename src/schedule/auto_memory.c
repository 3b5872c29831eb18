/* Memory facts of the automatic scheduler that need no timing: one microbatch's peak, a
 * schedule's peaks against the limits, the minimal-memory schedule. */
#include "schedule/auto_greedy.h"

#include <math.h>
#include <stdlib.h>

#include "schedule/sched_index.h"

zb_status_t zb_unit_costs(zb_costs_t *c, int stages, zb_err_t *err)
{
    return zb_costs_init_uniform(c, stages, 1, 1, 1, 0, 1, 0, -1, err);
}

int zb_rank_stage(int P, zb_placement_t pl, int r, int k)
{
    if (pl == ZB_PLACE_V)
        return k == 0 ? r : 2 * P - 1 - r;
    return r + k * P;
}

double zb_single_mb_peak(int P, int v, zb_placement_t pl, const zb_costs_t *c, int r,
                             bool with_w, const double *b_pre)
{
    double cur = 0, peak = 0;
    for (int k = 0; k < v; k++) {
        cur += c->m_f[zb_rank_stage(P, pl, r, k)];
        peak = fmax(peak, cur);
    }
    for (int k = v - 1; k >= 0; k--) {
        int st = zb_rank_stage(P, pl, r, k);
        if (b_pre)
            peak = fmax(peak, cur + b_pre[st]);
        cur += c->m_b[st];
        peak = fmax(peak, cur);
        if (with_w) {
            cur += c->m_w[st];
            peak = fmax(peak, cur);
        }
    }
    return peak;
}

double zb_min_memory_needed(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *costs)
{
    if (!costs || ranks < 1 || chunks < 1 || costs->stages != ranks * chunks ||
        (pl == ZB_PLACE_V && chunks != 2))
        return NAN; /* sizes that do not match the cost model */
    double y = 0;
    for (int r = 0; r < ranks; r++)
        y = fmax(y, zb_single_mb_peak(ranks, chunks, pl, costs, r, true, NULL));
    return y;
}

double zb_schedule_peak_memory(const zb_schedule_t *s, const zb_costs_t *c, double *peaks)
{
    double best = -INFINITY;
    for (int r = 0; r < s->ranks; r++) {
        double cur = 0, peak = 0;
        const zb_rank_program_t *p = &s->rank[r];
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            if (a->stage < 0 || a->stage >= c->stages)
                continue;
            cur += zb_sched_mem_delta(c, a->type, a->flags, a->stage);
            if (cur > peak)
                peak = cur;
        }
        if (peaks)
            peaks[r] = peak;
        if (peak > best)
            best = peak;
    }
    return best;
}

bool zb_fits_limits(const zb_schedule_t *s, const zb_costs_t *c, double cap, double *peak)
{
    double *peaks = malloc(sizeof(double) * (size_t)s->ranks);
    if (!peaks)
        return false;
    *peak = zb_schedule_peak_memory(s, c, peaks);
    bool fits = true;
    for (int r = 0; r < s->ranks && fits; r++) {
        double lim = c->rank_limit ? fmin(cap, zb_costs_limit(c, r)) : cap;
        fits = peaks[r] <= lim + 1e-9 * fmax(1.0, fabs(lim));
    }
    free(peaks);
    return fits;
}

zb_status_t zb_min_memory_schedule(const char *name, int P, int v, zb_placement_t pl, int M,
                                   zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    zb_schedule_t *s = zb_schedule_new(name, P, v, pl, M);
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "%s: bad sizes P=%d v=%d M=%d", name, P, v, M);
    int S = v * P;
    for (int m = 0; m < M; m++) {
        for (int st = 0; st < S; st++)
            if (zb_schedule_push(s, zb_stage_rank(s, st), (zb_action_t){ZB_ACT_F, st, m, 0}))
                goto oom;
        for (int st = S - 1; st >= 0; st--) {
            int r = zb_stage_rank(s, st);
            if (zb_schedule_push(s, r, (zb_action_t){ZB_ACT_B, st, m, 0}) ||
                zb_schedule_push(s, r, (zb_action_t){ZB_ACT_W, st, m, 0}))
                goto oom;
        }
    }
    *out = s;
    return ZB_OK;
oom:
    zb_schedule_free(s);
    return zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
}
