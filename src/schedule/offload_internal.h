/* The offload pass with a choice of reload placement per pair (the planner's form of
 * zb_add_offload). */
#ifndef ZBPP_SCHEDULE_OFFLOAD_INTERNAL_H
#define ZBPP_SCHEDULE_OFFLOAD_INTERNAL_H

#include "zbpp/schedule.h"

enum {
    ZB_RELOAD_NONE,    /* kept on the device */
    ZB_RELOAD_IN_TIME, /* offloaded; the L as late as its backward allows without waiting */
    ZB_RELOAD_LATE,    /* offloaded; the L right before its backward, which waits for it */
    ZB_RELOAD_IN_TIME_OR_LATE /* in time where some place meets the backward's start, else late
                               * (--offload all: the stash leaves the device whatever it costs) */
};

/* zb_add_offload with which[stage * M + mb] one of the values above; which == NULL as there. */
zb_status_t zb_add_offload_how(const zb_schedule_t *in, const unsigned char *which,
                               const zb_costs_t *c, zb_schedule_t **out, zb_err_t *err);
/* --offload all: the pairs zb_add_offload(in, NULL) offloads, each ZB_RELOAD_IN_TIME_OR_LATE. */
zb_status_t zb_add_offload_all(const zb_schedule_t *in, const zb_costs_t *c, zb_schedule_t **out,
                               zb_err_t *err);
/* zb_add_offload_how with `in`'s simulation under c given (the planner's tries share one);
 * `in` is checked by the caller (no O/L, simulated without error). */
zb_status_t zb_add_offload_timed(const zb_schedule_t *in, const zb_sim_t *timeline,
                                 const unsigned char *which, const zb_costs_t *c,
                                 zb_schedule_t **out, zb_err_t *err);

/* zb_plan_offload's AUTO descent from a start other than "every pair kept": start[stage * M +
 * mb] is ZB_RELOAD_NONE (kept) or anything else (offloaded, reload in time); NULL = every pair
 * kept. At most max_evals schedules are simulated (<= 0: no bound); ZB_EMEMLIMIT when that
 * budget runs out before the schedule fits. */
zb_status_t zb_plan_offload_from(const zb_schedule_t *in, const unsigned char *start,
                                 const zb_costs_t *c, long long max_evals, zb_schedule_t **out,
                                 char *note, zb_err_t *err);

/* Where the ranks share a host link in c (share.link): each L whose backward waited for it
 * moved earlier in its rank's program while that shortens the simulated makespan within every
 * rank's memory limit and, with keep_peaks, within the peak each rank had (offload_pull.c).
 * Otherwise, or when nothing helps (or s starts over a limit), s is left as it is. */
void zb_offload_pull_reloads(zb_schedule_t *s, const zb_costs_t *c, bool keep_peaks);

#endif
