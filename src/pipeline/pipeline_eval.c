/* zbpp — validation through the pipeline: a forward-only program on the same ranks and
 * transports as training. The program is the training program's F, SEND_F and RECV_F in their
 * order (any deadlock-free order of the whole program stays one with the backward taken out);
 * the head stage's F computes the loss; each F's stash is emptied right after it, so nothing is
 * kept for a backward. The loss of a batch is the mean of its microbatch losses, like a step's,
 * and the K batches are averaged in order: the same bits as zb_trainer_validate (--ranks 1). */
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_dp.h"
#include "pipeline/pipeline_eval.h"
#include "pipeline/pipeline_local.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_device.h"
#include "train/val.h"
#include "zbpp/util.h"

zb_status_t pl_eval_plan(pl_t *pl, zb_err_t *err)
{
    const zb_schedule_t *s = pl->plan.sched;
    zb_schedule_t *e = zb_schedule_new("forward-only", s->ranks, s->chunks, s->placement,
                                       s->microbatches);
    if (!e)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the validation program");
    zb_status_t st = ZB_OK;
    for (int r = 0; r < s->ranks && st == ZB_OK; r++)
        for (int i = 0; i < s->rank[r].len && st == ZB_OK; i++) {
            zb_action_t a = s->rank[r].actions[i];
            if (a.type != ZB_ACT_F && a.type != ZB_ACT_SEND_F && a.type != ZB_ACT_RECV_F)
                continue;
            a.flags = 0; /* nothing is kept, so nothing is recomputed */
            if ((st = zb_schedule_push(e, r, a)) != ZB_OK)
                zb_err_set(err, st, "out of memory for the validation program");
        }
    if (st != ZB_OK) {
        zb_schedule_free(e);
        return st;
    }
    zb_schedule_free(pl->eval_sched);
    pl->eval_sched = e;
    return ZB_OK;
}

static zb_status_t eval_compute(void *ctx, const zb_action_t *a, zb_err_t *err)
{
    pl_rank_t *R = ctx;
    pl_t *pl = R->pl;
    pl_stage_t *ls = pl_rank_stage(R, a->stage, err);
    if (!ls)
        return ZB_ESCHEDULE;
    int m = a->mb;
    if (a->type != ZB_ACT_F || m < 0 || m >= pl->M)
        return zb_err_set(err, ZB_ESCHEDULE, "validation runs only forwards (got %s of mb %d)",
                          zb_action_type_name((zb_action_type_t)a->type), m);
    return R->dev->compute(R, ls, a, pl_rank_tok(R, m), true, err);
}

static zb_status_t eval_send(void *ctx, const zb_action_t *a, const void **buf, size_t *bytes,
                             zb_err_t *err)
{
    pl_rank_t *R = ctx;
    if (a->type != ZB_ACT_SEND_F)
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d has nothing to send forward", a->stage);
    void *at = NULL;
    zb_status_t st = pl_rank_payload(R, a, false, &at, err);
    *buf = at;
    *bytes = R->msg_bytes;
    return st;
}

static zb_status_t eval_recv(void *ctx, const zb_action_t *a, void **buf, size_t *bytes,
                             zb_err_t *err)
{
    pl_rank_t *R = ctx;
    if (a->type != ZB_ACT_RECV_F)
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d receives nothing forward", a->stage);
    void *at = NULL;
    zb_status_t st = pl_rank_payload(R, a, false, &at, err);
    *buf = at;
    *bytes = R->msg_bytes;
    return st;
}

static size_t eval_recv_bytes(void *ctx, const zb_action_t *a)
{
    (void)a;
    return ((pl_rank_t *)ctx)->msg_bytes;
}

zb_status_t pl_eval_step(zb_transport_t *t, void *arg, zb_err_t *err)
{
    pl_rank_t *R = arg;
    pl_t *pl = R->pl;
    zb_workers_enter(R->workers);
    zb_transport_t *pipe = t, *dp = NULL;
    zb_status_t st = R->dev->step_begin(R, false, err);
    if (st == ZB_OK)
        st = pl_dp_views(t, R, &pipe, &dp, err);
    zb_exec_ops_t ops = {.ctx = R,
                         .compute = eval_compute,
                         .send_payload = eval_send,
                         .recv_payload = eval_recv,
                         .recv_bytes = eval_recv_bytes};
    zb_exec_opts_t eo = {.recv_lookahead = 4, .t0 = zb_now()};
    if (st == ZB_OK)
        st = zb_execute(pl->eval_sched, pipe, &ops, &eo, NULL, err);
    if (st == ZB_OK && R->dev->finish)
        st = R->dev->finish(R, err);
    double loss = 0;
    if (st == ZB_OK && R->has_head && R->dev->losses)
        st = R->dev->losses(R, err);
    if (st == ZB_OK && R->has_head) {
        loss = zb_train_mean_loss(R->mb_loss, pl->M);
        if (dp)
            st = pl_dp_mean_loss(dp, &loss, err);
    }
    if (st == ZB_OK) /* the head's loss to every rank: 0 + ... + loss + 0 is exact */
        st = zb_allreduce_sum(pipe, &loss, 1, err);
    if (st != ZB_OK) {
        if (st != ZB_EABORT)
            zb_transport_abort(t, err ? err->msg : zb_strerror(st));
        return st;
    }
    R->val_loss = (float)loss;
    return zb_flush(t, err);
}

zb_status_t pl_validate(pl_local_t *L, struct zb_val *val, float *loss, zb_err_t *err)
{
    pl_t *pl = L->pl;
    float *batch = malloc((size_t)val->steps * sizeof *batch);
    if (!batch)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the validation losses");
    zb_status_t st = ZB_OK;
    if (!pl->eval_sched)
        st = pl_eval_plan(pl, err);
    if (st == ZB_OK)
        st = zb_val_rewind(val, err);
    for (int k = 0; k < val->steps && st == ZB_OK; k++) {
        if ((st = zb_val_next(val, err)) != ZB_OK)
            break;
        pl_step_in_t in = {.inputs = val->inputs, .targets = val->targets};
        if ((st = pl_local_run(L, pl_eval_step, &in, err)) == ZB_OK)
            batch[k] = pl_local_reporter(L)->val_loss;
    }
    if (st == ZB_OK)
        *loss = zb_train_mean_loss(batch, val->steps);
    free(batch);
    return st;
}
