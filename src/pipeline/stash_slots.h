/* zbpp — which lifetime slot of a stage's stash each microbatch holds (stash_slots.c): the
 * bookkeeping the CPU's stash pool (stash_pool.c) and the GPU's (rank_cuda_stash.c) share; they
 * differ only in where the slots' bytes live. */
#ifndef ZBPP_PL_STASH_SLOTS_H
#define ZBPP_PL_STASH_SLOTS_H

#include "pipeline/pipeline_types.h"

/* The three lifetime regions of a (stage, microbatch)'s stash (zb_gpt2_region_t's first three;
 * the CUDA stash walks its buffers into the same three). */
enum { PL_FW = 0, PL_FB = 1, PL_BW = 2 };

/* Where an O's FW and FB slots go back (release[m] for microbatch m's O): PL_RELEASE_AT_O at
 * the O itself (program order: the next action that needs a slot may take them, and its
 * stream waits for the download), else before the stage's action (type, mb) whose key
 * pl_release_key gives (the first that starts after the download ends, in the plan's
 * simulation: there the memory comes back when the copy ends), or PL_RELEASE_AT_END (at the
 * step's end). Microbatch m's own L takes them back first in any case (its upload waits for
 * its O). */
enum { PL_RELEASE_AT_O = -1, PL_RELEASE_AT_END = -2 };
static inline int pl_release_key(int type, int mb) { return type * (1 << 20) + mb; }

/* Stage s's releases in the plan (pl_plan_t.o_release), NULL where it offloads nothing. */
static inline const int *pl_o_release(const pl_plan_t *plan, int stage, int M)
{
    return plan->o_release ? plan->o_release + (size_t)stage * (size_t)M : NULL;
}

/* pl_stash_plan: the FW, FB, BW slots `stage` needs in a rank's program (at least one FW and
 * FB: validation runs its forwards through slot 0 of each), its O's slots going back where
 * release says (NULL: at the O; else [M]). */
void pl_stash_plan(const zb_rank_program_t *prog, int stage, int M, const int *release,
                   int n[3]);

/* init: sized by pl_stash_plan (ZB_ENOMEM; release as there, copied); reset: all free (a
 * step's start); begin takes the slots compute or copy action a needs (an L: FW and FB again;
 * false + err when the program breaks the order), after giving back the O slots due before a;
 * end gives back what a leaves unneeded (an O: FW and FB, or later: release); at: the slot
 * region k holds for microbatch mb, -1 none. */
zb_status_t pl_stash_slots_init(pl_stash_slots_t *s, const zb_rank_program_t *prog, int stage,
                                int M, const int *release, zb_err_t *err);
void pl_stash_slots_free(pl_stash_slots_t *s);
void pl_stash_slots_reset(pl_stash_slots_t *s);
bool pl_stash_slots_begin(pl_stash_slots_t *s, const zb_action_t *a, zb_err_t *err);
void pl_stash_slots_end(pl_stash_slots_t *s, const zb_action_t *a);
static inline int pl_stash_slots_at(const pl_stash_slots_t *s, int k, int mb)
{
    return s->slot[k][mb];
}

#endif
