/* zbpp — the private state of a pipeline rank on the CPU (R->devst of pl_rank_cpu, as rank_cuda.c's
 * cu_rank_t is a GPU rank's): the stashes' shared scratch, the free memory that holds the
 * post-validation backup, and the blocks of a WTE shared between thread ranks. Only the CPU
 * rank's files include it: rank_cpu.c, optimistic.c, wte_share.c. */
#ifndef ZBPP_RANK_CPU_STATE_H
#define ZBPP_RANK_CPU_STATE_H

#include "pipeline/pipeline_types.h"

enum { PL_MAX_SPARE = 64 };

typedef struct {
    void *stash_scratch; /* [stash_scratch_bytes] scratch of every stash of the rank */
    size_t stash_scratch_bytes;
    /* optimistic.c: the rank's stash and message memory, free while the optimizer runs, holds
     * the post-validation backup of the first pl_optimistic_elems elements */
    struct { float *p; size_t n; } spare[PL_MAX_SPARE];
    int n_spare;
    size_t spare_floats;
    /* wte_share.c, embedding rank: the shared blocks of params, m, v, and the floats before WTE
     * in them (the head rank's other tensors) */
    float *wte_joint[3];
    size_t wte_head_rest;
} pl_cpu_rank_t;

/* The CPU state of rank R (NULL before pl_rank_cpu's init). */
static inline pl_cpu_rank_t *pl_cpu_rank(const pl_rank_t *R) { return (pl_cpu_rank_t *)R->devst; }

#endif
