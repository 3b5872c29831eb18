/* zbpp — one tied WTE for the embedding and the head thread rank (wte_share.c) */
#ifndef ZBPP_PL_WTE_SHARE_H
#define ZBPP_PL_WTE_SHARE_H

#include "pipeline/pipeline_types.h"

/* wte_share.c (threads, one replica): pl_wte_shared says whether the embedding and the head rank
 * share one WTE; pl_wte_share_embed (embedding rank, after its buffers are made: head_count is
 * the head rank's parameter count) moves params, m, v into the shared blocks; pl_wte_share_head
 * (head rank, after the embedding rank) lays its buffers over them, WTE last, and makes its
 * gradient's WTE part its head accumulator; pl_wte_share_release before freeing a rank's
 * buffers; pl_wte_fold_shared (embedding rank, after both ranks' last W): its WTE gradient +=
 * the head's accumulator. */
bool pl_wte_shared(const pl_t *pl, int embed_rank, int head_rank);
zb_status_t pl_wte_share_embed(pl_t *pl, pl_rank_t *R, size_t head_count, zb_err_t *err);
zb_status_t pl_wte_share_head(pl_t *pl, pl_rank_t *R, zb_err_t *err);
void pl_wte_share_release(pl_rank_t *R);
void pl_wte_fold_shared(pl_rank_t *R);

#endif
