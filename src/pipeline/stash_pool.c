/* zbpp — a stage's activation stashes pooled by lifetime.
 *
 * A (stage, microbatch)'s stash has three lifetime parts (zb_gpt2_region_t): FW (kept from F
 * until W), FB (kept from F until B only) and BW (written by B, read by W), plus per-call
 * scratch. One full stash per microbatch in flight (F..W) would give every microbatch between
 * B and W room for FB it no longer needs, and every microbatch between F and B room for BW it
 * does not need yet, and scratch to each. So each part has its own pool, with as many slots as
 * the rank's program ever holds at once (pl_stash_plan), and one scratch serves all the rank's
 * stages (a rank runs one action at a time). A microbatch's stash is a split stash
 * (zb_gpt2_stash_new_split) bound to its slots before each action.
 *   F / R : takes an FW and an FB slot       (a non-saving F gives both back after it)
 *   B     : takes a BW slot, gives FB back after it
 *   W     : gives FW and BW back after it
 *   BW    : takes a BW slot, gives all three back after it */
#include <stdlib.h>
#include <string.h>

#include "pipeline/stash_pool.h"

enum { FW = 0, FB = 1, BW = 2 };

void pl_stash_plan(const zb_rank_program_t *prog, int stage, int n[3])
{
    int now[3] = {0, 0, 0};
    n[FW] = n[FB] = n[BW] = 0;
    for (int i = 0; i < prog->len; i++) {
        const zb_action_t *a = &prog->actions[i];
        if (a->stage != stage)
            continue;
        int take[3] = {0, 0, 0}, give[3] = {0, 0, 0};
        switch ((zb_action_type_t)a->type) {
        case ZB_ACT_F:
        case ZB_ACT_R:
            take[FW] = take[FB] = 1;
            if (a->type == ZB_ACT_F && (a->flags & ZB_ACT_NOSAVE))
                give[FW] = give[FB] = 1;
            break;
        case ZB_ACT_B: take[BW] = 1, give[FB] = 1; break;
        case ZB_ACT_W: give[FW] = give[BW] = 1; break;
        case ZB_ACT_BW: take[BW] = 1, give[FW] = give[FB] = give[BW] = 1; break;
        default: break;
        }
        for (int k = 0; k < 3; k++) {
            now[k] += take[k];
            if (now[k] > n[k])
                n[k] = now[k];
            now[k] -= give[k];
        }
    }
    /* validation runs its forwards through FW and FB slot 0 */
    if (n[FW] < 1)
        n[FW] = 1;
    if (n[FB] < 1)
        n[FB] = 1;
}

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
    pl_stash_plan(prog, stage, n);
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
    pl_stash_plan(prog, stage, p->n);
    p->view = calloc((size_t)p->M, sizeof *p->view);
    if (!p->view)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stash pool");
    for (int k = 0; k < 3; k++) {
        p->owner[k] = malloc((size_t)p->n[k] * sizeof(int) + 1);
        p->slot[k] = malloc((size_t)p->M * sizeof(int));
        if (!p->owner[k] || !p->slot[k] ||
            (p->n[k] > 0 && p->bytes[k] > 0 &&
             posix_memalign((void **)&p->mem[k], 64, (size_t)p->n[k] * p->bytes[k]) != 0))
            return zb_err_set(err, ZB_ENOMEM, "cannot allocate the activation stash pool (%.1f MB)",
                              (double)p->n[k] * (double)p->bytes[k] / 1e6);
    }
    for (int m = 0; m < p->M; m++) {
        zb_status_t st = zb_gpt2_stash_new_split(&pl->mcfg, span, pl->mbB, pl->T, pl->keep,
                                                 &p->view[m], err);
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
        free(p->mem[k]), free(p->owner[k]), free(p->slot[k]);
    memset(p, 0, sizeof *p);
}

void pl_stash_pool_reset(pl_stash_pool_t *p)
{
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < p->n[k]; i++)
            p->owner[k][i] = -1;
        for (int m = 0; m < p->M; m++)
            p->slot[k][m] = -1;
    }
    for (int m = 0; m < p->M; m++)
        zb_gpt2_stash_reset(p->view[m]);
}

static void *slot_mem(const pl_stash_pool_t *p, int k, int mb)
{
    int s = p->slot[k][mb];
    return s >= 0 && p->mem[k] ? p->mem[k] + (size_t)s * p->bytes[k] : NULL;
}

static bool take(pl_stash_pool_t *p, int k, int mb)
{
    for (int i = 0; i < p->n[k]; i++)
        if (p->owner[k][i] < 0) {
            p->owner[k][i] = mb;
            p->slot[k][mb] = i;
            return true;
        }
    return false;
}

static void give(pl_stash_pool_t *p, int k, int mb)
{
    if (p->slot[k][mb] >= 0)
        p->owner[k][p->slot[k][mb]] = -1;
    p->slot[k][mb] = -1;
}

static zb_gpt2_stash_t *bind(pl_stash_pool_t *p, int mb)
{
    void *base[ZB_GPT2_NUM_REGIONS] = {slot_mem(p, FW, mb), slot_mem(p, FB, mb),
                                       slot_mem(p, BW, mb), p->scratch};
    zb_gpt2_stash_bind(p->view[mb], base);
    return p->view[mb];
}

zb_gpt2_stash_t *pl_stash_pool_begin(pl_stash_pool_t *p, const zb_action_t *a, zb_err_t *err)
{
    int mb = a->mb;
    bool held = p->slot[FW][mb] >= 0;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F:
    case ZB_ACT_R:
        if (held) {
            zb_err_set(err, ZB_ESCHEDULE, "F of microbatch %d repeated before its W", mb);
            return NULL;
        }
        if (!take(p, FW, mb) || !take(p, FB, mb)) {
            give(p, FW, mb);
            zb_err_set(err, ZB_ESCHEDULE, "no free activation stash (%d in flight)", p->n[FW]);
            return NULL;
        }
        break;
    case ZB_ACT_B:
    case ZB_ACT_BW:
    case ZB_ACT_W:
        if (!held || (a->type != ZB_ACT_W && p->slot[FB][mb] < 0)) {
            zb_err_set(err, ZB_ESCHEDULE, "microbatch %d has no forward state (B/W before F?)",
                       mb);
            return NULL;
        }
        if (a->type == ZB_ACT_W ? p->slot[BW][mb] < 0 : !take(p, BW, mb)) {
            zb_err_set(err, ZB_ESCHEDULE,
                       a->type == ZB_ACT_W ? "W of microbatch %d before its B"
                                           : "no free backward stash for microbatch %d",
                       mb);
            return NULL;
        }
        break;
    default: zb_err_set(err, ZB_EINVAL, "not a compute action"); return NULL;
    }
    return bind(p, mb);
}

void pl_stash_pool_end(pl_stash_pool_t *p, const zb_action_t *a)
{
    int mb = a->mb;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F:
        if (a->flags & ZB_ACT_NOSAVE) { /* its input stays in x_in; the R rebuilds the rest */
            zb_gpt2_stash_reset(p->view[mb]);
            give(p, FW, mb), give(p, FB, mb);
        }
        break;
    case ZB_ACT_B: give(p, FB, mb); break;
    case ZB_ACT_W:
    case ZB_ACT_BW: give(p, FW, mb), give(p, FB, mb), give(p, BW, mb); break;
    default: break;
    }
}

zb_gpt2_stash_t *pl_stash_pool_eval(pl_stash_pool_t *p)
{
    void *base[ZB_GPT2_NUM_REGIONS] = {p->mem[FW], p->mem[FB], NULL, p->scratch};
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
        sum += (size_t)p->n[k] * p->bytes[k];
    return sum;
}

bool pl_stage_recomputes(const zb_rank_program_t *prog, int stage)
{
    for (int i = 0; i < prog->len; i++)
        if (prog->actions[i].type == ZB_ACT_R && prog->actions[i].stage == stage)
            return true;
    return false;
}
