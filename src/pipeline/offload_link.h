/* zbpp — the host link a GPU's ranks share, as the planner times offload's copies
 * (offload_link.c; docs/offload.md, "The host link"). */
#ifndef ZBPP_PL_OFFLOAD_LINK_H
#define ZBPP_PL_OFFLOAD_LINK_H

#include "zbpp/schedule.h"

/* The mean number of copies of `type` (ZB_ACT_O or ZB_ACT_L) in flight at once among the ranks
 * r with r mod groups == group, over the time at least one of them is: their summed durations
 * over the length of the union of their intervals. 0 when they have none. */
double pl_copy_overlap(const zb_sim_t *sim, int type, int group, int groups);

/* The bandwidth of one rank's copy when k copies share the link on average: the link carries
 * `sharers` × `shared` (shared: one rank's bandwidth with all `sharers` copying at once), split
 * k ways, and no copy runs faster than one alone (`alone`). Without both figures, `shared`. */
double pl_link_bandwidth(double alone, double shared, int sharers, double k);

/* The host link as the profile measured it: one rank's copy bandwidth alone and with all
 * `sharers` ranks of a GPU copying at once, per direction (bytes/s), and how many GPUs the
 * ranks are spread over (rank g on GPU g mod groups). */
typedef struct {
    double alone_d2h, alone_h2d, shared_d2h, shared_h2d;
    int sharers, groups;
} pl_link_t;

/* zb_plan_offload (mode, costs) of `plain` with the copies timed on that link: plan with the
 * costs' bandwidths (the busy-link share), simulate, split the link as many ways as the plan's
 * copies overlap on average (the most over the GPUs, per direction), plan again; at most four
 * rounds, until the bandwidths move by less than 2 %. costs->bw_d2h / bw_h2d end as the last
 * plan's. Without the alone figures, or with one rank per GPU, one plan with the costs as they
 * are. A later round that fails keeps the plan before it.
 * Where the costs' simulation carries the link itself (costs->share.link: each copy at the alone
 * bandwidth, the copies in flight sharing the link): AUTO, whose choices are simulated
 * makespans, is planned on it directly; ALL, whose reloads are placed by a copy's time, by the
 * rounds with the link out and the busy share as the bandwidths, after which costs gets its
 * link and alone bandwidths back (the prediction is on the link). */
zb_status_t pl_plan_offload_on_link(const zb_schedule_t *plain, zb_offload_t mode,
                                    zb_costs_t *costs, const pl_link_t *link, zb_schedule_t **out,
                                    char *note, zb_err_t *err);

#endif
