/* zbpp — the post-validation step's backup, kept in memory the rank already holds.
 *
 * An optimistic step (docs/runtime.md, --optimizer-sync post-validation) updates parameters
 * and moments before the global norm is known, and must be able to undo that. A backup of
 * every range the rank updates (params, m, v: three times the rank's parameters) would make
 * that much memory resident on the first optimistic step. But when the optimizer runs, the
 * rank's activation stashes and message buffers are all free (every W has run, every message
 * has left), so the backup lives there: the rank steps optimistically only over the first K
 * elements of its update ranges, K = a third of that spare memory, then waits for the global
 * norm; if the guess was right it updates the rest with the same figures (AdamW is elementwise,
 * so the two parts give exactly the bits of one update), if not it restores the K elements and
 * redoes everything with the global figures, as before. */
#include <string.h>

#include "pipeline/optimistic.h"
#include "pipeline/rank_cpu_state.h"

static void add_block(pl_cpu_rank_t *C, void *p, size_t bytes)
{
    if (!p || bytes < sizeof(float) || C->n_spare >= PL_MAX_SPARE)
        return;
    C->spare[C->n_spare].p = p;
    C->spare[C->n_spare].n = bytes / sizeof(float);
    C->spare_floats += C->spare[C->n_spare++].n;
}

void pl_spare_collect(pl_rank_t *R)
{
    pl_cpu_rank_t *C = pl_cpu_rank(R);
    const size_t NC = R->pl->NC * sizeof(float);
    C->n_spare = 0;
    C->spare_floats = 0;
    for (int i = 0; i < R->n_local; i++) {
        pl_stage_t *ls = &R->st[i];
        for (int k = 0; k < 3; k++)
            add_block(C, ls->pool.mem[k], (size_t)ls->pool.slots.n[k] * ls->pool.bytes[k]);
        pl_msgbuf_t *bufs[4] = {&ls->x_in, &ls->dx_out, &ls->own_x_out, &ls->own_dx_in};
        for (int b = 0; b < 4; b++)
            add_block(C, bufs[b]->mem, (size_t)bufs[b]->n * NC);
        add_block(C, ls->r_out, NC);
    }
    add_block(C, C->stash_scratch, C->stash_scratch_bytes);
}

size_t pl_optimistic_elems(const pl_rank_t *R)
{
    size_t k = pl_cpu_rank(R)->spare_floats / 3;
    return k < R->backup_elems ? k : R->backup_elems;
}

/* Copy n floats between p and the spare blocks at stream position *pos. */
static void stream(pl_cpu_rank_t *C, float *p, size_t n, size_t *pos, bool save)
{
    size_t at = *pos;
    for (int b = 0; b < C->n_spare && n > 0; b++) {
        if (at >= C->spare[b].n) {
            at -= C->spare[b].n;
            continue;
        }
        size_t take = C->spare[b].n - at < n ? C->spare[b].n - at : n;
        float *s = C->spare[b].p + at;
        if (save)
            memcpy(s, p, take * sizeof(float));
        else
            memcpy(p, s, take * sizeof(float));
        p += take, n -= take, *pos += take, at = 0;
    }
}

/* The update ranges the rank backs up (not the head's shared WTE: the embedding rank's). */
static int own_ranges(const pl_rank_t *R)
{
    return R->wte_shared && R->has_head ? R->n_upd - 1 : R->n_upd;
}

void pl_backup_prefix(pl_rank_t *R, size_t K, bool save)
{
    float *bufs[3] = {R->params.data, R->opt.m.data, R->opt.v.data};
    size_t pos = 0;
    for (int k = 0; k < 3; k++) {
        size_t left = K;
        for (int i = 0; i < own_ranges(R) && left > 0; i++) {
            size_t n = R->upd[i].count < left ? R->upd[i].count : left;
            stream(pl_cpu_rank(R), bufs[k] + R->upd[i].off, n, &pos, save);
            left -= n;
        }
    }
}

void pl_update_elems(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t)
{
    size_t base = 0;
    for (int i = 0; i < own_ranges(R) && base < to; i++) {
        size_t lo = from > base ? from - base : 0, hi = to - base;
        if (hi > R->upd[i].count)
            hi = R->upd[i].count;
        if (lo < hi)
            zb_adamw_update_range(&R->params, &R->grads.g, &R->opt, &R->pl->cfg->adamw, lr,
                                  adam_t, 1.0f, R->upd[i].off + lo, hi - lo);
        base += R->upd[i].count;
    }
}
