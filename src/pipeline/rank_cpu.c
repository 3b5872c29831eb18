/* zbpp — a pipeline rank on the CPU (rank_device.h): the stage API of zbpp/gpt2.h on the rank's
 * host state, stashes pooled by lifetime (stash_pool.c), messages straight from and into its
 * message buffers (msg_buffers.c), the optimizer on its owned units with the post-validation
 * backup in its free stash and message memory (optimistic.c), the tied WTE shared between
 * thread ranks (wte_share.c). Its private state: rank_cpu_state.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/msg_buffers.h"
#include "pipeline/optimistic.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_cpu_state.h"
#include "pipeline/rank_device.h"
#include "pipeline/stash_pool.h"
#include "pipeline/wte_share.h"
#include "zbpp/nn.h"
#include "zbpp/util.h"

static zb_status_t oom(zb_err_t *err, int rank)
{
    return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for its pipeline state", rank);
}

static zb_status_t cpu_init(pl_rank_t *R, zb_err_t *err)
{
    if (!(R->devst = calloc(1, sizeof(pl_cpu_rank_t))))
        return oom(err, R->rank);
    return ZB_OK;
}

/* The stage's stash pool, and its message buffers: x_in is written by the previous stage's F
 * when that stage is here, else by RECV_F; dx_out by the next stage's B when it is here, else
 * by RECV_B (msg_buffers.c). */
static zb_status_t cpu_stage_open(pl_rank_t *R, pl_stage_t *ls, bool prev_here, bool next_here,
                                  zb_err_t *err)
{
    pl_t *pl = R->pl;
    pl_cpu_rank_t *C = pl_cpu_rank(R);
    const zb_rank_program_t *prog = &pl->plan.sched->rank[R->rank];
    int stage = ls->stage;
    zb_status_t st = pl_stash_pool_init(&ls->pool, pl, prog, &ls->span, stage, err);
    if (st != ZB_OK)
        return st;
    if (ls->pool.bytes[ZB_GPT2_REGION_SCRATCH] > C->stash_scratch_bytes)
        C->stash_scratch_bytes = ls->pool.bytes[ZB_GPT2_REGION_SCRATCH];
    if (!ls->span.embed &&
        pl_msgbuf_init(&ls->x_in, prog, stage, PL_BUF_X_IN, prev_here, pl->M, pl->NC) != ZB_OK)
        return oom(err, R->rank);
    if (!ls->span.head &&
        pl_msgbuf_init(&ls->dx_out, prog, stage, PL_BUF_DX_OUT, next_here, pl->M, pl->NC) != ZB_OK)
        return oom(err, R->rank);
    if (!ls->span.head && !next_here &&
        pl_msgbuf_init(&ls->own_x_out, prog, stage, PL_BUF_X_OUT, false, pl->M, pl->NC) != ZB_OK)
        return oom(err, R->rank);
    if (!ls->span.embed && !prev_here &&
        pl_msgbuf_init(&ls->own_dx_in, prog, stage, PL_BUF_DX_IN, false, pl->M, pl->NC) != ZB_OK)
        return oom(err, R->rank);
    return ZB_OK;
}

/* After the stages: one scratch for all their stashes, and the free memory that holds the
 * optimistic step's backup (optimistic.c). */
static zb_status_t cpu_open(pl_rank_t *R, zb_err_t *err)
{
    pl_cpu_rank_t *C = pl_cpu_rank(R);
    if (C->stash_scratch_bytes > 0 &&
        posix_memalign(&C->stash_scratch, 64, C->stash_scratch_bytes) != 0)
        return oom(err, R->rank);
    for (int i = 0; i < R->n_local; i++)
        R->st[i].pool.scratch = C->stash_scratch;
    pl_spare_collect(R);
    return ZB_OK;
}

static void cpu_close(pl_rank_t *R)
{
    pl_cpu_rank_t *C = pl_cpu_rank(R);
    if (!C)
        return;
    pl_wte_share_release(R);
    for (int i = 0; R->st && i < R->n_local; i++) {
        pl_stage_t *ls = &R->st[i];
        pl_stash_pool_free(&ls->pool);
        pl_msgbuf_free(&ls->x_in), pl_msgbuf_free(&ls->dx_out);
        pl_msgbuf_free(&ls->own_x_out), pl_msgbuf_free(&ls->own_dx_in);
    }
    free(C->stash_scratch);
    free(C);
    R->devst = NULL;
}

/* The cost model's stash bytes: what the rank's stash keeps for pl->keep. */
static void cpu_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                             size_t *after_b)
{
    zb_gpt2_stage_mem_keep(&pl->mcfg, sp, pl->mbB, pl->T, pl->keep, after_f, after_b);
}

/* From the rank's allocations. A shared WTE is counted on the embedding rank; the head's
 * accumulator is then its gradient's WTE part. */
static void cpu_memory(const pl_rank_t *R, zb_rank_mem_t *m)
{
    const pl_t *pl = R->pl;
    const double F = sizeof(float);
    double shared = R->wte_shared && R->has_head ? (double)R->params.sizes[ZB_WTE] : 0;
    bool own_acc = R->grads.wte_head && R->grads.wte_head != R->grads.g.t[ZB_WTE];
    m->params = ((double)R->params.count - shared) * F;
    m->grads = ((double)R->grads.g.count + (own_acc ? (double)R->grads.g.sizes[ZB_WTE] : 0)) * F;
    m->optimizer = ((double)R->opt.m.count + (double)R->opt.v.count - 2 * shared) * F;
    m->backup = 0; /* in the stash and message memory (optimistic.c) */
    double buf = (double)pl->NC * F;
    for (int i = 0; i < R->n_local; i++) {
        const pl_stage_t *ls = &R->st[i];
        m->messages += buf * (ls->x_in.n + ls->dx_out.n + ls->own_x_out.n + ls->own_dx_in.n);
        if (ls->r_out)
            m->messages += (double)pl->NC * F;
        m->stash_alloc += (double)pl_stash_pool_bytes(&ls->pool);
    }
    m->stash_alloc += (double)pl_cpu_rank(R)->stash_scratch_bytes;
    if (R->wte_chunk)
        m->messages += (double)pl_wte_chunk(R->params.sizes[ZB_WTE]) * F;
    m->activations = (double)R->live_peak;
    m->workspace = (double)zb_bf16_weight_cache_bytes(R->bf16_weights);
}

static void track_memory(pl_rank_t *R)
{
    size_t live = 0;
    for (int i = 0; i < R->n_local; i++)
        live += pl_stash_pool_live(&R->st[i].pool);
    if (live > R->live_peak)
        R->live_peak = live;
}

static zb_status_t do_b(pl_rank_t *R, pl_stage_t *ls, int m, zb_gpt2_stash_t *sh, zb_err_t *err)
{
    pl_t *pl = R->pl;
    const float *dx_out = ls->span.head ? NULL : pl_msgbuf_at(&ls->dx_out, m, pl->NC);
    float *dx_in = ls->span.embed ? NULL : pl_msgbuf_at(ls->dx_in, m, pl->NC);
    return zb_gpt2_backward_input(&R->params, &ls->span, sh, dx_out, pl->grad_scale, dx_in, err);
}

static zb_status_t do_w(pl_rank_t *R, pl_stage_t *ls, int m, zb_gpt2_stash_t *sh, zb_err_t *err)
{
    (void)m;
    return zb_gpt2_backward_weight(&R->params, &ls->span, sh, &R->grads, err);
}

/* F of microbatch m (its tokens at `tok`) into stash sh; x_out = where the output goes (not the
 * head), *loss = the head's loss. */
static zb_status_t forward(pl_rank_t *R, pl_stage_t *ls, int m, size_t tok, zb_gpt2_stash_t *sh,
                           float *x_out, float *loss, zb_err_t *err)
{
    pl_t *pl = R->pl;
    return zb_gpt2_forward(&R->params, &ls->span, sh, ls->span.embed ? R->in->inputs + tok : NULL,
                           ls->span.embed ? NULL : pl_msgbuf_at(&ls->x_in, m, pl->NC),
                           ls->span.head ? R->in->targets + tok : NULL, ls->span.head ? NULL : x_out,
                           ls->span.head ? loss : NULL, err);
}

static zb_status_t cpu_compute(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, size_t tok,
                               bool eval, zb_err_t *err)
{
    pl_t *pl = R->pl;
    int m = a->mb;
    if (eval) {
        /* between steps every slot of the pool is free: the first ones serve each F in turn */
        zb_gpt2_stash_t *sh = pl_stash_pool_eval(&ls->pool);
        zb_status_t st = forward(R, ls, m, tok, sh, ls->span.head ? NULL
                                                                  : pl_msgbuf_at(ls->x_out, m, pl->NC),
                                 &R->mb_loss[m], err);
        zb_gpt2_stash_reset(sh); /* nothing kept for a backward */
        return st;
    }
    zb_gpt2_stash_t *sh = pl_stash_pool_begin(&ls->pool, a, err);
    if (!sh)
        return ZB_ESCHEDULE;
    zb_status_t st;
    float recomputed_loss;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F:
        st = forward(R, ls, m, tok, sh, ls->span.head ? NULL : pl_msgbuf_at(ls->x_out, m, pl->NC),
                     &R->mb_loss[m], err);
        break;
    case ZB_ACT_R: /* the same forward again: the same inputs and parameters give the same bits */
        st = forward(R, ls, m, tok, sh, ls->r_out, &recomputed_loss, err);
        break;
    case ZB_ACT_B: st = do_b(R, ls, m, sh, err); break;
    case ZB_ACT_W: st = do_w(R, ls, m, sh, err); break;
    case ZB_ACT_BW:
        st = do_b(R, ls, m, sh, err);
        if (st == ZB_OK)
            st = do_w(R, ls, m, sh, err);
        break;
    default: st = zb_err_set(err, ZB_EINVAL, "not a compute action"); break;
    }
    if (st == ZB_OK) /* a non-saving F keeps only its input (x_in or the batch) for its R */
        pl_stash_pool_end(&ls->pool, a);
    track_memory(R);
    return st;
}

static zb_status_t cpu_message(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, void **host,
                               zb_err_t *err)
{
    (void)err;
    const pl_msgbuf_t *b = a->type == ZB_ACT_SEND_F   ? ls->x_out
                           : a->type == ZB_ACT_SEND_B ? ls->dx_in
                           : a->type == ZB_ACT_RECV_F ? &ls->x_in
                                                      : &ls->dx_out;
    *host = b ? pl_msgbuf_at(b, a->mb, R->pl->NC) : NULL;
    return ZB_OK;
}

static zb_status_t cpu_step_begin(pl_rank_t *R, bool training, zb_err_t *err)
{
    (void)err;
    if (!training)
        return ZB_OK;
    if (R->touch_opt) { /* see zb_adamw_state_touch */
        if (R->wte_shared && R->has_head) { /* WTE (last) is the embedding rank's to write */
            size_t n = R->opt.m.count - R->opt.m.sizes[ZB_WTE];
            memset(R->opt.m.data, 0, n * sizeof(float));
            memset(R->opt.v.data, 0, n * sizeof(float));
        } else {
            zb_adamw_state_touch(&R->opt);
        }
        R->touch_opt = false;
    }
    zb_gpt2_grads_zero(&R->grads);
    for (int i = 0; i < R->n_local; i++)
        pl_stash_pool_reset(&R->st[i].pool);
    return ZB_OK;
}

static zb_status_t cpu_unit_sumsq(pl_rank_t *R, int unit, double *out, zb_err_t *err)
{
    (void)err;
    *out = zb_grad_unit_sumsq(&R->grads.g, unit);
    return ZB_OK;
}

static zb_status_t cpu_update(pl_rank_t *R, const double *sumsq, zb_err_t *err)
{
    (void)err;
    zb_step_stats_t *stats = &R->stats;
    pl_t *pl = R->pl;
    long adam_t = R->in->step - R->skipped + 1;
    zb_train_update(pl->cfg, &R->params, &R->grads.g, &R->opt, R->in->step, adam_t, sumsq,
                    pl->plan.n_units, R->units, R->n_owned, stats);
    if (!stats->skipped && R->has_head && !R->has_embed && !R->wte_shared) {
        const pl_range_t *wte = &R->upd[R->n_upd - 1];
        zb_adamw_update_range(&R->params, &R->grads.g, &R->opt, &pl->cfg->adamw, stats->lr, adam_t,
                              stats->clip_scale, wte->off, wte->count);
    }
    return ZB_OK;
}

static size_t cpu_optimistic_elems(const pl_rank_t *R) { return pl_optimistic_elems(R); }

static zb_status_t cpu_backup(pl_rank_t *R, size_t K, bool save, zb_err_t *err)
{
    (void)err;
    pl_backup_prefix(R, K, save);
    return ZB_OK;
}

static zb_status_t cpu_step_elems(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t,
                                  zb_err_t *err)
{
    (void)err;
    pl_update_elems(R, from, to, lr, adam_t);
    return ZB_OK;
}

const pl_rank_dev_t pl_rank_cpu = {.name = "cpu",
                                   .run_open = NULL,
                                   .run_close = NULL,
                                   .stage_memory = cpu_stage_memory,
                                   .stage_static = NULL,
                                   .stage_stash = NULL,
                                   .shares_wte = true,
                                   .init = cpu_init,
                                   .stage_open = cpu_stage_open,
                                   .open = cpu_open,
                                   .close = cpu_close,
                                   .step_begin = cpu_step_begin,
                                   .compute = cpu_compute,
                                   .message = cpu_message,
                                   .grads = NULL,
                                   .state = NULL,
                                   .finish = NULL,
                                   .program_done = NULL,
                                   .losses = NULL,
                                   .time_action = NULL,
                                   .step_end = NULL,
                                   .memory = cpu_memory,
                                   .unit_sumsq = cpu_unit_sumsq,
                                   .update = cpu_update,
                                   .optimistic_elems = cpu_optimistic_elems,
                                   .backup = cpu_backup,
                                   .step_elems = cpu_step_elems};
