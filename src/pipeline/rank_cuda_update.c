/* zbpp — the optimizer side of a pipeline rank on a GPU (pl_rank_cuda's hooks, rank_device.h):
 * the gradient norm summed on the device (one host wait per stage), AdamW in one launch per
 * stage, and post-validation's backup of params and moments in a plain device buffer per stage
 * (zb_cuda_state_backup, queued) with the whole update stepped optimistically. */
#include <stdlib.h>

#include "pipeline/rank_cuda_state.h"
#include "pipeline/rank_cuda_update.h"
#include "zbpp/cuda.h"
#include "zbpp/train.h"

/* The local stage holding norm unit u in full (0: the embedding, L+1: the head), -1: none. */
static int unit_stage(const pl_rank_t *R, int u)
{
    const pl_t *pl = R->pl;
    int S = pl->plan.S, L = pl->mcfg.layers;
    int s = u == 0 ? 0 : u == L + 1 ? S - 1 : zb_partition_stage_of(pl->plan.first, S, u - 1);
    return R->local_of_stage[s];
}

/* The units this rank owns that local stage i holds, into units[]; returns how many. */
static int owned_units_of(const pl_rank_t *R, int i, int *units)
{
    int n = 0;
    for (int k = 0; k < R->n_owned; k++)
        if (unit_stage(R, R->units[k]) == i)
            units[n++] = R->units[k];
    return n;
}

zb_status_t pl_cu_unit_sumsq(pl_rank_t *R, int unit, double *out, zb_err_t *err)
{
    int i = unit_stage(R, unit);
    if (i < 0)
        return zb_err_set(err, ZB_EINVAL, "rank %d owns unit %d but holds no stage of it", R->rank,
                          unit);
    return zb_cuda_grad_unit_sumsq(CU(R)->st[i].stage, unit, out, err);
}

bool pl_cu_on_tail(const pl_rank_t *R)
{
    const pl_plan_t *plan = &R->pl->plan;
    return plan->tail && plan->tail[R->rank];
}

/* Every owned unit's squared norm, one device call (and one host wait) per local stage; on the
 * whole GPU when the rank ends last (the norm is a fixed grid of blocks: the same bits). */
zb_status_t pl_cu_units_sumsq(pl_rank_t *R, double *vec, zb_err_t *err)
{
    const bool wide = pl_cu_on_tail(R);
    int *units = malloc((size_t)(R->n_owned + 1) * sizeof *units);
    double *sums = malloc((size_t)(R->n_owned + 1) * sizeof *sums);
    zb_status_t st = units && sums ? ZB_OK
                                   : zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for "
                                                                "the gradient norm", R->rank);
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        int n = owned_units_of(R, i, units);
        zb_cuda_stage_t *s = CU(R)->st[i].stage;
        if (n > 0 && wide)
            st = zb_cuda_stage_widen(s, true, err);
        if (st == ZB_OK)
            st = zb_cuda_grad_units_sumsq(s, units, n, sums, err);
        if (n > 0 && wide)
            st = pl_cu_narrow_back(s, st, err);
        for (int k = 0; k < n && st == ZB_OK; k++)
            vec[units[k]] = sums[k];
    }
    for (int k = 0; k < R->n_owned && st == ZB_OK; k++) /* every owned unit has its stage */
        if (unit_stage(R, R->units[k]) < 0)
            st = zb_err_set(err, ZB_EINVAL, "rank %d owns unit %d but holds no stage of it",
                            R->rank, R->units[k]);
    free(units), free(sums);
    return st;
}

zb_status_t pl_cu_narrow_back(zb_cuda_stage_t *s, zb_status_t st, zb_err_t *err)
{
    zb_err_t ignored;
    zb_status_t back = zb_cuda_stage_widen(s, false, st == ZB_OK ? err : &ignored);
    return st == ZB_OK ? back : st;
}

/* AdamW with (lr, t, clip scale) on every unit each stage updates: its owned units, and a head
 * stage with a WTE copy of its own (on another GPU than the embedding, or in another process)
 * steps it (unit 0) with the same folded gradient.
 * wide: on the whole GPU (zb_cuda_stage_widen), for an update after the norm barrier, when no
 * rank computes any more; the optimistic update before it stays in the partition. */
static zb_status_t step_units(pl_rank_t *R, float lr, long adam_t, float clip, bool wide,
                              zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    int *units = malloc((size_t)(R->n_owned + 1) * sizeof *units);
    if (!units)
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for the optimizer", R->rank);
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        int n = owned_units_of(R, i, units);
        if (R->st[i].span.head && !R->st[i].span.embed && !R->has_embed && !CU(R)->wte_owner)
            units[n++] = 0; /* its own WTE copy (else it reads the embedding stage's) */
        zb_cuda_stage_t *s = CU(R)->st[i].stage;
        if (n > 0 && wide)
            st = zb_cuda_stage_widen(s, true, err);
        if (n > 0 && st == ZB_OK)
            st = zb_cuda_adamw_update_units(s, &R->pl->cfg->adamw, lr, adam_t, clip, units, n,
                                            err);
        if (n > 0 && wide)
            st = pl_cu_narrow_back(s, st, err);
    }
    free(units);
    return st;
}

/* save: before the norm barrier, in the partition; restore (the rollback): after it, on the
 * whole GPU like the update that follows */
static zb_status_t backup_all(pl_rank_t *R, bool save, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        zb_cuda_stage_t *s = CU(R)->st[i].stage;
        if (!save)
            st = zb_cuda_stage_widen(s, true, err);
        if (st == ZB_OK)
            st = zb_cuda_state_backup(s, save, err);
        if (!save)
            st = pl_cu_narrow_back(s, st, err);
    }
    return st;
}

/* zb_train_update's rules (lr, global norm, skip, clip) with no host update; then the device
 * steps. */
zb_status_t pl_cu_update(pl_rank_t *R, const double *sumsq, zb_err_t *err)
{
    pl_t *pl = R->pl;
    long adam_t = R->in->step - R->skipped + 1;
    zb_train_update(pl->cfg, &R->params, &R->grads.g, &R->opt, R->in->step, adam_t, sumsq,
                    pl->plan.n_units, R->units, 0, &R->stats);
    if (R->stats.skipped)
        return ZB_OK;
    return step_units(R, R->stats.lr, adam_t, R->stats.clip_scale, true, err);
}

/* Post-validation on the GPU: the whole update is optimistic (a plain device backup), when the
 * backup fits. It is allocated when the rank opens (cuda_open), as the memory plan and
 * --mem-limit count it, so that the memory table's prediction is what the rank holds whether it
 * guesses or not; where the device has no room for it, the rank never guesses and updates after
 * the barrier, which gives the same bits, instead of failing the run. */
size_t pl_cu_optimistic_elems(const pl_rank_t *R)
{
    cu_rank_t *C = CU(R);
    for (int i = 0; i < R->n_local && !C->no_backup_room; i++) {
        zb_err_t e;
        if (zb_cuda_state_backup_reserve(C->st[i].stage, &e) != ZB_OK)
            C->no_backup_room = true;
    }
    return C->no_backup_room ? 0 : R->backup_elems;
}

zb_status_t pl_cu_backup(pl_rank_t *R, size_t K, bool save, zb_err_t *err)
{
    (void)K; /* always all of them */
    return backup_all(R, save, err);
}

/* The device steps whole units: only the whole range [0, all) or nothing. */
zb_status_t pl_cu_step_elems(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t,
                             zb_err_t *err)
{
    if (from >= to)
        return ZB_OK;
    if (from != 0 || to != R->backup_elems)
        return zb_err_set(err, ZB_EINVAL, "rank %d: a GPU steps all of its update or none",
                          R->rank);
    return step_units(R, lr, adam_t, 1.0f, false, err);
}
