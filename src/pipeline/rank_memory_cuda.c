/* zbpp — the device memory of a pipeline rank on a GPU (rank_cuda.c allocates it; docs/cuda.md
 * "GPU memory"), in the zb_rank_mem_t fields of the CPU's whole-rank memory: predicted from the
 * plan with the CUDA stage's own layout figures (zb_cuda_stage_memory, computed on the host),
 * the same figures the allocations give when measured. Where it differs from the CPU model: each
 * stage holds its own state (a head stage reads the embedding stage's WTE on the same rank or on
 * a thread rank of the same GPU, pl_cuda_wte_shared; else it has its own copy), message slots follow the CPU's lifetimes except where a
 * copy on another stream still reads a slot after the program is done with it (pl_cuda_msg_slots),
 * the stashes are the CPU's lifetime slots (stash_slots.c) over the CUDA stash's own regions, a
 * post-validation backup is 3 x the state, and each stage has a workspace of its own. */
#include "pipeline/msg_buffers.h"
#include "pipeline/pipeline_hooks.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_memory_cuda.h"
#include "pipeline/stash_pool.h"
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

/* Thread ranks on one GPU: the head rank reads the embedding rank's WTE, as two stages of one
 * rank do. The embedding's rank must be set up first (ranks open in rank order), so only when it
 * comes before the head's, which every placement zbpp generates gives. Ranks in processes (MPI)
 * keep a copy each. */
bool pl_cuda_wte_shared(const pl_t *pl, int embed_rank, int head_rank)
{
    int ndev = pl->gpus;
    if (pl->opts->transport || embed_rank >= head_rank ||
        (ndev < 1 && zb_cuda_device_count(&ndev, NULL) != ZB_OK) || ndev < 1)
        return false;
    return (head_rank - embed_rank) % ndev == 0; /* thread rank g is on GPU g mod ndev */
}

void pl_cuda_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                          size_t *after_b)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp, false);
    *after_f = c.after_f;
    *after_b = c.after_b;
}

void pl_cuda_stage_static(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                          bool next_here, int embed_rank, int rank, zb_rank_mem_t *m)
{
    bool wte_here = embed_rank == rank || pl_cuda_wte_shared(pl, embed_rank, rank);
    zb_cuda_stage_mem_t c = stage_figures(pl, sp, pl_cuda_head_tied(sp, wte_here));
    double state = (double)c.state;
    m->params += state + (double)c.weights16;
    m->grads += state + (double)c.wte_head;
    m->optimizer += 2 * state;
    if (pl_rank_backs_up(pl))
        m->backup += 3 * state;
    m->workspace += (double)c.workspace; /* allocated when the stage opens */
    /* x_in, dx_out, and x_out / dx_in unless the neighbour on this rank provides them: a slot
     * per microbatch at most (the planner's bound before it has a program; pl_cuda_stage_stash
     * counts the program's slots) */
    int buffers = !sp->embed + !sp->head + (!sp->head && !next_here) + (!sp->embed && !prev_here);
    m->messages += (double)buffers * (double)pl->M * (double)pl->NC * sizeof(float);
}

/* Whether the stages before and after `stage` are on its rank in the plan's schedule. */
static void neighbours_here(const pl_t *pl, int stage, bool *prev, bool *next)
{
    const zb_schedule_t *sc = pl->plan.sched;
    const int r = zb_stage_rank(sc, stage);
    *prev = stage > 0 && zb_stage_rank(sc, stage - 1) == r;
    *next = stage + 1 < pl->plan.S && zb_stage_rank(sc, stage + 1) == r;
}

bool pl_cuda_pulls(const pl_t *pl)
{
    return pl->opts->cuda && pl->opts->cuda->device_messages && !pl->opts->transport;
}

/* Which slots a buffer's microbatches use: the CPU's intervals in program order (msg_buffers.c),
 * from the action that writes a microbatch's slot to the last that reads it, where the rank's
 * stream itself reads it. A received message (x_in, dx_out) lives from its RECV (or the F / B of
 * the neighbour stage on this rank) to its last F or R, or its B: a staged upload into a slot waits
 * for the compute that read it last (cu_buf_t.read), a device message is copied in by that compute
 * itself. x_in keeps a slot per microbatch when the run may recompute (--recompute, --offload
 * auto, or R's in the program): the planner counts a non-saving F's kept input there before it
 * places the R's. A sent slot (x_out, dx_in) is read
 * after its SEND by a copy: staged, the download on the stage's copy stream, which the slot's
 * next writer waits for (cu_buf_t.reuse), over at least two slots so that the next microbatch's
 * F or B need not wait for the download of the one before; with device messages, the receiver's
 * stream, which nothing in a forward-only (validation) program reports back to the sender, so a
 * slot per microbatch. */
int pl_cuda_msg_slots(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                      pl_buf_kind_t kind, int *slot)
{
    const int M = pl->M;
    bool prev_here, next_here;
    neighbours_here(pl, stage, &prev_here, &next_here);
    const bool sent = kind == PL_BUF_X_OUT || kind == PL_BUF_DX_IN;
    if ((sent && pl_cuda_pulls(pl)) ||
        (kind == PL_BUF_X_IN &&
         (pl->opts->recompute != ZB_RECOMPUTE_NONE || pl->opts->offload == ZB_OFFLOAD_AUTO ||
          pl_stage_recomputes(prog, stage)))) {
        for (int m = 0; slot && m < M; m++)
            slot[m] = m;
        return M;
    }
    bool here = kind == PL_BUF_X_IN ? prev_here : kind == PL_BUF_DX_OUT && next_here;
    const zb_pipeline_test_hooks_t *h = pl->opts->test_hooks;
    int least = sent ? (h && h->sent_slots > 0 ? h->sent_slots : 2) : 0;
    return pl_msgbuf_plan_spread(prog, stage, kind, here, M, least, slot);
}

double pl_cuda_stage_messages(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                              const zb_gpt2_span_t *sp)
{
    bool prev_here, next_here;
    neighbours_here(pl, stage, &prev_here, &next_here);
    double n = 0;
    if (!sp->embed)
        n += pl_cuda_msg_slots(pl, prog, stage, PL_BUF_X_IN, NULL);
    if (!sp->head)
        n += pl_cuda_msg_slots(pl, prog, stage, PL_BUF_DX_OUT, NULL);
    if (!sp->head && !next_here)
        n += pl_cuda_msg_slots(pl, prog, stage, PL_BUF_X_OUT, NULL);
    if (!sp->embed && !prev_here)
        n += pl_cuda_msg_slots(pl, prog, stage, PL_BUF_DX_IN, NULL);
    return n * (double)pl->NC * sizeof(float);
}

/* The stage's stash slots by lifetime, as rank_cuda_stash.c allocates them: the FW, FB and BW
 * slots the program holds at once (pl_stash_plan, the CPU rank's rule, with the plan's O
 * releases) times each region's bytes, and the stage's scratch. */
void pl_cuda_stage_stash(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                         const zb_gpt2_span_t *sp, zb_rank_mem_t *m)
{
    zb_cuda_stage_mem_t c = stage_figures(pl, sp, false); /* the stash and scratch alone */
    int n[3];
    pl_stash_plan(prog, stage, pl->M, pl_o_release(&pl->plan, stage, pl->M), n);
    for (int k = 0; k < 3; k++)
        m->stash_alloc += (double)n[k] * (double)c.region[k];
    m->stash_alloc += (double)c.scratch;
}
