/* zbpp — the device memory of a pipeline rank on a GPU (rank_cuda.c allocates it; docs/cuda.md
 * "GPU memory"), in the zb_rank_mem_t fields of the CPU's whole-rank memory: predicted from the
 * plan with the CUDA stage's own layout figures (zb_cuda_stage_memory, computed on the host),
 * the same figures the allocations give when measured. Where it differs from the CPU model: each
 * stage holds its own state (two stages of a rank, or the embedding and the head, each their
 * WTE), message buffers have a slot per microbatch, a stash is a whole stash per microbatch in
 * flight (taken at F or R, given back after W; a non-saving F gives it back when it ends), and a
 * post-validation backup is 3 x the state. */
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_memory_cuda.h"
#include "zbpp/cuda.h"

/* The stage's layout figures; zeros when they cannot be had (a build without CUDA). */
static zb_cuda_stage_mem_t stage_figures(const pl_t *pl, const zb_gpt2_span_t *sp)
{
    zb_cuda_stage_mem_t c;
    zb_cuda_precision_t prec = pl->opts->cuda ? pl->opts->cuda->precision : ZB_CUDA_FP32;
    if (zb_cuda_stage_memory(&pl->mcfg, sp, pl->mbB, pl->T, prec, &c, NULL) != ZB_OK)
        c = (zb_cuda_stage_mem_t){0};
    return c;
}

void pl_cuda_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                          size_t *after_b)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp);
    *after_f = c.after_f;
    *after_b = c.after_b;
}

void pl_cuda_stage_static(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                          bool next_here, zb_rank_mem_t *m)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp);
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

/* The most stashes `stage` holds at once in the program: one from each saving F (or R) to its
 * W (or BW), and one during a non-saving F (given back when it ends). At least one (validation
 * takes one for an F). */
static int stashes_needed(const zb_rank_program_t *prog, int stage)
{
    int live = 0, most = 1;
    for (int i = 0; i < prog->len; i++) {
        const zb_action_t *a = &prog->actions[i];
        if (a->stage != stage)
            continue;
        bool forgets = a->type == ZB_ACT_F && (a->flags & ZB_ACT_NOSAVE);
        if ((a->type == ZB_ACT_F && !forgets) || a->type == ZB_ACT_R)
            live++;
        else if (a->type == ZB_ACT_W || a->type == ZB_ACT_BW)
            live--;
        int now = live + forgets;
        most = now > most ? now : most;
    }
    return most;
}

void pl_cuda_stage_stash(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                         const zb_gpt2_span_t *sp, zb_rank_mem_t *m)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp);
    m->stash_alloc += (double)stashes_needed(prog, stage) * (double)c.stash + (double)c.scratch;
}
