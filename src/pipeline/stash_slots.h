/* zbpp — which lifetime slot of a stage's stash each microbatch holds (stash_slots.c): the
 * bookkeeping the CPU's stash pool (stash_pool.c) and the GPU's (rank_cuda_stash.c) share; they
 * differ only in where the slots' bytes live. */
#ifndef ZBPP_PL_STASH_SLOTS_H
#define ZBPP_PL_STASH_SLOTS_H

#include "pipeline/pipeline_types.h"

/* The three lifetime regions of a (stage, microbatch)'s stash (zb_gpt2_region_t's first three;
 * the CUDA stash walks its buffers into the same three). */
enum { PL_FW = 0, PL_FB = 1, PL_BW = 2 };

/* pl_stash_plan: the FW, FB, BW slots `stage` needs in a rank's program (at least one FW and
 * FB: validation runs its forwards through slot 0 of each). */
void pl_stash_plan(const zb_rank_program_t *prog, int stage, int n[3]);

/* init: sized by pl_stash_plan (ZB_ENOMEM); reset: all free (a step's start); begin takes the
 * slots compute or copy action a needs (an L: FW and FB again; false + err when the program
 * breaks the order); end gives back what a leaves unneeded (an O: FW and FB); at: the slot
 * region k holds for microbatch mb, -1 none. */
zb_status_t pl_stash_slots_init(pl_stash_slots_t *s, const zb_rank_program_t *prog, int stage,
                                int M, zb_err_t *err);
void pl_stash_slots_free(pl_stash_slots_t *s);
void pl_stash_slots_reset(pl_stash_slots_t *s);
bool pl_stash_slots_begin(pl_stash_slots_t *s, const zb_action_t *a, zb_err_t *err);
void pl_stash_slots_end(pl_stash_slots_t *s, const zb_action_t *a);
static inline int pl_stash_slots_at(const pl_stash_slots_t *s, int k, int mb)
{
    return s->slot[k][mb];
}

#endif
