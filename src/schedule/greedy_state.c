/* The greedy list scheduler's state: allocation, and the set of ranks due now (T) with the
 * frozen waits set apart, so that finding the ranks to try costs O(log P) per placed action. */
#include "schedule/greedy_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_index.h"

bool zb_gs_init(greedy_t *g, const char *name, int P, int v, zb_placement_t pl, int M,
                const zb_costs_t *c, const zb_greedy_opts_t *o)
{
    memset(g, 0, sizeof *g);
    g->P = P;
    g->v = v;
    g->S = v * P;
    g->M = M;
    g->pl = pl;
    g->c = c;
    g->o = o;
    size_t SM = (size_t)g->S * M;
    g->stage_rank = malloc(sizeof(int) * g->S);
    g->stages = malloc(sizeof(int) * g->S);
    g->end_f = malloc(sizeof(double) * SM);
    g->end_b = malloc(sizeof(double) * SM);
    g->next_f = calloc(g->S, sizeof(int));
    g->next_b = calloc(g->S, sizeof(int));
    g->clock = calloc(P, sizeof(double));
    g->due = calloc(P, sizeof(double));
    g->mem = calloc(P, sizeof(double));
    g->need = calloc(P, sizeof(double));
    g->mbs = calloc((size_t)P * M, sizeof *g->mbs);
    g->fifo_head = calloc(P, sizeof(int));
    g->fifo_tail = calloc(P, sizeof(int));
    g->wfree = calloc(P, sizeof(double));
    g->wq = malloc(sizeof(int) * 2 * SM);
    g->wq_head = calloc(P, sizeof(int));
    g->wq_tail = calloc(P, sizeof(int));
    g->fb_pos = calloc(P, sizeof(int));
    g->left = calloc(P, sizeof(int));
    g->fb_left = calloc(P, sizeof(int));
    g->stale = malloc(sizeof(bool) * (size_t)P);
    g->w_next = calloc(P, sizeof(double));
    g->w_guess = calloc(P, sizeof(double));
    g->tw = (P + 63) / 64;
    g->tbits = calloc((size_t)g->tw, sizeof(uint64_t));
    g->frozen = calloc(P, sizeof(bool));
    g->in_fz = calloc(P, sizeof(bool));
    g->back = malloc(sizeof(int) * (size_t)P);
    g->ctot = calloc(P, sizeof(double));
    g->cap = malloc(sizeof(double) * (size_t)P);
    bool any_cap = false;
    for (int r = 0; g->cap && r < P; r++) {
        g->cap[r] = g->c->rank_limit ? fmin(o->mem_cap, zb_costs_limit(g->c, r)) : o->mem_cap;
        any_cap = any_cap || !isinf(g->cap[r]);
    }
    g->fbtot = calloc(P, sizeof(double));
    g->bank = !o->fb_order && any_cap;
    bool trees = zb_heap_init(&g->later, P) && zb_iheap_init(&g->fz, P) &&
                 zb_iheap_init(&g->tdue, P);
    if (g->bank && v > 1 && (g->ft = calloc(P, sizeof *g->ft)) != NULL)
        for (int r = 0; r < P && trees; r++)
            trees = zb_maxtree_init(&g->ft[r], M);
    if (g->bank && v == 1 && (g->mq = calloc(P, sizeof *g->mq)) != NULL)
        for (int r = 0; r < P && trees; r++)
            trees = zb_maxq_init(&g->mq[r], M);
    trees = trees && (!g->bank || g->ft || g->mq);
    g->s = zb_schedule_new(name, P, v, pl, M);
    if (g->s && zb_schedule_reserve(g->s, 3 * v * M) != ZB_OK) {
        zb_schedule_free(g->s);
        g->s = NULL;
    }
    if (!g->stage_rank || !g->stages || !g->end_f || !g->end_b || !g->next_f || !g->next_b ||
        !g->clock || !g->due || !g->mem || !g->need || !g->mbs || !g->fifo_head || !g->fifo_tail
        || !g->wfree || !g->wq || !g->wq_head || !g->wq_tail || !g->fb_pos || !g->left ||
        !g->fb_left || !g->stale || !g->w_next || !g->w_guess || !g->tbits || !g->frozen ||
        !g->in_fz || !g->back || !g->ctot || !g->fbtot || !g->cap || !trees || !g->s)
        return false;
    for (size_t i = 0; i < SM; i++)
        g->end_f[i] = g->end_b[i] = NAN;
    for (int s = 0; s < g->S; s++)
        g->stage_rank[s] = zb_stage_rank(g->s, s);
    for (int r = 0; r < P; r++) {
        for (int k = 0; k < v; k++)
            g->stages[r * v + k] = zb_rank_stage(P, pl, r, k);
        g->need[r] = zb_single_mb_peak(P, v, pl, c, r, false, o->b_pre);
        g->left[r] = 3 * v * M;
        g->fb_left[r] = 2 * v * M;
        g->stale[r] = true;
        zb_heap_push(&g->later, 0, r);
    }
    return true;
}

void zb_gs_free(greedy_t *g)
{
    free(g->stage_rank); free(g->stages); free(g->end_f); free(g->end_b); free(g->next_f);
    free(g->next_b); free(g->clock); free(g->due); free(g->mem); free(g->need);
    free(g->mbs);
    free(g->fifo_head); free(g->fifo_tail); free(g->wfree); free(g->wq); free(g->wq_head); free(g->wq_tail);
    free(g->fb_pos); free(g->left); free(g->fb_left);
    free(g->stale); free(g->w_next); free(g->w_guess); free(g->frozen);
    zb_heap_free(&g->later); free(g->tbits);
    zb_iheap_free(&g->fz); zb_iheap_free(&g->tdue); free(g->in_fz); free(g->back);
    for (int r = 0; r < g->P; r++) {
        if (g->ft)
            zb_maxtree_free(&g->ft[r]);
        if (g->mq)
            zb_maxq_free(&g->mq[r]);
    }
    free(g->ft); free(g->mq); free(g->ctot); free(g->fbtot); free(g->cap);
}

/* Rank r (frozen) comes back into T at the frozen clock, to be re-tried. */
static void unfreeze(greedy_t *g, int r)
{
    zb_iheap_remove(&g->fz, r);
    g->in_fz[r] = false;
    g->clock[r] = g->due[r] = g->fclock;
    g->stale[r] = true;
    g->back[g->nback++] = r;
}

/* Rank r joins T: its bit, and the heap of T's dues. */
static void join_due_now(greedy_t *g, int r)
{
    g->tbits[r / 64] |= UINT64_C(1) << (r % 64);
    g->nt++;
    zb_iheap_insert(&g->tdue, r, g->due[r]);
}

/* Put the ranks come back into T, in rank order. */
void zb_gs_flush_back(greedy_t *g)
{
    for (int j = 0; j < g->nback; j++)
        join_due_now(g, g->back[j]);
    g->nback = 0;
}

void zb_gs_unfreeze_all(greedy_t *g)
{
    while (g->fz.n > 0)
        unfreeze(g, zb_iheap_top_id(&g->fz));
    zb_gs_flush_back(g);
}

/* Refresh T for the current smallest due and return it (INFINITY when every rank is done). */
double zb_gs_refresh(greedy_t *g)
{
    double tmin = zb_heap_top(&g->later);
    if (g->fz.n > 0)
        tmin = tmin2(tmin, g->fclock);
    tmin = tmin2(tmin, zb_iheap_top(&g->tdue));
    const double thr = tmin + EPS;
    while (g->later.n > 0 && zb_heap_top(&g->later) <= thr) /* joins T, in rank order */
        join_due_now(g, zb_heap_pop(&g->later));
    return tmin;
}

/* Rank r of T placed an action: it leaves T, into the heap unless it is done. */
void zb_gs_leave(greedy_t *g, int r)
{
    g->tbits[r / 64] &= ~(UINT64_C(1) << (r % 64));
    g->nt--;
    zb_iheap_remove(&g->tdue, r);
    const bool alone = g->nt == 0 && g->fz.n == 0 && g->nback == 0;
    if (alone && g->due[r] <= zb_heap_top(&g->later))
        join_due_now(g, r); /* alone and still the earliest: it would come straight back */
    else if (alone && !isinf(g->due[r]))
        join_due_now(g, zb_heap_replace_top(&g->later, g->due[r], r)); /* the earliest */
    else if (!isinf(g->due[r]))
        zb_heap_push(&g->later, g->due[r], r);
}

/* Rank q must be re-tried. */
static void mark_stale(greedy_t *g, int q)
{
    g->stale[q] = true;
    if (g->in_fz[q])
        unfreeze(g, q);
}

/* Rank r's state or clock changed: r and the ranks next to its stages must be re-tried. */
void zb_gs_touch(greedy_t *g, int r)
{
    mark_stale(g, r);
    for (int k = 0; k < g->v; k++) {
        int st = g->stages[r * g->v + k];
        if (st > 0)
            mark_stale(g, g->stage_rank[st - 1]);
        if (st + 1 < g->S)
            mark_stale(g, g->stage_rank[st + 1]);
    }
}

void zb_gs_idle_move(greedy_t *g, double to)
{
    /* T stays T (`to` is at most every other due). A rank whose wait is frozen (try_act)
     * and lasts past `to` would wait again with the same answer: it stays fresh, and sits
     * with the frozen ranks. Every other one is re-tried, and so are the frozen ranks whose
     * wait ends by `to`. The neighbours need no touch here: those outside T are stale
     * anyway (a rank becomes fresh only by waiting in T, and leaves T only by placing an
     * action), and a frozen wait does not depend on a neighbour's clock. */
    g->fclock = to;
    while (zb_iheap_top(&g->fz) <= to + EPS)
        unfreeze(g, zb_iheap_top_id(&g->fz));
    for (int w = 0; w < g->tw; w++) {
        for (uint64_t bits = g->tbits[w]; bits; bits &= bits - 1) {
            const int r = 64 * w + lowest_bit(bits);
            zb_iheap_remove(&g->tdue, r);
            g->clock[r] = g->due[r] = to;
            if (!g->stale[r] && g->frozen[r] && g->w_next[r] > to + EPS) {
                g->in_fz[r] = true;
                zb_iheap_insert(&g->fz, r, g->w_next[r]);
                g->tbits[w] &= ~(UINT64_C(1) << (r % 64));
                g->nt--;
            } else {
                g->stale[r] = true;
                zb_iheap_insert(&g->tdue, r, to);
            }
        }
    }
    zb_gs_flush_back(g);
}
