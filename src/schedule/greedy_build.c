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
#include "schedule/greedy_state.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/auto_trees.h"
#include "schedule/sched_index.h"

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
    if (g->o->b_gap)
        e += g->o->b_gap[st]; /* a folded offload: the stash goes out and comes back first */
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
    if (type != ZB_ACT_F && g->o->b_gap) /* the F is done: its copies bound the B too */
        lb = fmax(lb, g->end_f[at(g, st, m)] + g->o->b_gap[st]);
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
    zb_gs_touch(g, r);
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

/* Try the ranks of T in rank order until one acts (returns 1, its rank in *acted_rank; < 0 on
 * error). A rank whose inputs did not change since it last had to wait is not tried again
 * (unless force): its last answer adds to the times of the next event (next) and of the
 * lookahead's guess (guess), as a try that waits does. */
static int try_due(greedy_t *g, bool force, double *next, double *guess, int *acted_rank)
{
    for (int w = 0; w < g->tw; w++) {
        for (uint64_t bits = g->tbits[w]; bits; bits &= bits - 1) {
            const int r = 64 * w + lowest_bit(bits);
            if (!force && !g->stale[r]) { /* nothing it depends on changed */
                *next = tmin2(*next, g->w_next[r]);
                *guess = tmin2(*guess, g->w_guess[r]);
                continue;
            }
            double rn = INFINITY, rg = INFINITY;
            bool fz;
            int rc = try_act(g, r, force, &rn, &rg, &fz);
            *next = tmin2(*next, rn);
            *guess = tmin2(*guess, rg);
            if (rc == 0 && !force) {
                g->stale[r] = false;
                g->w_next[r] = rn;
                g->w_guess[r] = rg;
                g->frozen[r] = fz;
            }
            if (rc != 0) {
                *acted_rank = r;
                return rc;
            }
        }
    }
    return 0;
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
    zb_status_t st = ZB_OK;
    if (!zb_gs_init(&g, name, P, v, pl, M, c, o)) {
        st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
        goto done;
    }
    if (o->fb_order && (o->fb_order->ranks != P || o->fb_order->microbatches != M ||
                        o->fb_order->stages != g.S)) {
        st = zb_err_set(err, ZB_EINVAL, "%s: fixed order has a different shape", name);
        goto done;
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
            zb_gs_unfreeze_all(&g); /* a forced pass tries every rank of T */
        /* T: the ranks with due <= tmin + EPS, in rank order */
        if (isinf(zb_gs_refresh(&g)))
            break; /* all placed */
        const double others = zb_heap_top(&g.later); /* the earliest of the other ranks */
        /* the frozen ranks add their w_next; their w_guess is never below it */
        double next = zb_iheap_top(&g.fz), guess = INFINITY;
        int acted = 0, r_acted = -1;
        for (int pass = 0; pass < 2 && !acted; pass++) {
            bool force = pass == 1 || idle >= guess_waits;
            if (force && g.fz.n > 0)
                zb_gs_unfreeze_all(&g);
            acted = try_due(&g, force, &next, &guess, &r_acted);
            if (acted < 0) {
                st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
                goto done;
            }
            if (acted)
                break;
            next = tmin2(next, others);
            if (isfinite(next) || (isfinite(guess) && !force))
                break; /* wait for the next event (or guess) */
        }
        if (acted) {
            zb_gs_leave(&g, r_acted);
            zb_gs_flush_back(&g); /* the frozen ranks next to it */
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
        zb_gs_idle_move(&g, to);
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
    zb_gs_free(&g);
    return st;
}
