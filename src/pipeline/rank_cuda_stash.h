/* zbpp — a GPU stage's stashes pooled by lifetime (rank_cuda_stash.c), the device twin of the
 * host's stash_pool.c over the same slots (stash_slots.c). */
#ifndef ZBPP_PL_RANK_CUDA_STASH_H
#define ZBPP_PL_RANK_CUDA_STASH_H

#include "pipeline/stash_slots.h"
#include "zbpp/cuda.h"

/* Offload (O / L actions): host slots of an FW and an FB region back to back, as many as the
 * program holds in host memory at once (an O takes one, its L gives it back), and the events
 * that order the copies against the compute and each other. */
typedef struct {
    int n;                     /* host slots */
    size_t bytes;              /* per host slot: bytes[FW] + bytes[FB] */
    float *mem;                /* pinned host memory, n slots */
    int *owner, *of;           /* [n] microbatch in a host slot; [M] host slot of a microbatch */
    struct CUevent_st *now;    /* the compute stream's progress when a copy is queued */
    struct CUevent_st **out;   /* [M] microbatch m's O done (its stash is in host memory) */
    struct CUevent_st **in;    /* [M] its L done (back on the device) */
    struct CUevent_st **slot_free[2]; /* [n[FW]], [n[FB]]: the O that must end before the
                                       * device slot is written again, NULL none */
    struct CUevent_st **host_free;    /* [n]: the L that must end before the host slot is */
    unsigned char *reloaded;          /* [M] its B waits for in[m] */
} pl_cu_offload_t;

typedef struct {
    pl_stash_slots_t slots;
    size_t bytes[3];        /* per slot of each region (zb_cuda_stash_regions) */
    float *mem[3];          /* device: slots.n[k] slots of bytes[k] each */
    zb_cuda_stash_t **view; /* [M] microbatch m's stash, bound to its slots */
    zb_cuda_stage_t *stage;
    pl_cu_offload_t off;    /* n == 0: the program offloads nothing */
} pl_cu_stash_pool_t;

/* init: the slots `stage`'s program needs (pl_stash_plan; release: where its O's slots go back,
 * NULL at the O), on stage s's device, and the host slots of its offloads; begin binds and returns microbatch a->mb's stash for compute action a
 * (taking slots, its stream waiting for an offload still reading one or a reload still
 * writing its stash; NULL + err when the program breaks the order), end gives back what a
 * leaves unneeded; copy runs an O or L (the copies queued on the stage's copy streams, no host
 * wait); eval: a stash for forwards that keep nothing (between steps: slot 0 of FW and FB);
 * live: bytes the stashes hold on the device now; bytes: the pool's device allocation;
 * host_bytes: its pinned host slots. */
zb_status_t pl_cu_stash_pool_init(pl_cu_stash_pool_t *p, zb_cuda_stage_t *s,
                                  const zb_rank_program_t *prog, int stage, int M,
                                  const int *release, zb_err_t *err);
void pl_cu_stash_pool_free(pl_cu_stash_pool_t *p);
void pl_cu_stash_pool_reset(pl_cu_stash_pool_t *p);
zb_cuda_stash_t *pl_cu_stash_pool_begin(pl_cu_stash_pool_t *p, const zb_action_t *a,
                                        zb_err_t *err);
void pl_cu_stash_pool_end(pl_cu_stash_pool_t *p, const zb_action_t *a);
zb_status_t pl_cu_stash_pool_copy(pl_cu_stash_pool_t *p, const zb_action_t *a, zb_err_t *err);
zb_cuda_stash_t *pl_cu_stash_pool_eval(pl_cu_stash_pool_t *p);
size_t pl_cu_stash_pool_live(const pl_cu_stash_pool_t *p);
size_t pl_cu_stash_pool_bytes(const pl_cu_stash_pool_t *p);
size_t pl_cu_stash_pool_host_bytes(const pl_cu_stash_pool_t *p);

#endif
