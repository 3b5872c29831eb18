/* zbpp — the memory model of a rank on a GPU (rank_memory_cuda.c) */
#ifndef ZBPP_PL_RANK_MEMORY_CUDA_H
#define ZBPP_PL_RANK_MEMORY_CUDA_H

#include "pipeline/pipeline_types.h"

/* rank_memory_cuda.c: the same figures for a rank on a GPU, its device memory (pl_rank_cuda's memory model).
 * pl_cuda_stage_memory: a device stash's live bytes after F and after B; pl_cuda_stage_static
 * adds stage sp's state, backup and device message buffers (a slot per microbatch, the bound)
 * to m; pl_cuda_stage_stash adds its stash pool (the slots `prog` holds at once, by lifetime
 * region) and scratch to m->stash_alloc; pl_cuda_stage_messages: the bytes of its message
 * slots in `prog` (pl_cuda_msg_slots). */
/* A head stage on the embedding stage's rank reads that stage's WTE (zb_cuda_stage_new_tied). */
bool pl_cuda_head_tied(const zb_gpt2_span_t *sp, bool embed_here);
void pl_cuda_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                          size_t *after_b);
void pl_cuda_stage_static(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                          bool next_here, int embed_rank, int rank, zb_rank_mem_t *m);
/* A head stage on thread rank head_rank reads the WTE of the embedding stage on embed_rank
 * (both on one GPU, the embedding's rank first); false for the same rank (pl_cuda_head_tied). */
bool pl_cuda_wte_shared(const pl_t *pl, int embed_rank, int head_rank);
/* Device messages: the receiver's stream copies from the sender's slot (thread ranks). */
bool pl_cuda_pulls(const pl_t *pl);
/* The device slots a GPU rank allocates for message buffer `kind` of `stage` in program prog, and
 * each microbatch's slot into slot[M] when not NULL (-1: none); -1 when out of memory. */
int pl_cuda_msg_slots(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                      pl_buf_kind_t kind, int *slot);
double pl_cuda_stage_messages(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                              const zb_gpt2_span_t *sp);
void pl_cuda_stage_stash(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                         const zb_gpt2_span_t *sp, zb_rank_mem_t *m);

#endif
