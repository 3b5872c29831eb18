/* zbpp — planning helpers: re-chunking a cost model, and the comparison table of every schedule
 * family under one cost model and memory limit (`zbpp plan`). Depends on schedule.h only. */
#ifndef ZBPP_PLAN_H
#define ZBPP_PLAN_H

#include "zbpp/schedule.h"

/* Split a one-stage-per-rank cost model (src->stages == ranks) over `chunks` chunks per rank
 * with placement pl: every chunk of rank r gets 1/chunks of rank r's F/B/W time and memory
 * deltas; the comm latency of a message leaving the chunk stays rank r's latency; the memory
 * limit is kept. With chunks == 1 it is a copy. ZB_EINVAL if src->stages != ranks or the
 * placement does not allow `chunks`. dst is freed with zb_costs_free. */
zb_status_t zb_costs_rechunk(const zb_costs_t *src, int ranks, int chunks, zb_placement_t pl,
                             zb_costs_t *dst, zb_err_t *err);

/* Smallest per-rank memory peak any schedule can have for this chunking: one microbatch at a
 * time, each W right after its B (see docs/auto.md). Any chunk count; NAN when costs->stages !=
 * ranks*chunks or the placement does not allow `chunks`. */
double zb_min_feasible_memory(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *costs);

/* The same with every F recomputed (zb_add_recompute): one microbatch at a time, each R right
 * before its B; uses costs->m_keep. NAN on mismatched sizes. */
double zb_min_feasible_memory_recompute(int ranks, int chunks, zb_placement_t pl,
                                        const zb_costs_t *costs);

/* One row of the comparison. */
typedef struct {
    char family[48];
    int chunks;              /* v of the schedule (or the family's default when it failed) */
    zb_placement_t placement;
    bool fits;               /* generated, valid, within the memory limit */
    char reason[512];        /* when !fits: why (does not apply / over the limit / ...) */
    char note[256];          /* the generator's note (auto: what it chose) */
    double makespan;         /* end-to-end time of one step */
    double bubble_rate;      /* ZB paper's definition (schedule.h) */
    double peak_max;         /* max over ranks of the peak memory */
    double *peak;            /* [ranks] peak memory per rank (NULL when !fits) */
    long messages;           /* cross-rank messages per step (SEND actions after lowering) */
    double volume;           /* messages x activation size (activation size 1 = one
                                microbatch's boundary tensor; all boundaries equal) */
} zb_plan_row_t;

typedef struct {
    int ranks, microbatches;
    double mem_limit;
    int count;           /* rows: fitting ones first, best (smallest makespan) first */
    int fitting;         /* how many rows fit */
    zb_plan_row_t *rows;
    double *mem_limit_ranks; /* [ranks] per-rank limits in place of mem_limit; NULL = none */
} zb_plan_t;

/* Generate every registered family for P ranks and M microbatches with the one-stage-per-rank
 * cost model `costs` (costs->stages == ranks; its mem_limit is the limit), re-chunked for each
 * family's chunking (families with several chunkings are tried at their default). auto is run
 * with any_placement; optimal only when P*M <= ZB_OPTIMAL_MAX_PM (time limit `time_limit` s,
 * 0 = 10 s).
 * Rows that fit are sorted by makespan, then bubble rate; the others follow with a reason.
 * Returns ZB_EINVAL on bad sizes or costs. Free with zb_plan_free. */
zb_status_t zb_plan_compare(int ranks, int microbatches, const zb_costs_t *costs,
                            double time_limit, zb_plan_t *out, zb_err_t *err);
void zb_plan_free(zb_plan_t *plan);

/* Options of zb_plan_compare_opts. */
typedef struct {
    double solver_time_limit; /* optimal: solver seconds (0 = 10 s) */
    double time_limit;        /* the whole comparison, seconds (0 = none): a family is started
                                 only while time is left (optimal gets at most what is left);
                                 the others are listed as skipped with that reason. One started
                                 family can overrun it by its own cost, which every family
                                 bounds (auto and v-half: a fixed budget of greedy builds). */
    zb_recompute_t recompute; /* NONE: as before. ALL or AUTO: also a row "<family>+R" per
                                 fixed family with every F recomputed (zb_add_recompute), and
                                 "auto+R", auto searching with this mode. The recompute costs
                                 are costs->t_r and m_keep (split like the others). */
    zb_offload_t offload;     /* NONE: as before. ALL or AUTO: also a row "<family>+O" per
                                 family but optimal: the family generated without the memory
                                 limit, then zb_plan_offload with this mode under it (AUTO may
                                 recompute some stashes too). Peaks are the simulator's timed
                                 ones. */
} zb_plan_opts_t;

/* zb_plan_compare with a bound on the whole comparison. o == NULL: no bound, default solver
 * time. Same results and errors otherwise. */
zb_status_t zb_plan_compare_opts(int ranks, int microbatches, const zb_costs_t *costs,
                                 const zb_plan_opts_t *o, zb_plan_t *out, zb_err_t *err);

#endif
