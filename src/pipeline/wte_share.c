/* zbpp — thread ranks of one process share the tied WTE instead of holding two copies.
 *
 * Under MPI the embedding rank and the head rank each hold WTE with its AdamW moments and apply
 * the same update (same inputs, same bits). Thread ranks of one process (one replica) share one
 * copy instead:
 *  - the parameters and both moments of the two ranks are one block each,
 *    [head rank's other tensors | WTE | embedding rank's other tensors]: the embedding rank's
 *    buffer starts at WTE (its usual layout), the head rank's buffer ends with it, so each
 *    sees WTE inside its own buffer at its own offset (unit ranges, checkpoint shards and
 *    resume work unchanged, and the shards equal MPI's);
 *  - only the embedding rank (unit 0's owner) updates, backs up and restores WTE; the head rank
 *    skips that range (R->wte_shared);
 *  - the head rank's gradient buffer has the same WTE-last layout, and its WTE part is the head
 *    accumulator itself (wte_head): no second WTE-sized gradient;
 *  - after both ranks' last W they meet (a one-float exchange) and the embedding rank folds the
 *    head's accumulator into its gradient with zb_gpt2_fold_tied: embedding + head, as always.
 * Reads of WTE by the head's F/B happen inside a step, its update at the end of the embedding
 * rank's step; steps are separated by the join of the rank threads, so they never overlap. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/rank_cpu_state.h"
#include "pipeline/rank_device.h"
#include "pipeline/wte_share.h"

bool pl_wte_shared(const pl_t *pl, int embed_rank, int head_rank)
{
    return pl->dev->shares_wte && !pl->opts->transport && pl->N <= 1 && embed_rank != head_rank;
}

/* Lay p's tensors over mem in llm.c order, WTE last when wte_last, copying what p held (except
 * WTE when skip_wte); the old allocation is freed. */
static void rebase(zb_gpt2_params_t *p, float *mem, bool wte_last, bool skip_wte)
{
    float *t[ZB_GPT2_NUM_TENSORS];
    float *ptr = mem;
    if (!wte_last) {
        t[ZB_WTE] = ptr;
        ptr += p->sizes[ZB_WTE];
    }
    for (int k = 0; k < ZB_GPT2_NUM_TENSORS; k++) {
        if (k == ZB_WTE)
            continue;
        t[k] = ptr;
        ptr += p->sizes[k];
    }
    if (wte_last)
        t[ZB_WTE] = ptr;
    for (int k = 0; k < ZB_GPT2_NUM_TENSORS; k++) {
        if (p->sizes[k] && !(skip_wte && k == ZB_WTE))
            memcpy(t[k], p->t[k], p->sizes[k] * sizeof(float));
        p->t[k] = p->sizes[k] ? t[k] : NULL;
    }
    free(p->data);
    p->data = mem;
}

zb_status_t pl_wte_share_embed(pl_t *pl, pl_rank_t *R, size_t head_count, zb_err_t *err)
{
    size_t W = R->params.sizes[ZB_WTE], rest = head_count - W;
    zb_gpt2_params_t *bufs[3] = {&R->params, &R->opt.m, &R->opt.v};
    for (int k = 0; k < 3; k++) {
        float *joint = calloc(rest + bufs[k]->count, sizeof(float));
        if (!joint)
            return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for the shared WTE", R->rank);
        rebase(bufs[k], joint + rest, false, false);
        pl_cpu_rank(R)->wte_joint[k] = joint;
    }
    pl_cpu_rank(R)->wte_head_rest = rest;
    R->wte_shared = true;
    (void)pl;
    return ZB_OK;
}

zb_status_t pl_wte_share_head(pl_t *pl, pl_rank_t *R, zb_err_t *err)
{
    const pl_rank_t *E = &pl->ranks[R->replica * pl->P + pl->plan.embed_rank];
    const pl_cpu_rank_t *EC = pl_cpu_rank(E);
    size_t W = R->params.sizes[ZB_WTE];
    if (!E->wte_shared || EC->wte_head_rest + W != R->params.count)
        return zb_err_set(err, ZB_EINVAL, "rank %d: the embedding rank holds no shared WTE for it",
                          R->rank);
    zb_gpt2_params_t *bufs[3] = {&R->params, &R->opt.m, &R->opt.v};
    for (int k = 0; k < 3; k++) /* WTE is already there: the embedding rank's */
        rebase(bufs[k], EC->wte_joint[k], true, true);
    float *g = calloc(R->grads.g.count, sizeof(float));
    if (!g)
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for its gradients", R->rank);
    rebase(&R->grads.g, g, true, true);
    free(R->grads.wte_head);
    R->grads.wte_head = R->grads.g.t[ZB_WTE]; /* the head's part is all it accumulates there */
    R->wte_shared = true;
    return ZB_OK;
}

void pl_wte_share_release(pl_rank_t *R)
{
    if (!R->wte_shared)
        return;
    /* the blocks belong to the embedding rank's wte_joint; the head's accumulator is its
     * gradient buffer */
    R->params.data = R->opt.m.data = R->opt.v.data = NULL;
    if (R->grads.wte_head && R->grads.wte_head == R->grads.g.t[ZB_WTE])
        R->grads.wte_head = NULL;
    for (int k = 0; k < 3; k++)
        free(pl_cpu_rank(R)->wte_joint[k]);
}

void pl_wte_fold_shared(pl_rank_t *R)
{
    const pl_rank_t *H = &R->pl->ranks[R->replica * R->pl->P + R->pl->plan.head_rank];
    zb_gpt2_grads_t view = {.g = R->grads.g, .wte_head = H->grads.wte_head};
    zb_gpt2_fold_tied(&view); /* embedding + head, like every configuration */
}
