/* zbpp — the post-validation step's backup in a CPU rank's free memory (optimistic.c) */
#ifndef ZBPP_PL_OPTIMISTIC_H
#define ZBPP_PL_OPTIMISTIC_H

#include "pipeline/pipeline_types.h"

/* optimistic.c: pl_spare_collect lists the rank's stash pools, scratch and message buffers
 * (after they are made); pl_optimistic_elems: how many elements of its update ranges (in
 * order, the head's shared WTE excluded) an optimistic step may touch, a third of that spare
 * memory; pl_backup_prefix saves (or restores) params, m, v of the first K there;
 * pl_update_elems: AdamW with clip factor 1 on elements [from, to) of the update ranges. */
void pl_spare_collect(pl_rank_t *R);
size_t pl_optimistic_elems(const pl_rank_t *R);
void pl_backup_prefix(pl_rank_t *R, size_t K, bool save);
void pl_update_elems(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t);

#endif
