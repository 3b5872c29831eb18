/* zbpp — the device memory of a pipeline rank on a GPU (rank_cuda.c allocates it; docs/cuda.md
 * "GPU memory"), in the zb_rank_mem_t fields of the CPU's whole-rank memory: predicted from the
 * plan with the CUDA stage's own layout figures (zb_cuda_stage_memory, computed on the host),
 * the same figures the allocations give when measured. Where it differs from the CPU model: each
 * stage holds its own state (a head stage on the embedding's rank reads that stage's WTE; on
 * another rank it has its own copy), message buffers have a slot per microbatch, the stashes are the CPU's lifetime slots
 * (stash_slots.c) over the CUDA stash's own regions, and a post-validation backup is 3 x the
 * state. */
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_memory_cuda.h"
#include "pipeline/stash_slots.h"
#include "zbpp/cuda.h"

/* The stage's layout figures (tied: a head stage reading its rank's embedding WTE); zeros when
 * they cannot be had (a build without CUDA). */
static zb_cuda_stage_mem_t stage_figures(const pl_t *pl, const zb_gpt2_span_t *sp, bool tied)
{
    zb_cuda_stage_mem_t c;
    zb_cuda_precision_t prec = pl->opts->cuda ? pl->opts->cuda->precision : ZB_CUDA_FP32;
    zb_status_t st = tied ? zb_cuda_stage_memory_tied(&pl->mcfg, sp, pl->mbB, pl->T, prec, &c, NULL)
                          : zb_cuda_stage_memory(&pl->mcfg, sp, pl->mbB, pl->T, prec, &c, NULL);
    if (st != ZB_OK)
        c = (zb_cuda_stage_mem_t){0};
    return c;
}

bool pl_cuda_head_tied(const zb_gpt2_span_t *sp, bool embed_here)
{
    return sp->head && !sp->embed && embed_here;
}

void pl_cuda_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                          size_t *after_b)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp, false);
    *after_f = c.after_f;
    *after_b = c.after_b;
}

void pl_cuda_stage_static(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                          bool next_here, bool embed_here, zb_rank_mem_t *m)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp, pl_cuda_head_tied(sp, embed_here));
    double state = (double)c.state;
    m->params += state + (double)c.weights16;
    m->grads += state + (double)c.wte_head;
    m->optimizer += 2 * state;
    if (pl_rank_backs_up(pl))
        m->backup += 3 * state;
    /* x_in, dx_out, and x_out / dx_in unless the neighbour on this rank provides them */
    int buffers = !sp->embed + !sp->head + (!sp->head && !next_here) + (!sp->embed && !prev_here);
    m->messages += (double)buffers * (double)pl->M * (double)pl->NC * sizeof(float);
}

/* The stage's stash slots by lifetime, as rank_cuda_stash.c allocates them: the FW, FB and BW
 * slots the program holds at once (pl_stash_plan, the CPU rank's rule) times each region's
 * bytes, and the stage's scratch. */
void pl_cuda_stage_stash(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                         const zb_gpt2_span_t *sp, zb_rank_mem_t *m)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp, false); /* the stash and scratch alone */
    int n[3];
    pl_stash_plan(prog, stage, n);
    for (int k = 0; k < 3; k++)
        m->stash_alloc += (double)n[k] * (double)c.region[k];
    m->stash_alloc += (double)c.scratch;
}
