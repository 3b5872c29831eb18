/* zbpp — a stage's stashes pooled by lifetime (stash_pool.c) */
#ifndef ZBPP_PL_STASH_POOL_H
#define ZBPP_PL_STASH_POOL_H

#include "pipeline/pipeline_types.h"
#include "pipeline/stash_slots.h"

/* stash_pool.c, the host's pool (slots: stash_slots.h). pl_stash_stage_bytes: what its pool
 * allocates (and its scratch need in *scratch). The pool: init, free, reset (step start: all
 * free); begin binds and returns microbatch a->mb's stash for compute action a (taking slots;
 * NULL + err when the program breaks the order), end gives back what a leaves unneeded; eval: a
 * stash for forwards that keep nothing (between steps); live: bytes the stashes hold now;
 * bytes: pool allocation (scratch not included). */
size_t pl_stash_stage_bytes(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                            size_t *scratch);
zb_status_t pl_stash_pool_init(pl_stash_pool_t *p, const pl_t *pl,
                               const zb_rank_program_t *prog, const zb_gpt2_span_t *span,
                               int stage, zb_err_t *err);
void pl_stash_pool_free(pl_stash_pool_t *p);
void pl_stash_pool_reset(pl_stash_pool_t *p);
zb_gpt2_stash_t *pl_stash_pool_begin(pl_stash_pool_t *p, const zb_action_t *a, zb_err_t *err);
void pl_stash_pool_end(pl_stash_pool_t *p, const zb_action_t *a);
zb_gpt2_stash_t *pl_stash_pool_eval(pl_stash_pool_t *p);
size_t pl_stash_pool_live(const pl_stash_pool_t *p);
size_t pl_stash_pool_bytes(const pl_stash_pool_t *p);
/* True when the program has an R of `stage` (the stage then owns an R output buffer). */
bool pl_stage_recomputes(const zb_rank_program_t *prog, int stage);

#endif
