/* zbpp — a pipeline rank on the CPU (rank_device.h): the stage API of zbpp/gpt2.h on the rank's
 * host state, stashes pooled by lifetime (stash_pool.c), messages straight from and into its
 * message buffers, the optimizer on its owned units with the post-validation backup in its free
 * stash and message memory (optimistic.c). */
#include <math.h>
#include <string.h>

#include "pipeline/rank_device.h"

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

static zb_status_t cpu_message(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, float **host,
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

static zb_status_t cpu_open(pl_rank_t *R, zb_err_t *err)
{
    (void)R, (void)err;
    return ZB_OK;
}

static void cpu_close(pl_rank_t *R) { (void)R; }

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
                                   .open = cpu_open,
                                   .close = cpu_close,
                                   .step_begin = cpu_step_begin,
                                   .compute = cpu_compute,
                                   .message = cpu_message,
                                   .grads = NULL,
                                   .state = NULL,
                                   .finish = NULL,
                                   .time_action = NULL,
                                   .step_end = NULL,
                                   .unit_sumsq = cpu_unit_sumsq,
                                   .update = cpu_update,
                                   .optimistic_elems = cpu_optimistic_elems,
                                   .backup = cpu_backup,
                                   .step_elems = cpu_step_elems};
