/* Internal API of the automatic scheduler: the greedy list scheduler, the
 * minimal-memory schedule, the local-improvement pass and the strategy sweep. Not public: the
 * public entry points are the registered generators ("auto", "zb-v", ...) and zbpp/plan.h. */
#ifndef ZBPP_AUTO_GREEDY_H
#define ZBPP_AUTO_GREEDY_H

#include "zbpp/schedule.h"

/* Most chunks per rank the greedy handles (it keeps two candidates per chunk on the stack). */
#define ZB_GREEDY_MAX_CHUNKS 64

/* When a rank runs its deferred W's. */
typedef enum {
    ZB_WMODE_FILL,  /* only in idle gaps, or to free memory before an F would break the cap */
    ZB_WMODE_EAGER, /* right after its B when no B is ready (1F1B-like memory) */
    ZB_WMODE_TIGHT  /* like FILL, but prefer W over F once memory passes w_tight of the cap */
} zb_wmode_t;

typedef struct {
    int max_inflight;   /* per rank: microbatches started on the rank but whose last B on it is
                           not done yet; 0 = only memory limits it */
    double inflight_slope; /* rank r's cap is max(1, max_inflight - slope*r): 1F1B-like warm-up
                              (slope 1 gives 1F1B's P-r with max_inflight = P) */
    zb_wmode_t w_mode;
    double w_tight;     /* ZB_WMODE_TIGHT threshold, fraction of mem_cap (0..1] */
    int w_keep;         /* keep this many W's pending for the cool-down (only memory relief or
                           a rank with no F/B left runs them) */
    double w_keep_slope; /* rank r keeps w_keep + w_keep_slope*r (later ranks end later) */
    bool lookahead;     /* start a gap-filling W only if it ends before the next F/B on the rank
                           can possibly become ready */
    bool f_over_b;      /* when an F and a B are both ready, run the F first (keeps the next
                           ranks fed, 1F1B steady state); else B first (critical path) */
    bool oldest_first;  /* when an F and a B are both ready, run the one of the older microbatch
                           (ties: B); overrides f_over_b */
    bool f_deep_first;  /* among ready F's on a rank prefer the later stage (else oldest mb) */
    double mem_cap;     /* per-rank memory cap used while building; INFINITY = none */
    /* Optional fixed per-rank order of F and B/BW actions (W's in it are ignored): the greedy
     * only decides where the W's go. Memory is then checked without reservations, because the
     * given order is assumed deadlock-free. NULL = the greedy picks F/B too. */
    const zb_schedule_t *fb_order;
    /* Optional per-stage memory a B needs for a moment before its own delta applies ([stages],
     * NULL = none): with recompute folded into the costs (see auto_recompute.c) the R just
     * before the B allocates m_f - m_keep, then the B frees. Counted in the microbatch's
     * footprint (banker's check) and in whether the B fits now. */
    const double *b_pre;
    /* Optional per-stage least time between an F's end and its B's start ([stages], NULL =
     * none): with offload folded into the costs (auto_offload.c) the stash's copy to the host
     * and back (O then L) lies between them. */
    const double *b_gap;
} zb_greedy_opts_t;

/* Default options: FILL, lookahead on, deep-first, no in-flight cap, no memory cap. */
zb_greedy_opts_t zb_greedy_defaults(void);

/* Build a compute-only, split (F/B/W) schedule for P ranks, v chunks, placement pl, M
 * microbatches, with the per-stage `costs` (costs->stages == v·P). Each rank keeps a simulated
 * clock; B's run as soon as ready, F's as early as memory (with per-microbatch reservations that
 * rule out memory deadlocks) and the in-flight cap allow, W's fill gaps or free memory.
 * *makespan (optional) receives the greedy's own estimate. ZB_EMEMLIMIT if the cap blocks
 * progress, ZB_EINVAL on bad sizes. *out owned by the caller. */
zb_status_t zb_greedy_build(const char *name, int ranks, int chunks, zb_placement_t pl,
                            int microbatches, const zb_costs_t *costs,
                            const zb_greedy_opts_t *opts, zb_schedule_t **out, double *makespan,
                            zb_err_t *err);

/* The minimal-memory schedule: one microbatch at a time through the whole pipeline, each W right
 * after its B. Always valid; its peak is the smallest any schedule can reach (see docs/auto.md). */
zb_status_t zb_min_memory_schedule(const char *name, int ranks, int chunks, zb_placement_t pl,
                                   int microbatches, zb_schedule_t **out, zb_err_t *err);

/* Smallest per-rank memory peak any schedule needs with these costs (max over ranks of one
 * microbatch's footprint processed alone, W right after B). NAN when the sizes do not match the
 * cost model (costs->stages != ranks*chunks, V placement with chunks != 2). Any chunk count. */
double zb_min_memory_needed(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *costs);

/* Per-rank memory peak of a schedule's action order (no timing needed). peaks may be NULL;
 * returns the max over ranks. */
double zb_schedule_peak_memory(const zb_schedule_t *s, const zb_costs_t *costs, double *peaks);

/* True if every rank's peak under c stays within cap and within the rank's own limit in c
 * (per-rank limits); *peak gets the max over ranks. False on out of memory. */
bool zb_fits_limits(const zb_schedule_t *s, const zb_costs_t *c, double cap, double *peak);

/* Local improvement: reorder actions within a rank (move a W later/earlier, swap adjacent
 * F/W or B/W) keeping dependencies and the memory limit, keep a change when zb_simulate's
 * makespan drops. At most `max_evals` simulations. *s is replaced when improved. */
zb_status_t zb_improve_local(zb_schedule_t **s, const zb_costs_t *costs, int max_evals,
                             double *makespan, zb_err_t *err);

/* k-th stage held by rank r, ascending in k (a microbatch meets them in this order going
 * forward). */
int zb_rank_stage(int ranks, zb_placement_t pl, int rank, int k);
/* Peak of one microbatch alone on a rank: its F's ascending, then its B's descending (with
 * b_pre[stage], when given, the moment before a B), each followed by its W when with_w. */
double zb_single_mb_peak(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *costs,
                         int rank, bool with_w, const double *b_pre);
/* Unit cost model used by the handcrafted families: F = B = W = 1, no comm, memory F +1, B 0,
 * W -1 per chunk (activation held until W: the most conservative split). */
zb_status_t zb_unit_costs(zb_costs_t *c, int stages, zb_err_t *err);

#endif
