/* Internal: the recompute side of `auto` (auto_recompute.c). */
#ifndef ZBPP_AUTO_RECOMPUTE_H
#define ZBPP_AUTO_RECOMPUTE_H

#include "schedule/auto_sweep.h"

/* Offer into *best every recompute candidate of one chunking (v, pl) with its per-stage costs c
 * (c->mem_limit is the cap): for each set of recomputed stages (ALL: every stage; AUTO: every
 * stage, the stages of ranks 0..k-1 for up to seven k, and with 2 chunks the first chunk), a
 * bounded greedy sweep on the costs with the R folded into the B, each result with
 * zb_add_recompute on that set; with every stage recomputed also the handcrafted families of
 * this chunking and the minimal-memory schedule. Labels say which set. ZB_ENOMEM is the only
 * error. */
zb_status_t zb_auto_recompute_chunking(const zb_gen_params_t *p, int v, zb_placement_t pl,
                                       const zb_costs_t *c, zb_recompute_t mode,
                                       zb_sweep_best_t *best, zb_err_t *err);

/* The sets of stages the recompute and offload searches try, as numbers k: 0 = every stage;
 * 1..P-1 = the stages of ranks below k (early ranks hold the most microbatches in flight, so
 * dropping their activations buys the most), for at most seven k spread over 1..P-1; P = the
 * first chunk (v > 1: its F-to-B lifetime is the longest). Only 0 unless `partial`. Writes at
 * most ZB_AUTO_MAX_SETS into sets; returns how many. */
#define ZB_AUTO_MAX_SETS 10
int zb_auto_stage_sets(int P, int v, bool partial, int *sets);
/* sel[stage] (v * P of them): is the stage in set k? */
void zb_auto_stage_set(int P, int v, zb_placement_t pl, int k, bool *sel);
/* "<verb> all", "<verb> on ranks 0-2", "<verb> the first chunk". */
void zb_auto_stage_set_name(const char *verb, int k, int P, char *out, size_t n);

/* Smallest per-rank peak any schedule with recompute can reach for this chunking: one
 * microbatch at a time, every F non-saving, each R right before its B, each W right after its B.
 * NAN on sizes that do not match the cost model. */
double zb_min_memory_recompute(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *c);

/* zb_recompute_prune is public (zbpp/schedule.h): the runtime fits a family's schedule with it. */

#endif
