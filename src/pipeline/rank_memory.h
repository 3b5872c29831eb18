/* zbpp — whole-rank memory, predicted and measured (rank_memory.c) */
#ifndef ZBPP_PL_RANK_MEMORY_H
#define ZBPP_PL_RANK_MEMORY_H

#include "pipeline/pipeline_types.h"

/* Whole-rank memory (zb_rank_mem_t). pl_static_bound: the most any rank's non-activation memory
 * can be with S stages partitioned by `first`, over the placements a schedule may use (message
 * buffers as the comm pass places their actions; a lowered file may need more, which the exact
 * check after planning sees); what a --mem-limit leaves the activations is the limit minus
 * this. pl_mem_predict: rank's figures from `plan` (its partition and program) with the memory
 * model's activation peak; pl_mem_measure: the device's figures from its allocations. */
double pl_static_bound(const pl_t *pl, int S, const int *first);
/* The same bound for rank r alone: over either placement of its stages, or with `placed` (a
 * schedule of S stages, NULL = not known yet) that schedule's placement alone (an interleaved
 * family is never V-shaped: the V's bound, with the head beside the embedding on rank 0, would
 * refuse limits its own placement meets). */
double pl_static_bound_rank(const pl_t *pl, int S, const int *first, int r,
                            const zb_schedule_t *placed);
void pl_mem_predict(const pl_t *pl, const pl_plan_t *plan, int rank, double activations,
                    zb_rank_mem_t *m);
/* What each rank of schedule s (compute-only or lowered) holds besides its activations, bytes,
 * into out[s->ranks]; fails only when lowering s for a device's message slots fails. */
zb_status_t pl_ranks_fixed_bytes(const pl_t *pl, const zb_schedule_t *s, double *out,
                                 zb_err_t *err);
void pl_mem_measure(const pl_rank_t *R, zb_rank_mem_t *m);

/* m_f, m_b, m_w of every stage in bytes from the stash layout of pl->keep (partition `first`
 * of S stages, mbB, T; on GPUs the device stash's), and m_keep 0: a non-saving F's input stays
 * in its receive buffer (or the batch), counted with the messages. */
void pl_stage_memory(const pl_t *pl, int S, const int *first, zb_costs_t *costs);

#endif
