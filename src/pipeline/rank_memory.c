/* Whole-rank memory: what a pipeline rank holds besides its activations (stage-local parameters,
 * gradients, AdamW moments, the post-validation backup, message buffers), predicted from the
 * plan and counted from the rank's allocations, and the activation budget a --mem-limit leaves
 * for the schedule. The figures and their meaning: docs/runtime.md, "Whole-rank memory". */
#include <math.h>
#include <string.h>

#include "pipeline/msg_buffers.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_device.h"
#include "pipeline/rank_memory.h"
#include "pipeline/stash_pool.h"
#include "pipeline/wte_share.h"
#include "zbpp/cuda.h"
#include "zbpp/nn.h"
#include "zbpp/util.h"

typedef int (*rank_of_fn)(const pl_t *pl, int S, int stage);

static int loop_rank(const pl_t *pl, int S, int s)
{
    (void)S;
    return s % pl->P;
}

static int v_rank(const pl_t *pl, int S, int s)
{
    (void)S;
    return s < pl->P ? s : 2 * pl->P - 1 - s;
}

static int sched_rank(const pl_t *pl, int S, int s)
{
    (void)S;
    return zb_stage_rank(pl->plan.sched, s);
}

/* Bytes of the bf16 weight cache of a CPU rank holding these spans (gemm_bf16_weights.c): every
 * matrix its linear layers multiply by, rounded once a step and kept (a block's qkv, attention
 * projection, fc and fc projection: 12 C² values; the head's classifier: the WTE). */
static double bf16_weight_copies(const pl_t *pl, const zb_gpt2_span_t *spans, int n)
{
    if (!zb_bf16_weight_cache_used())
        return 0;
    const double C = pl->mcfg.channels, values_per_block = 12 * C * C;
    double values = 0;
    for (int i = 0; i < n; i++) {
        values += values_per_block * (spans[i].layer_end - spans[i].layer_begin);
        if (spans[i].head)
            values += (double)pl->mcfg.padded_vocab * C;
    }
    return values * 2; /* bytes of a bf16 value */
}

/* Parameters, gradients, optimizer, backup, messages and workspace of `rank` with S stages
 * placed by rank_of and partitioned by pl->plan.first. */
static void static_part(const pl_t *pl, int S, rank_of_fn rank_of, int rank, zb_rank_mem_t *m)
{
    zb_gpt2_span_t spans[1025] = {{0, 0, false, false}};
    int n = 0;
    bool embed = false, head = false;
    double msg_bufs = 0;
    for (int s = 0; s < S && n < 1025; s++) {
        if (rank_of(pl, S, s) != rank)
            continue;
        zb_gpt2_span_t sp = zb_partition_span(pl->plan.first, S, s);
        spans[n++] = sp;
        embed |= sp.embed;
        head |= sp.head;
        /* x_in: a slot per microbatch; dx_out: likewise from a stage on this rank, else one
         * slot; x_out / dx_in unless the neighbour stage is on this rank: one slot (the comm
         * pass's placement; msg_buffers.c) */
        bool next_here = !sp.head && rank_of(pl, S, s + 1) == rank;
        bool prev_here = !sp.embed && rank_of(pl, S, s - 1) == rank;
        if (pl->dev->stage_static) { /* the device's own buffers, stage by stage */
            pl->dev->stage_static(pl, &sp, prev_here, next_here, rank_of(pl, S, 0), rank, m);
            continue;
        }
        msg_bufs += !sp.embed ? (double)pl->M : 0;
        msg_bufs += sp.head ? 0 : next_here ? (double)pl->M : 1;
        msg_bufs += !sp.head && !next_here;
        msg_bufs += !sp.embed && !prev_here;
    }
    if (pl->dev->stage_static)
        return;
    const double F = sizeof(float);
    double count = (double)zb_gpt2_params_part_count(&pl->mcfg, spans, n);
    double wte_n = (double)pl->mcfg.padded_vocab * pl->mcfg.channels;
    /* thread ranks share one WTE, held by the embedding rank (wte_share.c) */
    bool shared = pl_wte_shared(pl, rank_of(pl, S, 0), rank_of(pl, S, S - 1));
    bool head_only = head && !embed;
    double own = head_only && shared ? count - wte_n : count;
    m->params = own * F;
    /* + the head's WTE accumulator (with a shared WTE, it is the gradient's WTE part) */
    m->grads = (count + (head && !(head_only && shared) ? wte_n : 0)) * F;
    m->optimizer = 2 * own * F;
    m->backup = 0; /* held in the rank's free stash and message memory (optimistic.c) */
    m->messages = msg_bufs * (double)pl->NC * F;
    if (embed && !head && !shared) /* the tied gradient's exchange buffer */
        m->messages += (double)pl_wte_chunk((size_t)wte_n) * F;
    m->workspace = bf16_weight_copies(pl, spans, n);
}

/* Memory deltas of every stage from the stash the ranks will allocate (--keep-activations). */
void pl_stage_memory(const pl_t *pl, int S, const int *first, zb_costs_t *costs)
{
    for (int s = 0; s < S; s++) {
        zb_gpt2_span_t span = zb_partition_span(first, S, s);
        size_t after_f, after_b;
        pl->dev->stage_memory(pl, &span, &after_f, &after_b);
        costs->m_f[s] = (double)after_f;
        costs->m_b[s] = (double)after_b - (double)after_f;
        costs->m_w[s] = -(double)after_b;
        if (costs->m_keep)
            costs->m_keep[s] = 0.0;
    }
}

double zb_rank_mem_allocated(const zb_rank_mem_t *m)
{
    return m->params + m->grads + m->optimizer + m->backup + m->messages + m->stash_alloc +
           m->workspace;
}

static void add_total(zb_rank_mem_t *m)
{
    m->total = m->params + m->grads + m->optimizer + m->backup + m->messages + m->activations +
               m->workspace;
}

double pl_static_bound_rank(const pl_t *run, int S, const int *first, int r,
                            const zb_schedule_t *placed)
{
    pl_t view = *run; /* the candidate partition (read only) */
    view.plan.S = S;
    memcpy(view.plan.first, first, (size_t)(S + 1) * sizeof *first);
    if (placed)
        view.plan.sched = (zb_schedule_t *)placed;
    const pl_t *pl = &view;
    /* before the schedule is known, any stage of a rank may get an R output buffer */
    int stages_per_rank = (S + pl->P - 1) / pl->P;
    double r_out = pl->opts->recompute != ZB_RECOMPUTE_NONE
                       ? (double)stages_per_rank * (double)pl->NC * sizeof(float)
                       : 0;
    zb_rank_mem_t a = {0}, b = {0};
    if (placed && placed->stages == S)
        static_part(pl, S, sched_rank, r, &a);
    else {
        static_part(pl, S, loop_rank, r, &a);
        if (S == 2 * pl->P)
            static_part(pl, S, v_rank, r, &b);
    }
    a.messages += r_out, b.messages += r_out;
    add_total(&a), add_total(&b);
    return fmax(a.total, b.total);
}

double pl_static_bound(const pl_t *run, int S, const int *first)
{
    double most = 0;
    for (int r = 0; r < run->P; r++)
        most = fmax(most, pl_static_bound_rank(run, S, first, r, NULL));
    return most;
}

/* Slots of the message buffers stage s holds on `rank` (msg_buffers.c plans them from the
 * program: the microbatches in flight, at most M each). */
static int stage_msg_slots(const pl_t *pl, int rank, int s, const zb_gpt2_span_t *sp)
{
    const zb_rank_program_t *prog = &pl->plan.sched->rank[rank];
    bool prev_here = s > 0 && zb_stage_rank(pl->plan.sched, s - 1) == rank;
    bool next_here = s + 1 < pl->plan.S && zb_stage_rank(pl->plan.sched, s + 1) == rank;
    int n = 0;
    if (!sp->embed)
        n += pl_msgbuf_plan(prog, s, PL_BUF_X_IN, prev_here, pl->M, NULL);
    if (!sp->head)
        n += pl_msgbuf_plan(prog, s, PL_BUF_DX_OUT, next_here, pl->M, NULL);
    if (!sp->head && !next_here)
        n += pl_msgbuf_plan(prog, s, PL_BUF_X_OUT, false, pl->M, NULL);
    if (!sp->embed && !prev_here)
        n += pl_msgbuf_plan(prog, s, PL_BUF_DX_IN, false, pl->M, NULL);
    return n;
}

zb_status_t pl_ranks_fixed_bytes(const pl_t *pl, const zb_schedule_t *s, double *out,
                                 zb_err_t *err)
{
    pl_t at = *pl; /* the candidate's placement and programs (read only) */
    at.plan.sched = (zb_schedule_t *)s;
    at.plan.S = s->stages;
    /* a device's message slots follow the program with its comm actions (lowered once here
     * when s has none yet) */
    zb_schedule_t *low = NULL;
    if (at.dev->stage_messages && !zb_schedule_has_comms(s)) {
        zb_status_t st = zb_insert_comms(s, &low, err);
        if (st != ZB_OK)
            return st;
    }
    const zb_schedule_t *prog = low ? low : s;
    for (int rank = 0; rank < s->ranks; rank++) {
        zb_rank_mem_t m = {0};
        at.plan.sched = (zb_schedule_t *)s;
        static_part(&at, s->stages, sched_rank, rank, &m);
        if (at.dev->stage_messages) { /* the program's slots, not the bound */
            at.plan.sched = (zb_schedule_t *)prog;
            m.messages = 0;
            for (int st = 0; st < s->stages; st++)
                if (zb_stage_rank(prog, st) == rank) {
                    zb_gpt2_span_t sp = zb_partition_span(at.plan.first, s->stages, st);
                    m.messages += at.dev->stage_messages(&at, &prog->rank[rank], st, &sp);
                }
        }
        add_total(&m);
        out[rank] = m.total;
    }
    zb_schedule_free(low);
    return ZB_OK;
}

void pl_mem_predict(const pl_t *run, const pl_plan_t *plan, int rank, double activations,
                    zb_rank_mem_t *m)
{
    pl_t view = *run; /* the plan being built (read only) */
    view.plan = *plan;
    const pl_t *pl = &view;
    memset(m, 0, sizeof *m);
    static_part(pl, pl->plan.S, sched_rank, rank, m);
    m->activations = activations;
    const bool host = !pl->dev->stage_stash; /* stash pools and message buffers on the host */
    const zb_rank_program_t *prog = &pl->plan.sched->rank[rank];
    if (host) { /* static_part's message buffers bound M in flight; the program says how many */
        int e = zb_stage_rank(pl->plan.sched, 0), h = zb_stage_rank(pl->plan.sched, pl->plan.S - 1);
        m->messages = e == rank && h != rank && !pl_wte_shared(pl, e, h)
                          ? (double)pl_wte_chunk((size_t)pl->mcfg.padded_vocab *
                                                 pl->mcfg.channels) * sizeof(float)
                          : 0;
    }
    if (!host) /* the device's message slots in this program, below, not the bound */
        m->messages = 0;
    size_t scratch_most = 0; /* on the CPU one scratch serves all the rank's stashes */
    for (int s = 0; s < pl->plan.S; s++) {
        if (zb_stage_rank(pl->plan.sched, s) != rank)
            continue;
        zb_gpt2_span_t sp = zb_partition_span(pl->plan.first, pl->plan.S, s);
        if (!host) { /* device buffers as static_part counted them, its stashes */
            pl->dev->stage_stash(pl, prog, s, &sp, m);
            m->messages += pl->dev->stage_messages(pl, prog, s, &sp);
        } else {
            m->messages += (double)stage_msg_slots(pl, rank, s, &sp) * (double)pl->NC * sizeof(float);
            size_t scratch = 0;
            m->stash_alloc += (double)pl_stash_stage_bytes(pl, prog, s, &scratch);
            scratch_most = scratch > scratch_most ? scratch : scratch_most;
        }
        if (!sp.head && pl_stage_recomputes(prog, s))
            m->messages += (double)pl->NC * sizeof(float); /* the R's output buffer */
    }
    m->stash_alloc += (double)scratch_most;
    add_total(m);
}

/* Both predictions: the CPU's (cuda NULL) and a GPU's device memory. */
static zb_status_t predict(const zb_cuda_train_opts_t *cuda, const zb_gpt2_config_t *cfg,
                           const int *first, const zb_schedule_t *sched, const zb_costs_t *costs,
                           int mbB, int T, zb_opt_sync_t sync, zb_gpt2_keep_t keep,
                           zb_rank_mem_t *out, zb_err_t *err)
{
    if (!cfg || !first || !sched || !costs || !out || mbB < 1 || T < 1)
        return zb_err_set(err, ZB_EINVAL, "memory prediction: missing or bad arguments");
    if (sched->stages > 1024 || costs->stages != sched->stages)
        return zb_err_set(err, ZB_EINVAL, "memory prediction: %d stages, costs for %d",
                          sched->stages, costs->stages);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = sched->ranks;
    o.opt_sync = sync;
    o.keep = keep;
    o.cuda = cuda;
    pl_t pl;
    memset(&pl, 0, sizeof pl);
    pl.opts = &o;
    pl.dev = pl_rank_device(&o);
    pl.gpus = cuda ? 1 : 0;
    pl.mcfg = *cfg;
    pl.P = sched->ranks, pl.N = 1, pl.plan.S = sched->stages, pl.M = sched->microbatches;
    pl.mbB = mbB, pl.T = T, pl.keep = keep;
    pl.NC = (size_t)mbB * (size_t)T * (size_t)cfg->channels;
    pl.plan.sched = (zb_schedule_t *)sched; /* read only */
    /* message buffers follow the lowered program, as the run lowers it */
    zb_schedule_t *lowered = NULL;
    if (sched->ranks > 1 && !zb_schedule_has_comms(sched)) {
        zb_status_t lst = zb_insert_comms(sched, &lowered, err);
        if (lst != ZB_OK)
            return lst;
        pl.plan.sched = lowered;
    }
    memcpy(pl.plan.first, first, (size_t)(sched->stages + 1) * sizeof *first);
    zb_costs_t c;
    zb_status_t st = zb_costs_clone(&c, costs, err);
    if (st != ZB_OK) {
        zb_schedule_free(lowered);
        return st;
    }
    pl_stage_memory(&pl, pl.plan.S, pl.plan.first, &c); /* the stash of this keep mode, bytes */
    c.mem_limit = INFINITY;
    zb_sim_t sim;
    if ((st = zb_simulate(sched, &c, &sim, err)) == ZB_OK) {
        for (int r = 0; r < pl.P; r++)
            pl_mem_predict(&pl, &pl.plan, r, sim.peak_mem[r], &out[r]);
        zb_sim_free(&sim);
    }
    zb_costs_free(&c);
    zb_schedule_free(lowered);
    return st;
}

zb_status_t zb_pipeline_predict_memory(const zb_gpt2_config_t *cfg, const int *first,
                                       const zb_schedule_t *sched, const zb_costs_t *costs,
                                       int mbB, int T, zb_opt_sync_t sync, zb_gpt2_keep_t keep,
                                       zb_rank_mem_t *out, zb_err_t *err)
{
    return predict(NULL, cfg, first, sched, costs, mbB, T, sync, keep, out, err);
}

zb_status_t zb_pipeline_predict_gpu_memory(const zb_cuda_train_opts_t *cuda,
                                           const zb_gpt2_config_t *cfg, const int *first,
                                           const zb_schedule_t *sched, const zb_costs_t *costs,
                                           int mbB, int T, zb_opt_sync_t sync,
                                           zb_rank_mem_t *out, zb_err_t *err)
{
    if (!cuda)
        return zb_err_set(err, ZB_EINVAL, "GPU memory prediction: no GPU options");
    if (!zb_cuda_built())
        return zb_err_set(err, ZB_EUNSUPPORTED, "GPU memory prediction: built without CUDA");
    return predict(cuda, cfg, first, sched, costs, mbB, T, sync, ZB_GPT2_KEEP_ALL, out, err);
}

void pl_mem_measure(const pl_rank_t *R, zb_rank_mem_t *m)
{
    memset(m, 0, sizeof *m);
    R->dev->memory(R, m); /* the device's figures, from its allocations */
    add_total(m);
    m->rss_peak = zb_rss_peak_bytes();
}
