/* zbpp — a GPU stage's stashes pooled by lifetime: the host pool's slots (stash_slots.c) with
 * their bytes in device memory. Each region has one device block of slots; a microbatch's
 * stash is a split CUDA stash (zb_cuda_stash_view_new) laid over its slots before each action.
 * A slot given back is taken by the next action that needs one in program order, and all the
 * rank's actions run on one stream in that order, so a slot's next writer follows its last
 * reader on the device as on the host. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/rank_cuda_stash.h"

zb_status_t pl_cu_stash_pool_init(pl_cu_stash_pool_t *p, zb_cuda_stage_t *s,
                                  const zb_rank_program_t *prog, int stage, int M, zb_err_t *err)
{
    memset(p, 0, sizeof *p);
    p->M = M;
    zb_cuda_stash_regions(s, p->bytes);
    zb_status_t st = pl_stash_slots_init(&p->slots, prog, stage, M, err);
    if (st == ZB_OK && !(p->view = calloc((size_t)M, sizeof *p->view)))
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stashes");
    for (int k = 0; k < 3 && st == ZB_OK; k++) {
        size_t bytes = (size_t)p->slots.n[k] * p->bytes[k];
        if (bytes > 0)
            st = zb_cuda_buffer_alloc(s, bytes / sizeof(float), &p->mem[k], err);
    }
    for (int m = 0; m < M && st == ZB_OK; m++)
        st = zb_cuda_stash_view_new(s, &p->view[m], err);
    return st;
}

void pl_cu_stash_pool_free(pl_cu_stash_pool_t *p)
{
    for (int m = 0; p->view && m < p->M; m++)
        zb_cuda_stash_free(p->view[m]);
    free(p->view);
    for (int k = 0; k < 3; k++)
        zb_cuda_buffer_free(p->mem[k]);
    pl_stash_slots_free(&p->slots);
    memset(p, 0, sizeof *p);
}

void pl_cu_stash_pool_reset(pl_cu_stash_pool_t *p)
{
    pl_stash_slots_reset(&p->slots);
    for (int m = 0; p->view && m < p->M; m++)
        zb_cuda_stash_reset(p->view[m]);
}

static void *slot_mem(const pl_cu_stash_pool_t *p, int k, int mb)
{
    int s = pl_stash_slots_at(&p->slots, k, mb);
    return s >= 0 && p->mem[k] ? (char *)p->mem[k] + (size_t)s * p->bytes[k] : NULL;
}

zb_cuda_stash_t *pl_cu_stash_pool_begin(pl_cu_stash_pool_t *p, const zb_action_t *a,
                                        zb_err_t *err)
{
    if (!pl_stash_slots_begin(&p->slots, a, err))
        return NULL;
    int mb = a->mb;
    void *region[3] = {slot_mem(p, PL_FW, mb), slot_mem(p, PL_FB, mb), slot_mem(p, PL_BW, mb)};
    zb_cuda_stash_bind(p->view[mb], region);
    return p->view[mb];
}

void pl_cu_stash_pool_end(pl_cu_stash_pool_t *p, const zb_action_t *a)
{
    if (a->type == ZB_ACT_F && (a->flags & ZB_ACT_NOSAVE)) /* its input stays in x_in; the R
                                                           * rebuilds the rest */
        zb_cuda_stash_reset(p->view[a->mb]);
    pl_stash_slots_end(&p->slots, a);
}

zb_cuda_stash_t *pl_cu_stash_pool_eval(pl_cu_stash_pool_t *p)
{
    void *region[3] = {p->mem[PL_FW], p->mem[PL_FB], NULL};
    zb_cuda_stash_reset(p->view[0]);
    zb_cuda_stash_bind(p->view[0], region);
    return p->view[0];
}

size_t pl_cu_stash_pool_live(const pl_cu_stash_pool_t *p)
{
    size_t live = 0;
    for (int m = 0; p->view && m < p->M; m++)
        live += zb_cuda_stash_live_bytes(p->view[m]);
    return live;
}

size_t pl_cu_stash_pool_bytes(const pl_cu_stash_pool_t *p)
{
    size_t sum = 0;
    for (int k = 0; k < 3; k++)
        sum += (size_t)p->slots.n[k] * p->bytes[k];
    return sum;
}
