/* Internal helpers shared by the validator, the simulator, the comm pass and the automatic
 * scheduler. */
#ifndef ZBPP_SCHEDULE_INDEX_H
#define ZBPP_SCHEDULE_INDEX_H

#include <math.h>

#include "zbpp/schedule.h"

/* Structural check of every action: known type, stage and mb in range, on the rank that holds its
 * stage, and SEND/RECV pointing at an existing neighbour stage. ZB_ESCHEDULE with a message
 * "<who>: rank R action I: ..." naming the first offending action. */
zb_status_t zb_sched_check_actions(const zb_schedule_t *s, const char *who, zb_err_t *err);

/* The offload part of zb_costs_check (costs_offload.c). */
zb_status_t zb_costs_check_offload(const zb_costs_t *c, zb_err_t *err);

/* zb_action_is_compute / zb_action_is_copy inline, for the simulator's loop over every action. */
static inline bool zb_sched_is_compute(int t)
{
    return t == ZB_ACT_F || t == ZB_ACT_B || t == ZB_ACT_W || t == ZB_ACT_BW || t == ZB_ACT_R;
}
static inline bool zb_sched_is_copy(int t) { return t == ZB_ACT_O || t == ZB_ACT_L; }

/* fmax / fmin for times, which are never NaN: libm's fmax is a call (it must handle NaN), and
 * the simulator and the offload pass take one per action of every schedule they look at. */
static inline double zb_later(double a, double b) { return b > a ? b : a; }
static inline double zb_earlier(double a, double b) { return b < a ? b : a; }

/* Duration of a copy (O or L) of `stage` (what zb_costs_t_copy returns), inline for the
 * simulator and the offload pass. */
static inline double zb_sched_copy_time(const zb_costs_t *c, int type, int stage)
{
    const double bw = type == ZB_ACT_O ? c->bw_d2h : c->bw_h2d;
    if (!(bw > 0))
        return c->t_f[stage];
    const double bytes = c->stash_bytes ? c->stash_bytes[stage] : fabs(c->m_f[stage]);
    return c->copy_latency + bytes / bw;
}

/* Time of a compute action of `stage` under `c` (a fused BW takes B + W, R the recompute time);
 * 0 for SEND/RECV. */
static inline double zb_sched_duration(const zb_costs_t *c, int type, int stage)
{
    switch (type) {
    case ZB_ACT_R: return zb_costs_t_r(c, stage);
    case ZB_ACT_F: return c->t_f[stage];
    case ZB_ACT_B: return c->t_b[stage];
    case ZB_ACT_W: return c->t_w[stage];
    case ZB_ACT_BW: return c->t_b[stage] + c->t_w[stage];
    default: return 0;
    }
}

/* Memory a compute action of `stage` adds under `c` (a fused BW adds B + W; a non-saving F, i.e.
 * `flags` has ZB_ACT_NOSAVE, adds only what it keeps and its R the rest); 0 for SEND/RECV. */
static inline double zb_sched_mem_delta(const zb_costs_t *c, int type, int flags, int stage)
{
    switch (type) {
    case ZB_ACT_R: return c->m_f[stage] - zb_costs_m_keep(c, stage);
    case ZB_ACT_F:
        return (flags & ZB_ACT_NOSAVE) ? zb_costs_m_keep(c, stage) : c->m_f[stage];
    case ZB_ACT_B: return c->m_b[stage];
    case ZB_ACT_W: return c->m_w[stage];
    case ZB_ACT_BW: return c->m_b[stage] + c->m_w[stage];
    default: return 0;
    }
}

#endif
