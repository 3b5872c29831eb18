/* Greedy list scheduler in the spirit of the zero-bubble paper's heuristic.
 *
 * Every rank keeps a simulated clock. The rank with the smallest clock acts next: it runs a ready
 * B (critical path), else a ready F that memory allows, else a pending W (gap filling); if none is
 * possible it waits until the next event.
 *
 * Memory deadlocks (a rank full of F's of microbatches that can never reach their B) are ruled
 * out with a banker's check. On each rank the microbatches that entered it and have not done
 * their last B there ("active") form a FIFO. A state is safe if, freeing every pending W of
 * finished microbatches, the oldest active one can still grow to its full footprint on the rank,
 * then (once it finishes and its W's free what it holds) the next one can, and so on. The
 * globally oldest unfinished microbatch is first in every rank's FIFO, so in a safe state it can
 * always advance; an F (or a B that allocates) is allowed only if the state after it is safe.
 *
 * Cost: O(log P) per placed action for finding the ranks to try (a heap of clocks, and frozen
 * waits set apart), O(1) (one chunk) or O(log M) per banker's check (auto_trees.h); see
 * docs/auto.md, "Cost per placed action". */
#include "schedule/auto_greedy.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/auto_trees.h"
#include "schedule/sched_index.h"

#define EPS 1e-9

zb_greedy_opts_t zb_greedy_defaults(void)
{
    zb_greedy_opts_t o;
    memset(&o, 0, sizeof o);
    o.w_mode = ZB_WMODE_FILL;
    o.w_tight = 1.0;
    o.lookahead = true;
    o.f_deep_first = true;
    o.mem_cap = INFINITY;
    return o;
}

zb_status_t zb_unit_costs(zb_costs_t *c, int stages, zb_err_t *err)
{
    return zb_costs_init_uniform(c, stages, 1, 1, 1, 0, 1, 0, -1, err);
}

/* k-th stage held by rank r, ascending in k (a microbatch meets them in this order going
 * forward). */
static int rank_stage(int P, zb_placement_t pl, int r, int k)
{
    if (pl == ZB_PLACE_V)
        return k == 0 ? r : 2 * P - 1 - r;
    return r + k * P;
}

static void rank_stages(int P, int v, zb_placement_t pl, int r, int *out)
{
    for (int k = 0; k < v; k++)
        out[k] = rank_stage(P, pl, r, k);
}

/* Peak of one microbatch alone on rank r: F's ascending, then B's descending, each followed by
 * its W when with_w. */
static double single_mb_peak(int P, int v, zb_placement_t pl, const zb_costs_t *c, int r,
                             bool with_w, const double *b_pre)
{
    double cur = 0, peak = 0;
    for (int k = 0; k < v; k++) {
        cur += c->m_f[rank_stage(P, pl, r, k)];
        peak = fmax(peak, cur);
    }
    for (int k = v - 1; k >= 0; k--) {
        int st = rank_stage(P, pl, r, k);
        if (b_pre)
            peak = fmax(peak, cur + b_pre[st]);
        cur += c->m_b[st];
        peak = fmax(peak, cur);
        if (with_w) {
            cur += c->m_w[st];
            peak = fmax(peak, cur);
        }
    }
    return peak;
}

double zb_min_memory_needed(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *costs)
{
    if (!costs || ranks < 1 || chunks < 1 || costs->stages != ranks * chunks ||
        (pl == ZB_PLACE_V && chunks != 2))
        return NAN; /* sizes that do not match the cost model */
    double y = 0;
    for (int r = 0; r < ranks; r++)
        y = fmax(y, single_mb_peak(ranks, chunks, pl, costs, r, true, NULL));
    return y;
}

double zb_schedule_peak_memory(const zb_schedule_t *s, const zb_costs_t *c, double *peaks)
{
    double best = -INFINITY;
    for (int r = 0; r < s->ranks; r++) {
        double cur = 0, peak = 0;
        const zb_rank_program_t *p = &s->rank[r];
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            if (a->stage < 0 || a->stage >= c->stages)
                continue;
            cur += zb_sched_mem_delta(c, a->type, a->flags, a->stage);
            if (cur > peak)
                peak = cur;
        }
        if (peaks)
            peaks[r] = peak;
        if (peak > best)
            best = peak;
    }
    return best;
}

bool zb_fits_limits(const zb_schedule_t *s, const zb_costs_t *c, double cap, double *peak)
{
    double *peaks = malloc(sizeof(double) * (size_t)s->ranks);
    if (!peaks)
        return false;
    *peak = zb_schedule_peak_memory(s, c, peaks);
    bool fits = true;
    for (int r = 0; r < s->ranks && fits; r++) {
        double lim = c->rank_limit ? fmin(cap, zb_costs_limit(c, r)) : cap;
        fits = peaks[r] <= lim + 1e-9 * fmax(1.0, fabs(lim));
    }
    free(peaks);
    return fits;
}

zb_status_t zb_min_memory_schedule(const char *name, int P, int v, zb_placement_t pl, int M,
                                   zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    zb_schedule_t *s = zb_schedule_new(name, P, v, pl, M);
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "%s: bad sizes P=%d v=%d M=%d", name, P, v, M);
    int S = v * P;
    for (int m = 0; m < M; m++) {
        for (int st = 0; st < S; st++)
            if (zb_schedule_push(s, zb_stage_rank(s, st), (zb_action_t){ZB_ACT_F, st, m, 0}))
                goto oom;
        for (int st = S - 1; st >= 0; st--) {
            int r = zb_stage_rank(s, st);
            if (zb_schedule_push(s, r, (zb_action_t){ZB_ACT_B, st, m, 0}) ||
                zb_schedule_push(s, r, (zb_action_t){ZB_ACT_W, st, m, 0}))
                goto oom;
        }
    }
    *out = s;
    return ZB_OK;
oom:
    zb_schedule_free(s);
    return zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
}

/* ---- the greedy ---- */

/* A microbatch on a rank, for the banker's check. */
typedef struct {
    double contrib; /* memory it holds there (all deltas applied) */
    double fbsum;   /* sum of its F and B deltas applied there */
    double pendw;   /* memory its pending W's there will free */
    bool active;    /* entered the rank, last B there not done */
} mb_state_t;

typedef struct {
    int P, v, S, M;
    zb_placement_t pl;
    const zb_costs_t *c;
    const zb_greedy_opts_t *o;
    int *stage_rank;    /* [S] */
    int *stages;        /* [P*v] stages of rank r at r*v + k, ascending */
    double *end_f;      /* [M*S] at m*S + st (see at()), NAN until done */
    double *end_b;      /* [M*S] */
    int *next_f;        /* [S] next microbatch to run F at stage s (microbatch order) */
    int *next_b;        /* [S] */
    double *clock;      /* [P] */
    double *due;        /* [P] clock of a rank with actions left, INFINITY once it is done (the
                           key of T and of the heap below; a frozen rank's is not kept up) */
    double *mem;        /* [P] running memory */
    double *cap;        /* [P] memory cap: opts' mem_cap, tighter where the costs limit a rank */
    double *need;       /* [P] footprint of one microbatch on the rank (F's and B's) */
    mb_state_t *mbs;    /* [M*P] at m*P + r: what a microbatch holds on a rank (one record: read
                           together; a microbatch's ranks side by side, as in at()) */
    int *fifo_head, *fifo_tail; /* [P] microbatches that left / entered the rank: the active
                                   ones are a FIFO (they enter and leave in microbatch order) */
    double *wfree;      /* [P] memory pending W's of inactive microbatches will free */
    int *wq;            /* [2*P*(v*M)] pending W's per rank, FIFO of (stage, mb) pairs */
    int *wq_head, *wq_tail;
    int *fb_pos;        /* [P] position in opts->fb_order (fixed-order mode) */
    int *left;          /* [P] compute actions still to place */
    int *fb_left;       /* [P] F and B actions still to place */
    /* A rank that could not act keeps that answer (and the times it reported) until something
     * it depends on changes: its own state or clock, or a neighbour's (the ranks holding the
     * stages next to its own). Saves re-trying every waiting rank after each placement. */
    bool *stale;        /* [P] must be re-tried */
    double *w_next, *w_guess; /* [P] what its last failed try reported */
    bool *frozen;       /* [P] and whether that wait is frozen (see try_act) */
    /* The ranks due now (due <= the smallest due + EPS, "T") without a walk over all ranks:
     * T as a bit set over the ranks (walked in rank order), every other rank with actions left
     * in a heap by due. A
     * rank leaves T when it places an action (into the heap) and comes back from the heap when
     * the smallest due reaches it: O(log P) per action. */
    zb_heap_t later;
    uint64_t *tbits;    /* [tw] bit r set: rank r is in T */
    int tw, nt;         /* words of tbits, ranks in T */
    zb_iheap_t tdue;    /* T's ranks by due, for T's smallest due without a walk over T */
    /* Ranks of T whose wait is frozen (try_act) and lasts past the last idle move sit apart,
     * in a heap by the time their wait ends (w_next), so a step does not walk over them: they
     * would be skipped (fresh) and add only w_next to the next event. They all have the clock
     * of the last idle move (fclock; read through clock_of). A rank comes back into T when
     * `to` reaches its w_next, when an action is placed next to it, or when every rank of T
     * must be tried (forced passes). Back-comers wait in `back` until the step is over. */
    zb_iheap_t fz;
    bool *in_fz;        /* [P] */
    double fclock;
    int *back;          /* [P] */
    int nback;
    /* The banker's check without a walk over the FIFO (only with a finite cap and no fixed
     * order): per rank the values, for each active microbatch k, need - fbsum[k] - (contrib of
     * the active microbatches older than k). With several chunks a max tree over microbatch
     * positions (the others hold -INFINITY), updated on each F/B/W of an active microbatch (a
     * suffix add). With one chunk an active microbatch changes only when it leaves (its one
     * B), always the oldest, which adds its contrib to all the others: a max queue. */
    bool bank;
    zb_maxtree_t *ft;   /* [P] v > 1 */
    zb_maxq_t *mq;      /* [P] v == 1 */
    double *ctot;       /* [P] contrib summed over the rank's active microbatches */
    double *fbtot;      /* [P] fbsum summed over them */
    zb_schedule_t *s;
} greedy_t;

/* Index of the lowest set bit of a non-zero word. */
static inline int lowest_bit(uint64_t x) { return __builtin_ctzll(x); }

/* The smaller of two times (never NaN here): fmin without the NaN rules, so it inlines. */
static inline double tmin2(double a, double b) { return b < a ? b : a; }

/* Clock of rank r as the other ranks see it (a frozen rank's moves are not written). */
static inline double clock_of(const greedy_t *g, int r)
{
    return g->in_fz[r] ? g->fclock : g->clock[r];
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
static void flush_back(greedy_t *g)
{
    for (int j = 0; j < g->nback; j++)
        join_due_now(g, g->back[j]);
    g->nback = 0;
}

static void unfreeze_all(greedy_t *g)
{
    while (g->fz.n > 0)
        unfreeze(g, zb_iheap_top_id(&g->fz));
    flush_back(g);
}

/* Refresh T for the current smallest due and return it (INFINITY when every rank is done). */
static double refresh_due_now(greedy_t *g)
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
static void leave_due_now(greedy_t *g, int r)
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
static inline void mark_stale(greedy_t *g, int q)
{
    g->stale[q] = true;
    if (g->in_fz[q])
        unfreeze(g, q);
}

/* Rank r's state or clock changed: r and the ranks next to its stages must be re-tried. */
static void touch(greedy_t *g, int r)
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

/* Index of (stage, microbatch) in end_f/end_b: a microbatch's stages side by side, since it
 * meets them one after another (with the stage's microbatches side by side instead, every rank
 * read and wrote its own distant row: a cache and TLB miss per action with many ranks). */
static inline size_t at(const greedy_t *g, int st, int m) { return (size_t)m * g->S + st; }

/* Time at which F(st, m) can start on its rank, NAN if its predecessor is not placed yet. */
static double ready_f(const greedy_t *g, int st, int m)
{
    if (st == 0)
        return 0;
    double e = g->end_f[at(g, st - 1, m)];
    if (isnan(e))
        return NAN;
    return g->stage_rank[st - 1] == g->stage_rank[st] ? e : e + g->c->comm[st - 1];
}

static double ready_b(const greedy_t *g, int st, int m)
{
    double e = g->end_f[at(g, st, m)];
    if (isnan(e))
        return NAN;
    if (st == g->S - 1)
        return e;
    double eb = g->end_b[at(g, st + 1, m)];
    if (isnan(eb))
        return NAN;
    if (g->stage_rank[st + 1] != g->stage_rank[st])
        eb += g->c->comm[st + 1];
    return eb > e ? eb : e;
}

/* A lower bound on when F/B (type, st, m) can be ready, for the lookahead: the unplaced
 * predecessor cannot start before its rank's clock. */
static double ready_lb(const greedy_t *g, int type, int st, int m)
{
    double t = type == ZB_ACT_F ? ready_f(g, st, m) : ready_b(g, st, m);
    if (!isnan(t))
        return t;
    int ps;
    if (type == ZB_ACT_F)
        ps = st - 1;
    else if (isnan(g->end_f[at(g, st, m)]))
        return clock_of(g, g->stage_rank[st]) + g->c->t_f[st];
    else
        ps = st + 1;
    int pr = g->stage_rank[ps];
    double lb = clock_of(g, pr) + zb_sched_duration(g->c, type, ps);
    if (pr != g->stage_rank[st])
        lb += g->c->comm[ps];
    return lb;
}

static bool is_first_stage(const greedy_t *g, int r, int st) { return g->stages[r * g->v] == st; }

/* Banker's check: is rank r safe after microbatch m applies delta d of an F/B (admitting it
 * first if it is not active)? Walking the FIFO oldest first, with base = mem + d - wfree minus
 * what the older ones hold, every microbatch k must be able to grow by what it still needs
 * (need - fbsum[k], less d for m itself): base + that <= cap. The tree holds each active k's
 * need - fbsum[k] minus the older ones' contrib, so the walk is two range maxima: the older
 * ones unchanged, m and the younger ones shifted by -d (m's own growth, or m's contrib for the
 * younger ones). A microbatch being admitted joins at the back with nothing applied yet. */
static bool safe_after(const greedy_t *g, int r, int m, double d)
{
    double cap = g->cap[r];
    if (isinf(cap))
        return true;
    const int M = g->M;
    double base = g->mem[r] + d - g->wfree[r];
    if (g->mq) { /* one chunk: an active m is the oldest (its B is the only other F/B) */
        double all = zb_maxq_max(&g->mq[r]);
        if (g->mbs[(size_t)m * g->P + r].active)
            return base - d + all <= cap + EPS;
        return base + all <= cap + EPS && base - g->ctot[r] + g->need[r] - d <= cap + EPS;
    }
    zb_maxtree_t *t = &g->ft[r];
    if (g->mbs[(size_t)m * g->P + r].active)
        return base + zb_maxtree_max(t, 0, m) <= cap + EPS &&
               base - d + zb_maxtree_max(t, m, M) <= cap + EPS;
    return base + zb_maxtree_max(t, 0, M) <= cap + EPS &&
           base - g->ctot[r] + g->need[r] - d <= cap + EPS;
}

/* May rank r run F(st, m) now as far as memory and the in-flight cap go? */
static bool f_allowed(const greedy_t *g, int r, int st, int m)
{
    double cap = g->cap[r];
    if (g->o->fb_order)
        return g->mem[r] + g->c->m_f[st] <= cap + EPS;
    if (is_first_stage(g, r, st) && g->o->max_inflight > 0) {
        double k = fmax(1.0, floor(g->o->max_inflight - g->o->inflight_slope * r + EPS));
        if (g->fifo_tail[r] - g->fifo_head[r] >= k)
            return false;
    }
    /* fits now (else pending W's must run first) and leaves a safe state */
    return g->mem[r] + g->c->m_f[st] <= cap + EPS && safe_after(g, r, m, g->c->m_f[st]);
}

/* Memory after admitting a microbatch / running an F, counted as the banker's worst case (for
 * the TIGHT W mode). */
static double committed_after(const greedy_t *g, int r, int st, int m)
{
    (void)st;
    int n = g->fifo_tail[r] - g->fifo_head[r] + (g->mbs[(size_t)m * g->P + r].active ? 0 : 1);
    return g->mem[r] + n * g->need[r] - g->fbtot[r];
}

typedef struct {
    int type, st, m;
    double ready; /* NAN = unknown */
} cand_t;

/* The F/B candidates of rank r: in free mode the next F and next B of each of its stages, in
 * fixed-order mode only the next F/B of the given order. Returns the count. */
static int candidates(const greedy_t *g, int r, cand_t *out)
{
    int n = 0;
    if (g->o->fb_order) {
        const zb_rank_program_t *p = &g->o->fb_order->rank[r];
        int i = g->fb_pos[r];
        while (i < p->len && p->actions[i].type != ZB_ACT_F && p->actions[i].type != ZB_ACT_B &&
               p->actions[i].type != ZB_ACT_BW)
            i++;
        g->fb_pos[r] = i;
        if (i < p->len) {
            const zb_action_t *a = &p->actions[i];
            out[n].type = a->type == ZB_ACT_BW ? ZB_ACT_B : a->type;
            out[n].st = a->stage;
            out[n].m = a->mb;
            out[n].ready = out[n].type == ZB_ACT_F ? ready_f(g, a->stage, a->mb)
                                                   : ready_b(g, a->stage, a->mb);
            n++;
        }
        return n;
    }
    for (int k = 0; k < g->v; k++) {
        int st = g->stages[r * g->v + k];
        if (g->next_b[st] < g->M && g->next_b[st] < g->next_f[st]) {
            int m = g->next_b[st];
            out[n++] = (cand_t){ZB_ACT_B, st, m, ready_b(g, st, m)};
        }
        if (g->next_f[st] < g->M) {
            int m = g->next_f[st];
            out[n++] = (cand_t){ZB_ACT_F, st, m, ready_f(g, st, m)};
        }
    }
    return n;
}

static zb_status_t place(greedy_t *g, int r, int type, int st, int m)
{
    double t = g->clock[r];
    double e = t + zb_sched_duration(g->c, type, st);
    double dm = zb_sched_mem_delta(g->c, type, 0, st);
    if (type == ZB_ACT_F) {
        g->end_f[at(g, st, m)] = e;
        g->next_f[st] = m + 1;
        if (!g->o->fb_order && is_first_stage(g, r, st)) {
            g->mbs[(size_t)m * g->P + r].active = true;
            g->fifo_tail[r]++;
        }
    } else if (type == ZB_ACT_B) {
        g->end_b[at(g, st, m)] = e;
        g->next_b[st] = m + 1;
        int idx = r * g->v * g->M + (g->wq_tail[r]++);
        g->wq[2 * idx] = st;
        g->wq[2 * idx + 1] = m;
    }
    if (!g->o->fb_order) {
        const size_t i = (size_t)m * g->P + r;
        const bool first = is_first_stage(g, r, st);
        const bool admit = type == ZB_ACT_F && first, leave = type == ZB_ACT_B && first;
        const bool was_active = g->mbs[i].active && !admit;
        const double c0 = g->mbs[i].contrib, f0 = g->mbs[i].fbsum;
        double freed = fmax(0.0, -g->c->m_w[st]);
        g->mbs[i].contrib += dm;
        if (type == ZB_ACT_W) {
            g->mbs[i].pendw -= freed;
            if (!g->mbs[i].active)
                g->wfree[r] -= freed;
        } else {
            g->mbs[i].fbsum += dm;
        }
        if (type == ZB_ACT_B) {
            g->mbs[i].pendw += freed;
            if (is_first_stage(g, r, st)) {
                /* last B of the microbatch on this rank: it leaves the FIFO (always the oldest,
                   since B's of a stage run in microbatch order) */
                g->mbs[i].active = false;
                g->fifo_head[r]++;
                g->wfree[r] += g->mbs[i].pendw;
            }
        }
        /* the banker's running sums and tree (see greedy_t) */
        zb_maxtree_t *ft = g->ft ? &g->ft[r] : NULL;
        zb_maxq_t *mq = g->mq ? &g->mq[r] : NULL;
        if (admit) { /* joins at the back: nothing older is applied */
            double a = g->need[r] - g->mbs[i].fbsum - g->ctot[r];
            if (ft)
                zb_maxtree_assign(ft, m, a);
            if (mq)
                zb_maxq_push(mq, m, a);
            g->ctot[r] += g->mbs[i].contrib;
            g->fbtot[r] += g->mbs[i].fbsum;
        } else if (leave) { /* the younger ones no longer wait behind what it held */
            if (ft) {
                zb_maxtree_assign(ft, m, -INFINITY);
                zb_maxtree_add(ft, m + 1, g->M, c0);
            }
            if (mq) {
                zb_maxq_pop(mq, m);
                zb_maxq_add_all(mq, c0);
            }
            g->ctot[r] -= c0;
            g->fbtot[r] -= f0;
        } else if (was_active && dm != 0) {
            /* (v > 1 only) it holds dm more: the younger ones see dm less; an F/B also
               shrinks what it still needs by dm, a W does not */
            if (ft)
                zb_maxtree_add(ft, type == ZB_ACT_W ? m + 1 : m, g->M, -dm);
            g->ctot[r] += dm;
            if (type != ZB_ACT_W)
                g->fbtot[r] += dm;
        }
    }
    g->mem[r] += dm;
    g->clock[r] = e;
    touch(g, r);
    g->left[r]--;
    g->due[r] = g->left[r] > 0 ? e : INFINITY;
    if (type != ZB_ACT_W)
        g->fb_left[r]--;
    if (g->o->fb_order && type != ZB_ACT_W)
        g->fb_pos[r]++;
    int act = type;
    if (g->o->fb_order && type == ZB_ACT_B) {
        /* keep BW entries of the given order split: B now, W placed by the greedy */
        act = ZB_ACT_B;
    }
    if (zb_schedule_push(g->s, r, (zb_action_t){(uint8_t)act, st, m, 0}))
        return ZB_ENOMEM;
    return ZB_OK;
}

/* Try to act on rank r at its clock. Returns 1 if an action was placed, 0 if the rank must wait,
 * <0 on error. When it waits, *next_ev gets the earliest time one of its F/B candidates becomes
 * ready (a fixed, known time) and *next_guess the lookahead's estimate of when an unplaced
 * predecessor could finish (it moves with the other ranks' clocks, so waiting on it alone can
 * go on forever). With force_w the lookahead and the cool-down reserve are ignored (used to
 * break a global wait). *frozen (set when it waits) says whether the wait holds at any later
 * clock before *next_ev whatever the other ranks' clocks do, as long as no action is placed
 * next to it: the wait did not read a clock (no W to run, W does not fit, W held back), or the
 * lookahead's bound came from a known ready time (other ranks' clocks only raise the rest). */
static int try_act(greedy_t *g, int r, bool force_w, double *next_ev, double *next_guess,
                   bool *frozen)
{
    *frozen = true;
    cand_t cand[2 * ZB_GREEDY_MAX_CHUNKS];
    int n = candidates(g, r, cand);
    double t = g->clock[r];
    int best_b = -1, best_f = -1;
    bool f_blocked = false;
    for (int i = 0; i < n; i++) {
        if (isnan(cand[i].ready) || cand[i].ready > t + EPS) {
            if (!isnan(cand[i].ready) && cand[i].ready < *next_ev)
                *next_ev = cand[i].ready;
            continue;
        }
        if (cand[i].type == ZB_ACT_B) {
            double db = g->c->m_b[cand[i].st];
            double pre = g->o->b_pre ? g->o->b_pre[cand[i].st] : 0; /* a folded R's moment */
            double hi = fmax(db, pre);
            bool fits = g->o->fb_order
                            ? g->mem[r] + hi <= g->cap[r] + EPS
                            : hi <= 0 || (g->mem[r] + hi <= g->cap[r] + EPS &&
                                          safe_after(g, r, cand[i].m, db) &&
                                          (pre <= 0 || safe_after(g, r, cand[i].m, pre)));
            if (!fits) {
                f_blocked = true;
                continue;
            }
            if (best_b < 0 || cand[i].m < cand[best_b].m ||
                (cand[i].m == cand[best_b].m && cand[i].st > cand[best_b].st))
                best_b = i;
        } else {
            if (!f_allowed(g, r, cand[i].st, cand[i].m)) {
                f_blocked = true;
                continue;
            }
            if (best_f < 0)
                best_f = i;
            else if (g->o->f_deep_first ? cand[i].st > cand[best_f].st
                                        : cand[i].m < cand[best_f].m)
                best_f = i;
        }
    }
    bool have_w = g->wq_head[r] < g->wq_tail[r];
    const int *w_item = have_w ? &g->wq[2 * (r * g->v * g->M + g->wq_head[r])] : NULL;
    int w_st = have_w ? w_item[0] : 0, w_m = have_w ? w_item[1] : 0;
    bool w_fits = have_w && g->mem[r] + g->c->m_w[w_st] <= g->cap[r] + EPS;

    bool f_wins = best_f >= 0 && best_b >= 0 &&
                  (g->o->oldest_first ? cand[best_f].m < cand[best_b].m : g->o->f_over_b);
    if (best_b >= 0 && !f_wins)
        return place(g, r, ZB_ACT_B, cand[best_b].st, cand[best_b].m) ? -1 : 1;
    if (w_fits && g->o->w_mode == ZB_WMODE_EAGER) {
        g->wq_head[r]++;
        return place(g, r, ZB_ACT_W, w_st, w_m) ? -1 : 1;
    }
    if (best_f >= 0) {
        bool prefer_w = false;
        if (w_fits && g->o->w_mode == ZB_WMODE_TIGHT && isfinite(g->cap[r])) {
            double after = g->o->fb_order
                               ? g->mem[r] + g->c->m_f[cand[best_f].st]
                               : committed_after(g, r, cand[best_f].st, cand[best_f].m);
            prefer_w = after > g->o->w_tight * g->cap[r] + EPS;
        }
        if (!prefer_w)
            return place(g, r, ZB_ACT_F, cand[best_f].st, cand[best_f].m) ? -1 : 1;
    }
    if (!w_fits)
        return 0;
    double keep = g->o->w_keep + g->o->w_keep_slope * r;
    if (!force_w && !f_blocked && keep > 0 && g->wq_tail[r] - g->wq_head[r] <= keep + EPS &&
        g->fb_left[r] > 0)
        return 0; /* hold these W's back for the cool-down */
    /* Gap filling (or memory relief when an F is blocked): a W, unless the lookahead says an
     * F/B could become ready before it ends. */
    if (g->o->lookahead && !force_w && !f_blocked && best_f < 0) {
        double known = INFINITY, guessed = INFINITY; /* ready times, and bounds from clocks */
        for (int i = 0; i < n; i++) {
            double x = ready_lb(g, cand[i].type, cand[i].st, cand[i].m);
            if (isnan(cand[i].ready))
                guessed = tmin2(guessed, x);
            else
                known = tmin2(known, x);
        }
        double lb = tmin2(known, guessed);
        if (t + g->c->t_w[w_st] > lb + EPS) {
            if (lb > t + EPS && lb < *next_guess)
                *next_guess = lb;
            *frozen = known <= guessed;
            return 0;
        }
    }
    g->wq_head[r]++;
    return place(g, r, ZB_ACT_W, w_st, w_m) ? -1 : 1;
}

static void greedy_free(greedy_t *g)
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

zb_status_t zb_greedy_build(const char *name, int P, int v, zb_placement_t pl, int M,
                            const zb_costs_t *c, const zb_greedy_opts_t *o, zb_schedule_t **out,
                            double *makespan, zb_err_t *err)
{
    *out = NULL;
    if (P < 1 || v < 1 || v > ZB_GREEDY_MAX_CHUNKS || M < 1 || (pl == ZB_PLACE_V && v != 2))
        return zb_err_set(err, ZB_EINVAL,
                          "%s: unsupported sizes P=%d v=%d M=%d (v at most %d chunks per rank)",
                          name, P, v, M, ZB_GREEDY_MAX_CHUNKS);
    if (!c || c->stages != v * P)
        return zb_err_set(err, ZB_EINVAL, "%s: cost model has %d stages, need v*P = %d", name,
                          c ? c->stages : 0, v * P);
    greedy_t g;
    memset(&g, 0, sizeof g);
    g.P = P; g.v = v; g.S = v * P; g.M = M; g.pl = pl; g.c = c; g.o = o;
    size_t SM = (size_t)g.S * M;
    g.stage_rank = malloc(sizeof(int) * g.S);
    g.stages = malloc(sizeof(int) * g.S);
    g.end_f = malloc(sizeof(double) * SM);
    g.end_b = malloc(sizeof(double) * SM);
    g.next_f = calloc(g.S, sizeof(int));
    g.next_b = calloc(g.S, sizeof(int));
    g.clock = calloc(P, sizeof(double));
    g.due = calloc(P, sizeof(double));
    g.mem = calloc(P, sizeof(double));
    g.need = calloc(P, sizeof(double));
    g.mbs = calloc((size_t)P * M, sizeof *g.mbs);
    g.fifo_head = calloc(P, sizeof(int));
    g.fifo_tail = calloc(P, sizeof(int));
    g.wfree = calloc(P, sizeof(double));
    g.wq = malloc(sizeof(int) * 2 * SM);
    g.wq_head = calloc(P, sizeof(int));
    g.wq_tail = calloc(P, sizeof(int));
    g.fb_pos = calloc(P, sizeof(int));
    g.left = calloc(P, sizeof(int));
    g.fb_left = calloc(P, sizeof(int));
    g.stale = malloc(sizeof(bool) * (size_t)P);
    g.w_next = calloc(P, sizeof(double));
    g.w_guess = calloc(P, sizeof(double));
    g.tw = (P + 63) / 64;
    g.tbits = calloc((size_t)g.tw, sizeof(uint64_t));
    g.frozen = calloc(P, sizeof(bool));
    g.in_fz = calloc(P, sizeof(bool));
    g.back = malloc(sizeof(int) * (size_t)P);
    g.ctot = calloc(P, sizeof(double));
    g.cap = malloc(sizeof(double) * (size_t)P);
    bool any_cap = false;
    for (int r = 0; g.cap && r < P; r++) {
        g.cap[r] = g.c->rank_limit ? fmin(o->mem_cap, zb_costs_limit(g.c, r)) : o->mem_cap;
        any_cap = any_cap || !isinf(g.cap[r]);
    }
    g.fbtot = calloc(P, sizeof(double));
    g.bank = !o->fb_order && any_cap;
    bool trees = zb_heap_init(&g.later, P) && zb_iheap_init(&g.fz, P) &&
                 zb_iheap_init(&g.tdue, P);
    if (g.bank && v > 1 && (g.ft = calloc(P, sizeof *g.ft)) != NULL)
        for (int r = 0; r < P && trees; r++)
            trees = zb_maxtree_init(&g.ft[r], M);
    if (g.bank && v == 1 && (g.mq = calloc(P, sizeof *g.mq)) != NULL)
        for (int r = 0; r < P && trees; r++)
            trees = zb_maxq_init(&g.mq[r], M);
    trees = trees && (!g.bank || g.ft || g.mq);
    g.s = zb_schedule_new(name, P, v, pl, M);
    if (g.s && zb_schedule_reserve(g.s, 3 * v * M) != ZB_OK) {
        zb_schedule_free(g.s);
        g.s = NULL;
    }
    zb_status_t st = ZB_OK;
    if (!g.stage_rank || !g.stages || !g.end_f || !g.end_b || !g.next_f || !g.next_b ||
        !g.clock || !g.due || !g.mem || !g.need || !g.mbs ||
        !g.fifo_head || !g.fifo_tail || !g.wfree || !g.wq ||
        !g.wq_head || !g.wq_tail || !g.fb_pos || !g.left || !g.fb_left || !g.stale || !g.w_next || !g.w_guess || !g.tbits || !g.frozen || !g.in_fz || !g.back || !g.ctot || !g.fbtot || !g.cap || !trees || !g.s) {
        st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
        goto done;
    }
    if (o->fb_order && (o->fb_order->ranks != P || o->fb_order->microbatches != M ||
                        o->fb_order->stages != g.S)) {
        st = zb_err_set(err, ZB_EINVAL, "%s: fixed order has a different shape", name);
        goto done;
    }
    for (size_t i = 0; i < SM; i++)
        g.end_f[i] = g.end_b[i] = NAN;
    for (int s = 0; s < g.S; s++)
        g.stage_rank[s] = zb_stage_rank(g.s, s);
    for (int r = 0; r < P; r++) {
        rank_stages(P, v, pl, r, &g.stages[r * v]);
        g.need[r] = single_mb_peak(P, v, pl, c, r, false, o->b_pre);
        g.left[r] = 3 * v * M;
        g.fb_left[r] = 2 * v * M;
        g.stale[r] = true;
        zb_heap_push(&g.later, 0, r);
    }
    /* Each step places an action or moves the waiting ranks' clocks to the next event. Bounded:
     * a wait on a known event (a candidate's ready time, a rank further ahead) happens at most
     * once per such event between two placements; a wait on lookahead guesses alone is allowed
     * for at most `guess_waits` steps in a row, then the ranks act without the lookahead; if
     * even that places nothing and no known event is left, the setting is stuck and fails. */
    const int guess_waits = 4 * P + 16;
    int idle = 0;
    for (;;) {
        if (idle >= guess_waits && g.fz.n > 0)
            unfreeze_all(&g); /* a forced pass tries every rank of T */
        /* T: the ranks with due <= tmin + EPS, in rank order */
        if (isinf(refresh_due_now(&g)))
            break; /* all placed */
        const double others = zb_heap_top(&g.later); /* the earliest of the other ranks */
        /* the frozen ranks add their w_next; their w_guess is never below it */
        double next = zb_iheap_top(&g.fz), guess = INFINITY;
        int acted = 0, r_acted = -1;
        for (int pass = 0; pass < 2 && !acted; pass++) {
            bool force = pass == 1 || idle >= guess_waits;
            if (force && g.fz.n > 0)
                unfreeze_all(&g);
            for (int w = 0; w < g.tw && !acted; w++)
            for (uint64_t bits = g.tbits[w]; bits && !acted; bits &= bits - 1) {
                const int r = 64 * w + lowest_bit(bits);
                if (!force && !g.stale[r]) { /* nothing it depends on changed */
                    next = tmin2(next, g.w_next[r]);
                    guess = tmin2(guess, g.w_guess[r]);
                    continue;
                }
                double rn = INFINITY, rg = INFINITY;
                bool fz;
                int rc = try_act(&g, r, force, &rn, &rg, &fz);
                next = tmin2(next, rn);
                guess = tmin2(guess, rg);
                if (rc == 0 && !force) {
                    g.stale[r] = false;
                    g.w_next[r] = rn;
                    g.w_guess[r] = rg;
                    g.frozen[r] = fz;
                }
                if (rc < 0) {
                    st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
                    goto done;
                }
                acted = rc;
                r_acted = r;
            }
            if (acted)
                break;
            next = tmin2(next, others);
            if (isfinite(next) || (isfinite(guess) && !force))
                break; /* wait for the next event (or guess) */
        }
        if (acted) {
            leave_due_now(&g, r_acted);
            flush_back(&g); /* the frozen ranks next to it */
            idle = 0;
            continue;
        }
        double to = idle < guess_waits ? tmin2(next, guess) : next;
        if (!isfinite(to)) {
            st = zb_err_set(err, ZB_EMEMLIMIT,
                            "%s: memory cap %g blocks every rank (no schedule of this kind fits)",
                            name, o->mem_cap);
            goto done;
        }
        idle++;
        /* T stays T (`to` is at most every other due). A rank whose wait is frozen (try_act)
         * and lasts past `to` would wait again with the same answer: it stays fresh, and sits
         * with the frozen ranks. Every other one is re-tried, and so are the frozen ranks whose
         * wait ends by `to`. The neighbours need no touch here: those outside T are stale
         * anyway (a rank becomes fresh only by waiting in T, and leaves T only by placing an
         * action), and a frozen wait does not depend on a neighbour's clock. */
        g.fclock = to;
        while (zb_iheap_top(&g.fz) <= to + EPS)
            unfreeze(&g, zb_iheap_top_id(&g.fz));
        for (int w = 0; w < g.tw; w++)
        for (uint64_t bits = g.tbits[w]; bits; bits &= bits - 1) {
            const int r = 64 * w + lowest_bit(bits);
            zb_iheap_remove(&g.tdue, r);
            g.clock[r] = g.due[r] = to;
            if (!g.stale[r] && g.frozen[r] && g.w_next[r] > to + EPS) {
                g.in_fz[r] = true;
                zb_iheap_insert(&g.fz, r, g.w_next[r]);
                g.tbits[w] &= ~(UINT64_C(1) << (r % 64));
                g.nt--;
            } else {
                g.stale[r] = true;
                zb_iheap_insert(&g.tdue, r, to);
            }
        }
        flush_back(&g);
    }
    if (makespan) {
        double mk = 0;
        for (int r = 0; r < P; r++)
            mk = fmax(mk, g.clock[r]);
        *makespan = mk;
    }
    *out = g.s;
    g.s = NULL;
done:
    zb_schedule_free(g.s);
    greedy_free(&g);
    return st;
}
