/* zbpp — a stage's activation stashes pooled by lifetime, in host memory.
 *
 * Each lifetime region (FW, FB, BW: stash_slots.c, which also decides who holds which slot)
 * has its own block of slots, and one scratch serves all the rank's stages (a rank runs one
 * action at a time). A microbatch's stash is a split stash (zb_gpt2_stash_new_split) bound to
 * its slots before each action. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/stash_pool.h"
#include "pipeline/stash_slots.h"

static size_t round64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

size_t pl_stash_stage_bytes(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                            size_t *scratch)
{
    zb_gpt2_span_t sp = zb_partition_span(pl->plan.first, pl->plan.S, stage);
    size_t bytes[ZB_GPT2_NUM_REGIONS];
    int n[3];
    zb_gpt2_stash_regions(&pl->mcfg, &sp, pl->mbB, pl->T, pl->keep, bytes);
    pl_stash_plan(prog, stage, pl->M, NULL, n); /* a CPU rank offloads nothing */
    if (scratch)
        *scratch = round64(bytes[ZB_GPT2_REGION_SCRATCH]);
    size_t sum = 0;
    for (int k = 0; k < 3; k++)
        sum += (size_t)n[k] * round64(bytes[k]);
    return sum;
}

zb_status_t pl_stash_pool_init(pl_stash_pool_t *p, const pl_t *pl,
                               const zb_rank_program_t *prog, const zb_gpt2_span_t *span,
                               int stage, zb_err_t *err)
{
    memset(p, 0, sizeof *p);
    p->M = pl->M;
    zb_gpt2_stash_regions(&pl->mcfg, span, pl->mbB, pl->T, pl->keep, p->bytes);
    for (int k = 0; k < ZB_GPT2_NUM_REGIONS; k++)
        p->bytes[k] = round64(p->bytes[k]);
    zb_status_t st = pl_stash_slots_init(&p->slots, prog, stage, p->M, NULL, err);
    if (st != ZB_OK)
        return st;
    p->view = calloc((size_t)p->M, sizeof *p->view);
    if (!p->view)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stash pool");
    for (int k = 0; k < 3; k++) {
        size_t bytes = (size_t)p->slots.n[k] * p->bytes[k];
        if (bytes > 0 && posix_memalign((void **)&p->mem[k], 64, bytes) != 0)
            return zb_err_set(err, ZB_ENOMEM, "cannot allocate the activation stash pool (%.1f MB)",
                              (double)bytes / 1e6);
    }
    for (int m = 0; m < p->M; m++) {
        st = zb_gpt2_stash_new_split(&pl->mcfg, span, pl->mbB, pl->T, pl->keep, &p->view[m],
                                     err);
        if (st != ZB_OK)
            return st;
    }
    pl_stash_pool_reset(p);
    return ZB_OK;
}

void pl_stash_pool_free(pl_stash_pool_t *p)
{
    for (int m = 0; p->view && m < p->M; m++)
        zb_gpt2_stash_free(p->view[m]);
    free(p->view);
    for (int k = 0; k < 3; k++)
        free(p->mem[k]);
    pl_stash_slots_free(&p->slots);
    memset(p, 0, sizeof *p);
}

void pl_stash_pool_reset(pl_stash_pool_t *p)
{
    pl_stash_slots_reset(&p->slots);
    for (int m = 0; m < p->M; m++)
        zb_gpt2_stash_reset(p->view[m]);
}

static void *slot_mem(const pl_stash_pool_t *p, int k, int mb)
{
    int s = pl_stash_slots_at(&p->slots, k, mb);
    return s >= 0 && p->mem[k] ? p->mem[k] + (size_t)s * p->bytes[k] : NULL;
}

zb_gpt2_stash_t *pl_stash_pool_begin(pl_stash_pool_t *p, const zb_action_t *a, zb_err_t *err)
{
    if (!pl_stash_slots_begin(&p->slots, a, err))
        return NULL;
    int mb = a->mb;
    void *base[ZB_GPT2_NUM_REGIONS] = {slot_mem(p, PL_FW, mb), slot_mem(p, PL_FB, mb),
                                       slot_mem(p, PL_BW, mb), p->scratch};
    zb_gpt2_stash_bind(p->view[mb], base);
    return p->view[mb];
}

void pl_stash_pool_end(pl_stash_pool_t *p, const zb_action_t *a)
{
    if (a->type == ZB_ACT_F && (a->flags & ZB_ACT_NOSAVE)) /* its input stays in x_in; the R
                                                           * rebuilds the rest */
        zb_gpt2_stash_reset(p->view[a->mb]);
    pl_stash_slots_end(&p->slots, a);
}

zb_gpt2_stash_t *pl_stash_pool_eval(pl_stash_pool_t *p)
{
    void *base[ZB_GPT2_NUM_REGIONS] = {p->mem[PL_FW], p->mem[PL_FB], NULL, p->scratch};
    zb_gpt2_stash_reset(p->view[0]);
    zb_gpt2_stash_bind(p->view[0], base);
    return p->view[0];
}

size_t pl_stash_pool_live(const pl_stash_pool_t *p)
{
    size_t live = 0;
    for (int m = 0; m < p->M; m++)
        live += zb_gpt2_stash_live_bytes(p->view[m]);
    return live;
}

size_t pl_stash_pool_bytes(const pl_stash_pool_t *p)
{
    size_t sum = 0;
    for (int k = 0; k < 3; k++)
        sum += (size_t)p->slots.n[k] * p->bytes[k];
    return sum;
}

bool pl_stage_recomputes(const zb_rank_program_t *prog, int stage)
{
    for (int i = 0; i < prog->len; i++)
        if (prog->actions[i].type == ZB_ACT_R && prog->actions[i].stage == stage)
            return true;
    return false;
}
