/* Internal: the zero-bubble paper's one-chunk heuristic (auto_heuristic.c). */
#ifndef ZBPP_AUTO_HEURISTIC_H
#define ZBPP_AUTO_HEURISTIC_H

#include "zbpp/schedule.h"

/* Variants: bit 0 allow a bubble before the first B (deeper warm-up), bit 1 prioritise B (a rank
 * two F's ahead of the next holds back), bit 2 fill a wait with a W even when the wait is within
 * the largest bubble so far. */
enum { ZB_HEURISTIC_VARIANTS = 8 };

/* One variant for P ranks, one stage each (c->stages == P, loop placement), M microbatches,
 * under c's limits. ZB_EMEMLIMIT when the variant cannot fit them, ZB_EINVAL, ZB_ENOMEM.
 * *out: compute-only split schedule named "auto", owned by the caller. *span and *makespan (may
 * be NULL) get the max per-rank span and the makespan zb_simulate would report for it. */
zb_status_t zb_zb_heuristic(int P, int M, const zb_costs_t *c, int variant, zb_schedule_t **out,
                            double *span, double *makespan, zb_err_t *err);

/* What a variant does, for labels. */
const char *zb_zb_heuristic_label(int variant);

#endif
