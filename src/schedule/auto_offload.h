/* Internal: `auto`'s list scheduler with offload folded in (auto_offload.c). */
#ifndef ZBPP_AUTO_OFFLOAD_H
#define ZBPP_AUTO_OFFLOAD_H

#include "schedule/auto_sweep.h"

/* Offer into *best (judged with c, its limit the cap, memory on the simulator's timeline) the
 * schedules of one chunking (v, pl; c has v * P stages) that the greedy list scheduler builds
 * with the offload of a set of stages folded into its costs, each completed by the offload
 * descent (zb_plan_offload_from) starting from that set offloaded. Labels say which set.
 * ZB_ENOMEM is the only error; no candidate fitting leaves *best as it was. */
zb_status_t zb_auto_offload_chunking(int P, int v, zb_placement_t pl, int M, const zb_costs_t *c,
                                     zb_sweep_best_t *best, zb_err_t *err);

#endif
