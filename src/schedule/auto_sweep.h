/* Internal: keep-the-best bookkeeping and the greedy strategy sweep. */
#ifndef ZBPP_AUTO_SWEEP_H
#define ZBPP_AUTO_SWEEP_H

#include "schedule/auto_greedy.h"

typedef struct {
    zb_schedule_t *s; /* best so far (owned), NULL if none */
    double makespan;  /* zb_simulate's makespan of s */
    double span;      /* its max per-rank span T (bubble-rate basis) */
    double peak;      /* max per-rank peak memory of s */
    char label[192];  /* what produced it */
    bool by_span;     /* judge by max span (bubble rate) first, makespan second */
    const zb_costs_t *costs; /* the costs and cap s was judged with */
    double cap;
} zb_sweep_best_t;

void zb_sweep_init(zb_sweep_best_t *b);
/* Free the kept schedule and reset. */
void zb_sweep_clear(zb_sweep_best_t *b);
/* Offer a candidate (ownership passes): kept if it fits `cap`, simulates, and beats the best:
 * smaller makespan; equal makespan (relative 1e-9): smaller max span T, i.e. lower bubble rate;
 * then lower peak memory. Returns true if kept; otherwise it is freed. */
bool zb_sweep_offer(zb_sweep_best_t *b, zb_schedule_t *s, const zb_costs_t *c, double cap,
                    const char *label);
/* How many greedy builds a sweep for this size may run: about 3e6 greedy steps in all (a build
 * takes about 3vPM x (P + 16)), at least 8. Keeps the cost of a sweep predictable at any size. */
int zb_sweep_budget(int P, int v, int M);
/* Run the greedy with up to max_builds settings (0 = all of them; most promising first: see
 * auto_sweep.c) and offer every result to *best. Error only when no setting produced a
 * schedule. */
zb_status_t zb_greedy_sweep(const char *name, int P, int v, zb_placement_t pl, int M,
                            const zb_costs_t *c, double cap, int max_builds,
                            zb_sweep_best_t *best, zb_err_t *err);

/* Recompute or offload folded into a sweep (see auto_recompute.c, auto_offload.c): the greedy
 * runs on `folded` costs with opts.b_pre = b_pre and opts.b_gap = b_gap; each result gets
 * zb_add_recompute(which), or with `offload` the offload descent from those states
 * (zb_plan_offload_from), and is judged with the real costs. `what` is appended to the label
 * ("recompute all"). */
typedef struct {
    const zb_costs_t *folded;
    const double *b_pre; /* [stages] */
    const double *b_gap; /* [stages] or NULL */
    const bool *which;   /* [stages * M] (recompute) */
    const char *what;
    bool prune;          /* zb_recompute_prune each result before judging it (mode auto) */
    const unsigned char *offload; /* [stages * M] start states (offload_internal.h) or NULL */
    long long offload_evals;      /* the descent's budget of simulations per result */
    bool compact;                 /* the sweep's compact grid (auto_sweep.c, settings) */
} zb_sweep_rc_t;

/* zb_greedy_sweep with recompute (rc != NULL): c is the real cost model, cap its limit. */
zb_status_t zb_greedy_sweep_rc(const char *name, int P, int v, zb_placement_t pl, int M,
                               const zb_costs_t *c, double cap, int max_builds,
                               const zb_sweep_rc_t *rc, zb_sweep_best_t *best, zb_err_t *err);

#endif
