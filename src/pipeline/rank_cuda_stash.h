/* zbpp — a GPU stage's stashes pooled by lifetime (rank_cuda_stash.c), the device twin of the
 * host's stash_pool.c over the same slots (stash_slots.c). */
#ifndef ZBPP_PL_RANK_CUDA_STASH_H
#define ZBPP_PL_RANK_CUDA_STASH_H

#include "pipeline/stash_slots.h"
#include "zbpp/cuda.h"

typedef struct {
    pl_stash_slots_t slots;
    size_t bytes[3];        /* per slot of each region (zb_cuda_stash_regions) */
    float *mem[3];          /* device: slots.n[k] slots of bytes[k] each */
    zb_cuda_stash_t **view; /* [M] microbatch m's stash, bound to its slots */
    int M;
} pl_cu_stash_pool_t;

/* init: the slots `stage`'s program needs (pl_stash_plan), on stage s's device; begin binds and
 * returns microbatch a->mb's stash for compute action a (taking slots; NULL + err when the
 * program breaks the order), end gives back what a leaves unneeded; eval: a stash for forwards
 * that keep nothing (between steps: slot 0 of FW and FB); live: bytes the stashes hold now;
 * bytes: the pool's device allocation. */
zb_status_t pl_cu_stash_pool_init(pl_cu_stash_pool_t *p, zb_cuda_stage_t *s,
                                  const zb_rank_program_t *prog, int stage, int M, zb_err_t *err);
void pl_cu_stash_pool_free(pl_cu_stash_pool_t *p);
void pl_cu_stash_pool_reset(pl_cu_stash_pool_t *p);
zb_cuda_stash_t *pl_cu_stash_pool_begin(pl_cu_stash_pool_t *p, const zb_action_t *a,
                                        zb_err_t *err);
void pl_cu_stash_pool_end(pl_cu_stash_pool_t *p, const zb_action_t *a);
zb_cuda_stash_t *pl_cu_stash_pool_eval(pl_cu_stash_pool_t *p);
size_t pl_cu_stash_pool_live(const pl_cu_stash_pool_t *p);
size_t pl_cu_stash_pool_bytes(const pl_cu_stash_pool_t *p);

#endif
