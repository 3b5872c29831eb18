/* zbpp — the memory model of a rank on a GPU (rank_memory_cuda.c) */
#ifndef ZBPP_PL_RANK_MEMORY_CUDA_H
#define ZBPP_PL_RANK_MEMORY_CUDA_H

#include "pipeline/pipeline_types.h"

/* rank_memory_cuda.c: the same figures for a rank on a GPU, its device memory (pl_rank_cuda's memory model).
 * pl_cuda_stage_memory: a device stash's live bytes after F and after B; pl_cuda_stage_static
 * adds stage sp's state, backup and device message buffers to m; pl_cuda_stage_stash adds its
 * stash pool (the slots `prog` holds at once, by lifetime region) and scratch to
 * m->stash_alloc. */
/* A head stage on the embedding stage's rank reads that stage's WTE (zb_cuda_stage_new_tied). */
bool pl_cuda_head_tied(const zb_gpt2_span_t *sp, bool embed_here);
void pl_cuda_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                          size_t *after_b);
void pl_cuda_stage_static(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                          bool next_here, bool embed_here, zb_rank_mem_t *m);
void pl_cuda_stage_stash(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                         const zb_gpt2_span_t *sp, zb_rank_mem_t *m);

#endif
